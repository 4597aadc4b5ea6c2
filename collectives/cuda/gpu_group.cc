#include "gpu_group.h"

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cuda_check.h"
#include "kernels.h"

namespace cclab::coll::detail {
namespace {

using Clock = std::chrono::steady_clock;

class GpuRequest final : public RequestImpl {
 public:
  GpuRequest(GpuGroup& group, int rank, CallRendezvous::Ticket ticket)
      : group_(group), rank_(rank), ticket_(std::move(ticket)) {}
  void wait() override;
  bool test() override;

 private:
  cudaEvent_t done_event() const {
    return std::static_pointer_cast<DoneEvents>(ticket_.state->result)->events[rank_];
  }
  // True once the rank's stream passed the collective's end.
  bool query() const;

  GpuGroup& group_;
  int rank_;
  CallRendezvous::Ticket ticket_;
  bool complete_ = false;
};

bool GpuRequest::query() const {
  const cudaError_t status = cudaEventQuery(done_event());
  if (status == cudaErrorNotReady) return false;
  CCLAB_CUDA(status);
  return true;
}

void GpuRequest::wait() {
  if (complete_) return;
  const auto start = Clock::now();
  group_.rendezvous().wait_launched(ticket_, rank_, group_.timeout());
  // Poll rather than cudaEventSynchronize, which cannot time out.
  for (int spins = 0; !query(); ++spins) {
    if (Clock::now() - start > group_.timeout())
      throw TimeoutError(
          fmt::format("rank {}: timed out after {} ms waiting for collective #{} "
                      "on GPU {}",
                      rank_, group_.timeout().count(), ticket_.seq, group_.rank(rank_).device));
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  complete_ = true;
}

bool GpuRequest::test() {
  if (!complete_) complete_ = group_.rendezvous().launched(ticket_) && query();
  return complete_;
}

bool reduces(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter;
}

}  // namespace

DoneEvents::~DoneEvents() {
  for (auto e : events)
    if (e) cudaEventDestroy(e);
}

int require_devices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw BackendUnavailable(
        fmt::format("no usable CUDA device: cudaGetDeviceCount: {}", cuda_error_text(status)));
  }
  if (count == 0) throw BackendUnavailable("no usable CUDA device: cudaGetDeviceCount found 0");
  return count;
}

std::vector<int> place_ranks(int ranks, const GpuOptions& options, int device_count) {
  if (ranks < 1) throw InvalidArgument(fmt::format("ranks: must be >= 1, got {}", ranks));
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (int d = 0; d < device_count; ++d) devices.push_back(d);
  for (int d : devices)
    if (d < 0 || d >= device_count)
      throw InvalidArgument(fmt::format("devices: no CUDA device {} (this machine has {}: 0..{})",
                                        d, device_count, device_count - 1));
  std::vector<int> out(ranks);
  for (int r = 0; r < ranks; ++r) out[r] = devices[r % devices.size()];
  return out;
}

GpuGroup::GpuGroup(int ranks, const GpuOptions& options, TransferLowering lowering)
    : lowering_(lowering), timeout_(options.timeout), rendezvous_(ranks) {
  device_count_ = require_devices();
  const auto devices = place_ranks(ranks, options, device_count_);
  ranks_.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto& g = ranks_[r];
    g.device = devices[r];
    set_device(g.device);
    CCLAB_CUDA(cudaDeviceGetAttribute(&g.sm_count, cudaDevAttrMultiProcessorCount, g.device));
    CCLAB_CUDA(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    CCLAB_CUDA(cudaEventCreateWithFlags(&g.entry, cudaEventDisableTiming));
  }
}

GpuGroup::~GpuGroup() {
  for (auto& [device, pool] : events_)
    for (auto e : pool) cudaEventDestroy(e);
  for (auto& g : ranks_) {
    cudaSetDevice(g.device);
    if (g.stream) cudaStreamSynchronize(g.stream);
    if (g.entry) cudaEventDestroy(g.entry);
    if (g.stream) cudaStreamDestroy(g.stream);
  }
}

void GpuGroup::set_device(int device) {
  if (device == current_device_) return;
  CCLAB_CUDA(cudaSetDevice(device));
  current_device_ = device;
}

void GpuGroup::ensure_events(int count) {
  for (const auto& g : ranks_) {
    auto& pool = events_[g.device];
    if (static_cast<int>(pool.size()) >= count) continue;
    set_device(g.device);
    while (static_cast<int>(pool.size()) < count) {
      cudaEvent_t e = nullptr;
      CCLAB_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      pool.push_back(e);
    }
  }
}

