// The gloo executor. Messages up to the eager limit go eagerly, into the
// receiver's ring of bound buffers (gloo_eager.h); every other step maps onto
// Gloo's unbound buffers:
//  - kSend: a buffer over the source region, send(peer, slot);
//  - kRecv: a buffer over the destination region, recv(peer, slot);
//  - kRecvReduce: recv into the rank's staging arena, then reduce into the
//    destination when the transfer completes (so the reduction of one chunk
//    overlaps the transfer of the next).
// A message that feeds a reduction (a kRecvReduce, a send marked
// into_reduce) above kWholeBytes goes as segments of kSegmentBytes, each a
// Gloo transfer of its own on the step's one buffer, completed in order;
// every other message goes whole. A send posts all its segments at once
// (Gloo moves each as soon as both sides have posted it); a receive that
// reduces posts kReduceWindow of them into as many staging slots and the
// next into a slot once its segment is reduced, so the staging stays in the
// core's cache. The
// k-th message (segment) of a collective from rank a to rank b uses slot
// (seq, a<b, k) on both sides, which gives the schedule's FIFO matching per
// ordered pair while any number of transfers are in flight. The steps that
// become ready together post their receives before their sends. Completions
// are handled on the thread that waited for them (gloo_waiter.h), under the
// communicator's mutex; the StepRunner decides what to issue next. In a
// blocking collective that thread is mostly the rank's own: it waits on its
// collective's transfers itself, receives first, as Gloo's algorithms do.
#include "gloo_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>

#include <fmt/format.h>
#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/reduce.h"
#include "cclab/collectives/step_runner.h"
#include "gloo_eager.h"
#include "gloo_waiter.h"

