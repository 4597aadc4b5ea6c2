// `cclab bench`: the nccl-tests style sweep as a subcommand of the cclab program.
#pragma once

#include <iosfwd>

#include "options.h"

namespace CLI {
class App;
}

namespace cclab::bench {

// Adds the `bench` subcommand. A sweep with wrong results ends the program with
// status 1 by throwing CLI::RuntimeError(1) once everything is printed.
void add_bench_command(CLI::App& app);

// Runs the sweep, prints the table to `out`, writes the JSON file if asked;
// returns the exit status (1 when any result was wrong, else 0).
// `flags` carries what only a process backend needs (--rendezvous, --bind).
int run_bench(BenchConfig config, std::ostream& out, std::ostream& err,
              const BenchFlags& flags = {});

}  // namespace cclab::bench
