// How the GPU reduction and copy kernels cover a range of elements: pure host
// arithmetic, shared by the kernels' launchers and tested on the CPU.
//
// A kernel reads and writes 16 bytes per access where it can. Three pointers
// (dst, a, b) can use 16-byte vectors only from a common alignment, so the
// range splits into a scalar head (up to the first 16-byte boundary), a body
// of whole vectors and a scalar tail. When the pointers are misaligned
// against each other no vector is possible and the whole range is scalar.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cclab::coll {

inline constexpr std::size_t kVectorBytes = 16;

struct VectorSplit {
  std::uint64_t head = 0;     // scalar elements before the body
  std::uint64_t vectors = 0;  // 16-byte vectors in the body
  std::uint64_t tail = 0;     // scalar elements after it
  std::uint64_t per_vector = 1;
  std::uint64_t body_elements() const { return vectors * per_vector; }
};

// `b` may be 0 for a copy (two pointers).
VectorSplit split_vectors(std::uintptr_t dst, std::uintptr_t a, std::uintptr_t b,
                          std::uint64_t count, std::size_t elem_bytes);

// A grid-stride launch: enough blocks to fill the device a few times over,
// never more than the work needs.
struct LaunchShape {
  unsigned blocks = 0;
  unsigned threads = 0;
};
inline constexpr unsigned kThreadsPerBlock = 512;
inline constexpr unsigned kBlocksPerSm = 4;
LaunchShape launch_shape(std::uint64_t work_items, int sm_count);

}  // namespace cclab::coll
