#include "cclab/trainer/trainer.h"

#include <chrono>
#include <optional>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cclab/collectives/error.h"
#include "cclab/trainer/checkpoint.h"
#include "cclab/trainer/model.h"
#include "cclab/trainer/rng.h"
#include "cclab/trainer/sha256.h"

namespace cclab::train {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kEvalRows = 1024;

// Where a run stands: optimizer steps done, and the epoch and batch to continue at.
struct Position {
  std::int64_t step = 0;
  int epoch = 0;
  std::int64_t step_in_epoch = 0;
};

// Everything a job is, besides its progress; a backup must match it to resume.
nlohmann::json job_identity(const TrainConfig& c, const std::vector<int>& sizes, int workers,
                            ShardPolicy policy) {
  return {{"layer_sizes", sizes},
          {"workers", workers},
          {"per_replica_batch", c.per_replica_batch},
          {"seed", c.seed},
          {"shard_policy", shard_policy_name(policy)},
          {"optimizer", optimizer_name(c.optimizer)},
          {"learning_rate", c.learning_rate}};
}

// Refuses a model of these layer sizes whose parameters cannot fit this
// machine, before they are allocated.
void require_memory_for(const TrainConfig& c, const std::vector<int>& sizes) {
  double parameters = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l)
    parameters += (double(sizes[l]) + 1) * double(sizes[l + 1]);  // kernel and bias
  // Values and gradients, and Adam's two moments.
  const int copies = c.optimizer == OptimizerKind::kAdam ? 4 : 2;
  require_memory(
      "--hidden",
      fmt::format("a model of {:.3g} parameters ({} copies of 4 bytes: values, "
                  "gradients{}) for {} replica(s) on this machine",
                  parameters, copies, copies == 4 ? ", Adam's moments" : "", c.replicas_on_host),
      parameters * 4 * copies * c.replicas_on_host);
}

// The model's layer sizes: the data's features, --hidden, the data's classes.
std::vector<int> layer_sizes(const TrainConfig& c, int dim, int classes) {
  std::vector<int> sizes{dim};
  sizes.insert(sizes.end(), c.hidden.begin(), c.hidden.end());
  sizes.push_back(classes);
  return sizes;
}

bool data_missing(const fs::path& dir) { return !fs::exists(dir) || fs::is_empty(dir); }

// The chief generates the built-in set into an empty or missing --data directory.
void ensure_data(coll::Communicator& comm, const TrainConfig& c, std::ostream* log) {
  if (comm.rank() == 0 && data_missing(c.data_dir)) {
    GenerateOptions g;
    g.seed = c.seed;
    try {
      make_dataset(c.data_dir, g);
    } catch (const fs::filesystem_error& e) {
      throw IoError(fmt::format("--data: cannot generate the built-in dataset in '{}': {}",
                                c.data_dir.string(), e.code().message()));
    }
    if (log) fmt::print(*log, "generated the built-in dataset in {}\n", c.data_dir.string());
  }
  comm.barrier();
}

void make_batch(const Dataset& d, const std::vector<std::int64_t>& order, std::int64_t first,
                int rows, Matrix& x, std::vector<int>& y) {
  x.resize(rows, d.dim);
  y.resize(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    const std::int64_t e = order[static_cast<std::size_t>(first + i)];
    x.row(i) = Eigen::Map<const Eigen::RowVectorXf>(&d.features[std::size_t(e) * d.dim], d.dim);
    y[static_cast<std::size_t>(i)] = d.labels[static_cast<std::size_t>(e)];
  }
}

BatchResult evaluate(Mlp& model, const Variables& vars, const Dataset& d) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(d.size()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = std::int64_t(i);
  BatchResult total;
  Matrix x;
  std::vector<int> y;
  for (std::int64_t first = 0; first < d.size(); first += kEvalRows) {
    make_batch(d, all, first, int(std::min(kEvalRows, d.size() - first)), x, y);
    const BatchResult r = model.evaluate(vars, x, y);
    total.loss_sum += r.loss_sum, total.correct += r.correct, total.examples += r.examples;
  }
  return total;
}

// Every worker takes part in a save (article: "all workers must save"): the
// chief writes to `dir`, the others to dir/workertemp_<task id>, which they
// remove once every worker reported success.
void save_everywhere(coll::Communicator& comm, const TaskInfo& task, const fs::path& dir, int keep,
                     const CheckpointState& state) {
  const bool chief = comm.rank() == 0;
  const fs::path mine = chief ? dir : dir / fmt::format("workertemp_{}", task.id);
  std::int32_t ok = 1;
  std::string error;
  try {
    CheckpointStore(mine, keep).save(state);
  } catch (const std::exception& e) {
    ok = 0, error = e.what();
  }
  comm.allreduce(&ok, &ok, 1, coll::DataType::kI32, coll::ReduceOp::kMin);
  if (!error.empty())
    throw IoError(fmt::format("saving a checkpoint in {}: {}", mine.string(), error));
  if (!ok) throw IoError("saving a checkpoint failed on another worker; see its error");
  if (!chief) fs::remove_all(mine);
}

