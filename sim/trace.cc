// Trace recording (see trace.h). Ranks are threads of process 0, links are
// counters of process 1 and hosts threads of process 2, so a viewer groups
// them apart. Events are formatted straight into a buffer (an nlohmann object
// per event took 8.1 s against 1.1 s for a 16-node hier/hd trace, whose
// simulation takes 0.14 s); the strings that could need escaping go through
// nlohmann.
#include "cclab/sim/trace.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"

namespace cclab::sim {
namespace {

constexpr std::size_t kFlushBytes = 1 << 16;

bool plain(std::string_view s) {
  for (char c : s)
    if (c < 0x20 || c == '"' || c == '\\' || static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// `s` as a JSON string, quotes included.
std::string json_string(std::string_view s) {
  if (plain(s)) return fmt::format("\"{}\"", s);
  return nlohmann::json(std::string(s)).dump();
}

int parse_rank(std::string_view text, std::string_view part, int ranks, std::string_view field) {
  int r = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), r);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || r < 0)
    throw InvalidArgument(
        fmt::format("{}: '{}' is not a rank or a range LO-HI (allowed: e.g. 0-7,64)", field, part));
  if (r >= ranks)
    throw InvalidArgument(fmt::format("{}: rank {} is not one of the {} ranks (allowed: 0 to {})",
                                      field, r, ranks, ranks - 1));
  return r;
}

}  // namespace

std::vector<bool> parse_rank_list(std::string_view text, int ranks, std::string_view field) {
  std::vector<bool> keep(static_cast<std::size_t>(ranks), false);
  if (text.empty()) throw InvalidArgument(fmt::format("{}: no ranks given (e.g. 0-7,64)", field));
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    const std::size_t dash = part.find('-');
    const int lo = parse_rank(part.substr(0, dash), part, ranks, field);
    const int hi =
        dash == std::string_view::npos ? lo : parse_rank(part.substr(dash + 1), part, ranks, field);
    if (hi < lo)
      throw InvalidArgument(
          fmt::format("{}: '{}' runs backwards (allowed: LO-HI with LO <= HI)", field, part));
    for (int r = lo; r <= hi; ++r) keep[r] = true;
    if (comma == std::string_view::npos) return keep;
    text.remove_prefix(comma + 1);
  }
}

void parse_time_window(std::string_view text, std::string_view field, TraceFilter& filter) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    throw InvalidArgument(fmt::format(
        "{}: '{}' is not FROM:UNTIL (allowed: e.g. 10us:2ms, 10us: or :2ms)", field, text));
  const std::string_view from = text.substr(0, colon), until = text.substr(colon + 1);
  filter.from = from.empty() ? 0 : parse_latency(from, field);
  filter.until = until.empty() ? std::numeric_limits<Time>::max() : parse_latency(until, field);
  if (filter.until < filter.from)
    throw InvalidArgument(
        fmt::format("{}: '{}' ends before it starts (allowed: FROM <= UNTIL)", field, text));
}

TraceWriter::TraceWriter(const Topology& topology, std::ostream& out, TraceFilter filter)
    : topo_(topology),
      out_(out),
      filter_(std::move(filter)),
      rate_(topology.num_links(), 0.0),
      traced_(topology.num_links(), filter_.ranks.empty()),
      names_(topology.num_links()) {
  // The document opens with its keys in sorted order, as nlohmann writes one.
  fmt::format_to(std::back_inserter(buf_), R"({{"displayTimeUnit":"ns","traceEvents":[)");
  write_process_names();
}

void TraceWriter::write_process_names() {
  const std::string suffix = filter_.description.empty() ? "" : " (" + filter_.description + ")";
  const char* names[] = {"ranks", "links", "hosts"};
  for (int pid = 0; pid < 3; ++pid) {
    end_event();
    fmt::format_to(std::back_inserter(buf_),
                   R"({{"args":{{"name":{}}},"name":"process_name","ph":"M","pid":{}}})",
                   json_string(std::string(names[pid]) + suffix), pid);
  }
}

