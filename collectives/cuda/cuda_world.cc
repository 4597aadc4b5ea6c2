// The cuda executor: transfers are pulled by the receiver's stream, as a
// device-to-device copy (cudaMemcpyAsync on one GPU, cudaMemcpyPeerAsync
// across GPUs) or as one fused kernel that reads the peer's buffer, reduces
// and writes (peer access across GPUs). Between GPUs without peer access a
// recv-reduce is staged: a peer copy into the receiver's staging buffer, then
// a local reduce (one staging buffer per rank suffices: its stream runs the
// two in order, and nothing else on it touches staging).
#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "cclab/collectives/cuda.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/reduce.h"
#include "cuda_check.h"
#include "gpu_group.h"
#include "kernels.h"

namespace cclab::coll {
namespace detail {
namespace {

class CudaGroup final : public GpuGroup {
 public:
  CudaGroup(int ranks, const GpuOptions& options)
      : GpuGroup(ranks, options, TransferLowering::kPull) {
    enable_peer_access();
  }

 private:
  void enable_peer_access();
  bool staged(int reader_device, int owner_device) const {
    return no_access_.count({reader_device, owner_device}) > 0;
  }
  std::uint64_t staging_elements(const CachedPlan& plan, int r) const override;
  void execute(const CachedPlan& plan, const std::vector<RankAddresses>& addresses,
               const CollectiveCall& call) override;
  void enqueue(const PlanOp& op, const CachedPlan& plan, const std::vector<RankAddresses>& addr,
               const CollectiveCall& call);

  std::set<std::pair<int, int>> no_access_;  // (reader, owner) devices without peer access
};

// Fused pulls read a peer GPU's memory directly where peer access exists;
// other pairs are staged (see above).
void CudaGroup::enable_peer_access() {
  std::set<int> devices;
  for (const auto& g : ranks_) devices.insert(g.device);
  for (int d : devices)
    for (int p : devices) {
      if (d == p) continue;
      int can = 0;
      CCLAB_CUDA(cudaDeviceCanAccessPeer(&can, d, p));
      if (!can) {
        no_access_.insert({d, p});
        continue;
      }
      set_device(d);
      const cudaError_t status = cudaDeviceEnablePeerAccess(p, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        CCLAB_CUDA(status);
    }
}

std::uint64_t CudaGroup::staging_elements(const CachedPlan& plan, int r) const {
  bool any = false;
  for (const auto& g : ranks_) any |= staged(ranks_[r].device, g.device);
  return std::max(plan.plan.staging_count[r], any ? plan.peer_reduce_max[r] : 0);
}

void CudaGroup::execute(const CachedPlan& plan, const std::vector<RankAddresses>& addresses,
                        const CollectiveCall& call) {
  // Across collectives: a stream that reads a peer's buffers starts after the
  // peer's stream has finished what it had queued (e.g. the previous
  // collective writing the buffer this one reads).
  for (auto& g : ranks_) {
    set_device(g.device);
    CCLAB_CUDA(cudaEventRecord(g.entry, g.stream));
  }
  for (int r = 0; r < size(); ++r) {
    set_device(ranks_[r].device);
    for (int peer : plan.peers_read[r])
      CCLAB_CUDA(cudaStreamWaitEvent(ranks_[r].stream, ranks_[peer].entry, 0));
  }
  for (const auto& op : plan.plan.ops) enqueue(op, plan, addresses, call);
}

std::byte* address(const std::vector<RankAddresses>& addr, const BufferRef& b, std::size_t es) {
  return addr[b.rank][static_cast<int>(b.buffer)] + b.offset * es;
}

void CudaGroup::enqueue(const PlanOp& op, const CachedPlan& plan,
                        const std::vector<RankAddresses>& addr, const CollectiveCall& call) {
  const auto& g = ranks_[op.stream];
  const std::size_t es = dtype_size(call.dtype);
  set_device(g.device);
  switch (op.kind) {
    case PlanOpKind::kCopy: {
      if (op.count == 0) return;
      const int src_device = ranks_[op.a.rank].device;
      std::byte* dst = address(addr, op.dst, es);
      const std::byte* src = address(addr, op.a, es);
      if (dst == src) return;
      if (src_device == g.device)
        CCLAB_CUDA(cudaMemcpyAsync(dst, src, op.count * es, cudaMemcpyDeviceToDevice, g.stream));
      else
        CCLAB_CUDA(cudaMemcpyPeerAsync(dst, g.device, src, src_device, op.count * es, g.stream));
      return;
    }
    case PlanOpKind::kReduce: {
      const std::byte* b = address(addr, op.b, es);
      const int owner = ranks_[op.b.rank].device;
      if (op.count > 0 && staged(g.device, owner)) {
        std::byte* staging = addr[op.stream][static_cast<int>(PlanBuffer::kStaging)];
        CCLAB_CUDA(cudaMemcpyPeerAsync(staging, g.device, b, owner, op.count * es, g.stream));
        b = staging;
      }
      return launch_reduce(g.stream, address(addr, op.dst, es), address(addr, op.a, es), b,
                           op.count, call.dtype, step_op(call.op), g.sm_count);
    }
    case PlanOpKind::kRecord:
      return record(op);
    case PlanOpKind::kWait:
      return wait(op, plan);
    default:
      throw InternalError(fmt::format("cuda: a pull plan has no {} ops", plan_op_name(op.kind)));
  }
}

}  // namespace
}  // namespace detail

std::string cuda_unavailable_reason() {
  try {
    detail::require_devices();
    return "";
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : bytes_(bytes), device_(device) {
  CCLAB_CUDA(cudaSetDevice(device));
  void* p = nullptr;
  // At least 256 bytes, so data() is a real device pointer even for empty buffers.
  CCLAB_CUDA(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)));
  data_ = static_cast<std::byte*>(p);
  CCLAB_CUDA(cudaMemset(data_, 0, std::max<std::size_t>(bytes, 256)));
  CCLAB_CUDA(cudaStreamSynchronize(nullptr));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

// The legacy default stream does not order against the ranks' non-blocking
// streams, and pageable copies and memsets may return before they land: each
// helper waits for its own work, so a collective started after it sees it.
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  CCLAB_CUDA(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  CCLAB_CUDA(cudaStreamSynchronize(nullptr));
}

void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes > 0) CCLAB_CUDA(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

void fill_device(void* device_dst, int byte, std::size_t bytes) {
  if (bytes == 0) return;
  CCLAB_CUDA(cudaMemset(device_dst, byte, bytes));
  CCLAB_CUDA(cudaStreamSynchronize(nullptr));
}

void GpuWorld::run(const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors(size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r)
    threads.emplace_back([&, r] {
      try {
        CCLAB_CUDA(cudaSetDevice(device(r)));
        fn(comm(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  // The root cause first: a rank that failed makes the others time out.
  std::stable_partition(errors.begin(), errors.end(), [](const std::exception_ptr& e) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const TimeoutError&) {
      return false;
    } catch (...) {
    }
    return true;
  });
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::unique_ptr<GpuWorld> make_cuda_world(int ranks, const GpuOptions& options) {
  auto group = std::make_unique<detail::CudaGroup>(ranks, options);
  std::string note = "cuda: " + group->placement();
  return std::make_unique<detail::GroupWorld>(std::move(group), std::move(note));
}

}  // namespace cclab::coll
