#include "options.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

#include <fmt/format.h>

#include "backend.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"
#include "cclab/collectives/threads.h"
#include "peers.h"

namespace cclab::bench {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;

[[noreturn]] void invalid(std::string_view flag, const std::string& message) {
  throw InvalidArgument(fmt::format("{}: {}", flag, message));
}

int at_least(int value, int min, std::string_view flag) {
  if (value < min) invalid(flag, fmt::format("must be at least {} (got {})", min, value));
  return value;
}

std::string names_of(const std::vector<Algorithm>& algos) {
  std::string s;
  for (auto a : algos) s += fmt::format("{}{}", s.empty() ? "" : ", ", coll::algorithm_name(a));
  return s;
}

// Every algorithm name, applicable or not, to tell "unknown" from "does not apply".
bool is_algorithm_name(std::string_view name) {
  constexpr std::array kAll = {
      Algorithm::kAuto,         Algorithm::kRing,   Algorithm::kTree,  Algorithm::kHalvingDoubling,
      Algorithm::kHierarchical, Algorithm::kDirect, Algorithm::kRings, Algorithm::kBiRing};
  return std::any_of(kAll.begin(), kAll.end(),
                     [&](Algorithm a) { return coll::algorithm_name(a) == name; });
}

// Why `name` is not an algorithm of `kind` that a sweep can time.
std::string why_not_an_algo(std::string_view name, CollectiveKind kind) {
  if (is_algorithm_name(name))
    return fmt::format("'{}' does not apply to {}", name, coll::collective_name(kind));
  return fmt::format("unknown algorithm '{}'", name);
}

// `auto` is a row too: the selector's choice per size (selector.h).
Algorithm parse_one_algo(std::string_view name, CollectiveKind kind) {
  const auto allowed = coll::algorithms_for(kind);
  for (auto a : allowed)
    if (coll::algorithm_name(a) == name) return a;
  if (name == "auto") return Algorithm::kAuto;
  invalid("--algo", fmt::format("{} (allowed: {}, auto, or all; {})", why_not_an_algo(name, kind),
                                names_of(allowed), peer_names_for_help()));
}

// --group-size levels (2x2) and --rotate-levels: hier's (has_levels), the
// levels' top groups dividing the ranks.
void check_levels(const BenchConfig& c) {
  const std::string levels = coll::group_levels_name(c.group_size, c.upper_groups);
  if (c.rotate_levels && !coll::has_levels(c.coll))
    invalid("--rotate-levels",
            fmt::format("hier's only (allreduce, reducescatter, allgather), not --coll {}",
                        coll::collective_name(c.coll)));
  if (c.upper_groups.empty()) return;
  if (!coll::has_levels(c.coll))
    invalid("--group-size",
            fmt::format("levels ({}) are hier's only (allreduce, reducescatter, allgather), not "
                        "--coll {} (allowed: one group size)",
                        levels, coll::collective_name(c.coll)));
  const std::int64_t span = coll::group_levels_span(c.group_size, c.upper_groups);
  if (c.ranks % span != 0)
    invalid("--group-size", fmt::format("the top groups of {} ({} ranks each) do not divide "
                                        "--ranks {}",
                                        levels, span, c.ranks));
}

int parse_group_size(int group_size, int ranks) {
  at_least(group_size, 0, "--group-size");
  if (group_size == 0 || ranks % group_size == 0) return group_size;
  std::string divisors;
  for (int d = 1; d <= ranks; ++d)
    if (ranks % d == 0) divisors += fmt::format("{}{}", divisors.empty() ? "" : ", ", d);
  invalid("--group-size", fmt::format("{} does not divide --ranks {} (allowed: {}, or 0 for the "
                                      "default)",
                                      group_size, ranks, divisors));
}

void resolve_sizes(const BenchFlags& f, BenchConfig& c) {
  c.min_bytes = parse_size_bytes(f.min_bytes, "-b/--minbytes");
  c.max_bytes = parse_size_bytes(f.max_bytes, "-e/--maxbytes");
  if (c.min_bytes < 1) invalid("-b/--minbytes", "must be at least 1 byte");
  if (c.min_bytes > c.max_bytes)
    invalid("-b/--minbytes",
            fmt::format("{} is larger than -e/--maxbytes {}", f.min_bytes, f.max_bytes));
  c.step_factor = static_cast<std::uint64_t>(at_least(f.step_factor, 2, "-f/--stepfactor"));
}

// Lets the library reject what only it knows about (e.g. a group size its
// hierarchical algorithm cannot use) before any rank starts.
void preflight(const BenchConfig& c) {
  const auto shape = shape_for(c, static_cast<std::uint64_t>(c.ranks));
  for (const auto& config : c.ours()) {
    // gloo learns its groups (the hosts) at rendezvous; the sweep checks then.
    const bool groups_unknown = c.backend == "gloo" && config.group_size == 0;
    if (groups_unknown && config.algo == Algorithm::kHierarchical) continue;
    const std::string skip = hier_row_skip_reason(c, config, config.group_size);
    if (skip.empty())
      coll::make_schedule(shape, config, coll::dtype_size(c.dtype));
    else if (!c.inner_all)
      invalid("--inner", skip);
  }
}

}  // namespace

