// Internal building blocks for algorithm generators: step constructors that
// number steps, rank maps for sub-groups, and composition (a smaller
// schedule's program made in a frame of a bigger one). Not installed.
#pragma once

#include <cstdint>
#include <vector>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/schedule.h"

namespace cclab::coll::detail {

// Up to kMaxDeps step ids; -1 entries mean "none". (A plain struct rather than
// an initializer_list: GCC 12 cannot keep an initializer_list's array alive
// across a co_yield.)
struct Deps {
  std::int64_t id[kMaxDeps] = {-1, -1, -1, -1};
  Deps() = default;
  Deps(std::int64_t a, std::int64_t b = -1, std::int64_t c = -1, std::int64_t d = -1)
      : id{a, b, c, d} {}
};

// x modulo n in [0, n), for ring positions counted back from a rank.
inline int mod(int x, int n) { return ((x % n) + n) % n; }

// Global rank of local index i in a sub-group: base + stride * i.
struct RankMap {
  int base = 0;
  int stride = 1;
  int operator()(int local) const { return base + stride * local; }
};

// Ranks of n relative to a root, which becomes 0, for the trees that start
// at it. At a power of two, v = r xor root: every aligned block of 2^k ranks
// (a host's, a leaf's) stays one block whatever the root, so a tree whose
// top edges join such blocks crosses between them as few times as at root
// 0. Elsewhere a rotation, v = r - root mod n.
struct RelativeRanks {
  int n = 1, root = 0;
  bool flip() const { return (n & (n - 1)) == 0; }
  int of(int r) const { return flip() ? r ^ root : (r - root + n) % n; }
  int rank(int v) const { return flip() ? v ^ root : (v + root) % n; }
};

// A contiguous vector of elements inside one buffer.
struct VectorRef {
  BufferId buffer = BufferId::kOutput;
  std::uint64_t offset = 0;
  Region at(std::uint64_t off, std::uint64_t count) const { return {buffer, offset + off, count}; }
};

// How a sub-schedule's buffers map into the enclosing program's buffers.
struct BufferMap {
  VectorRef input{BufferId::kInput, 0};
  VectorRef output{BufferId::kOutput, 0};
  VectorRef scratch{BufferId::kScratch, 0};
  Region apply(const Region& r) const;
};

// Where a program's steps land in the program that encloses it: the id of
// its first step, and its ranks and buffers as the enclosing program names
// them (by default the program is the whole one: ids from 0, no maps).
struct Frame {
  std::int64_t first_id = 0;
  RankMap ranks;
  BufferMap buffers;
};

// Numbers the steps of one program as it is generated and puts them in its
// frame (peers through frame.ranks, regions through frame.buffers). Each
// constructor returns the step to yield; last() is the id it received.
class Emitter {
 public:
  explicit Emitter(const char* phase = "", Frame frame = {})
      : phase_(phase), frame_(frame), next_(frame.first_id) {}
  void set_phase(const char* phase) { phase_ = phase; }
  std::int64_t last() const { return next_ - 1; }
  std::int64_t next_id() const { return next_; }
  void advance(std::int64_t n) { next_ += n; }
  // The frame of a program whose steps come next in this one, under the same maps.
  Frame next_frame() const { return {next_, frame_.ranks, frame_.buffers}; }

  // into_reduce: the peer's matching receive reduces (Step::into_reduce).
  Step send(int peer, Region src, Deps deps = {}, bool into_reduce = false);
  Step recv(int peer, Region dst, Deps deps = {});
  Step recv_reduce(int peer, Region src, Region dst, Deps deps = {});
  Step copy(Region src, Region dst, Deps deps = {});
  Step reduce(Region src, Region dst, Deps deps = {});
  Step fence();

 private:
  Step make(StepKind kind, int peer, Region src, Region dst, Deps deps);
  const char* phase_;
  Frame frame_;
  std::int64_t next_;
};

// Ring reduce-scatter over n ranks of `shards`: rank `me` ends holding shard
// `me`, fully reduced, in `final_dst`. Partial sums travel through `work`; each
// rank's own contribution is read from `input`.
struct RingReduceScatter {
  int n = 1, me = 0;
  RankMap ranks;
  Partition shards;
  VectorRef input, work;
  Region final_dst;
  int chunks = 1;
  Frame frame = {};  // where its steps land (Emitter)
};
Program ring_reduce_scatter(RingReduceScatter p);

// Ring all-gather: every rank holds its own shard `me` in `data`; after n-1
// steps it holds all of them.
struct RingAllGather {
  int n = 1, me = 0;
  RankMap ranks;
  Partition shards;
  VectorRef data;
  int chunks = 1;
  Frame frame = {};  // where its steps land (Emitter)
};
Program ring_all_gather(RingAllGather p);

// Yields every step of `inner` (already numbered in the enclosing program).
#define CCLAB_YIELD_ALL(gen) \
  for (auto cclab_g_ = (gen); cclab_g_.next();) co_yield cclab_g_.value()

// Yields every step of `gen`, a program made in the frame e.next_frame() (or
// a frame of its own starting at e.next_id()), and advances `e` past them.
// The sub-program numbers and maps its own steps (Emitter), so no coroutine
// stands between the two programs to do it: such a level (remap, before
// 2026-12-06) held 13% of perf's samples on a 1024-rank ring simulation
// and 18% on a hier one.
#define CCLAB_YIELD_FROM(gen, e)                  \
  for (auto cclab_g_ = (gen); cclab_g_.next();) { \
    (e).advance(1);                               \
    co_yield cclab_g_.value();                    \
  }

// Whole-collective programs over the standard buffers, numbered from 0. Each is
// defined in the file named after its algorithm; make_schedule picks one.
Program ring_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame = {});
Program rings_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size);
Program biring_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame = {});
// One phase of it over the whole vector: reduce-scatter (rank `me` ends with
// its shard of Partition{count, n}, summed, in the output) or all-gather
// (from each rank's shard in the output).
Program biring_phase(int n, int me, std::uint64_t count, int chunks, bool reduce, Frame frame);
Program tree_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame = {});
Program hd_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame = {});
// into_output: the output does not overlap the input (no scratch needed).
Program direct_all_reduce(int n, int me, std::uint64_t count, int chunks,
                          bool into_output = false,  // scratch: count unless into_output
                          Frame frame = {});
