// Completion of Gloo unbound-buffer transfers. Gloo's tcp transport moves data
// on its own loop thread, but the only way to learn that a transfer finished
// is a blocking waitSend/waitRecv, and a wait that times out breaks the whole
// context. So a posted transfer gets a thread that waits on it with the full
// timeout and then runs the communicator's handler itself (reduce, issue the
// next steps), as Gloo's own algorithms continue on the thread that waited.
//
// A blocking collective's single-message transfers are held for the rank's
// own thread, which waits on them one at a time: first a transfer that the
// next step to issue depends on (the communicator's hint), else the oldest
// receive, then the oldest send, as Gloo's own algorithms wait: no worker is woken for
// them, so the critical path has one wake-up per message (Gloo's loop thread
// waking the rank's thread). Measured (2 ranks, 256 KiB-2 MiB, AMD EPYC VM):
// 7-32% less time than handing every wait to a worker. Waiting in any fixed
// order can stall (a held transfer's completion may be what the peer needs
// before it finishes the one waited on), so a watchdog ticking every
// kHoldTick hands the held transfers to workers once the rank's thread has
// sat in one wait for a whole tick: a stall costs 1-2 ms, never a deadlock.
// Other transfers (multi-segment messages, collectives started with start())
// go to workers at once. A worker that comes back from its handler takes the
// oldest queued wait without being woken. The threads are named
// cclab-waiter and cclab-watchdog.
#pragma once

#include <array>
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
  std::uint64_t op_seq = 0;  // the collective it belongs to, or kNoCollective
  std::int64_t step_id = 0;
  int eager_peer = -1;  // >= 0: the next eager message from that peer, or its signal
  // A bound buffer instead of `buf` (eager rings and signals): its wait has
  // the pair's timeout, which is the communicator's.
  gloo::transport::Buffer* bound = nullptr;
  bool signal = false;  // a signal from eager_peer, not a message
  // The rank's thread may hold it (see the file comment). Not for a message
  // that goes as several segments: a held segment's completion would wait
  // behind the other direction's, which couples the two streams that workers
  // keep apart (2 ranks, 16 MiB: about 12% slower held while sends went two
  // segments at a time; level within the noise, 2-128 MiB, since every send's
  // segments are posted at once).
  bool holdable = false;
};

inline constexpr std::uint64_t kNoCollective = ~std::uint64_t{0};

// The transfers the rank's next step waits for (its deps in flight): those
// steps' rendezvous transfers, and the eager inboxes of the peers its eager
// receives come from. The rank's thread waits on one of them first: waiting
// on another instead leaves the issue stalled until a watchdog tick, however
// early the wanted one completes.
struct WaitHint {
  static constexpr int kMax = 4;  // a step's deps (schedule.h's kMaxDeps)
  std::array<std::int64_t, kMax> steps{};
  std::array<int, kMax> eager_peers{};
  int num_steps = 0, num_peers = 0;

  void add_step(std::int64_t id) { steps[num_steps++] = id; }
  void add_eager_peer(int peer) { eager_peers[num_peers++] = peer; }
  bool wants(const WaitJob& job) const;
};

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

// How long nothing may complete (the communicator's waits) or the rank's
// thread may sit in one wait (the watchdog's) before the communicator asks
// whether the peers of its transfers are gone (gloo_comm_impl.h).
inline constexpr auto kLivenessAfter = std::chrono::seconds(1);

class WaiterPool {
 public:
  // Runs on the thread that waited, with no lock of the pool held.
  using Handler = std::function<void(const Completion&)>;

  // Called by the watchdog, with no lock of the pool held, once the rank's
  // thread has been in one wait for kLivenessAfter (and every kLivenessAfter
  // after): the communicator checks whether that wait's peer is gone.
  using Prober = std::function<void()>;

  WaiterPool(std::chrono::milliseconds timeout, Handler handler, Prober prober = {})
      : timeout_(timeout), handler_(std::move(handler)), prober_(std::move(prober)) {}
  ~WaiterPool();  // abort the outstanding buffers' waits first
  WaiterPool(const WaiterPool&) = delete;
  WaiterPool& operator=(const WaiterPool&) = delete;

  // Queues a wait on `job.buf` (which must outlive it); every queued wait is
  // sure to get a thread, so none queues behind a wait that only this rank's
  // progress can end.
  void submit(const WaitJob& job);
  // The rank's thread, waiting for collective `op_seq`: rank_begin() holds
  // that collective's holdable jobs for it from now on; rank_run() takes a
  // held job that `first` wants, else the oldest held receive, else the
  // oldest held send, and runs it (wait with `limit`, then handler) on the
  // calling thread, or, when none is held,
  // stops holding and returns false; rank_end() stops holding and hands
  // what is held to workers.
  void rank_begin(std::uint64_t op_seq);
  bool rank_run(std::uint64_t op_seq, std::chrono::milliseconds limit, const WaitHint& first = {});
  void rank_end();

 private:
  Completion wait(const WaitJob& job, std::chrono::milliseconds limit) const;
  void work();
  // Wakes (or starts) workers until every queued job has a taker.
  void dispatch_locked();
  // Stops holding; the held jobs go to workers.
  void release_held_locked();
  // Starts the watchdog, or wakes it from its idle sleep (a job is held).
  void watch_locked();
  // The watchdog's loop (see the file comment).
  void watch();

  std::chrono::milliseconds timeout_;
  Handler handler_;
  Prober prober_;
  std::mutex mu_;
  std::condition_variable jobs_cv_;
  std::deque<WaitJob> jobs_;
  // A queued wait needs a thread that is not itself blocked in a wait:
  int idle_ = 0;       // workers not running a job (asleep, or woken and not yet running)
  int waking_ = 0;     // of those, the ones notified for a job
  int returning_ = 0;  // workers in a handler: they take the next queued job, unwoken
  // Jobs held for the rank's thread: those of collective rank_op_ while holding_.
  std::deque<WaitJob> held_;
  bool holding_ = false;
  std::uint64_t rank_op_ = 0;
  bool rank_blocked_ = false;      // the rank's thread is in a wait
  std::uint64_t block_count_ = 0;  // its waits so far: the watchdog sees one wait last a tick
  bool rank_seen_ = false;         // rank_begin since the watchdog's last tick
  bool watch_asleep_ = false;      // the watchdog waits for a held job, not ticking
  std::condition_variable watch_cv_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::thread watchdog_;
};

}  // namespace cclab::coll::detail
