// `cclab train`: flags -> TrainConfig, the cluster from --ranks (threads) or
// the environment (gloo: TF_CONFIG, torchrun, mpirun), then train_worker on
// every replica; or --make-data, or --bench.
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/threads.h"
#include "cclab/trainer/cli.h"
#include "cclab/trainer/cluster.h"
#include "cclab/trainer/trainer.h"
#include "train_bench.h"
#ifdef CCLAB_HAVE_GLOO
#include "cclab/collectives/gloo.h"
#endif

namespace cclab::train {
namespace {

struct TrainFlags {
  std::string backend = "auto";
  int ranks = 1;
  std::string rendezvous, bind;
  int timeout_ms = 30000;
  std::string data, make_data, model_dir, backup_dir;
  std::string hidden = "128,128";
  std::string shard_policy = "auto", optimizer = "adam", algo = "auto";
  double bucket_mb = 25;
  bool no_overlap = false, no_check = false, bench = false;
  TrainConfig config;
};

std::vector<int> parse_hidden(const std::string& s) {
  std::vector<int> sizes;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1)
      throw InvalidArgument(
          fmt::format("--hidden: '{}' is not a positive layer size (allowed: comma-separated "
                      "sizes, e.g. 128,128)",
                      item));
    sizes.push_back(v);
  }
  return sizes;
}

void add_flags(CLI::App& cmd, TrainFlags& f) {
  TrainConfig& c = f.config;
  cmd.add_option(
         "--backend", f.backend,
         "threads (--ranks workers in this process), gloo (one worker per process, identity from "
         "TF_CONFIG, RANK/WORLD_SIZE or OMPI_*), or auto: gloo when the environment names "
         "a rank, else threads")
      ->capture_default_str();
  cmd.add_option("--ranks", f.ranks, "threads: number of workers")->capture_default_str();
  cmd.add_option("--rendezvous", f.rendezvous,
                 "gloo: file:DIR or redis://host:port (default: CCLAB_RENDEZVOUS, else "
                 "MASTER_ADDR/MASTER_PORT)");
  cmd.add_option(
      "--bind", f.bind,
      "gloo: address to bind (default: CCLAB_BIND, TF_CONFIG's host, else the hostname)");
  cmd.add_option("--timeout-ms", f.timeout_ms, "Timeout of every collective wait, in ms")
      ->capture_default_str();
  cmd.add_option(
      "--data", f.data,
      "Data directory: record files or MNIST IDX; generated there when missing or empty");
  cmd.add_option("--make-data", f.make_data,
                 "Write the built-in dataset (8 record files + eval.rec) into DIR and exit");
  cmd.add_option("--epochs", c.epochs, "Epochs")->capture_default_str();
  cmd.add_option("--per-replica-batch", c.per_replica_batch,
                 "Batch per replica (global batch = this x replicas)")
      ->capture_default_str();
  cmd.add_option("--lr", c.learning_rate, "Learning rate")->capture_default_str();
  cmd.add_option("--optimizer", f.optimizer, "adam or sgd")->capture_default_str();
  cmd.add_option("--hidden", f.hidden, "Hidden layer sizes, comma-separated")
      ->capture_default_str();
  cmd.add_option("--shard-policy", f.shard_policy,
                 "off, file, data or auto (TensorFlow's AutoShardPolicy)")
      ->capture_default_str();
  cmd.add_option("--seed", c.seed, "Seed of initialisation and shuffling")->capture_default_str();
  cmd.add_option("--model-dir", f.model_dir,
                 "Where the chief saves the final model (workers: DIR/workertemp_<id>)");
  cmd.add_option("--backup-dir", f.backup_dir,
                 "BackupAndRestore directory: resume from its newest good backup");
  cmd.add_option("--save-every", c.save_every, "Steps between backups (0: every epoch)")
      ->capture_default_str();
  cmd.add_option("--keep", c.keep, "Checkpoints kept per directory")->capture_default_str();
  cmd.add_option("--bucket-mb", f.bucket_mb, "Gradient bucket size in MiB")->capture_default_str();
  cmd.add_option("--algo", f.algo,
                 "All-reduce algorithm for the buckets (" + coll::algorithm_names() + ")")
      ->capture_default_str();
  cmd.add_flag("--no-overlap", f.no_overlap,
               "All-reduce the buckets after backward, not during it");
  cmd.add_flag("--no-check-replicas", f.no_check, "Skip the per-step replica hash comparison");
  cmd.add_option("--max-steps", c.max_steps, "Stop after this many steps (0: all epochs)")
      ->capture_default_str();
  cmd.add_flag(
      "--bench", f.bench,
      "Benchmark: steps/s and communication share for 1, 2, 4 workers, with and without overlap");
}

// Turns the string flags into the config; InvalidArgument names the flag.
void finish_config(TrainFlags& f) {
  TrainConfig& c = f.config;
  c.data_dir = f.data;
  c.model_dir = f.model_dir;
  c.backup_dir = f.backup_dir;
  c.hidden = parse_hidden(f.hidden);
  c.shard_policy = parse_shard_policy(f.shard_policy);
  c.optimizer = parse_optimizer(f.optimizer);
  if (f.algo != "auto") c.strategy.algo.algo = coll::parse_algorithm(f.algo, "--algo");
  if (!(f.bucket_mb > 0))
    throw InvalidArgument(fmt::format("--bucket-mb: must be positive (got {})", f.bucket_mb));
  c.strategy.bucket_bytes =
      std::max<std::size_t>(sizeof(float), std::size_t(f.bucket_mb * (1 << 20)));
  c.strategy.overlap = !f.no_overlap;
  c.check_replicas = !f.no_check;
  if (f.timeout_ms < 1)
    throw InvalidArgument(fmt::format("--timeout-ms: must be positive (got {})", f.timeout_ms));
  if (f.ranks < 1 || f.ranks > coll::kThreadsMaxRanks)
    throw InvalidArgument(
        fmt::format("--ranks: must be 1 to {} (got {})", coll::kThreadsMaxRanks, f.ranks));
  if (f.data.empty() && !f.bench)
    throw InvalidArgument(
        "--data: required (a directory; `cclab train --make-data DIR` writes one)");
  validate_train_config(c);  // before the data is generated or a worker starts
}

