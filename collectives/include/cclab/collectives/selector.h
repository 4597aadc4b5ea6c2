// How `auto` becomes an algorithm: a forced choice (CCLAB_ALGO), else the
// tuning table made (by `cclab sim --tune` or `cclab bench --tune`) for the
// call's collective and rank count (CCLAB_TUNING, several separated by ':'), else the
// built-in size rule. Every choice says why (Selection::reason).
//
// Every rank of a communicator must see the same CCLAB_ALGO and the same
// table, as with NCCL_ALGO: ranks that choose differently run schedules that
// do not match, and the call ends in its timeout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/schedule.h"

namespace cclab::coll {

// One candidate's predicted time at a band's first size.
struct Prediction {
  std::string candidate;  // "ring", "hd:4" (chunks after the colon)
  double time_us = 0;
};

// Calls whose size (table_bytes) is from min_bytes up to the next band's
// min_bytes run `algo` with `chunks`; `predicted` says why (fastest first).
struct TuningBand {
  std::uint64_t min_bytes = 0;
  Algorithm algo = Algorithm::kRing;
  int chunks = 1;
  Algorithm inner = Algorithm::kRing;  // hier: between groups (JSON: "inner")
  std::uint64_t predicted_at = 0;      // the size the predictions are for
  std::vector<Prediction> predicted;
};

// A size-banded choice for one collective on one topology and rank count.
struct TuningTable {
  std::string source;                     // where it was read from, for messages
  std::string tool = "cclab sim --tune";  // what made it (cclab bench --tune: measured)
  CollectiveKind collective = CollectiveKind::kAllReduce;
  std::string topology;  // what it was tuned for (a description, not checked)
  int ranks = 0;
  int group_size = 0;             // hier's group size when tuned (0: the default)
  std::vector<int> upper_groups;  // hier's levels when tuned (AlgoConfig's)
  bool rotate_levels = false;     // and whether they ran rotated
  std::vector<TuningBand> bands;  // min_bytes strictly increasing, the first 0

  // The band holding `bytes`; never null for a valid table.
  const TuningBand* band_for(std::uint64_t bytes) const;
};

// The first (fastest) prediction of each algorithm, whatever its chunks.
std::vector<Prediction> fastest_per_algorithm(const std::vector<Prediction>& fastest_first);

// "ring", "ring:4", "hier/tree:4": an algorithm, hier's inner algorithm after
// a slash (the ring unnamed) and its pipeline chunks (1 unnamed).
std::string candidate_label(Algorithm a, int chunks, Algorithm inner = Algorithm::kRing);
std::string candidate_label(const AlgoConfig& c);  // of c's algo, chunks and inner
// Inverse of candidate_label (ALGO[/INNER][:CHUNKS], INNER for hier only);
// throws InvalidArgument naming `what`.
AlgoConfig parse_candidate(const std::string& text, const std::string& what);

// Reads a table from JSON text (the format tuning_table_json writes) or a
// file; errors name `source` and the offending field.
TuningTable parse_tuning_table(const std::string& json_text, const std::string& source);
TuningTable load_tuning_table(const std::string& path);
std::string tuning_table_json(const TuningTable& table);

// The size a table's bands are keyed by: the larger of the call's input and
// output in bytes, as nccl-tests and `cclab bench` give sizes (all-gather's
// whole output, reduce-scatter's whole input).
std::uint64_t table_bytes(const CollectiveShape& shape, std::size_t elem_bytes);

// One candidate timed (or predicted) at one size (table_bytes).
struct TimedCandidate {
  std::uint64_t bytes = 0;
  Algorithm algo = Algorithm::kRing;
  int chunks = 1;
  double time_us = 0;  // a median, where measured
  // Where measured, the spread of the timed calls (25th and 75th
  // percentiles); both 0 for a prediction, which has none.
  double low_us = 0, high_us = 0;
  Algorithm inner = Algorithm::kRing;  // hier's between groups
};

// Bands from candidates timed at several sizes: each size's fastest (on a tie
// the one given first) holds from that size up to the next size whose fastest
// differs, and the first band reaches down to 0 bytes. With spreads, a
// band's choice also holds on where it is not clearly slower than the
// fastest: its low end below the fastest's high end (measured tables would
// otherwise change bands on noise). The table's source, topology, ranks and
// group size are the caller's to fill in.
TuningTable tuning_table_from_times(const std::vector<TimedCandidate>& times);

// A line per band, each starting with `prefix`: where it starts, its choice,
// and the fastest other algorithm where it was timed.
std::string describe_bands(const TuningTable& table, const std::string& prefix);

struct SelectorSettings {
  std::optional<AlgoConfig> forced;  // CCLAB_ALGO
  std::vector<TuningTable> tables;   // CCLAB_TUNING: at most one per collective and rank count

  // The table for `kind` at `ranks`, or null.
  const TuningTable* table_for(CollectiveKind kind, int ranks) const;
};

// CCLAB_ALGO ("hd", "ring:4", "hier/tree") and CCLAB_TUNING (table files separated by ':',
// for different collectives or rank counts), read once per process; a
// malformed value, or two tables for one collective and rank count, throws
// InvalidArgument naming the variable, on this and every later call.
const SelectorSettings& selector_settings_from_env();

struct Selection {
  AlgoConfig config;   // never kAuto
  std::string reason;  // one line: what chose it and, from a table, the runners-up
};

// `requested` with kAuto replaced (other fields kept; chunks, hier's inner
// algorithm and its group size taken from the table when it chooses). A requested algorithm is
// returned as it is: an explicit choice wins over the environment.
Selection select_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                           const AlgoConfig& requested, const SelectorSettings& settings);
Selection select_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                           const AlgoConfig& requested);  // with selector_settings_from_env()

// select_algorithm(shape, elem_bytes, requested).config without writing the
// reason: what make_schedule runs on every auto call.
AlgoConfig resolve_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                             const AlgoConfig& requested);

}  // namespace cclab::coll
