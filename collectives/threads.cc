// The threads backend: a communicator per rank thread, executing schedules
// over shared memory. A send posts a descriptor pointing into the sender's
// buffer; the receiver copies or reduces straight from it and flags the send
// done, so each transfer touches the data once and nothing is buffered.
#include "cclab/collectives/threads.h"

#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/reduce.h"
#include "cclab/collectives/step_runner.h"
#include "collective_plan.h"
#include "threads_transport.h"

namespace cclab::coll {
namespace {

using detail::Backoff;
using detail::SendDescriptor;
using detail::SpscRing;
using detail::StepRunner;
using detail::ThreadsGroup;
using Clock = std::chrono::steady_clock;

// A send's state, shared with the receiver through the descriptor. The
// receiver claims it before reading the sender's memory and marks it done
// after; a sender that abandons a collective (abort, timeout) revokes unclaimed
// sends and waits out claimed ones, so no peer ever reads freed memory.
enum SendState : std::uint32_t { kPosted = 0, kClaimed = 1, kDone = 2, kRevoked = 3 };

struct SendSlot {
  std::int64_t id;
  int peer;
  std::atomic<std::uint32_t> done{kPosted};
  SendSlot(std::int64_t i, int p) : id(i), peer(p) {}
};

struct RecvSlot {
  std::int64_t id;
  Step step;
};

// One collective in flight on one rank.
struct Op : detail::CollectivePlan {
  std::byte* scratch = nullptr;
  std::size_t scratch_slot = 0;
  std::deque<SendSlot> sends;                           // in flight, in issue order
  std::map<int, std::deque<RecvSlot>> recvs;            // per peer, in issue order
  std::deque<std::pair<int, SendDescriptor>> unposted;  // ring was full
  bool complete = false;
  std::exception_ptr error;
};

class ThreadsComm;

class ThreadsRequest final : public detail::RequestImpl {
 public:
  ThreadsRequest(ThreadsComm* comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
  // Dropping an unfinished collective (e.g. while unwinding from an exception,
  // just before its buffers are freed) revokes its sends and stops the group.
  ~ThreadsRequest() override;
  void wait() override;
  bool test() override;

 private:
  ThreadsComm* comm_;
  std::shared_ptr<Op> op_;
};

class ThreadsComm final : public Communicator {
 public:
  ThreadsComm(std::shared_ptr<ThreadsGroup> group, int rank, std::chrono::milliseconds timeout)
      : group_(std::move(group)), rank_(rank) {
    set_timeout(timeout);
  }
  ~ThreadsComm() override { revoke_sends(); }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  Request start(const CollectiveCall& call) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  void wait(Op& op);
  bool test(Op& op);
  void abandon(Op& op) noexcept;
  ThreadsGroup& group() { return *group_; }

 private:
  bool progress();
  bool progress(Op& op);
  bool issue(Op& op, std::int64_t id, const Step& s);
  bool match_recvs(Op& op);
  bool issue_ready(Op& op);  // issues the runner's ready steps; true if any
  bool drain_mailboxes();
  void finish(Op& op);
  std::byte* address(Op& op, const Region& r);
  [[noreturn]] void fail_timeout(Op& op);
  void check_abort();
  // Before leaving a collective early: no peer may read our buffers after.
  void revoke_sends() noexcept;
  static void revoke(Op& op) noexcept;
  template <class Fn>
  auto guarded(Fn&& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      // Abort first (keeps an earlier reason): a peer that finds a revoked
      // send then reports the root cause, not the revocation.
      group_->abort(fmt::format("rank {} failed: {}", rank_, e.what()));
      revoke_sends();
      throw;
    } catch (...) {
      group_->abort(fmt::format("rank {} failed", rank_));
      revoke_sends();
      throw;
    }
  }
  std::byte* acquire_scratch(std::size_t bytes, std::size_t& slot);

