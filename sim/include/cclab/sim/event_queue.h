// The event engine: a priority queue of timed events in integer picoseconds.
//
// Events at the same time come out in the order they were pushed (FIFO by
// insertion sequence), so a simulation is deterministic however its events
// tie. The queue is a map from time to a FIFO bucket: collective schedules are
// symmetric, so thousands of events share a time and a push or pop costs
// O(log distinct times) plus an append, not a heap sift per event. An event is a small value
// (`Payload`); the owner of the queue dispatches on it, so no callback is allocated per event. Time
// never goes backwards: pushing an event before now() is a bug (CCLAB_CHECK).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "cclab/collectives/error.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

// A hint to bring the cache line holding `p` closer. GCC 12 at -O2 deletes
// __builtin_prefetch calls in the runner's loop (dead-code elimination; they
// survive at -O1), so on x86-64 the instruction is written out.
inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

template <class Payload>
class EventQueue {
 public:
  struct Event {
    Time time = 0;
    std::uint64_t seq = 0;
    Payload payload{};
  };

  Time now() const { return now_; }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::uint64_t popped() const { return popped_; }

  void push(Time time, const Payload& payload) {
    CCLAB_CHECK(time >= now_, "event scheduled in the past");
    const auto [it, fresh] = buckets_.try_emplace(time);
    if (fresh && !spare_.empty()) {
      it->second.items = std::move(spare_.back());
      spare_.pop_back();
    }
    it->second.items.push_back(Event{time, next_seq_++, payload});
    ++size_;
  }

  // The event `ahead` places after the earliest, if it is due at the same time
  // (null otherwise): for prefetching the state it will touch.
  const Event* peek(std::size_t ahead) const {
    if (buckets_.empty()) return nullptr;
    const Bucket& b = buckets_.begin()->second;
    return b.head + ahead < b.items.size() ? &b.items[b.head + ahead] : nullptr;
  }

  // Removes the earliest event (lowest time, then lowest sequence) and
  // advances now() to its time. Precondition: !empty().
  Event pop() {
    const auto first = buckets_.begin();
    Bucket& b = first->second;
    const Event e = b.items[b.head++];
    if (b.head == b.items.size()) {
      // Keep the drained storage for a later time (buckets of thousands of
      // events would otherwise regrow from empty, copying, every time).
      if (spare_.size() < kSpares) {
        b.items.clear();
        spare_.push_back(std::move(b.items));
      }
      buckets_.erase(first);
    }
    now_ = e.time;
    --size_;
    ++popped_;
    return e;
  }

 private:
  // The events of one time, in push order; `head` is the next to pop.
  struct Bucket {
    std::vector<Event> items;
    std::size_t head = 0;
  };

  static constexpr std::size_t kSpares = 8;
  std::map<Time, Bucket> buckets_;
  std::vector<std::vector<Event>> spare_;  // drained bucket storage, reused
  std::size_t size_ = 0;
  Time now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t popped_ = 0;
};

}  // namespace cclab::sim
