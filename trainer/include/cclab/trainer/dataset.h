// Training data: the built-in generated classification set (record files),
// MNIST's IDX files, and TensorFlow's auto-sharding policies over them.
//
// Record file (`*.rec`, little-endian): the 8 bytes "CCLABREC", u32 version
// (1), u32 feature count, u32 class count, u64 record count, then per record
// an i32 label and the features as f32. A reader checks every field and the
// file size against the header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cclab::train {

// Examples in memory: row i is features[i*dim .. (i+1)*dim) with labels[i].
struct Dataset {
  int dim = 0;
  int classes = 0;
  std::vector<float> features;
  std::vector<std::int32_t> labels;
  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
};

// Where the training examples come from. File-based sources (record files) can
// be sharded by file; MNIST's IDX pair is read into memory as one tensor, like
// Keras' mnist.load_data(), so it is not file-based.
struct DataSource {
  std::filesystem::path dir;
  bool file_based = true;
  int dim = 0;
  int classes = 0;
  std::vector<std::filesystem::path> files;  // record files, sorted by name
  std::vector<std::int64_t> file_counts;     // records per file
  std::filesystem::path eval_file;           // held-out set; empty when none
};

struct GenerateOptions {
  int files = 8;
  std::int64_t examples = 8192;  // training examples over all files
  std::int64_t eval_examples = 1024;
  int dim = 32;
  int classes = 10;
  std::uint64_t seed = 1;
};

// Writes the generated set into `dir` (created if missing): `files` training
// record files and eval.rec. Classes are Gaussian clusters around random
// centres with a shared non-linear distortion, so a linear model is not enough
// for the best accuracy but an MLP learns it.
void make_dataset(const std::filesystem::path& dir, const GenerateOptions& options);

// Opens a data directory: record files (`*.rec` except eval.rec), else MNIST's
// train-images-idx3-ubyte + train-labels-idx1-ubyte. Throws InvalidArgument
// naming `what` (the flag) when the directory is missing or holds neither.
DataSource open_source(const std::filesystem::path& dir, std::string_view what = "--data");

// One record file, checked; features and labels appended to `out`.
void read_record_file(const std::filesystem::path& file, Dataset& out);
void write_record_file(const std::filesystem::path& file, const Dataset& data);
// MNIST's IDX pair (images scaled to [0, 1]).
Dataset read_idx(const std::filesystem::path& images, const std::filesystem::path& labels);
// The held-out set of a source, or the whole training set when it has none.
Dataset load_eval_set(const DataSource& source);

// TensorFlow's tf.data.experimental.AutoShardPolicy.
enum class ShardPolicy { kOff, kFile, kData, kAuto };
ShardPolicy parse_shard_policy(std::string_view name, std::string_view what = "--shard-policy");
std::string_view shard_policy_name(ShardPolicy p);

// One worker's view of the data for a run. Which examples a worker sees:
//   OFF  every worker reads every example;
//   FILE worker i reads files i, i+W, ... (an error when files < workers);
//   DATA every worker reads everything and keeps elements i, i+W, ... of the
//        (identically) shuffled stream;
//   AUTO FILE for a file-based source, DATA otherwise.
// Each epoch's order is a seeded shuffle that changes per epoch.
class ShardedData {
 public:
  ShardedData(const DataSource& source, ShardPolicy policy, int worker, int workers,
              std::uint64_t seed);

  ShardPolicy policy() const { return policy_; }  // AUTO resolved
  const Dataset& examples() const { return data_; }
  // Indices into examples(): this worker's stream for `epoch`.
  std::vector<std::int64_t> epoch_order(int epoch) const;
  // Examples in worker w's stream per epoch (computed from the file headers,
  // so every worker knows every other's).
  std::int64_t shard_size(int w) const;
  // Full batches every worker can take per epoch (the smallest shard decides,
  // as all replicas step together); the remainder is dropped.
  std::int64_t steps_per_epoch(int per_replica_batch) const;

 private:
  std::vector<int> files_of(int w) const;

  DataSource source_;
  ShardPolicy policy_;
  int worker_, workers_;
  std::uint64_t seed_;
  Dataset data_;
};

}  // namespace cclab::train
