// EagerMemory: the eager rings' memory (see gloo_eager.h).
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gloo_eager.h"

namespace cclab::coll::detail {
namespace {

constexpr std::size_t kHugePage = 2u << 20;
constexpr std::size_t kHugeFrom = 1u << 20;  // smaller mappings stay in small pages

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// The kernel writes every page of [p, p + bytes) once (a read of /dev/zero:
// zeroes stay zeroes). On the AMD EPYC VM (a PVM guest) the first access to
// a page costs about 5 us from each side: the kernel's, after user space has
// zeroed it (reading 64 KiB from a socket into fresh memory took 75-113 us,
// then 4-8 us; writing from it 74-104, then 5-8), and user space's, after only
// the kernel has written it. So a 64 KiB `direct` all-reduce on 2 ranks cost
// 460-500 us of CPU per call for its first 15 calls and 130 with its rings
// touched from both sides when made (about 2.5 ms per 2 MiB ring there). Best
// effort: without /dev/zero the memory is still zeroed.
void touch_by_kernel(std::byte* p, std::size_t bytes) {
  const int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::read(fd, p + done, bytes - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

}  // namespace

EagerMemory::EagerMemory(std::size_t bytes) {
  // From 1 MiB on: at least one whole huge page; past 2 MiB the tail that
  // does not fill one stays in small pages (the default 64 KiB ring, 32
  // entries of 64 KiB and a header, is 2 KiB over 2 MiB).
  const bool huge = bytes >= kHugeFrom;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  bytes_ = huge && bytes < kHugePage ? kHugePage : round_up(bytes, page);
  // Over-map by one huge page, then trim both ends to a 2 MiB boundary.
  const std::size_t mapped = bytes_ + (huge ? kHugePage : 0);
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* at = static_cast<std::byte*>(p);
  if (huge) {
    const auto addr = reinterpret_cast<std::uintptr_t>(at);
    std::byte* aligned = at + (round_up(addr, kHugePage) - addr);
    if (aligned > at) ::munmap(at, static_cast<std::size_t>(aligned - at));
    if (std::byte* end = aligned + bytes_; end < at + mapped)
      ::munmap(end, static_cast<std::size_t>(at + mapped - end));
    at = aligned;
    ::madvise(at, bytes_, MADV_HUGEPAGE);  // a request: refused where THP is off
  }
  base_ = at;
  std::memset(base_, 0, bytes_);  // user space's first touch
  touch_by_kernel(base_, bytes_);
}

EagerMemory::EagerMemory(EagerMemory&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

EagerMemory& EagerMemory::operator=(EagerMemory&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, bytes_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

EagerMemory::~EagerMemory() {
  if (base_) ::munmap(base_, bytes_);
}

}  // namespace cclab::coll::detail
