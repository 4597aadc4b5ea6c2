// Where the ranks of a sweep run. A backend starts every rank of one session
// and runs the sweep's per-rank function on each; new backends (gloo, cuda,
// nccl) plug in by implementing this interface and adding a row to the
// registry in backend.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cclab/collectives/communicator.h"

namespace cclab::bench {

// Where a rank's collective buffers live: host memory for the CPU backends,
// device memory of the rank's GPU for cuda and nccl. The sweep fills inputs
// and reads outputs through it.
class RankMemory {
 public:
  virtual ~RankMemory() = default;
  // Zeroed, 64-byte aligned at least, alive as long as this object.
  virtual std::byte* allocate(std::size_t bytes) = 0;
  // False: the sweep stages inputs and outputs through host copies.
  virtual bool host_visible() const { return true; }
  virtual void upload(std::byte* dst, const std::byte* host, std::size_t bytes);
  virtual void download(std::byte* host, const std::byte* src, std::size_t bytes);
  virtual void fill(std::byte* dst, int byte, std::size_t bytes);
};

// One session of `ranks` ranks, all in this process (threads, cuda, nccl) or
// one per process (gloo).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int ranks() const = 0;
  // This process's rank (process backends); 0 when every rank runs here.
  virtual int rank() const { return 0; }
  // Runs fn(comm) once on every rank and returns when all have finished; the
  // first exception thrown by a rank is rethrown here.
  virtual void run(const std::function<void(coll::Communicator&)>& fn) = 0;
  // True when every rank runs in this process (the sweep then shares timings
  // through memory); false when this process is one rank of many (they
  // exchange them with collectives).
  virtual bool shares_memory() const { return true; }
  // Whether this process prints the results (with processes: rank 0 only).
  virtual bool reports() const { return true; }
  // How many ranks keep their buffers in this machine's memory: every rank
  // when they run in this process, else the ranks the launcher placed on this
  // host (LOCAL_WORLD_SIZE and its kin).
  virtual int ranks_on_host() const { return shares_memory() ? ranks() : 1; }
  // The `hier` group size the ranks' placement suggests (ranks per host); 0: none.
  virtual int host_group_size() const { return 0; }
  // Whether every rank reads the same steady clock (one kernel), so that one
  // rank's timestamps mean something to another (--timing span). A process
  // backend finds out with a collective: every rank calls it, or none.
  virtual bool shares_clock() { return true; }
  // The memory the sweep allocates rank `rank`'s buffers in.
  virtual std::unique_ptr<RankMemory> memory(int rank);
  // A line about placement worth telling the user ("" for none), e.g. that
  // NCCL runs fewer ranks than asked.
  virtual std::string note() const { return ""; }
};

// What a backend is made from; the process backends read their identity and
// rendezvous from the environment (see cclab/collectives/cluster_env.h).
struct BackendOptions {
  int ranks = 1;
  std::chrono::milliseconds timeout{30000};
  std::string rendezvous;  // --rendezvous; empty: from the environment
  std::string bind;        // --bind; empty: CCLAB_BIND, TF_CONFIG's host, or the hostname
  bool pin = false;        // --pin: rank r runs on core r % cores
  std::string transport;   // --transport (gloo); empty: CCLAB_TRANSPORT, else tcp
  std::optional<std::uint64_t> eager_bytes;  // --eager (gloo); none: the default
  std::optional<bool> batch_loop_thread;     // --loop-thread (gloo); none: the default
};

// The gloo backend's transports: "tcp, ibverbs" (ibverbs is checked when used).
std::string transport_names();
// Throws InvalidArgument naming `what` (--transport or CCLAB_TRANSPORT) and
// the allowed names unless `name` is one of them.
void check_transport_name(std::string_view name, std::string_view what);

// Pins the calling thread (and threads it starts later) to core rank % cores;
// throws Error naming --pin when the kernel refuses.
void pin_to_core(int rank);

// Throws InvalidArgument naming --backend and the allowed names.
void check_backend_name(std::string_view name);
// "threads" (and the others as they are built in).
std::string backend_names();

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options);
std::unique_ptr<Backend> make_backend(std::string_view name, int ranks,
                                      std::chrono::milliseconds timeout);
// The world size a process backend will have, from the environment, so that
// the sweep is configured for it (nullopt for in-process backends).
std::optional<int> process_world_size(std::string_view name);

}  // namespace cclab::bench
