// Trace recording (see trace.h). Ranks are threads of process 0, links are
// counters of process 1 and hosts threads of process 2, so a viewer groups
// them apart.
#include "cclab/sim/trace.h"

#include <fstream>

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

}  // namespace

void TraceWriter::step_issued(int rank, std::int64_t step, const coll::Step& s, Time now) {
  open_[key(rank, step)] =
      Open{now, step_label(s) + (*s.phase ? fmt::format(" ({})", s.phase) : "")};
}

void TraceWriter::step_done(int rank, std::int64_t step, Time now) {
  const auto it = open_.find(key(rank, step));
  if (it == open_.end()) return;
  events_.push_back(Event{'X', rank, it->second.start, now - it->second.start,
                          std::move(it->second.name), static_cast<double>(step)});
  open_.erase(it);
}

void TraceWriter::host_busy(int rank, int peer, bool sending, Time start, Time end) {
  events_.push_back(Event{'H', rank, start, end - start,
                          fmt::format("{} {}", sending ? "send to" : "recv from", peer),
                          static_cast<double>(peer)});
}

void TraceWriter::link_rate(LinkId link, double bytes_per_s, Time now) {
  events_.push_back(Event{'C', link, now, 0, "link " + topo_.link_name(link),
                          bytes_per_s / topo_.link(link).bw_bps});
}

std::string TraceWriter::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  list.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "ranks"}}}});
  list.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "links"}}}});
  list.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 2}, {"args", {{"name", "hosts"}}}});
  // A slice on thread `e.track` of process `pid`, with one argument.
  const auto slice = [](const Event& e, int pid, nlohmann::json args) {
    return nlohmann::json{{"name", e.name},
                          {"ph", "X"},
                          {"pid", pid},
                          {"tid", e.track},
                          {"ts", time_to_us(e.start)},
                          {"dur", time_to_us(e.duration)},
                          {"args", std::move(args)}};
  };
  for (const Event& e : events_) {
    if (e.phase == 'H')
      list.push_back(slice(e, 2, {{"peer", static_cast<int>(e.value)}}));
    else if (e.phase == 'X')
      list.push_back(slice(e, 0, {{"step", static_cast<std::int64_t>(e.value)}}));
    else
      list.push_back({{"name", e.name},
                      {"ph", "C"},
                      {"pid", 1},
                      {"ts", time_to_us(e.start)},
                      {"args", {{"utilisation", e.value}}}});
  }
  const nlohmann::json trace = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ns"}};
  return trace.dump();
}

void TraceWriter::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw IoError(fmt::format("--trace: cannot open '{}' for writing", path));
  out << to_json() << '\n';
  if (!out) throw IoError(fmt::format("--trace: cannot write '{}'", path));
}

}  // namespace cclab::sim
