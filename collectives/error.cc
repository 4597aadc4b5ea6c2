#include "cclab/collectives/error.h"

#include <fmt/format.h>

namespace cclab::detail {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal check failed: {} ({}:{}): {}", expr, file, line, msg));
}

}  // namespace cclab::detail
