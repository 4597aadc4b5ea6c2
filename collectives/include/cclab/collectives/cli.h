// The `cclab` subcommands this library contributes to the cclab program.
#pragma once

namespace CLI {
class App;
}

namespace cclab::coll {

// `cclab check`: runs the symbolic checker on one or more schedules.
void add_check_command(CLI::App& app);

}  // namespace cclab::coll