namespace cclab::coll::detail {
namespace {

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
inline constexpr auto kLivenessAfter = std::chrono::seconds(1);
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
std::size_t segments_of(const Step& s, std::size_t bytes) {
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
struct Op {
  std::uint64_t seq = 0;
  CollectiveCall call;
  std::unique_ptr<Schedule> schedule;
  std::unique_ptr<StepRunner> runner;
  std::size_t esize = 0;
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

void GlooRequest::wait() { comm_->wait(*op_); }
bool GlooRequest::test() { return comm_->test(*op_); }

Request GlooComm::start(const CollectiveCall& call) {
  std::lock_guard lock(mu_);
  return Request(std::make_shared<GlooRequest>(this, begin(call, false)));
}

void GlooComm::run(const CollectiveCall& call) {
  std::unique_lock lock(mu_);
  std::shared_ptr<Op> op;
  try {
    op = begin(call, true);
  } catch (...) {
    waiters_.rank_end();
    throw;
  }
  wait_locked(lock, *op);
}

std::shared_ptr<Op> GlooComm::begin(const CollectiveCall& call, bool caller_waits) {
  check_usable();
  retired_.clear();
  if (active_.empty()) last_progress_ = Clock::now();
  auto op = std::make_shared<Op>();
  op->seq = next_seq_++;
  op->call = call;
  if (call.algo.group_size == 0 && host_group_size_ > 0)
    op->call.algo.group_size = host_group_size_;
  op->call.algo.disjoint_output = output_is_disjoint(call);
  op->esize = dtype_size(call.dtype);
  op->schedule = make_schedule(call.shape, op->call.algo, op->esize);
  op->runner = std::make_unique<StepRunner>(op->schedule->program(rank()));
  if (!scratch_pool_.empty()) {  // allocated (and first touched) once, reused after
    op->scratch = std::move(scratch_pool_.back());
    scratch_pool_.pop_back();
  }
  if (const auto bytes = op->schedule->scratch_count() * op->esize; op->scratch.size() < bytes)
    op->scratch.resize(bytes);
  op->sends_to.assign(size(), 0);
  op->recvs_from.assign(size(), 0);
  active_.push_back(op);
  if (caller_waits) waiters_.rank_begin(op->seq);  // wait_locked ends it
  issue_ready(*op);
  return op;
}

std::byte* GlooComm::address(Op& op, const Region& r) {
  std::byte* base = r.buffer == BufferId::kInput
                        ? const_cast<std::byte*>(static_cast<const std::byte*>(op.call.send))
                    : r.buffer == BufferId::kOutput ? static_cast<std::byte*>(op.call.recv)
                                                    : op.scratch.data();
  return base + r.offset * op.esize;
}

std::byte* GlooComm::staging(std::size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  arena_need_ += bytes;
  if (arena_used_ + bytes <= arena_.size()) {
    arena_used_ += bytes;
    return arena_.data() + arena_used_ - bytes;
  }
  overflow_.push_back(std::make_unique<std::byte[]>(bytes));
  return overflow_.back().get();
}

bool GlooComm::issue(Op& op, std::int64_t id, const Step& s) {
  const std::size_t bytes = s.count() * op.esize;
  switch (s.kind) {
    case StepKind::kCopy:
      copy_bytes(address(op, s.dst), address(op, s.src), bytes);
      return true;
    case StepKind::kReduce: {
      std::byte* dst = address(op, s.dst);
      reduce(dst, dst, address(op, s.src), s.dst.count, op.call.dtype, step_op(op.call.op));
      return true;
    }
    case StepKind::kFence:
      return true;
    default:
      break;
  }
  // Both sides see the same size, so both skip an empty message alike, and
  // both send a small one eagerly.
  if (bytes == 0) return true;
  if (bytes <= eager_bytes_)
    return s.kind == StepKind::kSend ? eager_send(op, id, s, bytes) : eager_recv(op, id, s);
  Transfer t{s, nullptr, nullptr};
  t.bytes = bytes;
  t.segments = segments_of(s, bytes);
  try {
    if (s.kind == StepKind::kSend) {
      t.first_k = op.sends_to[s.peer];
      op.sends_to[s.peer] += t.segments;
      t.buf = ctx_->createUnboundBuffer(address(op, s.src), bytes);
    } else {
      t.first_k = op.recvs_from[s.peer];
      op.recvs_from[s.peer] += t.segments;
      const bool reduces = s.kind == StepKind::kRecvReduce;
      // Segmented: a full segment's staging per segment in flight.
      const std::size_t staged = t.segments == 1 ? bytes : t.window() * kSegmentBytes;
      t.staging = reduces ? staging(staged) : nullptr;
      t.buf = reduces ? ctx_->createUnboundBuffer(t.staging, staged)
                      : ctx_->createUnboundBuffer(address(op, s.dst), bytes);
    }
    if (s.kind != StepKind::kSend) post_segments(op, t);
  } catch (const std::exception& e) {  // the pair to that peer is already broken
    lost(s.peer, where(op, id, s), e.what());
    return false;  // never completes; wait() throws the error
  }
  if (s.kind == StepKind::kSend)
    op.unposted_sends.push_back(id);
  else
    waiters_.submit(wait_job(op, id, t));
  op.inflight.emplace(id, std::move(t));
  return false;
}

void GlooComm::post_segments(const Op& op, Transfer& t) {
  for (std::size_t j = 0; j < t.window(); ++j) post_segment(op, t, j);
}

void GlooComm::post_sends(Op& op) {
  for (const std::int64_t id : op.unposted_sends) {
    Transfer& t = op.inflight.at(id);
    try {
      post_segments(op, t);
    } catch (const std::exception& e) {
      lost(t.step.peer, where(op, id, t.step), e.what());
      continue;  // never completes; wait() throws the error
    }
    waiters_.submit(wait_job(op, id, t));
  }
  op.unposted_sends.clear();
}

void GlooComm::setup_eager() {
  const std::size_t peers = static_cast<std::size_t>(size()) - 1;
  fragment_ = std::min(eager_bytes_, kEagerFragmentBytes);
  while (fragment_ > kEagerMinFragmentBytes &&
         peers * kEagerSlots * eager_block_bytes(fragment_) > kEagerRingBudget)
    fragment_ = std::max(fragment_ / 2, kEagerMinFragmentBytes);
  inbox_ = std::vector<EagerInbox>(size());  // (resize would need copyable elements)
  outbox_ = std::vector<EagerOutbox>(size());
  prime_send_buffers();
  // Registered before any peer may write to them: a block for a slot not yet
  // registered stops Gloo's loop from reading that pair until it is.
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    auto& pair = ctx_->getPair(peer);
    EagerInbox& in = inbox_[peer];
    in.ring = make_ring(in.memory);
    for (int i = 0; i < kEagerSlots; ++i) {
      EagerSlot& e = in.ring[static_cast<std::size_t>(i)];
      const EagerHeader none{~std::uint64_t{0}};  // no message yet (see arrived_before_close)
      std::memcpy(e.mem, &none, sizeof none);
      e.buf = pair->createRecvBuffer(eager_ring_slot(peer, rank(), i), e.mem,
                                     eager_block_bytes(fragment_));
    }
    EagerSlot& signal = outbox_[peer].signal;
    signal = make_signal();
    signal.buf = pair->createRecvBuffer(eager_signal_slot(peer, rank()), signal.mem, 1);
  }
}

std::size_t tcp_autotune_max() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_wmem");
  std::size_t min = 0, initial = 0, max = 0;
  if (!(f >> min >> initial >> max) || max == 0) max = 4u << 20;
  return std::min<std::size_t>(max, 32u << 20);  // Gloo's own cap
}

void GlooComm::prime_send_buffers() {
  const std::size_t bytes = tcp_autotune_max();
  // One memory for every primer: what they carry is never read.
  auto out = std::make_unique<std::byte[]>(bytes), in = std::make_unique<std::byte[]>(bytes);
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends(size()), recvs(size());
  int peer = 0;
  try {
    for (peer = 0; peer < size(); ++peer)
      if (peer != rank())
        recvs[peer] =
            ctx_->getPair(peer)->createRecvBuffer(eager_primer_slot(peer, rank()), in.get(), bytes);
    for (peer = 0; peer < size(); ++peer)
      if (peer != rank()) {
        sends[peer] = ctx_->getPair(peer)->createSendBuffer(eager_primer_slot(rank(), peer),
                                                            out.get(), bytes);
        sends[peer]->send(0, bytes);
      }
    for (peer = 0; peer < size(); ++peer)
      if (peer != rank()) {
        recvs[peer]->waitRecv();
        sends[peer]->waitSend();
      }
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {}: lost rank {} while setting up eager messages: {}", rank(),
                            peer, e.what()));
  }
}

