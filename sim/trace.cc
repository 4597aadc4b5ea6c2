// Trace recording (see trace.h). Ranks are threads of process 0, links are
// counters of process 1 and hosts threads of process 2, so a viewer groups
// them apart.
#include "cclab/sim/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"

namespace cclab::sim {
namespace {

std::uint64_t key(int rank, std::int64_t step) {
  return (static_cast<std::uint64_t>(rank) << 40) | static_cast<std::uint64_t>(step);
}

std::string step_label(const coll::Step& s) {
  const std::string kind(coll::step_kind_name(s.kind));
  if (!s.is_transfer()) return kind;
  return fmt::format("{} {}", kind, s.peer);
}

// Metadata naming process `pid`.
std::string process_name(int pid, const char* name) {
  return nlohmann::json{
      {"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}}
      .dump();
}

// A slice on thread `tid` of process `pid`, with one argument.
std::string slice(std::string name, int pid, int tid, Time start, Time duration,
                  nlohmann::json args) {
  return nlohmann::json{{"name", std::move(name)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", time_to_us(start)},
                        {"dur", time_to_us(duration)},
                        {"args", std::move(args)}}
      .dump();
}

}  // namespace

TraceWriter::TraceWriter(const Topology& topology, std::ostream& out) : topo_(topology), out_(out) {
  // The keys in the order a whole document's dump() gives them (sorted).
  out_ << R"({"displayTimeUnit":"ns","traceEvents":[)";
  emit(process_name(0, "ranks"));
  emit(process_name(1, "links"));
  emit(process_name(2, "hosts"));
}

void TraceWriter::emit(std::string_view event) {
  if (events_++ > 0) out_ << ',';
  out_ << event;
}

void TraceWriter::finish() { out_ << "]}\n" << std::flush; }

void TraceWriter::step_issued(int rank, std::int64_t step, const coll::Step& s, Time now) {
  open_[key(rank, step)] =
      Open{now, step_label(s) + (*s.phase ? fmt::format(" ({})", s.phase) : "")};
}

void TraceWriter::step_done(int rank, std::int64_t step, Time now) {
  const auto it = open_.find(key(rank, step));
  if (it == open_.end()) return;
  emit(slice(std::move(it->second.name), 0, rank, it->second.start, now - it->second.start,
             {{"step", step}}));
  open_.erase(it);
}

void TraceWriter::host_busy(int rank, int peer, bool sending, Time start, Time end) {
  emit(slice(fmt::format("{} {}", sending ? "send to" : "recv from", peer), 2, rank, start,
             end - start, {{"peer", peer}}));
}

void TraceWriter::link_rate(LinkId link, double bytes_per_s, Time now) {
  emit(nlohmann::json{{"name", "link " + topo_.link_name(link)},
                      {"ph", "C"},
                      {"pid", 1},
                      {"ts", time_to_us(now)},
                      {"args", {{"utilisation", bytes_per_s / topo_.link(link).bw_bps}}}}
           .dump());
}

}  // namespace cclab::sim
