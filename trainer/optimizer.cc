#include "cclab/trainer/optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::train {

OptimizerKind parse_optimizer(std::string_view name, std::string_view what) {
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "sgd") return OptimizerKind::kSgd;
  throw InvalidArgument(fmt::format("{}: unknown optimizer '{}' (allowed: adam, sgd)", what, name));
}

std::string_view optimizer_name(OptimizerKind k) {
  return k == OptimizerKind::kAdam ? "adam" : "sgd";
}

void require_learning_rate(double learning_rate) {
  if (!(learning_rate > 0) || !std::isfinite(learning_rate))
    throw InvalidArgument(fmt::format("--lr: must be a positive number (got {})", learning_rate));
}

Optimizer::Optimizer(OptimizerKind kind, double learning_rate, std::size_t variables)
    : kind_(kind), lr_(learning_rate) {
  require_learning_rate(learning_rate);
  if (kind_ == OptimizerKind::kAdam) {
    state_.m.assign(variables, 0.0f);
    state_.v.assign(variables, 0.0f);
  }
}

void Optimizer::set_state(OptimizerState s) {
  if (s.m.size() != state_.m.size() || s.v.size() != state_.v.size())
    throw InvalidArgument(fmt::format("optimizer state: {} moments for {} variables ({})",
                                      s.m.size(), state_.m.size(), optimizer_name(kind_)));
  state_ = std::move(s);
}

void Optimizer::apply(std::span<float> values, std::span<const float> grads) {
  const std::int64_t t = ++state_.iterations;
  if (kind_ == OptimizerKind::kSgd) {
    const float lr = float(lr_);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] -= lr * grads[i];
    return;
  }
  constexpr float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
  // Bias correction folded into the step size, as Keras and TF do.
  const float lr_t =
      float(lr_ * std::sqrt(1 - std::pow(0.999, double(t))) / (1 - std::pow(0.9, double(t))));
  float* m = state_.m.data();
  float* v = state_.v.data();
  for (std::size_t i = 0; i < values.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * grads[i];
    v[i] = b2 * v[i] + (1 - b2) * grads[i] * grads[i];
    values[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

}  // namespace cclab::train
