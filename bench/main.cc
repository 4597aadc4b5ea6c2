// The cclab program: each library contributes its subcommands.
//
// Exit status: 0 on success, 2 for a usage error (a flag CLI11 rejects or a
// value cclab rejects), 1 for any other failure (including wrong results).
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "bench_command.h"
#include "cclab/collectives/cli.h"
#include "cclab/collectives/error.h"
#include "cclab/sim/cli.h"
#include "cclab/trainer/cli.h"
#include "launch.h"

int main(int argc, char** argv) {
  CLI::App app{"cclab: collective communication toolkit", "cclab"};
  app.require_subcommand(1);
  cclab::bench::add_bench_command(app);
  cclab::bench::add_launch_command(app);
  cclab::coll::add_check_command(app);
  cclab::sim::add_sim_command(app);
  cclab::sim::add_calibrate_command(app);
  cclab::train::add_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    // A subcommand's way to end with a status after printing its own report
    // (caught first: CLI11 derives it from ParseError).
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "cclab: " << e.what() << '\n';
    return 2;
  } catch (const cclab::InvalidArgument& e) {
    std::cerr << "cclab: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cclab: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
