#include "cclab/collectives/checker.h"

#include <bit>
#include <functional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/selector.h"
#include "test_util.h"

namespace cclab::coll {
namespace {

struct Case {
  CollectiveKind kind;
  Algorithm algo;
};

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                 CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    for (auto a : algorithms_for(k)) out.push_back({k, a});
  return out;
}

// Each placement with the schedule an executor builds for it.
void expect_proved(CollectiveShape shape, AlgoConfig cfg) {
  for (bool in_place : {false, true}) {
    cfg.disjoint_output = !in_place;
    const auto s = make_schedule(shape, cfg);
    const CheckResult r = check_schedule(*s, {in_place});
    ASSERT_TRUE(r.ok) << s->name() << " " << collective_name(shape.kind) << " ranks " << shape.ranks
                      << " count " << shape.count << (in_place ? " in place" : "") << ": "
                      << r.error;
  }
}

// Every algorithm of every collective, ranks 1..64, counts that include 0,
// fewer elements than ranks, and uneven splits; in and out of place. The
// large count is per rank for reduce-scatter and all-gather (n blocks of it),
// so theirs is 37: uneven over 8 rings and 3 chunks, and the checker's work
// stays that of the others (1009 a block made this test 150 s).
TEST(Checker, EveryAlgorithmIsProvedForRanks1To64) {
  const int max_ranks = test::reduced_grid() ? 17 : 64;
  for (const auto& c : all_cases()) {
    const bool blocks =
        c.kind == CollectiveKind::kReduceScatter || c.kind == CollectiveKind::kAllGather;
    const std::uint64_t large = blocks ? 37 : 1009;
    for (int n = 1; n <= max_ranks; ++n) {
      for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(n - 1),
                                  std::uint64_t(n + 1), large}) {
        expect_proved({c.kind, n, count, (n * 5 / 7) % n}, {c.algo, 1});
        if (n <= 16) expect_proved({c.kind, n, count, n - 1}, {c.algo, 3});
      }
    }
  }
}

// With the ring between groups and chunks > 1, hier is the pipelined form, and
// with hd between a power of two of groups: 9 chunks make 3 waves of uneven
// size (kWaveChunks 4), on uneven splits.
TEST(Checker, HierarchicalWithEveryInnerAndGroupSize) {
  for (int n : {4, 6, 8, 9, 12, 16}) {
    for (int g = 1; g <= n; ++g) {
      if (n % g) continue;
      for (auto inner : {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                         Algorithm::kDirect, Algorithm::kBiRing})
        for (int chunks : {2, 9}) {
          if (chunks == 9 && (inner == Algorithm::kTree || inner == Algorithm::kDirect)) continue;
          for (std::uint64_t count : {1, 37, 1009})
            expect_proved({CollectiveKind::kAllReduce, n, count},
                          {Algorithm::kHierarchical, chunks, g, inner});
        }
    }
  }
}

// Every way to split n into nested levels of groups (each at least 2; the
// top level's groups, n over their product, may be one): the level lists.
void nested_levels(int n, std::vector<int>& prefix, std::vector<std::vector<int>>& out) {
  int span = 1;
  for (int level : prefix) span *= level;
  if (prefix.size() >= 2) out.push_back(prefix);
  for (int level = 2; span * level <= n; ++level) {
    if ((n / span) % level) continue;
    prefix.push_back(level);
    nested_levels(n, prefix, out);
    prefix.pop_back();
  }
}

