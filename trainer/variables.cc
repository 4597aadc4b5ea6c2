#include "cclab/trainer/variables.h"

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::train {

int Variables::add(std::string name, std::int64_t count) {
  if (count <= 0)
    throw InvalidArgument(
        fmt::format("variable '{}': size must be positive (got {})", name, count));
  names_.push_back(std::move(name));
  offsets_.push_back(offsets_.back() + count);
  values_.resize(static_cast<std::size_t>(offsets_.back()), 0.0f);
  grads_.resize(static_cast<std::size_t>(offsets_.back()), 0.0f);
  return static_cast<int>(names_.size()) - 1;
}

}  // namespace cclab::train
