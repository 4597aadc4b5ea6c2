#include "backend.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <sched.h>

#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/threads.h"
#ifdef CCLAB_HAVE_GLOO
#include "cclab/collectives/gloo.h"
#endif
#ifdef CCLAB_HAVE_CUDA
#include "cclab/collectives/cuda.h"
#endif
#ifdef CCLAB_HAVE_NCCL
#include "cclab/collectives/nccl.h"
#endif

namespace cclab::bench {
namespace {

// Whether every rank of `comm` runs on one kernel: the same boot id (network
// namespaces share it, and so share CLOCK_MONOTONIC). A rank that cannot read
// it counts as a kernel of its own.
[[maybe_unused]] bool same_kernel(coll::Communicator& comm) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::int64_t mine = -1 - comm.rank();  // unreadable: unlike any other rank
  if (std::getline(in, id) && !id.empty())
    mine = static_cast<std::int64_t>(std::hash<std::string>{}(id) >> 2);
  std::int64_t low = mine, high = mine;
  comm.allreduce(&low, &low, 1, coll::DataType::kI64, coll::ReduceOp::kMin);
  comm.allreduce(&high, &high, 1, coll::DataType::kI64, coll::ReduceOp::kMax);
  return low == high;
}

// All ranks as threads of this process over shared memory.
class ThreadsBackend final : public Backend {
 public:
  ThreadsBackend(int ranks, std::chrono::milliseconds timeout, bool pin)
      : world_(ranks, coll::ThreadsOptions{timeout}), pin_(pin) {}
  std::string_view name() const override { return "threads"; }
  int ranks() const override { return world_.size(); }
  void run(const std::function<void(coll::Communicator&)>& fn) override {
    world_.run([&](coll::Communicator& comm) {
      if (pin_) pin_to_core(comm.rank());
      fn(comm);
    });
  }

 private:
  coll::ThreadsWorld world_;
  bool pin_;
};

// This process's identity, or an error saying how to provide one.
coll::Identity identity_or_throw(std::string_view backend) {
  auto id = coll::identity_from_env(coll::process_env());
  if (!id)
    throw InvalidArgument(fmt::format(
        "--backend {}: no rank identity in the environment (set RANK and WORLD_SIZE, or "
        "TF_CONFIG, or start the ranks with `cclab launch -n N -- cclab bench ...` or mpirun)",
        backend));
  return *id;
}

constexpr std::array<std::string_view, 2> kTransports = {"tcp", "ibverbs"};

#ifdef CCLAB_HAVE_GLOO
// --transport, else CCLAB_TRANSPORT, else tcp; errors name whichever chose it.
void set_transport(const std::string& flag, const coll::EnvLookup& env, coll::GlooOptions& g) {
  const auto from_env = env("CCLAB_TRANSPORT");
  const bool by_flag = !flag.empty() || !from_env;
  const std::string name = !flag.empty() ? flag : from_env.value_or("tcp");
  g.transport_what = by_flag ? "--transport" : "CCLAB_TRANSPORT";
  check_transport_name(name, g.transport_what);
  g.transport = name == "ibverbs" ? coll::GlooTransport::kIbverbs : coll::GlooTransport::kTcp;
}

// One rank per process over Gloo's TCP transport.
class GlooBackend final : public Backend {
 public:
  explicit GlooBackend(const BackendOptions& o) {
    const auto env = coll::process_env();
    const auto id = identity_or_throw("gloo");
    local_ranks_ = std::max(1, id.local_world_size);
    auto rendezvous = coll::rendezvous_from(o.rendezvous, env);
    if (!rendezvous)
      throw InvalidArgument(
          "--rendezvous: not given and neither CCLAB_RENDEZVOUS nor MASTER_ADDR/MASTER_PORT is "
          "set (allowed: file:DIR, redis://host:port)");
    coll::GlooOptions g;
    g.rank = id.rank;
    g.world_size = id.world_size;
    g.rendezvous = *rendezvous;
    // A run id keeps the keys of this run apart from a stale run's in the same store.
    g.prefix = fmt::format("cclab/{}/world", env("CCLAB_RUN_ID").value_or("run"));
    g.host = !o.bind.empty() ? o.bind : env("CCLAB_BIND").value_or(id.host);
    g.host_name = id.host;  // TF_CONFIG's host; empty: the hostname
    g.timeout = o.timeout;
    set_transport(o.transport, env, g);
    if (o.eager_bytes) g.eager_bytes = *o.eager_bytes;
    if (o.batch_loop_thread) g.batch_loop_thread = *o.batch_loop_thread;
    // Before Gloo starts its threads, so that they inherit the core.
    if (o.pin) pin_to_core(id.rank);
    comm_ = coll::make_gloo_communicator(g);
  }
  std::string_view name() const override { return "gloo"; }
  int ranks() const override { return comm_->size(); }
  int rank() const override { return comm_->rank(); }
  void run(const std::function<void(coll::Communicator&)>& fn) override { fn(*comm_); }
  bool shares_memory() const override { return false; }
  bool reports() const override { return comm_->rank() == 0; }
  int host_group_size() const override { return comm_->host_group_size(); }
  int ranks_on_host() const override { return local_ranks_; }
  bool shares_clock() override { return same_kernel(*comm_); }

