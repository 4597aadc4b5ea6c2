// StepRunner drives one rank's program under the execution model of
// schedule.h (in-order issue, deps, fences, out-of-order completion); a
// backend supplies what issuing a step means. Backend-independent, so every
// executor applies the same rules the checker proves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "cclab/collectives/schedule.h"

namespace cclab::coll::detail {

class StepRunner {
 public:
  explicit StepRunner(Program program);

  // Issues steps while the next one's deps (or fence) are satisfied. `issue`
  // is called as issue(id, step) and returns true when the step completed at
  // once (local work), false when it is now in flight. Returns how many
  // steps were issued.
  template <class IssueFn>
  int issue_ready(IssueFn&& issue) {
    int issued = 0;
    while (has_next_ && ready(next_)) {
      if (next_id_ - base_ == capacity_) grow();
      const std::int64_t id = next_id_++;
      flags()[id & (capacity_ - 1)] = 0;
      ++inflight_;
      ++issued;
      if (issue(id, next_)) complete(id);
      advance();
    }
    return issued;
  }

  void complete(std::int64_t id);
  bool finished() const { return !has_next_ && inflight_ == 0; }
  // The step the rank is stuck on: the oldest unfinished one, else the next
  // unissued one. For error messages.
  std::optional<std::pair<std::int64_t, Step>> next_unissued() const;
  // The next step to issue, if any (valid until the runner advances).
  const Step* peek_next() const { return has_next_ ? &next_ : nullptr; }
  std::int64_t oldest_unfinished() const;

 private:
  bool ready(const Step& s) const;
  bool is_done(std::int64_t id) const { return id < base_ || flags()[id & (capacity_ - 1)]; }
  std::uint8_t* flags() { return heap_ ? heap_.get() : inline_; }
  const std::uint8_t* flags() const { return heap_ ? heap_.get() : inline_; }
  void advance();
  void grow();  // doubles the window

  Program program_;
  bool has_next_ = false;
  Step next_;
  std::int64_t next_id_ = 0;
  std::int64_t base_ = 0;      // every id below base_ is complete
  std::int64_t inflight_ = 0;  // issued, not complete
  // Completion flags of ids base_ .. next_id_-1, a ring indexed by id modulo
  // capacity_ (a power of two): in place for the usual window of a few steps,
  // so a step's bookkeeping touches no other memory (the simulator keeps
  // tens of thousands of runners); larger windows move to the heap.
  static constexpr std::int64_t kInline = 32;
  std::int64_t capacity_ = kInline;
  std::unique_ptr<std::uint8_t[]> heap_;
  std::uint8_t inline_[kInline];
};

}  // namespace cclab::coll::detail
