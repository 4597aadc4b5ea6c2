// The nccl executor. A plan lowered with kSendRecv has, per matched pair, a
// send op on the sender's stream and a recv op on the receiver's; consecutive
// send/recv ops go into one ncclGroupStart/End (a single thread drives every
// rank's communicator, so both sides of a pair must be in one group). Any
// other op ends the group first, so that stream order matches plan order.
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nccl.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/nccl.h"
#include "cclab/collectives/reduce.h"
#include "cuda/cuda_check.h"
#include "cuda/gpu_group.h"
#include "cuda/kernels.h"

#define CCLAB_NCCL(call)                                                      \
  do {                                                                        \
    const ncclResult_t cclab_result_ = (call);                                \
    if (cclab_result_ != ncclSuccess)                                         \
      throw ::cclab::CudaError(fmt::format("{} failed: {} ({})", #call,       \
                                           ncclGetErrorString(cclab_result_), \
                                           ncclGetLastError(nullptr)));       \
  } while (0)

namespace cclab::coll {
namespace detail {
namespace {

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kF16:
      return ncclFloat16;
    case DataType::kBF16:
      return ncclBfloat16;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
    case DataType::kU8:
      return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

// Sets an environment variable for the lifetime of the object (NCCL reads
// NCCL_ALGO when a communicator is created), restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::string_view value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (!value.empty()) setenv(name, std::string(value).c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class NcclGroup final : public GpuGroup {
 public:
  NcclGroup(int ranks, const GpuOptions& options)
      : GpuGroup(ranks, options, TransferLowering::kSendRecv) {}
  ~NcclGroup() override {
    for (auto& [algo, comms] : comms_)
      for (auto c : comms) ncclCommDestroy(c);
  }

 private:
  const std::vector<ncclComm_t>& comms(NcclAlgo algo);
  void execute(const CachedPlan& plan, const std::vector<RankAddresses>& addresses,
               const CollectiveCall& call) override;
  void launch_variant(int variant, const std::vector<CollectiveCall>& calls) override;
  void begin_group();
  void end_group();

