#include "cclab/collectives/error.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

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

namespace detail {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal check failed: {} ({}:{}): {}", expr, file, line, msg));
}

}  // namespace detail
}  // namespace cclab