std::vector<EagerSlot> GlooComm::make_ring(EagerMemory& memory) const {
  const std::size_t stride = eager_ring_stride(fragment_);
  memory = EagerMemory(kEagerSlots * stride);
  std::vector<EagerSlot> ring(kEagerSlots);
  for (std::size_t i = 0; i < ring.size(); ++i) ring[i].mem = memory.data() + i * stride;
  return ring;
}

EagerSlot GlooComm::make_signal() {
  EagerSlot e;
  e.own = EagerMemory(1);
  e.mem = e.own.data();
  return e;
}

// Header, payload and trailer of an eager block into `dst`.
void fill_block(std::byte* dst, const EagerHeader& h, const std::byte* payload) {
  std::memcpy(dst, &h, sizeof h);
  std::memcpy(dst + sizeof h, payload, h.length);
  std::memcpy(dst + sizeof h + h.length, &h.index, sizeof h.index);
}

bool GlooComm::eager_send(Op& op, std::int64_t id, const Step& s, std::size_t bytes) {
  EagerOutbox& out = outbox_[s.peer];
  const std::uint32_t k = op.sends_to[s.peer]++;
  const std::byte* src = address(op, s.src);
  try {
    for (std::size_t offset = 0; offset < bytes; offset += fragment_) {
      const std::size_t length = std::min(fragment_, bytes - offset);
      const EagerHeader h{out.next++,
                          op.seq,
                          k,
                          static_cast<std::uint32_t>(bytes),
                          static_cast<std::uint32_t>(offset),
                          static_cast<std::uint32_t>(length)};
      if (out.queued.empty() && h.index < out.credit) {
        EagerSlot& e = send_entry(s.peer, h.index);
        fill_block(e.mem, h, src + offset);
        e.buf->send(0, eager_block_bytes(length));
      } else {  // no credit: aside, until the peer's next signal
        std::vector<std::byte> block(eager_block_bytes(length));
        fill_block(block.data(), h, src + offset);
        out.queued.push_back(std::move(block));
      }
    }
  } catch (const std::exception& e) {  // the pair to that peer is broken
    lost(s.peer, where(op, id, s), e.what());
    return false;
  }
  if (!out.queued.empty() && !out.waiting) wait_signal(s.peer);
  return true;  // copied: the source is free again
}

