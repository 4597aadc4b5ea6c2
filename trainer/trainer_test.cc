// End-to-end tests of train_worker on the threads backend: data-parallel
// equivalence, mirrored replicas, BackupAndRestore.
#include "cclab/trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/test/errors.h"
#include "cclab/trainer/checkpoint.h"
#include "cclab/trainer/cluster.h"
#include "test_util.h"

namespace cclab::train {
namespace {

namespace fs = std::filesystem;
using cclab::test::expect_invalid;
using testing::TempDir;
using testing::train_threads;

TrainConfig small_config(const fs::path& data) {
  TrainConfig c;
  c.data_dir = data;
  c.hidden = {32, 16};
  c.epochs = 1;
  c.per_replica_batch = 8;
  c.shard_policy = ShardPolicy::kData;
  c.seed = 3;
  c.evaluate = false;
  return c;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// The largest distance any weight moved from its start (how far training went).
double max_movement(const TrainConfig& c, const std::vector<float>& end) {
  TrainConfig zero = c;
  zero.max_steps = 0;
  zero.epochs = 1;
  zero.learning_rate = 1e-30;  // an update this small leaves float weights unchanged
  zero.optimizer = OptimizerKind::kSgd;
  return max_abs_diff(train_threads(1, zero)[0].weights, end);
}

struct EquivalenceCase {
  int workers;
  coll::Algorithm algo;
  OptimizerKind optimizer;
};

std::string case_name(const ::testing::TestParamInfo<EquivalenceCase>& i) {
  return std::to_string(i.param.workers) + "w_" + std::string(coll::algorithm_name(i.param.algo)) +
         "_" + std::string(optimizer_name(i.param.optimizer));
}

class Equivalence : public ::testing::TestWithParam<EquivalenceCase> {};

// N workers with per-replica batch b take the same steps as one worker with
// batch N*b: under DATA sharding worker i's s-th batch holds elements
// i + N*(s*b + j) of the shared shuffled stream, so the N batches together are
// exactly the single worker's s-th batch (1024 examples divide by 8*N for the
// N used, so no remainder is dropped differently). The averaged gradient is
// then the same quantity; only float rounding differs (per-replica partial
// sums, then the all-reduce's summation order, then the division by N).
//
// Tolerance: float32 gradients over a batch of <= 32 terms differ by a few
// ulps of the gradient scale (~1e-7 relative); SGD (lr 0.05) carries that
// into the weights linearly, Adam (lr 1e-3 here) divides by sqrt(v) + 1e-7 so
// a relative error stays relative. Over <= 43 steps the accumulated
// difference stays below 1e-5 absolute for weights of order 0.1-1 (we
// measure ~1e-7); 1e-5 is still 100x smaller than how far training moved the
// weights (asserted below), so a wrong average, a missing bucket or a
// mismatched batch fails it.
TEST_P(Equivalence, NWorkersMatchOneWorkerWithNTimesTheBatch) {
  const auto p = GetParam();
  TempDir dir;
  testing::make_small_dataset(dir.path());
  TrainConfig c = small_config(dir.path());
  c.optimizer = p.optimizer;
  c.learning_rate = p.optimizer == OptimizerKind::kSgd ? 0.05 : 1e-3;
  c.strategy.algo.algo = p.algo;
  c.strategy.bucket_bytes = 1024;  // several buckets, started during backward
  const auto many = train_threads(p.workers, c);

  TrainConfig one = c;
  one.per_replica_batch = c.per_replica_batch * p.workers;
  one.strategy.algo.algo = coll::Algorithm::kAuto;
  const auto single = train_threads(1, one);

  ASSERT_EQ(many[0].step, single[0].step);
  ASSERT_GT(many[0].step, 30);
  constexpr double kTolerance = 1e-5;
  const double diff = max_abs_diff(many[0].weights, single[0].weights);
  const double moved = max_movement(c, single[0].weights);
  RecordProperty("max_abs_diff", std::to_string(diff));
  std::cout << "max |w_N - w_1| = " << diff << ", max movement " << moved << "\n";
  EXPECT_LE(diff, kTolerance);
  EXPECT_GE(moved, 100 * kTolerance);
  // Mirrored: every replica ends bitwise identical to the chief.
  for (const auto& r : many) EXPECT_EQ(r.weights_sha256, many[0].weights_sha256);
}

std::vector<EquivalenceCase> equivalence_cases() {
  std::vector<EquivalenceCase> v;
  for (auto algo : coll::algorithms_for(coll::CollectiveKind::kAllReduce))
    for (auto opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) v.push_back({4, algo, opt});
  v.push_back({2, coll::Algorithm::kRing, OptimizerKind::kAdam});
  v.push_back({3, coll::Algorithm::kHierarchical, OptimizerKind::kSgd});
  v.push_back({3, coll::Algorithm::kTree, OptimizerKind::kAdam});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, Equivalence, ::testing::ValuesIn(equivalence_cases()),
                         case_name);

TEST(Trainer, OverlapDoesNotChangeTheResult) {
  TempDir dir;
  testing::make_small_dataset(dir.path());
  TrainConfig c = small_config(dir.path());
  c.strategy.bucket_bytes = 512;
  const auto overlapped = train_threads(2, c);
  c.strategy.overlap = false;
  const auto after = train_threads(2, c);
  EXPECT_EQ(overlapped[0].weights_sha256, after[0].weights_sha256);
}

TEST(Trainer, LossFallsAndAccuracyBeatsChance) {
  TempDir dir;
  testing::make_small_dataset(dir.path());
  TrainConfig c = small_config(dir.path());
  c.evaluate = true;
  c.learning_rate = 1e-3;
  c.shard_policy = ShardPolicy::kAuto;
  c.epochs = 1;
  const double first = train_threads(2, c)[0].loss;
  c.epochs = 6;
  const auto r = train_threads(2, c)[0];
  EXPECT_LT(r.loss, first);
  EXPECT_GT(r.accuracy, 0.5);  // 4 classes: chance is 0.25
}

// BackupAndRestore: a run stopped part-way (max_steps keeps the backup, as a
// crash would) and resumed reaches exactly the uninterrupted run's weights.
TEST(Trainer, ResumeFromBackupGivesBitwiseTheSameWeights) {
  TempDir dir;
  testing::make_small_dataset(dir.path() / "data");
  TrainConfig c = small_config(dir.path() / "data");
  c.epochs = 3;
  c.shard_policy = ShardPolicy::kFile;
  c.backup_dir = dir.path() / "backup_full";
  c.save_every = 10;
  const auto full = train_threads(2, c);
  EXPECT_FALSE(fs::exists(c.backup_dir)) << "a finished run deletes its backup";

  c.backup_dir = dir.path() / "backup_cut";
  c.max_steps = 75;  // mid-epoch 2 (64 steps per epoch); last backup at step 70
  const auto cut = train_threads(2, c);
  ASSERT_EQ(cut[0].step, 75);
  ASSERT_FALSE(CheckpointStore(c.backup_dir).list().empty());
  c.max_steps = 0;
  const auto resumed = train_threads(2, c);
  EXPECT_TRUE(resumed[0].resumed);
  EXPECT_EQ(resumed[0].steps_run, full[0].step - 70);
  EXPECT_EQ(resumed[0].step, full[0].step);
  EXPECT_EQ(resumed[0].weights_sha256, full[0].weights_sha256);
}

TEST(Trainer, ResumeRefusesABackupOfAnotherJob) {
  TempDir dir;
  testing::make_small_dataset(dir.path() / "data");
  TrainConfig c = small_config(dir.path() / "data");
  c.backup_dir = dir.path() / "backup";
  c.save_every = 5;
  c.max_steps = 5;
  train_threads(2, c);
  c.per_replica_batch = 4;
  c.max_steps = 0;
  // Resuming a backup written with another batch size.
  expect_invalid([&] { train_threads(2, c); }, "per_replica_batch is 8 in the backup but 4");
}

TEST(Trainer, ModelDirHoldsTheChiefsSaveAndNoWorkerTemp) {
  TempDir dir;
  testing::make_small_dataset(dir.path() / "data");
  TrainConfig c = small_config(dir.path() / "data");
  c.model_dir = dir.path() / "model";
  const auto r = train_threads(3, c);
  const auto files = CheckpointStore(c.model_dir).list();
  ASSERT_EQ(files.size(), 1u);
  const auto saved = read_checkpoint(files[0]);
  EXPECT_EQ(saved.weights, r[0].weights);
  EXPECT_EQ(saved.step, r[0].step);
  for (const auto& e : fs::directory_iterator(c.model_dir))
    EXPECT_FALSE(e.path().filename().string().starts_with("workertemp_")) << e.path();
}

// Workers save into DIR/workertemp_<task id>: with that path blocked by a
// file, worker 1's save fails and every worker reports the failed save.
TEST(Trainer, WorkersSaveIntoTheirWorkerTempDirectory) {
  TempDir dir;
  testing::make_small_dataset(dir.path() / "data");
  TrainConfig c = small_config(dir.path() / "data");
  c.model_dir = dir.path() / "model";
  c.max_steps = 2;
  fs::create_directories(c.model_dir);
  std::ofstream(c.model_dir / "workertemp_1") << "in the way";
  try {
    train_threads(2, c);
    FAIL() << "worker 1's save cannot have succeeded";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("workertemp_1") != std::string::npos ||
                what.find("failed on another worker") != std::string::npos)
        << what;
  }
  EXPECT_EQ(CheckpointStore(c.model_dir).list().size(), 1u) << "the chief's save is in place";
}

TEST(Cluster, TaskComesFromTfConfigOrTheRank) {
  const std::string tf =
      R"({"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "task": {"type": "worker", "index": 1}})";
  const auto env = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "TF_CONFIG") return tf;
    return std::nullopt;
  };
  const TaskInfo t = task_from_env(env, 2);
  EXPECT_EQ(t.type, "worker");
  EXPECT_EQ(t.id, 1);
  const auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  EXPECT_EQ(task_from_env(none, 3).id, 3);
  const auto bad = [](std::string_view) -> std::optional<std::string> {
    return R"({"cluster": {"worker": ["b:1"]}, "task": {"type": "worker", "index": 4}})";
  };
  EXPECT_THROW(task_from_env(bad, 0), InvalidArgument);
}

TEST(Trainer, BatchLargerThanTheShardIsAnError) {
  TempDir dir;
  testing::make_small_dataset(dir.path());
  TrainConfig c = small_config(dir.path());
  c.per_replica_batch = 4096;
  EXPECT_THROW(train_threads(2, c), InvalidArgument);
}

TEST(Trainer, FinalLineFormat) {
  TrainResult r;
  r.step = 12;
  r.loss = 0.123456789;
  r.accuracy = 0.75;
  r.weights_sha256 = std::string(64, 'a');
  EXPECT_EQ(final_line(r), "final step=12 loss=0.123456789 accuracy=0.7500 weights_sha256=" +
                               std::string(64, 'a'));
}

}  // namespace
}  // namespace cclab::train
