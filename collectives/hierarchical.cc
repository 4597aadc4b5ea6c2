// Hierarchical two-level all-reduce for groups of g consecutive ranks (the
// GPUs of a node, the ranks of a host): rank r is local rank l = r % g of group
// r / g, and there are G = n / g groups.
//   1. intra-group ring reduce-scatter: local rank l ends with shard l (of g)
//      reduced over its group;
//   2. inter-group all-reduce of shard l among the G ranks with local rank l,
//      by the selected inner algorithm (in place on the shard);
//   3. intra-group ring all-gather of the g shards.
// With `biring` as the inner algorithm, phases 1 and 3 are bidirectional
// rings too (biring_phase): on a torus in groups of a row, every direction of
// both dimensions carries half the bytes, and both bandwidth terms halve
// (8x8 torus, 64 MiB, simulated: 1.35 ms against 2.67).
// Phases are composed from the other algorithms' programs, not rewritten, and
// separated by fences. Cost: the inner algorithm's on S/g bytes between groups
// plus 2 (g-1)(a_in + S/(g B_in)) inside groups: the slow links carry 1/g of
// the data. With the ring between groups and C > 1 chunks the three phases
// become one pipeline instead (pipelined_hier_all_reduce): waves of chunks go
// through the four rings a hop apart, so the links inside and between groups
// work at once, and the time tends to the busier one's rather than the sum
// (2 nodes of 8 GPUs, 64 MiB, simulated: 262 us against 451 phased; 2
// emulated hosts of 2 ranks at 1 Gbit/s, 16 MiB: 141 ms against 160-174).
// So does hd between a power of two of groups (PipelinedHierHd:
// 64 nodes of 8 GPUs, 64 MiB, simulated: 449 us against 653 phased).
// hier's reduce-scatter and all-gather are rings in both phases and live with
// the other rings in ring.cc; in chunks they become pipelines of their two
// rings, built here with the all-reduce's (pipelined_hier_reduce_scatter,
// pipelined_hier_all_gather). Between a power of two of groups they may run
// hd instead of the ring along each rail (PipelinedHierHdReduceScatter,
// PipelinedHierHdAllGather: log2(G) exchanges, not G-1 hops; 64 nodes of
// 8 GPUs, 1 MiB, simulated: 33 us against 260). More than two levels, and
// levels rotated so that each carries a part of the vector first, are
// levels.cc's.
#include <algorithm>
#include <bit>
#include <vector>

#include "blocks.h"
#include "cclab/collectives/algorithms.h"