// hier over three or more levels (4x4 on 64 ranks: a 4x4x4 torus' x, y and
// z), one way round and rotated, with every inner algorithm, in chunks, on
// uneven splits.
TEST(Checker, HierarchicalOverEveryNestingOfLevels) {
  for (int n : {8, 12, 16, 18, 24, 27, 64}) {
    if (test::reduced_grid() && (n == 24 || n == 64)) continue;  // sanitizers: the smaller
    std::vector<int> prefix;
    std::vector<std::vector<int>> all;
    nested_levels(n, prefix, all);
    ASSERT_FALSE(all.empty()) << n;
    for (const auto& levels : all)
      for (auto inner : inner_algorithms())
        for (int chunks : {1, 3})
          for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{37}, std::uint64_t{1009}})
            for (bool rotate : {false, true}) {
              // 64 ranks (57 nestings): a 4x4x4 torus, 4x4 and 2x2x2x2x2x2, the
              // large count only (the checker's time grows with the ranks).
              const bool cube = levels == std::vector<int>{4, 4} ||
                                levels == std::vector<int>{4, 4, 4} ||
                                levels == std::vector<int>{2, 2, 2, 2, 2, 2};
              if (n == 64 && (count != 1009 || !cube)) continue;
              AlgoConfig cfg{Algorithm::kHierarchical, chunks, levels.front(), inner};
              cfg.upper_groups.assign(levels.begin() + 1, levels.end());
              cfg.rotate_levels = rotate;
              expect_proved({CollectiveKind::kAllReduce, n, count}, cfg);
            }
  }
}

// Two levels rotated: half the vector reduce-scatters inside the groups
// first, the other half across them first; every group size, with 1 and n
// (a level of one rank) too.
TEST(Checker, HierarchicalWithItsTwoLevelsRotated) {
  for (int n : {2, 4, 6, 8, 9, 12})
    for (int g = 1; g <= n; ++g) {
      if (n % g) continue;
      for (auto inner : inner_algorithms())
        for (int chunks : {1, 3})
          for (std::uint64_t count : {0, 1, 37, 1009}) {
            AlgoConfig cfg{Algorithm::kHierarchical, chunks, g, inner};
            cfg.rotate_levels = true;
            expect_proved({CollectiveKind::kAllReduce, n, count}, cfg);
          }
    }
}

// Reduce-scatter and all-gather in levels: rings over whole rank blocks
// along each dimension of the rank grid in turn (all-gather: the reverse),
// one way and rotated (a part of each block per dimension), every nesting
// of 8, 12, 18 and 27 ranks and 4x4, 4x4x4 of 64, chunks 1 and 3; each
// ring one way and, with biring inside, both ways round (a count of 1: the
// second way's half empty).
TEST(Checker, HierarchicalReduceScatterAndAllGatherInLevels) {
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (int n : {8, 12, 18, 27, 64}) {
      if (test::reduced_grid() && n == 64) continue;
      std::vector<int> prefix;
      std::vector<std::vector<int>> all;
      nested_levels(n, prefix, all);
      ASSERT_FALSE(all.empty()) << n;
      for (const auto& levels : all)
        for (auto inner : {Algorithm::kRing, Algorithm::kBiRing})
          for (int chunks : {1, 3})
            for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{7}})
              for (bool rotate : {false, true}) {
                const bool cube =
                    levels == std::vector<int>{4, 4} || levels == std::vector<int>{4, 4, 4};
                if (n == 64 && (count != 7 || !cube)) continue;
                AlgoConfig cfg{Algorithm::kHierarchical, chunks, levels.front(), inner};
                cfg.upper_groups.assign(levels.begin() + 1, levels.end());
                cfg.rotate_levels = rotate;
                expect_proved({kind, n, count}, cfg);
              }
    }
  // Two levels rotated, every group size of 12 (1 and 12 too).
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (auto inner : {Algorithm::kRing, Algorithm::kBiRing})
      for (int g : {1, 2, 3, 4, 6, 12}) {
        AlgoConfig cfg{Algorithm::kHierarchical, 1, g, inner};
        cfg.rotate_levels = true;
        expect_proved({kind, 12, 5}, cfg);
      }
}

TEST(Checker, HierarchicalReduceScatterAndAllGatherWithEveryGroupSize) {
  for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (int n : {1, 2, 4, 6, 8, 9, 12, 16, 18})
      for (int g = 1; g <= n; ++g) {
        if (n % g) continue;
        for (std::uint64_t count : {0, 1, 7, 37})
          for (int chunks : {1, 3}) {
            expect_proved({kind, n, count}, {Algorithm::kHierarchical, chunks, g});
            if (std::has_single_bit(static_cast<unsigned>(n / g)))  // hd between the groups
              expect_proved({kind, n, count},
                            {Algorithm::kHierarchical, chunks, g, Algorithm::kHalvingDoubling});
          }
      }
}

