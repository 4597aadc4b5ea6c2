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
// Broadcast: part c of the vector goes down a chain along ring c from the
// root (chain_broadcast's pipeline, g of them side by side), so a node's
// bytes arrive through g NICs: ideally (n - 1)a + (n - 2 + C) S/(gCB) with C chunks.
//
// The bidirectional ring (`biring`): two rings over all n ranks, one in
// rank order (r sends to r+1) and one the other way round (r to r-1), each
// carrying half of every shard, their step s emitted together. Where a
// rank's links to its two neighbours are its own and one-way (a ring or
// torus of direct links, whose links back the plain ring leaves idle; a
// NIC's up and down links between two nodes), each half crosses on its own
// links: 2(n-1)(a + S/(2nB)), the ring's bandwidth term halved. Where both
// halves leave through one link (a rank's way into a switch) it is the
// ring's cost in twice the messages. Reduce-scatter and all-gather likewise;
// broadcast is a pipelined chain each way round (rail_broadcast, as rings'),
// each with half the vector.
//
// Two-level reduce-scatter and all-gather (`hier`), for G = n/g groups of g:
// rank r = k g + l owns block r. Reduce-scatter first runs, inside each group,
// G rings side by side, ring c over the g blocks c g .. c g + g - 1, so local
// rank l ends with blocks c g + l (every c) summed over its group; then a ring
// between groups along rail l (the ranks with local rank l) reduces those G
// blocks, each rank keeping its own. All-gather is the mirror image: the ring
// along the rail first, then the G rings inside the group. Traffic between
// groups is (G-1) blocks per rank, as the rings', in G-1 steps instead of n-1:
// (g-1)(a_in + G S/(n B_in)) + (G-1)(a_out + S/(n B_out)) for S = n blocks.
// In levels (GridRings, levels_reduce_scatter) the same along each dimension
// of the rank grid in turn, a ring per line of the dimensions not yet done;
// two levels are its case of two dimensions, and rotated levels cut each
// block into a part per dimension, each starting from its own.
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "blocks.h"
#include "cclab/collectives/algorithms.h"

