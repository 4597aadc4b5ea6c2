// Parts of the gloo backend that need no peers: host grouping for hier, what
// the transports can and cannot do on this machine, and the scheduling policy
// of Gloo's loop thread.
#include "gloo_comm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gloo/config.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>
#include <sched.h>
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

// The scheduling policy of each thread of this process, by thread id, as the
// kernel reports it (field 41 of /proc/self/task/<tid>/stat).
std::map<int, int> thread_policies() {
  std::map<int, int> policies;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto name_end = stat.rfind(')');  // the thread's name may hold spaces
    if (name_end == std::string::npos) continue;
    // Ours (the waiter pool's cclab-waiter and cclab-watchdog) are not Gloo's.
    if (stat.find("(cclab-") != std::string::npos) continue;
    std::istringstream fields(stat.substr(name_end + 2));  // from field 3
    std::string field;
    for (int i = 3; i <= 41 && fields >> field; ++i)
      if (i == 41) policies[std::stoi(task.path().filename().string())] = std::stoi(field);
  }
  return policies;
}

// The policies of the threads a one-rank communicator started (batch_loop as given).
std::vector<int> policies_of_new_threads(bool batch_loop) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("cclab_loop_policy_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  GlooOptions o;
  o.rendezvous = parse_rendezvous("file:" + dir.string(), "test");
  o.host = "127.0.0.1";
  o.batch_loop_thread = batch_loop;
  const auto before = thread_policies();
  auto comm = make_gloo_communicator(o);
  std::vector<int> started;
  for (const auto& [tid, policy] : thread_policies())
    if (!before.count(tid)) started.push_back(policy);
  comm.reset();
  std::filesystem::remove_all(dir);
  return started;
}

TEST(GlooLoopThread, StartsUnderSchedBatchAndTheCallerKeepsItsPolicy) {
  ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER) << "the test needs to start under SCHED_OTHER";
  const auto started = policies_of_new_threads(true);
  ASSERT_FALSE(started.empty()) << "Gloo's TCP device starts a loop thread";
  EXPECT_NE(std::find(started.begin(), started.end(), SCHED_BATCH), started.end());
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER) << "the caller's policy was not restored";
}

TEST(GlooLoopThread, KeepsGloosDefaultPolicyWhenAskedTo) {
  const auto started = policies_of_new_threads(false);
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(std::count(started.begin(), started.end(), SCHED_BATCH), 0);
}

}  // namespace
}  // namespace cclab::coll::detail
