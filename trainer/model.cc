#include "cclab/trainer/model.h"

#include <cmath>

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::train {
namespace {

using ConstMap = Eigen::Map<const Matrix>;
using Map = Eigen::Map<Matrix>;
using RowVector = Eigen::Map<const Eigen::RowVectorXf>;

}  // namespace

Mlp::Mlp(MirroredStrategy::Scope& scope, std::vector<int> layer_sizes, Rng& init)
    : sizes_(std::move(layer_sizes)) {
  if (sizes_.size() < 2) throw InvalidArgument("model: needs an input and an output size");
  for (int s : sizes_)
    if (s < 1)
      throw InvalidArgument(fmt::format("--hidden: layer sizes must be positive (got {})", s));
  for (int l = 0; l < layers(); ++l) {
    const int in = sizes_[l], out = sizes_[l + 1];
    weight_id_.push_back(
        scope.create_variable(fmt::format("dense_{}/kernel", l), std::int64_t(in) * out));
    bias_id_.push_back(scope.create_variable(fmt::format("dense_{}/bias", l), out));
  }
  // Values after every variable exists (adding one moves the storage).
  for (int l = 0; l < layers(); ++l) {
    const double limit = std::sqrt(6.0 / (sizes_[l] + sizes_[l + 1]));  // Glorot uniform
    for (float& w : scope.value(weight_id_[l])) w = float((2 * init.uniform() - 1) * limit);
  }
  z_.resize(layers());
  a_.resize(layers());
}

void Mlp::forward(const Variables& vars, const Matrix& x) {
  const Matrix* in = &x;
  for (int l = 0; l < layers(); ++l) {
    ConstMap w(vars.value(weight_id_[l]).data(), sizes_[l], sizes_[l + 1]);
    RowVector b(vars.value(bias_id_[l]).data(), sizes_[l + 1]);
    z_[l].noalias() = *in * w;
    z_[l].rowwise() += b;
    if (l + 1 < layers()) {
      a_[l] = z_[l].cwiseMax(0.0f);  // ReLU
      in = &a_[l];
    }
  }
}

// Mean-free loss sum and accuracy from the logits in z_.back(); with dlogits,
// also the gradient of the batch's mean loss w.r.t. the logits.
BatchResult Mlp::softmax_loss(const std::vector<int>& labels, Matrix* dlogits) {
  const Matrix& logits = z_.back();
  BatchResult r;
  r.examples = logits.rows();
  if (dlogits) dlogits->resize(logits.rows(), logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index best = 0;
    const float max = logits.row(i).maxCoeff(&best);
    const Eigen::RowVectorXf e = (logits.row(i).array() - max).exp();
    const float sum = e.sum();
    const int y = labels[static_cast<std::size_t>(i)];
    r.loss_sum += std::log(double(sum)) - double(logits(i, y) - max);
    r.correct += best == y;
    if (dlogits) {
      dlogits->row(i) = e / (sum * float(logits.rows()));
      (*dlogits)(i, y) -= 1.0f / float(logits.rows());
    }
  }
  return r;
}

BatchResult Mlp::evaluate(const Variables& vars, const Matrix& x, const std::vector<int>& labels) {
  forward(vars, x);
  return softmax_loss(labels, nullptr);
}

BatchResult Mlp::train_step(Variables& vars, const Matrix& x, const std::vector<int>& labels,
                            const std::function<void(int)>& on_ready) {
  forward(vars, x);
  Matrix dz;
  const BatchResult r = softmax_loss(labels, &dz);
  for (int l = layers() - 1; l >= 0; --l) {
    const Matrix& in = l == 0 ? x : a_[l - 1];
    Map dw(vars.grad(weight_id_[l]).data(), sizes_[l], sizes_[l + 1]);
    Eigen::Map<Eigen::RowVectorXf> db(vars.grad(bias_id_[l]).data(), sizes_[l + 1]);
    dw.noalias() = in.transpose() * dz;
    db = dz.colwise().sum();
    on_ready(bias_id_[l]);
    on_ready(weight_id_[l]);
    if (l == 0) break;
    ConstMap w(vars.value(weight_id_[l]).data(), sizes_[l], sizes_[l + 1]);
    Matrix da = dz * w.transpose();
    dz = (z_[l - 1].array() > 0.0f).select(da, 0.0f);  // ReLU'
  }
  return r;
}

}  // namespace cclab::train