void GpuGroup::record(const PlanOp& op) {
  const auto& g = ranks_[op.stream];
  set_device(g.device);
  CCLAB_CUDA(cudaEventRecord(events_[g.device][op.event], g.stream));
}

void GpuGroup::wait(const PlanOp& op, const CachedPlan& plan) {
  const auto& g = ranks_[op.stream];
  const int recorder = ranks_[plan.event_stream[op.event]].device;
  set_device(g.device);
  CCLAB_CUDA(cudaStreamWaitEvent(g.stream, events_[recorder][op.event], 0));
}

std::string GpuGroup::placement() const {
  std::set<int> used;
  for (const auto& g : ranks_) used.insert(g.device);
  std::set<std::string> names;
  for (int d : used) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) names.insert(prop.name);
  }
  std::string models;
  for (const auto& n : names) models += fmt::format("{}{}", models.empty() ? "" : ", ", n);
  const int gpus = static_cast<int>(used.size());
  const int per = (size() + gpus - 1) / gpus;
  return fmt::format("{} rank(s) on {} GPU(s) ({}){}", size(), gpus, models,
                     per > 1 ? fmt::format(", virtual ranks: up to {} per GPU (separate buffers "
                                           "and streams)",
                                           per)
                             : "");
}

void GpuGroup::check_calls(const std::vector<CollectiveCall>& calls) const {
  const auto& c0 = calls[0];
  for (std::size_t r = 1; r < calls.size(); ++r) {
    const auto& c = calls[r];
    if (c.shape.kind != c0.shape.kind || c.shape.count != c0.shape.count ||
        c.shape.root != c0.shape.root || c.dtype != c0.dtype || c.op != c0.op ||
        c.algo.algo != c0.algo.algo || c.algo.chunks != c0.algo.chunks)
      throw InvalidArgument(
          fmt::format("ranks 0 and {} made different collective calls ({} {} x{} vs {} {} x{})", r,
                      collective_name(c0.shape.kind), dtype_name(c0.dtype), c0.shape.count,
                      collective_name(c.shape.kind), dtype_name(c.dtype), c.shape.count));
  }
}

const CachedPlan& GpuGroup::plan_for(const CollectiveCall& call) {
  const auto& s = call.shape;
  const auto& a = call.algo;
  const std::size_t es = dtype_size(call.dtype);
  const PlanKey key{static_cast<int>(s.kind),
                    s.ranks,
                    s.count,
                    s.root,
                    static_cast<int>(a.algo),
                    a.chunks,
                    a.group_size,
                    static_cast<int>(a.inner),
                    es};
  auto& slot = plans_[key];
  if (slot) return *slot;
  if (plans_.size() > 256) {  // a sweep of many sizes: keep memory bounded
    plans_.clear();
    return plan_for(call);
  }
  slot = std::make_unique<CachedPlan>();
  slot->schedule = make_schedule(s, a, es);
  slot->plan = plan_streams(*slot->schedule, lowering_);
  slot->peers_read.resize(size());
  for (const auto& op : slot->plan.ops)
    for (int peer : {op.a.rank, op.b.rank})
      if (peer >= 0 && peer != op.stream) slot->peers_read[op.stream].push_back(peer);
  slot->event_stream.assign(slot->plan.events, 0);
  slot->peer_reduce_max.assign(size(), 0);
  for (const auto& op : slot->plan.ops) {
    if (op.kind == PlanOpKind::kRecord) slot->event_stream[op.event] = op.stream;
    if (op.kind == PlanOpKind::kReduce && op.b.rank != op.stream)
      slot->peer_reduce_max[op.stream] = std::max(slot->peer_reduce_max[op.stream], op.count);
  }
  for (auto& v : slot->peers_read) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return *slot;
}

