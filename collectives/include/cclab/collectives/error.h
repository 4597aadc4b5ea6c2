// Error kinds shared by every cclab library: recoverable failures are exceptions
// of these types; broken invariants are CCLAB_CHECK failures (InternalError).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cclab {

// Root of every error cclab throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a value outside what is allowed; the message names it.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A blocking wait ran past its timeout; the message names rank, peer and step.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A file or socket failed.
class IoError : public Error {
 public:
  using Error::Error;
};

// A requested backend (CUDA, NCCL, Gloo) is not built in or has no device.
class BackendUnavailable : public Error {
 public:
  using Error::Error;
};

// A CUDA or NCCL call failed; the message names the call and carries the
// library's own error text.
class CudaError : public Error {
 public:
  using Error::Error;
};

// An invariant of cclab itself was broken: a bug, never bad input.
class InternalError : public Error {
 public:
  using Error::Error;
};

// Throws IoError naming `flag` unless `path` opens for writing (created if
// missing, never truncated): output files are checked before the work that
// fills them, not after it.
void require_writable(const std::string& path, std::string_view flag);

// The whole text of the file at `path`; throws IoError "WHAT 'PATH': ..."
// when it is a directory or does not open for reading.
std::string read_text_file(const std::string& path, std::string_view what);

// This machine's physical memory in bytes (0 when the system does not say).
std::uint64_t physical_memory_bytes();

// Refuses, before anything is allocated, work that cannot fit this machine's
// memory (else std::bad_alloc, or the OOM killer once the pages are touched):
// InvalidArgument "FLAG: WHAT needs N GiB, more than this machine's M GiB of
// memory". `bytes` is a double so that a product of large counts cannot wrap.
void require_memory(std::string_view flag, std::string_view what, double bytes);

namespace detail {
[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& msg);
}  // namespace detail

}  // namespace cclab

// Always-on invariant check; keep it out of hot loops.
#define CCLAB_CHECK(cond, msg)                                                    \
  do {                                                                            \
    if (!(cond)) ::cclab::detail::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