EagerSlot& GlooComm::send_entry(int peer, std::uint64_t index) {
  EagerOutbox& out = outbox_[peer];
  if (out.ring.empty()) {
    auto& pair = ctx_->getPair(peer);
    out.ring = make_ring(out.memory);
    for (int i = 0; i < kEagerSlots; ++i) {
      EagerSlot& e = out.ring[static_cast<std::size_t>(i)];
      e.buf = pair->createSendBuffer(eager_ring_slot(rank(), peer, i), e.mem,
                                     eager_block_bytes(fragment_));
    }
  }
  const auto i = static_cast<std::size_t>(index % kEagerSlots);
  // The peer has released the block written from here before (that is the
  // credit), so that write is long complete: this returns at once.
  if (out.unwaited[i]) out.ring[i].buf->waitSend();
  out.unwaited[i] = true;
  return out.ring[i];
}

void GlooComm::wait_signal(int peer) {
  EagerOutbox& out = outbox_[peer];
  out.waiting = true;
  waiters_.submit({nullptr, true, kNoCollective, 0, peer, out.signal.buf.get(), true});
}

void GlooComm::on_signal(const Completion& c) {
  const int peer = c.eager_peer;
  EagerOutbox& out = outbox_[peer];
  out.waiting = false;
  progress_cv_.notify_all();  // flush_eager_sends may wait for the queue to empty
  const auto at = [peer] { return fmt::format("eager sends to rank {}", peer); };
  if (!c.ok) return wait_failed(c, peer, at());
  out.credit += kEagerSignalEvery;
  try {
    while (!out.queued.empty() && out.next - out.queued.size() < out.credit) {
      const std::vector<std::byte>& block = out.queued.front();
      EagerSlot& e = send_entry(peer, out.next - out.queued.size());
      std::memcpy(e.mem, block.data(), block.size());
      e.buf->send(0, block.size());
      out.queued.pop_front();
    }
  } catch (const std::exception& e) {
    return lost(peer, at(), e.what());
  }
  if (!out.queued.empty()) wait_signal(peer);
}

bool GlooComm::eager_recv(Op& op, std::int64_t id, const Step& s) {
  EagerInbox& in = inbox_[s.peer];
  const EagerKey key{op.seq, op.recvs_from[s.peer]++};
  std::size_t remaining = s.count() * op.esize;
  auto [it, end] = in.arrived.equal_range(key);  // fragments that came before their step
  while (it != end) {
    const EagerHeader& h = it->second.header;
    if (auto why = eager_mismatch(op, s, h, s.peer); !why.empty()) {
      set_broken(std::move(why), false);
      return false;
    }
    deliver(op, s, h, it->second.payload.data());
    remaining -= h.length;
    it = in.arrived.erase(it);
  }
  if (remaining == 0) return true;
  in.expected.emplace(key, EagerExpect{id, remaining, 0});
  op.inflight.emplace(id, Transfer{s, nullptr, nullptr});
  if (!in.waiting) wait_inbox(s.peer, op.seq);
  return false;
}

void GlooComm::wait_inbox(int peer, std::uint64_t seq) {
  EagerInbox& in = inbox_[peer];
  in.waiting = true;
  WaitJob job{nullptr, true, seq, 0, peer, in.ring[in.next % kEagerSlots].buf.get(), false};
  job.holdable = true;  // for the rank's thread while collective `seq` is its own
  waiters_.submit(job);
}

