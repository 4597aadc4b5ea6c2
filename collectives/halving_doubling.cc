// Halving-doubling collectives, for any rank count: recursive halving and
// recursive doubling over p = bit_floor(n) "virtual" ranks, log2(p) steps each.
//
// Folding (rem = n - p): the first 2*rem ranks pair up, (0,1), (2,3), ...; one
// of each pair sits out and its partner stands for both, so the p ranks left
// take virtual ranks v (pair (2v, 2v+1) -> v, r >= 2*rem -> r - rem).
//
// All-reduce (Rabenseifner): the even rank of a pair sends its whole input to
// the odd one, which adds it ("fold"). The vector is split into p blocks.
// Halving step with mask m = p/2, p/4, ..., 1: v exchanges with v^m and keeps
// the half of its current block range selected by bit m of v, so after
// log2(p) steps v holds block v fully reduced. The all-reduce numbers its
// virtual ranks with their bits reversed (Fold::nearest_first), so that its
// first and largest exchange is with the neighbour. Doubling replays the
// masks in reverse, exchanging whole ranges, until every virtual rank holds
// every block; the odd rank then sends the result back to the even one
// ("unfold").
// Cost for S bytes, power-of-two n: 2 log2(n) a + 2 (n-1)/n S/B, the ring's
// bandwidth term with logarithmic latency; a non-power-of-two n adds
// 2(a + S/B) for the fold and unfold.
//
// Reduce-scatter: the same fold and halving over the n output blocks, each
// virtual rank's range being its ranks' blocks (two for a pair); a pair's
// odd rank then sends the even one its block. Cost for S bytes of input:
// log2(p) a + (p-1)/p S/B, plus a + S/B and a + S/(nB) for a fold.
//
// All-gather: each even rank of a pair first hands its block to the odd one,
// then doubling over the grouped blocks, then the odd rank sends the even one
// the whole output. Cost for S bytes of output: log2(p) a + (p-1)/p S/B, plus
// a + S/(nB) and a + S/B for a fold.
//
// Broadcast (scatter + all-gather, as MPICH's long-message broadcast): ranks
// are taken relative to the root (by xor at a power of two), and the *even*
// rank of a pair stays, so the root (relative 0) never sits out. The root
// holds p blocks; a binomial scatter halves them (step m = p/2, ..., 1: a v
// that is a multiple of 2m sends blocks [v+m, v+2m) to v+m), leaving v with
// block v; doubling gathers them, and a pair's even rank sends the odd one
// the result. A rank's scatter sends go one after another, largest first.
// Cost for S bytes: 2 log2(p) a + 2 (p-1)/p S/B, plus a + S/B for a fold:
// below the binomial tree's log2(n)(a + S/B) once S/B outweighs a.
#include <bit>

#include "blocks.h"

