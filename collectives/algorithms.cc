// The catalogue: names, which collective each algorithm implements, argument
// validation, and the mapping from a choice to its program generator.
#include "cclab/collectives/algorithms.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "blocks.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/selector.h"

namespace cclab::coll {
namespace {

constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kRing,   Algorithm::kTree,  Algorithm::kHalvingDoubling, Algorithm::kHierarchical,
    Algorithm::kDirect, Algorithm::kRings, Algorithm::kBiRing};

// A schedule whose programs come from a generator function.
class GeneratedSchedule final : public Schedule {
 public:
  using Fn = std::function<Program(int rank)>;
  GeneratedSchedule(CollectiveShape shape, std::string name, std::uint64_t scratch, Fn fn)
      : shape_(shape), name_(std::move(name)), scratch_(scratch), fn_(std::move(fn)) {}
  const CollectiveShape& shape() const override { return shape_; }
  std::string name() const override { return name_; }
  std::uint64_t scratch_count() const override { return scratch_; }
  Program program(int rank) const override { return fn_(rank); }

 private:
  CollectiveShape shape_;
  std::string name_;
  std::uint64_t scratch_;
  Fn fn_;
};

// AlgoConfig::upper_groups: hier's, each above 1, their product with the
// group size dividing the ranks; reduce-scatter's and all-gather's with the
// ring between the top groups.
void validate_levels(const CollectiveShape& s, const AlgoConfig& c) {
  const std::string levels = group_levels_name(c.group_size, c.upper_groups);
  const bool auto_chooses = c.algo == Algorithm::kAuto;  // levels go with its hier (selector)
  if (!auto_chooses && (c.algo != Algorithm::kHierarchical || !has_levels(s.kind)))
    throw InvalidArgument(
        c.rotate_levels
            ? fmt::format("rotate-levels: hier's only (allreduce, reducescatter, allgather), not "
                          "{} {}",
                          algorithm_name(c.algo), collective_name(s.kind))
            : fmt::format("group-size: levels ({}) are hier's only (allreduce, reducescatter, "
                          "allgather), not {} {} (allowed: one group size)",
                          levels, algorithm_name(c.algo), collective_name(s.kind)));
  if (c.upper_groups.empty()) return;  // rotated two levels: any group size
  if (c.group_size < 2)
    throw InvalidArgument(fmt::format(
        "group-size: {} has a first level of {} (allowed: at least 2)", levels, c.group_size));
  for (const int level : c.upper_groups)
    if (level < 2)
      throw InvalidArgument(fmt::format(
          "group-size: {} has a level of {} (allowed: each level at least 2)", levels, level));
  const std::int64_t span = group_levels_span(c.group_size, c.upper_groups);
  if (s.ranks % span != 0)
    throw InvalidArgument(fmt::format(
        "group-size: the top groups of {} ({} ranks each) do not divide the rank count {}", levels,
        span, s.ranks));
}

void validate(const CollectiveShape& s, const AlgoConfig& c) {
  if (s.ranks < 1) throw InvalidArgument(fmt::format("ranks: must be >= 1, got {}", s.ranks));
  if (c.chunks < 1) throw InvalidArgument(fmt::format("chunks: must be >= 1, got {}", c.chunks));
  if (s.kind == CollectiveKind::kBroadcast && (s.root < 0 || s.root >= s.ranks))
    throw InvalidArgument(fmt::format("root: must be in [0, {}), got {}", s.ranks, s.root));
  if (!supports(s.kind, c.algo)) {
    std::string allowed;
    for (auto a : algorithms_for(s.kind))
      allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", algorithm_name(a));
    throw InvalidArgument(fmt::format("algo: '{}' does not implement {} (allowed: {}, auto)",
                                      algorithm_name(c.algo), collective_name(s.kind), allowed));
  }
  if (uses_groups(c.algo) &&
      (c.group_size < 0 || (c.group_size > 0 && s.ranks % c.group_size != 0)))
    throw InvalidArgument(
        fmt::format("group-size: {} does not divide the rank count {}", c.group_size, s.ranks));
  if (c.algo == Algorithm::kHierarchical &&
      (c.inner == Algorithm::kHierarchical || c.inner == Algorithm::kRings ||
       c.inner == Algorithm::kAuto))
    throw InvalidArgument(fmt::format("inner: '{}' is not allowed (allowed: {})",
                                      algorithm_name(c.inner),
                                      join_names(inner_algorithms(), ", ")));
  if (c.algo == Algorithm::kHierarchical && !allows_inner(s.kind, c.inner))
    throw InvalidArgument(
        fmt::format("inner: '{}' is not allowed for {} (allowed: {}; hier's {} runs rings "
                    "inside its groups)",
                    algorithm_name(c.inner), collective_name(s.kind),
                    join_names(inners_for(s.kind), ", "), collective_name(s.kind)));
  if (c.algo == Algorithm::kHierarchical) {
    const bool levels = !c.upper_groups.empty() || c.rotate_levels;
    if (const auto why = hier_inner_refusal(s.kind, s.ranks, c.group_size, c.inner, levels);
        !why.empty())
      throw InvalidArgument("inner: " + why);
  }
  if (!c.upper_groups.empty() || c.rotate_levels) validate_levels(s, c);
}

std::unique_ptr<Schedule> all_reduce(const CollectiveShape& s, const AlgoConfig& c) {
  using namespace detail;
  const int n = s.ranks, chunks = c.chunks;
  const auto count = s.count;
  const std::string suffix = chunks > 1 ? fmt::format("(chunks={})", chunks) : "";
  switch (c.algo) {
    case Algorithm::kRing:
      return std::make_unique<GeneratedSchedule>(
          s, "ring" + suffix, 0, [=](int r) { return ring_all_reduce(n, r, count, chunks); });
    case Algorithm::kTree:
      return std::make_unique<GeneratedSchedule>(
          s, "tree" + suffix, 0, [=](int r) { return tree_all_reduce(n, r, count, chunks); });
    case Algorithm::kHalvingDoubling:
      return std::make_unique<GeneratedSchedule>(
          s, "hd" + suffix, 0, [=](int r) { return hd_all_reduce(n, r, count, chunks); });
    case Algorithm::kBiRing:
      return std::make_unique<GeneratedSchedule>(
          s, "biring" + suffix, 0, [=](int r) { return biring_all_reduce(n, r, count, chunks); });
    case Algorithm::kDirect: {
      const bool into_output = c.disjoint_output;
      return std::make_unique<GeneratedSchedule>(
          s, "direct" + suffix, into_output ? 0 : count,
          [=](int r) { return direct_all_reduce(n, r, count, chunks, into_output); });
    }
    default:
      break;
  }
  const int g = group_size_or_default(n, c.group_size);
  if (c.algo == Algorithm::kRings)
    return std::make_unique<GeneratedSchedule>(
        s, fmt::format("rings(g={}{})", g, chunks > 1 ? fmt::format(",chunks={}", chunks) : ""), 0,
        [=](int r) { return rings_all_reduce(n, r, count, chunks, g); });
  const int inner = static_cast<int>(c.inner);
  const auto name = fmt::format("hier(g={}{},inner={}{})", group_levels_name(g, c.upper_groups),
                                c.rotate_levels ? ",rotated" : "", algorithm_name(c.inner),
                                chunks > 1 ? fmt::format(",chunks={}", chunks) : "");
  if (!c.upper_groups.empty() || c.rotate_levels) {
    const std::vector<GridDim> dims = rank_grid(n, g, c.upper_groups);
    const bool rotate = c.rotate_levels;
    return std::make_unique<GeneratedSchedule>(s, name, count, [=](int r) {
      return multilevel_hier_all_reduce(r, count, chunks, dims, inner, rotate);
    });
  }
  return std::make_unique<GeneratedSchedule>(
      s, name, count, [=](int r) { return hier_all_reduce(n, r, count, chunks, g, inner); });
}

}  // namespace

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHalvingDoubling:
      return "hd";
    case Algorithm::kHierarchical:
      return "hier";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kRings:
      return "rings";
    case Algorithm::kBiRing:
      return "biring";
  }
  return "?";
}

