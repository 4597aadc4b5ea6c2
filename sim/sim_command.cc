// `cclab sim`: an nccl-tests style sweep, predicted instead of measured, e.g.
//   cclab sim --topology switch:n=8,bw=100Gbps,lat=1us --ranks 8 --algo all -b 1K -e 1G -f 4
// Sizes follow `cclab bench`: from -b to -e multiplying by -f, rounded down to
// whole f32 elements (and, for reduce-scatter and all-gather, whose size is the
// whole input or output, to a multiple of the ranks); algbw = bytes / time,
// busbw = algbw * nccl-tests' bus factor for the collective. The op is f32
// sum; each row adds the most utilised link.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/selector.h"
#include "cclab/sim/cli.h"
#include "cclab/sim/link_use.h"
#include "cclab/sim/routing.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/trace.h"

namespace cclab::sim {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;

struct SimFlags {
  std::string topology;
  std::string coll = "allreduce";
  int root = 0;   // broadcast
  int ranks = 0;  // 0: every endpoint (--ranks not given)
  std::string algos = "all";
  std::string min_bytes = "1K", max_bytes = "64M";
  int step_factor = 4;
  std::string chunks = "1";  // a comma list: each algorithm runs with each
  int group_size = 0;        // 0: the topology's hint when it divides --ranks, else the default
  std::vector<int> upper_groups;  // hier all-reduce's levels above the groups (--group-size 4x4)
  bool rotate_levels = false;  // hier all-reduce: a part of the vector per level, each its own way
  std::string inner = "ring";  // hier all-reduce: between groups; a comma list runs each
  std::string json_path, trace_path, tune_path;
  std::optional<std::string> trace_ranks, trace_window;  // filters of --trace
  std::optional<int> links;  // --links: the busiest links listed under each row, after the tiers
  // Not a flag: the topology's routes give the ranks' rings the reverse
  // ring's links to themselves (reverse_rings_disjoint; broadcast's: the ring
  // of all ranks), so auto's built-in rule prefers biring
  // (AlgoConfig::prefer_biring).
  bool prefer_biring = false;
  // Not a flag: broadcast's rail rings cross between the groups on links of
  // their own (rails_disjoint), so auto's rule runs its chain on them
  // (AlgoConfig::prefer_rails).
  bool prefer_rails = false;
};

// One row of the sweep: an algorithm with its chunks (and hier's inner
// algorithm), or `auto` (kAuto), which the selector resolves per size.
struct Candidate {
  Algorithm algo = Algorithm::kRing;
  int chunks = 1;
  Algorithm inner = Algorithm::kRing;
};

struct Row {
  std::uint64_t bytes = 0, count = 0;
  Candidate candidate;
  coll::Selection chosen;  // the configuration simulated, and for `auto` why
  std::string name;
  SimResult result;

  std::string label() const {  // the algo column: `auto`, or what ran
    return candidate.algo == Algorithm::kAuto ? "auto" : chosen_label();
  }
  std::string chosen_label() const { return coll::candidate_label(chosen.config); }
};

constexpr std::size_t kElem = 4;  // f32
constexpr const char* kColumns = "{:>11} {:>12} {:>5} {:>6} {:>11} {:>11} {:>12} {:>12}  {}";

// "64M" -> 67108864: bytes with an optional K, M or G suffix (powers of 2), as in `cclab bench`.
std::uint64_t parse_size(const std::string& text, const char* flag) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  int shift = 0;
  if (digits + 1 == text.size()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    shift = s == 'K' ? 10 : s == 'M' ? 20 : s == 'G' ? 30 : -1;
  }
  if (digits == 0 || digits > 15 || shift < 0 || digits + 1 < text.size())
    throw InvalidArgument(fmt::format(
        "{}: malformed size '{}' (allowed: bytes with an optional K, M or G suffix, e.g. 64K)",
        flag, text));
  return std::stoull(text.substr(0, digits)) << shift;
}

// --inner: what hier runs between groups (all-reduce: the flat all-reduces;
// reduce-scatter and all-gather: ring, hd, biring).
std::vector<Algorithm> inners_of(const SimFlags& f) {
  return coll::parse_inner_list(f.inner, "--inner", coll::parse_collective(f.coll, "--coll"));
}

