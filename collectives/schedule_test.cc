#include "cclab/collectives/schedule.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <new>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "blocks.h"
#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/types.h"
#include "cclab/test/errors.h"

// Counts heap bytes so a test can bound what generating a program allocates.
namespace {
std::atomic<std::uint64_t> g_heap_bytes{0};
}
void* operator new(std::size_t n) {
  g_heap_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC 12 inlines these into callers whose pointer came from `new` and warns
// that free() does not match it (-Wmismatched-new-delete); here it does, as
// the `new` above is malloc.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's buffer comes from one): left to
// the sanitizer's allocator, they would be freed by the free() above.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_heap_bytes.fetch_add(n, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace cclab::coll {
namespace detail {
std::array<int, 3> double_tree_links(int tree, int rank, int n);
}

namespace {

TEST(Partition, BalancedAndCovering) {
  for (std::uint64_t count : {0, 1, 7, 1009}) {
    for (std::uint64_t parts : {1, 3, 8, 2000}) {
      const Partition p{count, parts};
      std::uint64_t total = 0;
      for (std::uint64_t i = 0; i < parts; ++i) {
        EXPECT_EQ(p.offset(i), total);
        EXPECT_LE(p.size(i), count / parts + 1);
        EXPECT_GE(p.size(i), count / parts);
        total += p.size(i);
      }
      EXPECT_EQ(total, count);
    }
  }
}

// The two trees of the double binary tree: each is a tree (one root, every
// other rank's parent lists it as a child, no cycles), and every rank is a
// leaf in at least one of them, so no rank carries both halves' inner-node
// traffic.
TEST(DoubleTree, TreesAreValidAndComplementary) {
  for (int n = 2; n <= 64; ++n) {
    std::vector<int> leaf_count(n, 0);
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const auto [parent, k0, k1] = detail::double_tree_links(t, r, n);
        if (parent < 0) ++roots;
        if (k0 < 0 && k1 < 0) ++leaf_count[r];
        for (int k : {k0, k1})
          if (k >= 0) {
            EXPECT_EQ(detail::double_tree_links(t, k, n)[0], r) << "n=" << n;
          }
        // Walking up reaches the root within n hops (no cycle).
        int hops = 0;
        for (int x = r; x >= 0 && hops <= n; ++hops) x = detail::double_tree_links(t, x, n)[0];
        EXPECT_LE(hops, n) << "cycle at n=" << n << " rank " << r;
      }
      EXPECT_EQ(roots, 1) << "tree " << t << " n=" << n;
    }
    for (int r = 0; r < n; ++r) EXPECT_GE(leaf_count[r], 1) << "rank " << r << " n=" << n;
  }
}

// A program made in a frame numbers its steps from the frame's first id and
// names peers and regions as the enclosing program does; the sides a step
// does not use stay empty, and deps (already the enclosing program's ids,
// from last()) are left alone.
TEST(Emitter, PutsItsStepsInItsFrame) {
  detail::Frame frame{10, {3, 2}, {}};
  frame.buffers.input = {BufferId::kOutput, 100};
  frame.buffers.scratch = {BufferId::kScratch, 7};
  detail::Emitter e("x", frame);
  const Step send = e.send(1, {BufferId::kInput, 5, 4}, detail::Deps(2));
  EXPECT_EQ(e.last(), 10);
  EXPECT_EQ(send.peer, 5);  // 3 + 2 * 1
  EXPECT_EQ(send.src, (Region{BufferId::kOutput, 105, 4}));
  EXPECT_EQ(send.dst, Region{});
  ASSERT_EQ(send.num_deps, 1);
  EXPECT_EQ(send.deps[0], 2);
  const Step recv = e.recv(0, {BufferId::kScratch, 1, 2});
  EXPECT_EQ(recv.peer, 3);
  EXPECT_EQ(recv.src, Region{});
  EXPECT_EQ(recv.dst, (Region{BufferId::kScratch, 8, 2}));
  const Step copy = e.copy({BufferId::kOutput, 0, 1}, {BufferId::kInput, 3, 1});
  EXPECT_EQ(copy.peer, -1);
  EXPECT_EQ(copy.src, (Region{BufferId::kOutput, 0, 1}));
  EXPECT_EQ(copy.dst, (Region{BufferId::kOutput, 103, 1}));
  const Step fence = e.fence();
  EXPECT_EQ(fence.src, Region{});
  EXPECT_EQ(fence.dst, Region{});
  EXPECT_EQ(e.last(), 13);
  const detail::Frame next = e.next_frame();
  EXPECT_EQ(next.first_id, 14);
  EXPECT_EQ(next.ranks(1), 5);
  EXPECT_EQ(next.buffers.input.offset, 100u);
}

