// Test helpers for stream plans (stream_plan.h): a happens-before relation
// computed from the plan alone, and a host interpreter that runs a plan on
// host memory the way a GPU may: every stream in order, nothing else ordered
// but event waits and send/recv rendezvous, streams interleaved at random.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cclab/collectives/schedule.h"
#include "cclab/collectives/stream_plan.h"
#include "cclab/collectives/types.h"

namespace cclab::coll::test {

// Vector clocks over a plan, from its ops only: clock(i)[s] = how many ops of
// stream s are known to complete before op i completes (stream order, waits
// on earlier records, and both sides of a send/recv group).
class HappensBefore {
 public:
  explicit HappensBefore(const StreamPlan& plan);
  // True when op i completes before op j starts.
  bool before(std::int64_t i, std::int64_t j) const;
  std::uint32_t position(std::int64_t i) const { return pos_[i]; }  // 1-based, in its stream
  const std::vector<std::uint32_t>& clock(std::int64_t i) const { return clocks_[i]; }
  std::string error;  // a wait on an event not recorded earlier in host order

 private:
  std::vector<int> stream_;
  std::vector<std::uint32_t> pos_;
  std::vector<std::vector<std::uint32_t>> clocks_;
};

// Per-rank host memory for one plan.
struct HostBuffers {
  std::vector<std::vector<std::byte>> input, output, scratch, staging;
  bool in_place = false;  // input and output are views of `output`
};

HostBuffers make_buffers(const Schedule& schedule, const StreamPlan& plan, DataType t,
                         bool in_place);
std::byte* host_address(HostBuffers& b, const Schedule& s, const BufferRef& r, std::size_t esize);

// Runs the plan with a random interleaving of the streams; returns "" or why
// it could not finish (a stream waits forever).
std::string interpret(const StreamPlan& plan, const Schedule& schedule, HostBuffers& buffers,
                      DataType t, ReduceOp op, std::mt19937& rng);

}  // namespace cclab::coll::test
