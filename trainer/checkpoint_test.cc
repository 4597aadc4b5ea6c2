// Checkpoint files: round trip, corruption and truncation rejected with a
// clear error, the previous good checkpoint used, the newest K kept.
#include "cclab/trainer/checkpoint.h"

#include <fstream>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "test_util.h"

namespace cclab::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

CheckpointState state_at(std::int64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = int(step / 10);
  s.step_in_epoch = step % 10;
  s.shuffle_rng_state = 0x1234567890abcdefull + std::uint64_t(step);
  s.config = {{"workers", 2}, {"layer_sizes", {3, 4, 2}}};
  for (int i = 0; i < 50; ++i) s.weights.push_back(float(step) + 0.25f * float(i));
  s.optimizer.iterations = step;
  s.optimizer.m.assign(50, 0.5f);
  s.optimizer.v.assign(50, float(step));
  return s;
}

void flip_byte(const fs::path& p, std::uintmax_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x01);
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

std::string rejection(const fs::path& p) {
  try {
    read_checkpoint(p);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, RoundTripsEveryField) {
  TempDir dir;
  const auto want = state_at(27);
  write_checkpoint(dir.path() / "c.cclab", want);
  const auto got = read_checkpoint(dir.path() / "c.cclab");
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.step_in_epoch, want.step_in_epoch);
  EXPECT_EQ(got.shuffle_rng_state, want.shuffle_rng_state);
  EXPECT_EQ(got.config, want.config);
  EXPECT_EQ(got.weights, want.weights);
  EXPECT_EQ(got.optimizer.iterations, want.optimizer.iterations);
  EXPECT_EQ(got.optimizer.m, want.optimizer.m);
  EXPECT_EQ(got.optimizer.v, want.optimizer.v);
  // Atomic write: no temporary file left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Checkpoint, CorruptedByteIsRejectedByItsChecksum) {
  TempDir dir;
  const auto p = dir.path() / "c.cclab";
  write_checkpoint(p, state_at(3));
  for (std::uintmax_t offset : {std::uintmax_t(20), fs::file_size(p) / 2, fs::file_size(p) - 1}) {
    write_checkpoint(p, state_at(3));
    flip_byte(p, offset);
    EXPECT_NE(rejection(p).find("SHA-256 mismatch"), std::string::npos) << "offset " << offset;
  }
}

TEST(Checkpoint, TruncatedFileIsRejected) {
  TempDir dir;
  const auto p = dir.path() / "c.cclab";
  write_checkpoint(p, state_at(3));
  fs::resize_file(p, fs::file_size(p) - 100);
  EXPECT_NE(rejection(p).find("SHA-256 mismatch (corrupted or truncated)"), std::string::npos);
  fs::resize_file(p, 10);
  EXPECT_NE(rejection(p).find("truncated (10 bytes)"), std::string::npos) << rejection(p);
}

TEST(Checkpoint, StoreKeepsTheNewestK) {
  TempDir dir;
  CheckpointStore store(dir.path(), 3);
  for (std::int64_t step : {5, 10, 15, 20, 25}) store.save(state_at(step));
  const auto files = store.list();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(read_checkpoint(files[0]).step, 15);
  EXPECT_EQ(read_checkpoint(files[2]).step, 25);
}

TEST(Checkpoint, CorruptNewestFallsBackToThePreviousGoodOne) {
  TempDir dir;
  CheckpointStore store(dir.path(), 3);
  store.save(state_at(10));
  store.save(state_at(20));
  const auto newest = store.save(state_at(30));
  fs::resize_file(newest, fs::file_size(newest) / 2);  // a torn write
  std::vector<std::string> warnings;
  const auto got = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 20);
  EXPECT_EQ(got->weights, state_at(20).weights);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(newest.filename().string()), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("trying the previous checkpoint"), std::string::npos);
}

TEST(Checkpoint, LeftoverTemporaryFileOfACrashedSaveIsIgnored) {
  TempDir dir;
  CheckpointStore store(dir.path(), 3);
  store.save(state_at(10));
  std::ofstream(dir.path() / ".ckpt-0000000020.cclab.tmp-999") << "half a checkpoint";
  const auto got = store.load_latest([](const std::string& w) { ADD_FAILURE() << w; });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 10);
}

TEST(Checkpoint, NoCheckpointIsNullopt) {
  TempDir dir;
  EXPECT_FALSE(CheckpointStore(dir.path() / "none").load_latest([](const std::string&) {}));
}

TEST(Checkpoint, KeepBelowOneNamesTheFlag) {
  EXPECT_THROW(CheckpointStore("x", 0), InvalidArgument);
}

}  // namespace
}  // namespace cclab::train