// hier's phase between groups is the flat all-reduce of the ranks with the
// same local rank, on this rank's shard, in place: the flat algorithm's own
// schedule for G ranks, mapped here by hand (peer p -> l + g p, input and
// output -> the shard in the output, ids after the first phase and its fence).
// (With the ring between groups and chunks > 1, hier is one pipeline without
// phases: PipelinedHier below.)
TEST(Emitter, HierRunsTheFlatAllReduceAcrossGroupsInItsFrame) {
  const int n = 12, g = 4, groups = n / g;
  const std::uint64_t count = 1000;
  for (Algorithm inner : {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                          Algorithm::kDirect, Algorithm::kBiRing})
    for (int chunks : {1, 2})
      for (int me : {6, 11}) {
        if (inner == Algorithm::kRing && chunks > 1) continue;
        SCOPED_TRACE(fmt::format("{} chunks {} rank {}", algorithm_name(inner), chunks, me));
        const int l = me % g, group = me / g;
        const auto hier = make_schedule({CollectiveKind::kAllReduce, n, count},
                                        {Algorithm::kHierarchical, chunks, g, inner});
        std::vector<Step> steps;
        for (auto p = hier->program(me); p.next();) steps.push_back(p.value());
        const auto fence = std::find_if(steps.begin(), steps.end(),
                                        [](const Step& s) { return s.kind == StepKind::kFence; });
        ASSERT_NE(fence, steps.end());
        const std::int64_t base = fence - steps.begin() + 1;
        const std::uint64_t shard = Partition{count, std::uint64_t(g)}.offset(l);
        const std::uint64_t shard_count = Partition{count, std::uint64_t(g)}.size(l);
        const auto map = [&](Region r) {
          if (r.buffer != BufferId::kScratch) r = {BufferId::kOutput, shard + r.offset, r.count};
          return r;
        };
        const auto flat =
            make_schedule({CollectiveKind::kAllReduce, groups, shard_count}, {inner, chunks});
        std::int64_t i = base;
        for (auto p = flat->program(group); p.next(); ++i) {
          Step want = p.value();
          if (want.peer >= 0) want.peer = l + g * want.peer;
          if (want.kind != StepKind::kRecv && want.kind != StepKind::kFence)
            want.src = map(want.src);
          if (want.kind != StepKind::kSend && want.kind != StepKind::kFence)
            want.dst = map(want.dst);
          for (int d = 0; d < want.num_deps; ++d) want.deps[d] += base;
          ASSERT_LT(i, static_cast<std::int64_t>(steps.size()));
          const Step& got = steps[static_cast<std::size_t>(i)];
          EXPECT_EQ(describe(got), describe(want)) << "step " << i;
          EXPECT_EQ(got.into_reduce, want.into_reduce) << "step " << i;
          EXPECT_EQ(got.num_deps, want.num_deps) << "step " << i;
          for (int d = 0; d < want.num_deps; ++d)
            EXPECT_EQ(got.deps[d], want.deps[d]) << "step " << i;
        }
        ASSERT_LT(i, static_cast<std::int64_t>(steps.size()));
        EXPECT_EQ(steps[static_cast<std::size_t>(i)].kind, StepKind::kFence);
      }
}