  std::shared_ptr<ThreadsGroup> group_;
  int rank_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t split_seq_ = 0;
  std::uint32_t barrier_sense_ = 0;
  std::deque<std::shared_ptr<Op>> active_;
  std::vector<std::vector<std::byte>> scratch_pool_;  // reused across calls
  std::vector<bool> scratch_busy_;
};

ThreadsRequest::~ThreadsRequest() {
  if (!op_->complete) comm_->abandon(*op_);
}

void ThreadsRequest::wait() { comm_->wait(*op_); }
bool ThreadsRequest::test() { return comm_->test(*op_); }

std::byte* ThreadsComm::acquire_scratch(std::size_t bytes, std::size_t& slot) {
  for (slot = 0; slot < scratch_pool_.size(); ++slot)
    if (!scratch_busy_[slot]) break;
  if (slot == scratch_pool_.size()) {
    scratch_pool_.emplace_back();
    scratch_busy_.push_back(false);
  }
  scratch_busy_[slot] = true;
  if (scratch_pool_[slot].size() < bytes) scratch_pool_[slot].resize(bytes);
  return scratch_pool_[slot].data();
}

Request ThreadsComm::start(const CollectiveCall& call) {
  check_abort();
  auto op = std::make_shared<Op>();
  op->plan(next_seq_++, call, rank_);
  if (auto n = op->schedule->scratch_count(); n > 0)
    op->scratch = acquire_scratch(n * op->esize, op->scratch_slot);
  active_.push_back(op);
  guarded([&] { return progress(*op); });
  return Request(std::make_shared<ThreadsRequest>(this, op));
}

std::byte* ThreadsComm::address(Op& op, const Region& r) {
  std::byte* base = r.buffer == BufferId::kInput
                        ? const_cast<std::byte*>(static_cast<const std::byte*>(op.call.send))
                    : r.buffer == BufferId::kOutput ? static_cast<std::byte*>(op.call.recv)
                                                    : op.scratch;
  return base + r.offset * op.esize;
}

bool ThreadsComm::issue(Op& op, std::int64_t id, const Step& s) {
  const ReduceOp rop = step_op(op.call.op);
  switch (s.kind) {
    case StepKind::kCopy: {
      std::byte* src = address(op, s.src);
      std::byte* dst = address(op, s.dst);
      copy_bytes(dst, src, s.dst.count * op.esize);
      return true;
    }
    case StepKind::kReduce: {
      std::byte* dst = address(op, s.dst);
      reduce(dst, dst, address(op, s.src), s.dst.count, op.call.dtype, rop);
      return true;
    }
    case StepKind::kFence:
      return true;
    case StepKind::kSend: {
      auto& slot = op.sends.emplace_back(id, s.peer);
      SendDescriptor d{op.seq, address(op, s.src), s.src.count * op.esize, &slot.done};
      if (!op.unposted.empty() || !group_->ring(rank_, s.peer).push(d))
        op.unposted.emplace_back(s.peer, d);
      return false;
    }
    default:
      op.recvs[s.peer].push_back({id, s});
      return false;
  }
}

bool ThreadsComm::drain_mailboxes() {
  bool any = false;
  SendDescriptor d;
  for (SpscRing* r = group_->inbound(rank_); r != nullptr; r = r->next_inbound)
    while (r->pop(d)) {
      r->arrived.push_back(d);
      any = true;
    }
  return any;
}

// Executes every pending receive whose matching send (same collective, FIFO
// per peer) has arrived, issuing what each one readies before copying the
// next: with receives posted ahead (a chain's chunks), a forward then goes
// out as soon as its chunk is in, not after every chunk that has arrived is
// copied. (A lone receive's steps are issued by progress(), as before.)
bool ThreadsComm::match_recvs(Op& op) {
  bool any = false;
  for (auto& [p, pending] : op.recvs) {
    auto& q = group_->ring(p, rank_).arrived;
    while (!pending.empty()) {
      auto it = q.begin();
      while (it != q.end() && it->op_seq != op.seq) ++it;
      if (it == q.end()) break;
      if (any) issue_ready(op);  // what the receive before readied, before this copy
      const Step& s = pending.front().step;
      if (it->bytes != s.dst.count * op.esize)
        throw InternalError(
            fmt::format("rank {}: {} got {} bytes from rank {}", rank_, describe(s), it->bytes, p));
      std::uint32_t posted = kPosted;
      if (!it->done->compare_exchange_strong(posted, kClaimed, std::memory_order_acq_rel)) {
        check_abort();  // the revoking rank aborted the group first: report the cause
        throw Error(fmt::format("rank {}: rank {} abandoned {} #{}", rank_, p,
                                collective_name(op.call.shape.kind), op.seq));
      }
      std::byte* dst = address(op, s.dst);
      if (s.kind == StepKind::kRecv)
        copy_bytes(dst, it->data, it->bytes);
      else
        reduce(dst, address(op, s.src), it->data, s.dst.count, op.call.dtype, step_op(op.call.op));
      it->done->store(kDone, std::memory_order_release);
      op.runner->complete(pending.front().id);
      pending.pop_front();
      q.erase(it);
      any = true;
    }
  }
  return any;
}

bool ThreadsComm::issue_ready(Op& op) {
  return op.runner->issue_ready([&](std::int64_t id, const Step& s) { return issue(op, id, s); }) >
         0;
}

bool ThreadsComm::progress(Op& op) {
  bool any = issue_ready(op);
  while (!op.unposted.empty() &&
         group_->ring(rank_, op.unposted.front().first).push(op.unposted.front().second)) {
    op.unposted.pop_front();
    any = true;
  }
  any |= match_recvs(op);
  for (auto& slot : op.sends) {
    if (slot.id >= 0 && slot.done.load(std::memory_order_acquire) == kDone) {
      op.runner->complete(slot.id);
      slot.id = -1;
      any = true;
    }
  }
  while (!op.sends.empty() && op.sends.front().id < 0) op.sends.pop_front();
  if (any) any |= issue_ready(op);
  if (op.runner->finished() && op.sends.empty()) finish(op);
  return any;
}

void ThreadsComm::finish(Op& op) {
  finalize_call(op.call);
  if (op.scratch) scratch_busy_[op.scratch_slot] = false;
  op.complete = true;
}

bool ThreadsComm::progress() {
  bool any = drain_mailboxes();
  for (auto& op : active_)
    if (!op->complete) any |= progress(*op);
  while (!active_.empty() && active_.front()->complete) active_.pop_front();
  return any;
}

void ThreadsComm::check_abort() {
  if (group_->aborted())
    throw Error(fmt::format("rank {}: stopped because {}", rank_, group_->abort_reason()));
}

void ThreadsComm::fail_timeout(Op& op) {
  std::string where = "after its last step";
  int peer = -1;
  if (auto id = op.runner->oldest_unfinished(); id >= 0) {
    for (const auto& [p, pending] : op.recvs)
      if (!pending.empty() && pending.front().id == id) {
        where = fmt::format("at step {} ({})", id, describe(pending.front().step));
        peer = p;
      }
    for (const auto& slot : op.sends)
      if (peer < 0 && slot.id == id) {
        where = fmt::format("at step {} (a send not yet taken by its receiver)", id);
        peer = slot.peer;
      }
  } else if (auto next = op.runner->next_unissued()) {
    where = fmt::format("at step {} ({})", next->first, describe(next->second));
    peer = next->second.peer;
  }
  const std::string msg =
      fmt::format("rank {}: timed out after {} ms in {} #{} ({}) {}{}", rank_, timeout().count(),
                  collective_name(op.call.shape.kind), op.seq, op.schedule->name(), where,
                  peer >= 0 ? fmt::format(", waiting for rank {}", peer) : "");
  group_->abort(msg);
  throw TimeoutError(msg);
}

void ThreadsComm::revoke(Op& op) noexcept {
  for (auto& slot : op.sends) {
    std::uint32_t state = kPosted;
    if (slot.id < 0 || slot.done.compare_exchange_strong(state, kRevoked)) continue;
    Backoff backoff;  // claimed: the receiver is reading right now, and finishes
    while (slot.done.load(std::memory_order_acquire) == kClaimed) backoff.pause();
  }
}

void ThreadsComm::revoke_sends() noexcept {
  for (auto& op : active_) revoke(*op);
}

void ThreadsComm::abandon(Op& op) noexcept {
  revoke(op);
  try {
    group_->abort(fmt::format("rank {} dropped unfinished {} #{}", rank_,
                              collective_name(op.call.shape.kind), op.seq));
  } catch (...) {  // formatting failed: the revocation above is what matters
  }
}

void ThreadsComm::wait(Op& op) {
  guarded([&] {
    Backoff backoff;
    auto last = Clock::now();
    while (!op.complete) {
      if (progress()) {
        backoff.reset();
        last = Clock::now();
        continue;
      }
      check_abort();
      if (Clock::now() - last > timeout()) fail_timeout(op);
      backoff.pause();
    }
  });
}

bool ThreadsComm::test(Op& op) {
  return guarded([&] {
    if (!op.complete) progress();
    if (!op.complete) check_abort();
    return op.complete;
  });
}

void ThreadsComm::barrier() {
  guarded([&] {
    check_abort();
    if (!group_->barrier(barrier_sense_, Clock::now() + timeout(), [this] { return progress(); })) {
      const std::string msg =
          fmt::format("rank {}: timed out after {} ms in barrier", rank_, timeout().count());
      group_->abort(msg);
      throw TimeoutError(msg);
    }
    check_abort();
  });
}

std::unique_ptr<Communicator> ThreadsComm::split(int color, int key) {
  const std::uint64_t seq = split_seq_++;
  group_->deposit(rank_, color, key);
  barrier();
  std::vector<std::pair<int, int>> members;  // (key, rank) of my color
  for (int r = 0; r < size(); ++r)
    if (auto [c, k] = group_->deposited(r); c == color && color >= 0) members.push_back({k, r});
  std::sort(members.begin(), members.end());
  std::shared_ptr<ThreadsGroup> child;
  int my_rank = -1;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (members[i].second == rank_) my_rank = static_cast<int>(i);
  if (color >= 0) child = group_->child(seq, color, static_cast<int>(members.size()));
  barrier();  // everyone has read the deposits before the next split overwrites them
  if (color < 0) return nullptr;
  return std::make_unique<ThreadsComm>(child, my_rank, timeout());
}

}  // namespace

struct ThreadsWorld::Impl {
  std::shared_ptr<ThreadsGroup> group;
  std::vector<std::unique_ptr<ThreadsComm>> comms;
};

ThreadsWorld::ThreadsWorld(int ranks, ThreadsOptions options) : impl_(std::make_unique<Impl>()) {
  if (ranks < 1 || ranks > kThreadsMaxRanks)
    throw InvalidArgument(
        fmt::format("ranks: must be 1 to {} (one thread each), got {}", kThreadsMaxRanks, ranks));
  impl_->group = std::make_shared<ThreadsGroup>(ranks);
  for (int r = 0; r < ranks; ++r)
    impl_->comms.push_back(std::make_unique<ThreadsComm>(impl_->group, r, options.timeout));
}

ThreadsWorld::~ThreadsWorld() = default;

int ThreadsWorld::size() const { return impl_->group->size(); }

Communicator& ThreadsWorld::comm(int rank) { return *impl_->comms.at(rank); }

namespace {

// Rank r's thread: runs fn; an exception is kept for the caller and stops the group.
std::function<void()> rank_body(const std::function<void(Communicator&)>& fn, Communicator& comm,
                                ThreadsGroup& group, std::exception_ptr& error) {
  return [&fn, &comm, &group, &error] {
    try {
      fn(comm);
    } catch (const std::exception& e) {
      error = std::current_exception();
      group.abort(fmt::format("rank {} failed: {}", comm.rank(), e.what()));
    } catch (...) {
      error = std::current_exception();
      group.abort(fmt::format("rank {} failed", comm.rank()));
    }
  };
}

// Rethrows the root cause: the error of the rank that aborted first.
void rethrow_first(ThreadsGroup& group, const std::vector<std::exception_ptr>& errors) {
  const std::string reason = group.abort_reason();
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (errors[r] && reason.find(fmt::format("rank {} ", r)) == 0)
      std::rethrow_exception(errors[r]);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void ThreadsWorld::run(const std::function<void(Communicator&)>& fn) {
  ThreadsGroup& group = *impl_->group;
  std::vector<std::exception_ptr> errors(size());
  std::vector<std::thread> threads;
  threads.reserve(size());
  try {
    for (int r = 0; r < size(); ++r) threads.emplace_back(rank_body(fn, comm(r), group, errors[r]));
  } catch (const std::system_error& e) {  // no thread for rank threads.size()
    const std::string why = fmt::format("cannot start the thread of rank {} of {}: {}",
                                        threads.size(), size(), e.what());
    group.abort(why);  // the started ranks stop at their next wait
    for (auto& t : threads) t.join();
    throw Error(why);
  }
  for (auto& t : threads) t.join();
  rethrow_first(group, errors);
}

}  // namespace cclab::coll