void print_final(const TrainResult& r) { std::cout << final_line(r) << std::endl; }

void run_threads(const TrainFlags& f) {
  const auto timeout = std::chrono::milliseconds(f.timeout_ms);
  TrainConfig config = f.config;
  const std::vector<int> bench_workers{1, 2, 4};
  config.replicas_on_host = f.bench ? bench_workers.back() : f.ranks;
  require_model_memory(config);
  if (f.bench) {
    const WorldRunner run = [&](int workers, const std::function<void(coll::Communicator&)>& fn) {
      coll::ThreadsWorld(workers, coll::ThreadsOptions{timeout}).run(fn);
    };
    return run_bench(config, "threads", bench_workers, run, &std::cout);
  }
  coll::ThreadsWorld world(f.ranks, coll::ThreadsOptions{timeout});
  TrainResult chief;
  std::mutex mu;
  world.run([&](coll::Communicator& comm) {
    auto r = train_worker(comm, config, TaskInfo{"worker", comm.rank()}, &std::cout);
    if (comm.rank() == 0) {
      std::lock_guard lock(mu);
      chief = std::move(r);
    }
  });
  print_final(chief);
}

#ifdef CCLAB_HAVE_GLOO
// The same path as `cclab bench --backend gloo`: identity and rendezvous from
// the environment conventions, one rank per process.
void run_gloo(const TrainFlags& f) {
  const auto env = coll::process_env();
  const auto id = coll::identity_from_env(env);
  if (!id)
    throw InvalidArgument(
        "--backend gloo: no rank identity in the environment (set TF_CONFIG, or RANK and "
        "WORLD_SIZE, or start the workers with `cclab launch -n N -- cclab train ...` or mpirun)");
  const auto rendezvous = coll::rendezvous_from(f.rendezvous, env);
  if (!rendezvous)
    throw InvalidArgument(
        "--rendezvous: not given and neither CCLAB_RENDEZVOUS nor MASTER_ADDR/MASTER_PORT is set "
        "(allowed: file:DIR, redis://host:port)");
  coll::GlooOptions g;
  g.rank = id->rank;
  g.world_size = id->world_size;
  g.rendezvous = *rendezvous;
  g.prefix = fmt::format("cclab/{}/train", env("CCLAB_RUN_ID").value_or("run"));
  g.host = !f.bind.empty() ? f.bind : env("CCLAB_BIND").value_or(id->host);
  g.host_name = id->host;  // groups for hier and auto: TF_CONFIG's hosts, else the hostname
  g.timeout = std::chrono::milliseconds(f.timeout_ms);
  // Before rendezvous, so that no rank of this job is generating the data yet.
  TrainConfig config = f.config;
  config.replicas_on_host = id->local_world_size;
  require_model_memory(config);
  auto comm = coll::make_gloo_communicator(g);
  if (f.bench) {
    if (f.config.data_dir.empty())
      throw InvalidArgument("--data: required with --backend gloo --bench (a shared directory)");
    const WorldRunner run = [&](int, const std::function<void(coll::Communicator&)>& fn) {
      fn(*comm);
    };
    return run_bench(config, "gloo", {comm->size()}, run, comm->rank() == 0 ? &std::cout : nullptr);
  }
  const auto r = train_worker(*comm, config, task_from_env(env, id->rank), &std::cout);
  if (comm->rank() == 0) print_final(r);
}
#endif

void run(TrainFlags& f) {
  if (!f.make_data.empty()) {
    GenerateOptions g;
    g.seed = f.config.seed;
    try {
      make_dataset(f.make_data, g);
    } catch (const std::filesystem::filesystem_error& e) {
      throw IoError(
          fmt::format("--make-data: cannot write '{}': {}", f.make_data, e.code().message()));
    }
    std::cout << fmt::format("wrote {} training record files and eval.rec to {}\n", g.files,
                             f.make_data);
    return;
  }
  finish_config(f);
  if (f.backend == "auto")
    f.backend = coll::identity_from_env(coll::process_env()) ? "gloo" : "threads";
  if (f.backend == "threads") return run_threads(f);
#ifdef CCLAB_HAVE_GLOO
  if (f.backend == "gloo") return run_gloo(f);
  throw InvalidArgument(
      fmt::format("--backend: unknown backend '{}' (allowed: auto, threads, gloo)", f.backend));
#else
  throw InvalidArgument(fmt::format(
      "--backend: unknown backend '{}' (allowed: auto, threads; gloo is not built in)", f.backend));
#endif
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  auto* cmd = app.add_subcommand("train", "Multi-worker mirrored data-parallel training of an MLP");
  add_flags(*cmd, *flags);
  cmd->callback([flags] { run(*flags); });
}

}  // namespace cclab::train
