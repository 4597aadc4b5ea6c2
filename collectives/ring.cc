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
//
// Rail-rotated rings (`rings`, NCCL's channels on rail-optimised nodes): for
// groups of g consecutive ranks (the GPUs of a node, each with its own NIC),
// the vector is split into g parts and part c runs its own ring all-reduce,
// which visits every group in local order starting at local rank c: it
// leaves a group from local rank c-1 and enters the next at c. The plain ring
// crosses between groups on the last local rank only, so one NIC per node
// carries all the traffic between nodes; the g rings spread it over the g
// NICs. Every ring's step s is emitted before any ring's step s+1, so they run
// together. With one group (or g = 1) it is the ring. Cost: the ring's 2(n-1)
// steps of S/(ng) per ring, the traffic between groups on g links per group.
#include <algorithm>
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

namespace {

// One ring of rings_all_reduce as this rank sees it: its position, its
// neighbours, and the ring's part of the vector split among the positions.
struct Lane {
  int pos = 0, left = 0, right = 0;
  std::uint64_t base = 0;  // the part's first element
  Partition shards;
};

std::vector<Lane> rail_lanes(int n, int me, std::uint64_t count, int g) {
  const int rings = g > 1 && g < n ? g : 1;
  const Partition parts{count, std::uint64_t(rings)};
  std::vector<Lane> lanes;
  for (int c = 0; c < rings; ++c) {
    // Position p: group p / g, local rank (p + c) % g within it.
    const auto rank_at = [&](int p) {
      p = mod(p, n);
      return rings == 1 ? p : p / g * g + (p % g + c) % g;
    };
    const int pos = rings == 1 ? me : me / g * g + mod(me % g - c, g);
    lanes.push_back({pos, rank_at(pos - 1), rank_at(pos + 1), parts.offset(c),
                     Partition{parts.size(c), std::uint64_t(n)}});
  }
  return lanes;
}

}  // namespace

Program rings_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size) {
  Emitter e("reduce-scatter");
  const VectorRef in{BufferId::kInput, 0}, out{BufferId::kOutput, 0};
  if (n == 1) {
    if (count > 0) co_yield e.copy(in.at(0, count), out.at(0, count));
    co_return;
  }
  const auto lanes = rail_lanes(n, me, count, group_size);
  const std::size_t width = lanes.size() * static_cast<std::size_t>(chunks);
  // Per lane and chunk: the receive that last filled what is sent next.
  std::vector<std::int64_t> prev(width, -1), cur(width, -1);
  // The chunk of a lane's shard, at its place in the vector.
  const auto piece = [&](const Lane& l, int shard, int c, VectorRef v) {
    const Partition cp{l.shards.size(shard), std::uint64_t(chunks)};
    return v.at(l.base + l.shards.offset(shard) + cp.offset(c), cp.size(c));
  };
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter, every ring's step s in turn
    for (std::size_t i = 0; i < width; ++i) {
      const Lane& l = lanes[i / chunks];
      const int c = static_cast<int>(i % chunks);
      const Region send = piece(l, mod(l.pos - s - 1, n), c, s == 0 ? in : out);
      if (send.count > 0) co_yield e.send(l.right, send, Deps(prev[i]), /*into_reduce=*/true);
      cur[i] = -1;
      const Region own = piece(l, mod(l.pos - s - 2, n), c, in);
      if (own.count == 0) continue;
      co_yield e.recv_reduce(l.left, own, {BufferId::kOutput, own.offset, own.count});
      cur[i] = e.last();
    }
    std::swap(prev, cur);
  }
  co_yield e.fence();  // the all-gather overwrites what reduce-scatter sends read
  e.set_phase("all-gather");
  std::fill(prev.begin(), prev.end(), -1);
  for (int s = 0; s < n - 1; ++s) {
    for (std::size_t i = 0; i < width; ++i) {
      const Lane& l = lanes[i / chunks];
      const int c = static_cast<int>(i % chunks);
      const Region send = piece(l, mod(l.pos - s, n), c, out);
      if (send.count > 0) co_yield e.send(l.right, send, Deps(prev[i]));
      cur[i] = -1;
      const Region recv = piece(l, mod(l.pos - s - 1, n), c, out);
      if (recv.count == 0) continue;
      co_yield e.recv(l.left, recv);
      cur[i] = e.last();
    }
    std::swap(prev, cur);
  }
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
