// `cclab calibrate`: fits the simulator's switch model to `cclab bench
// --json` records (together: one backend, one machine) and prints, row by
// row, what it then predicts against what was measured; --validate does the
// same for other records (other rank counts) with the fitted links, e.g.
//   cclab calibrate r2.json --validate r4.json
//   cclab calibrate r2.json r3.json --validate r4.json   (fits the overhead too)
// With --topology it fits nothing and predicts every record on the topology
// given (a cluster described by hand, e.g. hosts behind a slower link):
//   cclab calibrate h.json --topology "fat-tree:hosts=4,leaves=2,spines=1,uplink=1Gbps"
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/selector.h"
#include "cclab/sim/calibrate.h"
#include "cclab/sim/cli.h"
#include "cclab/sim/topology.h"

namespace cclab::sim {
namespace {

struct CalibrateFlags {
  std::vector<std::string> records;
  std::vector<std::string> validate;
  std::string topology;  // predict on this, unfitted
};

// "allgather, " for a record of another collective than all-reduce.
std::string coll_label(const Measurements& m) {
  return m.coll == coll::CollectiveKind::kAllReduce
             ? ""
             : fmt::format("{}, ", coll::collective_name(m.coll));
}

// " +-4%": a parameter's standard error, where the fit has one.
std::string spread(double rel_error) {
  return std::isfinite(rel_error) ? fmt::format(" +-{:.0f}%", 100 * rel_error) : "";
}

// The table of one record, its fastest-per-size agreement and a summary line.
void report(const Measurements& m, const std::string& spec) {
  const auto rows = predict_rows(m, spec);
  fmt::print("#\n# {} ({} backend, {}{} ranks) on {}\n", m.source, m.backend, coll_label(m),
             m.ranks, spec);
  fmt::print("#{:>11} {:>7} {:>13} {:>14} {:>10}\n", "size(B)", "algo", "measured(us)",
             "predicted(us)", "pred/meas");
  std::vector<double> ratios;
  for (const auto& c : rows) {
    ratios.push_back(c.predicted_us / c.row.time_us);
    fmt::print(" {:>11} {:>7} {:>13.2f} {:>14.2f} {:>10.2f}\n", c.row.bytes,
               coll::candidate_label(c.row.algo, c.row.chunks, c.row.inner), c.row.time_us,
               c.predicted_us, ratios.back());
  }
  int agree = 0;
  std::vector<double> costs;
  for (const auto& a : agreement(rows)) {
    agree += a.agrees ? 1 : 0;
    costs.push_back(a.cost);
    fmt::print("# fastest at {:>11} B: measured {:<7} predicted {}{}\n", a.bytes, a.measured,
               fmt::join(a.predicted, " = "),
               a.agrees ? "" : fmt::format("  (differ: {:.2f}x the fastest's time)", a.cost));
  }
  std::sort(ratios.begin(), ratios.end());
  double log_sum = 0;
  for (double c : costs) log_sum += std::log(c);
  fmt::print(
      "# {}: {} rows, predicted/measured median {:.2f} (range {:.2f}-{:.2f}); the fastest "
      "agrees at {} of {} sizes; choosing by the prediction takes {:.2f}x the fastest's time "
      "at worst, {:.2f}x on geometric mean\n",
      m.source, rows.size(), ratios[ratios.size() / 2], ratios.front(), ratios.back(), agree,
      costs.size(), *std::max_element(costs.begin(), costs.end()),
      std::exp(log_sum / static_cast<double>(costs.size())));
}

// Every record predicted on a topology given by hand, with no fit.
void run_on_topology(const CalibrateFlags& f) {
  const std::size_t endpoints = make_topology(f.topology).num_endpoints();
  std::vector<Measurements> records;
  for (const auto* paths : {&f.records, &f.validate})
    for (const auto& path : *paths) {
      records.push_back(load_bench_record(path));
      if (static_cast<std::size_t>(records.back().ranks) > endpoints)
        throw InvalidArgument(
            fmt::format("--topology: '{}' has {} endpoints, too few for {}'s {} ranks", f.topology,
                        endpoints, path, records.back().ranks));
    }
  fmt::print("# cclab calibrate: predicting on {}, unfitted\n", f.topology);
  for (const auto& m : records) report(m, f.topology);
}

void run_calibrate(const CalibrateFlags& f) {
  if (!f.topology.empty()) return run_on_topology(f);
  std::vector<Measurements> fitted, others;
  for (const auto& path : f.records) fitted.push_back(load_bench_record(path));
  for (const auto& path : f.validate) others.push_back(load_bench_record(path));
  const LinkFit fit = fit_switch(fitted);
  for (const Measurements& m : fitted)
    fmt::print("# cclab calibrate: {} ({} backend, {}{} ranks, {} rows of ours)\n", m.source,
               m.backend, coll_label(m), m.ranks, m.rows.size());
  fmt::print(
      "# fitted: lat {:.1f} ns a link ({:.1f} ns a message){}, bw {:.3f} GB/s{}, reduce {}, "
      "overhead {}\n",
      fit.lat_us * 1e3, 2 * fit.lat_us * 1e3, spread(fit.lat_rel_error), fit.bw_Bps / 1e9,
      spread(fit.bw_rel_error),
      fit.reduce_Bps > 0
          ? fmt::format("{:.3f} GB/s{}", fit.reduce_Bps / 1e9, spread(fit.reduce_rel_error))
          : "free",
      fit.overhead_us > 0 ? fmt::format("{:.1f} ns a message end{}", fit.overhead_us * 1e3,
                                        spread(fit.overhead_rel_error))
                          : "none");
  if (!fit.note.empty()) fmt::print("# note: {}\n", fit.note);
  fmt::print("# topology: {} (n: the ranks)\n", switch_spec(fit, fitted.front().ranks));
  for (const auto& m : fitted) report(m, switch_spec(fit, m.ranks));
  for (const auto& m : others) report(m, switch_spec(fit, m.ranks));
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit the simulator's links to cclab bench --json records and compare its predictions "
      "with the measurements");
  cmd->add_option("records", flags->records,
                  "cclab bench --json records to fit together (one backend and machine; a record "
                  "of 3 or more ranks lets the per-message overhead be fitted)");
  cmd->add_option("--validate", flags->validate,
                  "Records (e.g. other rank counts) to predict with the fitted links, unfitted");
  cmd->add_option("--topology", flags->topology,
                  "Fit nothing: predict every record on this topology (a cclab sim generator "
                  "spec or JSON file), with each record's eager limit and pair ordering");
  cmd->callback([flags] {
    // CLI11's own words for a missing positional ("records is required") name
    // neither what a record is nor where one comes from.
    if (flags->records.empty())
      throw InvalidArgument(
          "records: none given (allowed: one or more `cclab bench --json` files, e.g. cclab "
          "calibrate run.json)");
    run_calibrate(*flags);
  });
}

}  // namespace cclab::sim
