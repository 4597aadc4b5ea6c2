// The nccl-tests style sweep of `cclab bench`: for every size and algorithm,
// an optional correctness check, `warmup` untimed and `iters` timed calls.
//
// All ranks run in one backend session. Each rank allocates its buffers once,
// at the largest size, touches them once and reuses them for every row (first
// touch of fresh memory is slow enough to distort small sizes). A timed call
// starts after a barrier; each rank times itself with steady_clock, and the
// call's time is the maximum over ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "cclab/collectives/selector.h"
#include "options.h"

namespace cclab::bench {

// One row of the result table (see SizePoint for bytes and count).
struct SweepRow {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  coll::Algorithm algo = coll::Algorithm::kRing;   // ours, when peer is empty
  int chunks = 1;                                  // ours: the pipeline chunks asked for
  coll::Algorithm inner = coll::Algorithm::kRing;  // ours: hier's inner algorithm
  coll::Selection chosen;  // for `auto`: what the selector chose at this size, and why
  std::string peer;        // a peer's name (see peers.h)
  std::string skipped;     // why the row did not run
  double time_us_min = 0;
  double time_us_median = 0;
  double time_us_max = 0;
  int iters = 0;
  double algbw_gbps = 0;  // bytes / median time, 1e9 bytes/s
  double busbw_gbps = 0;  // algbw * bus_factor
  // Host CPU time and context switches per call, summed over ranks, medians
  // over the timed iterations (see HostUse).
  double cpu_us_median = 0;
  double csw_median = 0;
  std::optional<std::uint64_t> wrong;  // empty when the check is off
  // Per timed iteration, in order. With --interleave, iteration i of every
  // row of a size ran in the same round, so rows pair up call by call.
  std::vector<double> times_us;
};

// The algorithm column: ours by name with its chunks ("ring", "ring:4",
// "hier/tree"; see
// coll::candidate_label), or the peer's name.
std::string algo_label(const SweepRow& row);

// Runs on rank 0 while every other rank waits in a barrier: once before the
// first size, after every rank has written its inputs (at_start), and once
// after the last. For measurements of the machine that the sweep's own work
// must not disturb (machine_speed.h).
using QuietHook = std::function<void(bool at_start)>;
// Called on rank 0 with each row as soon as it is complete (its size's others
// may still be timing), so that a long sweep shows its rows as they come.
using RowHook = std::function<void(const SweepRow&)>;

// What one rank's buffers take for the sweep's largest call, in bytes: send
// (out of place only) and receive storage in the backend's memory, and with
// device memory the host copies that inputs and outputs travel through.
struct RankBufferBytes {
  std::uint64_t send = 0, recv = 0;         // in the backend's memory
  std::uint64_t host_in = 0, host_out = 0;  // device memory only: host staging
  std::uint64_t host(bool host_visible) const {
    return host_visible ? send + recv : host_in + host_out;
  }
};
RankBufferBytes rank_buffer_bytes(const BenchConfig& config, bool host_visible);

// Refuses a sweep whose buffers alone (`ranks_here` ranks keep theirs in this
// machine's memory) cannot fit it, naming -e/--maxbytes, or whose timings
// cannot (kept per process: one, or one per rank here), naming -n/--iters.
void require_sweep_memory(const BenchConfig& config, int ranks_here, bool one_process,
                          bool host_visible);

// Runs the whole sweep in one backend.run() and returns the rows, size-major.
// Every rank of a process backend calls it; `quiet` matters on rank 0 only.
std::vector<SweepRow> run_sweep(const BenchConfig& config, Backend& backend,
                                const QuietHook& quiet = {}, const RowHook& on_row = {});

// Fills min/median/max and the bandwidths of `row` from per-call times.
void summarize(std::vector<double> times_us, const BenchConfig& config, SweepRow& row);

// --interleave: the order in which timed iteration `iteration` runs a size's
// `rows` rows. A Williams design (a balanced Latin square): every row takes
// every position, and every row directly follows every other equally often,
// over each `rows` iterations (2 x `rows` when odd). With one fixed order a
// row always ran right after the same one, and paid for what it left behind:
// after gloo::allreduce's bcube, which maps and unmaps its 32 MiB scratch per
// call, the next row took 1.20x its time at 32 MiB (2 ranks, AMD EPYC VM).
std::vector<int> interleaved_order(int rows, int iteration);

// The median of `values` (0 when empty).
double median(std::vector<double> values);

// The median of the ratios num[i] / den[i] of paired samples, with a
// distribution-free confidence interval for it: the k-th smallest and k-th
// largest ratio, k the largest with P(Binomial(n, 1/2) < k) <= 2.5% (so
// coverage >= 95%; for n = 20, the 6th and the 15th). No interval (has_interval
// false) below 6 pairs, where even the extremes cover less than 95%.
struct PairedRatio {
  double median = 0, low = 0, high = 0;
  double coverage = 0;  // of [low, high]: 1 - 2 P(Binomial(n, 1/2) < k)
  bool has_interval = false;
};
PairedRatio paired_ratio(const std::vector<double>& num, const std::vector<double>& den);

// What has been used so far on the host: CPU time and context switches, both
// voluntary (a thread blocked: a wake-up to come) and involuntary (preempted).
// Differences around a call give its cost on the host, which the wall time
// hides when threads wait for each other or for the kernel. A rank that is a
// process counts all its threads (Gloo's loop thread and the executor's
// waiters among them); a rank that is a thread of a shared process counts
// its own thread only, so the ranks' sum leaves out the others' barriers.
struct HostUse {
  double cpu_us = 0;
  double csw = 0;
  static HostUse now(bool whole_process);
  HostUse operator-(const HostUse& earlier) const {
    return {cpu_us - earlier.cpu_us, csw - earlier.csw};
  }
};

}  // namespace cclab::bench
