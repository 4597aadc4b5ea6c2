// Configuration of `cclab bench`: the flags as the command line gives them,
// the validated configuration they resolve to, and the size sweep it implies
// (nccl-tests rules: geometric sizes, rounded down to whole elements).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/schedule.h"
#include "cclab/collectives/types.h"

namespace cclab::bench {

// The flags of `cclab bench`, unparsed; resolve() is the one place that checks them.
struct BenchFlags {
  std::string backend = "threads";
  int ranks = 2;
  std::string coll = "allreduce";
  std::string algo = "all";  // comma list of ours, "all" (ours) and peers (gloo-*, mpi)
  std::string min_bytes = "1K";
  std::string max_bytes = "64M";
  int step_factor = 4;
  std::string dtype = "f32";
  std::string op = "sum";
  int root = 0;
  int iters = 20;
  int warmup = 5;
  int batch = 1;
  bool interleave = false;
  std::string timing = "rank";  // rank or span (see Timing)
  int check = 1;
  bool in_place = false;
  std::string chunks = "1";      // a comma list: each of our algorithms runs with each
  std::string group_size = "0";  // 0: the library's default_group_size(ranks); or levels, 2x2
  bool rotate_levels = false;    // hier all-reduce: a part of the vector per level
  std::string inner = "ring";
  int timeout_ms = 30000;
  std::string json_path;
  std::string tune_path;    // a tuning table from our measured rows (see selector.h)
  std::string rendezvous;   // process backends
  std::string bind;         // process backends
  std::string transport;    // gloo: tcp or ibverbs; empty: CCLAB_TRANSPORT, else tcp
  std::string eager;        // gloo: eager limit in bytes (units allowed); empty: the default
  std::string loop_thread;  // gloo: batch or normal; empty: the default
  std::string connections;  // gloo: shared or row; empty: shared
  bool compare = false;     // a summary line per size: our best vs the best peer
  bool pin = false;         // rank r on core r % cores
};

// What a timed call's time is (--timing). Each rank starts its call when it
// leaves the barrier before it, and leaves that barrier at its own moment.
//  - kRank: the longest of the ranks' own times, each from its own start (a
//    rank that left the barrier early waits for the late one inside its call);
//  - kSpan: from the last rank's start to the last rank's end, which leaves
//    the barrier's exit skew out. It needs every rank to read one clock (one
//    kernel's CLOCK_MONOTONIC); the sweep falls back to kRank otherwise.
enum class Timing { kRank, kSpan };
std::string_view timing_name(Timing t);

// A validated sweep configuration.
struct BenchConfig {
  std::string backend = "threads";
  int ranks = 2;
  coll::CollectiveKind coll = coll::CollectiveKind::kAllReduce;
  std::vector<coll::Algorithm> algos;  // ours
  std::vector<std::string> peers;      // other implementations (see peers.h)
  std::uint64_t min_bytes = 1024;
  std::uint64_t max_bytes = 64 << 20;
  std::uint64_t step_factor = 4;
  coll::DataType dtype = coll::DataType::kF32;
  coll::ReduceOp op = coll::ReduceOp::kSum;
  int root = 0;
  int iters = 20;
  int warmup = 5;
  int batch = 1;            // calls per timed iteration
  bool interleave = false;  // a size's rows timed in turn, iteration by iteration
  Timing timing = Timing::kRank;
  bool check = true;
  bool in_place = false;
  std::vector<int> chunks = {1};  // each of ours (but auto) runs with each, in this order
  int group_size = 0;
  std::vector<int> upper_groups;  // hier all-reduce's levels above the groups (--group-size 2x2)
  bool rotate_levels = false;     // --rotate-levels
  // hier's inner algorithms (--inner): hier runs with each, the others once
  std::vector<coll::Algorithm> inners = {coll::Algorithm::kRing};
  // --inner named `all`: a hier row whose groups refuse its inner algorithm
  // (coll::hier_inner_refusal) is a skipped row rather than an error.
  bool inner_all = false;
  std::chrono::milliseconds timeout{30000};
  std::string json_path;
  std::string tune_path;
  bool compare = false;
  bool pin = false;
  std::optional<std::uint64_t> eager_bytes;  // gloo: --eager; none: GlooOptions' default
  std::optional<bool> batch_loop_thread;     // gloo: --loop-thread; none: GlooOptions' default
  bool row_connections = false;              // gloo: --connections row (see sweep.cc)
  std::string placement;  // the backend's note on where ranks run (GPU backends), else ""
  // Why the mpi peer cannot run in this process (empty: it can); run_bench
  // fills it from its MpiSession (see mpi_peer.h) before the sweep.
  std::string mpi_unavailable;

  // The algorithm choice for one row of the sweep.
  coll::AlgoConfig algo_config(coll::Algorithm algo, int chunks, coll::Algorithm inner) const;
  // Our rows of each size, in order: every algorithm with every chunk count
  // (hier with every inner algorithm too), `auto` once (with the first: its choice keeps them
  // unless a table or CCLAB_ALGO gives its own).
  std::vector<coll::AlgoConfig> ours() const;
};

// Parses and validates every flag; throws InvalidArgument naming the flag and
// what it allows.
BenchConfig resolve(const BenchFlags& flags);

// "64M" -> 67108864: bytes, with an optional K, M or G suffix (powers of 2).
// Why `algo`, a row of ours, cannot run in groups of `group_size` (0: the
// default): hier with an inner algorithm those groups refuse
// (coll::hier_inner_refusal); empty where it runs.
std::string hier_row_skip_reason(const BenchConfig& c, const coll::AlgoConfig& algo,
                                 int group_size);

std::uint64_t parse_size_bytes(std::string_view text, std::string_view flag);

// "ring,tree" or "all" -> algorithms, each checked against the collective.
std::vector<coll::Algorithm> parse_algo_list(std::string_view text, coll::CollectiveKind coll);
// "all,gloo-ring" -> c.algos (ours) and c.peers; needs c.backend, coll, dtype, op.
void parse_algo_choice(std::string_view text, BenchConfig& c);

// One size of the sweep. For reducescatter and allgather both columns describe
// the larger buffer (the reduce-scatter input, the all-gather output): `count`
// is its total element count, a multiple of the rank count.
struct SizePoint {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
};

// min, min*f, min*f^2, ... up to max, each rounded down to whole elements.
std::vector<SizePoint> sweep_sizes(const BenchConfig& config);

// The per-rank shape of one collective call of `total_count` elements (see SizePoint).
coll::CollectiveShape shape_for(const BenchConfig& config, std::uint64_t total_count);

using coll::bus_factor;  // nccl-tests' bus factor (schedule.h)

}  // namespace cclab::bench