// One of the flat all-reduces (AlgoConfig::inner) in `frame`; scratch: count.
Program flat_all_reduce(Algorithm a, int n, int me, std::uint64_t count, int chunks, Frame frame);
Program hier_all_reduce(int n, int me, std::uint64_t count, int chunks, int group_size,
                        int inner_algo);  // scratch: count
// hier all-reduce over several levels of groups (`dims`: rank_grid's, the
// groups' first), phased: a reduce-scatter along each dimension in turn, on
// the shard the one before left, `inner` along the last, then the
// all-gathers back; `rotate`: a part of the vector per dimension, each
// starting from a dimension of its own, at once (levels.cc). scratch: count.
Program multilevel_hier_all_reduce(int me, std::uint64_t count, int chunks,
                                   std::vector<GridDim> dims, int inner_algo, bool rotate);
// hier's reduce-scatter and all-gather along the dimensions of `dims` in turn
// (rank_grid's; two levels: rings inside the groups, then along the rails),
// rings over whole rank blocks; `rotate`: a part of each block per
// dimension, each starting from a dimension of its own, at once (ring.cc);
// `both_ways`: each ring also the other way round, with half of each piece.
Program levels_reduce_scatter(int me, std::uint64_t count, int chunks, std::vector<GridDim> dims,
                              bool rotate, bool both_ways);  // scratch: n*count
Program levels_all_gather(int me, std::uint64_t count, int chunks, std::vector<GridDim> dims,
                          bool rotate, bool both_ways);
// Part w of the vector (all-reduce) or of each rank block (reduce-scatter,
// all-gather: offsets within a block) and the order in which it visits the
// dimensions of the rank grid: from dimension w round. levels_ways: one
// part per dimension where `rotate`, else the whole in the dimensions'
// order (levels.cc).
struct LevelsWay {
  Region part;
  std::vector<GridDim> order;
};
std::vector<LevelsWay> levels_ways(std::uint64_t count, const std::vector<GridDim>& dims,
                                   bool rotate);
// The steps of `programs` (each numbered from 0 in a frame of its own), one
// of each in turn, numbered from `first_id` with their deps renumbered. A
// program's fence waits for the others' steps too, so where one reaches a
// fence it waits there for the others to reach theirs (or end) and they
// share one: two programs that each fence between their phases (ring
// all-reduce, hd) would otherwise deadlock where one's fence stands before
// sends the other's peers wait for (levels.cc).
Program interleave(std::vector<Program> programs, std::int64_t first_id);
Program ring_reduce_scatter_coll(int n, int me, std::uint64_t count,
                                 int chunks);  // scratch: n*count
Program direct_reduce_scatter(int n, int me, std::uint64_t count, int chunks,
                              bool into_output = false);  // scratch: count unless into_output
Program ring_all_gather_coll(int n, int me, std::uint64_t count, int chunks);
Program direct_all_gather(int n, int me, std::uint64_t count, int chunks);
Program hd_reduce_scatter(int n, int me, std::uint64_t count, int chunks);  // scratch: n*count
Program rings_reduce_scatter(int n, int me, std::uint64_t count, int chunks,
                             int group_size);  // scratch: n*count
Program rings_all_gather(int n, int me, std::uint64_t count, int chunks, int group_size);
Program biring_reduce_scatter(int n, int me, std::uint64_t count, int chunks);  // scratch: n*count
Program biring_all_gather(int n, int me, std::uint64_t count, int chunks);
// hier's reduce-scatter and all-gather run the ring or (a power of two of
// groups) hd between the groups, `inner`.
Program hier_reduce_scatter(int n, int me, std::uint64_t count, int chunks, int group_size,
                            int inner_algo);  // scratch: n*count
Program hier_all_gather(int n, int me, std::uint64_t count, int chunks, int group_size,
                        int inner_algo);
// hier's reduce-scatter and all-gather between several groups of several
// ranks (g = group size) as one pipeline, as hier all-reduce's: with the ring
// between the groups (in chunks > 1), or with hd (`hd`, a power of two of
// groups; any chunk count).
Program pipelined_hier_reduce_scatter(int n, int me, std::uint64_t count, int chunks, int g,
                                      bool hd);  // scratch: n*count
Program pipelined_hier_all_gather(int n, int me, std::uint64_t count, int chunks, int g, bool hd);
Program hd_all_gather(int n, int me, std::uint64_t count, int chunks);
Program hd_broadcast(int n, int me, int root, std::uint64_t count, int chunks);
Program chain_broadcast(int n, int me, int root, std::uint64_t count, int chunks);
Program rings_broadcast(int n, int me, int root, std::uint64_t count, int chunks, int group_size);
Program biring_broadcast(int n, int me, int root, std::uint64_t count, int chunks);
Program binomial_broadcast(int n, int me, int root, std::uint64_t count, int chunks);

}  // namespace cclab::coll::detail
