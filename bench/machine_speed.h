// Fixed probes of the machine's speed, measured around every sweep and kept
// in its record, so that a comparison can see when the machine rather than
// the build was slower: two VMs of one "machine class" (same CPU model
// string, same core count) differed by 3x on small messages, and a shared one
// has phases in which everything runs slower. The probes see only what they
// exercise; machines that differ in some other way pass as alike.
//
// The probes share no code with what they calibrate, so a change to the
// collectives cannot move them. Changing a probe changes its figures: bump
// kMachineSpeedVersion then, and comparisons skip records of other versions.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

namespace cclab::bench {

inline constexpr int kMachineSpeedVersion = 1;

struct MachineSpeed {
  double compute_ns = 0;   // one step of a dependent integer chain (clock speed)
  double pingpong_ns = 0;  // a cache line's round trip between two threads
  double copy_gbps = 0;    // memcpy of 8 MiB, 1e9 B/s
  int cpus = 0;            // CPUs the probes' threads could run on
  // The CPUs the ping-pong's two threads were confined to (-1: not confined,
  // when only one CPU may be used).
  std::array<int, 2> pingpong_cpus{-1, -1};
};

// The median of 9 repetitions of each probe, about 45 ms on an idle 2-vCPU
// Xeon; on a busy machine a probe stops repeating after 100 ms, and the
// ping-pong stops there too, reporting the trips made by then. The probes run
// on threads of their own, free to use every online CPU whatever the caller's
// affinity: under --pin a rank's threads share one core, where the ping-pong's
// two threads would take turns by the scheduler's time slice (7 ms a trip);
// the ping-pong's two threads are confined to two different CPUs.
MachineSpeed measure_machine_speed();

// Measured before and after a sweep.
struct SpeedAround {
  MachineSpeed start, end;
};

// The table's header line: "# machine speed (start / end): compute 2.82 / 2.81
// ns, ping-pong 231 / 221 ns, copy 5.9 / 4.9 GB/s".
std::string speed_line(const SpeedAround& s);
// The record's machine.speed: {"version", "start": {...}, "end": {...}}.
nlohmann::json speed_json(const SpeedAround& s);

}  // namespace cclab::bench
