#include "cclab/collectives/error.h"

#include <fstream>

#include <fmt/format.h>

namespace cclab {

void require_writable(const std::string& path, std::string_view flag) {
  if (!std::ofstream(path, std::ios::app))
    throw IoError(fmt::format("{}: cannot open '{}' for writing", flag, path));
}

namespace detail {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal check failed: {} ({}:{}): {}", expr, file, line, msg));
}

}  // namespace detail
}  // namespace cclab
