#include "cclab/collectives/schedule.h"

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::coll {

std::string_view step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kSend:
      return "send";
    case StepKind::kRecv:
      return "recv";
    case StepKind::kRecvReduce:
      return "recv-reduce";
    case StepKind::kCopy:
      return "copy";
    case StepKind::kReduce:
      return "reduce";
    case StepKind::kFence:
      return "fence";
  }
  return "?";
}

std::string_view buffer_name(BufferId b) {
  switch (b) {
    case BufferId::kInput:
      return "input";
    case BufferId::kOutput:
      return "output";
    case BufferId::kScratch:
      return "scratch";
  }
  return "?";
}

namespace {
std::string region_text(const Region& r) {
  return fmt::format("{}[{},{})", buffer_name(r.buffer), r.offset, r.end());
}
}  // namespace

std::string describe(const Step& s) {
  const char* sep = *s.phase ? " " : "";
  switch (s.kind) {
    case StepKind::kSend:
      return fmt::format("{}{}send {} to rank {}", s.phase, sep, region_text(s.src), s.peer);
    case StepKind::kRecv:
      return fmt::format("{}{}recv {} from rank {}", s.phase, sep, region_text(s.dst), s.peer);
    case StepKind::kRecvReduce:
      return fmt::format("{}{}recv-reduce {} = {} op data from rank {}", s.phase, sep,
                         region_text(s.dst), region_text(s.src), s.peer);
    case StepKind::kCopy:
      return fmt::format("{}{}copy {} -> {}", s.phase, sep, region_text(s.src), region_text(s.dst));
    case StepKind::kReduce:
      return fmt::format("{}{}reduce {} op= {}", s.phase, sep, region_text(s.dst),
                         region_text(s.src));
    case StepKind::kFence:
      return fmt::format("{}{}fence", s.phase, sep);
  }
  return "?";
}

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kReduceScatter:
      return "reducescatter";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
  }
  return "?";
}

CollectiveKind parse_collective(std::string_view name, std::string_view what) {
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                 CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    if (collective_name(k) == name) return k;
  throw InvalidArgument(fmt::format(
      "{}: unknown collective '{}' (allowed: allreduce, reducescatter, allgather, broadcast)", what,
      name));
}

double bus_factor(CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return (n - 1) / n;
    case CollectiveKind::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

std::uint64_t count_of_total(CollectiveKind kind, int ranks, std::uint64_t total) {
  const bool blocks = kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllGather;
  return blocks ? total / static_cast<std::uint64_t>(ranks) : total;
}

std::uint64_t CollectiveShape::input_count() const {
  return kind == CollectiveKind::kReduceScatter ? count * ranks : count;
}

std::uint64_t CollectiveShape::output_count() const {
  return kind == CollectiveKind::kAllGather ? count * ranks : count;
}

InPlaceOffsets Schedule::in_place_offsets(int rank) const {
  const auto& s = shape();
  InPlaceOffsets o;
  o.storage_count = std::max(s.input_count(), s.output_count());
  if (s.kind == CollectiveKind::kAllGather) o.input = s.count * rank;
  if (s.kind == CollectiveKind::kReduceScatter) o.output = s.count * rank;
  return o;
}

}  // namespace cclab::coll
