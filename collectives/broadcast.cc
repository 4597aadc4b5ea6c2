// Broadcast from a root: a pipelined chain (ring order from the root) and a
// binomial tree. Ranks are renumbered relative to the root (the chain's
// v = r - root; the tree's v = r xor root at a power of two, RelativeRanks).
//
// Chain: v receives chunk c from v-1 and forwards it to v+1; with C chunks the
// cost is (n - 1)a + (n - 2 + C) S/(CB) where one pair's chunks stream over
// one connection, bandwidth-optimal for large S and C.
// Binomial: v's parent is v minus its lowest set bit; v sends to v + 2^k for
// every 2^k below its lowest bit (the root: below n), the farthest, which is
// the largest subtree, first: ceil(log2 n) rounds of (a + S/B) without
// chunking, pipelined over chunks otherwise. Farthest first, the edges of
// distance 2^k >= g join blocks of g consecutive ranks and the rest stay
// inside one, so where hosts hold consecutive ranks (g a power of two) each
// host receives the data once: nearest first (parent v minus its highest
// bit), 2 hosts of 2 ranks send it across twice (0->2 and 1->3) and took 1.9x
// as long over an emulated 1 Gbit/s link.
#include <bit>
#include <vector>

#include "blocks.h"

namespace cclab::coll::detail {

Program chain_broadcast(int n, int me, int root, std::uint64_t count, int chunks) {
  Emitter e("broadcast");
  if (count == 0) co_return;
  const int v = (me - root + n) % n;
  const Partition cp{count, std::uint64_t(chunks)};
  if (v == 0) co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
  // Every receive is posted up front (in-order issue would otherwise hold
  // chunk c+1's receive behind chunk c's send, which waits): the
  // predecessor's chunks then stream in back to back over one connection
  // and each hop pays the latency once, (n-1)a + (n-2+C) S/(CB).
  const auto chunk = [&](int c) { return Region{BufferId::kOutput, cp.offset(c), cp.size(c)}; };
  int live = 0;
  while (live < chunks && cp.size(live) > 0) ++live;
  std::vector<std::int64_t> got(live, -1);
  for (int c = 0; v > 0 && c < live; ++c) {
    co_yield e.recv((me - 1 + n) % n, chunk(c));
    got[c] = e.last();
  }
  for (int c = 0; v + 1 < n && c < live; ++c) co_yield e.send((me + 1) % n, chunk(c), Deps(got[c]));
}

Program binomial_broadcast(int n, int me, int root, std::uint64_t count, int chunks) {
  Emitter e("broadcast");
  if (count == 0) co_return;
  const RelativeRanks rel{n, root};
  const int v = rel.of(me);
  // The lowest set bit; the root's children start at the largest power of two below n.
  const unsigned low = v == 0 ? 2 * std::bit_floor(static_cast<unsigned>(n - 1) | 1u)
                              : static_cast<unsigned>(v) & (0u - static_cast<unsigned>(v));
  const Partition cp{count, std::uint64_t(chunks)};
  if (v == 0) co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
  for (int c = 0; c < chunks; ++c) {
    if (cp.size(c) == 0) continue;
    const Region r{BufferId::kOutput, cp.offset(c), cp.size(c)};
    std::int64_t got = -1;
    if (v > 0) {
      co_yield e.recv(rel.rank(v - static_cast<int>(low)), r);
      got = e.last();
    }
    // Children v + m for m = 2^k < low, the largest subtree (largest m)
    // first and one after another: sent at once they would share this rank's
    // link, and the largest subtree would wait for the smallest's bytes.
    std::int64_t sent = -1;
    for (unsigned m = low / 2; m >= 1; m /= 2) {
      if (v + m >= static_cast<unsigned>(n)) continue;
      co_yield e.send(rel.rank(v + static_cast<int>(m)), r, Deps(got, sent));
      sent = e.last();
    }
  }
}

}  // namespace cclab::coll::detail