namespace cclab::coll::detail {
namespace {

// The first step at or after s of a ring of n positions whose send or
// receive moves data, or n - 1 when none is left. Only the positions q with
// q mod n < live have data (a Partition's non-empty pieces come first);
// `sent` is the position step s sends, and each step sends the one before
// and receives the one before that. Below n elements most steps move
// nothing, and visiting them all made a rank's program quadratic in n.
int next_live_step(int n, int s, int sent, std::uint64_t live) {
  if (live >= static_cast<std::uint64_t>(n)) return s;
  if (live == 0) return n - 1;
  const auto wait = [live](int q) {
    return std::uint64_t(q) < live ? 0 : std::uint64_t(q) - live + 1;
  };
  const std::uint64_t skip = std::min(wait(mod(sent, n)), wait(mod(sent - 1, n)));
  return static_cast<int>(std::min<std::uint64_t>(std::uint64_t(s) + skip, std::uint64_t(n - 1)));
}

// How many of a Partition's pieces hold data.
std::uint64_t live_pieces(const Partition& p) { return std::min(p.count, p.parts); }

}  // namespace

Program ring_reduce_scatter(RingReduceScatter p) {
  Emitter e("reduce-scatter", p.frame);
  if (p.n == 1) {
    if (p.final_dst.count > 0)
      co_yield e.copy(p.input.at(p.shards.offset(0), p.shards.size(0)), p.final_dst);
    co_return;
  }
  const int right = p.ranks(mod(p.me + 1, p.n)), left = p.ranks(mod(p.me - 1, p.n));
  // Id of the receive that last filled chunk c of the shard about to be sent.
  std::vector<std::int64_t> prev(p.chunks, -1), cur(p.chunks, -1);
  // A step skipped moved nothing, so the step after it sends nothing either.
  const auto live_from = [&](int s) {
    return next_live_step(p.n, s, p.me - s - 1, live_pieces(p.shards));
  };
  for (int s = live_from(0); s < p.n - 1; s = live_from(s + 1)) {
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
  Emitter e("all-gather", p.frame);
  const int right = p.ranks(mod(p.me + 1, p.n)), left = p.ranks(mod(p.me - 1, p.n));
  std::vector<std::int64_t> prev(p.chunks, -1), cur(p.chunks, -1);
  const auto live_from = [&](int s) {
    return next_live_step(p.n, s, p.me - s, live_pieces(p.shards));
  };
  for (int s = live_from(0); s < p.n - 1; s = live_from(s + 1)) {
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

Program ring_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame) {
  Emitter e("", frame);
  const Partition shards{count, std::uint64_t(n)};
  const VectorRef in{BufferId::kInput, 0}, out{BufferId::kOutput, 0};
  const Region mine = out.at(shards.offset(me), shards.size(me));
  CCLAB_YIELD_FROM(ring_reduce_scatter({n, me, {}, shards, in, out, mine, chunks, e.next_frame()}),
                   e);
  // The all-gather overwrites shards that reduce-scatter sends may still read.
  co_yield e.fence();
  CCLAB_YIELD_FROM(ring_all_gather({n, me, {}, shards, out, chunks, e.next_frame()}), e);
}

namespace {

// The rings of rings_*: ring c (of `rings`) puts position p at group p / g,
// local rank (p + c) % g. Each ring carries part c of every shard: of the
// whole vector split among positions (all-reduce), or of the rank blocks of
// `count` elements, position p's shard being its rank's block (reduce-scatter,
// all-gather).
//
// Both ways (`biring`): two rings, ring 0 in rank order and ring 1 the
// other way round (position p is rank n-1-p, so rank r sends to r-1). The
// vector is split into shards first, by rank, and ring c carries part c of
// each, so a rank's reduced shard ends whole in one place (as the ring's
// does, which hier's phases need).
struct RailRings {
  int n = 1, g = 1, rings = 1;
  std::uint64_t count = 0;
  bool blocks = false;
  bool both_ways = false;

  RailRings(int ranks, int group_size, std::uint64_t elems, bool rank_blocks)
      : n(ranks),
        g(group_size),
        rings(group_size > 1 && group_size < ranks ? group_size : 1),
        count(elems),
        blocks(rank_blocks) {}
  static RailRings two_ways(int ranks, std::uint64_t elems, bool rank_blocks) {
    RailRings r(ranks, 1, elems, rank_blocks);
    r.rings = 2;
    r.both_ways = true;
    return r;
  }
  int rank_at(int c, int p) const {
    p = mod(p, n);
    if (both_ways) return c == 0 ? p : n - 1 - p;
    return rings == 1 ? p : p / g * g + (p % g + c) % g;
  }
  int position(int c, int rank) const {
    if (both_ways) return c == 0 ? rank : n - 1 - rank;
    return rings == 1 ? rank : rank / g * g + mod(rank % g - c, g);
  }
  // Positions q mod n < live(c) have data in ring c (next_live_step).
  std::uint64_t live(int c) const {
    const Partition parts{count, std::uint64_t(rings)};
    if (blocks) return parts.size(c) > 0 ? std::uint64_t(n) : 0;
    if (both_ways) {
      // Ring 0 is in rank order, its shards' data a prefix of its positions;
      // ring 1 has any only where some shard holds 2 elements, above n.
      if (c == 0) return std::min<std::uint64_t>(count, n);
      return count > std::uint64_t(n) ? std::uint64_t(n) : 0;
    }
    return live_pieces({parts.size(c), std::uint64_t(n)});
  }
  // Ring c's part of position q's shard, chunk k of `chunks`.
  Region piece(int c, int q, int k, int chunks, BufferId buffer) const {
    std::uint64_t off = 0, len = 0;
    if (blocks || both_ways) {
      // Part c of the block or shard of the rank at position q: a rank's
      // own is whole in one place at the end, whichever way its rings go.
      const Partition shards{count, std::uint64_t(n)};
      const auto r = static_cast<std::uint64_t>(rank_at(c, q));
      const std::uint64_t base = blocks ? r * count : shards.offset(r);
      const Partition part{blocks ? count : shards.size(r), std::uint64_t(rings)};
      off = base + part.offset(c);
      len = part.size(c);
    } else {
      const Partition parts{count, std::uint64_t(rings)};
      const Partition shards{parts.size(c), std::uint64_t(n)};
      off = parts.offset(c) + shards.offset(mod(q, n));
      len = shards.size(mod(q, n));
    }
    const Partition cp{len, std::uint64_t(chunks)};
    return {buffer, off + cp.offset(k), cp.size(k)};
  }
};

// Rings along one dimension of the rank grid over whole rank blocks (hier's
// reduce-scatter and all-gather): a ring per combination of coordinates
// along the `free` dimensions; ring c's shard at position q is the block of
// the rank at coordinate q along `along`, ring c's along `free`, and `me`'s
// along the rest (the dimensions done: `base`, their offset). Of each block
// of `count` elements, the part of `part` from `part_at`. Both ways (hier
// with `biring` inside): each of those rings twice, the first in coordinate
// order with the first half of the part, the second the other way round
// (position p at coordinate n-1-p) with the second half.
struct GridRings {
  int n = 1, rings = 1, per_way = 1;
  GridDim along;
  RankMap ranks;
  std::vector<GridDim> free;
  int base = 0;
  std::uint64_t count = 0, part_at = 0, part = 0;

  GridRings(int me, GridDim along, std::vector<GridDim> free, int base, std::uint64_t count,
            Region part, bool both_ways)
      : n(along.size),
        along(along),
        ranks{along.line_base(me), along.stride},
        free(std::move(free)),
        base(base),
        count(count),
        part_at(part.offset),
        part(part.count) {
    for (const GridDim& d : this->free) per_way *= d.size;
    rings = both_ways ? 2 * per_way : per_way;
  }
  // The coordinate along `along` at position p of ring c.
  int coord(int c, int p) const { return c < per_way ? mod(p, n) : n - 1 - mod(p, n); }
  int rank_at(int c, int p) const { return ranks(coord(c, p)); }
  int position(int c, int rank) const { return coord(c, (rank - ranks.base) / ranks.stride); }
  Partition halves() const { return {part, std::uint64_t(rings / per_way)}; }
  // The rings of the first way come first, with the larger half.
  std::uint64_t live(int c) const { return halves().size(c / per_way) > 0 ? std::uint64_t(n) : 0; }
  Region piece(int c, int q, int k, int chunks, BufferId buffer) const {
    std::uint64_t block = std::uint64_t(base) + std::uint64_t(coord(c, q)) * along.stride;
    const int way = c / per_way;
    for (int col = c % per_way; const GridDim& d : free) {
      block += std::uint64_t(col % d.size) * d.stride;
      col /= d.size;
    }
    const Partition cp{halves().size(way), std::uint64_t(chunks)};
    return {buffer, block * count + part_at + halves().offset(way) + cp.offset(k), cp.size(k)};
  }
};

// Where a rings_* phase reads and writes: the reduce-scatter's own
// contributions, partial sums and (for its last step) results; the
// all-gather's vector.
struct RingsBuffers {
  BufferId input = BufferId::kInput, work = BufferId::kOutput;
  bool result_in_output_block = false;  // reduce-scatter: the output is the rank's block
  BufferId gathered = BufferId::kOutput;
};

// n-1 steps of every ring, step s of all before any step s+1 (so they run
// together). Reduce-scatter: position p sends shard p-s-1 and adds shard
// p-s-2 into `work`; all-gather: sends shard p-s, receives p-s-1.
template <class Rings>
Program rings_phase(Rings r, int me, int chunks, bool reduce, RingsBuffers b, Emitter& e) {
  const std::size_t width = static_cast<std::size_t>(r.rings) * static_cast<std::size_t>(chunks);
  // Per ring and chunk: the receive that last filled what is sent next.
  std::vector<std::int64_t> prev(width, -1), cur(width, -1);
  // The rings with any data come first (a Partition's pieces do), and the
  // rest emit nothing: below `rings` elements most of them.
  int live_rings = 0;
  while (live_rings < r.rings && r.live(live_rings) > 0) ++live_rings;
  const std::size_t live_width = static_cast<std::size_t>(live_rings) * chunks;
  // The first step from s on where any ring moves data.
  const auto live_from = [&](int s) {
    int next = r.n - 1;
    for (int c = 0; c < live_rings; ++c)
      next = std::min(next,
                      next_live_step(r.n, s, r.position(c, me) - s - (reduce ? 1 : 0), r.live(c)));
    return next;
  };
  for (int s = live_from(0); s < r.n - 1; s = live_from(s + 1)) {
    for (std::size_t i = 0; i < live_width; ++i) {
      const int c = static_cast<int>(i / chunks), k = static_cast<int>(i % chunks);
      const int pos = r.position(c, me);
      const int right = r.rank_at(c, pos + 1), left = r.rank_at(c, pos - 1);
      const int send_q = reduce ? pos - s - 1 : pos - s, recv_q = send_q - 1;
      const Region send = r.piece(c, send_q, k, chunks,
                                  !reduce  ? b.gathered
                                  : s == 0 ? b.input
                                           : b.work);
      if (send.count > 0) co_yield e.send(right, send, Deps(prev[i]), /*into_reduce=*/reduce);
      cur[i] = -1;
      Region dst = r.piece(c, recv_q, k, chunks, reduce ? b.work : b.gathered);
      if (dst.count == 0) continue;
      if (!reduce) {
        co_yield e.recv(left, dst);
      } else {
        const Region own = r.piece(c, recv_q, k, chunks, b.input);
        if (s == r.n - 2 && b.result_in_output_block)  // the rank's own block, done
          dst = {BufferId::kOutput, dst.offset - static_cast<std::uint64_t>(me) * r.count,
                 dst.count};
        co_yield e.recv_reduce(left, own, dst);
      }
      cur[i] = e.last();
    }
    std::swap(prev, cur);
  }
}

}  // namespace

namespace {

// The rings' all-reduce, reduce-scatter and all-gather, for rings and biring.
Program rail_all_reduce(RailRings r, int me, int chunks, Frame frame) {
  Emitter e("reduce-scatter", frame);
  if (r.n == 1) {
    if (r.count > 0)
      co_yield e.copy({BufferId::kInput, 0, r.count}, {BufferId::kOutput, 0, r.count});
    co_return;
  }
  CCLAB_YIELD_ALL(rings_phase(r, me, chunks, true, {}, e));
  co_yield e.fence();  // the all-gather overwrites what reduce-scatter sends read
  e.set_phase("all-gather");
  CCLAB_YIELD_ALL(rings_phase(r, me, chunks, false, {}, e));
}

Program rail_reduce_scatter(RailRings r, int me, int chunks) {
  Emitter e("reduce-scatter");
  if (r.n == 1) {
    if (r.count > 0)
      co_yield e.copy({BufferId::kInput, 0, r.count}, {BufferId::kOutput, 0, r.count});
    co_return;
  }
  // Partial sums in scratch, laid out as the input; the last step of each
  // ring lands in the output.
  RingsBuffers b;
  b.work = BufferId::kScratch;
  b.result_in_output_block = true;
  CCLAB_YIELD_ALL(rings_phase(r, me, chunks, true, b, e));
}

Program rail_all_gather(RailRings r, int me, int chunks) {
  Emitter e("all-gather");
  if (r.count > 0)
    co_yield e.copy({BufferId::kInput, 0, r.count},
                    {BufferId::kOutput, static_cast<std::uint64_t>(me) * r.count, r.count});
  CCLAB_YIELD_ALL(rings_phase(r, me, chunks, false, {}, e));
}

}  // namespace

Program rings_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size) {
  return rail_all_reduce(RailRings(n, group_size, count, false), me, chunks, {});
}

Program rings_reduce_scatter(int n, int me, std::uint64_t count, int chunks, int group_size) {
  return rail_reduce_scatter(RailRings(n, group_size, count, true), me, chunks);
}

Program rings_all_gather(int n, int me, std::uint64_t count, int chunks, int group_size) {
  return rail_all_gather(RailRings(n, group_size, count, true), me, chunks);
}

Program biring_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame) {
  return rail_all_reduce(RailRings::two_ways(n, count, false), me, chunks, frame);
}

Program biring_reduce_scatter(int n, int me, std::uint64_t count, int chunks) {
  return rail_reduce_scatter(RailRings::two_ways(n, count, true), me, chunks);
}

Program biring_all_gather(int n, int me, std::uint64_t count, int chunks) {
  return rail_all_gather(RailRings::two_ways(n, count, true), me, chunks);
}

Program biring_phase(int n, int me, std::uint64_t count, int chunks, bool reduce, Frame frame) {
  Emitter e(reduce ? "reduce-scatter" : "all-gather", frame);
  if (n == 1) {
    if (reduce && count > 0)
      co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
    co_return;
  }
  CCLAB_YIELD_ALL(rings_phase(RailRings::two_ways(n, count, false), me, chunks, reduce, {}, e));
}

namespace {

// rings' and biring's broadcast: a pipelined chain along each of r's rings,
// ring c carrying part c of the vector.
Program rail_broadcast(RailRings r, int me, int root, int chunks) {
  const int n = r.n;
  const std::uint64_t count = r.count;
  Emitter e("broadcast");
  if (count == 0) co_return;
  if (me == root) co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
  // Level L holds the pieces that reach this rank L message times after the
  // start: chunk k of chain c at hop h from the root (ring c), L = h + k; one
  // per chain at most. A level's pieces are received together, then sent
  // on, each after its receive. The receives of the next kLevelsAhead levels
  // are posted before a level's sends (in-order issue would hold them behind
  // sends that wait), so a chain's chunks stream between two ranks over one
  // connection. Not every receive up front, as chain_broadcast does: here
  // a rank's g predecessors are different peers, whose later levels would
  // share its links with the earlier ones (all up front: 11.3 ms against
  // 10.8 for rings:64 at 64 MiB on switch:n=64; 1 level: 1.7x the time of 4
  // at 16 chunks, 4 MiB, nodes:nodes=8,gpus=8). (Weighting hops between
  // groups as slower gave 1.6x the time at 32 chunks, nodes:nodes=4,gpus=4,
  // 64 MiB.)
  constexpr std::size_t kLevelsAhead = 4;
  const Partition parts{count, std::uint64_t(r.rings)};
  struct Piece {
    int at, hop, k, c;  // at = hop + k
    Region region;
    std::int64_t got = -1;  // its receive
  };
  std::vector<Piece> pieces;
  for (int c = 0; c < r.rings; ++c) {
    const int hop = mod(r.position(c, me) - r.position(c, root), n);
    const Partition cp{parts.size(c), std::uint64_t(chunks)};
    for (int k = 0; k < chunks; ++k)
      if (cp.size(k) > 0)
        pieces.push_back(
            {hop + k, hop, k, c, {BufferId::kOutput, parts.offset(c) + cp.offset(k), cp.size(k)}});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.at, a.hop, a.k, a.c) < std::tie(b.at, b.hop, b.k, b.c);
  });
  // Level boundaries: level l is pieces [bounds[l], bounds[l+1]).
  std::vector<std::size_t> bounds{0};
  for (std::size_t i = 1; i <= pieces.size(); ++i)
    if (i == pieces.size() || pieces[i].at != pieces[i - 1].at) bounds.push_back(i);
  const std::size_t levels = bounds.size() - 1;
  std::size_t posted = 0;  // levels whose receives are posted
  for (std::size_t level = 0; level < levels; ++level) {
    for (; posted < std::min(level + 1 + kLevelsAhead, levels); ++posted)
      for (std::size_t i = bounds[posted]; i < bounds[posted + 1]; ++i) {
        Piece& p = pieces[i];
        if (p.hop == 0) continue;
        co_yield e.recv(r.rank_at(p.c, r.position(p.c, me) - 1), p.region);
        p.got = e.last();
      }
    for (std::size_t i = bounds[level]; i < bounds[level + 1]; ++i) {
      const Piece& p = pieces[i];
      if (p.hop + 1 < n)
        co_yield e.send(r.rank_at(p.c, r.position(p.c, me) + 1), p.region, Deps(p.got));
    }
  }
}

}  // namespace

