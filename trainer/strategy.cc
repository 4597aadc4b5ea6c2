#include "cclab/trainer/strategy.h"

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/trainer/sha256.h"

namespace cclab::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

MirroredStrategy::MirroredStrategy(coll::Communicator& comm, StrategyOptions options)
    : comm_(comm), options_(options) {
  if (options_.bucket_bytes < sizeof(float))
    throw InvalidArgument(
        fmt::format("--bucket-mb: a bucket must hold at least one float (got {} bytes)",
                    options_.bucket_bytes));
}

MirroredStrategy::Scope MirroredStrategy::scope() {
  if (scope_open_ || scope_done_)
    throw InvalidArgument("MirroredStrategy::scope(): one scope per strategy, already used");
  scope_open_ = true;
  return Scope(*this);
}

MirroredStrategy::Scope::~Scope() noexcept(false) {
  // Not while unwinding: the broadcast is a collective and the peers may be gone.
  if (s_ != nullptr && std::uncaught_exceptions() == 0) close();
}

int MirroredStrategy::Scope::create_variable(std::string name, std::int64_t count) {
  CCLAB_CHECK(s_ != nullptr, "create_variable on a closed scope");
  return s_->vars_.add(std::move(name), count);
}

void MirroredStrategy::Scope::close() {
  if (s_ != nullptr) std::exchange(s_, nullptr)->finish_scope();
}

void MirroredStrategy::finish_scope() {
  scope_open_ = false;
  scope_done_ = true;
  // Mirroring: every replica starts from the chief's initial values.
  auto v = vars_.values();
  comm_.broadcast(v.data(), v.data(), v.size(), coll::DataType::kF32, /*root=*/0);
  build_buckets();
}

void MirroredStrategy::build_buckets() {
  bucket_of_.assign(vars_.count(), -1);
  // Backward produces the last variables' gradients first; a bucket is a run
  // of variables in that order, so it is one contiguous range of grads().
  for (int id = vars_.count() - 1; id >= 0; --id) {
    const auto bytes = [&](const Bucket& b) { return std::size_t(b.count) * sizeof(float); };
    if (buckets_.empty() || bytes(buckets_.back()) >= options_.bucket_bytes)
      buckets_.emplace_back();
    Bucket& b = buckets_.back();
    b.offset = vars_.offset(id);  // decreasing: the range grows downwards
    b.count += vars_.size(id);
    b.variables++;
    bucket_of_[id] = static_cast<int>(buckets_.size()) - 1;
  }
}

std::vector<std::pair<std::uint64_t, coll::Selection>> MirroredStrategy::bucket_algorithms() const {
  std::vector<std::pair<std::uint64_t, coll::Selection>> out;
  for (const auto& b : buckets_) {
    const auto count = static_cast<std::uint64_t>(b.count);
    const coll::CollectiveShape shape{coll::CollectiveKind::kAllReduce, comm_.size(), count, 0};
    out.emplace_back(
        count * sizeof(float),
        coll::select_algorithm(shape, sizeof(float), comm_.with_host_groups(options_.algo)));
  }
  return out;
}

void MirroredStrategy::begin_gradients() {
  CCLAB_CHECK(scope_done_, "gradients before the strategy's scope was closed");
  for (auto& b : buckets_) {
    CCLAB_CHECK(!b.request.valid(), "begin_gradients with a bucket still in flight");
    b.pending = b.variables;
    b.started = false;
  }
}

void MirroredStrategy::start(Bucket& b) {
  const auto t0 = Clock::now();
  float* g = vars_.grads().data() + b.offset;
  b.request = comm_.iallreduce(g, g, static_cast<std::uint64_t>(b.count), coll::DataType::kF32,
                               coll::ReduceOp::kAvg, options_.algo);
  b.started = true;
  stats_.buckets++;
  stats_.sync_seconds += seconds_since(t0);
}

void MirroredStrategy::poll() {
  // Progress for backends that advance inside test() (threads).
  const auto t0 = Clock::now();
  for (auto& b : buckets_)
    if (b.request.valid() && b.request.test()) b.request = {};
  stats_.sync_seconds += seconds_since(t0);
}

void MirroredStrategy::gradient_ready(int variable) {
  Bucket& b = buckets_.at(static_cast<std::size_t>(bucket_of_.at(variable)));
  CCLAB_CHECK(b.pending > 0, fmt::format("gradient of '{}' ready twice", vars_.name(variable)));
  if (--b.pending > 0 || !options_.overlap) return;
  poll();
  start(b);
}

void MirroredStrategy::finish_gradients() {
  for (auto& b : buckets_) {
    CCLAB_CHECK(b.pending == 0, "finish_gradients before every gradient was ready");
    if (!b.started) start(b);
  }
  const auto t0 = Clock::now();
  for (auto& b : buckets_) {
    if (b.request.valid()) b.request.wait();  // bounded by the communicator's timeout
    b.request = {};
  }
  stats_.sync_seconds += seconds_since(t0);
}

void MirroredStrategy::check_replicas(std::int64_t step) {
  const Digest mine = sha256_of<float>(vars_.values());
  std::vector<unsigned char> all(mine.size() * static_cast<std::size_t>(comm_.size()));
  comm_.all_gather(mine.data(), all.data(), mine.size(), coll::DataType::kU8);
  const auto digest = [&](int r) { return all.begin() + r * std::ptrdiff_t(mine.size()); };
  for (int r = 1; r < comm_.size(); ++r) {
    if (std::equal(digest(0), digest(1), digest(r))) continue;
    throw Error(fmt::format(
        "replicas diverged after step {}: replica {}'s weights differ from the chief's", step, r));
  }
}

}  // namespace cclab::train
