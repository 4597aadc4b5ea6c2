#include "gloo_waiter.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <gloo/transport/buffer.h>
#include <gloo/transport/unbound_buffer.h>
#include <pthread.h>
#include <sched.h>

namespace cclab::coll::detail {

namespace {

// How long the rank's thread may sit in one wait while later transfers of its
// collective are held for it (one to two ticks), and how many idle ticks the
// watchdog makes before it sleeps until a wait is held again.
constexpr auto kHoldTick = std::chrono::milliseconds(1);
constexpr int kIdleTicks = 100;

}  // namespace

bool WaitHint::wants(const WaitJob& job) const {
  if (job.signal) return false;
  if (job.eager_peer >= 0)
    return std::find(eager_peers.begin(), eager_peers.begin() + num_peers, job.eager_peer) !=
           eager_peers.begin() + num_peers;
  return std::find(steps.begin(), steps.begin() + num_steps, job.step_id) !=
         steps.begin() + num_steps;
}

WaiterPool::~WaiterPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  jobs_cv_.notify_all();
  watch_cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (watchdog_.joinable()) watchdog_.join();
}

void WaiterPool::submit(const WaitJob& job) {
  std::lock_guard lock(mu_);
  if (holding_ && job.holdable && job.op_seq == rank_op_) {
    held_.push_back(job);
    watch_locked();
    return;
  }
  jobs_.push_back(job);
  dispatch_locked();
}

void WaiterPool::dispatch_locked() {
  // Workers coming back from a handler and those already woken take queued
  // jobs; wake (or start) more only for jobs none of them takes.
  while (static_cast<int>(jobs_.size()) > returning_ + waking_) {
    if (idle_ == waking_) {
      threads_.emplace_back([this] { work(); });
      ++idle_;
    }
    ++waking_;
    jobs_cv_.notify_one();
  }
}

void WaiterPool::release_held_locked() {
  holding_ = false;
  if (held_.empty()) return;
  jobs_.insert(jobs_.end(), held_.begin(), held_.end());
  held_.clear();
  dispatch_locked();
}

void WaiterPool::rank_begin(std::uint64_t op_seq) {
  std::lock_guard lock(mu_);
  if (op_seq != rank_op_) release_held_locked();
  rank_op_ = op_seq;
  holding_ = true;
  rank_seen_ = true;
}

void WaiterPool::watch_locked() {
  if (!watchdog_.joinable()) {
    watchdog_ = std::thread([this] { watch(); });
  } else if (watch_asleep_) {
    watch_asleep_ = false;
    watch_cv_.notify_one();
  }
}

void WaiterPool::rank_end() {
  std::lock_guard lock(mu_);
  release_held_locked();
}

bool WaiterPool::rank_run(std::uint64_t op_seq, std::chrono::milliseconds limit,
                          const WaitHint& first) {
  WaitJob job;
  {
    std::lock_guard lock(mu_);
    if (!holding_ || rank_op_ != op_seq || held_.empty()) {
      release_held_locked();  // it sleeps until the workers' handlers finish the collective
      return false;
    }
    // What the next step waits for, else receives: they feed what the rank
    // does next, while a send's completion only frees its buffer, and may
    // wait for a peer that first needs one of those receives done (direct
    // all-reduce on 4 ranks, waiting in posted order: 2x slower at 256 KiB).
    auto it =
        std::find_if(held_.begin(), held_.end(), [&](const WaitJob& j) { return first.wants(j); });
    if (it == held_.end())
      it = std::find_if(held_.begin(), held_.end(), [](const WaitJob& j) { return j.is_recv; });
    if (it == held_.end()) it = held_.begin();
    job = *it;
    held_.erase(it);
    rank_blocked_ = true;
    ++block_count_;
  }
  const Completion c = wait(job, limit);
  {
    std::lock_guard lock(mu_);
    rank_blocked_ = false;
    holding_ = true;  // back: it takes its collective's new jobs again
  }
  handler_(c);
  return true;
}

void WaiterPool::watch() {
  pthread_setname_np(pthread_self(), "cclab-watchdog");
  // Its ticks should not preempt the threads doing the work (tuning only:
  // where the policy cannot be changed, it ticks under the default one).
  const sched_param batch{};
  sched_setscheduler(0, SCHED_BATCH, &batch);
  std::unique_lock lock(mu_);
  std::uint64_t seen = 0;     // the rank's wait seen blocked at the last tick (0: none)
  std::uint64_t probing = 0;  // the rank's wait the prober times (0: none)
  auto blocked_at = std::chrono::steady_clock::now();
  int idle_ticks = 0;
  while (!stop_) {
    if (watch_asleep_) {
      watch_cv_.wait(lock, [&] { return stop_ || !watch_asleep_; });
      idle_ticks = 0;
      continue;
    }
    watch_cv_.wait_for(lock, kHoldTick);
    if (stop_) return;
    if (rank_blocked_ && !held_.empty()) {
      // Blocked in the same wait since the last tick: hand over what it holds.
      if (block_count_ == seen) release_held_locked();
      seen = block_count_;
    } else {
      seen = 0;
    }
    if (rank_blocked_ && prober_) {
      const auto now = std::chrono::steady_clock::now();
      if (block_count_ != probing) {
        probing = block_count_;
        blocked_at = now;
      } else if (now - blocked_at >= kLivenessAfter) {
        blocked_at = now;
        lock.unlock();
        prober_();
        lock.lock();
        continue;
      }
    }
    const bool busy = std::exchange(rank_seen_, false) || holding_ || (rank_blocked_ && prober_);
    idle_ticks = busy ? 0 : idle_ticks + 1;
    if (idle_ticks >= kIdleTicks) watch_asleep_ = true;
  }
}

Completion WaiterPool::wait(const WaitJob& job, std::chrono::milliseconds limit) const {
  Completion c{job.op_seq, job.step_id, job.eager_peer, job.signal, job.is_recv, true, false, {}};
  const auto start = std::chrono::steady_clock::now();
  try {
    if (job.bound != nullptr) {
      limit = timeout_;  // the pair's, which cannot be chosen per wait
      job.is_recv ? job.bound->waitRecv() : job.bound->waitSend();
    } else {
      c.ok = job.is_recv ? job.buf->waitRecv(nullptr, limit) : job.buf->waitSend(nullptr, limit);
      if (!c.ok) c.error = "transfer aborted";
    }
  } catch (const std::exception& e) {
    c.ok = false;
    c.error = e.what();
  }
  c.timed_out = !c.ok && std::chrono::steady_clock::now() - start >= limit;
  return c;
}

void WaiterPool::work() {
  pthread_setname_np(pthread_self(), "cclab-waiter");
  std::unique_lock lock(mu_);
  for (;;) {
    jobs_cv_.wait(lock, [&] { return stop_ || waking_ > 0; });
    if (stop_) return;
    --waking_;
    if (jobs_.empty()) continue;  // a worker back from its handler took it
    --idle_;
    do {
      const WaitJob job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      // Twice the rank's own timeout: the rank's thread notices a stall first
      // and reports it with the step; this is only the backstop.
      const Completion c = wait(job, timeout_ * 2);
      lock.lock();
      ++returning_;
      lock.unlock();
      handler_(c);
      lock.lock();
      --returning_;
    } while (!jobs_.empty() && !stop_);
    ++idle_;
  }
}

}  // namespace cclab::coll::detail