Program rings_broadcast(int n, int me, int root, std::uint64_t count, int chunks, int group_size) {
  return rail_broadcast(RailRings(n, group_size, count, false), me, root, chunks);
}

Program biring_broadcast(int n, int me, int root, std::uint64_t count, int chunks) {
  return rail_broadcast(RailRings::two_ways(n, count, false), me, root, chunks);
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
  CCLAB_YIELD_FROM(
      ring_all_gather({n, me, {}, shards, {BufferId::kOutput, 0}, chunks, e.next_frame()}), e);
}

namespace {

// The rings along way.order[i]: the dimensions before it done (`me`'s
// coordinates), those after it free.
GridRings way_rings(const LevelsWay& way, int me, int i, std::uint64_t count, bool both_ways) {
  int base = 0;
  for (int k = 0; k < i; ++k) base += way.order[k].coord(me) * way.order[k].stride;
  return GridRings(me, way.order[i],
                   std::vector<GridDim>(way.order.begin() + i + 1, way.order.end()), base, count,
                   way.part, both_ways);
}

// One way's reduce-scatter: partial sums in scratch, laid out as the input,
// each dimension in place on what the one before left; the last one's
// result (the rank's own part of its block) in the output. Fenced phases.
Program way_reduce_scatter(LevelsWay way, int me, std::uint64_t count, int chunks, bool both_ways) {
  Emitter e("reduce-scatter");
  const int dims = static_cast<int>(way.order.size());
  for (int i = 0; i < dims; ++i) {
    if (i > 0) co_yield e.fence();
    RingsBuffers b;
    b.input = i == 0 ? BufferId::kInput : BufferId::kScratch;
    b.work = BufferId::kScratch;
    b.result_in_output_block = i == dims - 1;
    CCLAB_YIELD_ALL(rings_phase(way_rings(way, me, i, count, both_ways), me, chunks, true, b, e));
  }
}

// One way's all-gather: the dimensions in the reverse order, in the output.
Program way_all_gather(LevelsWay way, int me, std::uint64_t count, int chunks, bool both_ways,
                       Frame frame = {}) {
  Emitter e("all-gather", frame);
  for (int i = static_cast<int>(way.order.size()) - 1; i >= 0; --i) {
    if (i + 1 < static_cast<int>(way.order.size())) co_yield e.fence();
    CCLAB_YIELD_ALL(rings_phase(way_rings(way, me, i, count, both_ways), me, chunks, false, {}, e));
  }
}

}  // namespace

