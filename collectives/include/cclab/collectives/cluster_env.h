// Who am I and where do we meet: a process's rank in a multi-process job and
// the rendezvous store, read from the environment conventions launchers use.
// Pure logic (no transport), so the gloo backend, the trainer and `cclab
// launch` share it and it is tested without Gloo.
//
// Identity, first convention present wins:
//  1. TF_CONFIG (TensorFlow's MultiWorkerMirroredStrategy format)
//     {"cluster": {"chief": ["h:p"], "worker": ["h:p", ...]},
//      "task": {"type": "worker", "index": 1}}
//     The chief is rank 0 and the workers follow in index order; without a
//     chief task, worker 0 is the chief. The task's host is the host part of
//     its address; local rank/size count the tasks that share that host.
//  2. torchrun's RANK, WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE; without
//     them all ranks are taken to share one host).
//  3. Open MPI's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE.
// Rendezvous: the --rendezvous flag, else CCLAB_RENDEZVOUS (`file:DIR` or
// `redis://host:port`), else MASTER_ADDR + MASTER_PORT (a Redis server there).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cclab::coll {

// Looks a variable up; nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
// The process environment (getenv).
EnvLookup process_env();

struct Identity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string host;    // from TF_CONFIG; empty otherwise (use the hostname)
  std::string source;  // the convention it came from, e.g. "TF_CONFIG"
};

// nullopt when none of the conventions is set; InvalidArgument naming the
// variable and field when one is malformed or inconsistent.
std::optional<Identity> identity_from_env(const EnvLookup& env);
// One TF_CONFIG value (the JSON text).
Identity parse_tf_config(std::string_view json);

struct Rendezvous {
  enum class Kind { kFile, kRedis };
  Kind kind = Kind::kFile;
  std::string path;          // kFile: the shared directory
  std::string host;          // kRedis
  int port = 0;              // kRedis
  std::string spec() const;  // back to "file:DIR" or "redis://host:port"
};

// Parses "file:DIR" or "redis://host:port"; errors name `what` (a flag or variable).
Rendezvous parse_rendezvous(std::string_view spec, std::string_view what);
// `flag` (empty: not given), else the environment (see above); nullopt when
// nothing names a rendezvous.
std::optional<Rendezvous> rendezvous_from(std::string_view flag, const EnvLookup& env);

}  // namespace cclab::coll
