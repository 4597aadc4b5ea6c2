// Chrome / Perfetto trace of a simulation (the JSON "traceEvents" format,
// timestamps in microseconds): one track per rank with a slice per step, from
// its issue to its completion, one counter track per link carrying
// traffic, its utilisation (sum of flow rates / bandwidth) each time it
// changes, and, with a host overhead, a track per rank's host with a slice
// per message.
//
// Events go to the stream as they happen, so memory holds only the steps
// under way: a large run's trace is gigabytes of JSON, and building it in
// memory first (a document, then its text) took tens of gigabytes. A
// TraceFilter keeps a few ranks, a time window, or both (a 512-rank `hier/hd`
// at 64 MiB is 1.4 GB whole).
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cclab/collectives/schedule.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

// What a trace keeps. Slices are kept whole when they overlap [from, until];
// a link counter is written from `from` (its value then) to `until`.
struct TraceFilter {
  std::vector<bool> ranks;  // by rank; empty: every rank, and every link
  Time from = 0;
  Time until = std::numeric_limits<Time>::max();
  std::string description;  // added to the process names, e.g. "--trace-ranks 0-7"

  bool keeps(int rank) const {
    return ranks.empty() || (static_cast<std::size_t>(rank) < ranks.size() && ranks[rank]);
  }
  bool overlaps(Time start, Time end) const { return end >= from && start <= until; }
};

// --trace-ranks: "0-7,64" (ranks and inclusive ranges) of `ranks` ranks.
// Throws InvalidArgument naming `field` and the part at fault.
std::vector<bool> parse_rank_list(std::string_view text, int ranks, std::string_view field);
// --trace-window: "FROM:UNTIL" in latency spellings ("10us:2ms"); either side
// may be empty (from the start, to the end). Sets filter.from and .until.
void parse_time_window(std::string_view text, std::string_view field, TraceFilter& filter);

class TraceWriter {
 public:
  // Writes the document's opening to `out` now; `out` must outlive the writer.
  TraceWriter(const Topology& topology, std::ostream& out, TraceFilter filter = {});
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void step_issued(int rank, std::int64_t step, const coll::Step& s, Time now);
  void step_done(int rank, std::int64_t step, Time now);
  // The rank's host spends [start, end) on a message to or from `peer`.
  void host_busy(int rank, int peer, bool sending, Time start, Time end);
  // A message from `src` to `dst` starts crossing `links`: with a rank
  // filter, the links the kept ranks' messages cross are the ones traced.
  void flow_started(int src, int dst, std::span<const LinkId> links, Time now);
  // The total rate of the flows on a link is `bytes_per_s` from `now`.
  void link_rate(LinkId link, double bytes_per_s, Time now);

  // Writes the document's end. Whether everything reached the stream, its
  // state tells.
  void finish();
  std::uint64_t events() const { return events_; }

 private:
  struct Open {  // a step under way
    std::int64_t step = 0;
    Time start = 0;
    coll::StepKind kind = coll::StepKind::kFence;
    std::int32_t peer = -1;
    const char* phase = "";
  };
  void write_process_names();
  void reach(Time now);  // opens the window once `now` is in it
  void counter(LinkId link, Time ts);
  void slice_head(int pid, int tid, Time start, Time duration);
  void end_event();
  const std::string& link_name(LinkId link);

  const Topology& topo_;
  std::ostream& out_;
  TraceFilter filter_;
  fmt::memory_buffer buf_;               // written to out_ in large pieces
  std::vector<std::vector<Open>> open_;  // by rank (a handful each)
  std::vector<double> rate_;             // by link: bytes/s, as last told
  std::vector<bool> traced_;             // by link
  std::vector<std::string> names_;       // by link: a JSON string, once needed
  bool window_open_ = false;
  std::uint64_t events_ = 0;
};

}  // namespace cclab::sim
