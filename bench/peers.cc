#include "peers.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo_peers.h"  // declarations only: kGlooPeerTypes with or without Gloo
#include "mpi_peer.h"
#ifdef CCLAB_HAVE_NCCL
#include "cclab/collectives/nccl.h"
#endif

namespace cclab::bench {
namespace {

using coll::DataType;
using coll::ReduceOp;

// gloo::allreduce's ring at >= 4 ranks takes 15-18 s per call at 16 MiB on
// the 2-core machines (MACHINE.md); above this size a row would take minutes.
constexpr std::uint64_t kFnRingMaxBytesAt4Ranks = 1 << 20;

bool is_nccl_peer(std::string_view name) {
  return std::find(kNcclPeers.begin(), kNcclPeers.end(), name) != kNcclPeers.end();
}

// NCCL's all-reduce takes every type and op we do.
void check_nccl_peer(std::string_view peer, const BenchConfig& c) {
  if (c.backend != "nccl")
    throw InvalidArgument(
        fmt::format("--algo: '{}' is NCCL's own all-reduce; it needs --backend nccl (got {})", peer,
                    c.backend));
  if (c.coll != coll::CollectiveKind::kAllReduce)
    throw InvalidArgument(fmt::format("--algo: '{}' is an all-reduce; it does not apply to {}",
                                      peer, coll::collective_name(c.coll)));
}

// MPI_COMM_WORLD holds one process per rank: the ranks of a process backend.
// A type or op MPI lacks is a skipped row (see mpi_skip_reason).
void check_mpi_peer(const BenchConfig& c) {
  if (c.backend != "gloo")
    throw InvalidArgument(fmt::format(
        "--algo: 'mpi' is Open MPI's MPI_Allreduce across processes; it needs --backend gloo "
        "under mpirun (got --backend {})",
        c.backend));
  if (c.coll != coll::CollectiveKind::kAllReduce)
    throw InvalidArgument(fmt::format("--algo: 'mpi' is an all-reduce; it does not apply to {}",
                                      coll::collective_name(c.coll)));
}

// The stream moves an all-reduce's bytes over Gloo's transport: any type and op.
void check_stream(const BenchConfig& c) {
  if (c.backend != "gloo")
    throw InvalidArgument(fmt::format(
        "--algo: 'stream' times Gloo's transport alone; it needs --backend gloo (got {})",
        c.backend));
  if (c.coll != coll::CollectiveKind::kAllReduce)
    throw InvalidArgument(
        fmt::format("--algo: 'stream' moves an all-reduce's bytes; it does not apply to {}",
                    coll::collective_name(c.coll)));
}

}  // namespace

std::uint64_t stream_bytes(std::uint64_t bytes, int ranks) {
  return ranks < 2 ? 0 : 2 * (static_cast<std::uint64_t>(ranks) - 1) * bytes / ranks;
}

bool is_peer_name(std::string_view name) {
  return is_nccl_peer(name) || name == kMpiPeer || name == kStreamPeer ||
         std::find(kGlooPeers.begin(), kGlooPeers.end(), name) != kGlooPeers.end();
}

std::string peer_names_for_help() {
  std::string gloo, nccl;
  for (auto p : kGlooPeers) gloo += fmt::format("{}{}", gloo.empty() ? "" : ", ", p);
  for (auto p : kNcclPeers) nccl += fmt::format("{}{}", nccl.empty() ? "" : ", ", p);
  return fmt::format("with --backend gloo also {}, {}, {}; with --backend nccl also {}", gloo,
                     kMpiPeer, kStreamPeer, nccl);
}

void check_peer(std::string_view peer, const BenchConfig& c) {
  if (is_nccl_peer(peer)) return check_nccl_peer(peer, c);
  if (peer == kMpiPeer) return check_mpi_peer(c);
  if (peer == kStreamPeer) return check_stream(c);
  if (c.backend != "gloo")
    throw InvalidArgument(fmt::format(
        "--algo: '{}' is one of Gloo's own algorithms; it needs --backend gloo (got {})", peer,
        c.backend));
  if (c.coll != coll::CollectiveKind::kAllReduce)
    throw InvalidArgument(fmt::format("--algo: '{}' is an all-reduce; it does not apply to {}",
                                      peer, coll::collective_name(c.coll)));
  const DataType t = c.dtype;
  if (!coll::gloo_peer_runs(t))
    throw InvalidArgument(
        fmt::format("--dtype: {} is not available to --algo {} (Gloo's algorithms run {})",
                    coll::dtype_name(t), peer, coll::kGlooPeerTypes));
  if (c.op == ReduceOp::kAvg)
    throw InvalidArgument(fmt::format(
        "--op: avg is not available to --algo {} (Gloo's algorithms run sum, prod, min, max)",
        peer));
}

std::string peer_skip_reason(std::string_view peer, const BenchConfig& c, std::uint64_t bytes) {
  if (peer == kMpiPeer) {
    if (!c.mpi_unavailable.empty()) return c.mpi_unavailable;
    return mpi_skip_reason(c.dtype, c.op, bytes / coll::dtype_size(c.dtype));
  }
  const int ranks = c.ranks;
  if (peer == kStreamPeer && ranks < 2) return "the stream runs between ranks: needs 2 or more";
  // Gloo's bcube pairs ranks at every level: an odd count leaves one alone.
  if (peer == "gloo-bcube" && ranks % 2 != 0)
    return fmt::format("gloo::AllreduceBcube needs an even rank count (got {})", ranks);
  if (peer == "gloo-fn-ring" && ranks >= 4 && bytes > kFnRingMaxBytesAt4Ranks)
    return fmt::format(
        "gloo::allreduce's ring takes seconds per call at >= 4 ranks; capped at {} B",
        kFnRingMaxBytesAt4Ranks);
  return "";
}

bool peer_runs_in_place(std::string_view peer, const BenchConfig& c) {
#ifdef CCLAB_HAVE_GLOO
  if (coll::gloo_peer_in_place_only(peer)) return true;
#endif
  return c.in_place;
}

std::function<void()> make_peer(coll::Communicator& comm, std::string_view peer, const void* in,
                                void* out, std::uint64_t count, const BenchConfig& c) {
  if (peer == kMpiPeer) return make_mpi_peer(in, out, count, c.dtype, c.op);
  if (is_nccl_peer(peer)) {
#ifdef CCLAB_HAVE_NCCL
    const auto algo = peer == "nccl-ring"   ? coll::NcclAlgo::kRing
                      : peer == "nccl-tree" ? coll::NcclAlgo::kTree
                                            : coll::NcclAlgo::kDefault;
    return [&comm, in, out, count, algo, t = c.dtype, op = c.op] {
      coll::nccl_allreduce(comm, in, out, count, t, op, algo);
    };
#else
    throw BackendUnavailable(fmt::format("--algo {}: this build has no NCCL", peer));
#endif
  }
#ifdef CCLAB_HAVE_GLOO
  std::shared_ptr<coll::PeerAllreduce> p =
      coll::make_gloo_peer(comm, peer, in, out, count, c.dtype, c.op);
  return [p] { p->run(); };
#else
  (void)comm, (void)in, (void)out, (void)count, (void)c;
  throw BackendUnavailable(fmt::format("--algo {}: this build has no Gloo", peer));
#endif
}

StreamCall make_stream(coll::Communicator& comm, std::uint64_t bytes) {
#ifdef CCLAB_HAVE_GLOO
  std::shared_ptr<coll::TransportStream> stream =
      coll::make_gloo_stream(comm, stream_bytes(bytes, comm.size()));
  return {[stream] { stream->run(); }, [stream] { return stream->wrong(); }};
#else
  (void)comm, (void)bytes;
  throw BackendUnavailable("--algo stream: this build has no Gloo");
#endif
}

}  // namespace cclab::bench