namespace cclab::coll::detail {

Program flat_all_reduce(Algorithm a, int n, int me, std::uint64_t count, int chunks, Frame frame) {
  switch (a) {
    case Algorithm::kTree:
      return tree_all_reduce(n, me, count, chunks, frame);
    case Algorithm::kHalvingDoubling:
      return hd_all_reduce(n, me, count, chunks, frame);
    case Algorithm::kDirect:
      return direct_all_reduce(n, me, count, chunks, /*into_output=*/false, frame);
    case Algorithm::kBiRing:
      return biring_all_reduce(n, me, count, chunks, frame);
    default:
      return ring_all_reduce(n, me, count, chunks, frame);
  }
}

namespace {

// hier with fences between its phases: the inner algorithm may be any.
Program phased_hier_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size,
                               int inner_algo) {
  Emitter e;
  const int g = group_size, groups = n / g, l = me % g, group = me / g;
  const Partition shards{count, std::uint64_t(g)};
  const VectorRef in{BufferId::kInput, 0}, out{BufferId::kOutput, 0};
  const Region mine = out.at(shards.offset(l), shards.size(l));
  const RankMap in_group{group * g, 1}, across{l, g};
  // hier/biring: bidirectional rings inside the groups too (on a torus, both
  // directions of both dimensions).
  const bool both_ways = static_cast<Algorithm>(inner_algo) == Algorithm::kBiRing;
  if (both_ways) {
    CCLAB_YIELD_FROM(biring_phase(g, l, count, chunks, true, {e.next_id(), in_group, {}}), e);
  } else {
    CCLAB_YIELD_FROM(
        ring_reduce_scatter({g, l, in_group, shards, in, out, mine, chunks, e.next_frame()}), e);
  }
  if (groups > 1) {
    co_yield e.fence();
    // Over the ranks `across` groups; the shard is both input and output of
    // the inner all-reduce (in place). (This program's own frame is the
    // whole schedule's, so the inner frame need not compose with it.)
    Frame inner{e.next_id(), across, {}};
    inner.buffers.input = {BufferId::kOutput, mine.offset};
    inner.buffers.output = {BufferId::kOutput, mine.offset};
    CCLAB_YIELD_FROM(flat_all_reduce(static_cast<Algorithm>(inner_algo), groups, group, mine.count,
                                     chunks, inner),
                     e);
  }
  co_yield e.fence();
  if (both_ways) {
    CCLAB_YIELD_FROM(biring_phase(g, l, count, chunks, false, {e.next_id(), in_group, {}}), e);
  } else {
    CCLAB_YIELD_FROM(ring_all_gather({g, l, in_group, shards, out, chunks, e.next_frame()}), e);
  }
}

// One hop of a chunk through a pipelined hier's rings: a send to the next
// rank of the ring, and a receive from the previous one into `recv`, which
// adds `own` (the rank's operand) to the incoming data where it reduces.
// What it waits for is named by the chunk's chains (hier_pipeline): the send
// for the last receive of chain `after`, the receive for the last of chain
// `chain`, which it then becomes, and of chain `also` (-1: none); `mark`
// (-1: none) is a chain the receive also becomes the last of.
struct Hop {
  const char* phase;
  int right, left;
  Region send, recv;
  bool reduce = false;
  Region own = {};
  int after = 0, chain = 0, also = -1, mark = -1;
};

// Group v's bits reversed, of log2(groups) bits (an involution): the virtual
// rank of a group where hd pairs the nearest groups first, and the group of
// a virtual rank.
int bits_reversed(int v, int groups) {
  int out = 0;
  for (int bit = 1; bit < groups; bit *= 2) out = out * 2 + ((v & bit) != 0 ? 1 : 0);
  return out;
}

// What hier all-reduce's pipelines share, for rank `me` = group * g + l and
// chunk k: the chunk's g shards, and the ring reduce-scatter and all-gather
// of them inside the group (local rank l ends the first with shard l summed
// over the group, in the output, and starts the second from it).
struct ShardRings {
  int g, groups, group, l;
  Partition chunks;

  Region shard(BufferId b, int j, int k) const {
    const Partition shards{chunks.size(k), std::uint64_t(g)};
    return {b, chunks.offset(k) + shards.offset(mod(j, g)), shards.size(mod(j, g))};
  }
  // Step 0 sends the rank's input, later steps forward partial sums.
  Hop reduce_scatter_in_group(int k, int h) const {
    const RankMap in_group{group * g, 1};
    const auto in = BufferId::kInput, out = BufferId::kOutput;
    return {.phase = "reduce-scatter in group",
            .right = in_group(mod(l + 1, g)),
            .left = in_group(mod(l - 1, g)),
            .send = shard(h == 0 ? in : out, l - 1 - h, k),
            .recv = shard(out, l - 2 - h, k),
            .reduce = true,
            .own = shard(in, l - 2 - h, k)};
  }
  Hop all_gather_in_group(int k, int h) const {
    const RankMap in_group{group * g, 1};
    return {.phase = "all-gather in group",
            .right = in_group(mod(l + 1, g)),
            .left = in_group(mod(l - 1, g)),
            .send = shard(BufferId::kOutput, l - h, k),
            .recv = shard(BufferId::kOutput, l - 1 - h, k)};
  }
};

// The 2(g-1) + 2(G-1) hops of each chunk for rank `me` = group * g + l:
// first a ring reduce-scatter of the chunk inside the group (local rank l
// ends with shard l summed over the group), then a ring reduce-scatter and a
// ring all-gather of shard l between the groups along rail l (in place, on
// the shard's G blocks), then a ring all-gather of the shards inside the group.
struct PipelinedHier : ShardRings {
  int hops() const { return 2 * (g - 1) + 2 * (groups - 1); }
  int ways(int) const { return 1; }
  int chains() const { return 1; }  // a chunk's receives in order
  bool newest_first() const { return false; }