// hier with the ring between groups and C > 1 chunks runs each chunk through
// four rings (reduce-scatter in the group, reduce-scatter and all-gather
// between groups, all-gather in the group) with no fence. Against closed
// forms for 12 ranks in groups of g = 4 (G = 3), chunks divisible all the
// way down: per chunk c elements, a rank sends 2(g-1) shards of c/g to its
// group neighbour and 2(G-1) blocks of c/(gG) to its rail neighbour, in that
// order of rings, each send into a reducing receive in the first two rings
// only; a step waits on at most its chunk's previous receive and send.
TEST(PipelinedHier, SendsEachChunkThroughTheFourRings) {
  const int n = 12, g = 4, groups = 3;
  for (int chunks : {2, 8}) {
    const std::uint64_t c = 10 * g * groups, count = c * chunks;
    const auto sched = make_schedule({CollectiveKind::kAllReduce, n, count},
                                     {Algorithm::kHierarchical, chunks, g, Algorithm::kRing});
    for (int me : {0, 7}) {
      SCOPED_TRACE(fmt::format("chunks {} rank {}", chunks, me));
      const int in_group = (me / g) * g + (me % g + 1) % g, rail = (me + g) % n;
      std::vector<std::vector<Step>> sends(chunks);  // by chunk, in program order
      int recvs = 0;
      for (auto p = sched->program(me); p.next();) {
        const Step& s = p.value();
        ASSERT_NE(s.kind, StepKind::kFence);
        EXPECT_LE(s.num_deps, 2);
        if (s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce) ++recvs;
        if (s.kind == StepKind::kSend) sends[s.src.offset / c].push_back(s);
      }
      EXPECT_EQ(recvs, chunks * (2 * (g - 1) + 2 * (groups - 1)));
      for (int k = 0; k < chunks; ++k) {
        ASSERT_EQ(sends[k].size(), std::size_t(2 * (g - 1) + 2 * (groups - 1)));
        for (std::size_t i = 0; i < sends[k].size(); ++i) {
          const Step& s = sends[k][i];
          const bool across = i >= std::size_t(g - 1) && i < std::size_t(g - 1 + 2 * (groups - 1));
          const bool reduces = i < std::size_t(g - 1 + groups - 1);
          EXPECT_EQ(s.peer, across ? rail : in_group) << "send " << i;
          EXPECT_EQ(s.src.count, across ? c / (g * groups) : c / g) << "send " << i;
          EXPECT_EQ(s.into_reduce, reduces) << "send " << i;
          EXPECT_GE(s.src.offset, k * c);
          EXPECT_LE(s.src.offset + s.src.count, (k + 1) * c);
        }
      }
    }
  }
}

// With hd between a power of two of groups, each chunk's hops between the
// groups are log2(G) halving exchanges and log2(G) doubling ones instead of
// the two rings. 16 ranks in groups of g = 4 (G = 4), chunks divisible all
// the way down: per chunk c elements, a rank sends g-1 shards of c/g to its
// group neighbour, then to the rail rank of group ^ 1 half its shard and of
// group ^ 2 a quarter (nearest group first, both into a reducing receive),
// then a quarter back to group ^ 2 and a half to group ^ 1, then g-1 shards
// to its group neighbour again.
TEST(PipelinedHier, HdBetweenGroupsHalvesThenDoublesNearestGroupFirst) {
  const int n = 16, g = 4, groups = 4;
  for (int chunks : {2, 8}) {
    const std::uint64_t c = 10 * g * groups, count = c * chunks, shard = c / g;
    const auto sched =
        make_schedule({CollectiveKind::kAllReduce, n, count},
                      {Algorithm::kHierarchical, chunks, g, Algorithm::kHalvingDoubling});
    for (int me : {0, 6, 13}) {
      SCOPED_TRACE(fmt::format("chunks {} rank {}", chunks, me));
      const int group = me / g, l = me % g, in_group = group * g + (l + 1) % g;
      const auto rail = [&](int other) { return other * g + l; };
      struct Want {
        int peer;
        std::uint64_t count;
        bool reduces;
      };
      std::vector<Want> want;
      for (int i = 0; i < g - 1; ++i) want.push_back({in_group, shard, true});
      want.push_back({rail(group ^ 1), shard / 2, true});
      want.push_back({rail(group ^ 2), shard / 4, true});
      want.push_back({rail(group ^ 2), shard / 4, false});
      want.push_back({rail(group ^ 1), shard / 2, false});
      for (int i = 0; i < g - 1; ++i) want.push_back({in_group, shard, false});
      std::vector<std::vector<Step>> sends(chunks);
      int recvs = 0;
      for (auto p = sched->program(me); p.next();) {
        const Step& s = p.value();
        ASSERT_NE(s.kind, StepKind::kFence);
        if (s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce) ++recvs;
        if (s.kind == StepKind::kSend) sends[s.src.offset / c].push_back(s);
      }
      EXPECT_EQ(recvs, chunks * static_cast<int>(want.size()));
      for (int k = 0; k < chunks; ++k) {
        ASSERT_EQ(sends[k].size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          EXPECT_EQ(sends[k][i].peer, want[i].peer) << "send " << i;
          EXPECT_EQ(sends[k][i].src.count, want[i].count) << "send " << i;
          EXPECT_EQ(sends[k][i].into_reduce, want[i].reduces) << "send " << i;
        }
      }
    }
  }
}