// A budget of steps stops a check unproved, at exactly that many steps; one
// that covers the whole schedule changes nothing. Direct all-reduce issues
// all its n(n-1) sends in the first round, so its budget runs out mid-round.
TEST(Checker, MaxStepsStopsUnprovedAtTheBudget) {
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kDirect}) {
    const auto s = make_schedule({CollectiveKind::kAllReduce, 16, 1000}, {algo, 1});
    const CheckResult whole = check_schedule(*s);
    ASSERT_TRUE(whole.ok) << whole.error;
    EXPECT_GT(whole.transfers, 16u * 14);  // ring: 2(n-1) a rank; direct: (n-1)
    const CheckResult enough = check_schedule(*s, {false, whole.steps});
    EXPECT_TRUE(enough.ok) << enough.error;
    EXPECT_FALSE(enough.stopped);
    EXPECT_EQ(enough.steps, whole.steps);
    const std::uint64_t half = whole.steps / 2;
    const CheckResult cut = check_schedule(*s, {false, half});
    EXPECT_FALSE(cut.ok);
    EXPECT_TRUE(cut.stopped);
    EXPECT_EQ(cut.steps, half);
    EXPECT_NE(cut.error.find(fmt::format("stopped after {} steps", half)), std::string::npos)
        << cut.error;
  }
}

// Broadcast's chains in the chunk counts the built-in rule gives them
// (choose_config at 2 MiB to 256 MiB: ring, biring each way round, rings on
// the rails), from three roots, over 4099 elements: chunks of 16 elements
// and less, the last ones uneven.
TEST(Checker, BroadcastChainsInTheRulesChunkCounts) {
  std::set<std::string> proved;
  for (int n : {3, 8, 12, 16}) {
    for (std::uint64_t bytes : {2u << 20, 32u << 20, 256u << 20}) {
      for (int way = 0; way < 3; ++way) {
        AlgoConfig asked{Algorithm::kAuto, 1, n % 4 == 0 ? 4 : 0};
        asked.prefer_biring = way == 1;
        asked.prefer_rails = way == 2;
        const AlgoConfig chosen =
            choose_config({CollectiveKind::kBroadcast, n, bytes / 4, 0}, 4, asked);
        if (chosen.chunks == 1) continue;  // the unpipelined rule
        for (int root : {0, n / 2, n - 1})
          expect_proved({CollectiveKind::kBroadcast, n, 4099, root}, chosen);
        proved.insert(candidate_label(chosen));
      }
    }
  }
  for (const char* label : {"ring:8", "ring:256", "biring:4", "biring:128", "rings:2", "rings:64"})
    EXPECT_TRUE(proved.count(label))
        << label << " not among " << fmt::format("{}", fmt::join(proved, ", "));
}

TEST(Checker, LargeRing) {
  const auto s = make_schedule({CollectiveKind::kAllReduce, 1024, 4096}, {Algorithm::kRing, 1});
  const CheckResult r = check_schedule(*s);
  EXPECT_TRUE(r.ok) << r.error;
  // 2(n-1) transfers per rank.
  EXPECT_EQ(r.transfers, 1024u * 2 * 1023);
}

// --- Deliberately broken schedules: the checker must say what is wrong. ---

// Wraps a real schedule and rewrites or drops steps of one rank.
class Mutated final : public Schedule {
 public:
  using Fn = std::function<bool(int rank, std::int64_t id, Step&)>;  // false drops
  Mutated(std::unique_ptr<Schedule> base, Fn fn) : base_(std::move(base)), fn_(std::move(fn)) {}
  const CollectiveShape& shape() const override { return base_->shape(); }
  std::string name() const override { return "mutated " + base_->name(); }
  std::uint64_t scratch_count() const override { return base_->scratch_count(); }
  Program program(int rank) const override { return rewrite(base_->program(rank), rank, fn_); }

