// The selector: labels, tuning tables (built, written, read, refused) and the
// order in which a call's choice, CCLAB_ALGO, a table and the built-in rule win.
#include "cclab/collectives/selector.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "cclab/test/errors.h"

namespace cclab::coll {
namespace {

using cclab::test::error_of;

TEST(Selector, CandidateLabelsRoundTrip) {
  for (auto a : algorithms_for(CollectiveKind::kAllReduce))
    for (int chunks : {1, 2, 16}) {
      const AlgoConfig c = parse_candidate(candidate_label(a, chunks), "X");
      EXPECT_EQ(c.algo, a);
      EXPECT_EQ(c.chunks, chunks);
    }
  EXPECT_EQ(candidate_label(Algorithm::kRing, 1), "ring");
  EXPECT_EQ(candidate_label(Algorithm::kHalvingDoubling, 4), "hd:4");
  // hier's inner algorithm after a slash, the ring (its default) unnamed.
  for (auto inner : inner_algorithms()) {
    const AlgoConfig c = parse_candidate(candidate_label(Algorithm::kHierarchical, 4, inner), "X");
    EXPECT_EQ(c.algo, Algorithm::kHierarchical);
    EXPECT_EQ(c.inner, inner);
    EXPECT_EQ(c.chunks, 4);
  }
  EXPECT_EQ(candidate_label(Algorithm::kHierarchical, 4, Algorithm::kTree), "hier/tree:4");
  EXPECT_EQ(candidate_label(Algorithm::kHierarchical, 1, Algorithm::kRing), "hier");
  EXPECT_EQ(candidate_label(parse_candidate("hier/ring", "X")), "hier");
  EXPECT_EQ(candidate_label(Algorithm::kTree, 1, Algorithm::kHalvingDoubling), "tree");
}

TEST(Selector, InnerListsParseInOrderAndRefuseByName) {
  EXPECT_EQ(
      parse_inner_list("hd,ring,direct", "--inner"),
      (std::vector<Algorithm>{Algorithm::kHalvingDoubling, Algorithm::kRing, Algorithm::kDirect}));
  EXPECT_EQ(parse_inner_list("all", "--inner"), inner_algorithms());
  const std::pair<const char*, const char*> bad[] = {
      {"ring,rings",
       "'rings' is not an inner algorithm (allowed: ring, tree, hd, direct, biring, or all)"},
      {"tree,", "'' is not an inner algorithm (allowed: ring, tree, hd, direct, biring, or all)"},
      {"hd,tree,hd", "'hd' is given twice (each inner algorithm once)"},
      {"tree,all", "'tree' is given twice (each inner algorithm once)"}};
  for (const auto& [text, why] : bad)
    EXPECT_EQ(error_of([&] { parse_inner_list(text, "--inner"); }),
              fmt::format("--inner: {}", why));
}

// For a collective, `all` means what its hier runs between groups: all-reduce
// every inner algorithm, reduce-scatter and all-gather the ring, hd and
// biring, broadcast (no hier) the default ring; naming another is refused.
TEST(Selector, InnerListsForACollectiveTakeWhatItsHierRuns) {
  using K = CollectiveKind;
  EXPECT_EQ(parse_inner_list("all", "--inner", K::kAllReduce), inner_algorithms());
  const std::vector<Algorithm> ring_hd_biring{Algorithm::kRing, Algorithm::kHalvingDoubling,
                                              Algorithm::kBiRing};
  EXPECT_EQ(parse_inner_list("all", "--inner", K::kReduceScatter), ring_hd_biring);
  EXPECT_EQ(parse_inner_list("all", "--inner", K::kAllGather), ring_hd_biring);
  EXPECT_EQ(parse_inner_list("hd", "--inner", K::kAllGather),
            std::vector<Algorithm>{Algorithm::kHalvingDoubling});
  EXPECT_EQ(parse_inner_list("all", "--inner", K::kBroadcast),
            std::vector<Algorithm>{Algorithm::kRing});
  EXPECT_EQ(
      error_of([] { parse_inner_list("ring,tree", "--inner", K::kReduceScatter); }),
      "--inner: the hier of --coll reducescatter runs rings inside its groups and the ring "
      "or hd between them, or rings both ways in and between them (allowed: ring, hd, biring, "
      "or all)");
  EXPECT_EQ(error_of([] { parse_inner_list("hd", "--inner", K::kBroadcast); }),
            "--inner: --coll broadcast has no hier, so nothing runs between groups (allowed: "
            "ring, the default, or all)");
  EXPECT_EQ(error_of([] { parse_inner_list("hd,all", "--inner", K::kAllGather); }),
            "--inner: 'hd' is given twice (each inner algorithm once)");
}

TEST(Selector, MalformedCandidatesNameTheVariable) {
  EXPECT_EQ(
      error_of([] { parse_candidate("fast", "CCLAB_ALGO"); }),
      "CCLAB_ALGO: unknown algorithm 'fast' (allowed: ring, tree, hd, hier, direct, rings, biring, "
      "auto)");
  for (const char* bad : {"ring:0", "ring:", "ring:x", "ring:-2", "ring:99999999"})
    EXPECT_NE(error_of([&] {
                parse_candidate(bad, "CCLAB_ALGO");
              }).find(fmt::format("CCLAB_ALGO: malformed chunks in '{}'", bad)),
              std::string::npos)
        << bad;
  const std::pair<const char*, const char*> bad_inner[] = {
      {"ring/tree", "'ring' has no inner algorithm (allowed: hier/INNER, e.g. hier/tree)"},
      {"hier/rings:2",
       "'rings' is not an inner algorithm (allowed: ring, tree, hd, direct, biring)"},
      {"hier/", "'' is not an inner algorithm (allowed: ring, tree, hd, direct, biring)"}};
  for (const auto& [text, why] : bad_inner)
    EXPECT_EQ(error_of([&] { parse_candidate(text, "CCLAB_ALGO"); }),
              fmt::format("CCLAB_ALGO: {}", why));
}

TEST(Selector, BandsFromTimesKeepEachSizesFastest) {
  // Sizes 1K..64K: direct wins twice, then hd, then ring; ties go to the first.
  const std::vector<TimedCandidate> times = {{1024, Algorithm::kRing, 1, 9},
                                             {1024, Algorithm::kDirect, 1, 2},
                                             {1024, Algorithm::kHalvingDoubling, 1, 5},
                                             {4096, Algorithm::kRing, 1, 9},
                                             {4096, Algorithm::kDirect, 1, 3},
                                             {4096, Algorithm::kHalvingDoubling, 1, 3},
                                             {16384, Algorithm::kRing, 4, 9},
                                             {16384, Algorithm::kDirect, 1, 8},
                                             {16384, Algorithm::kHalvingDoubling, 1, 6},
                                             {65536, Algorithm::kRing, 4, 10},
                                             {65536, Algorithm::kDirect, 1, 30},
                                             {65536, Algorithm::kHalvingDoubling, 1, 11}};
  const TuningTable t = tuning_table_from_times(times);
  ASSERT_EQ(t.bands.size(), 3u);
  EXPECT_EQ(t.bands[0].min_bytes, 0u);
  EXPECT_EQ(t.bands[0].algo, Algorithm::kDirect);
  EXPECT_EQ(t.bands[0].predicted_at, 1024u);
  EXPECT_EQ(t.bands[1].min_bytes, 16384u);
  EXPECT_EQ(t.bands[1].algo, Algorithm::kHalvingDoubling);
  EXPECT_EQ(t.bands[2].min_bytes, 65536u);
  EXPECT_EQ(t.bands[2].algo, Algorithm::kRing);
  EXPECT_EQ(t.bands[2].chunks, 4);
  ASSERT_EQ(t.bands[2].predicted.size(), 3u);
  EXPECT_EQ(t.bands[2].predicted[1].candidate, "hd");  // fastest first
  EXPECT_EQ(t.band_for(0)->algo, Algorithm::kDirect);
  EXPECT_EQ(t.band_for(16383)->algo, Algorithm::kDirect);
  EXPECT_EQ(t.band_for(16384)->algo, Algorithm::kHalvingDoubling);
  EXPECT_EQ(t.band_for(std::uint64_t{1} << 40)->algo, Algorithm::kRing);
}

// Random times: at every size between and beyond the samples, the table's
// choice is a naive argmin over the largest sample at or below it (the first
// sample below them all).
TEST(Selector, BandLookupMatchesANaiveArgmin) {
  const std::vector<AlgoConfig> cands = {{Algorithm::kRing, 1},   {Algorithm::kRing, 4},
                                         {Algorithm::kTree, 2},   {Algorithm::kHalvingDoubling, 1},
                                         {Algorithm::kDirect, 1}, {Algorithm::kHierarchical, 1}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> time(1, 6);  // few values: ties happen
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::uint64_t> sizes;
    std::vector<TimedCandidate> times;
    for (std::uint64_t s = 64; s <= (1u << 24); s *= 4) {
      sizes.push_back(s);
      for (const auto& c : cands) times.push_back({s, c.algo, c.chunks, double(time(rng))});
    }
    const TuningTable t = tuning_table_from_times(times);
    const auto naive = [&](std::uint64_t bytes) {
      std::uint64_t at = sizes.front();
      for (auto s : sizes)
        if (s <= bytes) at = s;
      const TimedCandidate* best = nullptr;
      for (const auto& x : times)
        if (x.bytes == at && (best == nullptr || x.time_us < best->time_us)) best = &x;
      return candidate_label(best->algo, best->chunks);
    };
    for (std::uint64_t bytes = 1; bytes <= (1u << 26); bytes = bytes * 3 + 1) {
      const TuningBand* b = t.band_for(bytes);
      ASSERT_NE(b, nullptr);
      ASSERT_EQ(candidate_label(b->algo, b->chunks), naive(bytes)) << bytes << " B";
    }
    for (std::size_t i = 1; i < t.bands.size(); ++i) {
      EXPECT_GT(t.bands[i].min_bytes, t.bands[i - 1].min_bytes);
      EXPECT_NE(candidate_label(t.bands[i].algo, t.bands[i].chunks),
                candidate_label(t.bands[i - 1].algo, t.bands[i - 1].chunks));
    }
  }
}

// Measured candidates carry their spread: a band goes on where its choice is
// not clearly slower than the fastest, and changes where it is.
TEST(Selector, MeasuredBandsDoNotChangeOnNoise) {
  const std::vector<TimedCandidate> times = {{1024, Algorithm::kDirect, 1, 2.0, 1.9, 2.1},
                                             {1024, Algorithm::kRing, 1, 4.0, 3.8, 4.4},
                                             {4096, Algorithm::kDirect, 1, 3.1, 2.9, 3.3},
                                             {4096, Algorithm::kRing, 1, 3.0, 2.8, 3.2},
                                             {16384, Algorithm::kDirect, 1, 9.0, 8.5, 9.5},
                                             {16384, Algorithm::kRing, 1, 5.0, 4.8, 5.3},
                                             {65536, Algorithm::kDirect, 1, 20, 19, 21},
                                             {65536, Algorithm::kRing, 1, 19.5, 19.2, 19.8}};
  const TuningTable t = tuning_table_from_times(times);
  // 4 KiB: ring's median is lower but direct's spread overlaps it: direct goes
  // on. 16 KiB: ring clearly faster. 64 KiB: direct overlaps ring: ring goes on.
  ASSERT_EQ(t.bands.size(), 2u);
  EXPECT_EQ(t.bands[0].algo, Algorithm::kDirect);
  EXPECT_EQ(t.bands[1].min_bytes, 16384u);
  EXPECT_EQ(t.bands[1].algo, Algorithm::kRing);
  // Without spreads (predictions), the plain fastest: ring from 4 KiB.
  std::vector<TimedCandidate> predicted = times;
  for (auto& p : predicted) p.low_us = p.high_us = 0;
  const TuningTable u = tuning_table_from_times(predicted);
  ASSERT_EQ(u.bands.size(), 2u);
  EXPECT_EQ(u.bands[1].min_bytes, 4096u);
}

// hier with each inner algorithm is a candidate of its own: the band keeps
// the inner one that won, and the runners-up name theirs.
TEST(Selector, BandsKeepHiersInnerAlgorithm) {
  const auto hier = [](std::uint64_t bytes, Algorithm inner, double us) {
    return TimedCandidate{bytes, Algorithm::kHierarchical, 1, us, 0, 0, inner};
  };
  TuningTable t = tuning_table_from_times(
      {hier(1024, Algorithm::kRing, 9), hier(1024, Algorithm::kTree, 4),
       hier(1024, Algorithm::kHalvingDoubling, 6), hier(1 << 20, Algorithm::kRing, 80),
       hier(1 << 20, Algorithm::kTree, 95), hier(1 << 20, Algorithm::kHalvingDoubling, 70),
       hier(1 << 24, Algorithm::kRing, 500), hier(1 << 24, Algorithm::kTree, 900),
       hier(1 << 24, Algorithm::kHalvingDoubling, 600)});
  ASSERT_EQ(t.bands.size(), 3u);
  EXPECT_EQ(t.bands[0].inner, Algorithm::kTree);
  EXPECT_EQ(t.bands[1].inner, Algorithm::kHalvingDoubling);
  EXPECT_EQ(t.bands[2].inner, Algorithm::kRing);
  EXPECT_EQ(t.bands[0].predicted[1].candidate, "hier/hd");
  EXPECT_EQ(t.bands[2].predicted[0].candidate, "hier");
  t.ranks = 8;
  const TuningTable back = parse_tuning_table(tuning_table_json(t), "again.json");
  for (std::size_t i = 0; i < t.bands.size(); ++i) EXPECT_EQ(back.bands[i].inner, t.bands[i].inner);
  // The selector runs the band's inner algorithm, whatever the call asked
  // for it, and says which.
  SelectorSettings s;
  s.tables = {back};
  AlgoConfig requested;
  requested.inner = Algorithm::kDirect;
  const Selection mid =
      select_algorithm({CollectiveKind::kAllReduce, 8, 1 << 18, 0}, 4, requested, s);
  EXPECT_EQ(mid.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(mid.config.inner, Algorithm::kHalvingDoubling);
  EXPECT_NE(mid.reason.find("band from 1 MiB; at 1 MiB: hier/hd 70.00 us, hier 80.00 us (+14%)"),
            std::string::npos)
      << mid.reason;
}

TuningTable example_table() {
  TuningTable t = tuning_table_from_times({{1024, Algorithm::kDirect, 1, 2},
                                           {1024, Algorithm::kRing, 1, 5},
                                           {1 << 20, Algorithm::kDirect, 1, 900},
                                           {1 << 20, Algorithm::kHierarchical, 1, 300},
                                           {1 << 20, Algorithm::kRing, 4, 400}});
  t.source = "example.json";
  t.topology = "switch:n=8";
  t.ranks = 8;
  t.group_size = 4;
  return t;
}

TEST(Selector, TableJsonRoundTrips) {
  const TuningTable t = example_table();
  const TuningTable back = parse_tuning_table(tuning_table_json(t), "again.json");
  EXPECT_EQ(back.source, "again.json");
  EXPECT_EQ(back.topology, t.topology);
  EXPECT_EQ(back.ranks, 8);
  EXPECT_EQ(back.group_size, 4);
  ASSERT_EQ(back.bands.size(), t.bands.size());
  for (std::size_t i = 0; i < t.bands.size(); ++i) {
    EXPECT_EQ(back.bands[i].min_bytes, t.bands[i].min_bytes);
    EXPECT_EQ(back.bands[i].algo, t.bands[i].algo);
    EXPECT_EQ(back.bands[i].chunks, t.bands[i].chunks);
    EXPECT_EQ(back.bands[i].predicted_at, t.bands[i].predicted_at);
    ASSERT_EQ(back.bands[i].predicted.size(), t.bands[i].predicted.size());
    for (std::size_t j = 0; j < t.bands[i].predicted.size(); ++j) {
      EXPECT_EQ(back.bands[i].predicted[j].candidate, t.bands[i].predicted[j].candidate);
      EXPECT_DOUBLE_EQ(back.bands[i].predicted[j].time_us, t.bands[i].predicted[j].time_us);
    }
  }
}

TEST(Selector, BadTablesNameTheFileAndTheField) {
  const std::string good = tuning_table_json(example_table());
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const auto err = [](const std::string& text) {
    return error_of([&] { parse_tuning_table(text, "t.json"); });
  };
  EXPECT_NE(err("{").find("tuning table 't.json': not JSON"), std::string::npos);
  EXPECT_EQ(err(with("\"ranks\": 8", "\"ranks\": 8, \"ranks\": 4")),
            "tuning table 't.json': key 'ranks' given twice in one object");
  EXPECT_EQ(err("[]"), "tuning table 't.json': (top level): expected an object");
  EXPECT_EQ(err(with("\"ranks\": 8", "\"ranks\": 0")),
            "tuning table 't.json': ranks: must be at least 1");
  EXPECT_EQ(err(with("\"ranks\": 8", "\"rank\": 8")),
            "tuning table 't.json': ranks: missing field");
  EXPECT_EQ(err(with("\"ranks\": 8", "\"ranks\": \"8\"")),
            "tuning table 't.json': ranks: expected an integer, got \"8\"");
  EXPECT_EQ(err(with("\"group_size\": 4", "\"group_size\": 3")),
            "tuning table 't.json': group_size: 3 does not divide the 8 ranks (allowed: a "
            "divisor, or 0)");
  EXPECT_EQ(err(with("\"allreduce\"", "\"alltoall\"")),
            "tuning table 't.json': collective: 'alltoall' (allowed: allreduce, reducescatter, "
            "allgather, broadcast)");
  // A band's algorithm must implement the table's collective.
  EXPECT_EQ(err(with("\"allreduce\"", "\"broadcast\"")),
            "tuning table 't.json': bands[0].algo: 'direct' does not implement broadcast");
  EXPECT_EQ(err(with("\"algo\": \"direct\"", "\"algo\": \"fast\"")),
            "tuning table 't.json': bands[0].algo: unknown algorithm 'fast' (allowed: ring, "
            "tree, hd, hier, direct, rings, biring, auto)");
  EXPECT_EQ(err(with("\"algo\": \"direct\"", "\"algo\": \"auto\"")),
            "tuning table 't.json': bands[0].algo: 'auto' does not implement allreduce");
  EXPECT_EQ(err(with("\"chunks\": 1", "\"chunks\": 0")),
            "tuning table 't.json': bands[0].chunks: must be at least 1");
  // Numbers are taken as they are written, never converted (nlohmann's own
  // get<int> would read 4.5 as 4 and -1 as a byte count of 2^64 - 1).
  EXPECT_EQ(err(with("\"chunks\": 1", "\"chunks\": 4.5")),
            "tuning table 't.json': bands[0].chunks: expected an integer, got 4.5");
  EXPECT_EQ(err(with("\"chunks\": 1", "\"chunks\": 3000000000")),
            "tuning table 't.json': bands[0].chunks: expected an integer, got 3000000000");
  EXPECT_EQ(err(with("\"min_bytes\": 1048576", "\"min_bytes\": -1")),
            "tuning table 't.json': bands[1].min_bytes: expected an integer >= 0, got -1");
  EXPECT_EQ(err(with("\"min_bytes\": 0", "\"min_bytes\": 5")),
            "tuning table 't.json': bands[0].min_bytes: the first band starts at 0");
  EXPECT_EQ(err(with("\"min_bytes\": 1048576", "\"min_bytes\": 0")),
            "tuning table 't.json': bands[1].min_bytes: 0 is not above the previous band's 0");
  // Only hier has an inner algorithm (reduce-scatter and all-gather: ring, hd or biring).
  EXPECT_EQ(err(with("\"inner\": \"ring\"", "\"inner\": \"rings\"")),
            "tuning table 't.json': bands[1].inner: 'rings' is not an inner algorithm (allowed: "
            "ring, tree, hd, direct, biring)");
  EXPECT_EQ(err(with("\"inner\": \"ring\"", "\"inner\": 2")),
            "tuning table 't.json': bands[1].inner: expected a string, got 2");
  EXPECT_EQ(
      err(with("\"algo\": \"direct\",", "\"algo\": \"direct\", \"inner\": \"tree\",")),
      "tuning table 't.json': bands[0].inner: only hier has an inner algorithm, not 'direct'");
  std::string rs = with("\"allreduce\"", "\"reducescatter\"");
  rs.replace(rs.find("\"inner\": \"ring\""), 15, "\"inner\": \"tree\"");
  EXPECT_EQ(err(rs),
            "tuning table 't.json': bands[1].inner: 'tree' is not allowed for reducescatter "
            "(allowed: ring, hd, biring; its hier runs rings inside its groups)");
  // Reduce-scatter's hier runs hd between a power of two of groups only: the
  // table's 2 groups of 4 may, 3 may not.
  rs.replace(rs.find("\"inner\": \"tree\""), 15, "\"inner\": \"hd\"");
  EXPECT_EQ(parse_tuning_table(rs, "t.json").bands[1].inner, Algorithm::kHalvingDoubling);
  rs.replace(rs.find("\"ranks\": 8"), 10, "\"ranks\": 12");
  EXPECT_EQ(
      err(rs),
      "tuning table 't.json': bands[1].inner: hd between the groups of reducescatter's hier "
      "needs a power-of-two number of groups, got 3 (groups of 4; allowed here: ring, biring)");
  EXPECT_EQ(err(with("\"hier\": 300.0", "\"hier\": \"fast\"")),
            "tuning table 't.json': bands[1].predicted_us.hier: expected a number");
  EXPECT_EQ(err(R"({"collective": "allreduce", "topology": "x", "ranks": 2, "group_size": 0,
                   "bands": []})"),
            "tuning table 't.json': bands: expected a non-empty array");
  EXPECT_EQ(error_of([] { load_tuning_table("/dev/null/t.json"); }),
            "tuning table '/dev/null/t.json': cannot open it for reading");
  EXPECT_EQ(error_of([] { load_tuning_table("/"); }), "tuning table '/': a directory, not a file");
}

const CollectiveShape kAllReduce8{CollectiveKind::kAllReduce, 8, 1 << 18, 0};  // 1 MiB of f32

TEST(Selector, ACallsOwnChoiceWinsOverEverything) {
  SelectorSettings s;
  s.forced = AlgoConfig{Algorithm::kTree, 2};
  s.tables = {example_table()};
  const Selection sel = select_algorithm(kAllReduce8, 4, {Algorithm::kDirect, 3}, s);
  EXPECT_EQ(sel.config.algo, Algorithm::kDirect);
  EXPECT_EQ(sel.config.chunks, 3);
  EXPECT_EQ(sel.reason, "requested by the caller");
}

TEST(Selector, ForcedChoiceWinsOverTheTable) {
  SelectorSettings s;
  s.forced = AlgoConfig{Algorithm::kTree, 2};
  s.tables = {example_table()};
  const Selection sel = select_algorithm(kAllReduce8, 4, {}, s);
  EXPECT_EQ(sel.config.algo, Algorithm::kTree);
  EXPECT_EQ(sel.config.chunks, 2);
  EXPECT_EQ(sel.reason, "CCLAB_ALGO=tree:2");
  // Broadcast has no direct: the forced choice does not apply, and says so.
  s.tables.clear();
  s.forced = AlgoConfig{Algorithm::kDirect, 1};
  const Selection b = select_algorithm({CollectiveKind::kBroadcast, 8, 100, 0}, 4, {}, s);
  EXPECT_EQ(b.config.algo, Algorithm::kTree);
  EXPECT_EQ(b.reason,
            "CCLAB_ALGO=direct does not implement broadcast; built-in size rule: from 3 ranks the "
            "pipelined chain (ring) in chunks of 256 KiB (at most 256) where bytes make at least "
            "ranks/2 of 256 KiB, else tree up to 64 KiB or below 8 ranks, else hd");
}

// CCLAB_ALGO=hier/tree runs all-reduce's hier with a tree between groups;
// the other collectives' hier runs the ring or hd there, so it does not apply.
TEST(Selector, ForcedInnerAlgorithmAppliesToAllReduceOnly) {
  SelectorSettings s;
  s.forced = parse_candidate("hier/tree:2", "CCLAB_ALGO");
  const Selection ar = select_algorithm(kAllReduce8, 4, {}, s);
  EXPECT_EQ(ar.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(ar.config.inner, Algorithm::kTree);
  EXPECT_EQ(ar.config.chunks, 2);
  EXPECT_EQ(ar.reason, "CCLAB_ALGO=hier/tree:2");
  const Selection rs = select_algorithm({CollectiveKind::kReduceScatter, 8, 1 << 10, 0}, 4, {}, s);
  EXPECT_NE(rs.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(rs.reason.rfind("CCLAB_ALGO=hier/tree:2 does not implement reducescatter; built-in", 0),
            0u)
      << rs.reason;
}

// CCLAB_ALGO=hier/hd runs all-gather's hier with hd between a power of two of
// groups; between 3 it falls back to the rule, saying why, instead of
// failing the call.
TEST(Selector, ForcedHdBetweenGroupsAppliesWhereTheyAreAPowerOfTwo) {
  SelectorSettings s;
  s.forced = parse_candidate("hier/hd", "CCLAB_ALGO");
  const CollectiveShape ag8{CollectiveKind::kAllGather, 8, 1 << 16, 0};
  const Selection two = select_algorithm(ag8, 4, {Algorithm::kAuto, 1, 4}, s);
  EXPECT_EQ(two.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(two.config.inner, Algorithm::kHalvingDoubling);
  EXPECT_EQ(two.reason, "CCLAB_ALGO=hier/hd");
  const CollectiveShape ag12{CollectiveKind::kAllGather, 12, 1 << 16, 0};
  const Selection three = select_algorithm(ag12, 4, {Algorithm::kAuto, 1, 4}, s);
  EXPECT_FALSE(three.config.algo == Algorithm::kHierarchical &&
               three.config.inner == Algorithm::kHalvingDoubling);
  EXPECT_NO_THROW(make_schedule(ag12, three.config, 4));
  EXPECT_EQ(three.reason.rfind("CCLAB_ALGO=hier/hd does not run here: hd between the groups of "
                               "allgather's hier needs a power-of-two number of groups, got 3 "
                               "(groups of 4; allowed here: ring, biring); built-in",
                               0),
            0u)
      << three.reason;
  // All-reduce's hier runs hd between any number of groups (phased).
  const CollectiveShape ar12{CollectiveKind::kAllReduce, 12, 1 << 16, 0};
  EXPECT_EQ(select_algorithm(ar12, 4, {Algorithm::kAuto, 1, 4}, s).reason, "CCLAB_ALGO=hier/hd");
}

TEST(Selector, TableChoosesByBandAndExplains) {
  SelectorSettings s;
  s.tables = {example_table()};
  const Selection small = select_algorithm({CollectiveKind::kAllReduce, 8, 256, 0}, 4, {}, s);
  EXPECT_EQ(small.config.algo, Algorithm::kDirect);
  EXPECT_EQ(small.reason,
            "tuning table 'example.json' (8 ranks, switch:n=8), band from 0 B; at 1 KiB: "
            "direct 2.00 us, ring 5.00 us (+150%)");
  const Selection big = select_algorithm(kAllReduce8, 4, {}, s);
  EXPECT_EQ(big.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(big.config.group_size, 4);  // the table's, as the call left it at 0
  EXPECT_EQ(big.reason,
            "tuning table 'example.json' (8 ranks, switch:n=8), band from 1 MiB; at 1 MiB: "
            "hier 300.00 us, ring:4 400.00 us (+33%), direct 900.00 us (+200%)");
  // A group the call knows (hosts at rendezvous) stays.
  AlgoConfig hosts;
  hosts.group_size = 2;
  EXPECT_EQ(select_algorithm(kAllReduce8, 4, hosts, s).config.group_size, 2);
  // Bytes, not elements: 1 MiB of f64 is 128 Ki elements.
  EXPECT_EQ(select_algorithm({CollectiveKind::kAllReduce, 8, 1 << 17, 0}, 8, {}, s).config.algo,
            Algorithm::kHierarchical);
}

// A table tuned in levels (hier all-reduce's upper_groups, rotate_levels)
// keeps them through JSON, and hands them to the hier bands it chooses, not
// to the others, nor to a call in groups of its own; bad levels are named.
TEST(Selector, TableLevelsApplyToItsHierBands) {
  TuningTable t = example_table();  // 8 ranks in groups of 4: direct, then hier from 1 MiB
  t.group_size = 2;
  t.upper_groups = {2};
  t.rotate_levels = true;
  const TuningTable back = parse_tuning_table(tuning_table_json(t), "levels.json");
  EXPECT_EQ(back.upper_groups, std::vector<int>{2});
  EXPECT_TRUE(back.rotate_levels);
  EXPECT_TRUE(parse_tuning_table(tuning_table_json(example_table()), "x").upper_groups.empty());
  SelectorSettings s;
  s.tables = {back};
  const Selection big = select_algorithm(kAllReduce8, 4, {}, s);
  EXPECT_EQ(big.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(big.config.upper_groups, std::vector<int>{2});
  EXPECT_TRUE(big.config.rotate_levels);
  EXPECT_NE(big.reason.find("(8 ranks, switch:n=8, hier in levels 2x2, rotated), band from 1 MiB"),
            std::string::npos)
      << big.reason;
  EXPECT_EQ(make_schedule(kAllReduce8, big.config)->name(), "hier(g=2x2,rotated,inner=ring)");
  const Selection small = select_algorithm({CollectiveKind::kAllReduce, 8, 256, 0}, 4, {}, s);
  EXPECT_EQ(small.config.algo, Algorithm::kDirect);
  EXPECT_TRUE(small.config.upper_groups.empty());
  EXPECT_FALSE(small.config.rotate_levels);
  AlgoConfig hosts;  // groups of 4 from the hosts: not the table's, so neither are its levels
  hosts.group_size = 4;
  EXPECT_TRUE(select_algorithm(kAllReduce8, 4, hosts, s).config.upper_groups.empty());
  const std::string good = tuning_table_json(t);
  const auto err = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return error_of([&] { parse_tuning_table(text.replace(at, from.size(), to), "t.json"); });
  };
  EXPECT_EQ(err("\"upper_groups\": [\n    2\n  ]", "\"upper_groups\": [3]"),
            "tuning table 't.json': upper_groups: the top groups of 2x3 do not divide the 8 ranks");
  EXPECT_EQ(err("\"upper_groups\": [\n    2\n  ]", "\"upper_groups\": [1]"),
            "tuning table 't.json': upper_groups[0]: 1 is not a level (allowed: an integer from 2 "
            "to the ranks)");
  EXPECT_EQ(err("\"upper_groups\": [\n    2\n  ]", "\"upper_groups\": 2"),
            "tuning table 't.json': upper_groups: expected an array of integers");
  EXPECT_EQ(err("\"rotate_levels\": true", "\"rotate_levels\": 1"),
            "tuning table 't.json': rotate_levels: expected true or false, got 1");
  // Reduce-scatter's and all-gather's hier take levels too; broadcast has no hier.
  EXPECT_EQ(err("\"collective\": \"allreduce\"", "\"collective\": \"reducescatter\""),
            "(no error)");
  EXPECT_EQ(err("\"collective\": \"allreduce\"", "\"collective\": \"broadcast\""),
            "tuning table 't.json': upper_groups: levels are hier's only (allreduce, "
            "reducescatter, allgather), not broadcast");
}

TEST(Selector, EachRankCountHasItsTable) {
  SelectorSettings s;
  TuningTable four = tuning_table_from_times({{1024, Algorithm::kTree, 2, 1}});
  four.source = "four.json";
  four.ranks = 4;
  s.tables = {example_table(), four};
  EXPECT_EQ(select_algorithm(kAllReduce8, 4, {}, s).config.algo, Algorithm::kHierarchical);
  const Selection at4 = select_algorithm({CollectiveKind::kAllReduce, 4, 1 << 18, 0}, 4, {}, s);
  EXPECT_EQ(candidate_label(at4.config.algo, at4.config.chunks), "tree:2");
  EXPECT_EQ(at4.reason.rfind("tuning table 'four.json' (4 ranks", 0), 0u) << at4.reason;
  EXPECT_NE(select_algorithm({CollectiveKind::kAllReduce, 2, 100, 0}, 4, {}, s)
                .reason.find("no tuning table for allreduce at 2 ranks (tables: allreduce at 8 "
                             "ranks ('example.json'), allreduce at 4 ranks ('four.json'))"),
            std::string::npos);
}

TEST(Selector, TableForOtherCallsFallsBackToTheBuiltInRule) {
  SelectorSettings s;
  s.tables = {example_table()};
  const Selection other_ranks =
      select_algorithm({CollectiveKind::kAllReduce, 4, 1 << 18, 0}, 4, {}, s);
  EXPECT_EQ(other_ranks.config.algo, Algorithm::kRing);
  EXPECT_EQ(other_ranks.reason,
            "no tuning table for allreduce at 4 ranks (tables: allreduce at 8 ranks "
            "('example.json')); built-in size rule: below 8 ranks direct while (ranks-1) x bytes "
            "is at most 256 KiB, from 8 ranks hd while a rank's block is at most 32 KiB, else "
            "ring");
  // An all-reduce table says nothing about all-gather at the same rank count.
  const Selection gather = select_algorithm({CollectiveKind::kAllGather, 8, 16, 0}, 4, {}, s);
  EXPECT_EQ(gather.config.algo, Algorithm::kHalvingDoubling);
  EXPECT_NE(gather.reason.find("no tuning table for allgather at 8 ranks"), std::string::npos)
      << gather.reason;
  EXPECT_EQ(select_algorithm(kAllReduce8, 4, {}, SelectorSettings{}).config.algo,
            choose_algorithm(kAllReduce8, 4));
}

TEST(Selector, EachCollectiveHasItsTablesKeyedByTheWholeBuffer) {
  // All-gather and reduce-scatter tables are keyed by the whole output / input
  // (nccl-tests' size), not a rank's block: 8 ranks of 16 KiB blocks are a
  // 128 KiB call, past the 64 KiB band.
  auto table = [](CollectiveKind kind, Algorithm small, Algorithm big, const char* name) {
    TuningTable t = tuning_table_from_times(
        {{1024, small, 1, 1}, {1024, big, 1, 2}, {65536, small, 1, 9}, {65536, big, 1, 3}});
    t.collective = kind;
    t.ranks = 8;
    t.source = name;
    t.topology = "switch:n=8";
    return t;
  };
  SelectorSettings s;
  s.tables = {
      table(CollectiveKind::kAllGather, Algorithm::kDirect, Algorithm::kHalvingDoubling, "ag.json"),
      table(CollectiveKind::kReduceScatter, Algorithm::kHalvingDoubling, Algorithm::kRing,
            "rs.json"),
      table(CollectiveKind::kBroadcast, Algorithm::kTree, Algorithm::kHalvingDoubling, "bc.json")};
  const auto pick = [&](CollectiveKind kind, std::uint64_t count) {
    return select_algorithm({kind, 8, count, 0}, 4, {}, s);
  };
  EXPECT_EQ(pick(CollectiveKind::kAllGather, 2047).config.algo, Algorithm::kDirect);  // < 64 KiB
  EXPECT_EQ(pick(CollectiveKind::kAllGather, 2048).config.algo, Algorithm::kHalvingDoubling);
  EXPECT_EQ(pick(CollectiveKind::kReduceScatter, 2047).config.algo, Algorithm::kHalvingDoubling);
  EXPECT_EQ(pick(CollectiveKind::kReduceScatter, 2048).config.algo, Algorithm::kRing);
  EXPECT_EQ(pick(CollectiveKind::kBroadcast, 16383).config.algo, Algorithm::kTree);
  EXPECT_EQ(pick(CollectiveKind::kBroadcast, 16384).config.algo, Algorithm::kHalvingDoubling);
  EXPECT_EQ(pick(CollectiveKind::kAllGather, 2048)
                .reason.rfind(
                    "tuning table 'ag.json' (allgather, 8 ranks, switch:n=8), band from 64 KiB", 0),
            0u)
      << pick(CollectiveKind::kAllGather, 2048).reason;
  // No all-reduce table among them: the built-in rule, naming what there is.
  EXPECT_NE(select_algorithm(kAllReduce8, 4, {}, s)
                .reason.find("no tuning table for allreduce at 8 ranks (tables: allgather at 8 "
                             "ranks ('ag.json'), reducescatter at 8 ranks ('rs.json'), broadcast "
                             "at 8 ranks ('bc.json'))"),
            std::string::npos);
  // The collective survives a round trip through JSON.
  const TuningTable back = parse_tuning_table(tuning_table_json(s.tables[2]), "bc.json");
  EXPECT_EQ(back.collective, CollectiveKind::kBroadcast);
  EXPECT_EQ(back.bands.back().algo, Algorithm::kHalvingDoubling);
}

// Ranks in groups (a group size that splits them into several groups of
// several ranks) leave the flat rule for hier past the smallest blocks:
// all-reduce's runs hd between 4 groups or more while a group's share is
// below 512 KiB, else the ring in chunks of about 512 KiB (powers of two, at
// most 256, at least 4 while chunks stay 64 KiB or more), unless the caller
// asked for chunks; the reason names the groups.
TEST(Selector, BuiltInRuleUsesTheGroupsItIsGiven) {
  const SelectorSettings none;
  const auto chosen = [&](CollectiveKind kind, int n, std::uint64_t count, int group,
                          int chunks = 1) {
    return select_algorithm({kind, n, count, 0}, 4, {Algorithm::kAuto, chunks, group}, none);
  };
  const auto label = [&](int n, std::uint64_t count, int group, int chunks = 1) {
    return candidate_label(chosen(CollectiveKind::kAllReduce, n, count, group, chunks).config);
  };
  // 32 ranks in 4 groups of 8: hd while a rank's block is at most 1 KiB.
  EXPECT_EQ(label(32, 8192, 8), "hd");
  const Selection big = chosen(CollectiveKind::kAllReduce, 32, 8200, 8);
  EXPECT_EQ(candidate_label(big.config), "hier/hd");
  EXPECT_EQ(big.config.group_size, 8);
  EXPECT_EQ(big.reason,
            "built-in size rule for ranks in groups of 8: below 8 ranks direct while (ranks-1) x "
            "bytes is at most 64 KiB, from 8 ranks hd while a rank's block is at most 1 KiB, "
            "else hier with hd between its 4 groups in chunks of 512 KiB (at most 256)");
  // hd between a power of two of groups pipelines, at any share: chunks of
  // 512 KiB (128 Ki floats) rounded down to a power of two, with no floor of
  // 4 (one wave).
  EXPECT_EQ(label(32, (256 << 10) - 1, 8), "hier/hd");
  EXPECT_EQ(label(32, 256 << 10, 8), "hier/hd:2");
  EXPECT_EQ(label(32, (512 << 10) - 1, 8), "hier/hd:2");
  EXPECT_EQ(label(32, 512 << 10, 8), "hier/hd:4");
  EXPECT_EQ(label(32, 16 << 20, 8), "hier/hd:128");  // 64 MiB, a group's share 16 MiB
  // 24 ranks in 6 groups of 4 (not a power of two): hd, unchunked, while a
  // group's share is below 512 KiB (3 MiB, 768 Ki floats), then the ring in
  // 3 MiB / 512 KiB = 6 chunks rounded down to 4.
  const Selection six = chosen(CollectiveKind::kAllReduce, 24, (768 << 10) - 1, 4);
  EXPECT_EQ(candidate_label(six.config), "hier/hd");
  EXPECT_NE(six.reason.find("else hier with hd between its 6 groups while a group's share is "
                            "below 512 KiB, past it with the ring in chunks of 512 KiB (at most "
                            "256; at least 4 while they stay 64 KiB or more)"),
            std::string::npos)
      << six.reason;
  EXPECT_EQ(label(24, 768 << 10, 4), "hier:4");
  // Two groups: the ring between them at any size past hd's, in chunks of
  // 512 KiB rounded down to a power of two, 4 to 256.
  const Selection two = chosen(CollectiveKind::kAllReduce, 32, 1 << 20, 16);
  EXPECT_EQ(candidate_label(two.config), "hier:8");  // 4 MiB
  EXPECT_NE(two.reason.find("else hier with the ring between its 2 groups in chunks of 512 KiB"),
            std::string::npos)
      << two.reason;
  const std::uint64_t chunk = 128 << 10;              // floats in 512 KiB
  EXPECT_EQ(label(32, 2 * chunk - 1, 16), "hier:4");  // 1.99 chunks' worth
  EXPECT_EQ(label(32, 15 * chunk, 16), "hier:8");
  EXPECT_EQ(label(32, 16 * chunk, 16), "hier:16");
  EXPECT_EQ(label(32, 1u << 30, 16), "hier:256");  // 4 GiB: 8192 chunks' worth
  // Fewer than 4 where chunks would be under 64 KiB (16 Ki floats).
  const std::uint64_t small = 16 << 10;
  EXPECT_EQ(label(4, 4 * small, 2), "hier:4");
  EXPECT_EQ(label(4, 4 * small - 1, 2), "hier:2");
  EXPECT_EQ(label(4, 2 * small - 1, 2), "hier");
  // Chunks the caller asked for are kept, with either algorithm between groups.
  const Selection asked = chosen(CollectiveKind::kAllReduce, 32, 1 << 20, 16, 3);
  EXPECT_EQ(candidate_label(asked.config), "hier:3");
  EXPECT_NE(asked.reason.find("in the 3 chunks asked for"), std::string::npos) << asked.reason;
  EXPECT_EQ(label(32, 8200, 8, 3), "hier/hd:3");
  // Below 8 ranks direct while (ranks-1) x bytes is at most 64 KiB (5461
  // floats at 4 ranks; 256 KiB without groups), then hier.
  EXPECT_EQ(chosen(CollectiveKind::kAllReduce, 4, 5461, 2).config.algo, Algorithm::kDirect);
  EXPECT_EQ(label(4, 5462, 2), "hier");
  EXPECT_EQ(chosen(CollectiveKind::kAllReduce, 4, 5462, 0).config.algo, Algorithm::kDirect);
  // Reduce-scatter and all-gather (a rank's block is the count) go hier too.
  EXPECT_EQ(chosen(CollectiveKind::kReduceScatter, 32, 256, 8).config.algo,
            Algorithm::kHalvingDoubling);
  EXPECT_EQ(chosen(CollectiveKind::kAllGather, 32, 257, 8).config.algo, Algorithm::kHierarchical);
  // Their chunks count the whole buffer: 4 MiB a rank, 128 MiB in all; hd
  // between 4 groups (a power of two), the ring between 2 or 3 (or 6).
  const Selection rs = chosen(CollectiveKind::kReduceScatter, 32, 1 << 20, 8);
  EXPECT_EQ(candidate_label(rs.config), "hier/hd:256");
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kReduceScatter, 32, 1 << 20, 16).config),
            "hier:256");
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kAllGather, 24, 1 << 20, 4).config), "hier:128");
  EXPECT_NE(rs.reason.find("else hier with hd between its 4 groups in chunks of 512 KiB of the "
                           "whole buffer (at most 256; at least 4 while a rank's block splits "
                           "into pieces of 64 KiB or more)"),
            std::string::npos)
      << rs.reason;
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kAllGather, 32, 64 << 10, 8).config),
            "hier/hd:16");  // 256 KiB a rank, 8 MiB in all
  // At 4 ranks 1 MiB in all is 2 chunks' worth, but blocks of 256 KiB make 4
  // pieces of 64 KiB; 256 KiB in all, blocks of 64 KiB: one piece.
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kAllGather, 4, 64 << 10, 2).config), "hier:4");
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kReduceScatter, 4, 16 << 10, 2).config), "hier");
  // No groups (none given, one group, groups of one) and broadcast: the flat rule.
  for (int group : {0, 32, 1}) {
    const Selection flat = chosen(CollectiveKind::kAllReduce, 32, 1 << 20, group);
    EXPECT_EQ(flat.config.algo, Algorithm::kRing) << group;
    EXPECT_EQ(flat.reason.find("groups"), std::string::npos) << flat.reason;
  }
  // Broadcast keeps its flat rule in groups: hd at 2 MiB on 32 ranks, the
  // chain from 4 MiB.
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kBroadcast, 32, 512 << 10, 8).config), "hd");
  EXPECT_EQ(candidate_label(chosen(CollectiveKind::kBroadcast, 32, 1 << 20, 8).config), "ring:16");
}

