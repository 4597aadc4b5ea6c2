// Chrome / Perfetto trace of a simulation (the JSON "traceEvents" format,
// timestamps in microseconds): one track per rank with a slice per step, from
// its issue to its completion, one counter track per link carrying
// traffic, its utilisation (sum of flow rates / bandwidth) over time, and,
// with a host overhead, a track per rank's host with a slice per message.
//
// Events go to the stream as they happen, so memory holds only the steps
// under way: a large run's trace is gigabytes of JSON, and building it in
// memory first (a document, then its text) took tens of gigabytes.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cclab/collectives/schedule.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

class TraceWriter {
 public:
  // Writes the document's opening to `out` now; `out` must outlive the writer.
  TraceWriter(const Topology& topology, std::ostream& out);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void step_issued(int rank, std::int64_t step, const coll::Step& s, Time now);
  void step_done(int rank, std::int64_t step, Time now);
  // The rank's host spends [start, end) on a message to or from `peer`.
  void host_busy(int rank, int peer, bool sending, Time start, Time end);
  // The total rate of the flows on a link changed to `bytes_per_s`.
  void link_rate(LinkId link, double bytes_per_s, Time now);

  // Writes the document's end. Whether everything reached the stream, its
  // state tells.
  void finish();
  std::uint64_t events() const { return events_; }

 private:
  struct Open {
    Time start = 0;
    std::string name;
  };
  // One element of traceEvents (JSON text).
  void emit(std::string_view event);

  const Topology& topo_;
  std::ostream& out_;
  std::unordered_map<std::uint64_t, Open> open_;  // key: rank << 40 | step
  std::uint64_t events_ = 0;
};

}  // namespace cclab::sim
