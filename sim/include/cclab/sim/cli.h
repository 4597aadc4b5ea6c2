// The `cclab` subcommands this library contributes to the cclab program.
#pragma once

namespace CLI {
class App;
}

namespace cclab::sim {

// `cclab sim`: predicts all-reduce times on a topology with the simulator and
// prints them in the columns of `cclab bench` (bottleneck link instead of #wrong).
void add_sim_command(CLI::App& app);

// `cclab calibrate`: fits the simulator's links to a `cclab bench --json`
// record and prints its predictions against the measurements (calibrate.h).
void add_calibrate_command(CLI::App& app);

}  // namespace cclab::sim
