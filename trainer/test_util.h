// Helpers shared by the trainer's tests: temporary directories, small
// generated datasets and a threads-backend run of train_worker.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cclab/collectives/threads.h"
#include "cclab/trainer/dataset.h"
#include "cclab/trainer/trainer.h"

namespace cclab::train::testing {

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("cclab-trainer-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A small generated set: 8 files of 128 examples, 16 features, 4 classes.
inline void make_small_dataset(const std::filesystem::path& dir, std::uint64_t seed = 7) {
  GenerateOptions g;
  g.examples = 1024;
  g.eval_examples = 256;
  g.dim = 16;
  g.classes = 4;
  g.seed = seed;
  make_dataset(dir, g);
}

// train_worker on `ranks` threads; the results in rank order.
inline std::vector<TrainResult> train_threads(int ranks, const TrainConfig& c) {
  coll::ThreadsWorld world(ranks, coll::ThreadsOptions{std::chrono::milliseconds(20000)});
  std::vector<TrainResult> out(static_cast<std::size_t>(ranks));
  world.run([&](coll::Communicator& comm) {
    out[static_cast<std::size_t>(comm.rank())] =
        train_worker(comm, c, TaskInfo{"worker", comm.rank()}, nullptr);
  });
  return out;
}

}  // namespace cclab::train::testing