std::string algorithm_names() { return "ring, tree, hd, hier, direct, rings, biring, auto"; }

std::string join_names(const std::vector<Algorithm>& algos, std::string_view separator) {
  std::string out;
  for (Algorithm a : algos)
    out += fmt::format("{}{}", out.empty() ? "" : separator, algorithm_name(a));
  return out;
}

bool uses_groups(Algorithm a) { return a == Algorithm::kHierarchical || a == Algorithm::kRings; }

std::vector<std::string_view> split_list(std::string_view list) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0;;) {
    const auto comma = list.find(',', pos);
    out.push_back(list.substr(pos, comma - pos));
    if (comma == std::string_view::npos) return out;
    pos = comma + 1;
  }
}

std::vector<int> parse_chunk_list(std::string_view text, std::string_view what) {
  std::vector<int> out;
  for (const std::string_view item : split_list(text)) {
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string_view::npos;
    const int value = digits ? std::stoi(std::string(item)) : 0;
    if (value < 1)
      throw InvalidArgument(
          fmt::format("{}: '{}' is not a chunk count (allowed: integers from 1 to 999999, comma "
                      "separated, e.g. 1,4)",
                      what, item));
    if (std::find(out.begin(), out.end(), value) != out.end())
      throw InvalidArgument(
          fmt::format("{}: {} is given twice (each chunk count once)", what, value));
    out.push_back(value);
  }
  return out;
}

