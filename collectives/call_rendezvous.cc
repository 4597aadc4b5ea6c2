#include "call_rendezvous.h"

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {

CallRendezvous::CallRendezvous(int ranks) : ranks_(ranks), next_seq_(ranks, 0) {}

CallRendezvous::Ticket CallRendezvous::arrive(int rank, const CollectiveCall& call, int variant,
                                              const Launch& launch) {
  std::unique_lock lock(mu_);
  const std::uint64_t seq = next_seq_[rank]++;
  auto& state = open_[seq];
  if (!state) {
    state = std::make_shared<Ticket::State>();
    state->calls.resize(ranks_);
    state->variants.assign(ranks_, 0);
    state->arrived.assign(ranks_, false);
  }
  auto mine = state;
  mine->calls[rank] = call;
  mine->variants[rank] = variant;
  mine->arrived[rank] = true;
  if (++mine->count == ranks_) {
    open_.erase(seq);
    // Launched under the lock: the set k+1 cannot complete before set k has
    // (its last rank arrives at k+1 only after returning from k).
    try {
      mine->result = launch(seq, mine->calls, mine->variants);
    } catch (...) {
      mine->error = std::current_exception();
    }
    mine->launched = true;
    cv_.notify_all();
  }
  return {seq, mine};
}

bool CallRendezvous::launched(const Ticket& t) {
  std::lock_guard lock(mu_);
  if (t.state->error) std::rethrow_exception(t.state->error);
  return t.state->launched;
}

void CallRendezvous::wait_launched(const Ticket& t, int rank, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return t.state->launched; })) {
    std::string missing;
    for (int r = 0; r < ranks_; ++r)
      if (!t.state->arrived[r]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    throw TimeoutError(fmt::format(
        "rank {}: timed out after {} ms waiting for collective #{}: rank(s) {} never called it",
        rank, timeout.count(), t.seq, missing));
  }
  if (t.state->error) std::rethrow_exception(t.state->error);
}

void CallRendezvous::barrier(int rank, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const std::uint64_t generation = barrier_generation_;
  if (++barrier_arrived_ == ranks_) {
    barrier_arrived_ = 0;
    ++barrier_generation_;
    cv_.notify_all();
    return;
  }
  if (!cv_.wait_for(lock, timeout, [&] { return barrier_generation_ != generation; }))
    throw TimeoutError(fmt::format("rank {}: timed out after {} ms in barrier ({} of {} arrived)",
                                   rank, timeout.count(), barrier_arrived_, ranks_));
}

}  // namespace cclab::coll::detail
