// Tests of peers in `cclab bench`: --algo lists that mix ours, Gloo's and MPI's,
// the errors that name the flag, skipped rows, and the --compare summary.
#include "peers.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend.h"
#include "cclab/collectives/error.h"
#include "mpi_peer.h"
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
  f.dtype = "f16";  // gloo::float16
  EXPECT_EQ(resolve(f).peers, (std::vector<std::string>{"gloo-bcube"}));
  f.dtype = "bf16";
  EXPECT_NE(error_of(f).find("--dtype: bf16 is not available to --algo gloo-bcube"),
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
  BenchConfig c;
  c.ranks = 3;
  // Bcube pairs ranks at every level: only even counts.
  EXPECT_NE(peer_skip_reason("gloo-bcube", c, 4096).find("even rank count (got 3)"),
            std::string::npos);
  EXPECT_EQ(peer_skip_reason("gloo-ring", c, 4096), "");
  c.ranks = 4;
  EXPECT_EQ(peer_skip_reason("gloo-bcube", c, 4096), "");
  // gloo::allreduce's ring is capped at >= 4 ranks only.
  EXPECT_NE(peer_skip_reason("gloo-fn-ring", c, 16 << 20), "");
  EXPECT_EQ(peer_skip_reason("gloo-fn-ring", c, 4096), "");
  c.ranks = 2;
  EXPECT_EQ(peer_skip_reason("gloo-fn-ring", c, 16 << 20), "");
}

TEST(Peers, MpiNeedsTheGlooBackendAndAnAllreduce) {
  BenchFlags f;
  f.algo = "all,mpi";
  EXPECT_EQ(error_of(f),
            "--algo: 'mpi' is Open MPI's MPI_Allreduce across processes; it needs --backend gloo "
            "under mpirun (got --backend threads)");
  f.algo = "mpi-ring";
  EXPECT_NE(error_of(f).find("gloo-fn-bcube, mpi, stream; with --backend nccl"), std::string::npos)
      << error_of(f);
  if (!has_gloo()) GTEST_SKIP() << "built without Gloo";
  f.backend = "gloo", f.algo = "mpi,all,mpi";
  // f16 and avg are skipped rows, not errors: MPI lacks them, ours do not.
  f.dtype = "f16", f.op = "avg";
  const auto c = resolve(f);
  EXPECT_EQ(c.peers, std::vector<std::string>{"mpi"});
  EXPECT_FALSE(c.algos.empty());
  f.coll = "broadcast";
  EXPECT_EQ(error_of(f), "--algo: 'mpi' is an all-reduce; it does not apply to broadcast");
}

TEST(Peers, MpiSkipReasons) {
  BenchConfig c;
  // Outside mpirun (or without MPI in the build) every row says why.
  c.mpi_unavailable = "needs mpirun (OMPI_COMM_WORLD_SIZE is not set)";
  EXPECT_EQ(peer_skip_reason("mpi", c, 4096), c.mpi_unavailable);
  c.mpi_unavailable.clear();
  EXPECT_EQ(peer_skip_reason("mpi", c, 4096), "");
  for (auto t : {"f32", "f64", "i32", "i64", "u8"}) {
    c.dtype = coll::parse_dtype(t);
    for (auto op : {"sum", "prod", "min", "max"}) {
      c.op = coll::parse_op(op);
      EXPECT_EQ(peer_skip_reason("mpi", c, 4096), "") << t << " " << op;
    }
  }
  c.dtype = coll::DataType::kBF16, c.op = coll::ReduceOp::kSum;
  EXPECT_EQ(peer_skip_reason("mpi", c, 4096), "MPI has no predefined bf16 datatype");
  c.dtype = coll::DataType::kF16;
  EXPECT_EQ(peer_skip_reason("mpi", c, 4096), "MPI has no predefined f16 datatype");
  c.dtype = coll::DataType::kI32, c.op = coll::ReduceOp::kAvg;
  EXPECT_NE(peer_skip_reason("mpi", c, 4096).find("MPI has no avg reduction"), std::string::npos);
  // MPI counts are ints: 2^31 u8 elements (2 GiB) is one past INT_MAX.
  c.dtype = coll::DataType::kU8, c.op = coll::ReduceOp::kSum;
  EXPECT_EQ(peer_skip_reason("mpi", c, (1ull << 31) - 1), "");
  EXPECT_NE(peer_skip_reason("mpi", c, 1ull << 31).find("2147483648 elements exceed it"),
            std::string::npos);
}

TEST(Peers, MpiSessionOutsideMpirunStartsNothing) {
  const coll::EnvLookup no_mpirun = [](std::string_view) { return std::optional<std::string>(); };
  MpiSession session(no_mpirun, 0, 2);
  EXPECT_EQ(session.unavailable(),
            mpi_built_in() ? "needs mpirun (OMPI_COMM_WORLD_SIZE is not set)"
                           : "this cclab was built without MPI (CCLAB_WITH_MPI; Debian: "
                             "libopenmpi-dev)");
}

SweepRow row_of(std::uint64_t bytes, Algorithm algo, const std::string& peer, double us,
                const BenchConfig& c) {
  SweepRow row;
  row.bytes = bytes, row.count = bytes / 4, row.algo = algo, row.peer = peer;
  summarize({us}, c, row);
  return row;
}

std::string table_of(const BenchConfig& c, const std::vector<SweepRow>& rows) {
  std::ostringstream out;
  print_table(out, c, rows);
  return out.str();
}

// A resolved configuration of our `algos` beside `peers`, with --compare.
BenchConfig compare_config(const std::string& algos, std::vector<std::string> peers) {
  BenchFlags f;
  f.algo = algos;
  auto c = resolve(f);
  c.compare = true;
  c.peers = std::move(peers);
  return c;
}