std::string hier_row_skip_reason(const BenchConfig& c, const coll::AlgoConfig& algo,
                                 int group_size) {
  if (algo.algo != Algorithm::kHierarchical) return "";
  const bool levels = !algo.upper_groups.empty() || algo.rotate_levels;
  return coll::hier_inner_refusal(c.coll, c.ranks, group_size, algo.inner, levels);
}

coll::AlgoConfig BenchConfig::algo_config(Algorithm algo, int chunk_count, Algorithm inner) const {
  coll::AlgoConfig config{algo, chunk_count, group_size, inner};
  if (algo == Algorithm::kHierarchical || algo == Algorithm::kAuto) {  // auto: where it picks hier
    config.upper_groups = upper_groups;
    config.rotate_levels = rotate_levels;
  }
  return config;
}

std::vector<coll::AlgoConfig> BenchConfig::ours() const {
  std::vector<coll::AlgoConfig> out;
  for (Algorithm a : algos) {
    if (a == Algorithm::kAuto) {
      out.push_back(algo_config(a, chunks.front(), inners.front()));
      continue;
    }
    for (Algorithm inner : inners) {
      for (int n : chunks) out.push_back(algo_config(a, n, inner));
      if (a != Algorithm::kHierarchical) break;  // the others have no inner algorithm
    }
  }
  return out;
}

std::uint64_t parse_size_bytes(std::string_view text, std::string_view flag) {
  const auto malformed = [&] {
    invalid(flag, fmt::format("malformed size '{}' (allowed: bytes with an optional K, M or G "
                              "suffix, e.g. 4096, 64K, 1G)",
                              text));
  };
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 19 || text.size() > digits + 1) malformed();
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) value = value * 10 + (text[i] - '0');
  int shift = 0;
  if (text.size() == digits + 1) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        malformed();
    }
  }
  if (value > (std::numeric_limits<std::uint64_t>::max() >> shift)) malformed();
  return value << shift;
}

