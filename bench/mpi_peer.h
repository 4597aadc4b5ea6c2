// The `mpi` peer of `cclab bench`: Open MPI's MPI_Allreduce, in place on
// MPI_COMM_WORLD, beside ours in the same run. It runs only when the ranks
// were started by mpirun (so that MPI_COMM_WORLD is the same set of processes
// as the gloo communicator) and the build found MPI (CCLAB_WITH_MPI);
// otherwise every row of it is skipped with the reason. Types f32, f64, i32,
// i64, u8 and ops sum, prod, min, max map onto MPI's; f16, bf16 and avg have
// no MPI predefined datatype or op and are skipped rows.
//
// MPI's own waits have no timeout: a rank that dies under mpirun makes mpirun
// stop the whole job, which is what bounds them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/types.h"

namespace cclab::bench {

inline constexpr std::string_view kMpiPeer = "mpi";

// Whether this cclab was built with MPI.
bool mpi_built_in();

// MPI for one `cclab bench` process. Starts MPI (MPI_Init_thread) only when
// `env` shows mpirun (OMPI_COMM_WORLD_SIZE); otherwise records why the peer
// cannot run. Finalizes MPI when destroyed, except while an exception unwinds
// (MPI_Finalize waits for the other ranks, which may be stuck in a collective
// waiting for this one; exiting without it makes mpirun stop them instead).
class MpiSession {
 public:
  // `rank` and `ranks` are the gloo communicator's: MPI_COMM_WORLD must agree,
  // on every rank (checked collectively, so all ranks fail alike), or it throws
  // Error naming both.
  MpiSession(const coll::EnvLookup& env, int rank, int ranks);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Why the mpi peer cannot run in this process (empty: it can).
  const std::string& unavailable() const { return unavailable_; }

 private:
  bool started_ = false;
  int uncaught_at_start_ = 0;
  std::string unavailable_;
};

// Why a row of `count` elements of type t under op is skipped (empty: it runs).
std::string mpi_skip_reason(coll::DataType t, coll::ReduceOp op, std::uint64_t count);

// One prepared MPI_Allreduce of `count` elements from `in` to `out` on
// MPI_COMM_WORLD (in == out: in place, MPI_IN_PLACE); collective; needs a
// started MpiSession and a row that mpi_skip_reason lets run.
std::function<void()> make_mpi_peer(const void* in, void* out, std::uint64_t count,
                                    coll::DataType t, coll::ReduceOp op);

}  // namespace cclab::bench
