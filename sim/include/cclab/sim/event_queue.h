// The event engine: a priority queue of timed events in integer picoseconds.
//
// Events at the same time come out in the order they were pushed (FIFO by an
// insertion sequence number), so a simulation is deterministic however its
// events tie. An event is a small value (`Payload`); the owner of the queue
// dispatches on it, so no callback is allocated per event. Time never goes
// backwards: pushing an event before now() is a bug (CCLAB_CHECK).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "cclab/collectives/error.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

template <class Payload>
class EventQueue {
 public:
  struct Event {
    Time time = 0;
    std::uint64_t seq = 0;
    Payload payload{};
  };

  Time now() const { return now_; }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t popped() const { return popped_; }

  void push(Time time, const Payload& payload) {
    CCLAB_CHECK(time >= now_, "event scheduled in the past");
    heap_.push(Event{time, next_seq_++, payload});
  }

  // Removes the earliest event (lowest time, then lowest sequence) and
  // advances now() to its time. Precondition: !empty().
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    now_ = e.time;
    ++popped_;
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };

  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  Time now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t popped_ = 0;
};

}  // namespace cclab::sim