// Grows scratch and staging and resolves every rank's base addresses. Growth
// is the one host synchronisation (first calls of a size only): earlier
// collectives, possibly reading a rank's old scratch from another GPU, finish
// before it is freed.
std::vector<RankAddresses> GpuGroup::prepare(const CachedPlan& p,
                                             const std::vector<CollectiveCall>& calls) {
  const std::size_t es = dtype_size(calls[0].dtype);
  const std::size_t scratch = p.schedule->scratch_count() * es;
  bool grow = false;
  for (int r = 0; r < size(); ++r)
    grow |= ranks_[r].scratch.bytes() < scratch ||
            ranks_[r].staging.bytes() < staging_elements(p, r) * es;
  if (grow)
    for (auto& g : ranks_) {
      set_device(g.device);
      CCLAB_CUDA(cudaStreamSynchronize(g.stream));
    }
  std::vector<RankAddresses> out(size());
  for (int r = 0; r < size(); ++r) {
    auto& g = ranks_[r];
    const std::size_t staging = staging_elements(p, r) * es;
    if (g.scratch.bytes() < scratch) g.scratch = DeviceBuffer(g.device, scratch);
    if (g.staging.bytes() < staging) g.staging = DeviceBuffer(g.device, staging);
    current_device_ = -1;  // DeviceBuffer may have switched it
    out[r] = {static_cast<std::byte*>(const_cast<void*>(calls[r].send)),
              static_cast<std::byte*>(calls[r].recv), g.scratch.data(), g.staging.data()};
  }
  return out;
}

// avg's division, then each rank's completion event.
void GpuGroup::finish(const std::vector<CollectiveCall>& calls) {
  const auto& c0 = calls[0];
  for (int r = 0; r < size(); ++r) {
    auto& g = ranks_[r];
    set_device(g.device);
    if (c0.op == ReduceOp::kAvg && reduces(c0.shape.kind))
      launch_divide(g.stream, calls[r].recv, c0.shape.output_count(), c0.dtype, c0.shape.ranks,
                    g.sm_count);
  }
}

namespace {
// The current device is per host thread and the launching thread is whichever
// rank arrived last: forget the cached device, and give the thread its own
// back afterwards.
class DeviceRestorer {
 public:
  DeviceRestorer() { CCLAB_CUDA(cudaGetDevice(&saved_)); }
  ~DeviceRestorer() { cudaSetDevice(saved_); }

 private:
  int saved_ = 0;
};
}  // namespace

std::shared_ptr<void> GpuGroup::launch(const std::vector<CollectiveCall>& calls,
                                       const std::vector<int>& variants) {
  const DeviceRestorer restore;
  current_device_ = -1;
  check_calls(calls);
  if (std::any_of(variants.begin(), variants.end(), [&](int v) { return v != variants[0]; }))
    throw InvalidArgument("ranks asked for different implementations of one collective");
  auto done = std::make_shared<DoneEvents>();
  done->events.resize(size(), nullptr);
  for (int r = 0; r < size(); ++r) {
    set_device(ranks_[r].device);
    CCLAB_CUDA(cudaEventCreateWithFlags(&done->events[r], cudaEventDisableTiming));
  }
  if (variants[0] != 0) {
    launch_variant(variants[0], calls);
  } else {
    const CachedPlan& plan = plan_for(calls[0]);
    const auto addresses = prepare(plan, calls);
    ensure_events(plan.plan.events);
    execute(plan, addresses, calls[0]);
    finish(calls);
  }
  for (int r = 0; r < size(); ++r) {
    set_device(ranks_[r].device);
    CCLAB_CUDA(cudaEventRecord(done->events[r], ranks_[r].stream));
  }
  return done;
}

void GpuGroup::launch_variant(int variant, const std::vector<CollectiveCall>&) {
  throw InternalError(fmt::format("this GPU backend has no variant {}", variant));
}

GpuComm::GpuComm(GpuGroup& group, int rank) : group_(group), rank_(rank) {
  set_timeout(group.timeout());
}

Request GpuComm::start(const CollectiveCall& call) { return start_variant(call, 0); }

Request GpuComm::start_variant(const CollectiveCall& call, int variant) {
  auto ticket = group_.rendezvous().arrive(
      rank_, call, variant, [this](std::uint64_t, const auto& calls, const auto& variants) {
        return group_.launch(calls, variants);
      });
  return Request(std::make_shared<GpuRequest>(group_, rank_, std::move(ticket)));
}

void GpuComm::barrier() { group_.rendezvous().barrier(rank_, timeout()); }

std::unique_ptr<Communicator> GpuComm::split(int, int) {
  throw BackendUnavailable("the GPU backends do not support split() yet");
}

GroupWorld::GroupWorld(std::unique_ptr<GpuGroup> group, std::string note)
    : group_(std::move(group)), note_(std::move(note)) {
  for (int r = 0; r < group_->size(); ++r) comms_.push_back(std::make_unique<GpuComm>(*group_, r));
}

}  // namespace cclab::coll::detail
