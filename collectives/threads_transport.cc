#include "threads_transport.h"

#include <thread>
#include <utility>

namespace cclab::coll::detail {

bool SpscRing::push(const SendDescriptor& d) {
  const std::uint32_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) == kCapacity) return false;
  slots_[tail % kCapacity] = d;
  tail_.store(tail + 1, std::memory_order_release);
  return true;
}

bool SpscRing::pop(SendDescriptor& d) {
  const std::uint32_t head = head_.load(std::memory_order_relaxed);
  if (head == tail_.load(std::memory_order_acquire)) return false;
  d = slots_[head % kCapacity];
  head_.store(head + 1, std::memory_order_release);
  return true;
}

ThreadsGroup::ThreadsGroup(int size)
    : size_(size),
      rings_(new std::atomic<SpscRing*>[static_cast<std::size_t>(size) * size]()),
      inbound_(new std::atomic<SpscRing*>[static_cast<std::size_t>(size)]()),
      split_(size) {}

ThreadsGroup::~ThreadsGroup() {
  for (int to = 0; to < size_; ++to)
    for (SpscRing* r = inbound(to); r != nullptr;) delete std::exchange(r, r->next_inbound);
}

// Both ends may ask at once: one ring wins the slot, the loser's is dropped.
// The winner is then pushed onto the receiver's inbound list.
SpscRing& ThreadsGroup::create_ring(int from, int to) {
  auto fresh = std::make_unique<SpscRing>();
  auto& slot = rings_[static_cast<std::size_t>(from) * size_ + to];
  SpscRing* existing = nullptr;
  if (!slot.compare_exchange_strong(existing, fresh.get(), std::memory_order_acq_rel))
    return *existing;
  SpscRing* ring = fresh.release();
  SpscRing* head = inbound_[to].load(std::memory_order_relaxed);
  do ring->next_inbound = head;
  while (!inbound_[to].compare_exchange_weak(head, ring, std::memory_order_release,
                                             std::memory_order_relaxed));
  return *ring;
}

void ThreadsGroup::abort(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (!aborted_.load(std::memory_order_relaxed)) reason_ = reason;
  aborted_.store(true, std::memory_order_release);
}

std::string ThreadsGroup::abort_reason() {
  std::lock_guard lock(mu_);
  return reason_;
}

std::shared_ptr<ThreadsGroup> ThreadsGroup::child(std::uint64_t split_seq, int color, int size) {
  std::lock_guard lock(mu_);
  auto& g = children_[{split_seq, color}];
  if (!g) g = std::make_shared<ThreadsGroup>(size);
  return g;
}

void Backoff::pause() {
  ++spins_;
  if (spins_ < 64) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else if (spins_ < 2048) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace cclab::coll::detail
