// The gloo executor's eager messages (the protocol: gloo_eager.h): the
// receive rings registered when the communicator is made, the send rings
// made on first use, sends copied into the peer's ring while it grants
// credit (queued aside otherwise), arrivals matched to their receive steps
// (or kept until the step is issued), and the credit signals back.
#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include "cclab/collectives/reduce.h"
#include "gloo_comm_impl.h"

namespace cclab::coll::detail::gloo_exec {
namespace {

// The most the kernel's autotuning grows a socket's send buffer to.
std::size_t tcp_autotune_max() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_wmem");
  std::size_t min = 0, initial = 0, max = 0;
  if (!(f >> min >> initial >> max) || max == 0) max = 4u << 20;
  return std::min<std::size_t>(max, 32u << 20);  // Gloo's own cap
}

// Header, payload and trailer of an eager block into `dst`.
void fill_block(std::byte* dst, const EagerHeader& h, const std::byte* payload) {
  std::memcpy(dst, &h, sizeof h);
  std::memcpy(dst + sizeof h, payload, h.length);
  std::memcpy(dst + sizeof h + h.length, &h.index, sizeof h.index);
}

}  // namespace

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

}  // namespace cclab::coll::detail::gloo_exec
