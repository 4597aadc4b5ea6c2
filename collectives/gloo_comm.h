// GlooComm: the gloo backend's communicator (see cclab/collectives/gloo.h).
// Internal header shared by the executor and its rendezvous code.
#pragma once

#include <memory>
#include <string>

#include "cclab/collectives/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace cclab::coll::detail {

// What a communicator and the ones split from it share: the store (to
// rendezvous again on split) and the device (the bound TCP address).
struct GlooWorld;

// A connected context: `prefix` is the store prefix it met under.
std::unique_ptr<Communicator> make_gloo_comm(std::shared_ptr<GlooWorld> world,
                                             std::shared_ptr<gloo::Context> context,
                                             std::string prefix, std::chrono::milliseconds timeout);

// Connects rank/size under `prefix` of the world's store (a full mesh).
std::shared_ptr<gloo::Context> connect(GlooWorld& world, const std::string& prefix, int rank,
                                       int size, std::chrono::milliseconds timeout);

// The context of a communicator made by make_gloo_comm (for Gloo's own
// algorithms); throws InvalidArgument for any other communicator.
std::shared_ptr<gloo::Context> gloo_context(Communicator& comm);

}  // namespace cclab::coll::detail
