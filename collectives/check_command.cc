// `cclab check`: proves schedules with the symbolic checker from the command
// line, e.g. `cclab check --coll allreduce --algo all --ranks 1-64 --count 1000`.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/checker.h"
#include "cclab/collectives/cli.h"
#include "cclab/collectives/error.h"

namespace cclab::coll {
namespace {

struct CheckArgs {
  std::string coll = "allreduce";
  std::string algos = "all";
  std::string ranks = "8";
  std::int64_t count = 1009;
  std::string chunks = "1";  // a comma list, as cclab sim and cclab bench take
  int group_size = 0;
  std::vector<int> upper_groups;  // hier all-reduce's levels above the groups (4x4)
  bool rotate_levels = false;     // hier all-reduce: a part of the vector per level
  std::string inner = "ring";
  int root = 0;
  // About a minute, and the 6 GB that direct's 8.4 M steps at 2048 ranks take.
  std::int64_t max_steps = 10'000'000;
};

// "8" or "1-64": digits only, 1 <= LO <= HI.
std::pair<int, int> parse_range(const std::string& s) {
  const auto number = [](const std::string& t) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoi(t);
  };
  const auto dash = s.find('-');
  const int lo = number(s.substr(0, dash));
  const int hi = dash == std::string::npos ? lo : number(s.substr(dash + 1));
  if (lo >= 1 && hi >= lo) return {lo, hi};
  throw InvalidArgument(fmt::format("--ranks: '{}' is not N or LO-HI with 1 <= LO <= HI", s));
}

// Every flag checked before the first schedule is built, named as typed.
void validate(const CheckArgs& a, int lo) {
  if (a.count < 0)
    throw InvalidArgument(fmt::format("--count: must be at least 0 (got {})", a.count));
  if (a.max_steps < 0)
    throw InvalidArgument(
        fmt::format("--max-steps: must be at least 0, 0 for no limit (got {})", a.max_steps));
  if (a.group_size < 0)
    throw InvalidArgument(
        fmt::format("--group-size: must be at least 0, 0 for the default (got {})", a.group_size));
  const bool has = has_levels(parse_collective(a.coll, "--coll"));
  if (a.rotate_levels && !has)
    throw InvalidArgument(fmt::format(
        "--rotate-levels: hier's only (allreduce, reducescatter, allgather), not --coll {}",
        a.coll));
  if (!a.upper_groups.empty() && !has)
    throw InvalidArgument(fmt::format(
        "--group-size: levels ({}) are hier's only (allreduce, reducescatter, allgather), not "
        "--coll {} (allowed: one group size)",
        group_levels_name(a.group_size, a.upper_groups), a.coll));
  if (a.root < 0 || a.root >= lo)
    throw InvalidArgument(fmt::format(
        "--root: {} is not a rank of every count in --ranks (allowed: 0 to {})", a.root, lo - 1));
}

// Checks one schedule both ways; the number that failed or were stopped by
// --max-steps (neither is a proof).
int check_both_ways(const CheckArgs& a, const CollectiveShape& shape, AlgoConfig cfg) {
  int failures = 0;
  for (bool in_place : {false, true}) {
    cfg.disjoint_output = !in_place;
    const auto sched = make_schedule(shape, cfg);
    const auto t0 = std::chrono::steady_clock::now();
    const CheckResult r =
        check_schedule(*sched, {in_place, static_cast<std::uint64_t>(a.max_steps)});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{:<28} ranks {:>5} count {:>10} {:<12} {} ({} steps, {} transfers, {:.1f} ms)\n",
               sched->name(), shape.ranks, a.count, in_place ? "in-place" : "out-of-place",
               r.ok        ? "ok"
               : r.stopped ? "STOPPED"
                           : "FAILED",
               r.steps, r.transfers, ms);
    if (!r.ok) {
      fmt::print("  {}{}\n", r.error,
                 r.stopped
                     ? fmt::format(" (--max-steps {}; raise it, or 0 for no limit)", a.max_steps)
                     : "");
      ++failures;
    }
    std::fflush(stdout);  // each result as it comes, through a pipe too
  }
  return failures;
}

// The row's name: hier with the inner algorithm when that is not the ring.
std::string label(Algorithm algo, Algorithm inner) {
  if (algo != Algorithm::kHierarchical || inner == Algorithm::kRing)
    return std::string(algorithm_name(algo));
  return fmt::format("hier/{}", algorithm_name(inner));
}