// Every algorithm with every chunk count, hier with every inner algorithm
// too; `auto` once (it chooses its chunks).
std::vector<Candidate> make_candidates(const SimFlags& f) {
  const auto chunks = coll::parse_chunk_list(f.chunks, "--chunks");
  const auto inners = inners_of(f);
  std::vector<Candidate> out;
  for (Algorithm a :
       coll::parse_algorithm_list(f.algos, coll::parse_collective(f.coll, "--coll"), "--algo")) {
    if (a == Algorithm::kAuto) {
      out.push_back({a, 1});
      continue;
    }
    for (Algorithm inner : inners) {
      for (int c : chunks) out.push_back({a, c, inner});
      if (a != Algorithm::kHierarchical) break;  // the others have no inner algorithm
    }
  }
  return out;
}

// The op column: all-gather and broadcast reduce nothing (nccl-tests: none).
const char* redop_name(std::string_view coll) {
  return coll == "allgather" || coll == "broadcast" ? "none" : "sum";
}

int group_size_for(const SimFlags& f, const Topology& t, int ranks) {
  if (f.group_size > 0) return f.group_size;  // make_schedule checks that it divides
  const int hint = t.group_size_hint;
  return hint > 0 && ranks % hint == 0 ? hint : 0;
}

void print_header(const SimFlags& f, const Topology& t, int ranks, int group,
                  const std::vector<std::string>& skipped) {
  const bool broadcast = f.coll == "broadcast";
  fmt::print(
      "# cclab sim: topology {}, ranks {}, endpoints {}, links {}, coll {}{}, dtype f32, op {}, "
      "chunks {}\n",
      t.description, ranks, t.num_endpoints(), t.num_links(), f.coll,
      broadcast ? fmt::format(" (root {})", f.root) : "", redop_name(f.coll), f.chunks);
  const int g = group > 0 ? group : coll::default_group_size(ranks);
  if (f.upper_groups.empty() && !f.rotate_levels)
    fmt::print("# group size {} (hier, rings), hier inner {}\n", g, coll::join_names(inners_of(f)));
  else
    fmt::print("# group levels {}{} (hier; rings: groups of {}), hier inner {}\n",
               coll::group_levels_name(g, f.upper_groups), f.rotate_levels ? ", rotated" : "", g,
               coll::join_names(inners_of(f)));
  if (f.prefer_biring)
    fmt::print(
        "# rings have the reverse ring's links to themselves: auto's built-in rule prefers "
        "biring\n");
  if (f.prefer_rails && !f.prefer_biring)
    fmt::print(
        "# the rails of groups of {} cross between them on links of their own: auto's built-in "
        "rule runs broadcast's chain on them (rings)\n",
        group);
  for (const std::string& line : skipped) fmt::print("# {}\n", line);
  fmt::print("#\n#");
  fmt::print(kColumns, "size(B)", "count", "type", "redop", "algo", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "bottleneck");
  fmt::print("\n");
}

// 6291456 -> "6.0 MiB".
std::string bytes_text(double bytes) {
  if (bytes < 1 << 20) return fmt::format("{:.1f} KiB", bytes / (1 << 10));
  if (bytes < 1 << 30) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  return fmt::format("{:.1f} GiB", bytes / (1 << 30));
}

// --links: a line per tier of links, then the `busiest` busiest links.
void print_link_use(const Topology& t, const SimResult& s, int busiest) {
  for (const LinkTier& tier : link_tiers(t, s))
    fmt::print("#   tier {}: {} links, {} used, {}, use {:.0f}% mean, {:.0f}% max{}\n", tier.name,
               tier.links, tier.used, bytes_text(tier.bytes), 100 * tier.mean_utilisation,
               100 * tier.max_utilisation,
               tier.busiest < 0 ? "" : fmt::format(" ({})", t.link_name(tier.busiest)));
  for (LinkId l : busiest_links(t, s, static_cast<std::size_t>(busiest)))
    fmt::print("#   link {}: {:.0f}% busy, {}\n", t.link_name(l), 100 * link_utilisation(t, s, l),
               bytes_text(s.link_bytes[l]));
}

