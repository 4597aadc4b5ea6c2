#include "cclab/collectives/cluster_env.h"

#include <map>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"
#include "cclab/test/errors.h"

namespace cclab::coll {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

using cclab::test::expect_invalid;

// A TF_CONFIG document: `cluster` (the text of its member) and the task.
std::string fmt_json(std::string_view cluster, std::string_view type, int index) {
  return "{" + std::string(cluster) + R"(, "task": {"type": ")" + std::string(type) +
         R"(", "index": )" + std::to_string(index) + "}}";
}

constexpr const char* kCluster =
    R"("cluster": {"chief": ["a:1"], "worker": ["a:2", "b:3", "b:4"]})";

TEST(ClusterEnv, TfConfigChiefIsRankZeroThenWorkers) {
  // Members in rank order: chief a:1, worker0 a:2, worker1 b:3, worker2 b:4.
  auto id = parse_tf_config(fmt_json(kCluster, "worker", 1));
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.host, "b");
  EXPECT_EQ(id.local_rank, 0);  // first of b's two tasks
  EXPECT_EQ(id.local_world_size, 2);
  id = parse_tf_config(fmt_json(kCluster, "chief", 0));
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.host, "a");
  EXPECT_EQ(id.local_world_size, 2);
}

TEST(ClusterEnv, TfConfigWithoutChiefWorkerZeroLeads) {
  auto id = parse_tf_config(
      R"({"cluster": {"worker": ["h0:1", "h1:1"]}, "task": {"type": "worker", "index": 1}})");
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 2);
  EXPECT_EQ(id.host, "h1");
  EXPECT_EQ(id.local_world_size, 1);
}

TEST(ClusterEnv, TfConfigErrorsNameTheField) {
  expect_invalid([] { parse_tf_config("{"); }, {"TF_CONFIG", "JSON"});
  expect_invalid([] { parse_tf_config(R"({"task": {"type": "worker", "index": 0}})"); },
                 {"TF_CONFIG", "cluster"});
  expect_invalid([] { parse_tf_config(fmt_json(kCluster, "worker", 3)); },
                 {"TF_CONFIG", "task.index", "3"});
  expect_invalid([] { parse_tf_config(fmt_json(kCluster, "ps", 0)); }, {"task.type", "'ps'"});
  expect_invalid(
      [] {
        parse_tf_config(R"({"cluster": {"worker": ["nohost"]}, "task": {"type": "worker",
                        "index": 0}})");
      },
      {"cluster.worker[0]"});
  expect_invalid(
      [] { parse_tf_config(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})"); },
      {"task.index"});
}

TEST(ClusterEnv, TorchrunVariables) {
  auto id = identity_from_env(
      env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(id);
  EXPECT_EQ(id->rank, 3);
  EXPECT_EQ(id->world_size, 4);
  EXPECT_EQ(id->local_rank, 1);
  EXPECT_EQ(id->local_world_size, 2);
  // Without the local pair, one host holds everyone.
  id = identity_from_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(id->local_rank, 1);
  EXPECT_EQ(id->local_world_size, 2);
}

TEST(ClusterEnv, MalformedVariablesAreNamed) {
  expect_invalid(
      [] {
        identity_from_env(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
      },
      {"RANK", "'x'"});
  expect_invalid(
      [] {
        identity_from_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
      },
      {"RANK", "outside [0, 2)"});
  expect_invalid([] { identity_from_env(env_of({{"RANK", "0"}})); }, {"WORLD_SIZE", "not set"});
  expect_invalid(
      [] {
        identity_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}));
      },
      {"WORLD_SIZE", "at least 1"});
  expect_invalid(
      [] {
        identity_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
      },
      {"LOCAL_WORLD_SIZE", "not set"});
  expect_invalid(
      [] {
        identity_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"}}));
      },
      {"OMPI_COMM_WORLD_SIZE"});
}

TEST(ClusterEnv, PrecedenceAndAbsence) {
  EXPECT_FALSE(identity_from_env(env_of({})));
  auto id = identity_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                      {"OMPI_COMM_WORLD_SIZE", "3"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  EXPECT_EQ(id->source, "OMPI_COMM_WORLD_*");
  EXPECT_EQ(id->rank, 1);
  // TF_CONFIG wins over RANK/WORLD_SIZE.
  id = identity_from_env(
      env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TF_CONFIG", fmt_json(kCluster, "chief", 0)}}));
  EXPECT_EQ(id->source, "TF_CONFIG");
  EXPECT_EQ(id->world_size, 4);
}

TEST(ClusterEnv, Rendezvous) {
  auto r = parse_rendezvous("file:/tmp/x", "--rendezvous");
  EXPECT_EQ(r.kind, Rendezvous::Kind::kFile);
  EXPECT_EQ(r.path, "/tmp/x");
  r = parse_rendezvous("redis://127.0.0.1:6380", "--rendezvous");
  EXPECT_EQ(r.kind, Rendezvous::Kind::kRedis);
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 6380);
  EXPECT_EQ(r.spec(), "redis://127.0.0.1:6380");
  expect_invalid([] { parse_rendezvous("tcp://a:1", "--rendezvous"); }, {"--rendezvous", "tcp"});
  expect_invalid([] { parse_rendezvous("redis://a:99999", "X"); }, {"X", "99999"});
  expect_invalid([] { parse_rendezvous("redis://a", "X"); }, {"X", "host:port"});
  expect_invalid([] { parse_rendezvous("file:", "X"); }, {"X", "directory"});
}

TEST(ClusterEnv, RendezvousPrecedence) {
  EXPECT_FALSE(rendezvous_from("", env_of({})));
  auto env = env_of(
      {{"CCLAB_RENDEZVOUS", "file:/e"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "7000"}});
  EXPECT_EQ(rendezvous_from("file:/f", env)->path, "/f");
  EXPECT_EQ(rendezvous_from("", env)->path, "/e");
  auto master =
      rendezvous_from("", env_of({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "7000"}}));
  EXPECT_EQ(master->spec(), "redis://127.0.0.1:7000");
  expect_invalid([] { rendezvous_from("", env_of({{"MASTER_ADDR", "h"}})); }, {"MASTER_PORT"});
  expect_invalid(
      [] {
        rendezvous_from("", env_of({{"CCLAB_RENDEZVOUS", "nope"}}));
      },
      {"CCLAB_RENDEZVOUS"});
}

}  // namespace
}  // namespace cclab::coll
