#include "cclab/collectives/step_runner.h"

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {

StepRunner::StepRunner(Program program) : program_(std::move(program)) { advance(); }

void StepRunner::advance() {
  has_next_ = program_.next();
  if (has_next_) next_ = program_.value();
}

bool StepRunner::ready(const Step& s) const {
  if (s.kind == StepKind::kFence) return inflight_ == 0;
  for (int k = 0; k < s.num_deps; ++k) {
    CCLAB_CHECK(
        s.deps[k] >= 0 && s.deps[k] < next_id_,
        fmt::format("step {} depends on step {}, not an earlier step", next_id_, s.deps[k]));
    if (!is_done(s.deps[k])) return false;
  }
  return true;
}

void StepRunner::complete(std::int64_t id) {
  const std::int64_t mask = capacity_ - 1;
  std::uint8_t* done = flags();
  CCLAB_CHECK(id >= base_ && id < next_id_ && !done[id & mask], "step completed twice");
  done[id & mask] = 1;
  --inflight_;
  while (base_ < next_id_ && done[base_ & mask]) ++base_;
}

void StepRunner::grow() {
  auto bigger = std::make_unique<std::uint8_t[]>(static_cast<std::size_t>(2 * capacity_));
  for (std::int64_t id = base_; id < next_id_; ++id)
    bigger[id & (2 * capacity_ - 1)] = flags()[id & (capacity_ - 1)];
  capacity_ *= 2;
  heap_ = std::move(bigger);
}

std::optional<std::pair<std::int64_t, Step>> StepRunner::next_unissued() const {
  if (!has_next_) return std::nullopt;
  return std::make_pair(next_id_, next_);
}

std::int64_t StepRunner::oldest_unfinished() const { return inflight_ > 0 ? base_ : -1; }

}  // namespace cclab::coll::detail