nlohmann::json link_use_json(const Topology& t, const SimResult& s, int busiest) {
  nlohmann::json tiers = nlohmann::json::array(), links = nlohmann::json::array();
  for (const LinkTier& tier : link_tiers(t, s))
    tiers.push_back({{"tier", tier.name},
                     {"links", tier.links},
                     {"used", tier.used},
                     {"bytes", tier.bytes},
                     {"mean_utilisation", tier.mean_utilisation},
                     {"max_utilisation", tier.max_utilisation},
                     {"busiest", tier.busiest < 0 ? "none" : t.link_name(tier.busiest)}});
  for (LinkId l : busiest_links(t, s, static_cast<std::size_t>(busiest)))
    links.push_back({{"link", t.link_name(l)},
                     {"bytes", s.link_bytes[l]},
                     {"utilisation", link_utilisation(t, s, l)}});
  return {{"tiers", std::move(tiers)}, {"busiest", std::move(links)}};
}

void print_row(const Topology& t, const Row& r, CollectiveKind kind, int ranks,
               std::optional<int> links) {
  const double us = time_to_us(r.result.total);
  const double algbw = us > 0 ? static_cast<double>(r.bytes) / us * 1e-3 : 0;  // GB/s
  const double busbw = algbw * coll::bus_factor(kind, ranks);
  // The busier of the busiest link and the busiest host.
  const SimResult& s = r.result;
  const std::string neck =
      s.busiest_host >= 0 && s.host_utilisation > s.bottleneck_utilisation
          ? fmt::format("host r{} ({:.0f}%)", s.busiest_host, 100 * s.host_utilisation)
      : s.bottleneck < 0
          ? "none"
          : fmt::format("{} ({:.0f}%)", t.link_name(s.bottleneck), 100 * s.bottleneck_utilisation);
  fmt::print(" ");
  fmt::print(kColumns, r.bytes, r.count, "f32", redop_name(coll::collective_name(kind)), r.label(),
             fmt::format("{:.2f}", us), fmt::format("{:.2f}", algbw), fmt::format("{:.2f}", busbw),
             neck);
  fmt::print("\n");
  if (r.candidate.algo == Algorithm::kAuto)
    fmt::print("#   auto: {} ({})\n", r.chosen_label(), r.chosen.reason);
  if (links) print_link_use(t, r.result, *links);
  std::fflush(stdout);  // a row as it comes, through a pipe too (a row can take minutes)
}

void write_json(const std::string& path, const SimFlags& f, const Topology& t, int ranks, int group,
                const std::vector<Row>& rows, const std::vector<std::string>& skipped) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const Row& r : rows) {
    out_rows.push_back(
        {{"size_bytes", r.bytes},
         {"count", r.count},
         {"type", "f32"},
         {"redop", redop_name(f.coll)},
         {"algo", coll::algorithm_name(r.candidate.algo)},
         {"chosen", r.chosen_label()},
         {"chunks", r.chosen.config.chunks},
         {"inner", r.chosen.config.algo == Algorithm::kHierarchical
                       ? nlohmann::json(coll::algorithm_name(r.chosen.config.inner))
                       : nlohmann::json(nullptr)},
         {"reason", r.chosen.reason},
         {"schedule", r.name},
         {"time_us", time_to_us(r.result.total)},
         {"bottleneck", r.result.bottleneck < 0 ? "none" : t.link_name(r.result.bottleneck)},
         {"bottleneck_utilisation", r.result.bottleneck_utilisation},
         {"busiest_host", r.result.busiest_host},
         {"host_utilisation", r.result.host_utilisation},
         {"events", r.result.events},
         {"flows", r.result.flows}});
    if (f.links) out_rows.back()["link_use"] = link_use_json(t, r.result, *f.links);
  }
  const nlohmann::json config = {
      {"topology", t.description},
      {"coll", f.coll},
      {"root", f.root},
      {"ranks", ranks},
      {"algos", f.algos},
      {"min_bytes", f.min_bytes},
      {"max_bytes", f.max_bytes},
      {"step_factor", f.step_factor},
      {"chunks", coll::parse_chunk_list(f.chunks, "--chunks")},
      {"hier_group_size", group > 0 ? group : coll::default_group_size(ranks)},
      {"hier_upper_groups", f.upper_groups},  // levels above the groups (--group-size 4x4)
      {"hier_rotate_levels", f.rotate_levels},
      {"hier_inner", coll::join_names(inners_of(f))},
      {"prefer_biring", f.prefer_biring},  // what auto's built-in rule was told
      {"prefer_rails", f.prefer_rails},
      {"skipped", skipped}};  // candidates --inner all left out, and why
  const nlohmann::json record = {
      {"tool", "cclab sim"}, {"config", config}, {"rows", std::move(out_rows)}};
  std::ofstream out(path);
  if (!out) throw IoError(fmt::format("--json: cannot open '{}' for writing", path));
  out << record.dump(2) << '\n';
  if (!out) throw IoError(fmt::format("--json: cannot write '{}'", path));
}