  Hop hop(int k, int h, int) const {
    if (h < g - 1) return reduce_scatter_in_group(k, h);
    h -= g - 1;
    if (h >= 2 * (groups - 1)) return all_gather_in_group(k, h - 2 * (groups - 1));
    const Partition shards{chunks.size(k), std::uint64_t(g)};
    const Partition blocks{shards.size(l), std::uint64_t(groups)};
    const auto block = [&](int j) {
      const std::uint64_t at = chunks.offset(k) + shards.offset(l) + blocks.offset(mod(j, groups));
      return Region{BufferId::kOutput, at, blocks.size(mod(j, groups))};
    };
    const RankMap across{l, g};  // as the phased hier's
    const int right = across(mod(group + 1, groups)), left = across(mod(group - 1, groups));
    if (h < groups - 1)
      return {.phase = "reduce-scatter between groups",
              .right = right,
              .left = left,
              .send = block(group - 1 - h),
              .recv = block(group - 2 - h),
              .reduce = true,
              .own = block(group - 2 - h)};
    h -= groups - 1;
    return {.phase = "all-gather between groups",
            .right = right,
            .left = left,
            .send = block(group - h),
            .recv = block(group - 1 - h)};
  }
};

// hier/hd in chunks, for a power-of-two G (Rabenseifner's all-reduce between
// the groups): each chunk's ring reduce-scatter inside the group, then
// log2(G) halving and log2(G) doubling exchanges of shard l between the groups
// along rail l (in place, on the shard's G blocks), then the ring all-gather
// inside the group: 2(g-1) + 2 log2(G) hops, where the ring between the groups
// takes 2(G-1). The halving pairs the nearest groups first, as hd's
// all-reduce does (virtual ranks with their bits reversed), so on a tree of
// switches the largest exchange stays under one.
struct PipelinedHierHd : ShardRings {
  int steps() const { return std::countr_zero(static_cast<unsigned>(groups)); }
  int hops() const { return 2 * (g - 1) + 2 * steps(); }
  int ways(int) const { return 1; }
  int chains() const { return 1; }
  bool newest_first() const { return false; }
  int reversed(int v) const { return bits_reversed(v, groups); }

