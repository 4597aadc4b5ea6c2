// The shared refusal helpers of error.h.
#include "cclab/collectives/error.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace cclab {
namespace {

// MemTotal from /proc/meminfo, in bytes (the kernel's own count, read apart
// from sysconf); 0 when it is not there.
std::uint64_t meminfo_total() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

TEST(RequireMemory, PhysicalMemoryIsTheKernelsMemTotal) {
  const std::uint64_t total = meminfo_total();
  if (total == 0) GTEST_SKIP() << "no /proc/meminfo";
  const std::uint64_t ours = physical_memory_bytes();
  // sysconf counts pages, MemTotal KiB: they agree to within a page.
  EXPECT_LE(ours > total ? ours - total : total - ours, 64u << 10) << ours << " vs " << total;
}

TEST(RequireMemory, RefusesMoreThanTheMachineHasNamingTheFlag) {
  const double have = double(physical_memory_bytes());
  if (have == 0) GTEST_SKIP() << "the system does not say how much memory it has";
  EXPECT_NO_THROW(require_memory("--x", "a thing", 1.0));
  EXPECT_NO_THROW(require_memory("--x", "a thing", have));
  try {
    require_memory("--x", "a thing", 2 * have);
    FAIL() << "twice the machine's memory was allowed";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("--x: a thing needs ", 0), 0u) << what;
    EXPECT_NE(what.find(" GiB, more than this machine's "), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace cclab
