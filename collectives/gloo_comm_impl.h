// The gloo executor's communicator, declared for its two translation units:
// gloo_comm.cc (collectives, rendezvous transfers, errors, liveness) and
// gloo_comm_eager.cc (eager messages, gloo_eager.h). Private to the library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/step_runner.h"
#include "collective_plan.h"
#include "gloo_comm.h"
#include "gloo_eager.h"
#include "gloo_waiter.h"

namespace cclab::coll::detail::gloo_exec {

using Clock = std::chrono::steady_clock;

// What Gloo's UnboundBuffer::waitSend/waitRecv signal to every pair of the
// context when one wait times out, before that wait throws its own error.
inline constexpr std::string_view kGlooTimeoutClosure = "Application timeout caused pair closure";

// Gloo's own gloo::allreduce ring moves 1 MiB segments, two at a time; its
// bcube moves each message whole. Measured on the AMD EPYC VM (2026-12-03, see
// the README), 2 ranks in place, both plans in one process (interleaved rows),
// median of six runs, time against gloo::allreduce's bcube at 8 / 16 MiB: two
// in flight of each kind 1.18 / 1.09, every send and plain receive posted at
// once with four staged 0.91 / 0.89 (held for the rank's thread in those runs;
// held or not read level). Others, each against two in flight in its own
// runs: plain receives four at a time instead of all, 0.91x two in flight's
// time at 32 MiB; whole messages 1.00 / 1.02 of Gloo's but 1.26x two in
// flight's time at 32 MiB (the message staged cold); eight staged 0-15% slower
// than four at 4-128 MiB. On the Xeon (2026-12-02, before the
// rank's thread waited itself) two of each kind had beaten every segment
// posted at once with four staged: Gloo's time over ours 0.977 against 0.905.
inline constexpr std::size_t kSegmentBytes = 1 << 20;
inline constexpr std::size_t kReduceWindow = 4;

// A peer that dies while one of our transfers is moving its bytes: Gloo
// closes the pair and fails the transfers queued on it, but not that one
// (its unbound send being written or receive being read), whose wait then
// runs to the timeout. Seen with kill -9 of one of 2 ranks mid-run at 16 MiB
// (ring, 1 MiB segments): about 1 run in 10 under load, the survivor sat 20 s
// in a wait with no socket left. So once nothing has completed for
// kLivenessAfter, the rank asks the pairs of its transfers in flight whether
// Gloo has seen them fail (every kLivenessTick), and a failed one breaks the
// communicator at once, naming the peer (the probe: pair_failure).
// kLivenessAfter (gloo_waiter.h) also times the watchdog's probes.
inline constexpr auto kLivenessTick = std::chrono::milliseconds(250);
inline constexpr std::uint64_t kProbeTag = std::uint64_t{1} << 62;

// A message of up to two segments' bytes goes whole: split in two, its
// second segment cost more (a second rendezvous and completion each way)
// than its reduction overlapped. AMD EPYC VM, 2026-12-04, 2 ranks in place,
// ring with the rule against hd without in the same runs, median of three:
// 4 MiB all-reduce (2 MiB messages) 0.93x the time under bbr, 0.76x under
// cubic; at 4 MiB messages (up to four whole) bbr read 1.13x, cubic 0.84x.
// A plain copy goes whole at any size: nothing overlaps its segments, and
// each cost a rendezvous and a completion (all-gather messages whole, same
// method: cubic 0.89 / 0.93 / 0.93x at 4 / 16 / 64 MiB, bbr over eight runs
// 1.00 / 1.02 / 0.99x against 1.01 / 0.99 / 1.01 for the control).
inline constexpr std::size_t kWholeBytes = 2 * kSegmentBytes;

// The segments of step `s`'s message of `bytes`; both ends of a transfer
// count alike (a send's into_reduce is its receive's kind).
inline std::size_t segments_of(const Step& s, std::size_t bytes) {
  const bool reduced =
      s.kind == StepKind::kRecvReduce || (s.kind == StepKind::kSend && s.into_reduce);
  if (!reduced || bytes <= kWholeBytes) return 1;
  return (bytes + kSegmentBytes - 1) / kSegmentBytes;
}

struct Transfer {
  Step step;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;  // null: an eager receive
  std::byte* staging = nullptr;                         // kRecvReduce only
  std::uint32_t first_k = 0;                            // message number of segment 0
  std::size_t segments = 1, done = 0;                   // done: completed, in order
  std::size_t bytes = 0;
  // Segment j: its offset in the message, its length, its place in staging.
  std::size_t offset(std::size_t j) const { return j * kSegmentBytes; }
  std::size_t length(std::size_t j) const {
    return segments == 1 ? bytes : std::min(kSegmentBytes, bytes - offset(j));
  }
  std::size_t staged_at(std::size_t j) const { return (j % window()) * kSegmentBytes; }
  // Segments posted at first: all but a receive's that reduces, staged.
  std::size_t window() const {
    return step.kind == StepKind::kRecvReduce ? std::min(segments, kReduceWindow) : segments;
  }
};

// One collective in flight on this rank.
struct Op : CollectivePlan {
  std::vector<std::byte> scratch;
  std::vector<std::uint32_t> sends_to, recvs_from;  // messages so far, per peer
  std::vector<std::int64_t> unposted_sends;   // issued in this batch, posted after its receives
  std::map<std::int64_t, Transfer> inflight;  // by step id
  bool complete = false;
};

class GlooComm;

class GlooRequest final : public RequestImpl {
 public:
  GlooRequest(GlooComm* comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
  void wait() override;
  bool test() override;

 private:
  GlooComm* comm_;
  std::shared_ptr<Op> op_;
};

class GlooComm final : public Communicator {
 public:
  GlooComm(std::shared_ptr<GlooWorld> world, std::shared_ptr<gloo::Context> ctx, std::string prefix,
           std::chrono::milliseconds timeout, std::size_t eager_bytes)
      : world_(std::move(world)),
        ctx_(std::move(ctx)),
        prefix_(std::move(prefix)),
        eager_bytes_(eager_bytes),
        waiters_(
            timeout, [this](const Completion& c) { on_completion(c); },
            [this] {
              std::lock_guard lock(mu_);
              probe_peers();
            }) {
    set_timeout(timeout);
    if (eager_bytes_ > 0) setup_eager();
  }
  ~GlooComm() override {
    flush_eager_sends();
    // Handlers that still run see closing_ and touch nothing.
    std::lock_guard lock(mu_);
    closing_ = true;
    abort_waits();
  }
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  Request start(const CollectiveCall& call) override;
  // The caller waits: this thread takes the collective's first wait itself
  // (waiters_.rank_begin before its steps are issued) instead of a worker
  // being woken for it and then waking this thread.
  void run(const CollectiveCall& call) override;
  int host_group_size() const override { return host_group_size_; }
  // Exchanges host names (an all-gather) and sets host_group_size().
  void group_by_host(const std::string& host_name);
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  void wait(Op& op);
  // Starts a collective (under mu_); see run() for `caller_waits`.
  std::shared_ptr<Op> begin(const CollectiveCall& call, bool caller_waits);
  bool test(Op& op);
  const std::shared_ptr<gloo::Context>& context() const { return ctx_; }