  Hop hop(int k, int h, int) const {
    if (h < g - 1) return reduce_scatter_in_group(k, h);
    h -= g - 1;
    if (h >= 2 * steps()) return all_gather_in_group(k, h - 2 * steps());
    const Partition shards{chunks.size(k), std::uint64_t(g)};
    const Partition blocks{shards.size(l), std::uint64_t(groups)};
    const auto range = [&](int lo, int hi) {  // virtual ranks [lo, hi)'s blocks of the shard
      const std::uint64_t at = chunks.offset(k) + shards.offset(l);
      return Region{BufferId::kOutput, at + blocks.offset(lo),
                    blocks.offset(hi) - blocks.offset(lo)};
    };
    const RankMap across{l, g};
    const int v = reversed(group), log = steps();
    const bool halving = h < log;
    const int m = halving ? groups >> (h + 1) : 1 << (h - log);  // the step's mask
    const int peer = across(reversed(v ^ m));
    // Halving: v holds the blocks of the virtual ranks agreeing with it above
    // bit m (twice m of them), keeps its half and sends the other. Doubling:
    // it holds the m agreeing above bit m-1 and swaps them for its partner's m.
    const int span = halving ? 2 * m : m, lo = v / span * span, mid = lo + span / 2;
    const bool upper = (v & m) != 0;
    if (halving)
      return {.phase = "hd-halving between groups",
              .right = peer,
              .left = peer,
              .send = upper ? range(lo, mid) : range(mid, lo + span),
              .recv = upper ? range(mid, lo + span) : range(lo, mid),
              .reduce = true,
              .own = upper ? range(mid, lo + span) : range(lo, mid)};
    const int plo = upper ? lo - m : lo + m;
    return {.phase = "hd-doubling between groups",
            .right = peer,
            .left = peer,
            .send = range(lo, lo + m),
            .recv = range(plo, plo + m)};
  }
};

// Chunks a wave of the pipelined hier: hier:C sends its C chunks through the
// four rings in ceil(C / kWaveChunks) waves, each a hop behind the one before.
// One wave (up to 4 chunks) is the phased order without its fences; a wave
// per chunk the deepest pipeline, which pays a latency a wave to fill it. On
// the simulator (nodes of 8 GPUs, 2, 4 and 16 nodes, and a 32-host fat tree;
// 1-512 MiB; the best of chunks 1-256 at each size) waves of 4 chunks came
// within 11% of the best of waves of 1, 4 and 8 chunks, and within 2% of the
// phased hier where that was faster (1-8 MiB); waves of 1 lost 6-15% to it
// there, waves of 8 took up to 1.19x at 512 MiB.
constexpr int kWaveChunks = 4;

// What hier's reduce-scatter and all-gather pipelines share, for rank `me`
// = group * g + l and chunk k of each of the n blocks of `count`: the pieces,
// the G rings inside the group side by side (way j over group j's g blocks,
// a chain each), and, between a power of two of groups, the groups' virtual
// ranks (bits reversed, nearest first, as PipelinedHierHd's).
struct RailBlocks {
  int g, groups, group, l;
  std::uint64_t count;
  Partition chunks;

  Region piece(BufferId b, int block, int k) const {
    return {b, std::uint64_t(block) * count + chunks.offset(k), chunks.size(k)};
  }
  Region output(int k) const { return {BufferId::kOutput, chunks.offset(k), chunks.size(k)}; }
  // Rail l's rank in group `other_group`, and the index of its block.
  int rail_rank(int other_group) const { return other_group * g + l; }
  int steps() const { return std::countr_zero(static_cast<unsigned>(groups)); }
  int reversed(int v) const { return bits_reversed(v, groups); }
  // Hop h of way j's ring reduce-scatter: step 0 sends the rank's input,
  // later steps partial sums (in scratch); local rank l ends with block
  // j g + l summed over the group.
  Hop reduce_scatter_in_group(int k, int h, int j) const {
    const RankMap in_group{group * g, 1};
    const int sent = j * g + mod(l - 1 - h, g), got = j * g + mod(l - 2 - h, g);
    return {.phase = "reduce-scatter in group",
            .right = in_group(mod(l + 1, g)),
            .left = in_group(mod(l - 1, g)),
            .send = piece(h == 0 ? BufferId::kInput : BufferId::kScratch, sent, k),
            .recv = piece(BufferId::kScratch, got, k),
            .reduce = true,
            .own = piece(BufferId::kInput, got, k),
            .after = j,
            .chain = j};
  }
  // Hop h of way j's ring all-gather in the output, from block j g + l.
  Hop all_gather_in_group(int k, int h, int j) const {
    const RankMap in_group{group * g, 1};
    return {.phase = "all-gather in group",
            .right = in_group(mod(l + 1, g)),
            .left = in_group(mod(l - 1, g)),
            .send = piece(BufferId::kOutput, j * g + mod(l - h, g), k),
            .recv = piece(BufferId::kOutput, j * g + mod(l - 1 - h, g), k),
            .after = j,
            .chain = j};
  }
};

// hier reduce-scatter's two rings for chunk k of every block, for rank `me`
// = group * g + l (input: n blocks of `count`, block r for rank r): first,
// hop by hop, G ring reduce-scatters inside the group, one per group j over
// its g blocks [j g, j g + g) (local rank l ends with block j g + l summed
// over the group, in scratch), then a ring reduce-scatter between the groups
// along rail l of the blocks j g + l, the last hop landing in the output.
struct PipelinedHierReduceScatter : RailBlocks {
  int hops() const { return (g - 1) + (groups - 1); }
  int ways(int h) const { return h < g - 1 ? groups : 1; }
  // One chain per ring inside the group (its blocks), then the ring between
  // the groups; the latter's steps wait for the inner ring that summed the
  // block they read.
  int chains() const { return groups + 1; }
  bool newest_first() const { return false; }