// Asked for in levels, the built-in rule's hier keeps them: phased, the
// inner rule across the top groups, unchunked, and said so; where it
// chooses another algorithm the levels go.
TEST(Selector, BuiltInRuleRunsHierInTheLevelsItIsGiven) {
  AlgoConfig levels;
  levels.group_size = 4;
  levels.upper_groups = {4};
  levels.rotate_levels = true;
  const SelectorSettings none;
  const CollectiveShape big{CollectiveKind::kAllReduce, 64, 16u << 20, 0};
  const Selection s = select_algorithm(big, 4, levels, none);
  EXPECT_EQ(s.config.algo, Algorithm::kHierarchical);
  EXPECT_EQ(s.config.inner, Algorithm::kHalvingDoubling);  // 4 top groups, a power of two
  EXPECT_EQ(s.config.chunks, 1);
  EXPECT_EQ(s.config.upper_groups, std::vector<int>{4});
  EXPECT_TRUE(s.config.rotate_levels);
  EXPECT_NE(s.reason.find("built-in size rule for ranks in levels 4x4, rotated: "),
            std::string::npos)
      << s.reason;
  EXPECT_NE(s.reason.find("else hier with hd across its 4 top groups, unchunked (levels run "
                          "phased)"),
            std::string::npos)
      << s.reason;
  EXPECT_EQ(make_schedule(big, s.config)->name(), "hier(g=4x4,rotated,inner=hd)");
  // 3 top groups of 16 (48 ranks): the ring across them.
  EXPECT_EQ(select_algorithm({CollectiveKind::kAllReduce, 48, 16u << 20, 0}, 4, levels, none)
                .config.inner,
            Algorithm::kRing);
  const Selection small =
      select_algorithm({CollectiveKind::kAllReduce, 64, 256, 0}, 4, levels, none);
  EXPECT_EQ(small.config.algo, Algorithm::kHalvingDoubling);
  EXPECT_TRUE(small.config.upper_groups.empty());
  EXPECT_FALSE(small.config.rotate_levels);
}