CheckpointState snapshot(const Variables& vars, const Optimizer& opt, const Position& p,
                         const TrainConfig& c, const nlohmann::json& identity) {
  CheckpointState s;
  s.step = p.step, s.epoch = p.epoch, s.step_in_epoch = p.step_in_epoch;
  s.shuffle_rng_state = derive_seed(c.seed, kSeedShuffle, std::uint64_t(p.epoch));
  s.config = identity;
  s.weights.assign(vars.values().begin(), vars.values().end());
  s.optimizer = opt.state();
  return s;
}

// Fields of the backup that differ from this job, or "" when it can resume.
std::string mismatch(const nlohmann::json& backup, const nlohmann::json& job) {
  for (const auto& [key, value] : job.items())
    if (!backup.contains(key) || backup[key] != value)
      return fmt::format("{} is {} in the backup but {} in this run", key,
                         backup.contains(key) ? backup[key].dump() : "missing", value.dump());
  return "";
}

// The chief loads the newest good backup and broadcasts it, so workers need
// not share the chief's filesystem. Returns the position to continue from.
std::optional<Position> restore(coll::Communicator& comm, Variables& vars, Optimizer& opt,
                                const TrainConfig& c, const nlohmann::json& identity,
                                std::ostream* log) {
  std::int64_t head[4] = {0, 0, 0, 0};  // found, step, epoch, step_in_epoch
  std::optional<CheckpointState> s;
  if (comm.rank() == 0) {
    s = CheckpointStore(c.backup_dir, c.keep).load_latest([&](const std::string& why) {
      if (log) fmt::print(*log, "warning: {}\n", why);
    });
    if (s) {
      if (auto why = mismatch(s->config, identity); !why.empty())
        throw InvalidArgument(
            fmt::format("--backup-dir {}: cannot resume: {}", c.backup_dir.string(), why));
      if (s->weights.size() != vars.values().size() ||
          s->shuffle_rng_state != derive_seed(c.seed, kSeedShuffle, std::uint64_t(s->epoch)))
        throw IoError(fmt::format("--backup-dir {}: backup at step {} does not fit this model",
                                  c.backup_dir.string(), s->step));
      head[0] = 1, head[1] = s->step, head[2] = s->epoch, head[3] = s->step_in_epoch;
    }
  }
  comm.broadcast(head, head, 4, coll::DataType::kI64, 0);
  if (head[0] == 0) return std::nullopt;
  OptimizerState st = comm.rank() == 0 ? s->optimizer : opt.state();
  if (comm.rank() == 0) std::copy(s->weights.begin(), s->weights.end(), vars.values().begin());
  comm.broadcast(vars.values().data(), vars.values().data(), vars.values().size(),
                 coll::DataType::kF32, 0);
  comm.broadcast(&st.iterations, &st.iterations, 1, coll::DataType::kI64, 0);
  if (!st.m.empty()) {
    comm.broadcast(st.m.data(), st.m.data(), st.m.size(), coll::DataType::kF32, 0);
    comm.broadcast(st.v.data(), st.v.data(), st.v.size(), coll::DataType::kF32, 0);
  }
  opt.set_state(std::move(st));
  return Position{head[1], int(head[2]), head[3]};
}

// Training loss and accuracy of an epoch over all replicas.
struct EpochTotals {
  double loss_sum = 0, correct = 0, examples = 0;
  void add(const BatchResult& r) {
    loss_sum += r.loss_sum, correct += r.correct, examples += r.examples;
  }
};

// One worker's job; run() is the training loop as a list of named steps.
class Job {
 public:
  Job(coll::Communicator& comm, const TrainConfig& c, const TaskInfo& task, std::ostream* log)
      : comm_(comm),
        c_(c),
        task_(task),
        log_(comm.rank() == 0 ? log : nullptr),
        strategy_(comm, c.strategy) {}

  TrainResult run();

 private:
  void build();
  void train_epoch();
  void backup(const Position& at);
  void report_epoch(const EpochTotals& mine, double seconds, std::int64_t steps);
  void finish(TrainResult& r);
  template <class... A>
  void say(fmt::format_string<A...> f, A&&... a) {
    if (log_) fmt::print(*log_, "{}\n", fmt::format(f, std::forward<A>(a)...)), log_->flush();
  }
  // A collective's error (a lost peer, a timeout) with the training step it hit.
  std::string stopped_at(std::string_view why) const {
    return fmt::format("training stopped in step {} (epoch {}): {}", pos_.step + 1, pos_.epoch + 1,
                       why);
  }
  bool done() const {
    return pos_.epoch >= c_.epochs || (c_.max_steps > 0 && pos_.step >= c_.max_steps);
  }