 private:
  bool issue(Op& op, std::int64_t id, const Step& s);
  // Posts the send or receive of segment j of a rendezvous step.
  void post_segment(const Op& op, Transfer& t, std::size_t j) {
    const int peer = t.step.peer;
    if (t.step.kind == StepKind::kSend)
      return t.buf->send(peer, slot(op.seq, rank(), peer, t.first_k + j), t.offset(j), t.length(j));
    const bool staged = t.step.kind == StepKind::kRecvReduce;
    t.buf->recv(peer, slot(op.seq, peer, rank(), t.first_k + j),
                staged ? t.staged_at(j) : t.offset(j), t.length(j));
  }
  void post_segments(const Op& op, Transfer& t);  // the first t.window()
  static WaitJob wait_job(const Op& op, std::int64_t id, const Transfer& t) {
    WaitJob job{t.buf.get(), t.step.kind != StepKind::kSend, op.seq, id};
    job.holdable = t.segments == 1;
    return job;
  }
  // Issues the steps now ready, posting their receives before their sends,
  // as Gloo's own algorithms do: a receive posted first tells the peer where
  // to write before its send is posted, so the peer's thread writes it at
  // once instead of Gloo's loop thread when the notice arrives.
  void issue_ready(Op& op) {
    op.runner->issue_ready([&](std::int64_t id, const Step& s) { return issue(op, id, s); });
    post_sends(op);
    if (op.runner->finished()) finish(op);
  }
  void post_sends(Op& op);
  // What the rank's thread should wait on first (gloo_waiter.h).
  WaitHint next_step_waits_for(const Op& op) const;
  void on_completion(const Completion& c);
  // Eager messages (gloo_eager.h): register the receive rings, issue a send
  // or receive step, hand the next ring entry or a signal buffer to a
  // waiter, handle what the waiter saw, and release ring entries (credit).
  void setup_eager();
  // Gloo sizes a pair's socket send buffer (SO_SNDBUF) to the first bound
  // message sent on it and after that only ever grows it, and a socket whose
  // buffer was set loses the kernel's autotuning: a first bound message of one
  // small eager block left every later rendezvous transfer on its pair
  // writing a few KiB at a time (a 2.4 MB hd all-reduce on 2 ranks: 0.9-1.6 s
  // instead of 4.5 ms). So each pair's first bound message is a primer as
  // large as autotuning would grow the buffer (tcp_wmem's maximum), sent both
  // ways when the communicator is made.
  void prime_send_buffers();
  // kEagerSlots entries of one block each, in `memory` (made here).
  std::vector<EagerSlot> make_ring(EagerMemory& memory) const;
  static EagerSlot make_signal();
  bool eager_send(Op& op, std::int64_t id, const Step& s, std::size_t bytes);
  // The send ring's entry for block `index` (made on first use), free to fill.
  EagerSlot& send_entry(int peer, std::uint64_t index);
  bool eager_recv(Op& op, std::int64_t id, const Step& s);
  void wait_inbox(int peer, std::uint64_t seq);
  void wait_signal(int peer);
  void on_eager_arrival(const Completion& c, std::unique_lock<std::mutex>& lock);
  void on_signal(const Completion& c);
  // Block `index` from `peer` is copied out: signal the peer for every
  // kEagerSignalEvery released in order.
  void release(int peer, std::uint64_t index);
  // A failed wait on the entry holding block `index` (header `h`): did the
  // whole block arrive before the pair closed?
  bool arrived_before_close(const Completion& c, const EagerHeader& h, const std::byte* block,
                            std::uint64_t index) const;
  // An eager send's step completed when it was copied, so its data may not
  // have left yet: waits until every eager send has (or a peer is gone).
  void flush_eager_sends();
  // Empty, or why `h` cannot be a fragment of the message step `s` of `op` expects.
  std::string eager_mismatch(const Op& op, const Step& s, const EagerHeader& h, int from) const;
  // Copies or reduces a fragment's payload into the step's destination.
  void deliver(Op& op, const Step& s, const EagerHeader& h, const std::byte* payload);
  void finish(Op& op);
  std::byte* address(Op& op, const Region& r);
  std::byte* staging(std::size_t bytes);
  std::uint64_t slot(std::uint64_t seq, int from, int to, std::uint32_t k) const {
    return (1ull << 63) | ((seq & 0x7fffffffull) << 32) | (from < to ? 1ull << 31 : 0) | k;
  }
  // Throws the recorded error: its own message the first time, then as the
  // reason the communicator is unusable.
  void check_usable() {
    if (broken_.empty()) return;
    const std::string msg =
        std::exchange(broken_reported_, true)
            ? fmt::format("rank {}: communicator unusable after an earlier error: {}", rank(),
                          broken_)
            : broken_;
    if (broken_timeout_) throw TimeoutError(msg);
    throw Error(msg);
  }
  // Records the first error (under mu_) and wakes the rank's thread to throw it.
  void set_broken(std::string msg, bool timeout);
  // set_broken for a pair that failed (`what`: Gloo's message) in `at`.
  void lost(int peer, const std::string& at, std::string_view what) {
    set_broken(fmt::format("rank {}: lost rank {} in {}: {}", rank(), peer, at, what), false);
  }
  // set_broken for a wait on `peer` in `at` that timed out or failed.
  void wait_failed(const Completion& c, int peer, const std::string& at) {
    // Another wait of this context timed out, and Gloo closed every pair: that
    // wait reports it, naming the peer it waited for (this one may be healthy).
    if (!c.timed_out && c.error.find(kGlooTimeoutClosure) != std::string::npos) return;
    if (!c.timed_out) return lost(peer, at, c.error);
    set_broken(fmt::format("rank {}: timed out after {} ms in {}, waiting for rank {}", rank(),
                           timeout().count(), at, peer),
               true);
  }
  // The step an inbox's first waiting message is for, for error messages.
  std::string inbox_at(const EagerInbox& in);
  // Unblocks every wait on a transfer in flight (it returns "aborted").
  void abort_waits();
  // Breaks the communicator if Gloo has seen the pair of a transfer in
  // flight fail (see kLivenessAfter). Under mu_.
  void probe_peers();
  // Gloo's error for the pair to `peer`, or "" while it is open.
  std::string pair_failure(int peer);
  Op* find_op(std::uint64_t seq);
  void wait_locked(std::unique_lock<std::mutex>& lock, Op& op);
  std::string where(const Op& op, std::int64_t id, const Step& s) const {
    return fmt::format("{} #{} ({}) at step {} ({})", collective_name(op.call.shape.kind), op.seq,
                       op.schedule->name(), id, describe(s));
  }