coll::CollectiveShape shape_of(const SimFlags& f, CollectiveKind kind, int ranks,
                               std::uint64_t bytes) {
  return {kind, ranks, coll::count_of_total(kind, ranks, bytes / kElem), f.root};
}

// hier's upper levels (--group-size 4x4, --rotate-levels) are its own:
// rings takes the first level's groups, and auto the levels where it
// chooses hier all-reduce.
coll::Selection choose(const coll::CollectiveShape& shape, const Candidate& c, int group,
                       const SimFlags& f) {
  const bool hier_group = coll::uses_groups(c.algo) || c.algo == Algorithm::kAuto;
  coll::AlgoConfig config{c.algo, c.chunks, hier_group ? group : 0, c.inner};
  if (c.algo == Algorithm::kHierarchical || c.algo == Algorithm::kAuto) {
    config.upper_groups = f.upper_groups;
    config.rotate_levels = f.rotate_levels;
  }
  config.prefer_biring = f.prefer_biring;
  config.prefer_rails = f.prefer_rails;
  return coll::select_algorithm(shape, kElem, config);
}

// Whether `auto` is among the rows.
bool runs_auto(const SimFlags& f) {
  const auto rows = make_candidates(f);
  return std::any_of(rows.begin(), rows.end(),
                     [](const Candidate& c) { return c.algo == Algorithm::kAuto; });
}

// The candidates that run at `ranks` in groups of `group`: with --inner all,
// hier with an inner algorithm its groups refuse (hd between groups that are
// not a power of two, for reduce-scatter and all-gather) is left out, and
// `skipped` says why. Every kept candidate's schedule is made once at the
// smallest size, so that a named one the groups refuse is an error before
// the header, not after it.
std::vector<Candidate> runnable_candidates(const SimFlags& f, int ranks, int group,
                                           std::uint64_t lo, std::vector<std::string>& skipped) {
  const CollectiveKind kind = coll::parse_collective(f.coll, "--coll");
  const coll::CollectiveShape shape = shape_of(f, kind, ranks, lo);
  const bool all = coll::names_all_inners(f.inner);
  std::vector<Candidate> out;
  for (const Candidate& c : make_candidates(f)) {
    if (all && c.algo == Algorithm::kHierarchical) {
      const bool levels = !f.upper_groups.empty() || f.rotate_levels;
      const auto why = coll::hier_inner_refusal(kind, ranks, group, c.inner, levels);
      if (!why.empty()) {
        skipped.push_back(
            fmt::format("{} skipped: {}", coll::candidate_label(c.algo, c.chunks, c.inner), why));
        continue;
      }
    }
    coll::make_schedule(shape, choose(shape, c, group, f).config, kElem);
    out.push_back(c);
  }
  return out;
}

// The sweep's rows: every candidate at every size, the last traced if asked.
std::vector<Row> sweep(const SimFlags& f, const std::vector<Candidate>& candidates,
                       const Topology& topo, int ranks, int group, std::uint64_t lo,
                       std::uint64_t hi, TraceWriter* trace) {
  const CollectiveKind kind = coll::parse_collective(f.coll, "--coll");
  std::vector<Row> rows;
  for (std::uint64_t bytes = lo;; bytes *= static_cast<std::uint64_t>(f.step_factor)) {
    const bool last_size = bytes > hi / static_cast<std::uint64_t>(f.step_factor);
    for (const Candidate& c : candidates) {
      const coll::CollectiveShape shape = shape_of(f, kind, ranks, bytes);
      const std::uint64_t total = std::max(shape.input_count(), shape.output_count());
      Row row{total * kElem, total, c, {}, {}, {}};
      row.chosen = choose(shape, c, group, f);
      const auto sched = coll::make_schedule(shape, row.chosen.config, kElem);
      row.name = sched->name();
      const bool traced = trace != nullptr && last_size && &c == &candidates.back();
      row.result = simulate(topo, *sched, {kElem, traced ? trace : nullptr});
      print_row(topo, row, kind, ranks, f.links);
      rows.push_back(std::move(row));
    }
    if (last_size) break;
  }
  return rows;
}

