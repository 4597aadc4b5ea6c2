#include "backend.h"

#include <array>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/threads.h"

namespace cclab::bench {
namespace {

// All ranks as threads of this process over shared memory.
class ThreadsBackend final : public Backend {
 public:
  ThreadsBackend(int ranks, std::chrono::milliseconds timeout)
      : world_(ranks, coll::ThreadsOptions{timeout}) {}
  std::string_view name() const override { return "threads"; }
  int ranks() const override { return world_.size(); }
  void run(const std::function<void(coll::Communicator&)>& fn) override { world_.run(fn); }

 private:
  coll::ThreadsWorld world_;
};

struct Entry {
  std::string_view name;
  std::unique_ptr<Backend> (*make)(int ranks, std::chrono::milliseconds timeout);
};

// The registry: one row per backend built into this program.
constexpr std::array kBackends = {
    Entry{"threads",
          [](int ranks, std::chrono::milliseconds timeout) -> std::unique_ptr<Backend> {
            return std::make_unique<ThreadsBackend>(ranks, timeout);
          }},
};

const Entry* find(std::string_view name) {
  for (const auto& e : kBackends)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

std::string backend_names() {
  std::string s;
  for (const auto& e : kBackends) s += fmt::format("{}{}", s.empty() ? "" : ", ", e.name);
  return s;
}

void check_backend_name(std::string_view name) {
  if (find(name) == nullptr)
    throw InvalidArgument(
        fmt::format("--backend: unknown backend '{}' (allowed: {})", name, backend_names()));
}

std::unique_ptr<Backend> make_backend(std::string_view name, int ranks,
                                      std::chrono::milliseconds timeout) {
  check_backend_name(name);
  return find(name)->make(ranks, timeout);
}

}  // namespace cclab::bench