Program levels_reduce_scatter(int me, std::uint64_t count, int chunks, std::vector<GridDim> dims,
                              bool rotate, bool both_ways) {
  Emitter e("reduce-scatter");
  if (dims.empty()) {  // one rank
    if (count > 0) co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
    co_return;
  }
  const std::vector<LevelsWay> ways = levels_ways(count, dims, rotate);
  if (ways.size() == 1) {  // one way round: no interleaving to pay for
    CCLAB_YIELD_FROM(way_reduce_scatter(ways[0], me, count, chunks, both_ways), e);
    co_return;
  }
  std::vector<Program> programs;
  for (const LevelsWay& w : ways)
    programs.push_back(way_reduce_scatter(w, me, count, chunks, both_ways));
  CCLAB_YIELD_FROM(interleave(std::move(programs), e.next_id()), e);
}

Program levels_all_gather(int me, std::uint64_t count, int chunks, std::vector<GridDim> dims,
                          bool rotate, bool both_ways) {
  Emitter e("all-gather");
  if (count > 0)
    co_yield e.copy({BufferId::kInput, 0, count},
                    {BufferId::kOutput, static_cast<std::uint64_t>(me) * count, count});
  const std::vector<LevelsWay> ways = levels_ways(count, dims, rotate);
  if (ways.size() == 1) {
    CCLAB_YIELD_FROM(way_all_gather(ways[0], me, count, chunks, both_ways, e.next_frame()), e);
    co_return;
  }
  std::vector<Program> programs;
  for (const LevelsWay& w : ways)
    programs.push_back(way_all_gather(w, me, count, chunks, both_ways));
  CCLAB_YIELD_FROM(interleave(std::move(programs), e.next_id()), e);
}

