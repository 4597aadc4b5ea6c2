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
  CCLAB_CHECK(id >= base_ && !done_[id - base_], "step completed twice");
  done_[id - base_] = 1;
  --inflight_;
  while (!done_.empty() && done_.front()) {
    done_.pop_front();
    ++base_;
  }
}

std::optional<std::pair<std::int64_t, Step>> StepRunner::next_unissued() const {
  if (!has_next_) return std::nullopt;
  return std::make_pair(next_id_, next_);
}

std::int64_t StepRunner::oldest_unfinished() const { return inflight_ > 0 ? base_ : -1; }

}  // namespace cclab::coll::detail
