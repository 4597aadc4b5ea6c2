// The `cclab` subcommand this library contributes to the cclab program.
#pragma once

namespace CLI {
class App;
}

namespace cclab::train {

// `cclab train`: the multi-worker mirrored trainer (see trainer/README.md).
void add_train_command(CLI::App& app);

}  // namespace cclab::train
