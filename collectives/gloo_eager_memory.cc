// EagerMemory: the eager rings' memory (see gloo_eager.h).
#include <cstring>
#include <new>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gloo_eager.h"

namespace cclab::coll::detail {
namespace {

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
  bytes_ = round_up(bytes, static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<std::byte*>(p);
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