// --tune: the fastest candidate per size (auto rows aside) as a tuning table,
// written to f.tune_path and summarised below the sweep.
void write_tuning_table(const SimFlags& f, const Topology& topo, int ranks, int group,
                        const std::vector<Row>& rows) {
  std::vector<coll::TimedCandidate> times;
  for (const Row& r : rows)
    if (r.candidate.algo != Algorithm::kAuto)
      times.push_back({r.bytes, r.chosen.config.algo, r.chosen.config.chunks,
                       time_to_us(r.result.total), 0, 0, r.chosen.config.inner});
  coll::TuningTable table = coll::tuning_table_from_times(times);
  table.collective = coll::parse_collective(f.coll, "--coll");
  table.topology = topo.description;
  table.ranks = ranks;
  table.group_size = group > 0 ? group : coll::default_group_size(ranks);
  table.upper_groups = f.upper_groups;
  table.rotate_levels = f.rotate_levels;
  std::ofstream out(f.tune_path);
  out << coll::tuning_table_json(table);
  if (!out) throw IoError(fmt::format("--tune: cannot write '{}'", f.tune_path));
  fmt::print("#\n# tuning table for {} at {} ranks written to {} (use: CCLAB_TUNING={}):\n{}",
             f.coll, ranks, f.tune_path, f.tune_path, coll::describe_bands(table, "#   "));
}

// --group-size with levels (4x4) and --rotate-levels: hier's (has_levels).
void check_levels(const SimFlags& f, int ranks) {
  const std::string levels = coll::group_levels_name(f.group_size, f.upper_groups);
  const bool has = coll::has_levels(coll::parse_collective(f.coll, "--coll"));
  if (f.rotate_levels && !has)
    throw InvalidArgument(fmt::format(
        "--rotate-levels: hier's only (allreduce, reducescatter, allgather), not --coll {}",
        f.coll));
  if (f.upper_groups.empty()) return;
  if (!has)
    throw InvalidArgument(fmt::format(
        "--group-size: levels ({}) are hier's only (allreduce, reducescatter, allgather), not "
        "--coll {} (allowed: one group size)",
        levels, f.coll));
  const std::int64_t span = coll::group_levels_span(f.group_size, f.upper_groups);
  if (ranks % span != 0)
    throw InvalidArgument(
        fmt::format("--group-size: the top groups of {} ({} ranks each) do not divide the {} ranks",
                    levels, span, ranks));
}

void check_flags(const SimFlags& f, int ranks, std::uint64_t lo, std::uint64_t hi) {
  if (lo > hi)
    throw InvalidArgument(
        fmt::format("-b/--minbytes: {} is larger than -e/--maxbytes {}", f.min_bytes, f.max_bytes));
  if (lo < 1) throw InvalidArgument("-b/--minbytes: must be at least 1 byte");
  if (f.step_factor < 2) throw InvalidArgument("-f/--stepfactor: must be at least 2");
  if (f.links && *f.links < 0)
    throw InvalidArgument(fmt::format(
        "--links: {} is negative (allowed: 0 for the tiers alone, or how many links to list)",
        *f.links));
  const CollectiveKind kind = coll::parse_collective(f.coll, "--coll");
  if (f.root != 0 && kind != CollectiveKind::kBroadcast)
    throw InvalidArgument(fmt::format("--root: applies to broadcast only, not --coll {}", f.coll));
  if (f.root < 0 || f.root >= ranks)
    throw InvalidArgument(
        fmt::format("--root: {} is not a rank (allowed: 0 to {})", f.root, ranks - 1));
  const bool per_rank_blocks =
      kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllGather;
  if (per_rank_blocks && hi / kElem < static_cast<std::uint64_t>(ranks))
    throw InvalidArgument(
        fmt::format("-e/--maxbytes: {} holds fewer than one f32 per rank ({} ranks) for {}",
                    f.max_bytes, ranks, f.coll));
  if (f.group_size < 0 || (f.group_size > 0 && ranks % f.group_size != 0))
    throw InvalidArgument(fmt::format(
        "--group-size: {} does not divide the {} ranks (allowed: a divisor, or 0 for the default)",
        f.group_size, ranks));
  if (!f.upper_groups.empty() || f.rotate_levels) check_levels(f, ranks);
  const auto candidates = make_candidates(f);  // --algo, --chunks, --inner, before any output
  const bool only_auto = std::all_of(candidates.begin(), candidates.end(),
                                     [](const Candidate& c) { return c.algo == Algorithm::kAuto; });
  if (!f.tune_path.empty() && only_auto)
    throw InvalidArgument("--tune: no algorithm to choose from (--algo has only auto)");
  for (const auto& [path, flag] :
       {std::pair{&f.json_path, "--json"}, {&f.trace_path, "--trace"}, {&f.tune_path, "--tune"}})
    if (!path->empty()) require_writable(*path, flag);
}

