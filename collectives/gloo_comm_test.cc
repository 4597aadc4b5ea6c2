// Parts of the gloo backend that need no peers: host grouping for hier, and
// what the transports can and cannot do on this machine.
#include "gloo_comm.h"

#include <filesystem>
#include <string>

#include <gloo/config.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>
#include <unistd.h>
#if GLOO_HAVE_TRANSPORT_IBVERBS
#include <gloo/transport/ibverbs/context.h>
#include <gloo/transport/ibverbs/device.h>
#endif

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"

namespace cclab::coll::detail {
namespace {

TEST(GlooHostGroups, EqualBlocksOfConsecutiveRanksGroupByHost) {
  EXPECT_EQ(uniform_host_block({"a", "a", "b", "b"}), 2);
  EXPECT_EQ(uniform_host_block({"a", "a", "a", "b", "b", "b"}), 3);
  EXPECT_EQ(uniform_host_block({"a", "b", "c"}), 1);
}

TEST(GlooHostGroups, NoGroupingWithoutAUniformLayout) {
  EXPECT_EQ(uniform_host_block({"a", "a", "a", "a"}), 0) << "one host: no host hierarchy";
  EXPECT_EQ(uniform_host_block({"a"}), 0);
  EXPECT_EQ(uniform_host_block({}), 0);
  EXPECT_EQ(uniform_host_block({"a", "a", "b"}), 0) << "unequal blocks";
  EXPECT_EQ(uniform_host_block({"a", "a", "b", "b", "b", "b"}), 0) << "unequal blocks";
  EXPECT_EQ(uniform_host_block({"a", "b", "a", "b"}), 0) << "a host's ranks not consecutive";
  EXPECT_EQ(uniform_host_block({"a", "a", "b", "b", "a", "a"}), 0) << "a host appears twice";
}

// The error text of f(), or "no error".
template <typename F>
std::string unavailable_error(F f) {
  try {
    f();
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return "no error";
}

TEST(GlooTransport, TcpHasUnboundBuffers) {
  // The positive control for the probe below: the transport the executor runs on.
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto context = gloo::transport::tcp::CreateDevice(attr)->createContext(0, 1);
  EXPECT_EQ(unavailable_error([&] { require_unbound_buffers(*context, "--transport", "tcp"); }),
            "no error");
}

#if GLOO_HAVE_TRANSPORT_IBVERBS
TEST(GlooTransport, IbverbsOfThisGlooHasNoUnboundBuffers) {
  // Debian's Gloo (2022 snapshot) throws from createUnboundBuffer before it
  // looks at the device, so a context without one shows it. A Gloo that
  // implements them needs a real device here, and this test must change.
  auto context = std::make_shared<gloo::transport::ibverbs::Context>(nullptr, 0, 1);
  const auto error =
      unavailable_error([&] { require_unbound_buffers(*context, "--transport", "ibverbs"); });
  EXPECT_NE(error.find("--transport ibverbs: Gloo's ibverbs transport has no unbound buffers"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("Unbound buffers not supported"), std::string::npos) << error;
}

TEST(GlooTransport, IbverbsWithoutAnRdmaDeviceFailsBeforeTheRendezvous) {
  if (!gloo::transport::ibverbs::getDeviceNames().empty())
    GTEST_SKIP() << "this machine has an RDMA device";
  const auto dir =
      std::filesystem::temp_directory_path() / ("cclab_ibverbs_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  GlooOptions o;
  o.world_size = 2;  // rank 1 never comes: only the device check can end this quickly
  o.rendezvous = parse_rendezvous("file:" + dir.string(), "test");
  o.transport = GlooTransport::kIbverbs;
  o.transport_what = "CCLAB_TRANSPORT";
  EXPECT_EQ(unavailable_error([&] { make_gloo_communicator(o); }),
            "CCLAB_TRANSPORT ibverbs: no RDMA device found (ibv_get_device_list returned none)");
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the store was opened before the device check";
}
#endif

}  // namespace
}  // namespace cclab::coll::detail
