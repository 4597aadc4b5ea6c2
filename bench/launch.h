// `cclab launch -n N [--rendezvous SPEC] -- command args...`: runs N ranks of a
// command on this machine as direct children, torchrun-style.
#pragma once

namespace CLI {
class App;
}

namespace cclab::bench {

// Adds the `launch` subcommand. Each rank gets RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, CCLAB_RENDEZVOUS (a fresh file store unless given),
// CCLAB_RUN_ID and CCLAB_BIND=127.0.0.1; every line of its output is prefixed
// with "[rank] ". When a rank fails, the others get a grace period to fail on
// their own (their error names the lost rank), then SIGTERM, then SIGKILL;
// the status is the first failing rank's (128 + signal when killed).
void add_launch_command(CLI::App& app);

}  // namespace cclab::bench