GroupLevels parse_group_levels(std::string_view text, std::string_view what) {
  std::vector<int> levels;
  for (std::size_t pos = 0;;) {
    const auto x = text.find('x', pos);
    const std::string_view item = text.substr(pos, x - pos);
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits)
      throw InvalidArgument(fmt::format(
          "{}: '{}' is not a group size (allowed: an integer, 0 for the default, or levels "
          "joined by x, e.g. 4x4: groups of 4 ranks, then groups of 4 of those)",
          what, text));
    levels.push_back(std::stoi(std::string(item)));
    if (x == std::string_view::npos) break;
    pos = x + 1;
  }
  if (levels.size() > 1)
    for (const int level : levels)
      if (level < 2)
        throw InvalidArgument(fmt::format(
            "{}: level {} of '{}' groups nothing (allowed: each level of several at least 2)", what,
            level, text));
  return {levels.front(), std::vector<int>(levels.begin() + 1, levels.end())};
}

std::vector<GridDim> rank_grid(int ranks, int group_size, const std::vector<int>& upper) {
  const std::int64_t span = group_levels_span(group_size, upper);
  if (span < 1 || ranks % span != 0) {
    if (ranks > 1) return {{ranks, 1}};
    return {};
  }
  std::vector<GridDim> dims;
  int stride = 1;
  for (std::size_t k = 0; k <= upper.size(); ++k) {
    const int size = k == 0 ? group_size : upper[k - 1];
    if (size > 1) dims.push_back({size, stride});
    stride *= size;
  }
  if (ranks / stride > 1) dims.push_back({ranks / stride, stride});
  return dims;
}

std::int64_t group_levels_span(int group_size, const std::vector<int>& upper) {
  constexpr std::int64_t kAboveAnyRanks = std::int64_t{1} << 40;
  std::int64_t span = group_size;
  for (const int level : upper) span = std::min(span * level, kAboveAnyRanks);
  return span;
}

std::string group_levels_name(int group_size, const std::vector<int>& upper) {
  std::string out = std::to_string(group_size);
  for (const int level : upper) out += fmt::format("x{}", level);
  return out;
}

Algorithm parse_algorithm(std::string_view name, std::string_view what) {
  for (auto a : kAllAlgorithms)
    if (algorithm_name(a) == name) return a;
  if (name == "auto") return Algorithm::kAuto;
  throw InvalidArgument(
      fmt::format("{}: unknown algorithm '{}' (allowed: {})", what, name, algorithm_names()));
}

std::vector<Algorithm> parse_algorithm_list(std::string_view list, CollectiveKind kind,
                                            std::string_view what) {
  const auto every = algorithms_for(kind);
  std::vector<Algorithm> out;
  for (const std::string_view item : split_list(list)) {
    if (item == "all") {
      out.insert(out.end(), every.begin(), every.end());
      continue;
    }
    const Algorithm a = parse_algorithm(item, what);
    if (!supports(kind, a))
      throw InvalidArgument(fmt::format("{}: '{}' does not apply to {} (allowed: {}, auto, all)",
                                        what, algorithm_name(a), collective_name(kind),
                                        join_names(every, ", ")));
    out.push_back(a);
  }
  return out;
}

namespace {

// "ring, tree, hd, direct": the names of inner_algorithms(), for messages.
std::string inner_names() { return join_names(inner_algorithms(), ", "); }

}  // namespace

std::vector<Algorithm> inner_algorithms() {
  std::vector<Algorithm> out;
  for (Algorithm a : kAllAlgorithms)
    if (a != Algorithm::kHierarchical && a != Algorithm::kRings) out.push_back(a);
  return out;
}

bool allows_inner(CollectiveKind kind, Algorithm inner) {
  const bool rs_or_ag =
      kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllGather;
  return inner == Algorithm::kRing || kind == CollectiveKind::kAllReduce ||
         (rs_or_ag && (inner == Algorithm::kHalvingDoubling || inner == Algorithm::kBiRing));
}

