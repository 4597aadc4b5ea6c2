// Peers in `cclab bench`: other libraries' implementations of a collective,
// run beside ours in the same sweep: Gloo's own all-reduce algorithms on the
// same transport (kGlooPeers, see cclab/collectives/gloo_peers.h) and, under
// mpirun, Open MPI's MPI_Allreduce (kMpiPeer, see mpi_peer.h) with --backend
// gloo; NCCL's ncclAllReduce with NCCL_ALGO pinned (kNcclPeers, see
// cclab/collectives/nccl.h) with --backend nccl.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cclab/collectives/communicator.h"
#include "options.h"

namespace cclab::bench {

inline constexpr std::array<std::string_view, 6> kGlooPeers = {
    "gloo-ring", "gloo-ring-chunked", "gloo-hd", "gloo-bcube", "gloo-fn-ring", "gloo-fn-bcube"};

inline constexpr std::array<std::string_view, 3> kNcclPeers = {"nccl", "nccl-ring", "nccl-tree"};

// Not an all-reduce but a reference row beside the peers (--backend gloo):
// the bytes a bandwidth-optimal all-reduce moves per rank, 2 (n - 1) / n of
// the buffer, as one Gloo transfer each way, nothing reduced
// (cclab::coll::TransportStream): what the traffic alone costs. --compare
// shows ours and the best peer as multiples of its time; it is never the
// best peer itself. Its #wrong counts bytes, not elements.
inline constexpr std::string_view kStreamPeer = "stream";

// The bytes the stream row moves each way per rank for an all-reduce of `bytes`.
std::uint64_t stream_bytes(std::uint64_t bytes, int ranks);

bool is_peer_name(std::string_view name);
// "gloo-ring, ..., mpi; with --backend nccl also nccl, ..." for messages.
std::string peer_names_for_help();

// Checks that the configuration can run `peer` at all; throws InvalidArgument
// naming the flag (--algo, --backend, --coll, --dtype, --op) otherwise.
void check_peer(std::string_view peer, const BenchConfig& config);

// Why one row of `peer` is skipped rather than run (empty: it runs). A
// rank count the peer cannot use is a skipped row, not an error; so is, for
// the mpi peer, a run outside mpirun (config.mpi_unavailable) or a type or op
// MPI lacks.
std::string peer_skip_reason(std::string_view peer, const BenchConfig& config, std::uint64_t bytes);

// Whether `peer` runs in place: as the sweep does, except Gloo's classic
// classes, which have no out-of-place form and always do.
bool peer_runs_in_place(std::string_view peer, const BenchConfig& config);

// One prepared peer all-reduce of `count` elements from `in` to `out` (the
// same pointer in place, see peer_runs_in_place); calling it is collective.
// Made once per row on every rank in the same order. Gloo's peers run on
// `comm` (a gloo communicator); the mpi peer ignores it.
std::function<void()> make_peer(coll::Communicator& comm, std::string_view peer, const void* in,
                                void* out, std::uint64_t count, const BenchConfig& config);

// The stream row of an all-reduce of `bytes` on `comm` (a gloo communicator
// of the sweep's ranks): `run` is one call, `wrong` counts the bytes the
// last call received that differ from what the sender sent. Collective.
struct StreamCall {
  std::function<void()> run;
  std::function<std::uint64_t()> wrong;
};
StreamCall make_stream(coll::Communicator& comm, std::uint64_t bytes);

}  // namespace cclab::bench
