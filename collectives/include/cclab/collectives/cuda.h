// The GPU backends' public face: worlds of N ranks in one process, one rank
// per host thread, each rank with its own device buffers and stream.
//
// With fewer GPUs than ranks, ranks share GPUs ("virtual ranks": separate
// buffers and streams on one device), so the whole path runs and is checked
// on a single GPU. The `cuda` world carries transfers out as peer copies and
// fused "read peer, reduce, write" kernels (see stream_plan.h, kPull); the
// `nccl` world (nccl.h) as ncclSend/ncclRecv. Collective buffers must be
// device memory of the rank's device (DeviceBuffer).
//
// The ranks' k-th calls are matched; the last rank to make it enqueues the
// work of every rank, which then runs with no host synchronisation until each
// rank's wait() sees its own stream reach the end of the collective.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cclab/collectives/communicator.h"

namespace cclab::coll {

// "" when at least one CUDA device is usable, else why not, with CUDA's own
// error text (e.g. "CUDA driver version is insufficient for CUDA runtime version").
std::string cuda_unavailable_reason();

struct GpuOptions {
  std::chrono::milliseconds timeout{30000};
  std::vector<int> devices;  // rank r runs on devices[r % size]; empty: every visible device
};

// Device memory (cudaMalloc, never managed memory), zeroed on allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

// Synchronous copies between host and device memory (any device pointer).
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
void fill_device(void* device_dst, int byte, std::size_t bytes);

// N ranks on the GPUs of this process.
class GpuWorld {
 public:
  virtual ~GpuWorld() = default;
  virtual int size() const = 0;
  virtual int device(int rank) const = 0;
  virtual Communicator& comm(int rank) = 0;
  // One line on placement: GPUs, ranks per GPU, anything the backend changed.
  virtual std::string note() const = 0;

  // Runs fn(comm(r)) on N threads and joins them; the first exception thrown
  // by any rank is rethrown here.
  void run(const std::function<void(Communicator&)>& fn);
};

// Throws BackendUnavailable ("no usable CUDA device: ...") without a GPU, and
// InvalidArgument for a device index that does not exist.
std::unique_ptr<GpuWorld> make_cuda_world(int ranks, const GpuOptions& options = {});

}  // namespace cclab::coll
