// What the host executors (threads, gloo) keep of every collective in flight
// on a rank: the call, its schedule and the runner over this rank's program.
// Each executor's own per-collective state derives from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cclab/collectives/communicator.h"
#include "cclab/collectives/step_runner.h"

namespace cclab::coll::detail {

struct CollectivePlan {
  std::uint64_t seq = 0;
  CollectiveCall call;  // as the executor runs it (see plan())
  std::size_t esize = 0;
  std::unique_ptr<Schedule> schedule;
  std::unique_ptr<StepRunner> runner;

  // Records `c` as collective `seq`, notes whether its output is disjoint
  // from its input (the schedules may then build results in place), and
  // makes its schedule and `rank`'s runner.
  void plan(std::uint64_t seq_number, const CollectiveCall& c, int rank) {
    seq = seq_number;
    call = c;
    call.algo.disjoint_output = output_is_disjoint(c);
    esize = dtype_size(c.dtype);
    schedule = make_schedule(c.shape, call.algo, esize);
    runner = std::make_unique<StepRunner>(schedule->program(rank));
  }
};

}  // namespace cclab::coll::detail
