// Checkpoints: everything a run needs to continue exactly where it stopped
// (weights, optimizer state, step, epoch, position in the epoch, the data
// order's RNG state), in one file with a SHA-256 trailer.
//
// File `ckpt-<step>.cclab`: the 8 bytes "CCLABCKP", u64 metadata length, the
// metadata as JSON, then three float arrays (weights, Adam m, Adam v), each a
// u64 count and the floats, then the SHA-256 (OpenSSL) of everything before
// it. Written atomically: a temporary file in the same directory, fsync,
// rename, fsync of the directory; a crash part-way leaves only a temporary
// file that is never read, so the previous checkpoint is never damaged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cclab/trainer/optimizer.h"

namespace cclab::train {

struct CheckpointState {
  std::int64_t step = 0;           // optimizer steps done
  int epoch = 0;                   // the epoch to continue in (0-based)
  std::int64_t step_in_epoch = 0;  // batches of that epoch already done
  std::uint64_t shuffle_rng_state = 0;
  nlohmann::json config;  // what must match to resume (sizes, batch, world, ...)
  std::vector<float> weights;
  OptimizerState optimizer;
};

// Writes `state` to `file` atomically (see above).
void write_checkpoint(const std::filesystem::path& file, const CheckpointState& state);
// Reads and verifies one file; IoError saying what is wrong (truncated, bad
// magic, checksum mismatch, malformed metadata).
CheckpointState read_checkpoint(const std::filesystem::path& file);

// A directory of checkpoints keeping the newest `keep`.
class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path dir, int keep = 3);
  const std::filesystem::path& dir() const { return dir_; }

  // Saves as ckpt-<step>.cclab and deletes the oldest beyond `keep`.
  std::filesystem::path save(const CheckpointState& state);
  // Checkpoint files, oldest first.
  std::vector<std::filesystem::path> list() const;
  // The newest checkpoint that verifies; each rejected one is reported
  // through `warn` (one line naming the file and the reason). nullopt when
  // there is none.
  std::optional<CheckpointState> load_latest(
      const std::function<void(const std::string&)>& warn) const;

 private:
  std::filesystem::path dir_;
  int keep_;
};

}  // namespace cclab::train