 private:
  static Program rewrite(Program p, int rank, Fn fn) {
    std::int64_t id = 0;
    while (p.next()) {
      Step s = p.value();
      if (fn(rank, id++, s)) co_yield s;
    }
  }
  std::unique_ptr<Schedule> base_;
  Fn fn_;
};

// Explicit per-rank step lists for hand-made failures.
class Listed final : public Schedule {
 public:
  Listed(int ranks, std::uint64_t count, std::vector<std::vector<Step>> steps)
      : shape_{CollectiveKind::kAllReduce, ranks, count}, steps_(std::move(steps)) {}
  const CollectiveShape& shape() const override { return shape_; }
  std::string name() const override { return "listed"; }
  Program program(int rank) const override { return list(steps_[rank]); }

 private:
  static Program list(std::vector<Step> v) {
    for (const Step& s : v) co_yield s;
  }
  CollectiveShape shape_;
  std::vector<std::vector<Step>> steps_;
};

Step step(StepKind k, int peer, Region src, Region dst, std::vector<std::int64_t> deps = {}) {
  Step s;
  s.kind = k;
  s.peer = peer;
  s.src = src;
  s.dst = dst;
  for (auto d : deps) s.deps[s.num_deps++] = d;
  return s;
}

std::string error_of(const Schedule& s, bool in_place = false) {
  const CheckResult r = check_schedule(s, {in_place});
  EXPECT_FALSE(r.ok) << "checker accepted a broken schedule";
  return r.error;
}

std::unique_ptr<Schedule> ring(int n, std::uint64_t count) {
  return make_schedule({CollectiveKind::kAllReduce, n, count}, {Algorithm::kRing, 1});
}

TEST(CheckerCatches, MissingDependencyAsRace) {
  // Rank 2's all-gather forwards a shard before it has arrived.
  Mutated m(ring(4, 8), [](int r, std::int64_t, Step& s) {
    if (r == 2 && s.kind == StepKind::kSend && std::string(s.phase) == "all-gather") s.num_deps = 0;
    return true;
  });
  const auto e = error_of(m);
  EXPECT_NE(e.find("rank 2 step"), std::string::npos) << e;
  EXPECT_NE(e.find("races with unfinished step"), std::string::npos) << e;
}

TEST(CheckerCatches, DroppedSend) {
  // Rank 1's first send becomes a no-op fence (ids stay the same).
  Mutated m(ring(4, 8), [](int r, std::int64_t id, Step& s) {
    if (r == 1 && id == 0) s = Step{};
    return true;
  });
  // Rank 2 now pairs its first receive with rank 1's next message.
  const auto e = error_of(m);
  EXPECT_NE(e.find("rank 2"), std::string::npos) << e;
}

TEST(CheckerCatches, WrongOffset) {
  // Rank 3 receives its first reduce-scatter chunk one element too far.
  Mutated m(ring(4, 16), [](int r, std::int64_t, Step& s) {
    if (r == 3 && s.kind == StepKind::kRecvReduce && s.dst.offset == 4)
      s.dst.offset = 5, s.src.offset = 5;
    return true;
  });
  const auto e = error_of(m);
  EXPECT_NE(e.find("rank"), std::string::npos) << e;
}

TEST(CheckerCatches, ASendMarkedAsTheOtherKindOfItsReceive) {
  // Rank 0's first reduce-scatter send says plain copy; rank 1 reduces it.
  // (The gloo executor would cut the two ends into different segments.)
  Mutated m(ring(2, 8), [](int r, std::int64_t id, Step& s) {
    if (r == 0 && id == 0) s.into_reduce = false;
    return true;
  });
  const auto e = error_of(m);
  EXPECT_NE(e.find("rank 0 step 0"), std::string::npos) << e;
  EXPECT_NE(e.find("sends to rank 1 marked as a plain copy, but its matching receive (step 1) "
                   "reduces"),
            std::string::npos)
      << e;
}

