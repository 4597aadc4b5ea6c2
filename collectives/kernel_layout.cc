#include "cclab/collectives/kernel_layout.h"

#include <algorithm>

namespace cclab::coll {

VectorSplit split_vectors(std::uintptr_t dst, std::uintptr_t a, std::uintptr_t b,
                          std::uint64_t count, std::size_t elem_bytes) {
  VectorSplit s;
  const std::uintptr_t mis = dst % kVectorBytes;
  const bool aligned_together = a % kVectorBytes == mis && (b == 0 || b % kVectorBytes == mis);
  // A vector holds whole elements only if the element size divides 16, and
  // the pointers must reach a 16-byte boundary after whole elements.
  if (!aligned_together || kVectorBytes % elem_bytes != 0 || mis % elem_bytes != 0) {
    s.head = count;
    return s;
  }
  s.per_vector = kVectorBytes / elem_bytes;
  s.head = std::min<std::uint64_t>(count, mis == 0 ? 0 : (kVectorBytes - mis) / elem_bytes);
  s.vectors = (count - s.head) / s.per_vector;
  s.tail = count - s.head - s.vectors * s.per_vector;
  return s;
}

LaunchShape launch_shape(std::uint64_t work_items, int sm_count) {
  if (work_items == 0) return {};
  const std::uint64_t needed = (work_items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const std::uint64_t fill = static_cast<std::uint64_t>(std::max(sm_count, 1)) * kBlocksPerSm;
  return {static_cast<unsigned>(std::min(needed, fill)), kThreadsPerBlock};
}

}  // namespace cclab::coll