// --trace-ranks and --trace-window, checked before the first row.
TraceFilter trace_filter(const SimFlags& f, int ranks) {
  TraceFilter filter;
  for (const auto& [text, flag] :
       {std::pair{&f.trace_ranks, "--trace-ranks"}, {&f.trace_window, "--trace-window"}}) {
    if (!*text) continue;
    if (f.trace_path.empty())
      throw InvalidArgument(fmt::format("{}: filters the trace; give --trace FILE too", flag));
    filter.description +=
        fmt::format("{}{} {}", filter.description.empty() ? "" : " ", flag, **text);
  }
  if (f.trace_ranks) filter.ranks = parse_rank_list(*f.trace_ranks, ranks, "--trace-ranks");
  if (f.trace_window) parse_time_window(*f.trace_window, "--trace-window", filter);
  return filter;
}

// --trace's file, written while the traced row runs; a regular file is
// removed unless finished (a half-written trace is not JSON), a device such
// as /dev/null never.
struct TraceFile {
  TraceFile(const std::string& path, const Topology& topo, TraceFilter filter)
      : path(path), out(path), writer(topo, out, std::move(filter)) {
    if (!out) throw IoError(fmt::format("--trace: cannot open '{}' for writing", path));
  }
  ~TraceFile() {
    if (finished) return;
    out.close();
    std::error_code ignored;
    if (std::filesystem::is_regular_file(path, ignored)) std::filesystem::remove(path, ignored);
  }
  void finish() {
    writer.finish();
    out.close();
    if (!out) throw IoError(fmt::format("--trace: cannot write '{}'", path));
    finished = true;
  }
  std::string path;
  std::ofstream out;
  TraceWriter writer;
  bool finished = false;
};

// The topology's levels for hier (a torus's dimensions, rotated) where no
// --group-size or --rotate-levels is given and they divide the ranks.
SimFlags with_topology_levels(const SimFlags& f, const Topology& t, int ranks) {
  SimFlags out = f;
  if (f.group_size != 0 || f.rotate_levels ||
      !coll::has_levels(coll::parse_collective(f.coll, "--coll")))
    return out;
  if (!t.rotate_levels_hint && t.upper_groups_hint.empty()) return out;
  const std::int64_t span = coll::group_levels_span(t.group_size_hint, t.upper_groups_hint);
  if (span < 1 || ranks % span != 0) return out;
  out.upper_groups = t.upper_groups_hint;
  out.rotate_levels = t.rotate_levels_hint;
  return out;
}