namespace cclab::coll::detail {
namespace {

// The pairing above. Ranks w are relative to `root` (RelativeRanks: xor at
// a power of two, where nothing folds); `odd_stays` says which rank of a
// pair stands for both.
struct Fold {
  int n, p, rem;
  RelativeRanks rel;
  bool odd_stays;
  bool nearest_first;  // see order()
  Fold(int ranks, int root_rank, bool odd, bool nearest = false)
      : n(ranks),
        p(static_cast<int>(std::bit_floor(static_cast<unsigned>(ranks)))),
        rem(ranks - p),
        rel{ranks, root_rank},
        odd_stays(odd),
        nearest_first(nearest) {}
  bool paired(int w) const { return w < 2 * rem; }
  bool sits_out(int w) const { return paired(w) && (w % 2 == 1) != odd_stays; }
  int virt(int w) const { return paired(w) ? w / 2 : w - rem; }
  int rank(int w) const { return rel.rank(w); }  // relative -> real rank
  // Virtual rank v's real rank; `order` numbers the virtual ranks the
  // halving and doubling see (see nearest_first).
  int real(int v) const {
    v = order(v);
    return rank(v < rem ? 2 * v + (odd_stays ? 1 : 0) : v + rem);
  }
  // nearest_first: the steps see virtual rank v as v with its log2(p) bits
  // reversed, so the first halving step (mask p/2, the largest exchange)
  // pairs neighbours and the last (mask 1, the smallest) the farthest.
  int order(int v) const {
    if (!nearest_first) return v;
    int out = 0;
    for (int bit = 1; bit < p; bit *= 2) out = out * 2 + ((v & bit) != 0 ? 1 : 0);
    return out;
  }
  // The first of v's relative ranks (v = p: n), where blocks are per rank.
  int first_rank(int v) const { return v < rem ? 2 * v : v + rem; }
};

Region as_input(const Region& r) { return {BufferId::kInput, r.offset, r.count}; }

// Emits one exchange with `peer`, split into pipeline chunks: send `send_r`,
// receive into `recv_r` (reducing with `own` when reducing). Either side may
// be empty.
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

// Recursive halving: `range(lo, hi)` is virtual ranks [lo, hi)'s part of the
// work buffer, whose input counterpart (same offsets) holds this rank's
// contribution; `have_work`: the work buffer already holds its running sum.
// The last step's kept range lands in `last_dst` when it has elements.
template <class Range>
Program halving(Fold f, int v, Range range, bool have_work, Region last_dst, int chunks,
                Emitter& e) {
  e.set_phase("hd-halving");
  int lo = 0, hi = f.p;
  for (int m = f.p / 2; m >= 1; m /= 2) {
    const int mid = (lo + hi) / 2;
    const bool upper = (v & m) != 0;
    const Region send_r = upper ? range(lo, mid) : range(mid, hi);
    const Region keep = upper ? range(mid, hi) : range(lo, mid);
    const Region dst = m == 1 && last_dst.count > 0 ? last_dst : keep;
    CCLAB_YIELD_ALL(exchange({f.real(v ^ m), have_work ? send_r : as_input(send_r), dst,
                              have_work ? keep : as_input(keep), true, chunks},
                             e));
    co_yield e.fence();  // the next step sends what this one received
    have_work = true;
    (upper ? lo : hi) = mid;
  }
}

// Recursive doubling: v holds range(v, v + 1) and swaps everything it has with
// v ^ m for m = 1, 2, ..., p/2, until it holds range(0, p).
template <class Range>
Program doubling(Fold f, int v, Range range, int chunks, Emitter& e) {
  e.set_phase("hd-doubling");
  int lo = v, hi = v + 1;
  for (int m = 1; m < f.p; m *= 2) {
    // The partner holds the sibling range of the same size class.
    const int width = hi - lo;
    const bool upper = (v & m) != 0;
    const int plo = upper ? lo - width : hi, phi = upper ? lo : hi + width;
    CCLAB_YIELD_ALL(
        exchange({f.real(v ^ m), range(lo, hi), range(plo, phi), {}, false, chunks}, e));
    co_yield e.fence();
    lo = upper ? plo : lo;
    hi = upper ? hi : phi;
  }
}

// Virtual ranks [lo, hi)'s blocks when each real rank owns `count` elements of
// `buffer`.
struct RankBlocks {
  Fold f;
  BufferId buffer;
  std::uint64_t count;
  Region operator()(int lo, int hi) const {
    const auto a = static_cast<std::uint64_t>(f.first_rank(lo)) * count;
    return {buffer, a, static_cast<std::uint64_t>(f.first_rank(hi)) * count - a};
  }
};

// Virtual ranks [lo, hi)'s share of `count` elements split into p blocks.
struct EvenBlocks {
  Partition blocks;
  Region operator()(int lo, int hi) const {
    return {BufferId::kOutput, blocks.offset(lo), blocks.offset(hi) - blocks.offset(lo)};
  }
};

}  // namespace

Program hd_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame) {
  Emitter e("hd-fold", frame);
  const Region in{BufferId::kInput, 0, count}, out{BufferId::kOutput, 0, count};
  if (n == 1) {
    if (count > 0) co_yield e.copy(in, out);
    co_return;
  }
  // Nearest first: the halves exchanged first, the largest, go to the next
  // virtual rank and the smallest to the farthest, so where a host holds
  // 2^k consecutive ranks only the last k steps' small blocks (and the
  // doubling's first) leave it: on 2 hosts of 2 ranks each host sends S
  // across, not 2S. Where the blocks end up does not matter for an
  // all-reduce; reduce-scatter and all-gather keep the farthest first,
  // whose ranges are contiguous in rank order.
  const Fold f(n, 0, /*odd=*/true, /*nearest=*/true);
  if (f.sits_out(me)) {
    // Folded-away rank: hand the input over, get the result back.
    if (count > 0) {
      co_yield e.send(me + 1, in, {}, /*into_reduce=*/true);
      const auto sent = e.last();
      e.set_phase("hd-unfold");
      co_yield e.recv(me + 1, out, Deps(sent));  // in place, out is the input being sent
    }
    co_return;
  }
  bool have_out = false;  // whether out already holds this rank's running sum
  if (f.paired(me) && count > 0) {
    co_yield e.recv_reduce(me - 1, in, out);
    co_yield e.fence();
    have_out = true;
  }
  const int v = f.order(f.virt(me));
  const EvenBlocks range{Partition{count, std::uint64_t(f.p)}};
  CCLAB_YIELD_ALL(halving(f, v, range, have_out, Region{}, chunks, e));
  CCLAB_YIELD_ALL(doubling(f, v, range, chunks, e));
  if (f.paired(me) && count > 0) {
    e.set_phase("hd-unfold");
    co_yield e.send(me - 1, out);
  }
}

