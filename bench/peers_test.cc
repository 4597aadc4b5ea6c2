// Tests of peers in `cclab bench`: --algo lists that mix ours and Gloo's,
// the errors that name the flag, skipped rows, and the --compare summary.
#include "peers.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend.h"
#include "cclab/collectives/error.h"
#include "options.h"
#include "report.h"
#include "sweep.h"

namespace cclab::bench {
namespace {

using coll::Algorithm;

std::string error_of(const BenchFlags& f) {
  try {
    resolve(f);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

bool has_gloo() { return backend_names().find("gloo") != std::string::npos; }

TEST(Peers, NeedTheGlooBackend) {
  BenchFlags f;
  f.algo = "ring,gloo-ring";
  EXPECT_EQ(error_of(f),
            "--algo: 'gloo-ring' is one of Gloo's own algorithms; it needs --backend gloo (got "
            "threads)");
}

TEST(Peers, UnknownNamesListThePeers) {
  BenchFlags f;
  f.algo = "gloo-tree";
  EXPECT_NE(error_of(f).find("unknown algorithm 'gloo-tree'"), std::string::npos);
  EXPECT_NE(error_of(f).find("with --backend gloo also gloo-ring, gloo-ring-chunked"),
            std::string::npos)
      << error_of(f);
}

TEST(Peers, MixWithOursAndNameTheFlagForWhatGlooLacks) {
  if (!has_gloo()) GTEST_SKIP() << "built without Gloo";
  BenchFlags f;
  f.backend = "gloo", f.algo = "gloo-hd,all,gloo-ring,gloo-hd";
  auto c = resolve(f);
  EXPECT_EQ(c.algos, coll::algorithms_for(coll::CollectiveKind::kAllReduce));
  EXPECT_EQ(c.peers, (std::vector<std::string>{"gloo-hd", "gloo-ring"}));
  f.algo = "gloo-bcube";  // peers only: no own algorithm
  EXPECT_TRUE(resolve(f).algos.empty());
  f.dtype = "f16";
  EXPECT_NE(error_of(f).find("--dtype: f16 is not available to --algo gloo-bcube"),
            std::string::npos);
  f.dtype = "f32", f.op = "avg";
  EXPECT_NE(error_of(f).find("--op: avg is not available"), std::string::npos);
  f.op = "sum", f.coll = "allgather";
  EXPECT_NE(error_of(f).find("does not apply to allgather"), std::string::npos);
}

TEST(Peers, CompareNeedsBothSides) {
  BenchFlags f;
  f.compare = true, f.algo = "ring";
  EXPECT_NE(error_of(f).find("--compare: needs ours and at least one peer"), std::string::npos);
}

TEST(Peers, SkipReasons) {
  // Bcube pairs ranks at every level: only even counts.
  EXPECT_NE(peer_skip_reason("gloo-bcube", 3, 4096).find("even rank count (got 3)"),
            std::string::npos);
  EXPECT_EQ(peer_skip_reason("gloo-bcube", 4, 4096), "");
  EXPECT_EQ(peer_skip_reason("gloo-ring", 3, 4096), "");
  // gloo::allreduce's ring is capped at >= 4 ranks only.
  EXPECT_NE(peer_skip_reason("gloo-fn-ring", 4, 16 << 20), "");
  EXPECT_EQ(peer_skip_reason("gloo-fn-ring", 4, 4096), "");
  EXPECT_EQ(peer_skip_reason("gloo-fn-ring", 2, 16 << 20), "");
}

SweepRow row_of(std::uint64_t bytes, Algorithm algo, const std::string& peer, double us,
                const BenchConfig& c) {
  SweepRow row;
  row.bytes = bytes, row.count = bytes / 4, row.algo = algo, row.peer = peer;
  summarize({us}, c, row);
  return row;
}

TEST(Peers, CompareTakesTheBestOfEachSideAndIgnoresSkippedRows) {
  BenchFlags f;
  f.algo = "ring,hd";
  auto c = resolve(f);
  c.compare = true;
  c.peers = {"gloo-ring", "gloo-bcube"};
  SweepRow skipped = row_of(4096, Algorithm::kRing, "gloo-bcube", 1, c);
  skipped.skipped = "gloo::AllreduceBcube needs an even rank count (got 3)";
  const std::vector<SweepRow> rows = {row_of(4096, Algorithm::kRing, "", 50, c),
                                      row_of(4096, Algorithm::kHalvingDoubling, "", 40, c),
                                      row_of(4096, Algorithm::kRing, "gloo-ring", 100, c), skipped,
                                      // 8 KiB: the peer wins; ratio 30 / 60 = 0.5.
                                      row_of(8192, Algorithm::kRing, "", 60, c),
                                      row_of(8192, Algorithm::kRing, "gloo-ring", 30, c)};
  std::ostringstream out;
  print_table(out, c, rows);
  const auto text = out.str();
  // 4 KiB: best ours hd at 40 us, best runnable peer gloo-ring at 100 us: 100 / 40 = 2.5.
  EXPECT_NE(text.find("# compare        4096 B: ours     hd      40.00 us, peer         "
                      "gloo-ring     100.00 us, ratio 2.50x"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ratio 0.50x"), std::string::npos) << text;
  EXPECT_NE(text.find("gloo-bcube  skipped: gloo::AllreduceBcube needs an even rank count"),
            std::string::npos)
      << text;
  const auto record = to_json(c, rows);
  EXPECT_EQ(record["rows"][3]["skipped"], skipped.skipped);
  EXPECT_EQ(record["rows"][2]["algo"], "gloo-ring");
  EXPECT_EQ(record["rows"][2]["peer"], true);
  EXPECT_FALSE(record["rows"][0].contains("skipped"));
}

}  // namespace
}  // namespace cclab::bench
