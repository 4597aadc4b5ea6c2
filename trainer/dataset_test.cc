// Record files, MNIST IDX, and TensorFlow's shard policies: in one epoch
// every example is seen exactly once across the workers (FILE, DATA).
#include "cclab/trainer/dataset.h"

#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "cclab/test/errors.h"
#include "test_util.h"

namespace cclab::train {
namespace {

namespace fs = std::filesystem;
using cclab::test::expect_error;
using cclab::test::expect_invalid;
using testing::TempDir;

// Files whose examples carry their global id in feature 0 (file f holds ids
// [start_f, start_f + sizes[f])), so a test can tell examples apart.
void write_numbered(const fs::path& dir, const std::vector<int>& sizes) {
  fs::create_directories(dir);
  std::int64_t id = 0;
  for (std::size_t f = 0; f < sizes.size(); ++f) {
    Dataset d{2, 3, {}, {}};
    for (int i = 0; i < sizes[f]; ++i, ++id) {
      d.features.insert(d.features.end(), {float(id), 0.5f});
      d.labels.push_back(std::int32_t(id % 3));
    }
    write_record_file(dir / ("part-" + std::to_string(f) + ".rec"), d);
  }
}

// The ids worker w sees in `epoch`, in order.
std::vector<std::int64_t> ids_seen(const ShardedData& s, int epoch) {
  std::vector<std::int64_t> ids;
  for (auto e : s.epoch_order(epoch))
    ids.push_back(std::int64_t(s.examples().features[std::size_t(e) * 2]));
  return ids;
}

// Expected: the union over workers of what each sees is 0..n-1, each once.
void expect_exactly_once(const fs::path& dir, ShardPolicy policy, int workers, std::int64_t n) {
  const DataSource src = open_source(dir);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::map<std::int64_t, int> count;
    for (int w = 0; w < workers; ++w) {
      ShardedData s(src, policy, w, workers, 11);
      const auto ids = ids_seen(s, epoch);
      EXPECT_EQ(std::int64_t(ids.size()), s.shard_size(w)) << "worker " << w;
      for (auto id : ids) count[id]++;
    }
    ASSERT_EQ(std::int64_t(count.size()), n) << "epoch " << epoch;
    for (const auto& [id, c] : count) ASSERT_EQ(c, 1) << "example " << id << " epoch " << epoch;
    EXPECT_EQ(count.begin()->first, 0);
    EXPECT_EQ(count.rbegin()->first, n - 1);
  }
}

TEST(Sharding, FileSeesEveryExampleOnceAcrossWorkers) {
  TempDir dir;
  write_numbered(dir.path(), {10, 7, 12, 9, 10, 11, 8, 13});  // 80, uneven files
  for (int workers : {1, 2, 3, 4, 8})
    expect_exactly_once(dir.path(), ShardPolicy::kFile, workers, 80);
}

TEST(Sharding, DataSeesEveryExampleOnceAcrossWorkers) {
  TempDir dir;
  write_numbered(dir.path(), {10, 7, 12, 9, 10, 11, 8, 13});
  for (int workers : {1, 2, 3, 5, 7, 9})
    expect_exactly_once(dir.path(), ShardPolicy::kData, workers, 80);
}

TEST(Sharding, FileGivesWorkerIFilesIPlusW) {
  TempDir dir;
  write_numbered(dir.path(), {4, 4, 4, 4, 4});  // ids 4f..4f+3 in file f
  const DataSource src = open_source(dir.path());
  ShardedData s(src, ShardPolicy::kFile, 1, 2, 5);  // worker 1 of 2: files 1 and 3
  std::set<std::int64_t> seen;
  for (auto id : ids_seen(s, 0)) seen.insert(id / 4);
  EXPECT_EQ(seen, (std::set<std::int64_t>{1, 3}));
}

TEST(Sharding, OffGivesEveryWorkerEverything) {
  TempDir dir;
  write_numbered(dir.path(), {5, 6});
  const DataSource src = open_source(dir.path());
  for (int w = 0; w < 3; ++w)
    EXPECT_EQ(ShardedData(src, ShardPolicy::kOff, w, 3, 1).epoch_order(0).size(), 11u);
}

TEST(Sharding, AutoIsFileForRecordFiles) {
  TempDir dir;
  write_numbered(dir.path(), {5, 6});
  EXPECT_EQ(ShardedData(open_source(dir.path()), ShardPolicy::kAuto, 0, 2, 1).policy(),
            ShardPolicy::kFile);
}

TEST(Sharding, FewerFilesThanWorkersIsAnErrorForFileAndAuto) {
  TempDir dir;
  write_numbered(dir.path(), {5, 6});
  const DataSource src = open_source(dir.path());
  for (auto p : {ShardPolicy::kFile, ShardPolicy::kAuto})
    expect_invalid([&] { ShardedData(src, p, 0, 3, 1); }, {"2 files in", "but 3 workers"});
  EXPECT_NO_THROW(ShardedData(src, ShardPolicy::kData, 2, 3, 1));
}

TEST(Sharding, ShuffleIsSeededAndChangesPerEpoch) {
  TempDir dir;
  write_numbered(dir.path(), {50, 50});
  const DataSource src = open_source(dir.path());
  ShardedData a(src, ShardPolicy::kOff, 0, 1, 9), b(src, ShardPolicy::kOff, 0, 1, 9),
      c(src, ShardPolicy::kOff, 0, 1, 10);
  EXPECT_EQ(a.epoch_order(0), b.epoch_order(0));
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  EXPECT_NE(a.epoch_order(0), c.epoch_order(0));
  auto sorted = a.epoch_order(1);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], std::int64_t(i));
}

