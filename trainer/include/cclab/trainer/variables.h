// Flat storage for a model's variables and their gradients: one contiguous
// float buffer each, so a gradient bucket is a range and a checkpoint or a
// broadcast is one call.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cclab::train {

class Variables {
 public:
  // Appends a variable of `count` floats (zero-filled) and returns its id.
  // Spans handed out earlier are invalidated.
  int add(std::string name, std::int64_t count);

  int count() const { return static_cast<int>(names_.size()); }
  const std::string& name(int id) const { return names_[id]; }
  std::int64_t offset(int id) const { return offsets_[id]; }
  std::int64_t size(int id) const { return offsets_[id + 1] - offsets_[id]; }

  std::span<float> value(int id) { return {values_.data() + offset(id), std::size_t(size(id))}; }
  std::span<const float> value(int id) const {
    return {values_.data() + offset(id), std::size_t(size(id))};
  }
  std::span<float> grad(int id) { return {grads_.data() + offset(id), std::size_t(size(id))}; }

  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  std::span<float> grads() { return grads_; }

 private:
  std::vector<std::string> names_;
  std::vector<std::int64_t> offsets_{0};
  std::vector<float> values_, grads_;
};

}  // namespace cclab::train
