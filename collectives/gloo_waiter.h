// Completion of Gloo unbound-buffer transfers. Gloo's tcp transport moves data
// on its own loop thread, but the only way to learn that a transfer finished
// is a blocking waitSend/waitRecv, and a wait that times out breaks the whole
// context. So each posted transfer is waited on by a thread of this pool with
// the full timeout, and completions queue up for the rank's thread, which
// can thus react to whichever transfer finishes first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gloo::transport {
class UnboundBuffer;
}

namespace cclab::coll::detail {

struct Completion {
  std::uint64_t op_seq = 0;
  std::int64_t step_id = 0;
  bool ok = true;
  std::string error;  // Gloo's message when !ok
};

class WaiterPool {
 public:
  explicit WaiterPool(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~WaiterPool();  // call abort_all() on outstanding buffers first
  WaiterPool(const WaiterPool&) = delete;
  WaiterPool& operator=(const WaiterPool&) = delete;

  // Queues a wait on `buf` (which must outlive it); grows the pool so that
  // every outstanding wait has a thread.
  void submit(gloo::transport::UnboundBuffer* buf, bool is_recv, std::uint64_t op_seq,
              std::int64_t step_id);
  // The next completion, or nullopt when none arrives within `timeout`.
  std::optional<Completion> next(std::chrono::milliseconds timeout);

 private:
  struct Job {
    gloo::transport::UnboundBuffer* buf;
    bool is_recv;
    std::uint64_t op_seq;
    std::int64_t step_id;
  };
  void work();

  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable jobs_cv_, done_cv_;
  std::deque<Job> jobs_;
  std::deque<Completion> done_;
  int idle_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cclab::coll::detail