TEST(CheckerCatches, LengthMismatch) {
  Mutated m(ring(2, 8), [](int r, std::int64_t id, Step& s) {
    if (r == 0 && id == 0) s.src.count -= 1;
    return true;
  });
  const auto e = error_of(m);
  EXPECT_NE(e.find("sends 3 elements to rank 1"), std::string::npos) << e;
}

TEST(CheckerCatches, Deadlock) {
  // Both ranks wait for the other's data before sending theirs.
  const Region in{BufferId::kInput, 0, 4}, out{BufferId::kOutput, 0, 4};
  std::vector<std::vector<Step>> steps(2);
  for (int r = 0; r < 2; ++r)
    steps[r] = {step(StepKind::kRecvReduce, 1 - r, in, out),
                step(StepKind::kSend, 1 - r, in, {}, {0})};
  const auto e = error_of(Listed(2, 4, steps));
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 cannot issue step 1"), std::string::npos) << e;
}

TEST(CheckerCatches, DoubleContribution) {
  // Rank 1 adds rank 0's data twice.
  const Region in{BufferId::kInput, 0, 4}, out{BufferId::kOutput, 0, 4};
  std::vector<std::vector<Step>> steps(2);
  steps[0] = {step(StepKind::kSend, 1, in, {}), step(StepKind::kSend, 1, in, {}),
              step(StepKind::kRecv, 1, {}, out, {0, 1})};
  steps[0][0].into_reduce = steps[0][1].into_reduce = true;  // rank 1 reduces both
  steps[1] = {step(StepKind::kRecvReduce, 0, in, out),
              step(StepKind::kRecvReduce, 0, out, out, {0}),
              step(StepKind::kSend, 0, out, {}, {1})};
  const auto e = error_of(Listed(2, 4, steps));
  EXPECT_NE(e.find("rank 1 step 1"), std::string::npos) << e;
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
}

TEST(CheckerCatches, MissingContribution) {
  // Rank 1 copies instead of reducing: rank 1's own data is lost.
  const Region in{BufferId::kInput, 0, 4}, out{BufferId::kOutput, 0, 4};
  std::vector<std::vector<Step>> steps(2);
  steps[0] = {step(StepKind::kSend, 1, in, {}), step(StepKind::kRecv, 1, {}, out, {0})};
  steps[1] = {step(StepKind::kRecv, 0, {}, out), step(StepKind::kSend, 0, out, {}, {0})};
  const auto e = error_of(Listed(2, 4, steps));
  EXPECT_NE(e.find("expected {0-1}"), std::string::npos) << e;
}

TEST(CheckerCatches, InPlaceOverwriteOfUnsentInput) {
  // Halving-doubling on 3 ranks: rank 0 folds away (sends its input, gets the
  // result back). Without the receive's dependency on that send, out of place
  // is still correct, but in place the result overwrites the input while the
  // send may still be reading it.
  Mutated m(make_schedule({CollectiveKind::kAllReduce, 3, 6}, {Algorithm::kHalvingDoubling, 1}),
            [](int r, std::int64_t, Step& s) {
              if (r == 0 && s.kind == StepKind::kRecv) s.num_deps = 0;
              return true;
            });
  const auto ok = check_schedule(m, {false});
  EXPECT_TRUE(ok.ok) << ok.error;
  const auto e = error_of(m, true);
  EXPECT_NE(e.find("rank 0 step 1"), std::string::npos) << e;
  EXPECT_NE(e.find("races"), std::string::npos) << e;
}

TEST(CheckerCatches, AnOutOfPlaceScheduleRunInPlace) {
  // direct with disjoint_output builds the sum in the output, without scratch
  // or the final copy; in place that output is the input still being read.
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter}) {
    AlgoConfig cfg{Algorithm::kDirect, 1};
    cfg.disjoint_output = true;
    const auto s = make_schedule({kind, 3, 6}, cfg);
    EXPECT_EQ(s->scratch_count(), 0u);
    const auto ok = check_schedule(*s, {false});
    EXPECT_TRUE(ok.ok) << ok.error;
    EXPECT_FALSE(check_schedule(*s, {true}).ok) << collective_name(kind);
  }
}

}  // namespace
}  // namespace cclab::coll
