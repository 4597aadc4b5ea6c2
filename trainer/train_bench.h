// `cclab train --bench`: training throughput per worker count, with and
// without overlapping the gradient all-reduce with backward.
#pragma once

#include <functional>
#include <ostream>
#include <vector>

#include "cclab/collectives/communicator.h"
#include "cclab/trainer/trainer.h"

namespace cclab::train {

// Runs fn on every worker of a world of `workers` workers (threads: a new
// world each time; gloo: this process's communicator, whose size is fixed).
using WorldRunner =
    std::function<void(int workers, const std::function<void(coll::Communicator&)>& fn)>;

// For each worker count, with and without overlap: median steps/s over
// repetitions and the share of the chief's step time spent in gradient
// communication calls. Uses config.data_dir, or a generated set in a
// temporary directory when it is empty. `out` null: measure, print nothing
// (the non-chief processes of a gloo job).
void run_bench(TrainConfig config, std::string_view backend, const std::vector<int>& worker_counts,
               const WorldRunner& run, std::ostream* out);

}  // namespace cclab::train
