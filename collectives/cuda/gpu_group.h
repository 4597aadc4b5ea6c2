// What the cuda and nccl worlds share: per-rank device state, the call
// rendezvous, planning with a cache, per-call scratch and staging, avg's
// division and the completion events that requests wait on. A backend
// supplies how a plan's ops (or a baseline variant) are enqueued.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>

#include "../call_rendezvous.h"
#include "cclab/collectives/cuda.h"
#include "cclab/collectives/schedule.h"
#include "cclab/collectives/stream_plan.h"

namespace cclab::coll::detail {

struct GpuRank {
  int device = 0;
  int sm_count = 1;
  cudaStream_t stream = nullptr;
  cudaEvent_t entry = nullptr;  // recorded where each collective starts on the stream
  DeviceBuffer scratch;
  DeviceBuffer staging;
};

// Base address of each PlanBuffer of one rank for one call.
using RankAddresses = std::array<std::byte*, 4>;

// A plan and what executing it needs beyond the ops.
struct CachedPlan {
  std::unique_ptr<Schedule> schedule;
  StreamPlan plan;
  std::vector<std::vector<int>> peers_read;    // [stream] other ranks whose memory it reads
  std::vector<int> event_stream;               // [event] the stream that records it
  std::vector<std::uint64_t> peer_reduce_max;  // [stream] largest reduce reading a peer
};

class GpuGroup {
 public:
  GpuGroup(int ranks, const GpuOptions& options, TransferLowering lowering);
  virtual ~GpuGroup();
  GpuGroup(const GpuGroup&) = delete;
  GpuGroup& operator=(const GpuGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  const GpuRank& rank(int r) const { return ranks_[r]; }
  int device_count() const { return device_count_; }
  CallRendezvous& rendezvous() { return rendezvous_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // "4 ranks on 1 GPU (virtual ranks: 4 per GPU)".
  std::string placement() const;

  // The rendezvous launcher: enqueues one matched set of calls on every
  // rank's stream and returns the per-rank completion events (DoneEvents).
  std::shared_ptr<void> launch(const std::vector<CollectiveCall>& calls,
                               const std::vector<int>& variants);

 protected:
  // Enqueues the plan's ops (the device is switched per op with set_device).
  virtual void execute(const CachedPlan& plan, const std::vector<RankAddresses>& addresses,
                       const CollectiveCall& call) = 0;
  // Staging elements rank r needs for `plan` (default: what the plan asks).
  virtual std::uint64_t staging_elements(const CachedPlan& plan, int r) const {
    return plan.plan.staging_count[r];
  }
  // A variant other than 0 (a backend's baseline); the default rejects it.
  virtual void launch_variant(int variant, const std::vector<CollectiveCall>& calls);
  void set_device(int device);
  // Plan events: a pool per device, reused by every collective (a wait
  // captures the event's state when enqueued, so re-recording later is safe).
  void ensure_events(int count);
  void record(const PlanOp& op);
  void wait(const PlanOp& op, const CachedPlan& plan);
  int current_device_ = -1;
  std::vector<GpuRank> ranks_;
  std::map<int, std::vector<cudaEvent_t>> events_;  // per device

 private:
  const CachedPlan& plan_for(const CollectiveCall& call);
  void check_calls(const std::vector<CollectiveCall>& calls) const;
  std::vector<RankAddresses> prepare(const CachedPlan& plan,
                                     const std::vector<CollectiveCall>& calls);
  void finish(const std::vector<CollectiveCall>& calls);

  TransferLowering lowering_;
  int device_count_ = 0;
  std::chrono::milliseconds timeout_;
  CallRendezvous rendezvous_;
  using PlanKey = std::tuple<int, int, std::uint64_t, int, int, int, int, int, std::size_t>;
  std::map<PlanKey, std::unique_ptr<CachedPlan>> plans_;
};

// Completion events of one launched set, one per rank.
struct DoneEvents {
  std::vector<cudaEvent_t> events;
  ~DoneEvents();
};

// A rank's communicator over a GpuGroup.
class GpuComm final : public Communicator {
 public:
  GpuComm(GpuGroup& group, int rank);
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  Request start(const CollectiveCall& call) override;
  // A call every rank makes with the same `variant` (0: our schedules).
  Request start_variant(const CollectiveCall& call, int variant);
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  GpuGroup& group() { return group_; }

 private:
  GpuGroup& group_;
  int rank_;
};

// The GpuWorld of a group: its communicators and placement note.
class GroupWorld final : public GpuWorld {
 public:
  GroupWorld(std::unique_ptr<GpuGroup> group, std::string note);
  int size() const override { return group_->size(); }
  int device(int rank) const override { return group_->rank(rank).device; }
  Communicator& comm(int rank) override { return *comms_.at(rank); }
  std::string note() const override { return note_; }

 private:
  std::unique_ptr<GpuGroup> group_;
  std::vector<std::unique_ptr<GpuComm>> comms_;
  std::string note_;
};

// Visible devices, or BackendUnavailable("no usable CUDA device: <CUDA's error>").
int require_devices();
// The devices of `ranks` ranks under `options`: InvalidArgument for a bad index.
std::vector<int> place_ranks(int ranks, const GpuOptions& options, int device_count);

}  // namespace cclab::coll::detail
