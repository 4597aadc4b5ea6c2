// The gloo executor. Messages up to the eager limit go eagerly, into the
// receiver's ring of bound buffers (gloo_eager.h, gloo_comm_eager.cc); every
// other step maps onto Gloo's unbound buffers:
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
// collective's transfers itself: first what the next step to issue waits
// for, else receives first, as Gloo's algorithms do.
#include "gloo_comm.h"

#include <algorithm>

#include <gloo/transport/pair.h>

#include "cclab/collectives/reduce.h"
#include "gloo_comm_impl.h"

namespace cclab::coll::detail {
namespace gloo_exec {

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
  CollectiveCall planned = call;
  planned.algo = with_host_groups(call.algo);
  op->plan(next_seq_++, planned, rank());
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
    const WaitHint hint = next_step_waits_for(op);
    lock.unlock();
    const bool ran = waiters_.rank_run(op.seq, timeout(), hint);
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

WaitHint GlooComm::next_step_waits_for(const Op& op) const {
  static_assert(WaitHint::kMax >= kMaxDeps);
  WaitHint hint;
  const Step* next = op.runner->peek_next();
  if (next == nullptr) return hint;
  for (int k = 0; k < next->num_deps; ++k) {
    const auto it = op.inflight.find(next->deps[k]);
    if (it == op.inflight.end()) continue;  // done, or local
    if (it->second.buf)
      hint.add_step(it->first);
    else if (it->second.step.is_recv())
      hint.add_eager_peer(it->second.step.peer);
  }
  return hint;
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

}  // namespace gloo_exec

std::unique_ptr<Communicator> make_gloo_comm(std::shared_ptr<GlooWorld> world,
                                             std::shared_ptr<gloo::Context> context,
                                             std::string prefix, std::chrono::milliseconds timeout,
                                             std::size_t eager_bytes,
                                             const std::string& host_name) {
  auto comm = std::make_unique<gloo_exec::GlooComm>(std::move(world), std::move(context),
                                                    std::move(prefix), timeout, eager_bytes);
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
  auto* gloo = dynamic_cast<gloo_exec::GlooComm*>(&comm);
  if (gloo == nullptr) throw InvalidArgument("Gloo's algorithms need a gloo communicator");
  return gloo->context();
}

}  // namespace cclab::coll::detail