TEST(Sharding, StepsPerEpochIsSetByTheSmallestShard) {
  TempDir dir;
  write_numbered(dir.path(), {10, 30});
  const DataSource src = open_source(dir.path());
  // FILE: worker 0 has 10 examples, worker 1 has 30; both must take 10/4 = 2 steps.
  EXPECT_EQ(ShardedData(src, ShardPolicy::kFile, 1, 2, 1).steps_per_epoch(4), 2);
  // DATA: 40 examples over 3 workers -> 14, 13, 13; 13/4 = 3 steps.
  EXPECT_EQ(ShardedData(src, ShardPolicy::kData, 0, 3, 1).steps_per_epoch(4), 3);
}

TEST(Dataset, GeneratedSetHasEightFilesAndEveryClass) {
  TempDir dir;
  make_dataset(dir.path(), GenerateOptions{});
  const DataSource src = open_source(dir.path());
  EXPECT_EQ(src.files.size(), 8u);
  EXPECT_FALSE(src.eval_file.empty());
  Dataset all;
  for (const auto& f : src.files) read_record_file(f, all);
  EXPECT_EQ(all.size(), 8192);
  std::set<int> classes(all.labels.begin(), all.labels.end());
  EXPECT_EQ(classes.size(), 10u);
}

TEST(Dataset, TruncatedRecordFileIsRejected) {
  TempDir dir;
  write_numbered(dir.path(), {5});
  const auto file = dir.path() / "part-0.rec";
  fs::resize_file(file, fs::file_size(file) - 3);
  expect_error<IoError>([&] { open_source(dir.path()); }, {"header says 5 records"});
}

TEST(Dataset, MissingOrEmptyDirectoryNamesTheFlag) {
  TempDir dir;
  EXPECT_THROW(open_source(dir.path() / "nope"), InvalidArgument);
  try {
    open_source(dir.path());
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--data:", 0), 0u) << e.what();
  }
}

void write_bytes(const fs::path& p, const std::vector<unsigned char>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

TEST(Dataset, ReadsMnistIdxAndShardsItByData) {
  TempDir dir;
  // 3 images of 2x2 pixels; labels 7, 0, 9. IDX integers are big-endian.
  write_bytes(dir.path() / "train-images-idx3-ubyte",
              {0, 0,   8,  3,   0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2,  // magic, n, rows, cols
               0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8});
  write_bytes(dir.path() / "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9});
  const DataSource src = open_source(dir.path());
  EXPECT_FALSE(src.file_based);
  const Dataset d = read_idx(src.files[0], dir.path() / "train-labels-idx1-ubyte");
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.dim, 4);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{7, 0, 9}));
  EXPECT_FLOAT_EQ(d.features[1], 1.0f);
  EXPECT_FLOAT_EQ(d.features[2], 0.2f);
  EXPECT_EQ(ShardedData(src, ShardPolicy::kAuto, 0, 2, 1).policy(), ShardPolicy::kData);
  EXPECT_THROW(ShardedData(src, ShardPolicy::kFile, 0, 2, 1), InvalidArgument);
}

TEST(Dataset, ShardPolicyNamesParseAndBadOnesAreNamed) {
  EXPECT_EQ(parse_shard_policy("data"), ShardPolicy::kData);
  try {
    parse_shard_policy("rows");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--shard-policy: unknown policy 'rows' (allowed: off, file, data, auto)");
  }
}

}  // namespace
}  // namespace cclab::train
