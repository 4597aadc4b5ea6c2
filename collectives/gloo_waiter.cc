#include "gloo_waiter.h"

#include <algorithm>
#include <exception>

#include <gloo/transport/buffer.h>
#include <gloo/transport/unbound_buffer.h>

namespace cclab::coll::detail {

WaiterPool::~WaiterPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  jobs_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WaiterPool::submit(const WaitJob& job) {
  std::lock_guard lock(mu_);
  jobs_.push_back(job);
  if (rank_active_ && !rank_reserved_ && job.op_seq == rank_op_) {
    rank_reserved_ = true;  // the rank's thread takes it next
    return;
  }
  dispatch_locked();
}

void WaiterPool::dispatch_locked() {
  // Workers coming back from a handler, those already woken, and the rank's
  // thread for the job left to it will take queued jobs; wake (or start) more
  // only for jobs none of them takes.
  while (static_cast<int>(jobs_.size()) > returning_ + waking_ + (rank_reserved_ ? 1 : 0)) {
    if (idle_ == waking_) {
      threads_.emplace_back([this] { work(); });
      ++idle_;
    }
    ++waking_;
    jobs_cv_.notify_one();
  }
}

void WaiterPool::rank_begin(std::uint64_t op_seq) {
  std::lock_guard lock(mu_);
  rank_active_ = true;
  rank_op_ = op_seq;
}

void WaiterPool::rank_end() {
  std::lock_guard lock(mu_);
  rank_active_ = false;
  rank_reserved_ = false;
  dispatch_locked();  // a job left to the rank's thread gets a worker
}

bool WaiterPool::rank_run(std::uint64_t op_seq, std::chrono::milliseconds limit) {
  WaitJob job;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(jobs_.rbegin(), jobs_.rend(),
                           [&](const WaitJob& j) { return j.op_seq == op_seq; });
    const bool found = it != jobs_.rend();
    rank_active_ = false;  // blocked in a wait, or about to sleep
    rank_reserved_ = false;
    if (found) {
      job = *it;
      jobs_.erase(std::next(it).base());
    }
    dispatch_locked();
    if (!found) return false;
  }
  const Completion c = wait(job, limit);
  {
    std::lock_guard lock(mu_);
    rank_active_ = true;  // its handler's first new job is left to it
    rank_op_ = op_seq;
  }
  handler_(c);
  return true;
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
  std::unique_lock lock(mu_);
  for (;;) {
    jobs_cv_.wait(lock, [&] { return stop_ || waking_ > 0; });
    if (stop_) return;
    --waking_;
    if (jobs_.empty()) continue;  // the rank's thread took it
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