// Chunks go in waves of 4 (kWaveChunks), each a hop behind the wave before:
// with 8 chunks the program's sends begin with chunks 0-3's first hop, then
// their second hop and the first of chunks 4-7.
TEST(PipelinedHier, StartsAWaveOfFourChunksAHopAfterTheWaveBefore) {
  const int n = 8, g = 4, chunks = 8;
  const std::uint64_t c = 16, count = c * chunks;
  const auto sched = make_schedule({CollectiveKind::kAllReduce, n, count},
                                   {Algorithm::kHierarchical, chunks, g, Algorithm::kRing});
  std::vector<int> send_chunks;
  for (auto p = sched->program(1); p.next();)
    if (p.value().kind == StepKind::kSend)
      send_chunks.push_back(static_cast<int>(p.value().src.offset / c));
  ASSERT_GE(send_chunks.size(), 12u);
  EXPECT_EQ(std::vector<int>(send_chunks.begin(), send_chunks.begin() + 12),
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7}));
}

// The first two steps of rank `me`'s program that touch overlapping data,
// one of them writing, with neither ordered before the other by deps
// (transitively), a fence, or a local step (a copy or reduce completes when
// issued, so it is before every later step); "" if none. What it finds races
// whatever the order in which transfers complete, where the checker follows
// one order. Buffers are taken as distinct (out of place).
std::string unordered_conflict(const Schedule& sched, int me) {
  struct Access {
    Region region;
    bool write;
  };
  std::vector<Step> steps;
  for (auto p = sched.program(me); p.next();) steps.push_back(p.value());
  const std::size_t n = steps.size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));  // [i][j]: j before i
  std::int64_t fence = -1;  // the last step every later one comes after
  for (std::size_t i = 0; i < n; ++i) {
    const auto inherit = [&](std::size_t j) {
      before[i][j] = true;
      for (std::size_t x = 0; x < j; ++x)
        if (before[j][x]) before[i][x] = true;
    };
    if (steps[i].kind == StepKind::kFence) {
      for (std::size_t j = 0; j < i; ++j) before[i][j] = true;
      fence = static_cast<std::int64_t>(i);
      continue;
    }
    if (fence >= 0) inherit(static_cast<std::size_t>(fence));
    for (int d = 0; d < steps[i].num_deps; ++d)
      if (steps[i].deps[d] >= 0) inherit(static_cast<std::size_t>(steps[i].deps[d]));
    if (!steps[i].is_transfer()) fence = static_cast<std::int64_t>(i);  // done when issued
  }
  const auto accesses = [](const Step& s) {
    std::vector<Access> out;
    if (s.kind == StepKind::kSend || s.kind == StepKind::kRecvReduce || s.kind == StepKind::kCopy ||
        s.kind == StepKind::kReduce)
      out.push_back({s.src, false});
    if (s.kind != StepKind::kSend && s.kind != StepKind::kFence) out.push_back({s.dst, true});
    return out;
  };
  const auto overlap = [](const Region& a, const Region& b) {
    return a.buffer == b.buffer && a.count > 0 && b.count > 0 && a.offset < b.offset + b.count &&
           b.offset < a.offset + a.count;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < i; ++j) {
      if (before[i][j]) continue;
      for (const Access& a : accesses(steps[i]))
        for (const Access& b : accesses(steps[j]))
          if ((a.write || b.write) && overlap(a.region, b.region))
            return fmt::format("rank {}: step {} ({}) and step {} ({}) are unordered", me, j,
                               describe(steps[j]), i, describe(steps[i]));
    }
  return "";
}

