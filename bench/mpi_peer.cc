#include "mpi_peer.h"

#include <climits>
#include <exception>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#ifdef CCLAB_HAVE_MPI
#include <mpi.h>
#endif

namespace cclab::bench {
namespace {

using coll::DataType;
using coll::ReduceOp;

#ifdef CCLAB_HAVE_MPI
// MPI status codes become exceptions here, at the boundary (MPI_COMM_WORLD is
// set to return them rather than abort).
void check_mpi(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(fmt::format("--algo mpi: {} failed: {}", call, std::string_view(text, length)));
}

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return MPI_FLOAT;
    case DataType::kF64:
      return MPI_DOUBLE;
    case DataType::kI32:
      return MPI_INT32_T;
    case DataType::kI64:
      return MPI_INT64_T;
    case DataType::kU8:
      return MPI_UINT8_T;
    case DataType::kF16:
    case DataType::kBF16:
      break;
  }
  throw InternalError(fmt::format("mpi peer: no MPI datatype for {}", coll::dtype_name(t)));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kAvg:
      break;
  }
  throw InternalError(fmt::format("mpi peer: no MPI op for {}", coll::op_name(op)));
}
#endif

}  // namespace

bool mpi_built_in() {
#ifdef CCLAB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

MpiSession::MpiSession(const coll::EnvLookup& env, int rank, int ranks)
    : uncaught_at_start_(std::uncaught_exceptions()) {
#ifndef CCLAB_HAVE_MPI
  (void)env, (void)rank, (void)ranks;
  unavailable_ = "this cclab was built without MPI (CCLAB_WITH_MPI; Debian: libopenmpi-dev)";
#else
  // Outside mpirun, MPI_Init would make a world of one process per rank.
  if (!env("OMPI_COMM_WORLD_SIZE")) {
    unavailable_ = "needs mpirun (OMPI_COMM_WORLD_SIZE is not set)";
    return;
  }
  int provided = 0;
  // Only the rank's own thread calls MPI; Gloo's threads never do.
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  started_ = true;
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int mpi_rank = 0, mpi_size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size), "MPI_Comm_size");
  // Every rank learns whether any rank differs, so that all of them fail alike
  // instead of some waiting in MPI_Allreduce for the ones that gave up.
  int differs = mpi_rank != rank || mpi_size != ranks ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &differs, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce");
  if (differs == 0) return;
  // All ranks reach this point together, so MPI can end normally here; mpirun
  // would otherwise stop the slower ranks before they print why.
  MPI_Finalize();
  started_ = false;
  throw Error(fmt::format(
      "--algo mpi: MPI_COMM_WORLD must have the gloo communicator's ranks; this process is MPI "
      "rank {} of {} and gloo rank {} of {}{} (start every rank with mpirun and leave RANK, "
      "WORLD_SIZE and TF_CONFIG unset)",
      mpi_rank, mpi_size, rank, ranks,
      mpi_rank == rank && mpi_size == ranks ? ", but another process differs" : ""));
#endif
}

MpiSession::~MpiSession() {
#ifdef CCLAB_HAVE_MPI
  if (started_ && std::uncaught_exceptions() == uncaught_at_start_) MPI_Finalize();
#endif
}

std::string mpi_skip_reason(DataType t, ReduceOp op, std::uint64_t count) {
  if (t == DataType::kF16 || t == DataType::kBF16)
    return fmt::format("MPI has no predefined {} datatype", coll::dtype_name(t));
  if (op == ReduceOp::kAvg) return "MPI has no avg reduction (MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX)";
  if (count > static_cast<std::uint64_t>(INT_MAX))
    return fmt::format("MPI_Allreduce's count is an int; {} elements exceed it", count);
  return "";
}

std::function<void()> make_mpi_peer(const void* in, void* out, std::uint64_t count, DataType t,
                                    ReduceOp op) {
#ifdef CCLAB_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  CCLAB_CHECK(initialized != 0, "the mpi peer runs only after MpiSession started MPI");
  CCLAB_CHECK(mpi_skip_reason(t, op, count).empty(), "the mpi peer was asked for a skipped row");
  const MPI_Datatype type = mpi_type(t);
  const MPI_Op mop = mpi_op(op);
  const int n = static_cast<int>(count);
  const void* send = in == out ? MPI_IN_PLACE : in;
  return
      [=] { check_mpi(MPI_Allreduce(send, out, n, type, mop, MPI_COMM_WORLD), "MPI_Allreduce"); };
#else
  (void)in, (void)out, (void)count, (void)t, (void)op;
  throw BackendUnavailable("--algo mpi: this cclab was built without MPI (CCLAB_WITH_MPI)");
#endif
}

}  // namespace cclab::bench