void GlooComm::release(int peer, std::uint64_t index) {
  EagerInbox& in = inbox_[peer];
  in.done[index % kEagerSlots] = true;
  while (in.released < in.next && in.done[in.released % kEagerSlots])
    in.done[in.released++ % kEagerSlots] = false;
  if (flushing_) return;  // closing: nothing more will be taken from the ring
  try {
    while (in.released >= (in.signals + 1) * kEagerSignalEvery) {
      if (!in.signal.buf) {
        in.signal = make_signal();
        in.signal.buf = ctx_->getPair(peer)->createSendBuffer(eager_signal_slot(rank(), peer),
                                                              in.signal.mem, 1);
      }
      in.signal.buf->send(0, 1);
      ++in.signals;
    }
  } catch (const std::exception&) {
    // The peer has closed: it has nothing more to send that needs credit.
  }
}

bool GlooComm::arrived_before_close(const Completion& c, const EagerHeader& h,
                                    const std::byte* block, std::uint64_t index) const {
  if (c.timed_out || h.index != index || h.length > fragment_) return false;
  std::uint64_t trailer = 0;
  std::memcpy(&trailer, block + sizeof h + h.length, sizeof trailer);
  return trailer == index;
}

void GlooComm::on_eager_arrival(const Completion& c, std::unique_lock<std::mutex>& lock) {
  const int peer = c.eager_peer;
  EagerInbox& in = inbox_[peer];
  in.waiting = false;
  const std::uint64_t index = in.next;
  const std::byte* block = in.ring[index % kEagerSlots].mem;
  EagerHeader h;
  std::memcpy(&h, block, sizeof h);
  // A peer that has closed fails the wait, but what it sent before is here.
  if (!c.ok && !arrived_before_close(c, h, block, index)) return wait_failed(c, peer, inbox_at(in));
  if (h.index != index || h.length > fragment_)
    return set_broken(fmt::format("rank {}: eager block {} from rank {} carries index {} and {} "
                                  "bytes: the ranks' eager limits differ, or the stream is damaged",
                                  rank(), index, peer, h.index, h.length),
                      false);
  ++in.next;
  const std::byte* payload = block + sizeof h;
  const EagerKey key{h.seq, h.k};
  if (auto e = in.expected.find(key); e == in.expected.end()) {
    // Before its step: copied out, so that the entry is free for the next.
    in.arrived.emplace(key, EagerStashed{h, std::vector<std::byte>(payload, payload + h.length)});
    release(peer, index);
  } else {
    const std::int64_t id = e->second.step;
    Op& op = *find_op(h.seq);
    const Step s = op.inflight.at(id).step;
    if (auto why = eager_mismatch(op, s, h, peer); !why.empty()) {
      set_broken(std::move(why), false);
      return;
    }
    // Before unlocking: a step whose last fragment is here waits for nothing
    // more, so no other thread may start a wait on its behalf (a wait for a
    // message that only a later collective sends).
    ++e->second.delivering;
    if ((e->second.to_arrive -= h.length) == 0) {
      in.finishing.insert(in.expected.extract(e));
    }
    // As for a rendezvous receive: the step's regions are its own until it
    // completes, so other completions (other fragments among them) proceed
    // while this one copies. The ring entry stays ours until released.
    lock.unlock();
    deliver(op, s, h, payload);
    lock.lock();
    if (closing_ || !broken_.empty()) return;
    release(peer, index);
    if (auto f = in.finishing.find(key); f != in.finishing.end()) {
      if (--f->second.delivering == 0) {
        in.finishing.erase(f);
        op.inflight.erase(id);
        op.runner->complete(id);
        last_progress_ = Clock::now();
        issue_ready(op);
      }
    } else {
      --in.expected.at(key).delivering;  // more fragments to come
    }
  }
  if (in.expected.empty() || in.waiting) return;
  wait_inbox(peer, in.expected.begin()->first.first);
}