// Broadcast: from 3 ranks the pipelined chain in pieces of 256 KiB once the
// buffer makes ranks/2 of them (its (n-2+C)/C message times then near hd's
// 2), as many chunks rounded down to a power of two, at most 256; each way
// round, a piece each, where told the links carry both ways, or on the
// rails of the groups where told they cross on links of their own; the
// caller's chunks kept. Else the unpipelined rule: tree up to 64 KiB or
// below 8 ranks, hd.
TEST(Selector, BuiltInBroadcastRulePipelinesTheChain) {
  const SelectorSettings none;
  const auto choose = [&](int n, std::uint64_t bytes, AlgoConfig c = {}, std::size_t elem = 4) {
    return select_algorithm({CollectiveKind::kBroadcast, n, bytes / elem, 0}, elem, c, none);
  };
  const auto label = [&](int n, std::uint64_t bytes, AlgoConfig c = {}, std::size_t elem = 4) {
    return candidate_label(choose(n, bytes, c, elem).config);
  };
  constexpr std::uint64_t kKiB = 1024, kMiB = kKiB * kKiB;
  // Two ranks: one send, nothing to pipeline.
  EXPECT_EQ(label(2, 64 * kMiB), "tree");
  // Three ranks: two pieces make it (512 KiB), one does not.
  EXPECT_EQ(label(3, 512 * kKiB), "ring:2");
  EXPECT_EQ(label(3, 512 * kKiB - 4), "tree");
  // 16 ranks: 8 pieces at 2 MiB; below, the unpipelined rule's hd (from 8
  // ranks, past 64 KiB).
  EXPECT_EQ(label(16, 2 * kMiB), "ring:8");
  EXPECT_EQ(label(16, 2 * kMiB - 4), "hd");
  EXPECT_EQ(label(16, 64 * kKiB), "tree");
  // A power of two of pieces (3 MiB: 8), at most 256 (1 GiB of doubles).
  EXPECT_EQ(label(16, 3 * kMiB), "ring:8");
  EXPECT_EQ(label(16, 1024 * kMiB, {}, 8), "ring:256");
  // Links both ways: biring, half as many chunks (a piece each way).
  AlgoConfig both;
  both.prefer_biring = true;
  EXPECT_EQ(label(16, 2 * kMiB, both), "biring:4");
  EXPECT_EQ(label(3, 512 * kKiB, both), "biring");
  EXPECT_EQ(label(16, 2 * kMiB - 4, both), "hd");
  // Rails of their own between the groups: rings, 1/g as many chunks (at
  // least 1), where the group size gives several groups of several ranks;
  // links both ways win over them.
  AlgoConfig rails{Algorithm::kAuto, 1, 4};
  rails.prefer_rails = true;
  EXPECT_EQ(label(16, 2 * kMiB, rails), "rings:2");
  EXPECT_EQ(label(16, 64 * kMiB, rails), "rings:64");
  EXPECT_EQ(label(8, 1 * kMiB, rails), "rings");
  EXPECT_EQ(label(16, 2 * kMiB - 4, rails), "hd");
  for (int g : {0, 1, 16}) {
    AlgoConfig no_groups = rails;
    no_groups.group_size = g;
    EXPECT_EQ(label(16, 2 * kMiB, no_groups), "ring:8") << g;
  }
  AlgoConfig rails_both = rails;
  rails_both.prefer_biring = true;
  EXPECT_EQ(label(16, 2 * kMiB, rails_both), "biring:4");
  EXPECT_NE(
      choose(16, 2 * kMiB, rails)
          .reason.find(
              "from 3 ranks the pipelined chain on the rails of its groups of 4 (rings; their "
              "own links between the groups) in chunks of 256 KiB"),
      std::string::npos)
      << choose(16, 2 * kMiB, rails).reason;
  // The caller's chunks stay, with the chain or without.
  AlgoConfig three{Algorithm::kAuto, 3};
  EXPECT_EQ(label(16, 2 * kMiB, three), "ring:3");
  EXPECT_EQ(label(4, 4 * kKiB, three), "tree:3");
  // The reason names the rule and its chain.
  EXPECT_NE(choose(16, 2 * kMiB, both)
                .reason.find(
                    "built-in size rule: from 3 ranks the pipelined chain each way round (biring; "
                    "links both ways) in chunks of 256 KiB (at most 256) where bytes make at least "
                    "ranks/2 of 256 KiB, else tree up to 64 KiB or below 8 ranks, else hd"),
            std::string::npos)
      << choose(16, 2 * kMiB, both).reason;
  EXPECT_NE(choose(16, 2 * kMiB, three).reason.find("in the 3 chunks asked for"), std::string::npos)
      << choose(16, 2 * kMiB, three).reason;
}