std::vector<Algorithm> parse_algo_list(std::string_view text, CollectiveKind kind) {
  if (text == "all") return coll::algorithms_for(kind);
  std::vector<Algorithm> algos;
  while (true) {
    const auto comma = text.find(',');
    const auto a = parse_one_algo(text.substr(0, comma), kind);
    if (std::find(algos.begin(), algos.end(), a) == algos.end()) algos.push_back(a);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return algos;
}

void parse_algo_choice(std::string_view text, BenchConfig& c) {
  // Ours go through parse_algo_list (which checks them against --coll); "all"
  // stands for every one of ours, never for the peers.
  std::string ours;
  const auto add_ours = [&](std::string_view name) {
    ours += fmt::format("{}{}", ours.empty() ? "" : ",", name);
  };
  while (true) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    if (is_peer_name(item)) {
      check_peer(item, c);
      if (std::find(c.peers.begin(), c.peers.end(), item) == c.peers.end())
        c.peers.emplace_back(item);
    } else if (item == "all") {
      for (auto a : coll::algorithms_for(c.coll)) add_ours(coll::algorithm_name(a));
    } else {
      add_ours(item);
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  c.algos =
      ours.empty() && !c.peers.empty() ? std::vector<Algorithm>{} : parse_algo_list(ours, c.coll);
}

namespace {

// A flag of the gloo backend only.
void require_gloo(std::string_view flag, const std::string& backend) {
  if (backend != "gloo")
    invalid(flag, fmt::format("applies to --backend gloo only (got --backend {})", backend));
}

// A gloo flag naming one of two choices: whether it names `second`.
bool gloo_choice(std::string_view flag, const std::string& value, const std::string& backend,
                 std::string_view what, std::string_view first, std::string_view second) {
  require_gloo(flag, backend);
  if (value != first && value != second)
    invalid(flag, fmt::format("unknown {} '{}' (allowed: {}, {})", what, value, first, second));
  return value == second;
}

}  // namespace

BenchConfig resolve(const BenchFlags& f) {
  BenchConfig c;
  check_backend_name(f.backend);
  c.backend = f.backend;
  if (!f.transport.empty()) {
    check_transport_name(f.transport, "--transport");
    require_gloo("--transport", c.backend);
  }
  if (!f.eager.empty()) {
    require_gloo("--eager", c.backend);
    c.eager_bytes = parse_size_bytes(f.eager, "--eager");
    if (*c.eager_bytes > coll::kGlooMaxEagerBytes)
      invalid("--eager", fmt::format("{} is above the largest eager limit, {} bytes (allowed: 0 "
                                     "to disable, up to {})",
                                     f.eager, coll::kGlooMaxEagerBytes, coll::kGlooMaxEagerBytes));
  }
  if (!f.loop_thread.empty())
    c.batch_loop_thread =
        !gloo_choice("--loop-thread", f.loop_thread, c.backend, "policy", "batch", "normal");
  if (!f.connections.empty())
    c.row_connections =
        gloo_choice("--connections", f.connections, c.backend, "layout", "shared", "row");
  c.ranks = at_least(f.ranks, 1, "--ranks");
  if (c.backend == "threads" && c.ranks > coll::kThreadsMaxRanks)
    invalid("--ranks", fmt::format("{} is more than the threads backend runs ({}, one thread "
                                   "each; cclab sim predicts and cclab check proves larger counts)",
                                   c.ranks, coll::kThreadsMaxRanks));
  c.coll = coll::parse_collective(f.coll, "--coll");
  resolve_sizes(f, c);
  c.dtype = coll::parse_dtype(f.dtype, "--dtype");
  c.op = coll::parse_op(f.op, "--op");
  parse_algo_choice(f.algo, c);
  if (f.root < 0 || f.root >= c.ranks)
    invalid("--root", fmt::format("{} is not a rank (allowed: 0 to {})", f.root, c.ranks - 1));
  c.root = f.root;
  c.iters = at_least(f.iters, 1, "-n/--iters");
  c.warmup = at_least(f.warmup, 0, "-w/--warmup");
  c.batch = at_least(f.batch, 1, "--batch");
  c.interleave = f.interleave;
  if (f.timing != "rank" && f.timing != "span")
    invalid("--timing", fmt::format("unknown timing '{}' (allowed: rank, span)", f.timing));
  c.timing = f.timing == "span" ? Timing::kSpan : Timing::kRank;
  if (f.check != 0 && f.check != 1)
    invalid("-c/--check", fmt::format("{} is not allowed (allowed: 0, 1)", f.check));
  c.check = f.check == 1;
  c.in_place = f.in_place;
  c.chunks = coll::parse_chunk_list(f.chunks, "--chunks");
  auto levels = coll::parse_group_levels(f.group_size, "--group-size");
  c.group_size = parse_group_size(levels.group_size, c.ranks);
  c.upper_groups = std::move(levels.upper);
  c.rotate_levels = f.rotate_levels;
  c.inners = coll::parse_inner_list(f.inner, "--inner", c.coll);
  c.inner_all = coll::names_all_inners(f.inner);
  c.timeout = std::chrono::milliseconds(at_least(f.timeout_ms, 1, "--timeout-ms"));
  c.json_path = f.json_path;
  c.compare = f.compare;
  // The stream row is a reference, not a peer to compare with.
  const bool has_peer = std::any_of(c.peers.begin(), c.peers.end(),
                                    [](const std::string& p) { return p != kStreamPeer; });
  if (c.compare && (c.algos.empty() || !has_peer))
    invalid("--compare",
            "needs ours and at least one peer in --algo (e.g. --algo all,gloo-ring or all,mpi; "
            "stream is a reference, not a peer)");
  c.pin = f.pin;
  c.tune_path = f.tune_path;
  const bool named = std::any_of(c.algos.begin(), c.algos.end(),
                                 [](Algorithm a) { return a != Algorithm::kAuto; });
  if (!c.tune_path.empty() && !named)
    invalid("--tune", "no algorithm of ours to choose from in --algo (e.g. --algo all)");
  if (!c.upper_groups.empty() || c.rotate_levels) check_levels(c);
  preflight(c);
  return c;
}

std::string_view timing_name(Timing t) { return t == Timing::kSpan ? "span" : "rank"; }

std::vector<SizePoint> sweep_sizes(const BenchConfig& c) {
  const std::uint64_t elem = coll::dtype_size(c.dtype);
  const bool per_rank_blocks =
      c.coll == CollectiveKind::kReduceScatter || c.coll == CollectiveKind::kAllGather;
  std::vector<SizePoint> points;
  for (std::uint64_t bytes = c.min_bytes;; bytes *= c.step_factor) {
    std::uint64_t count = bytes / elem;
    if (per_rank_blocks) count -= count % static_cast<std::uint64_t>(c.ranks);
    points.push_back({count * elem, count});
    // The next size would pass max_bytes (written so that it cannot overflow).
    if (bytes > c.max_bytes / c.step_factor) break;
  }
  return points;
}

coll::CollectiveShape shape_for(const BenchConfig& c, std::uint64_t total_count) {
  coll::CollectiveShape shape;
  shape.kind = c.coll;
  shape.ranks = c.ranks;
  shape.root = c.root;
  shape.count = coll::count_of_total(c.coll, c.ranks, total_count);
  return shape;
}

}  // namespace cclab::bench
