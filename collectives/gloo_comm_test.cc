// Pure logic of the gloo backend that needs no peers: host grouping for hier.
#include "gloo_comm.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cclab::coll::detail