// Told that the reverse ring's links are idle (prefer_biring, as cclab sim
// is on a torus or a ring of direct links), the rule runs biring where it
// ran the ring, hier/biring between groups and in levels (in up to 4 chunks
// of 64 KiB or more), hd only while a rank's block is at most 16 B (1 KiB
// where rotated levels are unequal), and keeps its other rules.
TEST(Selector, BuiltInRuleOnLinksBothWaysRunsBiring) {
  const SelectorSettings none;
  AlgoConfig flat;
  flat.prefer_biring = true;
  const auto choose = [&](CollectiveKind kind, int n, std::uint64_t count, const AlgoConfig& c) {
    return select_algorithm({kind, n, count, 0}, 4, c, none);
  };
  // Flat, 16 ranks: hd at a block of 16 B (64 floats), biring from 32 B,
  // where the rule not told ran hd up to a block of 32 KiB.
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 16, 64, flat).config.algo,
            Algorithm::kHalvingDoubling);
  const Selection two_way = choose(CollectiveKind::kAllReduce, 16, 128, flat);
  EXPECT_EQ(two_way.config.algo, Algorithm::kBiRing);
  EXPECT_EQ(two_way.config.chunks, 1);
  EXPECT_NE(two_way.reason.find("built-in size rule on links both ways (the reverse ring's are "
                                "its own): below 8 ranks direct while (ranks-1) x bytes is at "
                                "most 256 KiB, from 8 ranks hd while a rank's block is at most "
                                "16 B, else biring"),
            std::string::npos)
      << two_way.reason;
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 16, 128, {}).config.algo,
            Algorithm::kHalvingDoubling);
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 16, 1u << 20, {}).config.algo, Algorithm::kRing);
  EXPECT_EQ(choose(CollectiveKind::kReduceScatter, 16, 1u << 10, flat).config.algo,
            Algorithm::kBiRing);
  EXPECT_EQ(choose(CollectiveKind::kAllGather, 16, 1u << 10, flat).config.algo, Algorithm::kBiRing);
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 4, 1024, flat).config.algo, Algorithm::kDirect);
  // Broadcast's chain goes each way round, a piece of 256 KiB each.
  EXPECT_EQ(candidate_label(choose(CollectiveKind::kBroadcast, 16, 16u << 20, flat).config),
            "biring:128");

  // Rotated levels 4x4 of 64 ranks (a 4x4x4 torus): hier/biring in 4 chunks
  // from 256 KiB, in 2 at 128 KiB, unchunked below, hd at a block of 16 B.
  AlgoConfig cube = flat;
  cube.group_size = 4;
  cube.upper_groups = {4};
  cube.rotate_levels = true;
  for (const auto& [count, chunks] : {std::pair{64u << 10, 4}, std::pair{32u << 10, 2},
                                      std::pair{1024u, 1}, std::pair{16u << 20, 4}}) {
    const Selection s = choose(CollectiveKind::kAllReduce, 64, count, cube);
    EXPECT_EQ(candidate_label(s.config),
              fmt::format("hier/biring{}", chunks > 1 ? fmt::format(":{}", chunks) : ""))
        << count;
    EXPECT_EQ(s.config.upper_groups, std::vector<int>{4});
    EXPECT_TRUE(s.config.rotate_levels);
  }
  const Selection cube_small = choose(CollectiveKind::kAllReduce, 64, 256, cube);
  EXPECT_EQ(cube_small.config.algo, Algorithm::kHalvingDoubling);
  EXPECT_TRUE(cube_small.config.upper_groups.empty());
  const Selection cube_big = choose(CollectiveKind::kAllReduce, 64, 16u << 20, cube);
  EXPECT_NE(cube_big.reason.find("else hier with biring in its levels 4x4, rotated, in up to 4 "
                                 "chunks while they stay 64 KiB or more"),
            std::string::npos)
      << cube_big.reason;
  EXPECT_EQ(make_schedule({CollectiveKind::kAllReduce, 64, 16u << 20, 0}, cube_big.config)->name(),
            "hier(g=4x4,rotated,inner=biring,chunks=4)");

  // 4x4x2 (levels 4x4 over 2 top groups, rotated): unequal, so hd holds to a
  // block of 1 KiB as in the grouped rule.
  AlgoConfig slab = cube;
  EXPECT_TRUE(rotated_levels_unequal(32, slab));
  EXPECT_FALSE(rotated_levels_unequal(64, slab));
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 32, 8192, slab).config.algo,
            Algorithm::kHalvingDoubling);
  EXPECT_EQ(choose(CollectiveKind::kAllReduce, 32, 8200, slab).config.inner, Algorithm::kBiRing);

  // Two levels, groups of 8 of 64 (a 8x8 torus in rows): hier/biring too;
  // the chunks asked for are kept.
  AlgoConfig rows = flat;
  rows.group_size = 8;
  rows.chunks = 16;
  const Selection r = choose(CollectiveKind::kAllReduce, 64, 16u << 20, rows);
  EXPECT_EQ(candidate_label(r.config), "hier/biring:16");
  EXPECT_NE(r.reason.find("hier with biring in its groups of 8, in the 16 chunks asked for"),
            std::string::npos)
      << r.reason;
  // Grouped reduce-scatter and all-gather too (their hier's rings both ways
  // in the phased levels), where the grouped rule runs hd between the
  // groups; chunks as all-reduce's of the whole buffer (64 MiB here), at
  // most 4. A rank's block of 1 KiB or less: hd, as the grouped rule (their
  // hier sends about n pieces a rank).
  rows.chunks = 1;
  AlgoConfig rows_not_told = rows;
  rows_not_told.prefer_biring = false;
  for (const CollectiveKind kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
    const Selection rs = choose(kind, 64, 1u << 18, rows);
    EXPECT_EQ(candidate_label(rs.config), "hier/biring:4");
    EXPECT_NE(rs.reason.find("else hier with biring in its groups of 8, in up to 4 chunks"),
              std::string::npos)
        << rs.reason;
    EXPECT_EQ(candidate_label(choose(kind, 64, 1u << 18, rows_not_told).config), "hier/hd:128");
    EXPECT_EQ(candidate_label(choose(kind, 64, 1024, rows).config), "hier/biring");
    EXPECT_EQ(choose(kind, 64, 256, rows).config.algo, Algorithm::kHalvingDoubling);
    EXPECT_EQ(choose(kind, 64, 257, rows).config.inner, Algorithm::kBiRing);
    const Selection in_cube = choose(kind, 64, 1u << 18, cube);
    EXPECT_EQ(candidate_label(in_cube.config), "hier/biring:4");
    EXPECT_TRUE(in_cube.config.rotate_levels);
    EXPECT_EQ(make_schedule({kind, 64, 1u << 18, 0}, in_cube.config)->name(),
              "hier(g=4x4,rotated,inner=biring,chunks=4)");
  }
}

TEST(Selector, MakeScheduleRunsTheSelection) {
  // No CCLAB_ALGO or CCLAB_TUNING in the test's environment: the built-in rule.
  ASSERT_EQ(std::getenv("CCLAB_ALGO"), nullptr);
  ASSERT_EQ(std::getenv("CCLAB_TUNING"), nullptr);
  EXPECT_EQ(make_schedule({CollectiveKind::kAllReduce, 4, 16, 0}, {})->name(), "direct");
  EXPECT_EQ(make_schedule(kAllReduce8, {})->name(), "ring");
}

}  // namespace
}  // namespace cclab::coll
