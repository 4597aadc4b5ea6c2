// Ring algorithms (reduce-scatter, all-gather, and all-reduce as the two in a
// row), the bandwidth-optimal choice for large messages.
//
// Nomenclature: the vector is split into n *shards* (one per rank, balanced by
// Partition); each shard is split into `chunks` pipeline *chunks*. In
// reduce-scatter step s (0 <= s < n-1) rank r sends shard (r-s-1) to r+1 and
// receives shard (r-s-2) from r-1, adding its own input to the partial sum;
// after n-1 steps it holds shard r complete. All-gather then circulates the
// finished shards: step s sends shard (r-s), receives shard (r-s-1).
//
// Cost for S bytes, link latency a and bandwidth B, ignoring reduction:
//   all-reduce 2(n-1)(a + S/(nB)); reduce-scatter and all-gather (n-1)(a + S/(nB)).
// With C chunks each step becomes C messages of S/(nC) bytes that can overlap
// the reduction of the previous one.
#include <vector>

#include "blocks.h"

namespace cclab::coll::detail {
namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

}  // namespace

Program ring_reduce_scatter(RingReduceScatter p) {
  Emitter e("reduce-scatter");
  if (p.n == 1) {
    if (p.final_dst.count > 0)
      co_yield e.copy(p.input.at(p.shards.offset(0), p.shards.size(0)), p.final_dst);
    co_return;
  }
  const int right = p.ranks(mod(p.me + 1, p.n)), left = p.ranks(mod(p.me - 1, p.n));
  // Id of the receive that last filled chunk c of the shard about to be sent.
  std::vector<std::int64_t> prev(p.chunks, -1), cur(p.chunks, -1);
  for (int s = 0; s < p.n - 1; ++s) {
    const int send_shard = mod(p.me - s - 1, p.n), recv_shard = mod(p.me - s - 2, p.n);
    const Partition send_chunks{p.shards.size(send_shard), std::uint64_t(p.chunks)};
    const Partition recv_chunks{p.shards.size(recv_shard), std::uint64_t(p.chunks)};
    const bool last = s == p.n - 2;
    for (int c = 0; c < p.chunks; ++c) {
      if (const auto len = send_chunks.size(c); len > 0) {
        const auto off = p.shards.offset(send_shard) + send_chunks.offset(c);
        // Step 0 sends the rank's own input; later steps forward partial sums.
        co_yield e.send(right, s == 0 ? p.input.at(off, len) : p.work.at(off, len), Deps(prev[c]),
                        /*into_reduce=*/true);
      }
      cur[c] = -1;
      if (const auto len = recv_chunks.size(c); len > 0) {
        const auto off = p.shards.offset(recv_shard) + recv_chunks.offset(c);
        const Region dst =
            last ? Region{p.final_dst.buffer, p.final_dst.offset + recv_chunks.offset(c), len}
                 : p.work.at(off, len);
        co_yield e.recv_reduce(left, p.input.at(off, len), dst);
        cur[c] = e.last();
      }
    }
    std::swap(prev, cur);
  }
}

Program ring_all_gather(RingAllGather p) {
  Emitter e("all-gather");
  const int right = p.ranks(mod(p.me + 1, p.n)), left = p.ranks(mod(p.me - 1, p.n));
  std::vector<std::int64_t> prev(p.chunks, -1), cur(p.chunks, -1);
  for (int s = 0; s < p.n - 1; ++s) {
    const int send_shard = mod(p.me - s, p.n), recv_shard = mod(p.me - s - 1, p.n);
    const Partition send_chunks{p.shards.size(send_shard), std::uint64_t(p.chunks)};
    const Partition recv_chunks{p.shards.size(recv_shard), std::uint64_t(p.chunks)};
    for (int c = 0; c < p.chunks; ++c) {
      if (const auto len = send_chunks.size(c); len > 0)
        co_yield e.send(right, p.data.at(p.shards.offset(send_shard) + send_chunks.offset(c), len),
                        Deps(prev[c]));
      cur[c] = -1;
      if (const auto len = recv_chunks.size(c); len > 0) {
        co_yield e.recv(left, p.data.at(p.shards.offset(recv_shard) + recv_chunks.offset(c), len));
        cur[c] = e.last();
      }
    }
    std::swap(prev, cur);
  }
}

Program ring_all_reduce(int n, int me, std::uint64_t count, int chunks) {
  Emitter e;
  const Partition shards{count, std::uint64_t(n)};
  const VectorRef in{BufferId::kInput, 0}, out{BufferId::kOutput, 0};
  const Region mine = out.at(shards.offset(me), shards.size(me));
  CCLAB_YIELD_ALL(
      remap(ring_reduce_scatter({n, me, {}, shards, in, out, mine, chunks}), {}, {}, e));
  // The all-gather overwrites shards that reduce-scatter sends may still read.
  co_yield e.fence();
  CCLAB_YIELD_ALL(remap(ring_all_gather({n, me, {}, shards, out, chunks}), {}, {}, e));
}

Program ring_reduce_scatter_coll(int n, int me, std::uint64_t count, int chunks) {
  // Partial sums of other ranks' shards live in scratch; only the own shard
  // lands in the (count-element) output.
  return ring_reduce_scatter({n,
                              me,
                              {},
                              Partition{count * n, std::uint64_t(n)},
                              {BufferId::kInput, 0},
                              {BufferId::kScratch, 0},
                              Region{BufferId::kOutput, 0, count},
                              chunks});
}

Program ring_all_gather_coll(int n, int me, std::uint64_t count, int chunks) {
  Emitter e;
  const Partition shards{count * n, std::uint64_t(n)};
  if (count > 0)
    co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, shards.offset(me), count});
  CCLAB_YIELD_ALL(
      remap(ring_all_gather({n, me, {}, shards, {BufferId::kOutput, 0}, chunks}), {}, {}, e));
}

}  // namespace cclab::coll::detail