Program hd_reduce_scatter(int n, int me, std::uint64_t count, int chunks) {
  Emitter e("hd-fold");
  const std::uint64_t total = count * static_cast<std::uint64_t>(n);
  const Region in{BufferId::kInput, 0, total}, mine{BufferId::kOutput, 0, count};
  if (n == 1 || count == 0) {
    if (count > 0) co_yield e.copy(in, mine);
    co_return;
  }
  const Fold f(n, 0, /*odd=*/true);
  if (f.sits_out(me)) {
    co_yield e.send(me + 1, in, {}, /*into_reduce=*/true);
    const auto sent = e.last();
    e.set_phase("hd-unfold");
    co_yield e.recv(me + 1, mine, Deps(sent));  // in place, mine is part of the input being sent
    co_return;
  }
  // Partial sums live in scratch, laid out as the input; a rank standing
  // alone reduces its last step straight into its output.
  const RankBlocks range{f, BufferId::kScratch, count};
  if (f.paired(me)) {
    co_yield e.recv_reduce(me - 1, in, {BufferId::kScratch, 0, total});
    co_yield e.fence();
  }
  CCLAB_YIELD_ALL(
      halving(f, f.virt(me), range, f.paired(me), f.paired(me) ? Region{} : mine, chunks, e));
  if (f.paired(me)) {
    e.set_phase("hd-unfold");
    co_yield e.send(me - 1, {BufferId::kScratch, (me - 1) * count, count});
    co_yield e.copy({BufferId::kScratch, me * count, count}, mine);
  }
}

Program hd_all_gather(int n, int me, std::uint64_t count, int chunks) {
  Emitter e("hd-fold");
  const std::uint64_t total = count * static_cast<std::uint64_t>(n);
  const Region all{BufferId::kOutput, 0, total};
  auto block = [count](int r) { return Region{BufferId::kOutput, r * count, count}; };
  if (count == 0) co_return;
  co_yield e.copy({BufferId::kInput, 0, count}, block(me));
  if (n == 1) co_return;
  const auto copied = e.last();
  const Fold f(n, 0, /*odd=*/true);
  if (f.sits_out(me)) {
    co_yield e.send(me + 1, block(me), Deps(copied));
    const auto sent = e.last();
    e.set_phase("hd-unfold");
    co_yield e.recv(me + 1, all, Deps(sent));
    co_return;
  }
  if (f.paired(me)) co_yield e.recv(me - 1, block(me - 1));
  co_yield e.fence();
  CCLAB_YIELD_ALL(doubling(f, f.virt(me), RankBlocks{f, BufferId::kOutput, count}, chunks, e));
  if (f.paired(me)) {
    e.set_phase("hd-unfold");
    co_yield e.send(me - 1, all);
  }
}

Program hd_broadcast(int n, int me, int root, std::uint64_t count, int chunks) {
  Emitter e("broadcast");
  if (count == 0) co_return;
  const Region out{BufferId::kOutput, 0, count};
  const Fold f(n, root, /*odd=*/false);
  const int w = f.rel.of(me);
  if (w == 0) co_yield e.copy({BufferId::kInput, 0, count}, out);
  if (n == 1) co_return;
  if (f.sits_out(w)) {
    e.set_phase("hd-unfold");
    co_yield e.recv(f.rank(w - 1), out);
    co_return;
  }
  const int v = f.virt(w);
  const EvenBlocks range{Partition{count, std::uint64_t(f.p)}};
  e.set_phase("hd-scatter");
  std::int64_t sent = -1;
  for (int m = f.p / 2; m >= 1; m /= 2) {
    if (v % (2 * m) == 0) {
      // Largest range first, one send after another (at once they would share
      // this rank's link); the root sends from its input: no wait for the copy.
      const Region r = range(v + m, v + 2 * m);
      const Region src = v == 0 ? as_input(r) : r;
      const Partition cp{r.count, std::uint64_t(chunks)};
      for (int c = 0; c < chunks; ++c) {
        if (cp.size(c) == 0) continue;
        co_yield e.send(f.real(v + m), {src.buffer, src.offset + cp.offset(c), cp.size(c)},
                        Deps(sent));
        sent = e.last();
      }
    } else if (v % (2 * m) == m) {
      CCLAB_YIELD_ALL(exchange({f.real(v - m), {}, range(v, v + m), {}, false, chunks}, e));
      co_yield e.fence();  // what it forwards next is what it received
    }
  }
  co_yield e.fence();  // the root's copy, before its block leaves from the output
  CCLAB_YIELD_ALL(doubling(f, v, range, chunks, e));
  if (f.paired(w)) {
    e.set_phase("hd-unfold");
    co_yield e.send(f.rank(w + 1), out);
  }
}

}  // namespace cclab::coll::detail
