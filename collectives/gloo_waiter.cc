#include "gloo_waiter.h"

#include <exception>

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

void WaiterPool::submit(gloo::transport::UnboundBuffer* buf, bool is_recv, std::uint64_t op_seq,
                        std::int64_t step_id) {
  std::lock_guard lock(mu_);
  jobs_.push_back({buf, is_recv, op_seq, step_id});
  // A job must never queue behind a wait that only this rank's progress can end.
  if (idle_ < static_cast<int>(jobs_.size())) {
    threads_.emplace_back([this] { work(); });
    ++idle_;
  }
  jobs_cv_.notify_one();
}

std::optional<Completion> WaiterPool::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!done_cv_.wait_for(lock, timeout, [&] { return !done_.empty(); })) return std::nullopt;
  Completion c = std::move(done_.front());
  done_.pop_front();
  return c;
}

void WaiterPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    jobs_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    const Job job = jobs_.front();
    jobs_.pop_front();
    --idle_;
    lock.unlock();
    Completion c{job.op_seq, job.step_id, true, {}};
    try {
      // Twice the rank's own timeout: the rank's thread notices a stall first
      // and reports it with the step; this is only the backstop.
      const auto limit = timeout_ * 2;
      c.ok = job.is_recv ? job.buf->waitRecv(nullptr, limit) : job.buf->waitSend(nullptr, limit);
      if (!c.ok) c.error = "transfer aborted";
    } catch (const std::exception& e) {
      c.ok = false;
      c.error = e.what();
    }
    lock.lock();
    ++idle_;
    done_.push_back(std::move(c));
    done_cv_.notify_one();
  }
}

}  // namespace cclab::coll::detail
