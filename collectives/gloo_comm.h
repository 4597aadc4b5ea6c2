// GlooComm: the gloo backend's communicator (see cclab/collectives/gloo.h).
// Internal header shared by the executor and its rendezvous code.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cclab/collectives/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Context;
}
}  // namespace gloo

namespace cclab::coll::detail {

// What a communicator and the ones split from it share: the store (to
// rendezvous again on split) and the device (the bound TCP address).
struct GlooWorld;

// A connected context: `prefix` is the store prefix it met under; messages
// up to `eager_bytes` go eagerly (gloo_eager.h). With a non-empty `host_name`
// the ranks exchange their host names (a collective) and group by host for
// `hier`.
std::unique_ptr<Communicator> make_gloo_comm(std::shared_ptr<GlooWorld> world,
                                             std::shared_ptr<gloo::Context> context,
                                             std::string prefix, std::chrono::milliseconds timeout,
                                             std::size_t eager_bytes,
                                             const std::string& host_name = {});

// Ranks per host when `hosts` (one name per rank) is two or more equal blocks
// of consecutive ranks, each on a distinct host; 0 otherwise.
int uniform_host_block(const std::vector<std::string>& hosts);

// Every transfer of the executor is an unbound buffer: throws
// BackendUnavailable ("<what> <transport>: ... no unbound buffers ...") when
// `context` cannot make one, so that a transport without them fails before
// the rendezvous rather than on the first collective.
void require_unbound_buffers(gloo::transport::Context& context, std::string_view what,
                             std::string_view transport);

// The hostname of this machine ("localhost" when it cannot be read).
std::string hostname();

// Connects rank/size under `prefix` of the world's store (a full mesh).
std::shared_ptr<gloo::Context> connect(GlooWorld& world, const std::string& prefix, int rank,
                                       int size, std::chrono::milliseconds timeout);

// The context of a communicator made by make_gloo_comm (for Gloo's own
// algorithms); throws InvalidArgument for any other communicator.
std::shared_ptr<gloo::Context> gloo_context(Communicator& comm);

}  // namespace cclab::coll::detail
