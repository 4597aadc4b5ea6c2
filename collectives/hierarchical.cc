// Hierarchical two-level all-reduce for groups of g consecutive ranks (the
// GPUs of a node, the ranks of a host): rank r is local rank l = r % g of group
// r / g, and there are G = n / g groups.
//   1. intra-group ring reduce-scatter: local rank l ends with shard l (of g)
//      reduced over its group;
//   2. inter-group all-reduce of shard l among the G ranks with local rank l,
//      by the selected inner algorithm (in place on the shard);
//   3. intra-group ring all-gather of the g shards.
// Phases are composed from the other algorithms' programs, not rewritten, and
// separated by fences. Cost: the inner algorithm's on S/g bytes between groups
// plus 2 (g-1)(a_in + S/(g B_in)) inside groups: the slow links carry 1/g of
// the data. hier's reduce-scatter and all-gather are rings in both phases and
// live with the other rings in ring.cc.
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
    default:
      return ring_all_reduce(n, me, count, chunks, frame);
  }
}

Program hier_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size,
                        int inner_algo) {
  Emitter e;
  const int g = group_size, groups = n / g, l = me % g, group = me / g;
  const Partition shards{count, std::uint64_t(g)};
  const VectorRef in{BufferId::kInput, 0}, out{BufferId::kOutput, 0};
  const Region mine = out.at(shards.offset(l), shards.size(l));
  const RankMap in_group{group * g, 1}, across{l, g};
  CCLAB_YIELD_FROM(
      ring_reduce_scatter({g, l, in_group, shards, in, out, mine, chunks, e.next_frame()}), e);
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
  CCLAB_YIELD_FROM(ring_all_gather({g, l, in_group, shards, out, chunks, e.next_frame()}), e);
}

}  // namespace cclab::coll::detail
