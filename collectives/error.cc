#include "cclab/collectives/error.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

namespace cclab {

void require_writable(const std::string& path, std::string_view flag) {
  if (!std::ofstream(path, std::ios::app))
    throw IoError(fmt::format("{}: cannot open '{}' for writing", flag, path));
}

std::string read_text_file(const std::string& path, std::string_view what) {
  if (std::filesystem::is_directory(path))
    throw IoError(fmt::format("{} '{}': a directory, not a file", what, path));
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("{} '{}': cannot open it for reading", what, path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
}

void require_memory(std::string_view flag, std::string_view what, double bytes) {
  const std::uint64_t have = physical_memory_bytes();
  if (have == 0 || bytes <= double(have)) return;
  constexpr double kGiB = double(1u << 30);
  throw InvalidArgument(
      fmt::format("{}: {} needs {:.1f} GiB, more than this machine's {:.1f} GiB of memory", flag,
                  what, bytes / kGiB, double(have) / kGiB));
}

namespace detail {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal check failed: {} ({}:{}): {}", expr, file, line, msg));
}

}  // namespace detail
}  // namespace cclab
