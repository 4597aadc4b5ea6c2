// Completion of Gloo unbound-buffer transfers. Gloo's tcp transport moves data
// on its own loop thread, but the only way to learn that a transfer finished
// is a blocking waitSend/waitRecv, and a wait that times out breaks the whole
// context. So every posted transfer gets a thread that waits on it with the
// full timeout and then runs the communicator's handler itself (reduce,
// issue the next steps), as Gloo's own algorithms continue on the thread that
// waited: one thread hand-off per message, not two. A worker that comes back
// from its handler takes the oldest queued wait without being woken. The
// rank's own thread, while it waits for a collective, takes that collective's
// newest wait itself (usually the receive that completes it), and one job its
// own handler queues is left for it rather than woken for, so a blocking
// collective's critical path has one wake-up per message (Gloo's loop thread
// waking the rank's thread), as Gloo's own algorithms have.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gloo::transport {
class Buffer;
class UnboundBuffer;
}  // namespace gloo::transport

namespace cclab::coll::detail {

struct WaitJob {
  gloo::transport::UnboundBuffer* buf = nullptr;
  bool is_recv = false;
  std::uint64_t op_seq = 0;  // kNoCollective: no rank's thread takes it
  std::int64_t step_id = 0;
  int eager_peer = -1;  // >= 0: the next eager message from that peer, or its signal
  // A bound buffer instead of `buf` (eager rings and signals): its wait has
  // the pair's timeout, which is the communicator's.
  gloo::transport::Buffer* bound = nullptr;
  bool signal = false;  // a signal from eager_peer, not a message
};

inline constexpr std::uint64_t kNoCollective = ~std::uint64_t{0};

struct Completion {
  std::uint64_t op_seq = 0;
  std::int64_t step_id = 0;
  int eager_peer = -1;
  bool signal = false;
  bool is_recv = false;
  bool ok = true;
  bool timed_out = false;  // the wait reached its limit
  std::string error;       // Gloo's message when !ok
};

class WaiterPool {
 public:
  // Runs on the thread that waited, with no lock of the pool held.
  using Handler = std::function<void(const Completion&)>;

  WaiterPool(std::chrono::milliseconds timeout, Handler handler)
      : timeout_(timeout), handler_(std::move(handler)) {}
  ~WaiterPool();  // abort the outstanding buffers' waits first
  WaiterPool(const WaiterPool&) = delete;
  WaiterPool& operator=(const WaiterPool&) = delete;

  // Queues a wait on `job.buf` (which must outlive it); every queued wait is
  // sure to get a thread, so none queues behind a wait that only this rank's
  // progress can end.
  void submit(const WaitJob& job);
  // The rank's thread, waiting for collective `op_seq`: rank_begin() makes it
  // a taker of that collective's jobs (one job queued meanwhile is left for
  // it); rank_run() takes the newest queued job of `op_seq` and runs it (wait
  // with `limit`, then handler) on the calling thread, or, when there is none,
  // stops taking and returns false; rank_end() stops taking.
  void rank_begin(std::uint64_t op_seq);
  bool rank_run(std::uint64_t op_seq, std::chrono::milliseconds limit);
  void rank_end();

 private:
  Completion wait(const WaitJob& job, std::chrono::milliseconds limit) const;
  void work();
  // Wakes (or starts) workers until every queued job has a taker.
  void dispatch_locked();

  std::chrono::milliseconds timeout_;
  Handler handler_;
  std::mutex mu_;
  std::condition_variable jobs_cv_;
  std::deque<WaitJob> jobs_;
  // A queued wait needs a thread that is not itself blocked in a wait:
  int idle_ = 0;                // workers not running a job (asleep, or woken and not yet running)
  int waking_ = 0;              // of those, the ones notified for a job
  int returning_ = 0;           // workers in a handler: they take the next queued job, unwoken
  bool rank_active_ = false;    // the rank's thread will look at jobs_ next
  bool rank_reserved_ = false;  // a queued job is left for it
  std::uint64_t rank_op_ = 0;   // the collective it takes jobs of
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cclab::coll::detail
