// Shared-memory plumbing of the threads backend: per ordered rank pair that
// exchanges messages a single-producer/single-consumer ring of send
// descriptors, a barrier and an abort flag shared by the ranks of one group.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cclab::coll::detail {

// A posted send: the receiver reads `bytes` at `data` (the sender's own
// buffer) and then sets *done, which completes the send.
struct SendDescriptor {
  std::uint64_t op_seq = 0;
  const std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  std::atomic<std::uint32_t>* done = nullptr;
};

// One ordered pair's channel, made when either side first needs it: a ring
// of descriptors the sender pushes, and what the receiver popped but has not
// matched yet (the receiver's alone).
class SpscRing {
 public:
  static constexpr std::uint32_t kCapacity = 128;  // 4 KiB per pair; a full ring defers the post
  bool push(const SendDescriptor& d);              // false when full
  bool pop(SendDescriptor& d);                     // false when empty

  SpscRing* next_inbound = nullptr;    // the receiver's previous ring; fixed once published
  std::deque<SendDescriptor> arrived;  // popped, not yet matched (receiver only)

 private:
  alignas(64) std::atomic<std::uint32_t> head_{0};  // next to pop (consumer)
  alignas(64) std::atomic<std::uint32_t> tail_{0};  // next to push (producer)
  alignas(64) std::array<SendDescriptor, kCapacity> slots_{};
};

// State shared by the ranks of one communicator (a world or a split of it).
// Only the pairs that exchange messages get a ring, so a group of n ranks
// holds n^2 pointers, not n^2 rings, and a rank polls only its own inbound
// rings (a list per receiver, newest first, that only grows).
class ThreadsGroup {
 public:
  explicit ThreadsGroup(int size);
  ~ThreadsGroup();
  ThreadsGroup(const ThreadsGroup&) = delete;
  ThreadsGroup& operator=(const ThreadsGroup&) = delete;
  int size() const { return size_; }
  SpscRing& ring(int from, int to) {
    SpscRing* r =
        rings_[static_cast<std::size_t>(from) * size_ + to].load(std::memory_order_acquire);
    return r ? *r : create_ring(from, to);
  }
  // The newest ring into `to`; follow next_inbound for the others.
  SpscRing* inbound(int to) const { return inbound_[to].load(std::memory_order_acquire); }

  // Marks the group failed; the first reason is kept and reported to all.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  std::string abort_reason();

  // Sense-reversing barrier. `poll` runs while waiting (to keep in-flight
  // collectives moving); returns false on timeout.
  template <class Poll>
  bool barrier(std::uint32_t& local_sense, std::chrono::steady_clock::time_point deadline,
               Poll&& poll);

  // Split support: every rank deposits (color, key), then the ranks of one
  // color share the child group created by the first of them to ask.
  void deposit(int rank, int color, int key) { split_[rank] = {color, key}; }
  std::pair<int, int> deposited(int rank) const { return split_[rank]; }
  std::shared_ptr<ThreadsGroup> child(std::uint64_t split_seq, int color, int size);

 private:
  SpscRing& create_ring(int from, int to);

  int size_;
  std::unique_ptr<std::atomic<SpscRing*>[]> rings_;    // [from * size + to], null until used
  std::unique_ptr<std::atomic<SpscRing*>[]> inbound_;  // per receiver, the newest ring
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> sense_{0};
  std::atomic<bool> aborted_{false};
  std::mutex mu_;
  std::string reason_;
  std::vector<std::pair<int, int>> split_;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<ThreadsGroup>> children_;
};

// Spin, then yield, then sleep: waits that stay cheap when the peer is about
// to answer and do not starve it when ranks outnumber cores.
class Backoff {
 public:
  void pause();
  void reset() { spins_ = 0; }

 private:
  std::uint32_t spins_ = 0;
};

template <class Poll>
bool ThreadsGroup::barrier(std::uint32_t& local_sense,
                           std::chrono::steady_clock::time_point deadline, Poll&& poll) {
  local_sense ^= 1u;
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    arrived_.store(0, std::memory_order_relaxed);
    sense_.store(local_sense, std::memory_order_release);
    return true;
  }
  Backoff backoff;
  while (sense_.load(std::memory_order_acquire) != local_sense) {
    if (poll()) backoff.reset();
    if (aborted()) return true;  // the caller reports the abort
    if (std::chrono::steady_clock::now() > deadline) return false;
    backoff.pause();
  }
  return true;
}

}  // namespace cclab::coll::detail
