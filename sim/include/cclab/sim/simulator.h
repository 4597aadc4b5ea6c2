// Replays a schedule on a topology and predicts its time.
//
// Rank r runs on endpoint r. Each rank's program is driven by the same
// StepRunner every executor uses, so the simulator follows the execution
// model of schedule.h exactly: in-order issue, deps, fences, FIFO matching of
// sends and receives per ordered pair, and rendezvous: a matched transfer
// starts only when both its send and its receive are issued. A transfer is a
// flow from the sender's endpoint to the receiver's under the network model
// (network.h).
//
// Where the topology has an eager limit (eager_bytes > 0), a message of up to
// that many bytes goes eagerly, as the gloo executor's bound-buffer rings and
// MPI's eager protocol (SimGrid's detached sends) send it: its transfer starts
// when the send is issued, the send is done at once (the data is copied
// aside, for free), and the receive that meets it completes when the data
// has landed, at once if it landed before the receive was issued. Buffers are
// unbounded: no credit ever holds an eager send back.
//
// Where the topology has a host overhead o (overhead > 0, LogGP's o), every
// message costs its sender's host o before its data leaves (the send is
// posted, and may match, only then; an eager send is done then) and its
// receiver's host o once the data has landed, before the receive completes.
// A rank's host handles one message at a time, in the order they come to it:
// a rank that sends to k peers at once posts the last after k*o. Where the
// topology has host_cpus (cpus=N), every message end also needs one of N
// CPUs shared by all ranks: the first to come free, in the order the ends
// come to their hosts. Local copies
// are free; a reduction (kReduce, or the combine of a kRecvReduce after its
// data arrived and its overhead was paid) costs bytes / reduce rate when the
// endpoint has one, and nothing otherwise; reductions do not hold the host
// (a reduction engine of their own, and they overlap one another).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cclab/collectives/schedule.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {

class TraceWriter;

struct SimOptions {
  std::size_t elem_bytes = 4;
  TraceWriter* trace = nullptr;  // optional: records steps and link rates
};

struct SimResult {
  Time total = 0;                     // when the last rank finished
  std::vector<Time> rank_finish;      // per rank
  std::vector<double> link_bytes;     // per link of the topology
  LinkId bottleneck = -1;             // the link with the highest utilisation; -1 if none
  double bottleneck_utilisation = 0;  // its bytes / (bw * total)
  int busiest_host = -1;              // with a host overhead: the rank whose host was busiest
  double host_utilisation = 0;        // its time on message overheads / total
  std::uint64_t events = 0;           // events the engine processed
  std::uint64_t flows = 0;            // transfers simulated
  std::uint64_t steps = 0;            // steps issued over all ranks
};

// Throws InvalidArgument when the schedule has more ranks than the topology
// has endpoints (naming --ranks) and InternalError when the schedule
// deadlocks (naming the stuck rank and step).
SimResult simulate(const Topology& topology, const coll::Schedule& schedule,
                   const SimOptions& options = {});

}  // namespace cclab::sim
