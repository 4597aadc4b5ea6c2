// Halving-doubling all-reduce (Rabenseifner): recursive-halving
// reduce-scatter, then recursive-doubling all-gather, for any rank count.
//
// With p the largest power of two <= n and rem = n - p, the first 2*rem ranks
// pair up first ("fold"): each even rank r < 2*rem sends its whole input to
// r+1, which adds it to its own and stands for both; the even rank sits out and
// gets the result back at the end ("unfold"). The p remaining ranks take
// virtual ranks v (odd r < 2*rem -> r/2, r >= 2*rem -> r - rem) and split the
// vector into p blocks. Halving step with mask m = p/2, p/4, ..., 1: v
// exchanges with v^m and keeps the half of its current block range selected by
// bit m of v, so after log2(p) steps v holds block v fully reduced. Doubling
// replays the masks in reverse, exchanging whole ranges, until every virtual
// rank holds every block.
//
// Cost for S bytes, power-of-two n: 2 log2(n) a + 2 (n-1)/n S/B, the ring's
// bandwidth term with logarithmic latency. A non-power-of-two n adds 2(a + S/B)
// for the fold and unfold.
#include <bit>

#include "blocks.h"

namespace cclab::coll::detail {
namespace {

// Emits one exchange with `peer`, split into pipeline chunks: send `send_r`,
// receive into `recv_r` (reducing with `own` when reducing).
struct ChunkedExchange {
  int peer;
  Region send_r, recv_r, own;
  bool reduce;
  int chunks;
};

Program exchange(ChunkedExchange x, Emitter& e) {
  const Partition sc{x.send_r.count, std::uint64_t(x.chunks)};
  const Partition rc{x.recv_r.count, std::uint64_t(x.chunks)};
  for (int c = 0; c < x.chunks; ++c) {
    if (sc.size(c) > 0)
      co_yield e.send(x.peer, {x.send_r.buffer, x.send_r.offset + sc.offset(c), sc.size(c)}, {},
                      /*into_reduce=*/x.reduce);  // the partner's half mirrors ours
    if (rc.size(c) == 0) continue;
    const Region dst{x.recv_r.buffer, x.recv_r.offset + rc.offset(c), rc.size(c)};
    if (x.reduce)
      co_yield e.recv_reduce(x.peer, {x.own.buffer, x.own.offset + rc.offset(c), rc.size(c)}, dst);
    else
      co_yield e.recv(x.peer, dst);
  }
}

}  // namespace

Program hd_all_reduce(int n, int me, std::uint64_t count, int chunks) {
  Emitter e("hd-fold");
  const Region in{BufferId::kInput, 0, count}, out{BufferId::kOutput, 0, count};
  if (n == 1) {
    if (count > 0) co_yield e.copy(in, out);
    co_return;
  }
  const int p = std::bit_floor(static_cast<unsigned>(n));
  const int rem = n - p;
  if (me < 2 * rem && me % 2 == 0) {
    // Folded-away rank: hand the input over, get the result back.
    if (count > 0) {
      co_yield e.send(me + 1, in, {}, /*into_reduce=*/true);
      const auto sent = e.last();
      e.set_phase("hd-unfold");
      co_yield e.recv(me + 1, out, Deps(sent));  // in place, out is the input being sent
    }
    co_return;
  }
  const int v = me < 2 * rem ? me / 2 : me - rem;
  auto real = [rem](int vr) { return vr < rem ? 2 * vr + 1 : vr + rem; };
  bool have_out = false;  // whether out already holds this rank's running sum
  if (me < 2 * rem && count > 0) {
    co_yield e.recv_reduce(me - 1, in, out);
    co_yield e.fence();
    have_out = true;
  }
  const Partition blocks{count, std::uint64_t(p)};
  auto range = [&](int lo, int hi) {
    return Region{BufferId::kOutput, blocks.offset(lo), blocks.offset(hi) - blocks.offset(lo)};
  };
  e.set_phase("hd-halving");
  int lo = 0, hi = p;
  for (int m = p / 2; m >= 1; m /= 2) {
    const int mid = (lo + hi) / 2;
    const bool upper = (v & m) != 0;
    const Region send_r = upper ? range(lo, mid) : range(mid, hi);
    const Region keep = upper ? range(mid, hi) : range(lo, mid);
    const Region send_src =
        have_out ? send_r : Region{BufferId::kInput, send_r.offset, send_r.count};
    const Region own = have_out ? keep : Region{BufferId::kInput, keep.offset, keep.count};
    CCLAB_YIELD_ALL(exchange({real(v ^ m), send_src, keep, own, true, chunks}, e));
    co_yield e.fence();  // the next step sends what this one received
    have_out = true;
    (upper ? lo : hi) = mid;
  }
  e.set_phase("hd-doubling");
  for (int m = 1; m < p; m *= 2) {
    // The partner holds the sibling range of the same size class.
    const int width = hi - lo;
    const bool upper = (v & m) != 0;
    const int plo = upper ? lo - width : hi, phi = upper ? lo : hi + width;
    CCLAB_YIELD_ALL(exchange({real(v ^ m), range(lo, hi), range(plo, phi), {}, false, chunks}, e));
    co_yield e.fence();
    lo = upper ? plo : lo;
    hi = upper ? hi : phi;
  }
  if (me < 2 * rem && count > 0) {
    e.set_phase("hd-unfold");
    co_yield e.send(me - 1, out);
  }
}

}  // namespace cclab::coll::detail