void run_sim(const SimFlags& given) {
  const Topology topo = make_topology(given.topology);
  const int ranks = given.ranks > 0 ? given.ranks : static_cast<int>(topo.num_endpoints());
  if (static_cast<std::size_t>(ranks) > topo.num_endpoints())
    throw InvalidArgument(fmt::format("--ranks: {} ranks but topology '{}' has {} endpoints", ranks,
                                      topo.description, topo.num_endpoints()));
  const std::uint64_t lo = parse_size(given.min_bytes, "-b/--minbytes");
  const std::uint64_t hi = parse_size(given.max_bytes, "-e/--maxbytes");
  check_flags(given, ranks, lo, hi);
  SimFlags f = with_topology_levels(given, topo, ranks);
  TraceFilter filter = trace_filter(f, ranks);
  const int group = group_size_for(f, topo, ranks);
  // Broadcast's chain goes round all the ranks in rank order, ignoring groups.
  const bool flat = f.coll == "broadcast";
  f.prefer_biring =
      runs_auto(f) && reverse_rings_disjoint(topo, ranks, flat ? 0 : group,
                                             flat ? std::vector<int>{} : f.upper_groups);
  f.prefer_rails = runs_auto(f) && flat && rails_disjoint(topo, ranks, group);
  std::vector<std::string> skipped;
  const auto candidates = runnable_candidates(f, ranks, group, lo, skipped);
  print_header(f, topo, ranks, group, skipped);
  std::optional<TraceFile> trace;
  if (!f.trace_path.empty()) trace.emplace(f.trace_path, topo, std::move(filter));
  const auto rows =
      sweep(f, candidates, topo, ranks, group, lo, hi, trace ? &trace->writer : nullptr);
  if (!f.json_path.empty()) write_json(f.json_path, f, topo, ranks, group, rows, skipped);
  if (trace) trace->finish();
  if (!f.tune_path.empty()) write_tuning_table(f, topo, ranks, group, rows);
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto flags = std::make_shared<SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Predict collective times on a topology with the network simulator");
  cmd->add_option("--topology", flags->topology,
                  "Generator spec (switch:n=8,bw=100Gbps,lat=1us; ring:n=..; torus2d:x=..,y=..; "
                  "torus3d:x=..,y=..,z=..; "
                  "fat-tree:hosts=..,leaves=..,spines=..,bw=..,uplink=..; "
                  "nodes:nodes=..,gpus=..,nvlink=..,nic=..,lat=..) or a JSON file")
      ->required();
  cmd->add_option_function<int>(
      "--ranks",
      [flags](int n) {
        if (n < 1) throw InvalidArgument(fmt::format("--ranks: must be at least 1 (got {})", n));
        flags->ranks = n;
      },
      "Ranks (default: one per endpoint)");
  cmd->add_option("--coll", flags->coll,
                  "allreduce (default), reducescatter, allgather or broadcast; sizes are the "
                  "whole buffer, as in cclab bench");
  cmd->add_option("--root", flags->root, "broadcast: the root rank (default 0)");
  cmd->add_option(
      "--algo", flags->algos,
      "Comma list of ring, tree, hd, hier, direct, rings, biring (those the collective has), auto "
      "(the selector's choice, CCLAB_TUNING / CCLAB_ALGO), or all");
  cmd->add_option("-b,--minbytes", flags->min_bytes, "Smallest size (K, M, G suffixes)");
  cmd->add_option("-e,--maxbytes", flags->max_bytes, "Largest size");
  cmd->add_option("-f,--stepfactor", flags->step_factor, "Size multiplier between rows");
  cmd->add_option("--chunks", flags->chunks,
                  "Pipeline chunks per transfer; a comma list runs each algorithm with each");
  cmd->add_option_function<std::string>(
      "--group-size",
      [flags](const std::string& text) {
        auto levels = coll::parse_group_levels(text, "--group-size");
        flags->group_size = levels.group_size;
        flags->upper_groups = std::move(levels.upper);
      },
      "hier, rings: ranks per group (default: the topology's, e.g. gpus per node); hier "
      "takes levels (not broadcast's), 4x4: groups of 4 ranks, then of 4 groups (a 3-D torus' "
      "x, y, z)");
  cmd->add_flag("--rotate-levels", flags->rotate_levels,
                "hier: a part of the vector (of each block) per level (the top one too), part w "
                "starting from level w, all at once: on a torus every dimension works in every "
                "phase");
  cmd->add_option("--inner", flags->inner,
                  "hier: the algorithm between groups, ring (default), tree, hd, direct or biring "
                  "(also inside them) "
                  "(reduce-scatter and all-gather: ring, hd with a power-of-two number of "
                  "groups, or biring, also inside them); a comma list (or all: each the "
                  "collective's hier runs) runs hier with "
                  "each, e.g. ring,hd with --tune");
  cmd->add_option("--json", flags->json_path, "Write the rows as JSON to this file");
  cmd->add_option("--trace", flags->trace_path,
                  "Write a Chrome/Perfetto trace of the last row (largest size, last algorithm)");
  cmd->add_option("--trace-ranks", flags->trace_ranks,
                  "--trace: only these ranks' steps and the links their messages cross, e.g. "
                  "0-7,64");
  cmd->add_option("--trace-window", flags->trace_window,
                  "--trace: only what overlaps FROM:UNTIL of simulated time, e.g. 10us:2ms (either "
                  "side may be left out)");
  cmd->add_option("--links", flags->links,
                  "Under each row, the link use per tier (links joining the same kinds of node "
                  "at the same bandwidth) and the N busiest links (0: the tiers alone)");
  cmd->add_option("--tune", flags->tune_path,
                  "Write a tuning table (the fastest algorithm and chunks per size) to this "
                  "file, for CCLAB_TUNING");
  cmd->callback([flags] { run_sim(*flags); });
}

}  // namespace cclab::sim