void GlooComm::flush_eager_sends() {
  std::vector<std::pair<gloo::transport::Buffer*, std::uint64_t>> pending;  // (buffer, sends)
  {
    std::unique_lock lock(mu_);
    flushing_ = true;
    // Blocks still waiting for credit go when the peer's signals come.
    const auto sent = [&] {
      return !broken_.empty() || std::all_of(outbox_.begin(), outbox_.end(),
                                             [](const EagerOutbox& o) { return o.queued.empty(); });
    };
    if (!progress_cv_.wait_for(lock, 2 * timeout(), sent) || !broken_.empty()) return;
    for (auto& out : outbox_)
      for (std::size_t i = 0; i < out.ring.size(); ++i)
        if (std::exchange(out.unwaited[i], false)) pending.emplace_back(out.ring[i].buf.get(), 1);
    for (auto& in : inbox_)
      if (in.signals > 0) pending.emplace_back(in.signal.buf.get(), std::exchange(in.signals, 0));
  }
  // Every write must be complete before its buffer goes.
  for (auto [buf, sends] : pending)
    for (std::uint64_t i = 0; i < sends; ++i) try {
        buf->waitSend();
      } catch (const std::exception&) {
        return;  // a peer is gone (or the wait timed out): the pairs are closed
      }
}

std::string GlooComm::inbox_at(const EagerInbox& in) {
  if (in.expected.empty()) return "an eager receive";
  const auto& [key, expect] = *in.expected.begin();
  Op& op = *find_op(key.first);
  return where(op, expect.step, op.inflight.at(expect.step).step);
}

std::string GlooComm::eager_mismatch(const Op& op, const Step& s, const EagerHeader& h,
                                     int from) const {
  const std::size_t bytes = s.count() * op.esize;
  if (h.bytes == bytes && h.offset % op.esize == 0 && h.length % op.esize == 0 &&
      std::size_t{h.offset} + h.length <= bytes)
    return {};
  return fmt::format(
      "rank {}: message {} of {} #{} from rank {} has {} bytes where step {} expects {}: do all "
      "ranks run the same collective with the same count and dtype?",
      rank(), h.k, collective_name(op.call.shape.kind), op.seq, from, h.bytes, describe(s), bytes);
}

void GlooComm::deliver(Op& op, const Step& s, const EagerHeader& h, const std::byte* payload) {
  std::byte* dst = address(op, s.dst) + h.offset;
  if (s.kind == StepKind::kRecvReduce)
    reduce(dst, address(op, s.src) + h.offset, payload, h.length / op.esize, op.call.dtype,
           step_op(op.call.op));
  else
    copy_bytes(dst, payload, h.length);
}

Op* GlooComm::find_op(std::uint64_t seq) {
  auto it =
      std::find_if(active_.begin(), active_.end(), [&](const auto& op) { return op->seq == seq; });
  CCLAB_CHECK(it != active_.end(), "completion of an unknown collective");
  return it->get();
}

void GlooComm::on_completion(const Completion& c) {
  std::unique_lock lock(mu_);
  if (closing_ || !broken_.empty()) return;
  if (c.eager_peer >= 0) {
    if (c.signal)
      on_signal(c);
    else
      on_eager_arrival(c, lock);
    return;
  }
  Op& op = *find_op(c.op_seq);
  auto it = op.inflight.find(c.step_id);
  CCLAB_CHECK(it != op.inflight.end(), "completion of a step not in flight");
  Transfer& t = it->second;  // only this handler erases it
  const Step s = t.step;
  if (!c.ok) return wait_failed(c, s.peer, where(op, c.step_id, s));
  const std::size_t j = t.done;  // segments complete in the order posted
  if (s.kind == StepKind::kRecvReduce) {
    // The step's regions belong to it until it completes: reduce unlocked, so
    // other transfers' completions proceed meanwhile.
    const std::byte* staged = t.staging + t.staged_at(j);
    const std::size_t at = t.offset(j), count = t.length(j) / op.esize;
    lock.unlock();
    reduce(address(op, s.dst) + at, address(op, s.src) + at, staged, count, op.call.dtype,
           step_op(op.call.op));
    lock.lock();
    if (closing_ || !broken_.empty()) return;
  }
  if (++t.done < t.segments) {
    last_progress_ = Clock::now();
    try {
      // A receive that reduces posts into the staging it has just reduced.
      if (j + t.window() < t.segments) post_segment(op, t, j + t.window());
    } catch (const std::exception& e) {
      return lost(s.peer, where(op, c.step_id, s), e.what());
    }
    waiters_.submit(wait_job(op, c.step_id, t));
    return;
  }
  // Gloo's loop thread may still hold the buffer for a moment after waking
  // us (it notifies, then lets go), and its destructor spins (sched_yield)
  // until it does: destroyed at the next collective's start instead, not here
  // under mu_.
  retired_.push_back(std::move(t.buf));
  op.inflight.erase(it);
  op.runner->complete(c.step_id);
  last_progress_ = Clock::now();
  issue_ready(op);
}

