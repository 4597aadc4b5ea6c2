#include "train_bench.h"

#include <algorithm>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

namespace cclab::train {
namespace fs = std::filesystem;
namespace {

constexpr int kRepetitions = 3;
constexpr std::int64_t kDefaultSteps = 40;

struct Sample {
  double steps_per_second = 0, comm_share = 0;
};

Sample measure(const TrainConfig& c, int workers, const WorldRunner& run) {
  Sample s;
  std::mutex mu;
  run(workers, [&](coll::Communicator& comm) {
    const TrainResult r = train_worker(comm, c, TaskInfo{"worker", comm.rank()}, nullptr);
    if (comm.rank() != 0) return;
    std::lock_guard lock(mu);
    s.steps_per_second = double(r.steps_run) / r.train_seconds;
    s.comm_share = r.comm.sync_seconds / r.train_seconds;
  });
  return s;
}

// The median repetition by steps/s (with its communication share).
Sample median(std::vector<Sample> v) {
  std::sort(v.begin(), v.end(), [](const Sample& a, const Sample& b) {
    return a.steps_per_second < b.steps_per_second;
  });
  return v[v.size() / 2];
}

}  // namespace

void run_bench(TrainConfig c, std::string_view backend, const std::vector<int>& worker_counts,
               const WorldRunner& run, std::ostream* out) {
  fs::path generated;
  if (c.data_dir.empty()) {
    generated = fs::temp_directory_path() / fmt::format("cclab-train-bench-{}", ::getpid());
    c.data_dir = generated;
  }
  if (c.max_steps == 0) c.max_steps = kDefaultSteps;
  c.epochs = 1 << 20;  // bounded by max_steps
  c.evaluate = false;
  c.model_dir.clear();
  c.backup_dir.clear();
  if (out) {
    fmt::print(*out,
               "# cclab train --bench: {} backend, {} steps, per-replica batch {}, hidden {}, "
               "bucket {:.2f} MiB, median of {}\n",
               backend, c.max_steps, c.per_replica_batch, fmt::join(c.hidden, ","),
               double(c.strategy.bucket_bytes) / (1 << 20), kRepetitions);
    fmt::print(*out, "{:>8} {:>8} {:>10} {:>12}\n", "workers", "overlap", "steps/s", "comm_share");
  }
  for (int workers : worker_counts) {
    for (bool overlap : {true, false}) {
      c.strategy.overlap = overlap;
      std::vector<Sample> reps;
      for (int i = 0; i < kRepetitions; ++i) reps.push_back(measure(c, workers, run));
      const Sample m = median(reps);
      if (!out) continue;
      fmt::print(*out, "{:>8} {:>8} {:>10.1f} {:>11.1f}%\n", workers, overlap ? "on" : "off",
                 m.steps_per_second, 100 * m.comm_share);
      out->flush();
    }
  }
  if (!generated.empty()) fs::remove_all(generated);
}

}  // namespace cclab::train
