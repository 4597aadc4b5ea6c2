// Lowering of a schedule onto GPU streams: the pure-host half of the cuda and
// nccl executors, built and tested without a GPU.
//
// All ranks of a GPU world live in one process, so one host thread can enqueue
// every rank's work. The planner runs the schedule's execution model
// (schedule.h) for all ranks at once, in host order, and writes down what each
// rank's stream must do:
//  - local steps (copy, reduce) become kernels on the rank's stream;
//  - a matched send/recv pair becomes, with kPull, one op on the receiver's
//    stream that reads the sender's buffer (peer copy, or a fused "read peer,
//    reduce, write" kernel) after waiting for the point of the sender's stream
//    where the send was issued; with kSendRecv (NCCL), a send op on the
//    sender's stream and a recv op on the receiver's, launched as one group
//    (recv-reduce receives into per-rank staging, then reduces);
//  - a dependency on a step that completes on another stream becomes an event
//    wait; a fence waits for every step of the rank completed elsewhere.
// Waits are emitted lazily, just before the stream's next op, and dropped when
// an earlier wait or another pending one implies them (vector clocks over the
// streams); an event is recorded only where some stream waits on it. A rank's
// stream ends with an implicit fence, so once it is done, every step of the
// rank is, including sends that other streams read.
//
// Why this cannot deadlock on the device: every wait is on an event recorded
// earlier in host order, so host order is a topological order of all waits.
// The host-side run itself terminates exactly when the schedule is
// deadlock-free under the rendezvous model, which the checker proves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cclab/collectives/schedule.h"

namespace cclab::coll {

// How a matched send/recv pair becomes stream work.
enum class TransferLowering : std::uint8_t {
  kPull,      // one op on the receiver's stream reads the sender's memory
  kSendRecv,  // a send on the sender's stream + a recv on the receiver's
};

// The buffers a plan names: the schedule's three plus per-rank staging that a
// kSendRecv recv-reduce receives into (reused: recv and reduce are
// consecutive on the receiver's stream, which runs them in order).
enum class PlanBuffer : std::uint8_t { kInput, kOutput, kScratch, kStaging };

struct BufferRef {
  int rank = -1;
  PlanBuffer buffer = PlanBuffer::kOutput;
  std::uint64_t offset = 0;  // elements
  bool operator==(const BufferRef&) const = default;
};

enum class PlanOpKind : std::uint8_t {
  kCopy,    // dst = a (a may be another rank's: a peer copy)
  kReduce,  // dst = a (op) b (b may be another rank's: read peer, reduce, write)
  kSend,    // kSendRecv only: send `a` to rank `peer`
  kRecv,    // kSendRecv only: receive into `dst` from rank `peer`
  kRecord,  // record event `event` on the stream
  kWait,    // the stream waits for event `event`
};

struct PlanOp {
  PlanOpKind kind = PlanOpKind::kCopy;
  int stream = 0;  // the rank whose stream runs the op
  int peer = -1;   // kSend, kRecv
  BufferRef dst, a, b;
  std::uint64_t count = 0;  // elements
  int event = -1;           // kRecord, kWait
  int group = -1;           // kSend/kRecv of one matched pair share a group
};

// Which op carries out a schedule step; -1 for fences and empty steps.
struct StepOps {
  std::int64_t first = -1;  // the op that does the step's work
  std::int64_t done = -1;   // the last op of the step (recv-reduce: the reduce)
};

struct StreamPlan {
  int streams = 0;
  int events = 0;
  std::vector<PlanOp> ops;                   // in host enqueue order
  std::vector<std::uint64_t> staging_count;  // per rank, elements
  std::vector<std::vector<StepOps>> steps;   // [rank][step id]
  std::uint64_t transfers = 0;               // matched send/recv pairs
  std::uint64_t waits_dropped = 0;           // implied by earlier waits
};

// Builds the plan of `schedule`; throws InternalError if the schedule
// deadlocks or a matched pair disagrees on its size.
StreamPlan plan_streams(const Schedule& schedule, TransferLowering lowering);

std::string_view plan_op_name(PlanOpKind k);
// "rank 2: reduce output[0,8) = input[0,8) op rank 1 output[0,8)", for messages.
std::string describe(const PlanOp& op);

}  // namespace cclab::coll