  coll::Communicator& comm_;
  const TrainConfig& c_;
  TaskInfo task_;
  std::ostream* log_;
  MirroredStrategy strategy_;
  std::optional<ShardedData> data_;
  std::optional<Mlp> model_;
  std::optional<Optimizer> opt_;
  Dataset eval_;
  nlohmann::json identity_;
  std::int64_t steps_per_epoch_ = 0;
  Position pos_;
  TrainResult result_;
};

void Job::build() {
  ensure_data(comm_, c_, log_);
  const DataSource source = open_source(c_.data_dir);
  data_.emplace(source, c_.shard_policy, comm_.rank(), comm_.size(), c_.seed);
  steps_per_epoch_ = data_->steps_per_epoch(c_.per_replica_batch);
  if (steps_per_epoch_ < 1)
    throw InvalidArgument(fmt::format(
        "--per-replica-batch: {} is more than the smallest shard holds ({} examples, {} workers, "
        "shard policy {})",
        c_.per_replica_batch, data_->shard_size(0), comm_.size(),
        shard_policy_name(data_->policy())));
  const std::vector<int> sizes = layer_sizes(c_, source.dim, source.classes);
  require_memory_for(c_, sizes);
  {
    // Each replica draws its own initial values; the scope's broadcast makes them the chief's.
    Rng init(derive_seed(c_.seed, kSeedInit, std::uint64_t(comm_.rank())));
    auto scope = strategy_.scope();
    model_.emplace(scope, sizes, init);
    scope.close();
  }
  opt_.emplace(c_.optimizer, c_.learning_rate, strategy_.variables().values().size());
  identity_ = job_identity(c_, sizes, comm_.size(), data_->policy());
  if (comm_.rank() == 0 && c_.evaluate) eval_ = load_eval_set(source);
  say("cluster: {} replicas, global batch {} ({} per replica), {} steps per epoch, shard policy "
      "{}, "
      "{} gradient bucket(s)",
      strategy_.num_replicas_in_sync(), c_.per_replica_batch * strategy_.num_replicas_in_sync(),
      c_.per_replica_batch, steps_per_epoch_, shard_policy_name(data_->policy()),
      strategy_.bucket_count());
  for (const auto& [bytes, chosen] : strategy_.bucket_algorithms())
    say("gradient bucket of {} bytes: all-reduce {} ({})", bytes,
        coll::candidate_label(chosen.config), chosen.reason);
}

void Job::backup(const Position& at) {
  Position p = at;
  if (p.step_in_epoch == steps_per_epoch_) p.epoch++, p.step_in_epoch = 0;
  save_everywhere(comm_, task_, c_.backup_dir, c_.keep,
                  snapshot(strategy_.variables(), *opt_, p, c_, identity_));
}

