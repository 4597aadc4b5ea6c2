// The training job each worker runs: data shard, mirrored MLP, bucketed
// gradient all-reduce, optimizer, BackupAndRestore checkpoints, and the
// final save of the model (chief to the model directory, the other workers
// to <dir>/workertemp_<task_id>/, removed after the save succeeded).
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "cclab/collectives/communicator.h"
#include "cclab/trainer/dataset.h"
#include "cclab/trainer/optimizer.h"
#include "cclab/trainer/strategy.h"

namespace cclab::train {

struct TrainConfig {
  std::filesystem::path data_dir;
  std::vector<int> hidden{128, 128};
  int epochs = 3;
  int per_replica_batch = 64;
  double learning_rate = 1e-4;  // the article's Adam(0.0001)
  OptimizerKind optimizer = OptimizerKind::kAdam;
  ShardPolicy shard_policy = ShardPolicy::kAuto;
  std::uint64_t seed = 1;
  std::filesystem::path model_dir;   // empty: no final save
  std::filesystem::path backup_dir;  // empty: no BackupAndRestore
  std::int64_t save_every = 0;       // steps between backups; 0: at the end of every epoch
  int keep = 3;                      // checkpoints kept per directory
  StrategyOptions strategy;
  bool check_replicas = true;  // compare replica hashes after every step
  std::int64_t max_steps = 0;  // stop after this many steps in total (0: run every epoch)
  bool evaluate = true;        // chief evaluates on the held-out set per epoch and at the end
  int replicas_on_host = 1;    // replicas whose memory this machine holds (threads: all)
};

// Who this worker is in TensorFlow's terms (for the workertemp directory).
struct TaskInfo {
  std::string type = "worker";  // "chief" or "worker"
  int id = 0;                   // task index within its type
};

struct TrainResult {
  std::int64_t step = 0;
  double loss = 0, accuracy = 0;  // chief: on the evaluation set (0 elsewhere)
  std::string weights_sha256;
  std::vector<float> weights;
  bool resumed = false;
  std::int64_t steps_run = 0;  // by this process (excludes steps restored from a backup)
  double train_seconds = 0;    // wall time of those steps
  CommStats comm;
};

// Refuses a configuration out of range (InvalidArgument naming the flag:
// --epochs, --per-replica-batch, --save-every, --max-steps, --keep, --lr).
// The command calls it before any data is generated or any replica starts;
// train_worker() calls it too.
void validate_train_config(const TrainConfig& config);

// Refuses, before any data is generated or any replica starts, a model for
// the data in config.data_dir (or the built-in set that would be generated
// there) whose parameters cannot fit this machine for config.replicas_on_host
// replicas; InvalidArgument names --hidden. train_worker() checks again once
// the data is there.
void require_model_memory(const TrainConfig& config);

// Runs the job on one replica; every replica of the communicator calls it.
// Progress lines go to `log` on the chief (nullptr: silent).
TrainResult train_worker(coll::Communicator& comm, const TrainConfig& config, const TaskInfo& task,
                         std::ostream* log);

// "final step=<n> loss=<x> accuracy=<y> weights_sha256=<hex>"
std::string final_line(const TrainResult& r);

}  // namespace cclab::train
