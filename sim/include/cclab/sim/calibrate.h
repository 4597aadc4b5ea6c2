// Calibration: the simulator's link model fitted to measured collective
// times (a `cclab bench` record of any --coll), and its predictions checked
// against measurements, of the same or another collective.
//
// The model is a `switch` topology: every rank an endpoint with one link up
// and one down (latency `lat` each, so a message pays 2 lat once, then moves
// at `bw`), reductions at `reduce` bytes/s on each endpoint, and a host
// overhead `o` per message at each end, one message at a time per rank
// (simulator.h). Every simulated time is then a sum a*lat + b/bw + c/reduce
// + d*o whose coefficients the schedule fixes (a: link latencies on the
// critical path; b, c: bytes moved and reduced on it; d: message ends a host
// handles on it). The fit simulates each measured row four times, with one
// parameter at a time and the others out of the way, to read off its
// coefficients, and solves the weighted least-squares problem for
// (lat, 1/bw, 1/reduce, o) that minimises the relative errors over the rows
// of every record it is given (of one backend and machine, any rank counts
// and collectives); a parameter that would come out negative, or that the
// rows cannot tell from another, is dropped (0 latency, free reductions, no
// overhead). At 2 ranks every step is one message each way, so o is only
// fitted with a record of 3 or more ranks.
//
// Where the record names its machine's cores, the ranks are taken to share
// them: the switch gets a fabric of cores x bw (switch:...,fabric=), so that
// more ranks than cores share what the cores copy, while up to one rank a
// core each moves at bw; and the hosts share that many CPUs for their
// message overheads (switch:...,cpus=), so that more ranks than cores wait
// for each other. A gloo record's messages up to its eager limit
// (config.eager_bytes, else the executor's default) go eagerly, as the
// executor sends them (switch:...,eager=; simulator.h); every other
// backend's transfers are rendezvous.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cclab/collectives/algorithms.h"

namespace cclab::sim {

// One row of a `cclab bench --json` record: ours, checked, not skipped.
struct MeasuredRow {
  std::uint64_t bytes = 0;
  coll::Algorithm algo = coll::Algorithm::kRing;
  double time_us = 0;  // median
  int chunks = 1;      // the row's own, or (older records) config.chunks
  // hier's inner algorithm: the row's ("hier/tree"), or (older records,
  // whose rows are "hier") config.inner
  coll::Algorithm inner = coll::Algorithm::kRing;
};

struct Measurements {
  std::string source;  // the file, for messages
  std::string backend;
  coll::CollectiveKind coll = coll::CollectiveKind::kAllReduce;
  int root = 0;  // broadcast's
  int ranks = 0;
  int group_size = 0;  // hier's, 0: the default
  std::size_t elem_bytes = 4;
  int cores = 0;                  // machine.cores, 0: not recorded
  std::string cpu_model;          // machine.cpu_model, "": not recorded
  std::uint64_t eager_bytes = 0;  // gloo: the eager limit; 0: rendezvous only
  std::vector<MeasuredRow> rows;
};

// Reads a `cclab bench --json` all-reduce record (peers, auto and skipped rows
// left out); errors name the file and the field.
Measurements load_bench_record(const std::string& path);
Measurements parse_bench_record(const std::string& json_text, const std::string& source);

struct LinkFit {
  double lat_us = 0;              // per link; a message's route pays two
  double bw_Bps = 0;              // bytes per second
  double reduce_Bps = 0;          // 0: reductions are free
  double fabric_Bps = 0;          // cores x bw where the record names its cores, else 0 (none)
  std::string note;               // what the fit had to give up, if anything
  std::uint64_t eager_bytes = 0;  // the first record's, kept for the spec
  double overhead_us = 0;         // per message end; 0: none
  int host_cpus = 0;  // the CPUs the hosts share for it: the record's cores, 0: one a rank
  // Standard errors relative to each value (0.05: +-5%), from the rows'
  // residuals and slopes at the fit; NaN for a parameter not fitted, or
  // with no more rows than parameters.
  double lat_rel_error = NAN, bw_rel_error = NAN, reduce_rel_error = NAN, overhead_rel_error = NAN;
  // The backend moves one pair's messages one after another (gloo: a TCP
  // connection per pair): the spec says pairs=fifo, else pairs=shared
  // (Topology::pair_fifo).
  bool pair_fifo = false;
};

// Whether a backend's messages between two ranks go one after another over
// one connection (gloo's TCP pair), which the model then follows
// (pairs=fifo); others share the links (threads: the receivers copy).
bool one_connection_per_pair(const std::string& backend);

// Fits every row of `records` at once. Throws InvalidArgument when fewer than
// two rows, when the records come from different backends or machines, or
// when no positive bandwidth fits.
LinkFit fit_switch(std::span<const Measurements> records);
inline LinkFit fit_switch(const Measurements& m) { return fit_switch({&m, 1}); }

// "switch:n=4,bw=12345.000MBps,lat=350000ps,reduce=20000.000MBps,fabric=24690.000MBps"
// (and ",eager=65536" where the fit has an eager limit, ",overhead=2000000ps"
// where it has an overhead, with ",cpus=2" where the record named its cores,
// and ",pairs=fifo" or ",pairs=shared" after the fit's pair_fifo)
std::string switch_spec(const LinkFit& fit, int ranks);

// The rows of `m` with the time the simulator predicts for each on `spec` (a
// generator spec or a JSON file, with at least the record's ranks as
// endpoints), with the record's eager limit and pair ordering (its backend's
// protocol) in place of the spec's.
struct Comparison {
  MeasuredRow row;
  double predicted_us = 0;
};
std::vector<Comparison> predict_rows(const Measurements& m, const std::string& spec);

// Per size of `rows`, whether the prediction finds the measured fastest, and
// what following it would cost: the measured time of the predicted fastest
// over the measured fastest's (1: no loss). Where the model ties several
// (within 1e-6: at 2 ranks ring, tree, hd and hier move and reduce the same
// bytes), any may be chosen, so the slowest of them counts.
struct SizeAgreement {
  std::uint64_t bytes = 0;
  std::string measured;                // the measured fastest (a candidate label)
  std::vector<std::string> predicted;  // the predicted fastest, ties included
  bool agrees = false;                 // measured is among predicted
  double cost = 1;
};
std::vector<SizeAgreement> agreement(const std::vector<Comparison>& rows);

}  // namespace cclab::sim
