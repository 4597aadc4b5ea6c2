#include "threads_transport.h"

#include <thread>

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

ThreadsGroup::ThreadsGroup(int size) : size_(size), split_(size) {
  rings_.reserve(static_cast<std::size_t>(size) * size);
  for (int i = 0; i < size * size; ++i) rings_.push_back(std::make_unique<SpscRing>());
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
