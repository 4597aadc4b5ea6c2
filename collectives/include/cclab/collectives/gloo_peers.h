// Gloo's own all-reduce implementations, run on the context of a gloo
// communicator, as baselines for ours on the same transport:
//   gloo-ring          gloo::AllreduceRing (allreduce_ring.h)
//   gloo-ring-chunked  gloo::AllreduceRingChunked
//   gloo-hd            gloo::AllreduceHalvingDoubling
//   gloo-bcube         gloo::AllreduceBcube (even rank counts only)
//   gloo-fn-ring       gloo::allreduce (allreduce.h), RING
//   gloo-fn-bcube      gloo::allreduce, BCUBE
// gloo::allreduce runs in place or out of place; the classic classes have no
// out-of-place form and run in place only. They set up their buffers (and
// pairs' slots) when constructed, so a peer is made once per size and run
// many times. Built only with Gloo (CCLAB_HAVE_GLOO).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cclab/collectives/communicator.h"
#include "cclab/collectives/types.h"

namespace cclab::coll {

// One prepared peer all-reduce over fixed memory.
class PeerAllreduce {
 public:
  virtual ~PeerAllreduce() = default;
  // Collective: every rank of the communicator calls it, in the same order.
  virtual void run() = 0;
};

// The element types Gloo's algorithms run as peers (f16 as gloo::float16);
// a header-only check, so that flags are validated in builds without Gloo too.
inline constexpr std::string_view kGlooPeerTypes = "f32, f64, f16, i32, i64";
inline bool gloo_peer_runs(DataType t) {
  return t == DataType::kF32 || t == DataType::kF64 || t == DataType::kF16 || t == DataType::kI32 ||
         t == DataType::kI64;
}

// Why peer `name` cannot run here (empty: it can). Names the flag that
// chose what it lacks (--dtype, --op) or the rank count.
std::string gloo_peer_unsupported(std::string_view name, int ranks, DataType t, ReduceOp op);

// Whether peer `name` is one of Gloo's classic classes, which run in place only.
bool gloo_peer_in_place_only(std::string_view name);

// Prepares peer `name` over `count` elements on `comm`, which must be a gloo
// communicator: inputs at `in`, results to `out` (in == out: in place; the
// classic classes need that). Collective (every rank, same order). Throws
// InvalidArgument when the peer is unknown or unsupported.
std::unique_ptr<PeerAllreduce> make_gloo_peer(Communicator& comm, std::string_view name,
                                              const void* in, void* out, std::uint64_t count,
                                              DataType t, ReduceOp op);

// The stream reference, not an all-reduce: every rank
// sends `bytes` to rank + 1 and receives as many from rank - 1, one Gloo
// transfer each way on `comm`'s context (a gloo communicator), nothing
// reduced. With `bytes` = 2 (n - 1) / n of a buffer, the traffic per rank of
// a bandwidth-optimal all-reduce (ring, halving-doubling), its time is what
// moving those bytes costs this transport, one stream each way. Each byte
// sent is a function of its position and the sender, so that wrong() can
// check what arrived. Collective (every rank, same order).
class TransportStream : public PeerAllreduce {
 public:
  // Received bytes that differ from what rank - 1 sent, after a run().
  virtual std::uint64_t wrong() const = 0;
};
std::unique_ptr<TransportStream> make_gloo_stream(Communicator& comm, std::uint64_t bytes);

}  // namespace cclab::coll
