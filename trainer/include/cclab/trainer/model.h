// A multi-layer perceptron classifier on Eigen: dense layers with ReLU
// between them, softmax cross-entropy on the logits. Its variables live in a
// MirroredStrategy scope (W then b per layer, in order), so they are mirrored
// and their gradients are bucketed by the strategy.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <vector>

#include "cclab/trainer/rng.h"
#include "cclab/trainer/strategy.h"

namespace cclab::train {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Loss and correct predictions of one batch.
struct BatchResult {
  double loss_sum = 0;  // summed over the batch's examples
  std::int64_t correct = 0;
  std::int64_t examples = 0;
};

class Mlp {
 public:
  // layer_sizes: input, hidden..., classes. Weights get Glorot-uniform values
  // from `init` (each replica may draw different ones: the scope's broadcast
  // makes the chief's win), biases zero.
  Mlp(MirroredStrategy::Scope& scope, std::vector<int> layer_sizes, Rng& init);

  int layers() const { return static_cast<int>(sizes_.size()) - 1; }
  const std::vector<int>& sizes() const { return sizes_; }

  // Forward pass only (evaluation).
  BatchResult evaluate(const Variables& vars, const Matrix& x, const std::vector<int>& labels);
  // Forward and backward on one batch: the gradient of the batch's mean loss
  // lands in vars' grads; on_ready(variable id) is called as soon as each
  // variable's gradient is final (last layer first).
  BatchResult train_step(Variables& vars, const Matrix& x, const std::vector<int>& labels,
                         const std::function<void(int)>& on_ready);

 private:
  void forward(const Variables& vars, const Matrix& x);
  BatchResult softmax_loss(const std::vector<int>& labels, Matrix* dlogits);

  std::vector<int> sizes_;
  std::vector<int> weight_id_, bias_id_;
  std::vector<Matrix> z_, a_;  // pre- and post-activation per layer, reused across steps
};

}  // namespace cclab::train