// Separates events; the previous one, if any, is complete.
void TraceWriter::end_event() {
  if (events_++ > 0) buf_.push_back(',');
  if (buf_.size() >= kFlushBytes) {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
}

void TraceWriter::finish() {
  fmt::format_to(std::back_inserter(buf_), "]}}\n");
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
  out_.flush();
}

void TraceWriter::reach(Time now) {
  if (window_open_ || now < filter_.from) return;
  window_open_ = true;
  for (std::size_t l = 0; l < rate_.size(); ++l)  // the counters' values as it opens
    if (traced_[l] && rate_[l] != 0) counter(static_cast<LinkId>(l), filter_.from);
}

void TraceWriter::slice_head(int pid, int tid, Time start, Time duration) {
  end_event();
  fmt::format_to(std::back_inserter(buf_), R"({{"dur":{},"ph":"X","pid":{},"tid":{},"ts":{},)",
                 time_to_us(duration), pid, tid, time_to_us(start));
}

void TraceWriter::step_issued(int rank, std::int64_t step, const coll::Step& s, Time now) {
  if (!filter_.keeps(rank) || now > filter_.until) return;
  if (static_cast<std::size_t>(rank) >= open_.size()) open_.resize(rank + 1);
  open_[rank].push_back(Open{step, now, s.kind, s.peer, s.phase});
}

void TraceWriter::step_done(int rank, std::int64_t step, Time now) {
  if (static_cast<std::size_t>(rank) >= open_.size()) return;
  std::vector<Open>& open = open_[rank];
  const auto it =
      std::find_if(open.begin(), open.end(), [&](const Open& o) { return o.step == step; });
  if (it == open.end()) return;
  const Open o = *it;
  *it = open.back();
  open.pop_back();
  reach(now);
  if (!filter_.overlaps(o.start, now)) return;
  slice_head(0, rank, o.start, now - o.start);
  std::string name(coll::step_kind_name(o.kind));
  if (o.kind <= coll::StepKind::kRecvReduce) name += fmt::format(" {}", o.peer);
  if (*o.phase) name += fmt::format(" ({})", o.phase);
  fmt::format_to(std::back_inserter(buf_), R"("args":{{"step":{}}},"name":{}}})", step,
                 json_string(name));
}

void TraceWriter::host_busy(int rank, int peer, bool sending, Time start, Time end) {
  if (!filter_.keeps(rank) || !filter_.overlaps(start, end)) return;
  slice_head(2, rank, start, end - start);
  fmt::format_to(std::back_inserter(buf_), R"("args":{{"peer":{}}},"name":"{} {}"}})", peer,
                 sending ? "send to" : "recv from", peer);
}

void TraceWriter::flow_started(int src, int dst, std::span<const LinkId> links, Time now) {
  if (filter_.ranks.empty() || !(filter_.keeps(src) || filter_.keeps(dst))) return;
  reach(now);
  for (LinkId l : links) {
    if (traced_[l]) continue;
    traced_[l] = true;
    if (window_open_ && now <= filter_.until && rate_[l] != 0) counter(l, now);
  }
}

void TraceWriter::link_rate(LinkId link, double bytes_per_s, Time now) {
  reach(now);
  if (rate_[link] == bytes_per_s) return;
  rate_[link] = bytes_per_s;
  if (traced_[link] && window_open_ && now <= filter_.until) counter(link, now);
}

void TraceWriter::counter(LinkId link, Time ts) {
  end_event();
  fmt::format_to(std::back_inserter(buf_),
                 R"({{"args":{{"utilisation":{}}},"name":{},"ph":"C","pid":1,"ts":{}}})",
                 rate_[link] / topo_.link(link).bw_bps, link_name(link), time_to_us(ts));
}

const std::string& TraceWriter::link_name(LinkId link) {
  std::string& name = names_[link];
  if (name.empty()) name = json_string("link " + topo_.link_name(link));
  return name;
}

}  // namespace cclab::sim
