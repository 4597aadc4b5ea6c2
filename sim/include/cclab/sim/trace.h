// Chrome / Perfetto trace of a simulation (the JSON "traceEvents" format,
// timestamps in microseconds): one track per rank with a slice per step, from
// its issue to its completion, one counter track per link carrying
// traffic, its utilisation (sum of flow rates / bandwidth) over time, and,
// with a host overhead, a track per rank's host with a slice per message.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cclab/collectives/schedule.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

class TraceWriter {
 public:
  explicit TraceWriter(const Topology& topology) : topo_(topology) {}

  void step_issued(int rank, std::int64_t step, const coll::Step& s, Time now);
  void step_done(int rank, std::int64_t step, Time now);
  // The rank's host spends [start, end) on a message to or from `peer`.
  void host_busy(int rank, int peer, bool sending, Time start, Time end);
  // The total rate of the flows on a link changed to `bytes_per_s`.
  void link_rate(LinkId link, double bytes_per_s, Time now);

  // The whole trace as JSON text.
  std::string to_json() const;
  // Throws IoError naming --trace and the path.
  void write(const std::string& path) const;
  std::size_t events() const { return events_.size(); }

 private:
  struct Open {
    Time start = 0;
    std::string name;
  };
  const Topology& topo_;
  std::unordered_map<std::uint64_t, Open> open_;  // key: rank << 40 | step
  struct Event {
    char phase = 'X';  // 'X': a step's slice, 'C': a link's counter, 'H': a host's slice
    int track = 0;     // rank or link
    Time start = 0, duration = 0;
    std::string name;
    double value = 0;  // counters: utilisation; slices: the step id
  };
  std::vector<Event> events_;
};

}  // namespace cclab::sim