// Why (algo, inner) is not checked at n ranks, or "" when it is: a group size
// that does not divide n, or (reduce-scatter's and all-gather's hier, which
// make_schedule refuses there) hd between groups that are not a power of two.
std::string skip_reason(const CheckArgs& a, CollectiveKind kind, Algorithm algo, Algorithm inner,
                        int n) {
  if (uses_groups(algo) && a.group_size > 0 && n % a.group_size != 0)
    return fmt::format("--group-size {} does not divide {}", a.group_size, n);
  if (algo == Algorithm::kHierarchical && !a.upper_groups.empty()) {
    const std::int64_t span = group_levels_span(a.group_size, a.upper_groups);
    if (n % span != 0)
      return fmt::format("the top groups of --group-size {} ({} ranks) do not divide {}",
                         group_levels_name(a.group_size, a.upper_groups), span, n);
  }
  const bool levels = !a.upper_groups.empty() || a.rotate_levels;
  if (algo == Algorithm::kHierarchical && levels &&
      !hier_inner_refusal(kind, n, a.group_size, inner, levels).empty())
    return "hd between the top groups of levels (allowed: ring)";
  if (algo == Algorithm::kHierarchical && !hier_inner_refusal(kind, n, a.group_size, inner).empty())
    return fmt::format("hd between {} groups, not a power of two",
                       n / group_size_or_default(n, a.group_size));
  return "";
}

// The (algo, inner) pairs to check: hier's with each inner, the others once.
std::vector<std::pair<Algorithm, Algorithm>> pairs_to_check(const CheckArgs& a,
                                                            CollectiveKind kind) {
  std::vector<std::pair<Algorithm, Algorithm>> out;
  const auto inners = parse_inner_list(a.inner, "--inner", kind);
  for (Algorithm algo : parse_algorithm_list(a.algos, kind, "--algo")) {
    if (algo != Algorithm::kHierarchical) {
      out.emplace_back(algo, inners.front());
      continue;
    }
    for (Algorithm inner : inners) out.emplace_back(algo, inner);
  }
  return out;
}

// Refuses, before any output, a run in which every schedule would be skipped.
void require_something_to_check(const CheckArgs& a, CollectiveKind kind,
                                const std::vector<std::pair<Algorithm, Algorithm>>& pairs, int lo,
                                int hi) {
  std::string why;
  for (const auto& [algo, inner] : pairs)
    for (int n = lo; n <= hi; ++n) {
      why = skip_reason(a, kind, algo, inner, n);
      if (why.empty()) return;
    }
  bool divides_one = false;
  for (int n = lo; n <= hi && a.group_size > 0; ++n) divides_one |= n % a.group_size == 0;
  if (a.group_size > 0 && !divides_one)
    throw InvalidArgument(
        fmt::format("--group-size: {} divides no rank count in --ranks {}", a.group_size, a.ranks));
  throw InvalidArgument(fmt::format("--ranks: {} leaves nothing to check ({})", a.ranks, why));
}

int run_check(const CheckArgs& a) {
  const CollectiveKind kind = parse_collective(a.coll, "--coll");
  const auto [lo, hi] = parse_range(a.ranks);
  validate(a, lo);
  const auto count = static_cast<std::uint64_t>(a.count);
  const auto chunk_counts = parse_chunk_list(a.chunks, "--chunks");
  const auto pairs = pairs_to_check(a, kind);
  require_something_to_check(a, kind, pairs, lo, hi);
  int failures = 0;
  for (const auto& [algo, inner] : pairs)
    for (int n = lo; n <= hi; ++n) {
      if (const std::string why = skip_reason(a, kind, algo, inner, n); !why.empty()) {
        fmt::print("{:<28} ranks {:>5} skipped: {}\n", label(algo, inner), n, why);
        continue;
      }
      for (int chunks : chunk_counts) {
        AlgoConfig config{algo, chunks, a.group_size, inner};
        if (algo == Algorithm::kHierarchical) {
          config.upper_groups = a.upper_groups;
          config.rotate_levels = a.rotate_levels;
        }
        failures += check_both_ways(a, {kind, n, count, a.root}, config);
      }
    }
  return failures == 0 ? 0 : 1;
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Prove schedules correct with the symbolic checker");
  cmd->add_option("--coll", args->coll, "allreduce, reducescatter, allgather, broadcast");
  cmd->add_option("--algo", args->algos, "comma-separated algorithms or 'all'");
  cmd->add_option("--ranks", args->ranks, "rank count N or range LO-HI");
  cmd->add_option("--count", args->count, "elements per rank (see cclab bench for the meaning)");
  cmd->add_option("--chunks", args->chunks, "pipeline chunks; a comma list checks each (1,3)");
  cmd->add_option_function<std::string>(
      "--group-size",
      [args](const std::string& text) {
        auto levels = parse_group_levels(text, "--group-size");
        args->group_size = levels.group_size;
        args->upper_groups = std::move(levels.upper);
      },
      "hierarchical group size (0: default); hier takes levels, e.g. 4x4");
  cmd->add_flag("--rotate-levels", args->rotate_levels,
                "hier: a part of the vector (of each block) per level, each starting from its own");
  cmd->add_option(
      "--inner", args->inner,
      "hier's inner algorithm (ring, tree, hd, direct, biring); a comma list (or all) checks each");
  cmd->add_option("--root", args->root, "broadcast root");
  cmd->add_option("--max-steps", args->max_steps,
                  "stop a check after this many steps, unproved (default 10000000; 0: no limit)");
  cmd->callback([args] {
    const int rc = run_check(*args);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace cclab::coll