  Hop hop(int k, int h, int j) const {
    if (h < g - 1) return reduce_scatter_in_group(k, h, j);
    const auto work = BufferId::kScratch;
    h -= g - 1;
    const auto rail = [&](int j) { return rail_rank(mod(j, groups)); };  // its block, its rank
    const bool last = h == groups - 2;
    return {.phase = "reduce-scatter between groups",
            .right = rail(group + 1),
            .left = rail(group - 1),
            .send = piece(work, rail(group - 1 - h), k),
            .recv = last ? output(k) : piece(work, rail(group - 2 - h), k),
            .reduce = true,
            .own = piece(work, rail(group - 2 - h), k),
            .after = h == 0 ? mod(group - 1, groups) : groups,
            .chain = groups,
            .also = mod(group - 2 - h, groups)};
  }
};

// hier/hd reduce-scatter for chunk k of every block, for a power-of-two G:
// the G rings inside the group as PipelinedHierReduceScatter's, then, in
// place of the ring between the groups, log2(G) halving exchanges along rail
// l of the blocks j g + l, one transfer per block (the rail's blocks are g
// apart in the buffer): at mask m the rank sends the m blocks of its range
// that its partner keeps and adds the partner's for the m it keeps, until it
// holds its own block, summed, which the last exchange adds into the output.
// Virtual ranks are the groups with their bits reversed, so the first and
// largest exchange is with the nearest group. Each block is its own chain.
struct PipelinedHierHdReduceScatter : RailBlocks {
  int hops() const { return (g - 1) + steps(); }
  // Halving step s (mask G >> (s + 1)) moves G >> (s + 1) blocks each way.
  int ways(int h) const { return h < g - 1 ? groups : groups >> (h - (g - 1) + 1); }
  int chains() const { return groups; }
  bool newest_first() const { return false; }

  Hop hop(int k, int h, int j) const {
    if (h < g - 1) return reduce_scatter_in_group(k, h, j);
    const auto work = BufferId::kScratch;
    const int s = h - (g - 1), m = groups >> (s + 1), v = reversed(group);
    const int lo = v / (2 * m) * (2 * m);  // the range [lo, lo + 2m) the rank holds
    const bool upper = (v & m) != 0;
    const int keep = upper ? lo + m : lo, drop = upper ? lo : lo + m;
    const int sent = reversed(drop + j), got = reversed(keep + j);  // groups of the j-th blocks
    const bool last = m == 1;
    return {.phase = "hd-halving between groups",
            .right = rail_rank(reversed(v ^ m)),
            .left = rail_rank(reversed(v ^ m)),
            .send = piece(work, rail_rank(sent), k),
            .recv = last ? output(k) : piece(work, rail_rank(got), k),
            .reduce = true,
            .own = piece(work, rail_rank(got), k),
            .after = sent,
            .chain = got};
  }
};

// hier all-gather's two rings for chunk k of every block (output: n blocks
// of `count`, the input copied to block `me` first): a ring all-gather
// between the groups along rail l of the blocks j g + l, then, hop by hop, G
// ring all-gathers inside the group, one per group j over its g blocks.
struct PipelinedHierAllGather : RailBlocks {
  int hops() const { return (groups - 1) + (g - 1); }
  int ways(int h) const { return h < groups - 1 ? 1 : groups; }
  // The ring between the groups, then one chain per ring inside the group,
  // which starts from the receive that brought its group's block. A level's
  // chunks go newest first: their hops between the groups wait only for the
  // copy, so in-order issue does not hold them behind an older chunk's ring
  // inside the group that waits for a block still crossing (2 nodes of 8
  // GPUs, 16 MiB, simulated: hier:32 47.4 us against 66.9 oldest first).
  int chains() const { return groups + 1; }
  bool newest_first() const { return true; }

