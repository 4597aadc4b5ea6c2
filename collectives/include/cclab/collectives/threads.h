// The threads backend: N ranks as threads of one process, exchanging data
// through shared memory. A receiver copies or reduces straight from the
// sender's buffer, so a transfer costs one pass over the data.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "cclab/collectives/communicator.h"

namespace cclab::coll {

// One thread per rank, and a pointer per ordered pair of ranks (128 MiB at
// the limit); for more ranks `cclab sim` predicts and `cclab check` proves.
inline constexpr int kThreadsMaxRanks = 4096;

struct ThreadsOptions {
  std::chrono::milliseconds timeout{30000};
};

// Owns the shared state of N ranks. comm(r) must be used by one thread at a
// time (the thread playing rank r).
class ThreadsWorld {
 public:
  explicit ThreadsWorld(int ranks, ThreadsOptions options = {});
  ~ThreadsWorld();
  ThreadsWorld(const ThreadsWorld&) = delete;
  ThreadsWorld& operator=(const ThreadsWorld&) = delete;

  int size() const;
  Communicator& comm(int rank);

  // Runs fn(comm(r)) on N threads and joins them; the first exception thrown
  // by any rank is rethrown here (the others see the abort and stop). When
  // the system refuses a thread, the ranks started are stopped and joined,
  // and the refusal is thrown.
  void run(const std::function<void(Communicator&)>& fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cclab::coll