void GlooComm::set_broken(std::string msg, bool timeout) {
  if (!broken_.empty()) return;
  broken_ = std::move(msg);
  broken_timeout_ = timeout;
  // Threads blocked on other transfers (the rank's own among them) return now
  // rather than at their timeout; their completions are then ignored.
  abort_waits();
  progress_cv_.notify_all();
}

void GlooComm::probe_peers() {
  if (closing_ || !broken_.empty()) return;
  std::vector<char> probed(static_cast<std::size_t>(size()), 0);
  for (const auto& op : active_)
    for (const auto& [id, t] : op->inflight) {
      const int peer = t.step.peer;
      if (std::exchange(probed[static_cast<std::size_t>(peer)], 1)) continue;
      const std::string why = pair_failure(peer);
      // A wait that timed out failed the pair ("Read timeout", "Write
      // timeout") or every pair (kGlooTimeoutClosure): that wait reports,
      // naming the peer it waited for (as in wait_failed).
      if (why.find("timeout") != std::string::npos) return;
      if (!why.empty()) return lost(peer, where(*op, id, t.step), why);
    }
}

std::string GlooComm::pair_failure(int peer) {
  // A zero-byte receive on a tag nobody sends on: Gloo throws the pair's
  // error before posting it; on a healthy pair it stays posted, unmatched
  // (one small entry on each side per probe, only while a wait stalls).
  try {
    if (!probe_buf_) probe_buf_ = ctx_->createUnboundBuffer(&probe_byte_, 1);
    ctx_->getPair(peer)->recv(probe_buf_.get(), kProbeTag, 0, 0);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

void GlooComm::abort_waits() {
  // Waits on eager rings and signals (Gloo bound buffers) cannot be aborted:
  // they end when the peer writes, when its pair fails (a peer that exits
  // closes it), or at the timeout.
  for (auto& op : active_)
    for (auto& [id, t] : op->inflight) {
      if (!t.buf) continue;  // an eager receive: its ring's wait ends as said above
      if (t.step.kind == StepKind::kSend)
        t.buf->abortWaitSend();
      else
        t.buf->abortWaitRecv();
    }
}

void GlooComm::finish(Op& op) {
  finalize_call(op.call);
  scratch_pool_.push_back(std::move(op.scratch));  // reused by a later call
  op.complete = true;
  progress_cv_.notify_all();
  while (!active_.empty() && active_.front()->complete) active_.pop_front();
  if (!active_.empty()) return;
  // No collective holds staging now: keep one arena large enough for next time.
  if (arena_need_ > arena_.size()) arena_.resize(arena_need_);
  overflow_.clear();
  arena_used_ = arena_need_ = 0;
}

void GlooComm::wait(Op& op) {
  std::unique_lock lock(mu_);
  wait_locked(lock, op);
}

void GlooComm::wait_locked(std::unique_lock<std::mutex>& lock, Op& op) {
  struct StopTaking {
    WaiterPool& pool;
    ~StopTaking() { pool.rank_end(); }
  } stop_taking{waiters_};
  for (;;) {
    check_usable();
    if (op.complete) return;
    // Wait on one of this collective's transfers here rather than hand it to
    // a worker: the thread that waited continues without a wake-up.
    waiters_.rank_begin(op.seq);
    lock.unlock();
    const bool ran = waiters_.rank_run(op.seq, timeout());
    lock.lock();
    if (ran) continue;
    const auto deadline = std::min(last_progress_ + timeout(), Clock::now() + kLivenessTick);
    if (progress_cv_.wait_until(lock, deadline, [&] { return op.complete || !broken_.empty(); }))
      continue;
    if (Clock::now() >= last_progress_ + kLivenessAfter) probe_peers();
    if (!broken_.empty() || Clock::now() < last_progress_ + timeout()) continue;
    // Nothing completed for a whole timeout: name the oldest step in flight.
    std::string at(collective_name(op.call.shape.kind));
    if (!op.inflight.empty()) {
      const auto& [id, t] = *op.inflight.begin();
      at = fmt::format("{}, waiting for rank {}", where(op, id, t.step), t.step.peer);
    }
    set_broken(fmt::format("rank {}: timed out after {} ms in {}", rank(), timeout().count(), at),
               true);
  }
}

bool GlooComm::test(Op& op) {
  std::lock_guard lock(mu_);
  check_usable();
  return op.complete;
}

void GlooComm::barrier() {
  // A one-byte all-reduce over direct exchanges: every rank hears from all.
  std::uint8_t byte = 0;
  AlgoConfig algo;
  algo.algo = Algorithm::kDirect;
  allreduce(&byte, &byte, 1, DataType::kU8, ReduceOp::kMax, algo);
}

void GlooComm::group_by_host(const std::string& host_name) {
  // Fixed-size records (a hostname is at most 255 bytes), so one all-gather.
  constexpr std::size_t kLen = 256;
  std::vector<char> mine(kLen, '\0'), all(kLen * static_cast<std::size_t>(size()));
  std::copy_n(host_name.begin(), std::min(host_name.size(), kLen - 1), mine.begin());
  all_gather(mine.data(), all.data(), kLen, DataType::kU8);
  std::vector<std::string> hosts;
  for (int r = 0; r < size(); ++r) hosts.emplace_back(all.data() + r * kLen);
  host_group_size_ = uniform_host_block(hosts);
}

std::unique_ptr<Communicator> GlooComm::split(int color, int key) {
  const std::uint64_t seq = split_seq_++;
  std::vector<std::int32_t> mine = {color, key}, all(2 * static_cast<std::size_t>(size()));
  all_gather(mine.data(), all.data(), 2, DataType::kI32);
  std::vector<std::pair<int, int>> members;  // (key, rank) of my color
  for (int r = 0; r < size(); ++r)
    if (all[2 * r] == color && color >= 0) members.push_back({all[2 * r + 1], r});
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end());
  int my_rank = 0;
  while (members[my_rank].second != rank()) ++my_rank;
  const auto prefix = fmt::format("{}/split{}/color{}", prefix_, seq, color);
  auto ctx = connect(*world_, prefix, my_rank, static_cast<int>(members.size()), timeout());
  return make_gloo_comm(world_, std::move(ctx), prefix, timeout(), eager_bytes_);
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_comm(std::shared_ptr<GlooWorld> world,
                                             std::shared_ptr<gloo::Context> context,
                                             std::string prefix, std::chrono::milliseconds timeout,
                                             std::size_t eager_bytes,
                                             const std::string& host_name) {
  auto comm = std::make_unique<GlooComm>(std::move(world), std::move(context), std::move(prefix),
                                         timeout, eager_bytes);
  if (!host_name.empty()) comm->group_by_host(host_name);
  return comm;
}

int uniform_host_block(const std::vector<std::string>& hosts) {
  const int n = static_cast<int>(hosts.size());
  if (n < 2) return 0;
  int block = 1;
  while (block < n && hosts[block] == hosts[0]) ++block;
  // One host: no hierarchy of hosts; the default grouping keeps `hier` distinct.
  if (block == n || n % block != 0) return 0;
  std::vector<std::string> seen;
  for (int start = 0; start < n; start += block) {
    for (int r = start; r < start + block; ++r)
      if (hosts[r] != hosts[start]) return 0;
    if (std::find(seen.begin(), seen.end(), hosts[start]) != seen.end()) return 0;
    seen.push_back(hosts[start]);
  }
  return block;
}

std::shared_ptr<gloo::Context> gloo_context(Communicator& comm) {
  auto* gloo = dynamic_cast<GlooComm*>(&comm);
  if (gloo == nullptr) throw InvalidArgument("Gloo's algorithms need a gloo communicator");
  return gloo->context();
}

}  // namespace cclab::coll::detail
