#include "report.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <ostream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "cclab/collectives/error.h"
#include "cclab_git_commit.h"  // generated at build time: CCLAB_GIT_COMMIT
#include "peers.h"

// Set by bench/CMakeLists.txt on this file only.
#ifndef CCLAB_BUILD_TYPE
#define CCLAB_BUILD_TYPE "unknown"
#endif

namespace cclab::bench {
namespace {

using coll::CollectiveKind;

bool has_redop(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
}

std::string redop_name(const BenchConfig& c) {
  return has_redop(c.coll) ? std::string(coll::op_name(c.op)) : "none";
}

bool uses_hier(const BenchConfig& c) {
  for (auto a : c.algos)
    if (coll::uses_groups(a)) return true;
  return false;
}

// The columns, shared by the header line (after '#') and the rows (after ' ').
constexpr const char* kColumns =
    "{:>11} {:>12} {:>5} {:>6} {:>7} {:>11} {:>12} {:>12} {:>7} {:>11} {:>7}";

}  // namespace

void print_table_head(std::ostream& out, const BenchConfig& c) {
  out << fmt::format(
      "# cclab bench: backend {}, ranks {}, coll {}, dtype {}, op {}, {}, chunks {}, iters {}, "
      "warmup {}\n",
      c.backend, c.ranks, coll::collective_name(c.coll), coll::dtype_name(c.dtype), redop_name(c),
      c.in_place ? "in-place" : "out-of-place", fmt::join(c.chunks, ","), c.iters, c.warmup);
  out << fmt::format("# check {}, timeout {} ms", c.check ? 1 : 0, c.timeout.count());
  if (c.batch > 1) out << fmt::format(", batch {} (time: mean of that many calls)", c.batch);
  if (c.interleave)
    out << ", interleaved (each iteration runs every row of a size once, in a balanced order)";
  if (c.timing == Timing::kSpan)
    out << ", timing span (a call: from the last rank's start to the last rank's end)";
  if (c.coll == CollectiveKind::kBroadcast) out << fmt::format(", root {}", c.root);
  if (uses_hier(c) && (!c.upper_groups.empty() || c.rotate_levels))
    out << fmt::format(", group levels {}{} (hier; rings: groups of {}), hier inner {}",
                       coll::group_levels_name(c.group_size, c.upper_groups),
                       c.rotate_levels ? ", rotated" : "", c.group_size,
                       coll::join_names(c.inners));
  else if (uses_hier(c))
    out << fmt::format(", group size {} (hier, rings), hier inner {}",
                       coll::group_size_or_default(c.ranks, c.group_size),
                       coll::join_names(c.inners));
  out << '\n';
  if (!c.placement.empty()) out << "# " << c.placement << '\n';
  if (c.backend == "gloo")
    out << fmt::format(
        "# tcp congestion control {} (net.ipv4.tcp_congestion_control); {}\n",
        tcp_congestion_control(),
        c.row_connections
            ? "every row on TCP connections of its own"
            : "ours on one set of TCP connections, the peers on another, the sweep's own traffic "
              "on a third");
  if (c.coll == CollectiveKind::kReduceScatter || c.coll == CollectiveKind::kAllGather)
    out << "# size(B) and count describe the larger buffer (reducescatter input, allgather "
           "output); count is its total element count\n";
  out << "#\n#"
      << fmt::format(kColumns, "size(B)", "count", "type", "redop", "algo", "time(us)",
                     "algbw(GB/s)", "busbw(GB/s)", "#wrong", "cpu(us)", "csw")
      << '\n';
}

void print_row(std::ostream& out, const BenchConfig& c, const SweepRow& r) {
  if (!r.skipped.empty()) {
    out << ' '
        << fmt::format("{:>11} {:>12} {:>5} {:>6} {:>7}  skipped: {}", r.bytes, r.count,
                       coll::dtype_name(c.dtype), redop_name(c), algo_label(r), r.skipped)
        << '\n';
    return;
  }
  const std::string wrong = r.wrong ? std::to_string(*r.wrong) : "N/A";
  out << ' '
      << fmt::format(kColumns, r.bytes, r.count, coll::dtype_name(c.dtype), redop_name(c),
                     algo_label(r), fmt::format("{:.2f}", r.time_us_median),
                     fmt::format("{:.2f}", r.algbw_gbps), fmt::format("{:.2f}", r.busbw_gbps),
                     wrong, fmt::format("{:.1f}", r.cpu_us_median),
                     fmt::format("{:.1f}", r.csw_median))
      << '\n';
  if (r.peer.empty() && r.algo == coll::Algorithm::kAuto)
    out << fmt::format("#   auto: {} ({})\n", coll::candidate_label(r.chosen.config),
                       r.chosen.reason);
}

namespace {

nlohmann::json config_json(const BenchConfig& c) {
  std::vector<std::string> algos;
  for (auto a : c.algos) algos.emplace_back(coll::algorithm_name(a));
  for (const auto& p : c.peers) algos.push_back(p);
  // gloo only; null: the backend's default (or not gloo).
  const nlohmann::json eager = c.eager_bytes ? nlohmann::json(*c.eager_bytes) : nlohmann::json();
  const nlohmann::json connections =
      c.backend == "gloo" ? nlohmann::json(c.row_connections ? "row" : "shared") : nlohmann::json();
  const nlohmann::json loop = c.batch_loop_thread
                                  ? nlohmann::json(*c.batch_loop_thread ? "batch" : "normal")
                                  : nlohmann::json();
  return {{"backend", c.backend},
          {"ranks", c.ranks},
          {"coll", coll::collective_name(c.coll)},
          {"algos", algos},
          {"min_bytes", c.min_bytes},
          {"max_bytes", c.max_bytes},
          {"step_factor", c.step_factor},
          {"dtype", coll::dtype_name(c.dtype)},
          {"op", coll::op_name(c.op)},
          {"root", c.root},
          {"iters", c.iters},
          {"warmup", c.warmup},
          {"batch", c.batch},
          {"interleave", c.interleave},
          {"interleave_order", c.interleave ? "williams" : ""},
          {"timing", timing_name(c.timing)},
          {"check", c.check ? 1 : 0},
          {"in_place", c.in_place},
          {"chunks", c.chunks},
          // levels as written (a string, "2x2"), so that scripts/compare
          // tells them from one group size
          {"rotate_levels", c.rotate_levels},
          {"group_size", c.upper_groups.empty() ? nlohmann::json(c.group_size)
                                                : nlohmann::json(coll::group_levels_name(
                                                      c.group_size, c.upper_groups))},
          {"inner", coll::join_names(c.inners)},
          {"timeout_ms", c.timeout.count()},
          {"json", c.json_path},
          {"pin", c.pin},
          {"eager_bytes", eager},
          {"loop_thread", loop},
          {"connections", connections},
          {"placement", c.placement}};
}

nlohmann::json row_json(const BenchConfig& c, const SweepRow& r) {
  nlohmann::json row = {{"size_bytes", r.bytes},
                        {"count", r.count},
                        {"type", coll::dtype_name(c.dtype)},
                        {"redop", redop_name(c)},
                        {"algo", algo_label(r)},
                        {"peer", !r.peer.empty()},
                        {"stream", r.peer == kStreamPeer},
                        {"time_us_min", r.time_us_min},
                        {"time_us_median", r.time_us_median},
                        {"time_us_max", r.time_us_max},
                        {"iters", r.iters},
                        {"algbw_gbps", r.algbw_gbps},
                        {"busbw_gbps", r.busbw_gbps},
                        {"cpu_us_median", r.cpu_us_median},
                        {"csw_median", r.csw_median},
                        {"wrong", r.wrong ? nlohmann::json(*r.wrong) : nlohmann::json(nullptr)}};
  if (!r.skipped.empty()) row["skipped"] = r.skipped;
  if (r.peer.empty()) row["chunks"] = r.chunks;
  if (r.peer.empty() && r.algo == coll::Algorithm::kAuto) {
    row["chosen"] = coll::candidate_label(r.chosen.config);
    row["reason"] = r.chosen.reason;
  }
  // Every timed call, in order: with --interleave, index i of every row of a
  // size is one round, so records can be paired offline as --compare does.
  if (!r.times_us.empty()) row["times_us"] = r.times_us;
  return row;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// Host CPU time per unit of wall time: how many cores the call kept busy.
double busy_cores(const SweepRow& r) {
  return r.time_us_median > 0 ? r.cpu_us_median / r.time_us_median : 0.0;
}

// With --interleave: ", paired 1.07x [1.02, 1.13]": the median of the two
// rows' call-by-call ratios and its >= 95% interval. Calls of one iteration ran
// in the same round, so slow spells of the machine fall on both sides of a
// ratio; the ratio of the medians mixes calls from different moments.
std::string paired_part(const BenchConfig& config, const SweepRow& ours, const SweepRow& peer) {
  if (!config.interleave || ours.times_us.size() != peer.times_us.size()) return "";
  const PairedRatio r = paired_ratio(peer.times_us, ours.times_us);
  if (!r.has_interval) return fmt::format(", paired {:.2f}x", r.median);
  return fmt::format(", paired {:.2f}x [{:.2f}, {:.2f}]", r.median, r.low, r.high);
}

// ", stream 7356.82 us (ours 0.95x, peer 1.02x its time)", or "" without one.
std::string stream_part(const SweepRow* stream, const SweepRow& ours, const SweepRow& peer) {
  if (stream == nullptr || stream->time_us_median <= 0) return "";
  return fmt::format(", stream {:.2f} us (ours {:.2f}x, peer {:.2f}x its time)",
                     stream->time_us_median, ours.time_us_median / stream->time_us_median,
                     peer.time_us_median / stream->time_us_median);
}

// Per size: our fastest row against the fastest peer row (the stream row aside),
// by median time.
void print_compare(std::ostream& out, const BenchConfig& config,
                   const std::vector<SweepRow>& rows) {
  out << "# compare: per size, our best vs the best peer; ratio = peer time / our time (> 1: "
         "ours is faster); cores busy = cpu / time, ours vs the peer's\n";
  if (config.interleave)
    out << "# compare: paired = median of the per-iteration ratios of the same two rows "
           "[and its >= 95% confidence interval, from 6 iterations up]\n";
  const bool with_stream =
      std::find(config.peers.begin(), config.peers.end(), kStreamPeer) != config.peers.end();
  if (with_stream)
    out << "# compare: stream = the bytes a bandwidth-optimal all-reduce moves per rank, as one "
           "Gloo transfer each way, nothing reduced: what the traffic alone costs this transport\n";
  for (std::size_t i = 0; i < rows.size();) {
    const SweepRow *ours = nullptr, *peer = nullptr, *stream = nullptr;
    const std::uint64_t bytes = rows[i].bytes;
    for (; i < rows.size() && rows[i].bytes == bytes; ++i) {
      const SweepRow& r = rows[i];
      if (!r.skipped.empty()) continue;
      if (r.peer == kStreamPeer) {
        stream = &r;
        continue;
      }
      const SweepRow*& best = r.peer.empty() ? ours : peer;
      if (best == nullptr || r.time_us_median < best->time_us_median) best = &r;
    }
    if (ours == nullptr || peer == nullptr) {
      out << fmt::format("# compare {:>11} B: no {} row\n", bytes, ours ? "peer" : "own");
      continue;
    }
    out << fmt::format(
        "# compare {:>11} B: ours {:>6} {:>10.2f} us, peer {:>17} {:>10.2f} us, "
        "ratio {:.2f}x{}, cores busy {:.2f} vs {:.2f}{}\n",
        bytes, algo_label(*ours), ours->time_us_median, algo_label(*peer), peer->time_us_median,
        peer->time_us_median / ours->time_us_median, paired_part(config, *ours, *peer),
        busy_cores(*ours), busy_cores(*peer), stream_part(stream, *ours, *peer));
  }
}

}  // namespace

void print_table(std::ostream& out, const BenchConfig& config, const std::vector<SweepRow>& rows,
                 const std::optional<SpeedAround>& speed) {
  print_table_head(out, config);
  for (const auto& r : rows) print_row(out, config, r);
  print_table_tail(out, config, rows, speed);
}

void print_table_tail(std::ostream& out, const BenchConfig& config,
                      const std::vector<SweepRow>& rows, const std::optional<SpeedAround>& speed) {
  double busbw_sum = 0;
  std::size_t ran = 0;
  for (const auto& r : rows) {
    busbw_sum += r.busbw_gbps;
    ran += r.skipped.empty() ? 1 : 0;
  }
  if (config.check) {
    const auto wrong = total_wrong(rows);
    out << fmt::format("# #wrong total: {} ({})\n", wrong, wrong == 0 ? "OK" : "FAILED");
  }
  if (config.compare) print_compare(out, config, rows);
  if (ran > 0)
    out << fmt::format("# avg busbw: {:.2f} GB/s\n", busbw_sum / static_cast<double>(ran));
  if (speed) out << speed_line(*speed);
}

nlohmann::json to_json(const BenchConfig& config, const std::vector<SweepRow>& rows,
                       const std::optional<SpeedAround>& speed) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const auto& r : rows) out_rows.push_back(row_json(config, r));
  auto machine = machine_info();
  if (speed) machine["speed"] = speed_json(*speed);
  return {{"tool", "cclab bench"}, {"config", config_json(config)}, {"machine", std::move(machine)},
          {"build", build_info()}, {"date", utc_now_iso8601()},     {"rows", std::move(out_rows)}};
}

