// Matches the collective calls of N rank threads that share one launcher (the
// GPU worlds: one host thread enqueues every rank's stream work). The rank
// whose call completes the k-th set launches it, in call order; the others
// wait for that launch with a timeout and see its error, if any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cclab/collectives/communicator.h"

namespace cclab::coll::detail {

class CallRendezvous {
 public:
  // The k-th call of every rank, in rank order, with each rank's `variant` (a
  // backend's tag for what to run, e.g. a baseline instead of a schedule).
  // What it returns is kept for every rank's ticket (e.g. completion events).
  using Launch = std::function<std::shared_ptr<void>(std::uint64_t seq,
                                                     const std::vector<CollectiveCall>& calls,
                                                     const std::vector<int>& variants)>;

  struct Ticket {
    std::uint64_t seq = 0;
    struct State;
    std::shared_ptr<State> state;
  };

  explicit CallRendezvous(int ranks);
  int size() const { return ranks_; }

  // Deposits `rank`'s next call; the call that completes a set runs `launch`
  // before returning (launches are serialised and in call order).
  Ticket arrive(int rank, const CollectiveCall& call, int variant, const Launch& launch);
  // True once the call was launched; rethrows the launch's error.
  bool launched(const Ticket& t);
  // Blocks until launched (rethrowing its error); throws TimeoutError naming
  // the ranks that never made the call.
  void wait_launched(const Ticket& t, int rank, std::chrono::milliseconds timeout);

  // A host barrier of the N rank threads; throws TimeoutError.
  void barrier(int rank, std::chrono::milliseconds timeout);

 private:
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> next_seq_;                           // per rank
  std::map<std::uint64_t, std::shared_ptr<Ticket::State>> open_;  // not everyone arrived
  int barrier_arrived_ = 0;
  std::uint64_t barrier_generation_ = 0;
};

struct CallRendezvous::Ticket::State {
  std::vector<CollectiveCall> calls;
  std::vector<int> variants;
  std::vector<bool> arrived;
  std::shared_ptr<void> result;  // what the launch returned
  int count = 0;
  bool launched = false;
  std::exception_ptr error;
};

}  // namespace cclab::coll::detail