  Hop hop(int k, int h, int j) const {
    if (h >= groups - 1) return all_gather_in_group(k, h - (groups - 1), j);
    const auto piece = [&](int block) { return RailBlocks::piece(BufferId::kOutput, block, k); };
    const auto rail = [&](int j) { return rail_rank(mod(j, groups)); };  // its block, its rank
    return {.phase = "all-gather between groups",
            .right = rail(group + 1),
            .left = rail(group - 1),
            .send = piece(rail(group - h)),
            .recv = piece(rail(group - 1 - h)),
            .after = groups,
            .chain = groups,
            .mark = mod(group - 1 - h, groups)};
  }
};

// hier/hd all-gather, the mirror of PipelinedHierHdReduceScatter (output: n
// blocks of `count`, the input copied to block `me` first): log2(G) doubling
// exchanges along rail l, one transfer per block (at mask m the rank sends
// the m rail blocks it holds and receives its partner's m), then, hop by hop,
// the G ring all-gathers inside the group, each starting from the receive
// that brought its group's block. Newest chunks first, as the ring's.
struct PipelinedHierHdAllGather : RailBlocks {
  int hops() const { return steps() + (g - 1); }
  int ways(int h) const { return h < steps() ? 1 << h : groups; }
  int chains() const { return groups; }
  bool newest_first() const { return true; }

