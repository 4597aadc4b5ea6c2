// CUDA status codes become exceptions here, at the boundary: CudaError
// carries the failed call and CUDA's own error text.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
// "CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)"
std::string cuda_error_text(cudaError_t status);

}  // namespace cclab::coll::detail

#define CCLAB_CUDA(call)                                                                 \
  do {                                                                                   \
    const cudaError_t cclab_status_ = (call);                                            \
    if (cclab_status_ != cudaSuccess)                                                    \
      ::cclab::coll::detail::throw_cuda_error(cclab_status_, #call, __FILE__, __LINE__); \
  } while (0)
