// `cclab sim`: an nccl-tests style sweep, predicted instead of measured, e.g.
//   cclab sim --topology switch:n=8,bw=100Gbps,lat=1us --ranks 8 --algo all -b 1K -e 1G -f 4
// Sizes follow `cclab bench`: from -b to -e multiplying by -f, rounded down to
// whole f32 elements; algbw = bytes / time, busbw = algbw * 2(n-1)/n (nccl-tests'
// all-reduce bus factor). The op is f32 sum; each row adds the most utilised link.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/sim/cli.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/trace.h"

namespace cclab::sim {
namespace {

using coll::Algorithm;
using coll::CollectiveKind;

struct SimFlags {
  std::string topology;
  int ranks = 0;  // 0: every endpoint (--ranks not given)
  std::string algos = "all";
  std::string min_bytes = "1K", max_bytes = "64M";
  int step_factor = 4;
  int chunks = 1;
  int group_size = 0;  // 0: the topology's hint when it divides --ranks, else the default
  std::string json_path, trace_path;
};

struct Row {
  std::uint64_t bytes = 0, count = 0;
  Algorithm algo = Algorithm::kRing;
  std::string name;
  SimResult result;
};

constexpr std::size_t kElem = 4;  // f32
constexpr const char* kColumns = "{:>11} {:>12} {:>5} {:>6} {:>7} {:>11} {:>12} {:>12}  {}";

// "64M" -> 67108864: bytes with an optional K, M or G suffix (powers of 2), as in `cclab bench`.
std::uint64_t parse_size(const std::string& text, const char* flag) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  int shift = 0;
  if (digits + 1 == text.size()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    shift = s == 'K' ? 10 : s == 'M' ? 20 : s == 'G' ? 30 : -1;
  }
  if (digits == 0 || digits > 15 || shift < 0 || digits + 1 < text.size())
    throw InvalidArgument(fmt::format(
        "{}: malformed size '{}' (allowed: bytes with an optional K, M or G suffix, e.g. 64K)",
        flag, text));
  return std::stoull(text.substr(0, digits)) << shift;
}

std::vector<Algorithm> parse_algos(const std::string& list) {
  if (list == "all") return coll::algorithms_for(CollectiveKind::kAllReduce);
  std::vector<Algorithm> out;
  for (std::size_t pos = 0; pos <= list.size();) {
    const auto comma = list.find(',', pos);
    const Algorithm a = coll::parse_algorithm(list.substr(pos, comma - pos), "--algo");
    if (!coll::supports(CollectiveKind::kAllReduce, a))
      throw InvalidArgument(
          fmt::format("--algo: '{}' does not apply to allreduce", coll::algorithm_name(a)));
    out.push_back(a);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int group_size_for(const SimFlags& f, const Topology& t, int ranks) {
  if (f.group_size > 0) return f.group_size;  // make_schedule checks that it divides
  const int hint = t.group_size_hint;
  return hint > 0 && ranks % hint == 0 ? hint : 0;
}

void print_header(const SimFlags& f, const Topology& t, int ranks, int group) {
  fmt::print(
      "# cclab sim: topology {}, ranks {}, endpoints {}, links {}, dtype f32, op sum, "
      "chunks {}\n",
      t.description, ranks, t.num_endpoints(), t.num_links(), f.chunks);
  fmt::print("# hier group size {}\n#\n#", group > 0 ? group : coll::default_group_size(ranks));
  fmt::print(kColumns, "size(B)", "count", "type", "redop", "algo", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "bottleneck");
  fmt::print("\n");
}

void print_row(const Topology& t, const Row& r, int ranks) {
  const double us = time_to_us(r.result.total);
  const double algbw = us > 0 ? static_cast<double>(r.bytes) / us * 1e-3 : 0;  // GB/s
  const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
  const std::string neck = r.result.bottleneck < 0
                               ? "none"
                               : fmt::format("{} ({:.0f}%)", t.link_name(r.result.bottleneck),
                                             100 * r.result.bottleneck_utilisation);
  fmt::print(" ");
  fmt::print(kColumns, r.bytes, r.count, "f32", "sum", coll::algorithm_name(r.algo),
             fmt::format("{:.2f}", us), fmt::format("{:.2f}", algbw), fmt::format("{:.2f}", busbw),
             neck);
  fmt::print("\n");
}

void write_json(const std::string& path, const SimFlags& f, const Topology& t, int ranks, int group,
                const std::vector<Row>& rows) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const Row& r : rows)
    out_rows.push_back(
        {{"size_bytes", r.bytes},
         {"count", r.count},
         {"type", "f32"},
         {"redop", "sum"},
         {"algo", coll::algorithm_name(r.algo)},
         {"schedule", r.name},
         {"time_us", time_to_us(r.result.total)},
         {"bottleneck", r.result.bottleneck < 0 ? "none" : t.link_name(r.result.bottleneck)},
         {"bottleneck_utilisation", r.result.bottleneck_utilisation},
         {"events", r.result.events},
         {"flows", r.result.flows}});
  const nlohmann::json config = {
      {"topology", t.description},
      {"ranks", ranks},
      {"algos", f.algos},
      {"min_bytes", f.min_bytes},
      {"max_bytes", f.max_bytes},
      {"step_factor", f.step_factor},
      {"chunks", f.chunks},
      {"hier_group_size", group > 0 ? group : coll::default_group_size(ranks)}};
  const nlohmann::json record = {
      {"tool", "cclab sim"}, {"config", config}, {"rows", std::move(out_rows)}};
  std::ofstream out(path);
  if (!out) throw IoError(fmt::format("--json: cannot open '{}' for writing", path));
  out << record.dump(2) << '\n';
  if (!out) throw IoError(fmt::format("--json: cannot write '{}'", path));
}

void run_sim(const SimFlags& f) {
  const Topology topo = make_topology(f.topology);
  const int ranks = f.ranks > 0 ? f.ranks : static_cast<int>(topo.num_endpoints());
  if (static_cast<std::size_t>(ranks) > topo.num_endpoints())
    throw InvalidArgument(fmt::format("--ranks: {} ranks but topology '{}' has {} endpoints", ranks,
                                      topo.description, topo.num_endpoints()));
  const auto algos = parse_algos(f.algos);
  const std::uint64_t lo = parse_size(f.min_bytes, "-b/--minbytes");
  const std::uint64_t hi = parse_size(f.max_bytes, "-e/--maxbytes");
  if (lo > hi)
    throw InvalidArgument(
        fmt::format("-b/--minbytes: {} is larger than -e/--maxbytes {}", f.min_bytes, f.max_bytes));
  if (lo < 1) throw InvalidArgument("-b/--minbytes: must be at least 1 byte");
  if (f.step_factor < 2) throw InvalidArgument("-f/--stepfactor: must be at least 2");
  if (f.chunks < 1) throw InvalidArgument("--chunks: must be at least 1");
  if (f.group_size < 0 || (f.group_size > 0 && ranks % f.group_size != 0))
    throw InvalidArgument(fmt::format(
        "--group-size: {} does not divide the {} ranks (allowed: a divisor, or 0 for the default)",
        f.group_size, ranks));
  for (const auto& [path, flag] : {std::pair{&f.json_path, "--json"}, {&f.trace_path, "--trace"}})
    if (!path->empty()) require_writable(*path, flag);
  const int group = group_size_for(f, topo, ranks);
  print_header(f, topo, ranks, group);
  std::vector<Row> rows;
  TraceWriter trace(topo);
  for (std::uint64_t bytes = lo;; bytes *= static_cast<std::uint64_t>(f.step_factor)) {
    for (Algorithm algo : algos) {
      const bool traced =
          !f.trace_path.empty() && bytes * f.step_factor > hi && algo == algos.back();
      const std::uint64_t count = bytes / kElem;
      const auto sched = coll::make_schedule(
          {CollectiveKind::kAllReduce, ranks, count, 0},
          {algo, f.chunks, algo == Algorithm::kHierarchical ? group : 0}, kElem);
      Row row{count * kElem, count, algo, sched->name(), {}};
      row.result = simulate(topo, *sched, {kElem, traced ? &trace : nullptr});
      print_row(topo, row, ranks);
      rows.push_back(std::move(row));
    }
    if (bytes > hi / static_cast<std::uint64_t>(f.step_factor)) break;
  }
  if (!f.json_path.empty()) write_json(f.json_path, f, topo, ranks, group, rows);
  if (!f.trace_path.empty()) trace.write(f.trace_path);
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto flags = std::make_shared<SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Predict all-reduce times on a topology with the network simulator");
  cmd->add_option("--topology", flags->topology,
                  "Generator spec (switch:n=8,bw=100Gbps,lat=1us; ring:n=..; torus2d:x=..,y=..; "
                  "fat-tree:hosts=..,leaves=..,spines=..,bw=..,uplink=..; "
                  "nodes:nodes=..,gpus=..,nvlink=..,nic=..,lat=..) or a JSON file")
      ->required();
  cmd->add_option_function<int>(
      "--ranks",
      [flags](int n) {
        if (n < 1) throw InvalidArgument(fmt::format("--ranks: must be at least 1 (got {})", n));
        flags->ranks = n;
      },
      "Ranks (default: one per endpoint)");
  cmd->add_option("--algo", flags->algos, "Comma list of ring, tree, hd, hier, direct, or all");
  cmd->add_option("-b,--minbytes", flags->min_bytes, "Smallest size (K, M, G suffixes)");
  cmd->add_option("-e,--maxbytes", flags->max_bytes, "Largest size");
  cmd->add_option("-f,--stepfactor", flags->step_factor, "Size multiplier between rows");
  cmd->add_option("--chunks", flags->chunks, "Pipeline chunks per transfer");
  cmd->add_option("--group-size", flags->group_size,
                  "hier: ranks per group (default: the topology's, e.g. gpus per node)");
  cmd->add_option("--json", flags->json_path, "Write the rows as JSON to this file");
  cmd->add_option("--trace", flags->trace_path,
                  "Write a Chrome/Perfetto trace of the last row (largest size, last algorithm)");
  cmd->callback([flags] { run_sim(*flags); });
}

}  // namespace cclab::sim
