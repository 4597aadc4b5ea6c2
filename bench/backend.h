// Where the ranks of a sweep run. A backend starts every rank of one session
// and runs the sweep's per-rank function on each; new backends (gloo, cuda,
// nccl) plug in by implementing this interface and adding a row to the
// registry in backend.cc.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cclab/collectives/communicator.h"

namespace cclab::bench {

// One session of `ranks` ranks. The sweep shares timings and check results
// between ranks through memory, so every rank of a session must run in this
// process (a multi-process backend would exchange them with collectives).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int ranks() const = 0;
  // Runs fn(comm) once on every rank and returns when all have finished; the
  // first exception thrown by a rank is rethrown here.
  virtual void run(const std::function<void(coll::Communicator&)>& fn) = 0;
};

// Throws InvalidArgument naming --backend and the allowed names.
void check_backend_name(std::string_view name);
// "threads" (and the others as they are built in).
std::string backend_names();

std::unique_ptr<Backend> make_backend(std::string_view name, int ranks,
                                      std::chrono::milliseconds timeout);

}  // namespace cclab::bench