std::vector<Algorithm> inners_for(CollectiveKind kind) {
  std::vector<Algorithm> out = inner_algorithms();
  std::erase_if(out, [&](Algorithm a) { return !allows_inner(kind, a); });
  return out;
}

Algorithm parse_inner(std::string_view name, std::string_view what) {
  for (Algorithm a : inner_algorithms())
    if (algorithm_name(a) == name) return a;
  throw InvalidArgument(
      fmt::format("{}: '{}' is not an inner algorithm (allowed: {})", what, name, inner_names()));
}

namespace {

// "ring,tree" -> {kRing, kTree}, each once; `all` stands for `choices`, and a
// named inner algorithm outside them is refused by `refuse`.
template <class Refuse>
std::vector<Algorithm> parse_inner_items(std::string_view text, std::string_view what,
                                         const std::vector<Algorithm>& choices, Refuse&& refuse) {
  std::vector<Algorithm> out;
  for (const std::string_view item : split_list(text)) {
    std::vector<Algorithm> named = choices;
    if (item != "all") {
      named = inner_algorithms();
      std::erase_if(named, [&](Algorithm a) { return algorithm_name(a) != item; });
      if (named.empty())
        throw InvalidArgument(fmt::format(
            "{}: '{}' is not an inner algorithm (allowed: {}, or all)", what, item, inner_names()));
      if (std::find(choices.begin(), choices.end(), named[0]) == choices.end()) refuse(named[0]);
    }
    for (Algorithm a : named) {
      if (std::find(out.begin(), out.end(), a) != out.end())
        throw InvalidArgument(fmt::format("{}: '{}' is given twice (each inner algorithm once)",
                                          what, algorithm_name(a)));
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace

std::vector<Algorithm> parse_inner_list(std::string_view text, std::string_view what) {
  return parse_inner_items(text, what, inner_algorithms(), [](Algorithm) {});
}

std::vector<Algorithm> parse_inner_list(std::string_view text, std::string_view what,
                                        CollectiveKind kind) {
  return parse_inner_items(text, what, inners_for(kind), [&](Algorithm) {
    if (kind == CollectiveKind::kBroadcast)
      throw InvalidArgument(fmt::format(
          "{}: --coll broadcast has no hier, so nothing runs between groups (allowed: ring, the "
          "default, or all)",
          what));
    throw InvalidArgument(fmt::format(
        "{}: the hier of --coll {} runs rings inside its groups and the ring or hd between them, "
        "or rings both ways in and between them (allowed: {}, or all)",
        what, collective_name(kind), join_names(inners_for(kind), ", ")));
  });
}

bool names_all_inners(std::string_view text) {
  const auto items = split_list(text);
  return std::find(items.begin(), items.end(), "all") != items.end();
}

std::vector<Algorithm> algorithms_for(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return {std::begin(kAllAlgorithms), std::end(kAllAlgorithms)};
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return {Algorithm::kRing,  Algorithm::kHalvingDoubling, Algorithm::kDirect,
              Algorithm::kRings, Algorithm::kHierarchical,    Algorithm::kBiRing};
    case CollectiveKind::kBroadcast:
      return {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling, Algorithm::kRings,
              Algorithm::kBiRing};
  }
  return {};
}

bool supports(CollectiveKind kind, Algorithm a) {
  if (a == Algorithm::kAuto) return true;
  for (auto x : algorithms_for(kind))
    if (x == a) return true;
  return false;
}

int default_group_size(int ranks) {
  for (int d = 1; d <= ranks; ++d)
    if (ranks % d == 0 && static_cast<double>(d) * d >= ranks) return d;
  return ranks;
}

int group_size_or_default(int ranks, int group_size) {
  return group_size > 0 ? group_size : default_group_size(ranks);
}

bool hd_pipelines_between(int groups) { return std::has_single_bit(static_cast<unsigned>(groups)); }

std::string hier_inner_refusal(CollectiveKind kind, int ranks, int group_size, Algorithm inner,
                               bool levels) {
  if (kind == CollectiveKind::kAllReduce || inner != Algorithm::kHalvingDoubling) return "";
  if (levels)
    return fmt::format(
        "hd between the top groups of {}'s hier in levels (allowed here: ring, biring)",
        collective_name(kind));
  const int g = group_size_or_default(ranks, group_size);
  if (hd_pipelines_between(ranks / g)) return "";
  return fmt::format(
      "hd between the groups of {}'s hier needs a power-of-two number of groups, got {} "
      "(groups of {}; allowed here: ring, biring)",
      collective_name(kind), ranks / g, g);
}

Algorithm choose_algorithm(const CollectiveShape& shape, std::size_t elem_bytes) {
  const std::uint64_t bytes = shape.count * elem_bytes;
  const int n = shape.ranks;
  // Broadcast without pipelining: the chain (ring) moves the whole message
  // n-1 times in a row, the binomial tree ceil(log2 n) times, scatter +
  // all-gather (hd) about twice in all, in twice the tree's messages. As
  // MPICH: the tree for small messages or fewer than 8 ranks, else hd.
  if (shape.kind == CollectiveKind::kBroadcast)
    return bytes <= (64u << 10) || n < 8 ? Algorithm::kTree : Algorithm::kHalvingDoubling;
  // One round while the (n-1)-fold traffic of the one-shot exchange is small
  // (bytes: the whole buffer for all-reduce, a rank's block for the others)
  // and its peers few: a rank reduces their pieces in rank order, so from 8
  // ranks the n-1 sends to it wait in turn.
  if (n < 8 && bytes * (n - 1) <= kDirectTrafficLimit) return Algorithm::kDirect;
  // The ring's steps (2(n-1) or n-1) each move a block of S/n; while that is
  // small they cost latency, which hd pays log2(n) times. Larger blocks go
  // round the ring, which keeps to neighbour links: hd's exchanges at
  // distance n/2 share links on tori, rings and oversubscribed trees.
  const std::uint64_t block = shape.kind == CollectiveKind::kAllReduce ? bytes / n : bytes;
  if (n >= 8 && block <= kHdBlockLimit) return Algorithm::kHalvingDoubling;
  return Algorithm::kRing;
}

bool has_levels(CollectiveKind kind) { return kind != CollectiveKind::kBroadcast; }

bool has_groups(const CollectiveShape& shape, const AlgoConfig& config) {
  const int g = config.group_size, n = shape.ranks;
  return g > 1 && g < n && n % g == 0;
}

int top_groups(int ranks, const AlgoConfig& config) {
  const std::int64_t span = group_levels_span(config.group_size, config.upper_groups);
  return span > 0 ? static_cast<int>(ranks / span) : 1;
}

bool grouped_rule_pipelines_hd(int groups) {
  return groups >= kGroupedHdInnerFrom && hd_pipelines_between(groups);
}

Algorithm inner_between_groups(int groups, std::uint64_t bytes) {
  if (groups < kGroupedHdInnerFrom) return Algorithm::kRing;
  return grouped_rule_pipelines_hd(groups) || bytes / groups < kGroupedRingShareFrom
             ? Algorithm::kHalvingDoubling
             : Algorithm::kRing;
}

bool hier_all_reduce_pipelines(Algorithm inner, int groups) {
  return inner == Algorithm::kRing ||
         (inner == Algorithm::kHalvingDoubling && hd_pipelines_between(groups));
}

int hier_pipeline_chunks(std::uint64_t bytes, std::uint64_t block, std::uint64_t min_chunk) {
  const std::uint64_t wave = std::min<std::uint64_t>(kHierMinChunks, block / min_chunk);
  const std::uint64_t want = std::max(bytes / kHierChunkBytes, wave);
  int chunks = 1;
  while (chunks < kHierMaxChunks && std::uint64_t(chunks) * 2 <= want) chunks *= 2;
  return chunks;
}

bool rotated_levels_unequal(int ranks, const AlgoConfig& config) {
  if (!config.rotate_levels) return false;
  const int top = top_groups(ranks, config);
  for (const int level : config.upper_groups)
    if (level != config.group_size) return true;
  return top > 1 && top != config.group_size;
}

std::uint64_t two_way_hd_block_limit(const CollectiveShape& shape, const AlgoConfig& config) {
  const bool grouped_blocks = shape.kind != CollectiveKind::kAllReduce && has_groups(shape, config);
  return grouped_blocks || rotated_levels_unequal(shape.ranks, config) ? kGroupedHdBlockLimit
                                                                       : kTwoWayHdBlockLimit;
}

bool takes_two_way_rule(const CollectiveShape& shape, const AlgoConfig& config) {
  return config.prefer_biring && shape.kind != CollectiveKind::kBroadcast;
}

Algorithm broadcast_chain(const CollectiveShape& shape, const AlgoConfig& config) {
  if (config.prefer_biring) return Algorithm::kBiRing;
  if (config.prefer_rails && has_groups(shape, config)) return Algorithm::kRings;
  return Algorithm::kRing;
}

int broadcast_chain_pieces(int ranks, std::uint64_t bytes) {
  int pieces = 1;
  while (pieces < kHierMaxChunks && std::uint64_t(pieces) * 2 * kBroadcastChunkBytes <= bytes)
    pieces *= 2;
  return ranks >= 3 && 2 * pieces >= ranks ? pieces : 0;
}

namespace {

// Broadcast's rule (broadcast_chain_pieces). Simulated at 50 GB/s, 1
// KiB-256 MiB in steps of 4 (README, "Choosing"): against the fastest row of
// tree, hd, ring, biring and rings in 1-1024 chunks of pieces of 16 KiB or
// more, this rule took 1.16x its time (geometric mean over a switch of 4 and
// of 16, a fat tree of 64, nodes of 2x4 and 8x8 GPUs, rings of 6 and 16,
// tori 8x8 and 4x4x4), the unpipelined tree or hd 1.72x; on a ring of 16 at
// 64 MiB biring:128 took 823 us, hd 7076; on 8 nodes of 8 GPUs rings:32 506,
// ring:256 1490, hd 2411. Over gloo on 4 emulated hosts of 1 Gbit/s ring:64
// took 147 ms at 16 MiB, the tree 356.
AlgoConfig choose_broadcast(const CollectiveShape& shape, std::size_t elem_bytes,
                            AlgoConfig config) {
  config.algo = choose_algorithm(shape, elem_bytes);
  const int pieces = broadcast_chain_pieces(shape.ranks, shape.count * elem_bytes);
  if (pieces == 0) return config;
  config.algo = broadcast_chain(shape, config);
  // The chains side by side, a piece each.
  const int ways = config.algo == Algorithm::kBiRing  ? 2
                   : config.algo == Algorithm::kRings ? config.group_size
                                                      : 1;
  if (config.chunks == 1) config.chunks = std::max(pieces / ways, 1);
  return config;
}

// choose_config where the reverse ring's links are idle under the ring
// (prefer_biring). hd's exchange at distance d crosses d of them, so it
// gains nothing in latency over the ring's neighbour steps and moves its
// data further: on ring:n=64,bw=50GBps biring took 146.64 us at 1 MiB
// against hd's 243.31, and hier/biring in a 8x8x8 torus's rotated levels
// 43.75 us at 256 KiB against the flat hd's 59.92; only where a rank's
// block is a few elements (4x4x4 torus, 1 KiB: hd 18.05 us, hier/biring
// 22.01) does hd's shorter program win. Levels rotated are fenced
// together, so a phase lasts as long as its longest level's: on 8x4 and
// 4x4x2 tori hd (20.07 and 14.05 us at 1 KiB) led hier/biring (28.01, 18.01)
// up to 16 KiB, a rank's block of 512 B. The groups' rings go both ways
// too: on a 4x4x4 torus at 64 MiB hier/biring in rotated levels took 458.40
// us, hier/hd 912.79. Its phases pipeline along their rings, which a wave
// of kHierMinChunks chunks fills: on a 8x8x8 torus at 64 MiB hier/biring in
// 4 chunks took 465.24 us, in 128 (hier_pipeline_chunks) 464.18, unchunked
// 488.52 (at 4 MiB: 8 chunks 58.26, none 69.91), and the simulator 3.9 s
// for 4, 8 and 16 chunks together against 13.4 s for 128. Reduce-scatter's
// and all-gather's hier likewise, its rings along each level both ways: of
// 64 MiB on a 4x4x4 torus in rotated levels hier/biring took 887.81 us
// against the ring's 1764.62 (2 MiB: 34.53, 58.75), on an 8x8 one 1330.21
// against 2644.41.
AlgoConfig choose_on_two_way_links(const CollectiveShape& shape, std::size_t elem_bytes,
                                   AlgoConfig config) {
  const std::uint64_t bytes = shape.count * elem_bytes;
  const int n = shape.ranks;
  const bool grouped = has_groups(shape, config);
  const std::uint64_t block = shape.kind == CollectiveKind::kAllReduce ? bytes / n : bytes;
  const std::uint64_t direct_limit = grouped ? kGroupedDirectTrafficLimit : kDirectTrafficLimit;
  if (n < 8 && bytes * (n - 1) <= direct_limit) {
    config.algo = Algorithm::kDirect;
  } else if (n >= 8 && block <= two_way_hd_block_limit(shape, config)) {
    config.algo = Algorithm::kHalvingDoubling;
  } else if (!grouped) {
    config.algo = Algorithm::kBiRing;
  } else {
    config.algo = Algorithm::kHierarchical;
    config.inner = Algorithm::kBiRing;
    const std::uint64_t whole = shape.kind == CollectiveKind::kAllReduce ? bytes : bytes * n;
    if (config.chunks == 1)
      config.chunks = std::min(hier_pipeline_chunks(whole, bytes), kHierMinChunks);
  }
  return config;
}

}  // namespace

AlgoConfig choose_config(const CollectiveShape& shape, std::size_t elem_bytes, AlgoConfig config) {
  if (takes_two_way_rule(shape, config)) return choose_on_two_way_links(shape, elem_bytes, config);
  if (shape.kind == CollectiveKind::kBroadcast) return choose_broadcast(shape, elem_bytes, config);
  config.algo = choose_algorithm(shape, elem_bytes);
  if (!has_groups(shape, config)) return config;
  // Inside a group (NVLink, shared memory) is much faster than between
  // groups (NICs): past the smallest messages, where hd's log2(n) steps
  // win, only hier keeps most of the traffic inside the groups. Between
  // many groups the inner ring's 2(G-1) steps cost latency that hd's
  // 2 log2(G) do not, while a group's share is small. (cclab sim, nodes, fat trees and tori of
  // 4-512 ranks, 1 KiB-256 MiB: the flat rule's time was 1.75x the fastest unchunked algorithm's,
  // geometric mean, this one's 1.10x; README, "Choosing".) direct moves twice hier's bytes between
  // the groups: over gloo on two emulated hosts it took 1.5-2.8x hier's time at 64 KiB and led up
  // to 16 KiB.
  const std::uint64_t bytes = shape.count * elem_bytes;
  const std::uint64_t block =
      shape.kind == CollectiveKind::kAllReduce ? bytes / shape.ranks : bytes;
  if (config.algo == Algorithm::kDirect && bytes * (shape.ranks - 1) <= kGroupedDirectTrafficLimit)
    return config;
  if (config.algo == Algorithm::kHalvingDoubling && block <= kGroupedHdBlockLimit) return config;
  config.algo = Algorithm::kHierarchical;
  if (shape.kind != CollectiveKind::kAllReduce) {
    // Its two rings are one pipeline in chunks too: on 6 of those topologies
    // the chunks below took 0.54-0.99x the unchunked hier's time from 1 to
    // 256 MiB (the whole buffer), which blocks of 64 KiB or less run unchunked.
    // Between 4 or more groups, a power of two, hd's log2(G) exchanges along
    // the rail replace the ring's G-1 (64 nodes of 8 GPUs, 1 MiB: 33 us
    // against 260).
    // In levels (a torus's dimensions) the rings along each in turn, in a
    // wave of chunks: on a 4x4x4 torus, reduce-scatter of 64 MiB in rotated
    // levels took 443.41 us in 4 chunks, 445.41 unchunked, where the rule's
    // hier/hd in rows took 1018.84.
    if (!config.upper_groups.empty() || config.rotate_levels) {
      if (config.chunks == 1)
        config.chunks = std::min(hier_pipeline_chunks(bytes * shape.ranks, bytes), kHierMinChunks);
      return config;
    }
    if (grouped_rule_pipelines_hd(shape.ranks / config.group_size))
      config.inner = Algorithm::kHalvingDoubling;
    if (config.chunks == 1) config.chunks = hier_pipeline_chunks(bytes * shape.ranks, bytes);
    return config;
  }
  // In chunks, hier with the ring between groups is one pipeline: a wave of
  // chunks crosses between the groups while the next works inside them; so is
  // hd between a power of two of groups. Over the grouped topologies of cclab
  // sim (nodes of 2x2 to 64x8 GPUs, three fat trees, two tori, 1 KiB-256 MiB)
  // chunks of about 512 KiB came within 1.09x of the fastest row of every
  // algorithm and chunk count (geometric mean), where the unchunked hier took
  // 1.24x. Between 4 or more groups (all a power of two there) hd in chunks
  // did as well as the ring in chunks from shares of 2 MiB, better below
  // (64 nodes of 8 GPUs, 64 MiB: 459 us against 664); where hd cannot
  // pipeline (groups not a power of two) the ring takes over once a group's
  // share reaches 512 KiB (README, "Choosing").
  // In levels (upper_groups, rotate_levels) hier runs phased: the inner
  // algorithm goes across the top groups, unchunked.
  if (!config.upper_groups.empty() || config.rotate_levels) {
    config.inner = inner_between_groups(top_groups(shape.ranks, config), bytes);
    return config;
  }
  const int groups = shape.ranks / config.group_size;
  config.inner = inner_between_groups(groups, bytes);
  if (config.chunks == 1 && hier_all_reduce_pipelines(config.inner, groups))
    config.chunks = hier_pipeline_chunks(
        bytes, bytes, config.inner == Algorithm::kRing ? kHierMinChunkBytes : kHierHdMinChunkBytes);
  return config;
}

std::unique_ptr<Schedule> make_schedule(const CollectiveShape& shape, const AlgoConfig& config,
                                        std::size_t elem_bytes) {
  AlgoConfig c = config;
  validate(shape, c);
  if (c.algo == Algorithm::kAuto) {
    c = resolve_algorithm(shape, elem_bytes, c);
    validate(shape, c);
  }
  using namespace detail;
  const int n = shape.ranks, chunks = c.chunks, root = shape.root;
  const auto count = shape.count;
  const std::string suffix = chunks > 1 ? fmt::format("(chunks={})", chunks) : "";
  const int g = group_size_or_default(n, c.group_size);
  const bool inner_named = c.algo == Algorithm::kHierarchical && c.inner != Algorithm::kRing;
  const bool levels = !c.upper_groups.empty() || c.rotate_levels;
  const std::string name =
      uses_groups(c.algo)
          ? fmt::format("{}(g={}{}{}{})", algorithm_name(c.algo),
                        group_levels_name(g, c.upper_groups), c.rotate_levels ? ",rotated" : "",
                        inner_named ? fmt::format(",inner={}", algorithm_name(c.inner)) : "",
                        chunks > 1 ? fmt::format(",chunks={}", chunks) : "")
          : std::string(algorithm_name(c.algo)) + suffix;
  const std::vector<GridDim> grid =
      levels ? rank_grid(n, g, c.upper_groups) : std::vector<GridDim>{};
  const Algorithm a = c.algo;
  const bool into_output = c.disjoint_output;
  const std::uint64_t rs_scratch = a == Algorithm::kDirect ? (into_output ? 0 : count) : count * n;
  switch (shape.kind) {
    case CollectiveKind::kAllReduce:
      return all_reduce(shape, c);
    case CollectiveKind::kReduceScatter:
      return std::make_unique<GeneratedSchedule>(shape, name, rs_scratch, [=](int r) {
        if (a == Algorithm::kRing) return ring_reduce_scatter_coll(n, r, count, chunks);
        if (a == Algorithm::kHalvingDoubling) return hd_reduce_scatter(n, r, count, chunks);
        if (a == Algorithm::kRings) return rings_reduce_scatter(n, r, count, chunks, g);
        if (a == Algorithm::kBiRing) return biring_reduce_scatter(n, r, count, chunks);
        if (a == Algorithm::kHierarchical && levels)
          return levels_reduce_scatter(r, count, chunks, grid, c.rotate_levels,
                                       c.inner == Algorithm::kBiRing);
        if (a == Algorithm::kHierarchical)
          return hier_reduce_scatter(n, r, count, chunks, g, static_cast<int>(c.inner));
        return direct_reduce_scatter(n, r, count, chunks, into_output);
      });
    case CollectiveKind::kAllGather:
      return std::make_unique<GeneratedSchedule>(shape, name, 0, [=](int r) {
        if (a == Algorithm::kRing) return ring_all_gather_coll(n, r, count, chunks);
        if (a == Algorithm::kHalvingDoubling) return hd_all_gather(n, r, count, chunks);
        if (a == Algorithm::kRings) return rings_all_gather(n, r, count, chunks, g);
        if (a == Algorithm::kBiRing) return biring_all_gather(n, r, count, chunks);
        if (a == Algorithm::kHierarchical && levels)
          return levels_all_gather(r, count, chunks, grid, c.rotate_levels,
                                   c.inner == Algorithm::kBiRing);
        if (a == Algorithm::kHierarchical)
          return hier_all_gather(n, r, count, chunks, g, static_cast<int>(c.inner));
        return direct_all_gather(n, r, count, chunks);
      });
    case CollectiveKind::kBroadcast:
      return std::make_unique<GeneratedSchedule>(shape, name, 0, [=](int r) {
        if (a == Algorithm::kRing) return chain_broadcast(n, r, root, count, chunks);
        if (a == Algorithm::kHalvingDoubling) return hd_broadcast(n, r, root, count, chunks);
        if (a == Algorithm::kRings) return rings_broadcast(n, r, root, count, chunks, g);
        if (a == Algorithm::kBiRing) return biring_broadcast(n, r, root, count, chunks);
        return binomial_broadcast(n, r, root, count, chunks);
      });
  }
  throw InternalError("unknown collective");
}

}  // namespace cclab::coll