TEST(Peers, CompareTakesTheBestOfEachSideAndIgnoresSkippedRows) {
  auto c = compare_config("ring,hd", {"gloo-ring", "gloo-bcube"});
  SweepRow skipped = row_of(4096, Algorithm::kRing, "gloo-bcube", 1, c);
  skipped.skipped = "gloo::AllreduceBcube needs an even rank count (got 3)";
  std::vector<SweepRow> rows = {row_of(4096, Algorithm::kRing, "", 50, c),
                                row_of(4096, Algorithm::kHalvingDoubling, "", 40, c),
                                row_of(4096, Algorithm::kRing, "gloo-ring", 100, c), skipped,
                                // 8 KiB: the peer wins; ratio 30 / 60 = 0.5.
                                row_of(8192, Algorithm::kRing, "", 60, c),
                                row_of(8192, Algorithm::kRing, "gloo-ring", 30, c)};
  rows[1].cpu_us_median = 60;  // ours (hd) kept 1.5 cores busy, the peer 0.5
  rows[2].cpu_us_median = 50;
  const auto text = table_of(c, rows);
  // 4 KiB: best ours hd at 40 us, best runnable peer gloo-ring at 100 us: 100 / 40 = 2.5.
  EXPECT_NE(text.find("# compare        4096 B: ours     hd      40.00 us, peer         "
                      "gloo-ring     100.00 us, ratio 2.50x, cores busy 1.50 vs 0.50"),
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

// With --interleave the compare line adds the median of the call-by-call
// ratios and its interval; without, calls of different rows ran at different
// moments and are not paired.
TEST(Peers, CompareWithInterleavePairsTheCallsOfEachIteration) {
  auto c = compare_config("ring", {"gloo-ring"});
  SweepRow ours = row_of(4096, Algorithm::kRing, "", 0, c), peer = ours;
  peer.peer = "gloo-ring";
  std::vector<double> ours_us, peer_us;
  for (int i = 0; i < 20; ++i) {  // per call the peer takes 2x, 3x or 4x our time
    ours_us.push_back(10.0 + i);
    peer_us.push_back((10.0 + i) * (2 + i % 3));
  }
  summarize(ours_us, c, ours);
  summarize(peer_us, c, peer);
  for (const bool interleave : {false, true}) {
    c.interleave = interleave;
    const auto text = table_of(c, {ours, peer});
    // Ratios: seven 2s, seven 3s, six 4s; the 6th and 15th of them are 2 and 4.
    EXPECT_EQ(text.find(", paired 3.00x [2.00, 4.00],") != std::string::npos, interleave) << text;
  }
}

// The stream row is a reference: never the best peer, even when fastest;
// the compare line sets ours and the best peer against its time.
TEST(Peers, TheStreamRowIsAReferenceNotAPeer) {
  auto c = compare_config("ring", {"gloo-ring", "stream"});
  std::vector<SweepRow> rows = {row_of(4096, Algorithm::kRing, "", 50, c),
                                row_of(4096, Algorithm::kRing, "gloo-ring", 100, c),
                                row_of(4096, Algorithm::kRing, "stream", 40, c),
                                row_of(8192, Algorithm::kRing, "", 60, c),
                                row_of(8192, Algorithm::kRing, "gloo-ring", 90, c)};
  const auto text = table_of(c, rows);
  // 50 / 40 = 1.25 and 100 / 40 = 2.5; 8 KiB has no stream row.
  EXPECT_NE(text.find("peer         gloo-ring     100.00 us, ratio 2.00x, cores busy 0.00 vs "
                      "0.00, stream 40.00 us (ours 1.25x, peer 2.50x its time)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gloo-ring      90.00 us, ratio 1.50x, cores busy 0.00 vs 0.00\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# compare: stream = the bytes a bandwidth-optimal all-reduce moves"),
            std::string::npos);
  const auto record = to_json(c, rows);
  EXPECT_EQ(record["rows"][2]["stream"], true);
  EXPECT_EQ(record["rows"][2]["peer"], true);
  EXPECT_EQ(record["rows"][1]["stream"], false);
}

TEST(Peers, TheStreamNeedsTheGlooBackendAnAllreduceAndTwoRanks) {
  BenchFlags f;
  f.algo = "all,stream";
  EXPECT_EQ(error_of(f),
            "--algo: 'stream' times Gloo's transport alone; it needs --backend gloo (got threads)");
  BenchConfig c;
  c.ranks = 1;
  EXPECT_NE(peer_skip_reason("stream", c, 4096), "");
  c.ranks = 2;
  EXPECT_EQ(peer_skip_reason("stream", c, 4096), "");
  // Per rank a bandwidth-optimal all-reduce sends 2 (n - 1) / n of the buffer.
  EXPECT_EQ(stream_bytes(4096, 2), 4096u);
  EXPECT_EQ(stream_bytes(4096, 4), 6144u);
  EXPECT_EQ(stream_bytes(4096, 1), 0u);
  if (!has_gloo()) GTEST_SKIP() << "built without Gloo";
  f.backend = "gloo", f.coll = "allgather";
  EXPECT_EQ(error_of(f),
            "--algo: 'stream' moves an all-reduce's bytes; it does not apply to allgather");
  f.coll = "allreduce", f.dtype = "u8", f.op = "avg";  // nothing is reduced: any type and op
  EXPECT_EQ(error_of(f), "accepted");
  f.compare = true;  // with the stream alone there is no peer to compare with
  EXPECT_NE(error_of(f).find("--compare: needs ours and at least one peer"), std::string::npos)
      << error_of(f);
  f.algo = "all,stream,gloo-ring", f.dtype = "f32", f.op = "sum";
  EXPECT_EQ(error_of(f), "accepted");
}

}  // namespace
}  // namespace cclab::bench