Program hier_reduce_scatter(int n, int me, std::uint64_t count, int chunks, int group_size,
                            int inner_algo) {
  const int g = group_size, groups = n / g;
  const bool hd = static_cast<Algorithm>(inner_algo) == Algorithm::kHalvingDoubling;
  const bool both_ways = static_cast<Algorithm>(inner_algo) == Algorithm::kBiRing;
  if ((hd || chunks > 1) && !both_ways && g > 1 && groups > 1)
    return pipelined_hier_reduce_scatter(n, me, count, chunks, g, hd);
  return levels_reduce_scatter(me, count, chunks, rank_grid(n, g, {}), false, both_ways);
}

Program hier_all_gather(int n, int me, std::uint64_t count, int chunks, int group_size,
                        int inner_algo) {
  const int g = group_size, groups = n / g;
  const bool hd = static_cast<Algorithm>(inner_algo) == Algorithm::kHalvingDoubling;
  const bool both_ways = static_cast<Algorithm>(inner_algo) == Algorithm::kBiRing;
  if ((hd || chunks > 1) && !both_ways && g > 1 && groups > 1)
    return pipelined_hier_all_gather(n, me, count, chunks, g, hd);
  return levels_all_gather(me, count, chunks, rank_grid(n, g, {}), false, both_ways);
}

}  // namespace cclab::coll::detail
