// The schedule IR: every collective algorithm is a generator of per-rank
// programs in this small vocabulary, and every executor, the simulator and
// the checker interpret the same programs.
//
// Execution model (what every consumer implements and the checker proves):
//  - A rank's program is an ordered list of steps with ids 0, 1, 2, ...
//  - Steps are *issued* in program order. A step is issued only once every
//    step it lists in `deps` has completed (deps name earlier steps of the
//    same rank). Issuing never waits for completion otherwise, so several
//    sends and receives can be in flight.
//  - kCopy and kReduce execute and complete when issued.
//  - kFence completes when every earlier step of the rank has completed; it is
//    how composed phases are separated.
//  - The k-th kSend from rank a to rank b matches the k-th receive (kRecv or
//    kRecvReduce) that b posts from a (FIFO per ordered pair). A matched pair
//    moves its data and completes only when *both* sides are issued
//    (rendezvous: no send is buffered), so schedules must be deadlock-free
//    under that strict model.
//  - A step must not touch a region that an issued, incomplete step of the
//    same rank writes (or write one it reads): such ordering is expressed by
//    deps or fences, never left to timing.
// Regions count elements, not bytes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "cclab/collectives/generator.h"

namespace cclab::coll {

// The buffers a program may name. In place, kInput and kOutput are views of one
// storage (see Schedule::in_place_offsets). kScratch is per-rank workspace of
// Schedule::scratch_count() elements that the executor provides.
enum class BufferId : std::uint8_t { kInput, kOutput, kScratch };

struct Region {
  BufferId buffer = BufferId::kOutput;
  std::uint64_t offset = 0;  // elements
  std::uint64_t count = 0;   // elements
  std::uint64_t end() const { return offset + count; }
  bool operator==(const Region&) const = default;
};

enum class StepKind : std::uint8_t {
  kSend,        // send `src` to `peer`
  kRecv,        // receive from `peer` into `dst` (copy)
  kRecvReduce,  // dst = src (op) incoming from `peer`
  kCopy,        // dst = src
  kReduce,      // dst = dst (op) src
  kFence,       // wait until every earlier step has completed
};

inline constexpr int kMaxDeps = 4;

struct Step {
  StepKind kind = StepKind::kFence;
  std::int32_t peer = -1;
  Region src;
  Region dst;
  std::array<std::int64_t, kMaxDeps> deps{};
  std::uint8_t num_deps = 0;
  // Static label of the phase ("reduce-scatter", "all-gather", ...), for traces
  // and error messages.
  const char* phase = "";
  // kSend only: the matching receive reduces (kRecvReduce) rather than
  // copies. Both ends of a transfer then know its kind without the other's
  // program, so an executor may move the two kinds differently as long as it
  // does so on both sides (gloo: only what feeds a reduction goes in
  // segments). The checker proves it for every algorithm.
  bool into_reduce = false;

  // Bytes on the wire or touched, in elements: the region the step moves.
  std::uint64_t count() const { return kind == StepKind::kSend ? src.count : dst.count; }
  bool is_transfer() const { return kind <= StepKind::kRecvReduce; }
  bool is_recv() const { return kind == StepKind::kRecv || kind == StepKind::kRecvReduce; }
};

std::string_view step_kind_name(StepKind k);
std::string_view buffer_name(BufferId b);
// "recv-reduce from 3: output[10,20) = input[10,20) op in" — for messages.
std::string describe(const Step& s);

using Program = Generator<Step>;

enum class CollectiveKind : std::uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast };
std::string_view collective_name(CollectiveKind k);
CollectiveKind parse_collective(std::string_view name, std::string_view what = "coll");
// nccl-tests' busbw = algbw * factor: 2(n-1)/n for all-reduce, (n-1)/n for
// reduce-scatter and all-gather, 1 for broadcast.
double bus_factor(CollectiveKind kind, int ranks);
// The per-rank count of a call whose buffer (the larger of input and output,
// the size nccl-tests and `cclab bench` give) holds `total` elements:
// total / ranks for reduce-scatter and all-gather, whose count is a rank's
// block; total for the others.
std::uint64_t count_of_total(CollectiveKind kind, int ranks, std::uint64_t total);

// Counts are per rank, in elements, with nccl-tests conventions:
//  all-reduce:      input = output = count
//  reduce-scatter:  input = count * ranks, output = count
//  all-gather:      input = count, output = count * ranks
//  broadcast:       input = output = count (only the root's input is read)
struct CollectiveShape {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int ranks = 1;
  std::uint64_t count = 0;
  int root = 0;  // broadcast only

  std::uint64_t input_count() const;
  std::uint64_t output_count() const;
};

// Where input and output live inside the single storage of an in-place call
// (NCCL's conventions: all-gather's input is the rank's block of the output,
// reduce-scatter's output is the rank's block of the input).
struct InPlaceOffsets {
  std::uint64_t input = 0;
  std::uint64_t output = 0;
  std::uint64_t storage_count = 0;
};

// A schedule for one collective call: the shape plus a program per rank,
// generated lazily (producing one rank's program costs memory proportional to
// that program's in-flight state, never to ranks squared).
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual const CollectiveShape& shape() const = 0;
  // Human name, e.g. "ring(chunks=4)" or "hier(g=4,inner=tree)".
  virtual std::string name() const = 0;
  virtual std::uint64_t scratch_count() const { return 0; }
  virtual Program program(int rank) const = 0;

  int ranks() const { return shape().ranks; }
  InPlaceOffsets in_place_offsets(int rank) const;
};

// Balanced split of `count` elements into `parts` pieces: the first
// count % parts pieces get one element more. Every algorithm takes its offsets
// from here, so all ranks agree on piece sizes by construction.
struct Partition {
  std::uint64_t count = 0;
  std::uint64_t parts = 1;
  std::uint64_t offset(std::uint64_t i) const {
    const std::uint64_t base = count / parts, rem = count % parts;
    return i * base + (i < rem ? i : rem);
  }
  std::uint64_t size(std::uint64_t i) const { return count / parts + (i < count % parts ? 1 : 0); }
};

}  // namespace cclab::coll