// hier's pipelines (all-reduce with the ring or hd between groups,
// reduce-scatter and all-gather, in chunks) order every pair of conflicting
// accesses of a rank by deps, as do the phased forms (one chunk; hd between a
// number of groups not a power of two): for 8-32 ranks in groups of 2-8
// (2-16 groups), one wave and several uneven ones. Reduce-scatter's and
// all-gather's pieces of a chunk are all empty or none, so their counts
// include chunks of nothing; all-reduce's count leaves no shard of a chunk
// empty. (Where one is, the hops around it skip their steps, and the order
// of a send before a later receive into its region rests on the ring: the
// data that receive brings needs the send's data first. The checker proves
// those counts, 0-1000 elements.)
TEST(PipelinedHier, OrdersEveryConflictingAccessByDeps) {
  for (auto kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (auto [n, g] : {std::pair{8, 4}, {12, 3}, {12, 4}, {16, 2}, {16, 8}, {24, 4}, {32, 2}})
      for (int chunks : {1, 4, 9})
        for (std::uint64_t count : kind == CollectiveKind::kAllReduce
                                       ? std::vector<std::uint64_t>{1000}
                                       : std::vector<std::uint64_t>{5, 37}) {
          for (auto inner : {Algorithm::kRing, Algorithm::kHalvingDoubling}) {
            const bool pow2 = std::has_single_bit(static_cast<unsigned>(n / g));
            if (inner != Algorithm::kRing && kind != CollectiveKind::kAllReduce && !pow2) continue;
            const auto sched =
                make_schedule({kind, n, count}, {Algorithm::kHierarchical, chunks, g, inner});
            for (int me = 0; me < n; ++me)
              ASSERT_EQ(unordered_conflict(*sched, me), "")
                  << collective_name(kind) << " " << sched->name() << " n " << n << " g " << g
                  << " chunks " << chunks << " count " << count;
          }
        }
}

// Generating one rank's program of a 16,384-rank ring must cost memory
// proportional to the rank's in-flight state, not to ranks squared (a table
// of 16384^2 entries would be gigabytes; one of 16384 would be ~128 KiB).
TEST(LazyPrograms, RingOf16384RanksAllocatesLittle) {
  const int n = 16384;
  const auto sched =
      make_schedule({CollectiveKind::kAllReduce, n, 1u << 20}, {Algorithm::kRing, 4});
  const std::uint64_t before = g_heap_bytes.load();
  std::uint64_t steps = 0;
  for (auto p = sched->program(77); p.next();) ++steps;
  const std::uint64_t bytes = g_heap_bytes.load() - before;
  // Each of the 2(n-1) ring steps sends and receives 4 chunks, plus one fence.
  EXPECT_EQ(steps, 2u * (n - 1) * 4 * 2 + 1);
  EXPECT_LT(bytes, 16u * 1024) << "bytes allocated while generating";
}

TEST(LazyPrograms, HierarchicalOf16384RanksAllocatesLittle) {
  const auto sched = make_schedule({CollectiveKind::kAllReduce, 16384, 1u << 20},
                                   {Algorithm::kHierarchical, 1, 8, Algorithm::kRing});
  const std::uint64_t before = g_heap_bytes.load();
  std::uint64_t steps = 0;
  for (auto p = sched->program(12345); p.next();) ++steps;
  EXPECT_GT(steps, 2u * 2047 * 2);
  EXPECT_LT(g_heap_bytes.load() - before, 16u * 1024);
}

// Below n elements most ring steps move nothing and are skipped without being
// visited (next_live_step). Whatever is skipped, each element still makes
// n-1 hops around its ring in each phase: 2 m (n-1) sends and as many
// receives over all ranks for m elements, however they fall into rings and
// chunks, and one fence per rank between the phases.
TEST(LazyPrograms, RingsBelowOneElementARankSendEachElementAroundTheRing) {
  for (const int n : {8, 64, 1000})
    for (const std::uint64_t m : {std::uint64_t(1), std::uint64_t(3), std::uint64_t(n - 1)})
      for (const Algorithm algo : {Algorithm::kRing, Algorithm::kRings})
        for (const int chunks : {1, 3}) {
          const auto sched = make_schedule({CollectiveKind::kAllReduce, n, m}, {algo, chunks, 8});
          std::uint64_t sends = 0, recvs = 0, fences = 0;
          for (int r = 0; r < n; ++r)
            for (auto p = sched->program(r); p.next();) {
              const StepKind k = p.value().kind;
              sends += k == StepKind::kSend;
              recvs += k == StepKind::kRecv || k == StepKind::kRecvReduce;
              fences += k == StepKind::kFence;
            }
          const std::uint64_t hops = 2 * m * std::uint64_t(n - 1);
          const auto what =
              fmt::format("{} n {} m {} chunks {}", algorithm_name(algo), n, m, chunks);
          EXPECT_EQ(sends, hops) << what;
          EXPECT_EQ(recvs, hops) << what;
          EXPECT_EQ(fences, std::uint64_t(n)) << what;
        }
}

TEST(MakeSchedule, RejectsBadArgumentsNamingTheField) {
  const auto msg = [](auto fn) { return cclab::test::error_of(fn); };
  EXPECT_NE(msg([] {
              make_schedule({CollectiveKind::kAllReduce, 4, 10}, {Algorithm::kRing, 0});
            }).find("chunks"),
            std::string::npos);
  EXPECT_NE(msg([] {
              make_schedule({CollectiveKind::kAllReduce, 6, 10}, {Algorithm::kHierarchical, 1, 4});
            }).find("group-size"),
            std::string::npos);
  EXPECT_NE(msg([] {
              make_schedule({CollectiveKind::kBroadcast, 4, 10}, {Algorithm::kDirect});
            }).find("algo"),
            std::string::npos);
  EXPECT_EQ(msg([] {
              make_schedule({CollectiveKind::kReduceScatter, 4, 10},
                            {Algorithm::kHierarchical, 1, 2, Algorithm::kTree});
            }),
            "inner: 'tree' is not allowed for reducescatter (allowed: ring, hd, biring; hier's "
            "reducescatter runs rings inside its groups)");
  EXPECT_EQ(msg([] {
              make_schedule({CollectiveKind::kAllGather, 12, 10},
                            {Algorithm::kHierarchical, 1, 4, Algorithm::kHalvingDoubling});
            }),
            "inner: hd between the groups of allgather's hier needs a power-of-two number of "
            "groups, got 3 (groups of 4; allowed here: ring, biring)");
  EXPECT_NE(msg([] { parse_algorithm("rign"); }).find("rign"), std::string::npos);
  EXPECT_NE(msg([] { parse_dtype("f8"); }).find("allowed"), std::string::npos);
}

// Levels of groups (4x4): parsed from their text, named back, and refused
// where they cannot run, naming the levels and what is allowed.
TEST(MakeSchedule, GroupLevels) {
  const auto parsed = parse_group_levels("4x2x3", "--group-size");
  EXPECT_EQ(parsed.group_size, 4);
  EXPECT_EQ(parsed.upper, (std::vector<int>{2, 3}));
  EXPECT_EQ(group_levels_name(parsed.group_size, parsed.upper), "4x2x3");
  EXPECT_EQ(parse_group_levels("0", "--group-size").group_size, 0);
  EXPECT_TRUE(parse_group_levels("8", "--group-size").upper.empty());
  const auto msg = [](auto fn) { return cclab::test::error_of(fn); };
  for (const char* bad : {"", "4x", "x4", "4,4", "-4", "4xa", "1234567"})
    EXPECT_NE(msg([&] {
                parse_group_levels(bad, "--group-size");
              }).find(fmt::format("--group-size: '{}' is not a group size", bad)),
              std::string::npos)
        << bad;
  EXPECT_EQ(msg([] { parse_group_levels("4x1", "--group-size"); }),
            "--group-size: level 1 of '4x1' groups nothing (allowed: each level of several at "
            "least 2)");
  const auto hier = [](int n, CollectiveKind kind, int g, std::vector<int> upper,
                       Algorithm algo = Algorithm::kHierarchical) {
    AlgoConfig cfg{algo, 1, g};
    cfg.upper_groups = std::move(upper);
    return cclab::test::error_of([&] { make_schedule({kind, n, 10}, cfg); });
  };
  EXPECT_EQ(hier(24, CollectiveKind::kAllReduce, 4, {4}),
            "group-size: the top groups of 4x4 (16 ranks each) do not divide the rank count 24");
  EXPECT_EQ(hier(16, CollectiveKind::kAllReduce, 4, {8}),
            "group-size: the top groups of 4x8 (32 ranks each) do not divide the rank count 16");
  EXPECT_EQ(hier(16, CollectiveKind::kReduceScatter, 4, {2}), "(no error)");
  EXPECT_EQ(hier(16, CollectiveKind::kAllReduce, 4, {2}, Algorithm::kRings),
            "group-size: levels (4x2) are hier's only (allreduce, reducescatter, allgather), not "
            "rings allreduce (allowed: one group size)");
  AlgoConfig rs_hd{Algorithm::kHierarchical, 1, 4, Algorithm::kHalvingDoubling};
  rs_hd.upper_groups = {2};
  EXPECT_EQ(cclab::test::error_of([&] {
              make_schedule({CollectiveKind::kReduceScatter, 16, 10}, rs_hd);
            }),
            "inner: hd between the top groups of reducescatter's hier in levels (allowed here: "
            "ring, biring)");
  rs_hd.upper_groups.clear();
  rs_hd.rotate_levels = true;
  EXPECT_EQ(cclab::test::error_of([&] {
              make_schedule({CollectiveKind::kAllGather, 16, 10}, rs_hd);
            }),
            "inner: hd between the top groups of allgather's hier in levels (allowed here: "
            "ring, biring)");
  EXPECT_EQ(hier(16, CollectiveKind::kAllReduce, 0, {2}),
            "group-size: 0x2 has a first level of 0 (allowed: at least 2)");
  EXPECT_EQ(hier(16, CollectiveKind::kAllReduce, 4, {1}),
            "group-size: 4x1 has a level of 1 (allowed: each level at least 2)");
  EXPECT_EQ(hier(16, CollectiveKind::kAllReduce, 4, {2, 2}), "(no error)");  // one top group
  AlgoConfig three{Algorithm::kHierarchical, 2, 2, Algorithm::kBiRing};
  three.upper_groups = {3};
  EXPECT_EQ(make_schedule({CollectiveKind::kAllReduce, 12, 10}, three)->name(),
            "hier(g=2x3,inner=biring,chunks=2)");
}

TEST(MakeSchedule, DefaultGroupSize) {
  EXPECT_EQ(default_group_size(1), 1);
  EXPECT_EQ(default_group_size(7), 7);  // prime: one group
  EXPECT_EQ(default_group_size(8), 4);
  EXPECT_EQ(default_group_size(16), 4);
  EXPECT_EQ(default_group_size(6), 3);
}

}  // namespace
}  // namespace cclab::coll
