// Rendezvous of the gloo backend: the store named by the Rendezvous spec, a
// prefix per communicator, a device of the chosen transport (TCP bound to the
// rank's address, or ibverbs where it can serve), and a full mesh of pairs
// connected through the store.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>
#if GLOO_HAVE_TRANSPORT_IBVERBS
#include <gloo/transport/ibverbs/device.h>
#endif
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"
#include "gloo_comm.h"

namespace cclab::coll {
namespace detail {

struct GlooWorld {
  Rendezvous rendezvous;
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
};

namespace {

std::unique_ptr<gloo::rendezvous::Store> open_store(const Rendezvous& r) {
  if (r.kind == Rendezvous::Kind::kFile) {
    std::error_code ec;
    std::filesystem::create_directories(r.path, ec);
    if (ec)
      throw IoError(
          fmt::format("rendezvous {}: cannot create the directory: {}", r.spec(), ec.message()));
    return std::make_unique<gloo::rendezvous::FileStore>(r.path);
  }
  try {
    return std::make_unique<gloo::rendezvous::RedisStore>(r.host, r.port);
  } catch (const std::exception& e) {
    throw IoError(
        fmt::format("rendezvous {}: cannot reach the Redis server: {}", r.spec(), e.what()));
  }
}

// The ranks whose address key (Gloo's full-mesh rendezvous sets one per rank,
// named by the rank) is not in the store, as "1, 3" (at most 16 named).
std::string missing_ranks(gloo::rendezvous::Store& store, int size) {
  std::vector<std::string> missing;
  int count = 0;
  for (int r = 0; r < size; ++r) {
    try {
      store.wait({std::to_string(r)}, std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      if (++count <= 16) missing.push_back(std::to_string(r));
    }
  }
  if (count > 16) missing.push_back(fmt::format("and {} more", count - 16));
  return fmt::format("{}", fmt::join(missing, ", "));
}

// While alive, the calling thread runs under SCHED_BATCH, and so does every
// thread it starts (Linux threads inherit their creator's policy); then the
// thread gets its own policy back. Tuning only: where the policy cannot be
// changed, nothing is.
class BatchPolicyForNewThreads {
 public:
  BatchPolicyForNewThreads() {
    policy_ = sched_getscheduler(0);
    if (policy_ != SCHED_OTHER || sched_getparam(0, &param_) != 0) return;
    const sched_param batch{};
    changed_ = sched_setscheduler(0, SCHED_BATCH, &batch) == 0;
  }
  ~BatchPolicyForNewThreads() {
    if (changed_) sched_setscheduler(0, policy_, &param_);
  }
  BatchPolicyForNewThreads(const BatchPolicyForNewThreads&) = delete;
  BatchPolicyForNewThreads& operator=(const BatchPolicyForNewThreads&) = delete;

 private:
  int policy_ = -1;
  sched_param param_{};
  bool changed_ = false;
};

// Debian's Gloo takes only getaddrinfo's -1 for a failure and then walks an
// uninitialised list (SIGSEGV for a name that does not resolve): resolved
// here first, so such a name is an error naming it.
void require_resolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rv = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (rv != 0)
    throw IoError(
        fmt::format("gloo: cannot bind a TCP device to '{}': the name does not resolve "
                    "({})",
                    host, rv == EAI_SYSTEM ? strerror(errno) : gai_strerror(rv)));
}

// A TCP device; its loop thread under SCHED_BATCH when `batch_loop`
// (GlooOptions::batch_loop_thread says why).
std::shared_ptr<gloo::transport::Device> make_tcp_device(const std::string& host, bool batch_loop) {
  require_resolvable(host);
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  try {
    std::optional<BatchPolicyForNewThreads> batch;
    if (batch_loop) batch.emplace();
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw IoError(fmt::format("gloo: cannot bind a TCP device to '{}': {}", host, e.what()));
  }
}

// The first RDMA device (Gloo's sorted order), port 1, GID index 0.
std::shared_ptr<gloo::transport::Device> make_ibverbs_device(std::string_view what) {
#if GLOO_HAVE_TRANSPORT_IBVERBS
  const auto names = gloo::transport::ibverbs::getDeviceNames();
  if (names.empty())
    throw BackendUnavailable(
        fmt::format("{} ibverbs: no RDMA device found (ibv_get_device_list returned none)", what));
  gloo::transport::ibverbs::attr attr;
  attr.name = names.front();
  attr.port = 1;
  attr.index = 0;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::ibverbs::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw BackendUnavailable(fmt::format("{} ibverbs: cannot open RDMA device '{}' port {}: {}",
                                         what, attr.name, attr.port, e.what()));
  }
  require_unbound_buffers(*device->createContext(0, 1), what, "ibverbs");
  return device;
#else
  throw BackendUnavailable(
      fmt::format("{} ibverbs: this Gloo was built without its ibverbs transport", what));
#endif
}

}  // namespace

void require_unbound_buffers(gloo::transport::Context& context, std::string_view what,
                             std::string_view transport) {
  std::byte probe{};
  try {
    context.createUnboundBuffer(&probe, 1);
  } catch (const std::exception& e) {
    throw BackendUnavailable(
        fmt::format("{} {}: Gloo's {} transport has no unbound buffers, which every transfer of "
                    "the gloo executor needs ({}); use tcp",
                    what, transport, transport, e.what()));
  }
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::shared_ptr<gloo::Context> connect(GlooWorld& world, const std::string& prefix, int rank,
                                       int size, std::chrono::milliseconds timeout) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  gloo::rendezvous::PrefixStore store(prefix, *world.store);
  try {
    ctx->connectFullMesh(store, world.device);
  } catch (const gloo::IoException& e) {
    const auto missing = missing_ranks(store, size);
    throw TimeoutError(fmt::format(
        "rank {}: rendezvous via {} (prefix '{}') of {} ranks failed within {} ms: {}{}", rank,
        world.rendezvous.spec(), prefix, size, timeout.count(),
        missing.empty() ? "" : fmt::format("rank(s) {} never joined; ", missing), e.what()));
  } catch (const gloo::Exception& e) {
    throw Error(fmt::format("rank {}: rendezvous via {} (prefix '{}') failed: {}", rank,
                            world.rendezvous.spec(), prefix, e.what()));
  }
  return ctx;
}

}  // namespace detail

std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw InvalidArgument(fmt::format("gloo: rank {} is outside [0, {})", o.rank, o.world_size));
  if (o.eager_bytes > kGlooMaxEagerBytes)
    throw InvalidArgument(fmt::format("gloo: eager_bytes {} is above the largest allowed, {}",
                                      o.eager_bytes, kGlooMaxEagerBytes));
  // Gloo's sockets do not ignore SIGPIPE: a write to a dead peer would kill us
  // instead of failing the transfer.
  signal(SIGPIPE, SIG_IGN);
  auto world = std::make_shared<detail::GlooWorld>();
  world->rendezvous = o.rendezvous;
  // The device first: a transport that cannot serve fails before the store is touched.
  world->device = o.transport == GlooTransport::kIbverbs
                      ? detail::make_ibverbs_device(o.transport_what)
                      : detail::make_tcp_device(o.host.empty() ? detail::hostname() : o.host,
                                                o.batch_loop_thread);
  world->store = detail::open_store(o.rendezvous);
  auto ctx = detail::connect(*world, o.prefix, o.rank, o.world_size, o.timeout);
  return detail::make_gloo_comm(std::move(world), std::move(ctx), o.prefix, o.timeout,
                                o.eager_bytes,
                                o.host_name.empty() ? detail::hostname() : o.host_name);
}

}  // namespace cclab::coll