 private:
  int local_ranks_ = 1;
  std::unique_ptr<coll::Communicator> comm_;
};
#endif

// Host memory, 64-byte aligned, zeroed once on allocation (its first touch).
class HostMemory final : public RankMemory {
 public:
  std::byte* allocate(std::size_t bytes) override {
    const std::size_t rounded = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    blocks_.emplace_back(p);
    return p;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<std::byte, Free>> blocks_;
};

#ifdef CCLAB_HAVE_CUDA
// cudaMalloc'd memory on the rank's GPU; inputs and outputs travel by cudaMemcpy.
class DeviceMemory final : public RankMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  std::byte* allocate(std::size_t bytes) override {
    return buffers_.emplace_back(device_, bytes).data();
  }
  bool host_visible() const override { return false; }
  void upload(std::byte* dst, const std::byte* host, std::size_t bytes) override {
    coll::copy_to_device(dst, host, bytes);
  }
  void download(std::byte* host, const std::byte* src, std::size_t bytes) override {
    coll::copy_to_host(host, src, bytes);
  }
  void fill(std::byte* dst, int byte, std::size_t bytes) override {
    coll::fill_device(dst, byte, bytes);
  }

 private:
  int device_;
  std::vector<coll::DeviceBuffer> buffers_;
};

// All ranks as threads of this process on its GPUs (cuda or nccl world).
class GpuBackend final : public Backend {
 public:
  GpuBackend(std::string_view name, std::unique_ptr<coll::GpuWorld> world, bool pin)
      : name_(name), world_(std::move(world)), pin_(pin) {}
  std::string_view name() const override { return name_; }
  int ranks() const override { return world_->size(); }
  void run(const std::function<void(coll::Communicator&)>& fn) override {
    world_->run([&](coll::Communicator& comm) {
      if (pin_) pin_to_core(comm.rank());
      fn(comm);
    });
  }
  std::unique_ptr<RankMemory> memory(int rank) override {
    return std::make_unique<DeviceMemory>(world_->device(rank));
  }
  std::string note() const override { return world_->note(); }

 private:
  std::string_view name_;
  std::unique_ptr<coll::GpuWorld> world_;
  bool pin_;
};

coll::GpuOptions gpu_options(const BackendOptions& o) {
  coll::GpuOptions g;
  g.timeout = o.timeout;
  return g;
}
#endif

struct Entry {
  std::string_view name;
  bool processes;  // one rank per process, identity from the environment
  std::unique_ptr<Backend> (*make)(const BackendOptions& options);
};

// The registry: one row per backend built into this program.
constexpr std::array kBackends = {
    Entry{"threads", false,
          [](const BackendOptions& o) -> std::unique_ptr<Backend> {
            return std::make_unique<ThreadsBackend>(o.ranks, o.timeout, o.pin);
          }},
#ifdef CCLAB_HAVE_GLOO
    Entry{"gloo", true,
          [](const BackendOptions& o) -> std::unique_ptr<Backend> {
            return std::make_unique<GlooBackend>(o);
          }},
#endif
#ifdef CCLAB_HAVE_CUDA
    Entry{"cuda", false,
          [](const BackendOptions& o) -> std::unique_ptr<Backend> {
            return std::make_unique<GpuBackend>(
                "cuda", coll::make_cuda_world(o.ranks, gpu_options(o)), o.pin);
          }},
#endif
#ifdef CCLAB_HAVE_NCCL
    Entry{"nccl", false,
          [](const BackendOptions& o) -> std::unique_ptr<Backend> {
            return std::make_unique<GpuBackend>(
                "nccl", coll::make_nccl_world(o.ranks, gpu_options(o)), o.pin);
          }},
#endif
};

const Entry* find(std::string_view name) {
  for (const auto& e : kBackends)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

void RankMemory::upload(std::byte* dst, const std::byte* host, std::size_t bytes) {
  std::memcpy(dst, host, bytes);
}
void RankMemory::download(std::byte* host, const std::byte* src, std::size_t bytes) {
  std::memcpy(host, src, bytes);
}
void RankMemory::fill(std::byte* dst, int byte, std::size_t bytes) {
  std::memset(dst, byte, bytes);
}

std::unique_ptr<RankMemory> Backend::memory(int) { return std::make_unique<HostMemory>(); }

void pin_to_core(int rank) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(rank % cores, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    throw Error(fmt::format("--pin: cannot pin rank {} to core {}: {}", rank, rank % cores,
                            std::strerror(errno)));
}

std::string transport_names() {
  std::string s;
  for (auto t : kTransports) s += fmt::format("{}{}", s.empty() ? "" : ", ", t);
  return s;
}

void check_transport_name(std::string_view name, std::string_view what) {
  if (std::find(kTransports.begin(), kTransports.end(), name) == kTransports.end())
    throw InvalidArgument(
        fmt::format("{}: unknown transport '{}' (allowed: {})", what, name, transport_names()));
}

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

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options) {
  check_backend_name(name);
  return find(name)->make(options);
}

std::unique_ptr<Backend> make_backend(std::string_view name, int ranks,
                                      std::chrono::milliseconds timeout) {
  BackendOptions o;
  o.ranks = ranks;
  o.timeout = timeout;
  return make_backend(name, o);
}

std::optional<int> process_world_size(std::string_view name) {
  check_backend_name(name);
  if (!find(name)->processes) return std::nullopt;
  return identity_or_throw(name).world_size;
}

}  // namespace cclab::bench
