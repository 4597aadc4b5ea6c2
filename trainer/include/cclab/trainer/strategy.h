// A MultiWorkerMirroredStrategy for cclab: synchronous data parallelism over
// a Communicator. Create it first; create the model's variables inside its
// scope (they are mirrored: when the scope closes, the chief's initial values
// are broadcast to every replica); each step, every replica computes the
// gradients of its shard of the global batch, and the strategy averages them
// with all-reduce before the optimizer runs, so all replicas stay
// bitwise-identical (check_replicas() proves it).
//
// Gradient buckets (PyTorch DDP's idea): variables are grouped, in reverse
// creation order (the order backward produces their gradients), into buckets
// of about `bucket_bytes`. A bucket's all-reduce starts (non-blocking) as soon
// as its last gradient is ready, so communication overlaps the rest of the
// backward pass; finish_gradients() waits for all of them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/communicator.h"
#include "cclab/collectives/selector.h"
#include "cclab/trainer/variables.h"

namespace cclab::train {

struct StrategyOptions {
  std::size_t bucket_bytes = 25u << 20;  // PyTorch DDP's default bucket_cap_mb
  coll::AlgoConfig algo;                 // kAuto: select_algorithm() (selector.h)
  bool overlap = true;                   // start buckets during backward
};

// Time a replica spent inside communicator calls during gradient sync.
struct CommStats {
  double sync_seconds = 0;  // start/test/wait of the gradient all-reduces
  std::int64_t buckets = 0;
};

class MirroredStrategy {
 public:
  MirroredStrategy(coll::Communicator& comm, StrategyOptions options = {});

  int num_replicas_in_sync() const { return comm_.size(); }
  int replica_id() const { return comm_.rank(); }
  bool is_chief() const { return comm_.rank() == 0; }
  coll::Communicator& communicator() { return comm_; }
  Variables& variables() { return vars_; }
  const Variables& variables() const { return vars_; }

  // Variables created through a Scope are mirrored; closing it (destructor or
  // close()) broadcasts the chief's values and builds the buckets. One scope
  // per strategy.
  class Scope {
   public:
    explicit Scope(MirroredStrategy& s) : s_(&s) {}
    Scope(Scope&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Scope(const Scope&) = delete;
    ~Scope() noexcept(false);
    int create_variable(std::string name, std::int64_t count);
    std::span<float> value(int id) { return s_->vars_.value(id); }
    void close();

   private:
    MirroredStrategy* s_;
  };
  Scope scope();

  // Gradient sync of one step: begin, then gradient_ready(id) for every
  // variable as backward produces it, then finish (waits, with the
  // communicator's timeout). Afterwards grads() holds the replicas' average.
  void begin_gradients();
  void gradient_ready(int variable);
  void finish_gradients();
  const CommStats& comm_stats() const { return stats_; }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  // Each bucket's size in bytes and the algorithm its all-reduce runs, with why.
  std::vector<std::pair<std::uint64_t, coll::Selection>> bucket_algorithms() const;

  // SHA-256 of every replica's values, compared with the chief's; throws
  // Error naming the first replica that differs.
  void check_replicas(std::int64_t step);

 private:
  struct Bucket {
    std::int64_t offset = 0, count = 0;
    int variables = 0, pending = 0;
    coll::Request request;
    bool started = false;
  };
  void finish_scope();
  void build_buckets();
  void start(Bucket& b);
  void poll();

  coll::Communicator& comm_;
  StrategyOptions options_;
  Variables vars_;
  bool scope_open_ = false, scope_done_ = false;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // variable id -> bucket
  CommStats stats_;
};

}  // namespace cclab::train
