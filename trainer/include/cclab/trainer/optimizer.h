// Optimizers over a flat variable buffer: Adam (Keras' defaults: beta1 0.9,
// beta2 0.999, epsilon 1e-7; the article's learning rate 1e-4) and plain SGD.
// Their state is part of a checkpoint.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace cclab::train {

enum class OptimizerKind { kAdam, kSgd };
OptimizerKind parse_optimizer(std::string_view name, std::string_view what = "--optimizer");
std::string_view optimizer_name(OptimizerKind k);
// Throws InvalidArgument naming --lr unless the rate is positive and finite.
void require_learning_rate(double learning_rate);

struct OptimizerState {
  std::int64_t iterations = 0;
  std::vector<float> m, v;  // Adam moments; empty for SGD
};

class Optimizer {
 public:
  Optimizer(OptimizerKind kind, double learning_rate, std::size_t variables);

  // values -= update(grads); identical inputs give bitwise-identical outputs.
  void apply(std::span<float> values, std::span<const float> grads);

  OptimizerKind kind() const { return kind_; }
  const OptimizerState& state() const { return state_; }
  // Throws InvalidArgument when the sizes do not fit this optimizer.
  void set_state(OptimizerState s);

 private:
  OptimizerKind kind_;
  double lr_;
  OptimizerState state_;
};

}  // namespace cclab::train