  Hop hop(int k, int h, int j) const {
    if (h >= steps()) return all_gather_in_group(k, h - steps(), j);
    const auto piece = [&](int block) { return RailBlocks::piece(BufferId::kOutput, block, k); };
    const int m = 1 << h, v = reversed(group), lo = v / m * m;
    const int from = (v & m) != 0 ? lo - m : lo + m;  // the partner's range
    const int sent = reversed(lo + j), got = reversed(from + j);
    return {.phase = "hd-doubling between groups",
            .right = rail_rank(reversed(v ^ m)),
            .left = rail_rank(reversed(v ^ m)),
            .send = piece(rail_rank(sent)),
            .recv = piece(rail_rank(got)),
            .after = sent,
            .chain = got};
  }
};

// Runs a hier pipeline (PipelinedHier and its reduce-scatter and all-gather
// kin) after an optional copy: each chunk runs the rings' hops in a row, and
// a wave of chunks starts a hop after the wave before, so one wave's hops
// between groups overlap another's inside them (the phased hier leaves the
// links between groups idle while it works inside the groups, and the
// reverse). Steps are emitted by level (chunk k's hop h at level start(k) +
// h), the chunks of a level oldest first (all-gather's newest first, see
// there), so in-order issue holds no chunk behind a later one's step. No fences: a chunk's receives
// complete in order along each of its chains (each depends on its chain's previous receive and on
// the chunk's last send of the hop before), so a send that depends on its chain's last receive
// reads final data, and a receive overwrites only what the chunk's earlier sends have finished
// reading. All-reduce's chunk is one chain (with the ring or hd between the groups); reduce-scatter
// and all-gather run G rings side by side inside the group (the ways of a hop), a chain each, so
// none waits for another's latency, and their ring between the groups waits for the inner ring
// whose block it reads (with hd between the groups each block stays on its own chain). At most 3
// deps a step. Same messages and bytes as the phased hier.
template <class Pipe>
Program hier_pipeline(Pipe p, int chunks, Region copy_from = {}, Region copy_to = {}) {
  Emitter e;
  const int chains = p.chains();
  // last[k * chains + c]: chunk k's last receive along chain c
  std::vector<std::int64_t> last(std::size_t(chunks) * chains, -1), last_send(chunks, -1);
  if (copy_from.count > 0) {
    co_yield e.copy(copy_from, copy_to);
    std::fill(last.begin(), last.end(), e.last());
  }
  const int hops = p.hops(), waves = (chunks + kWaveChunks - 1) / kWaveChunks;
  const auto start = [&](int k) { return static_cast<int>(std::int64_t(k) * waves / chunks); };
  int lo = 0, hi = 0;  // the chunks under way at this level: [lo, hi)
  for (int level = 0; lo < chunks; ++level) {
    while (hi < chunks && start(hi) <= level) ++hi;
    while (lo < hi && start(lo) + hops <= level) ++lo;
    for (int i = lo; i < hi; ++i) {
      const int k = p.newest_first() ? lo + hi - 1 - i : i;
      const int h = level - start(k);
      std::int64_t* at = &last[std::size_t(k) * chains];
      const std::int64_t send_before = last_send[k];
      for (int way = 0; way < p.ways(h); ++way) {
        const Hop hop = p.hop(k, h, way);
        e.set_phase(hop.phase);
        if (hop.send.count > 0) {
          co_yield e.send(hop.right, hop.send, Deps(at[hop.after]), hop.reduce);
          last_send[k] = e.last();
        }
        if (hop.recv.count == 0) continue;
        const Deps deps(at[hop.chain], send_before, hop.also < 0 ? -1 : at[hop.also]);
        // (Not one co_yield of a conditional: GCC 12 then numbers the step twice.)
        if (hop.reduce)
          co_yield e.recv_reduce(hop.left, hop.own, hop.recv, deps);
        else
          co_yield e.recv(hop.left, hop.recv, deps);
        at[hop.chain] = e.last();
        if (hop.mark >= 0) at[hop.mark] = e.last();
      }
    }
  }
}

// hier with chunks > 1 and a ring between the groups, or hd between a
// power of two of them, as one pipeline (see hier_pipeline). Same messages
// and bytes as the phased hier: (G-1) S/(g G) a rank each way between groups.
Program pipelined_hier_all_reduce(int n, int me, std::uint64_t count, int chunks, int g,
                                  Algorithm inner) {
  const ShardRings rings{g, n / g, me / g, me % g, Partition{count, std::uint64_t(chunks)}};
  if (inner == Algorithm::kHalvingDoubling) return hier_pipeline(PipelinedHierHd{rings}, chunks);
  return hier_pipeline(PipelinedHier{rings}, chunks);
}

}  // namespace

Program hier_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size,
                        int inner_algo) {
  const int g = group_size, groups = n / g;
  const auto inner = static_cast<Algorithm>(inner_algo);
  if (chunks > 1 && g > 1 && groups > 1 && hier_all_reduce_pipelines(inner, groups))
    return pipelined_hier_all_reduce(n, me, count, chunks, g, inner);
  return phased_hier_all_reduce(n, me, count, chunks, group_size, inner_algo);
}

Program pipelined_hier_reduce_scatter(int n, int me, std::uint64_t count, int chunks, int g,
                                      bool hd) {
  const RailBlocks rail{g, n / g, me / g, me % g, count, Partition{count, std::uint64_t(chunks)}};
  if (hd) return hier_pipeline(PipelinedHierHdReduceScatter{rail}, chunks);
  return hier_pipeline(PipelinedHierReduceScatter{rail}, chunks);
}

Program pipelined_hier_all_gather(int n, int me, std::uint64_t count, int chunks, int g, bool hd) {
  const RailBlocks rail{g, n / g, me / g, me % g, count, Partition{count, std::uint64_t(chunks)}};
  const Region own{BufferId::kInput, 0, count};
  const Region mine{BufferId::kOutput, std::uint64_t(me) * count, count};
  if (hd) return hier_pipeline(PipelinedHierHdAllGather{rail}, chunks, own, mine);
  return hier_pipeline(PipelinedHierAllGather{rail}, chunks, own, mine);
}

}  // namespace cclab::coll::detail