void Job::train_epoch() {
  const auto order = data_->epoch_order(pos_.epoch);
  const int b = c_.per_replica_batch;
  Variables& vars = strategy_.variables();
  EpochTotals totals;
  Matrix x;
  std::vector<int> y;
  const auto t0 = Clock::now();
  const std::int64_t first = pos_.step_in_epoch;
  while (pos_.step_in_epoch < steps_per_epoch_ && !done()) {
    make_batch(data_->examples(), order, pos_.step_in_epoch * b, b, x, y);
    strategy_.begin_gradients();
    totals.add(model_->train_step(vars, x, y, [&](int id) { strategy_.gradient_ready(id); }));
    strategy_.finish_gradients();
    opt_->apply(vars.values(), vars.grads());
    pos_.step++, pos_.step_in_epoch++;
    if (c_.check_replicas) strategy_.check_replicas(pos_.step);
    if (!c_.backup_dir.empty() && c_.save_every > 0 && pos_.step % c_.save_every == 0) backup(pos_);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result_.train_seconds += seconds;
  result_.steps_run += pos_.step_in_epoch - first;
  report_epoch(totals, seconds, pos_.step_in_epoch - first);
  if (pos_.step_in_epoch == steps_per_epoch_) {
    if (!c_.backup_dir.empty() && c_.save_every == 0) backup(pos_);
    pos_.epoch++, pos_.step_in_epoch = 0;
  }
}

void Job::report_epoch(const EpochTotals& mine, double seconds, std::int64_t steps) {
  double t[3] = {mine.loss_sum, mine.correct, mine.examples};
  comm_.allreduce(t, t, 3, coll::DataType::kF64, coll::ReduceOp::kSum);
  if (!log_ || steps == 0) return;
  std::string eval;
  if (c_.evaluate) {
    const BatchResult r = evaluate(*model_, strategy_.variables(), eval_);
    eval = fmt::format(" eval_loss={:.6f} eval_accuracy={:.4f}", r.loss_sum / r.examples,
                       double(r.correct) / r.examples);
  }
  say("epoch {}/{}: step={} train_loss={:.6f} train_accuracy={:.4f}{} steps/s={:.1f}",
      pos_.epoch + 1, c_.epochs, pos_.step, t[0] / t[2], t[1] / t[2], eval, steps / seconds);
}

void Job::finish(TrainResult& r) {
  r.step = pos_.step;
  const auto values = strategy_.variables().values();
  r.weights.assign(values.begin(), values.end());
  r.weights_sha256 = to_hex(sha256_of<float>(values));
  r.comm = strategy_.comm_stats();
  if (comm_.rank() == 0 && c_.evaluate) {
    const BatchResult e = evaluate(*model_, strategy_.variables(), eval_);
    r.loss = e.loss_sum / e.examples, r.accuracy = double(e.correct) / e.examples;
  }
  if (!c_.model_dir.empty()) {
    save_everywhere(comm_, task_, c_.model_dir, c_.keep,
                    snapshot(strategy_.variables(), *opt_, pos_, c_, identity_));
    say("saved the model in {}", c_.model_dir.string());
  }
  // BackupAndRestore deletes its backup once training has finished (as Keras
  // does); a run stopped early by --max-steps keeps it, so it can go on later.
  comm_.barrier();
  if (comm_.rank() == 0 && !c_.backup_dir.empty() && pos_.epoch >= c_.epochs)
    fs::remove_all(c_.backup_dir);
}

TrainResult Job::run() {
  build();
  if (!c_.backup_dir.empty()) {
    if (auto p = restore(comm_, strategy_.variables(), *opt_, c_, identity_, log_)) {
      pos_ = *p;
      result_.resumed = true;
      say("resumed from step {}, epoch {}", pos_.step, pos_.epoch + 1);
    }
  }
  try {
    while (!done()) train_epoch();
  } catch (const TimeoutError& e) {
    throw TimeoutError(stopped_at(e.what()));
  } catch (const IoError& e) {
    throw IoError(stopped_at(e.what()));
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {  // e.g. gloo's "lost rank N"
    throw Error(stopped_at(e.what()));
  }
  finish(result_);
  return result_;
}

}  // namespace

void validate_train_config(const TrainConfig& config) {
  if (config.epochs < 1)
    throw InvalidArgument(fmt::format("--epochs: must be at least 1 (got {})", config.epochs));
  if (config.per_replica_batch < 1)
    throw InvalidArgument(
        fmt::format("--per-replica-batch: must be at least 1 (got {})", config.per_replica_batch));
  if (config.save_every < 0)
    throw InvalidArgument(
        fmt::format("--save-every: must be 0 or more (got {})", config.save_every));
  if (config.max_steps < 0)
    throw InvalidArgument(
        fmt::format("--max-steps: must be 0 (all epochs) or more (got {})", config.max_steps));
  if (config.keep < 1)
    throw InvalidArgument(fmt::format("--keep: must be at least 1 (got {})", config.keep));
  require_learning_rate(config.learning_rate);
}

TrainResult train_worker(coll::Communicator& comm, const TrainConfig& config, const TaskInfo& task,
                         std::ostream* log) {
  validate_train_config(config);
  // Every task writes under these (workers into workertemp_<id>): made now, so
  // a path that cannot be a directory fails before the training, not after.
  for (const auto& [flag, dir] :
       {std::pair{"--model-dir", config.model_dir}, std::pair{"--backup-dir", config.backup_dir}}) {
    std::error_code ec;
    if (!dir.empty() && !fs::create_directories(dir, ec) && ec)
      throw IoError(fmt::format("{}: cannot create '{}': {}", flag, dir.string(), ec.message()));
  }
  Job job(comm, config, task, log);
  return job.run();
}

void require_model_memory(const TrainConfig& config) {
  GenerateOptions built_in;
  int dim = built_in.dim, classes = built_in.classes;
  if (!data_missing(config.data_dir)) {
    const DataSource source = open_source(config.data_dir);
    dim = source.dim, classes = source.classes;
  }
  require_memory_for(config, layer_sizes(config, dim, classes));
}

std::string final_line(const TrainResult& r) {
  return fmt::format("final step={} loss={:.9g} accuracy={:.4f} weights_sha256={}", r.step, r.loss,
                     r.accuracy, r.weights_sha256);
}

}  // namespace cclab::train
