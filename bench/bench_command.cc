#include "bench_command.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backend.h"
#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/error.h"
#include "mpi_peer.h"
#include "report.h"
#include "sweep.h"

namespace cclab::bench {
namespace {

void add_run_options(CLI::App& cmd, BenchFlags& f) {
  cmd.add_option("--backend", f.backend, "Where ranks run (allowed: " + backend_names() + ")")
      ->capture_default_str();
  cmd.add_option("--ranks", f.ranks,
                 "Number of ranks (process backends: the world size from the environment)")
      ->capture_default_str();
  cmd.add_option("--rendezvous", f.rendezvous,
                 "Process backends: file:DIR or redis://host:port (default: CCLAB_RENDEZVOUS, "
                 "else MASTER_ADDR/MASTER_PORT)");
  cmd.add_option("--bind", f.bind,
                 "Process backends: address to bind (default: CCLAB_BIND, TF_CONFIG's host, "
                 "else the hostname)");
  cmd.add_option("--transport", f.transport,
                 "--backend gloo: the pairs' transport, " + transport_names() +
                     " (default: CCLAB_TRANSPORT, else tcp)");
  cmd.add_option("--eager", f.eager,
                 "--backend gloo: messages up to this size (e.g. 64K; 0: none) skip Gloo's "
                 "rendezvous, copied into the receiver's ring (default: 64K)");
  cmd.add_option("--loop-thread", f.loop_thread,
                 "--backend gloo: scheduling policy of Gloo's TCP loop thread, batch (no wake-up "
                 "preemption; default) or normal (Gloo's own)");
  cmd.add_option("--connections", f.connections,
                 "--backend gloo: shared (ours on one set of TCP connections, the peers on "
                 "another, neither the world's; default) or row (every algorithm and peer on a set "
                 "of its own)");
  cmd.add_option("--timeout-ms", f.timeout_ms, "Timeout of every wait, in ms")
      ->capture_default_str();
}

void add_collective_options(CLI::App& cmd, BenchFlags& f) {
  cmd.add_option("--coll", f.coll, "allreduce, reducescatter, allgather or broadcast")
      ->capture_default_str();
  cmd.add_option("--algo", f.algo,
                 "Comma-separated algorithms: ours, all (= ours), and with --backend gloo "
                 "Gloo's own (gloo-ring, gloo-ring-chunked, gloo-hd, gloo-bcube, gloo-fn-ring, "
                 "gloo-fn-bcube), a reference row (stream: an all-reduce's traffic per rank as one "
                 "Gloo transfer each way, nothing reduced) and, under mpirun, Open MPI's "
                 "MPI_Allreduce (mpi), with --backend nccl NCCL's all-reduce (nccl, nccl-ring, "
                 "nccl-tree: NCCL_ALGO pinned)")
      ->capture_default_str();
  cmd.add_option("-d,--dtype", f.dtype, "Element type (" + coll::dtype_names() + ")")
      ->capture_default_str();
  cmd.add_option("-o,--op", f.op, "Reduction (" + coll::op_names() + ")")->capture_default_str();
  cmd.add_option("-r,--root", f.root, "Root rank of broadcast")->capture_default_str();
  cmd.add_flag("--inplace", f.in_place, "Run in place (NCCL's buffer conventions)");
  cmd.add_option("--chunks", f.chunks,
                 "Pipeline chunks per transfer; a comma list runs each of ours with each "
                 "(rows ring, ring:4); auto runs once, with the first, and 1 leaves the count to "
                 "the selector")
      ->capture_default_str();
  cmd.add_option("--group-size", f.group_size,
                 "hier: ranks per group (0: default); hier takes levels, 2x2: groups "
                 "of 2 ranks, then of 2 groups")
      ->capture_default_str();
  cmd.add_flag(
      "--rotate-levels", f.rotate_levels,
      "hier: a part of the vector (of each block) per level (the top one too), each starting "
      "from its own, all at once");
  cmd.add_option(
         "--inner", f.inner,
         "hier: the algorithm between groups (all-reduce: ring, tree, hd, direct, biring (also "
         "inside them); "
         "reduce-scatter and all-gather: ring, hd with a power-of-two number of "
         "groups, or biring, also inside them); a comma list (or all: each the collective's hier "
         "runs) runs hier with each")
      ->capture_default_str();
}

void add_sweep_options(CLI::App& cmd, BenchFlags& f) {
  cmd.add_option("-b,--minbytes", f.min_bytes, "Smallest size, bytes (K, M, G suffixes)")
      ->capture_default_str();
  cmd.add_option("-e,--maxbytes", f.max_bytes, "Largest size, bytes (K, M, G suffixes)")
      ->capture_default_str();
  cmd.add_option("-f,--stepfactor", f.step_factor, "Size multiplier between rows (>= 2)")
      ->capture_default_str();
  cmd.add_option("-n,--iters", f.iters, "Timed iterations per row")->capture_default_str();
  cmd.add_option("-w,--warmup", f.warmup, "Untimed iterations per row")->capture_default_str();
  cmd.add_option("--batch", f.batch,
                 "Calls per timed iteration, back to back after one barrier; its time is their "
                 "mean (nccl-tests style: spreads the barrier's exit skew over the batch)")
      ->capture_default_str();
  cmd.add_flag("--interleave", f.interleave,
               "Time a size's rows in turn, one call of each per iteration, after warming them all "
               "up (a slow phase of a shared machine then falls on every row alike)");
  cmd.add_option("--timing", f.timing,
                 "A call's time: rank (the longest of the ranks' own times, each from its own "
                 "barrier exit) or span (from the last rank's start to the last rank's end: no "
                 "barrier exit skew; ranks on one kernel, else rank)")
      ->capture_default_str();
  cmd.add_option("-c,--check", f.check, "Check results (1) or not (0)")->capture_default_str();
  cmd.add_option("--json", f.json_path, "Also write the results to this JSON file");
  cmd.add_option("--tune", f.tune_path,
                 "Write a tuning table (our fastest algorithm per measured size, for --coll's "
                 "collective at this rank count) to this file, for CCLAB_TUNING");
  cmd.add_flag("--compare", f.compare,
               "A line per size: our best algorithm vs the best peer (needs a peer in --algo; "
               "with stream in --algo, both also as multiples of the stream's time)");
  cmd.add_flag("--pin", f.pin, "Pin rank r to core r % cores (sched_setaffinity)");
}

// The sweep on a started backend; the exit status.
int run_on(const BenchConfig& config, Backend& backend, std::ostream& out, std::ostream& err) {
  if (!backend.reports()) {
    run_sweep(config, backend);  // rank 0 prints; the others only take part
    return 0;
  }
  if (!config.json_path.empty()) require_writable(config.json_path, "--json");
  if (!config.tune_path.empty()) require_writable(config.tune_path, "--tune");
  // Measured by rank 0 while the other ranks wait in a barrier, after they
  // have written their inputs (out of place up to 2 x 128 MiB each, which
  // made the start's ping-pong read 4 ms) and after the last size.
  // Each row is printed as soon as rank 0 has it, as nccl-tests does: a long
  // sweep shows its progress, and one that fails keeps the rows it measured.
  print_table_head(out, config);
  out.flush();
  SpeedAround speed;
  const auto rows = run_sweep(
      config, backend,
      [&speed](bool at_start) { (at_start ? speed.start : speed.end) = measure_machine_speed(); },
      [&](const SweepRow& row) {
        print_row(out, config, row);
        out.flush();
      });
  print_table_tail(out, config, rows, speed);
  out.flush();
  if (!config.json_path.empty()) write_json(config.json_path, to_json(config, rows, speed));
  const auto wrong = total_wrong(rows);
  if (!config.tune_path.empty() && wrong == 0) write_tuning_table(out, config, rows);
  if (wrong == 0) return 0;
  err << fmt::format("cclab: bench: {} wrong elements (see #wrong)\n", wrong);
  return 1;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench",
                                 "Sweep sizes and algorithms of one collective (nccl-tests style)");
  // A repeated flag overrides the earlier one, so scripts can append overrides.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto flags = std::make_shared<BenchFlags>();
  add_run_options(*cmd, *flags);
  add_collective_options(*cmd, *flags);
  add_sweep_options(*cmd, *flags);
  cmd->callback([flags] {
    // A process backend's world size comes from the environment.
    if (auto world = process_world_size(flags->backend)) flags->ranks = *world;
    const int status = run_bench(resolve(*flags), std::cout, std::cerr, *flags);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

int run_bench(BenchConfig config, std::ostream& out, std::ostream& err, const BenchFlags& flags) {
  BackendOptions options;
  options.ranks = config.ranks;
  options.timeout = config.timeout;
  options.rendezvous = flags.rendezvous;
  options.bind = flags.bind;
  options.transport = flags.transport;
  options.eager_bytes = config.eager_bytes;
  options.batch_loop_thread = config.batch_loop_thread;
  options.pin = config.pin;
  auto backend = make_backend(config.backend, options);
  // Without --group-size, `hier` groups the ranks that share a host.
  if (config.group_size == 0) config.group_size = backend->host_group_size();
  config.placement = backend->note();
  if (backend->ranks() != config.ranks)  // e.g. NCCL: one rank per GPU, fewer than asked
    err << "cclab: bench: " << config.placement << '\n';
  config.ranks = backend->ranks();
  require_sweep_memory(config, backend->ranks_on_host(), backend->shares_memory(),
                       backend->memory(backend->rank())->host_visible());
  if (config.timing == Timing::kSpan && !backend->shares_clock()) {
    config.timing = Timing::kRank;
    if (backend->reports())
      err << "cclab: bench: --timing span: the ranks run on different kernels, whose clocks do "
             "not compare; timing rank instead\n";
  }
  // MPI starts only for the mpi peer, and is finalized when this returns.
  std::optional<MpiSession> mpi;
  if (std::find(config.peers.begin(), config.peers.end(), kMpiPeer) != config.peers.end()) {
    mpi.emplace(coll::process_env(), backend->rank(), backend->ranks());
    config.mpi_unavailable = mpi->unavailable();
  }
  return run_on(config, *backend, out, err);
}

}  // namespace cclab::bench
