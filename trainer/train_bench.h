// `cclab train --bench`: training throughput on the threads backend.
#pragma once

#include <ostream>

#include "cclab/trainer/trainer.h"

namespace cclab::train {

// For 1, 2 and 4 workers, with and without overlap: median steps/s over
// repetitions and the share of the chief's step time spent in gradient
// communication calls. Uses config.data_dir, or a generated set in a
// temporary directory when it is empty.
void run_bench(TrainConfig config, std::ostream& out);

}  // namespace cclab::train