  std::shared_ptr<GlooWorld> world_;
  std::shared_ptr<gloo::Context> ctx_;
  std::string prefix_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t split_seq_ = 0;
  int host_group_size_ = 0;
  std::deque<std::shared_ptr<Op>> active_;
  // Buffers of completed transfers, destroyed when the next collective starts.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> retired_;
  std::vector<std::vector<std::byte>> scratch_pool_;  // scratch of finished collectives
  // Staging for receives that reduce: one arena reused by every collective,
  // grown between collectives to the most any one needed.
  std::vector<std::byte> arena_;
  std::size_t arena_used_ = 0, arena_need_ = 0;
  std::vector<std::unique_ptr<std::byte[]>> overflow_;
  std::size_t eager_bytes_;          // 0: no eager messages
  std::size_t fragment_ = 0;         // payload of an eager block
  std::vector<EagerInbox> inbox_;    // by peer
  std::vector<EagerOutbox> outbox_;  // by peer
  bool flushing_ = false;            // closing: no more signals
  std::mutex mu_;                    // guards everything above and below
  std::condition_variable progress_cv_;
  Clock::time_point last_progress_ = Clock::now();
  std::string broken_;
  bool broken_timeout_ = false, broken_reported_ = false, closing_ = false;
  std::byte probe_byte_{};
  std::unique_ptr<gloo::transport::UnboundBuffer> probe_buf_;  // pair_failure's
  WaiterPool waiters_;                                         // last: destroyed (joined) first
};

}  // namespace cclab::coll::detail::gloo_exec
