// Direct ("one-shot") collectives for small messages: every rank exchanges
// with every other rank in a single round, trading bandwidth (each rank moves
// (n-1) times the data) for the lowest latency: one step instead of 2(n-1).
//
// All-reduce: rank r sends its whole input to every peer and sums all n inputs
// in rank order 0..n-1 into scratch, so every rank performs the same sequence
// of operations and gets the same bits. The result is copied to the output
// only after a fence, because in place the output is the input our sends are
// still reading; out of place (into_output) the sum is built in the output
// itself, with neither scratch nor the copy. Reduce-scatter works the same on
// the rank's own block; all-gather just sends the input to everyone.
//
// Cost for S bytes: a + (n-1) S/B per rank (all-reduce), and the reduction of
// n-1 vectors. Chunks split each transfer so that reduction overlaps arrival.
#include <vector>

#include "blocks.h"

namespace cclab::coll::detail {
namespace {

// Sends `region_of(peer)` to every peer (rotated so that ranks do not all
// target rank 0 first), chunk by chunk; into_reduce: the peers reduce it.
template <class RegionOf>
Program send_to_all(int n, int me, RegionOf region_of, int chunks, bool into_reduce, Emitter& e) {
  for (int k = 1; k < n; ++k) {
    const int peer = (me + k) % n;
    const Region r = region_of(peer);
    const Partition cp{r.count, std::uint64_t(chunks)};
    for (int c = 0; c < chunks; ++c)
      if (cp.size(c) > 0)
        co_yield e.send(peer, {r.buffer, r.offset + cp.offset(c), cp.size(c)}, {}, into_reduce);
  }
}

// Reduces every rank's piece into `acc` in rank order 0..n-1; `own` is this
// rank's piece (peers' pieces arrive), chunk by chunk. Rank 0 does not copy
// its piece into `acc` first: rank 1's arrives reduced with it (own op in).
Program reduce_in_rank_order(int n, int me, Region own, Region acc, int chunks, Emitter& e) {
  const Partition cp{acc.count, std::uint64_t(chunks)};
  std::vector<std::int64_t> last(chunks, -1);
  for (int j = 0; j < n; ++j) {
    for (int c = 0; c < chunks; ++c) {
      if (cp.size(c) == 0) continue;
      const Region a{acc.buffer, acc.offset + cp.offset(c), cp.size(c)};
      const Region o{own.buffer, own.offset + cp.offset(c), cp.size(c)};
      // Plain if/else: GCC 12 evaluates both arms of ?: inside co_yield.
      if (j == 0 && j == me && n > 1) {
        continue;  // folded into the next step
      } else if (j == 0 && j == me) {
        co_yield e.copy(o, a);
      } else if (j == 1 && me == 0) {
        co_yield e.recv_reduce(j, o, a);
      } else if (j == 0) {
        co_yield e.recv(j, a);
      } else if (j == me) {
        co_yield e.reduce(o, a, Deps(last[c]));
      } else {
        co_yield e.recv_reduce(j, a, a, Deps(last[c]));
      }
      last[c] = e.last();
    }
  }
}

}  // namespace

Program direct_all_reduce(int n, int me, std::uint64_t count, int chunks, bool into_output,
                          Frame frame) {
  Emitter e("direct", frame);
  const Region in{BufferId::kInput, 0, count}, out{BufferId::kOutput, 0, count};
  const Region acc = into_output ? out : Region{BufferId::kScratch, 0, count};
  if (count == 0) co_return;
  // Rank 0's piece lands plainly (reduce_in_rank_order); every other one reduces.
  CCLAB_YIELD_ALL(send_to_all(
      n, me, [&](int) { return in; }, chunks, me != 0, e));
  CCLAB_YIELD_ALL(reduce_in_rank_order(n, me, in, acc, chunks, e));
  if (into_output) co_return;
  co_yield e.fence();  // our sends have finished reading our input
  co_yield e.copy(acc, out);
}

Program direct_reduce_scatter(int n, int me, std::uint64_t count, int chunks, bool into_output) {
  Emitter e("direct");
  if (count == 0) co_return;
  auto block = [count](int r) { return Region{BufferId::kInput, count * r, count}; };
  const Region out{BufferId::kOutput, 0, count};
  const Region acc = into_output ? out : Region{BufferId::kScratch, 0, count};
  CCLAB_YIELD_ALL(send_to_all(n, me, block, chunks, me != 0, e));
  CCLAB_YIELD_ALL(reduce_in_rank_order(n, me, block(me), acc, chunks, e));
  if (into_output) co_return;
  co_yield e.fence();
  co_yield e.copy(acc, out);
}

Program direct_all_gather(int n, int me, std::uint64_t count, int chunks) {
  Emitter e("direct");
  if (count == 0) co_return;
  const Region in{BufferId::kInput, 0, count};
  co_yield e.copy(in, {BufferId::kOutput, count * me, count});
  CCLAB_YIELD_ALL(send_to_all(
      n, me, [&](int) { return in; }, chunks, false, e));
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;  // the order in which peers send to us
    const Partition cp{count, std::uint64_t(chunks)};
    for (int c = 0; c < chunks; ++c)
      if (cp.size(c) > 0)
        co_yield e.recv(peer, {BufferId::kOutput, count * peer + cp.offset(c), cp.size(c)});
  }
}

}  // namespace cclab::coll::detail
