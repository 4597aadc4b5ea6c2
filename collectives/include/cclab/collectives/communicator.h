// The communicator API every backend implements: blocking and non-blocking
// collectives over typed buffers, with an algorithm choice per call.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/schedule.h"
#include "cclab/collectives/types.h"

namespace cclab::coll {

// One collective call as a backend receives it. `send` may equal `recv` (or
// point at the rank's block of it, NCCL-style) for an in-place call.
struct CollectiveCall {
  CollectiveShape shape;
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  const void* send = nullptr;
  void* recv = nullptr;
  AlgoConfig algo;
};

namespace detail {
class RequestImpl {
 public:
  virtual ~RequestImpl() = default;
  virtual void wait() = 0;  // throws on failure or timeout
  virtual bool test() = 0;  // makes progress; true once complete
};
}  // namespace detail

// Handle of a non-blocking collective. wait() blocks (up to the communicator's
// timeout) and rethrows the collective's error; test() polls.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestImpl> impl) : impl_(std::move(impl)) {}
  void wait();
  bool test();
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<detail::RequestImpl> impl_;
};

// The end of every backend's collective: kAvg divides the result once, by the
// rank count (all-reduce and reduce-scatter; other collectives do not reduce).
void finalize_call(const CollectiveCall& call);

// Whether the call's output bytes and input bytes do not overlap (for
// AlgoConfig::disjoint_output); an in-place call's do.
bool output_is_disjoint(const CollectiveCall& call);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts a collective; calls are matched across ranks by issue order, and
  // several may be in flight.
  virtual Request start(const CollectiveCall& call) = 0;
  // Runs a collective to completion (the blocking forms below): start(call)
  // and wait, unless an executor does better knowing the caller waits.
  virtual void run(const CollectiveCall& call) { start(call).wait(); }
  virtual void barrier() = 0;
  // Collective over this communicator: ranks with the same color form a new
  // communicator ordered by (key, rank); a negative color returns nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // The group size `hier` uses when a call leaves AlgoConfig::group_size at 0:
  // ranks per host when every host holds the same number of consecutive ranks
  // (the gloo backend learns hosts at rendezvous); 0 means no such grouping is
  // known and default_group_size() applies.
  virtual int host_group_size() const { return 0; }
  // `algo` as this communicator plans a call with it: host_group_size()
  // where it names no group size (and one is known).
  AlgoConfig with_host_groups(AlgoConfig algo) const {
    if (algo.group_size == 0) algo.group_size = host_group_size();
    return algo;
  }

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Blocking forms; pass send == recv for in place.
  void allreduce(const void* send, void* recv, std::uint64_t count, DataType t, ReduceOp op,
                 const AlgoConfig& algo = {});
  // recv_count elements land in recv; send holds recv_count * size() elements.
  void reduce_scatter(const void* send, void* recv, std::uint64_t recv_count, DataType t,
                      ReduceOp op, const AlgoConfig& algo = {});
  // send holds send_count elements; recv gets send_count * size().
  void all_gather(const void* send, void* recv, std::uint64_t send_count, DataType t,
                  const AlgoConfig& algo = {});
  void broadcast(const void* send, void* recv, std::uint64_t count, DataType t, int root,
                 const AlgoConfig& algo = {});

  // Non-blocking forms.
  Request iallreduce(const void* send, void* recv, std::uint64_t count, DataType t, ReduceOp op,
                     const AlgoConfig& algo = {});
  Request ireduce_scatter(const void* send, void* recv, std::uint64_t recv_count, DataType t,
                          ReduceOp op, const AlgoConfig& algo = {});
  Request iall_gather(const void* send, void* recv, std::uint64_t send_count, DataType t,
                      const AlgoConfig& algo = {});
  Request ibroadcast(const void* send, void* recv, std::uint64_t count, DataType t, int root,
                     const AlgoConfig& algo = {});

 private:
  std::chrono::milliseconds timeout_{30000};
};

}  // namespace cclab::coll