  std::map<NcclAlgo, std::vector<ncclComm_t>> comms_;
  bool in_group_ = false;
};

// Created on first use, by the launching thread, with NCCL_ALGO pinned.
const std::vector<ncclComm_t>& NcclGroup::comms(NcclAlgo algo) {
  auto& set = comms_[algo];
  if (!set.empty()) return set;
  std::vector<int> devices;
  for (const auto& g : ranks_) devices.push_back(g.device);
  static constexpr std::string_view kEnv[] = {"", "Ring", "Tree"};
  ScopedEnv env("NCCL_ALGO", kEnv[static_cast<int>(algo)]);
  set.resize(devices.size());
  CCLAB_NCCL(ncclCommInitAll(set.data(), static_cast<int>(devices.size()), devices.data()));
  current_device_ = -1;
  return set;
}

void NcclGroup::begin_group() {
  if (in_group_) return;
  CCLAB_NCCL(ncclGroupStart());
  in_group_ = true;
}

void NcclGroup::end_group() {
  if (!in_group_) return;
  in_group_ = false;
  CCLAB_NCCL(ncclGroupEnd());
}

std::byte* address(const std::vector<RankAddresses>& addr, const BufferRef& b, std::size_t es) {
  return addr[b.rank][static_cast<int>(b.buffer)] + b.offset * es;
}

void NcclGroup::execute(const CachedPlan& plan, const std::vector<RankAddresses>& addr,
                        const CollectiveCall& call) {
  const auto& c = comms(NcclAlgo::kDefault);
  const std::size_t es = dtype_size(call.dtype);
  try {
    for (const auto& op : plan.plan.ops) {
      const auto& g = ranks_[op.stream];
      if (op.kind != PlanOpKind::kSend && op.kind != PlanOpKind::kRecv) end_group();
      switch (op.kind) {
        case PlanOpKind::kSend:
          begin_group();
          CCLAB_NCCL(ncclSend(address(addr, op.a, es), op.count * es, ncclUint8, op.peer,
                              c[op.stream], g.stream));
          break;
        case PlanOpKind::kRecv:
          begin_group();
          CCLAB_NCCL(ncclRecv(address(addr, op.dst, es), op.count * es, ncclUint8, op.peer,
                              c[op.stream], g.stream));
          break;
        case PlanOpKind::kCopy:
          set_device(g.device);
          if (op.count > 0 && address(addr, op.dst, es) != address(addr, op.a, es))
            CCLAB_CUDA(cudaMemcpyAsync(address(addr, op.dst, es), address(addr, op.a, es),
                                       op.count * es, cudaMemcpyDeviceToDevice, g.stream));
          break;
        case PlanOpKind::kReduce:
          set_device(g.device);
          launch_reduce(g.stream, address(addr, op.dst, es), address(addr, op.a, es),
                        address(addr, op.b, es), op.count, call.dtype, step_op(call.op),
                        g.sm_count);
          break;
        case PlanOpKind::kRecord:
          record(op);
          break;
        case PlanOpKind::kWait:
          wait(op, plan);
          break;
      }
    }
    end_group();
  } catch (...) {
    if (in_group_) {
      in_group_ = false;
      ncclGroupEnd();
    }
    throw;
  }
}

// Variants 1..3: ncclAllReduce with NcclAlgo(variant - 1).
void NcclGroup::launch_variant(int variant, const std::vector<CollectiveCall>& calls) {
  const auto& c0 = calls[0];
  if (c0.shape.kind != CollectiveKind::kAllReduce)
    throw InvalidArgument(fmt::format("coll: NCCL's baseline is all-reduce only, not {}",
                                      collective_name(c0.shape.kind)));
  const auto& c = comms(static_cast<NcclAlgo>(variant - 1));
  CCLAB_NCCL(ncclGroupStart());
  for (int r = 0; r < size(); ++r)
    if (const ncclResult_t res =
            ncclAllReduce(calls[r].send, calls[r].recv, c0.shape.count, nccl_type(c0.dtype),
                          nccl_op(c0.op), c[r], ranks_[r].stream);
        res != ncclSuccess) {
      ncclGroupEnd();
      CCLAB_NCCL(res);
    }
  CCLAB_NCCL(ncclGroupEnd());
}

}  // namespace
}  // namespace detail

std::string_view nccl_algo_name(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kRing:
      return "nccl-ring";
    case NcclAlgo::kTree:
      return "nccl-tree";
    default:
      return "nccl";
  }
}

std::unique_ptr<GpuWorld> make_nccl_world(int ranks, const GpuOptions& options) {
  const int device_count = detail::require_devices();
  const auto devices = detail::place_ranks(ranks, options, device_count);
  const int distinct = static_cast<int>(std::set<int>(devices.begin(), devices.end()).size());
  const int n = std::min(ranks, distinct);
  auto group = std::make_unique<detail::NcclGroup>(n, options);
  std::string note = "nccl: " + group->placement();
  if (n < ranks)
    note += fmt::format(" - asked for {} ranks, running {}: NCCL refuses two ranks on one GPU",
                        ranks, n);
  return std::make_unique<detail::GroupWorld>(std::move(group), std::move(note));
}

void nccl_allreduce(Communicator& comm, const void* send, void* recv, std::uint64_t count,
                    DataType t, ReduceOp op, NcclAlgo algo) {
  auto* gpu = dynamic_cast<detail::GpuComm*>(&comm);
  if (!gpu || !dynamic_cast<detail::NcclGroup*>(&gpu->group()))
    throw InvalidArgument("nccl_allreduce: the communicator is not one of a nccl world");
  CollectiveCall call;
  call.shape = {CollectiveKind::kAllReduce, comm.size(), count, 0};
  call.dtype = t;
  call.op = op;
  call.send = send;
  call.recv = recv;
  gpu->start_variant(call, 1 + static_cast<int>(algo)).wait();
}

}  // namespace cclab::coll
