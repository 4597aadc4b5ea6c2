#include "cuda_check.h"

#include <fmt/format.h>

namespace cclab::coll::detail {

std::string cuda_error_text(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a sticky-free error so later calls start clean
  throw CudaError(fmt::format("{} failed: {} [{}:{}]", call, cuda_error_text(status), file, line));
}

}  // namespace cclab::coll::detail