void write_json(const std::string& path, const nlohmann::json& record) {
  std::ofstream out(path);
  if (!out) throw IoError(fmt::format("--json: cannot open '{}' for writing", path));
  out << record.dump(2) << '\n';
  out.close();
  if (!out) throw IoError(fmt::format("--json: cannot write '{}'", path));
}

namespace {
// The q-quantile (0..1) of a row's timed calls, by the nearest rank; the
// median when none were kept.
double quantile(const SweepRow& r, double q) {
  if (r.times_us.empty()) return r.time_us_median;
  std::vector<double> t = r.times_us;
  const auto k = static_cast<std::ptrdiff_t>(q * static_cast<double>(t.size() - 1) + 0.5);
  std::nth_element(t.begin(), t.begin() + k, t.end());
  return t[static_cast<std::size_t>(k)];
}
}  // namespace

void write_tuning_table(std::ostream& out, const BenchConfig& c,
                        const std::vector<SweepRow>& rows) {
  std::vector<coll::TimedCandidate> times;
  for (const auto& r : rows)
    if (r.peer.empty() && r.algo != coll::Algorithm::kAuto && r.skipped.empty())
      times.push_back({r.bytes, r.algo, r.chunks, r.time_us_median, quantile(r, 0.25),
                       quantile(r, 0.75), r.inner});
  coll::TuningTable table = coll::tuning_table_from_times(times);
  table.tool = "cclab bench --tune";
  table.topology = fmt::format("measured by cclab bench --backend {} on {}, {} cores", c.backend,
                               cpu_model(), std::thread::hardware_concurrency());
  table.collective = c.coll;
  table.ranks = c.ranks;
  table.group_size = coll::group_size_or_default(c.ranks, c.group_size);
  table.upper_groups = c.upper_groups;
  table.rotate_levels = c.rotate_levels;
  std::ofstream file(c.tune_path);
  file << coll::tuning_table_json(table);
  file.close();
  if (!file) throw IoError(fmt::format("--tune: cannot write '{}'", c.tune_path));
  out << fmt::format("# tuning table for {} at {} ranks written to {} (use: CCLAB_TUNING={}):\n{}",
                     coll::collective_name(c.coll), c.ranks, c.tune_path, c.tune_path,
                     coll::describe_bands(table, "#   "));
}

nlohmann::json machine_info() {
  return {{"cpu_model", cpu_model()},
          {"cores", std::thread::hardware_concurrency()},
          {"hostname", hostname()},
          {"tcp_congestion_control", tcp_congestion_control()}};
}

std::string tcp_congestion_control() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  return in >> name ? name : "unknown";
}

nlohmann::json build_info() {
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("gcc ") + __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {
      {"compiler", compiler}, {"build_type", CCLAB_BUILD_TYPE}, {"git_commit", CCLAB_GIT_COMMIT}};
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::uint64_t total_wrong(const std::vector<SweepRow>& rows) {
  std::uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong.value_or(0);
  return wrong;
}

}  // namespace cclab::bench
