// The trainer's view of the cluster: which TensorFlow task this process is
// (for checkpoint directories) on top of cluster_env's rank identity.
#pragma once

#include "cclab/collectives/cluster_env.h"
#include "cclab/trainer/trainer.h"

namespace cclab::train {

// From TF_CONFIG's "task" when it is set ({"type": "chief"|"worker", "index":
// i}); otherwise worker `rank` (torchrun, mpirun, --ranks), worker 0 being
// the chief. Throws InvalidArgument naming TF_CONFIG's field when malformed.
TaskInfo task_from_env(const coll::EnvLookup& env, int rank);

}  // namespace cclab::train
