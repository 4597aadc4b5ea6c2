// The fit of calibrate.h: coefficients read off the simulator one parameter
// at a time, a weighted least-squares solve, then refinement on the slopes
// at the solution; and the predictions made with the fitted switch.
#include "cclab/sim/calibrate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cclab/collectives/error.h"
#include "cclab/collectives/selector.h"
#include "cclab/collectives/types.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {
namespace {

SimResult simulate_row(const Measurements& m, const MeasuredRow& r, const Topology& t) {
  // Sizes are the whole buffer (cclab bench's), counts a rank's.
  const std::uint64_t count = coll::count_of_total(m.coll, m.ranks, r.bytes / m.elem_bytes);
  const coll::CollectiveShape shape{m.coll, m.ranks, count, m.root};
  const bool hier = coll::uses_groups(r.algo);
  const auto sched = coll::make_schedule(
      shape, {r.algo, r.chunks, hier ? m.group_size : 0, r.inner}, m.elem_bytes);
  return simulate(t, *sched, {m.elem_bytes, nullptr});
}

// The model's parameters, as columns of the coefficient matrix.
enum Param : int { kLat, kInvBw, kInvReduce, kOverhead, kParams };
using Params = Eigen::Matrix<double, kParams, 1>;

// The model at x (lat and o in us, 1e6/bw and 1e6/reduce in (1 MB/s)^-1; 0:
// none, free) for record m, with its fabric (cores x bw, see calibrate.h),
// eager limit and shared CPUs.
Topology model_at(const Measurements& m, const Params& x) {
  const double bw = 1e6 / x(kInvBw);
  std::string spec =
      fmt::format("switch:n={},bw={:.6f}Bps,lat={}ps", m.ranks, bw, std::llround(x(kLat) * 1e6));
  if (x(kInvReduce) > 0) spec += fmt::format(",reduce={:.6f}Bps", 1e6 / x(kInvReduce));
  if (m.cores > 0) spec += fmt::format(",fabric={:.6f}Bps", m.cores * bw);
  if (m.eager_bytes > 0) spec += fmt::format(",eager={}", m.eager_bytes);
  if (x(kOverhead) > 0) spec += fmt::format(",overhead={}ps", std::llround(x(kOverhead) * 1e6));
  if (x(kOverhead) > 0 && m.cores > 0) spec += fmt::format(",cpus={}", m.cores);
  spec += one_connection_per_pair(m.backend) ? ",pairs=fifo" : ",pairs=shared";
  return generate_topology(spec);
}

// Per row, the coefficients of (lat in us, 1e6/bw, 1e6/reduce, o in us): its
// simulated time in us with each parameter alone at 1 us or 1 MB/s, the
// others out of the way (no latency or overhead, free reductions, or 1e21
// B/s: 128 MiB in 0.13 ps). The fabric scales with bw: still linear.
Eigen::MatrixXd coefficients(const Measurements& m) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(m.rows.size()), kParams);
  for (int p = 0; p < kParams; ++p) {
    Params alone = Params::Zero();
    alone(kInvBw) = 1e-15;  // 1e21 B/s
    alone(p) = 1;
    const Topology t = model_at(m, alone);
    for (std::size_t i = 0; i < m.rows.size(); ++i)
      a(static_cast<Eigen::Index>(i), p) = time_to_us(simulate_row(m, m.rows[i], t).total);
  }
  return a;
}

// Per row, the simulated time at x and its slope in each parameter in `use`
// (forward differences of 0.1%, and of at least 1 ns for the times, which
// are whole picoseconds): the coefficients of the piece of the model
// that x lies on. Simulated times are homogeneous in the parameters (scale
// them all and every time scales), so on that piece time = slopes . x.
Eigen::MatrixXd slopes_at(const Measurements& m, const Params& x, const std::vector<int>& use,
                          Eigen::VectorXd& times) {
  const Topology here = model_at(m, x);
  std::vector<Topology> nudged;
  std::vector<double> steps;
  for (int p : use) {
    Params y = x;
    const bool time = p == kLat || p == kOverhead;
    steps.push_back(std::max(x(p) * 1e-3, time ? 1e-3 : 1e-12));
    y(p) += steps.back();
    nudged.push_back(model_at(m, y));
  }
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(m.rows.size()), kParams);
  times.resize(a.rows());
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    const auto row = static_cast<Eigen::Index>(i);
    times(row) = time_to_us(simulate_row(m, m.rows[i], here).total);
    for (std::size_t j = 0; j < use.size(); ++j)
      a(row, use[j]) =
          (time_to_us(simulate_row(m, m.rows[i], nudged[j]).total) - times(row)) / steps[j];
  }
  return a;
}

// Weighted least squares over the columns in `use` (relative errors: each
// row divided by its measured time); the unused parameters are 0. NaN where
// the columns in use cannot be told apart: each is scaled to unit length
// (their units differ by orders of magnitude), and a column within 1e-7 of
// the span of the others counts as in it (simulated times are whole
// picoseconds, so columns that are proportional in the model differ by about
// 1e-8).
Params solve(const Eigen::MatrixXd& a, const Eigen::VectorXd& t, const std::vector<int>& use) {
  const auto k = static_cast<Eigen::Index>(use.size());
  Eigen::MatrixXd sub(a.rows(), k);
  Eigen::VectorXd scale(k);
  for (Eigen::Index j = 0; j < k; ++j) {
    sub.col(j) = a.col(use[static_cast<std::size_t>(j)]).cwiseQuotient(t);
    scale(j) = sub.col(j).norm();
    if (!(scale(j) > 0)) return Params::Constant(NAN);  // a parameter no row depends on
    sub.col(j) /= scale(j);
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(sub.rows(), k);
  qr.setThreshold(1e-7);
  qr.compute(sub);
  if (qr.rank() < k) return Params::Constant(NAN);
  const Eigen::VectorXd y = qr.solve(Eigen::VectorXd::Ones(a.rows())).cwiseQuotient(scale);
  Params x = Params::Zero();
  for (Eigen::Index j = 0; j < k; ++j) x(use[static_cast<std::size_t>(j)]) = y(j);
  return x;
}

// The parameters in use, and what the fit had to give up to get there.
struct Solver {
  const Eigen::MatrixXd& a;
  const Eigen::VectorXd& t;
  std::vector<int> use;
  std::string note;

  Params without(int p) const {
    std::vector<int> fewer;
    for (int q : use)
      if (q != p) fewer.push_back(q);
    return solve(a, t, fewer);
  }
  void drop(int p, const std::string& why) {
    std::erase(use, p);
    note += (note.empty() ? "" : "; ") + why;
  }
  bool uses(int p) const { return std::find(use.begin(), use.end(), p) != use.end(); }

  // Columns the rows cannot tell apart: reductions from bytes moved first,
  // then the overhead from latency, then both.
  Params separate() {
    Params x = solve(a, t, use);
    if (x.allFinite()) return x;
    if (uses(kInvReduce) && without(kInvReduce).allFinite()) {
      drop(kInvReduce,
           "reductions cannot be told from the bytes moved in these rows: folded into bw");
    } else if (uses(kOverhead) && without(kOverhead).allFinite()) {
      drop(kOverhead, "the per-message overhead cannot be told from latency in these rows: none");
    } else {
      if (uses(kInvReduce))
        drop(kInvReduce,
             "reductions cannot be told from the bytes moved in these rows: folded into bw");
      if (uses(kOverhead))
        drop(kOverhead, "the per-message overhead cannot be told from latency in these rows: none");
    }
    return solve(a, t, use);
  }

  // Parameters that come out negative, one at a time (dropping a column
  // keeps the rest separable).
  Params clamp(Params x) {
    for (;;) {
      if (uses(kInvReduce) && x(kInvReduce) < 0)
        drop(kInvReduce, "reductions fit as free (a negative reduce time came out)");
      else if (uses(kOverhead) && x(kOverhead) < 0)
        drop(kOverhead, "the per-message overhead fit as 0 (it came out negative)");
      else if (uses(kLat) && x(kLat) < 0)
        drop(kLat, "latency fit as 0 (it came out negative)");
      else
        return x;
      x = solve(a, t, use);
    }
  }
};

// The coefficients of a one-parameter-at-a-time fit hold where the
// parameters do not interact; a message's host overhead and the latency of
// the ones in flight overlap, and so do eager transfers and reductions. So
// the fit is repeated on the slopes at the last solution (Gauss-Newton on a
// piecewise-linear model) while it lowers the squared relative error, at most
// 12 times; returns the best solution seen with the slopes at it, and leaves
// in `solver` the columns and note that gave it.
struct Refined {
  Params x;
  Eigen::MatrixXd slopes;
};
Refined refine(std::span<const Measurements> records, const Eigen::VectorXd& t, Solver& solver,
               Params x) {
  Refined best{x, {}};
  double best_error = INFINITY;
  std::vector<int> use = solver.use;  // what gave x
  std::string note = solver.note;
  for (int round = 0; round < 12; ++round) {
    Eigen::MatrixXd a(t.size(), kParams);
    Eigen::VectorXd sim(t.size());
    Eigen::Index at = 0;
    for (const Measurements& m : records) {
      Eigen::VectorXd times;
      const auto n = static_cast<Eigen::Index>(m.rows.size());
      a.middleRows(at, n) = slopes_at(m, x, use, times);
      sim.segment(at, n) = times;
      at += n;
    }
    const double error = (sim - t).cwiseQuotient(t).squaredNorm();
    if (error >= best_error * (1 - 1e-9)) break;
    best = {x, a}, best_error = error;
    solver.use = use, solver.note = note;
    Solver next{a, t, use, note};
    const Params y = next.clamp(next.separate());
    if (!y.allFinite() || !(y(kInvBw) > 0)) break;
    x = y, use = next.use, note = next.note;
  }
  return best;
}

// Each fitted parameter's standard error relative to its value, from the
// slopes at the solution: s^2 (J^T J)^-1, J the rows' relative slopes and
// s^2 their squared relative residuals over (rows - parameters). NaN where
// there are no more rows than parameters. It says how well the rows pin a
// parameter down, not how right the model is.
Params relative_errors(const Eigen::MatrixXd& a, const Eigen::VectorXd& t,
                       const std::vector<int>& use, const Params& x) {
  Params out = Params::Constant(NAN);
  const auto k = static_cast<Eigen::Index>(use.size());
  if (a.rows() <= k || a.cols() != kParams) return out;
  Eigen::MatrixXd j(a.rows(), k);
  Eigen::VectorXd xs(k), scale(k);
  for (Eigen::Index c = 0; c < k; ++c) {
    const int p = use[static_cast<std::size_t>(c)];
    j.col(c) = a.col(p).cwiseQuotient(t);
    scale(c) = j.col(c).norm();  // unit columns: the units differ by orders of magnitude
    if (!(scale(c) > 0)) return out;
    j.col(c) /= scale(c);
    xs(c) = x(p) * scale(c);
  }
  const double s2 =
      (j * xs - Eigen::VectorXd::Ones(a.rows())).squaredNorm() / static_cast<double>(a.rows() - k);
  const Eigen::MatrixXd cov = s2 * (j.transpose() * j).inverse();
  for (Eigen::Index c = 0; c < k; ++c)
    out(use[static_cast<std::size_t>(c)]) = std::sqrt(cov(c, c)) / std::abs(xs(c));
  return out;
}

// Records fitted together share a backend (its protocol and costs) and a
// machine; names the first that does not.
void check_alike(std::span<const Measurements> records) {
  const Measurements& first = records.front();
  for (const Measurements& m : records.subspan(1)) {
    const auto machine = [](const Measurements& r) {
      return fmt::format("'{}', {} cores", r.cpu_model.empty() ? "?" : r.cpu_model, r.cores);
    };
    if (m.backend != first.backend || m.cores != first.cores || m.cpu_model != first.cpu_model)
      throw InvalidArgument(fmt::format(
          "bench records '{}' and '{}': records fitted together must share a backend and a "
          "machine ({} on {} against {} on {}); fit them apart, or --validate one",
          first.source, m.source, first.backend, machine(first), m.backend, machine(m)));
  }
}

}  // namespace

LinkFit fit_switch(std::span<const Measurements> records) {
  CCLAB_CHECK(!records.empty(), "fit_switch: no records");
  check_alike(records);
  std::vector<std::string> sources;
  Eigen::Index rows = 0;
  for (const Measurements& m : records) {
    sources.push_back(m.source);
    rows += static_cast<Eigen::Index>(m.rows.size());
  }
  const std::string named =
      fmt::format("bench record{} '{}'", records.size() > 1 ? "s" : "", fmt::join(sources, "', '"));
  if (rows < 2)
    throw InvalidArgument(fmt::format(
        "{}: {} row(s) of ours; a fit needs at least 2 (sizes or algorithms)", named, rows));
  Eigen::MatrixXd a(rows, kParams);
  Eigen::VectorXd t(rows);
  bool more_than_two = false;
  Eigen::Index at = 0;
  for (const Measurements& m : records) {
    const auto n = static_cast<Eigen::Index>(m.rows.size());
    a.middleRows(at, n) = coefficients(m);
    for (Eigen::Index i = 0; i < n; ++i) t(at + i) = m.rows[static_cast<std::size_t>(i)].time_us;
    at += n;
    more_than_two = more_than_two || m.ranks > 2;
  }
  Solver solver{a, t, {kLat, kInvBw, kInvReduce}, ""};
  if (more_than_two)
    solver.use.push_back(kOverhead);
  else
    solver.note =
        "no per-message overhead: at 2 ranks it cannot be told from latency (fit a record of 3 "
        "or more ranks with this one)";
  Params x = solver.clamp(solver.separate());
  Params errors = Params::Constant(NAN);
  if (x.allFinite() && x(kInvBw) > 0) {
    const Refined r = refine(records, t, solver, x);
    x = r.x;
    errors = relative_errors(r.slopes, t, solver.use, x);
  }
  if (!x.allFinite() || !(x(kInvBw) > 0))
    throw InvalidArgument(
        fmt::format("{}: no positive bandwidth fits these rows (add sizes that move data)", named));
  LinkFit fit;
  fit.note = solver.note;
  fit.lat_us = x(kLat);
  fit.bw_Bps = 1e6 / x(kInvBw);  // in units of (1 MB/s)^-1
  fit.reduce_Bps = x(kInvReduce) > 0 ? 1e6 / x(kInvReduce) : 0;
  fit.fabric_Bps = records.front().cores > 0 ? records.front().cores * fit.bw_Bps : 0;
  fit.host_cpus = records.front().cores;
  fit.eager_bytes = records.front().eager_bytes;
  fit.overhead_us = x(kOverhead);
  fit.pair_fifo = one_connection_per_pair(records.front().backend);
  fit.lat_rel_error = errors(kLat);
  fit.bw_rel_error = errors(kInvBw);  // 1/bw's, the same to first order
  fit.reduce_rel_error = errors(kInvReduce);
  fit.overhead_rel_error = errors(kOverhead);
  return fit;
}

bool one_connection_per_pair(const std::string& backend) { return backend == "gloo"; }

std::string switch_spec(const LinkFit& fit, int ranks) {
  std::string spec = fmt::format("switch:n={},bw={:.3f}MBps,lat={:.0f}ps", ranks, fit.bw_Bps / 1e6,
                                 fit.lat_us * 1e6);
  if (fit.reduce_Bps > 0) spec += fmt::format(",reduce={:.3f}MBps", fit.reduce_Bps / 1e6);
  if (fit.fabric_Bps > 0) spec += fmt::format(",fabric={:.3f}MBps", fit.fabric_Bps / 1e6);
  if (fit.eager_bytes > 0) spec += fmt::format(",eager={}", fit.eager_bytes);
  if (fit.overhead_us > 0) spec += fmt::format(",overhead={:.0f}ps", fit.overhead_us * 1e6);
  if (fit.overhead_us > 0 && fit.host_cpus > 0) spec += fmt::format(",cpus={}", fit.host_cpus);
  spec += fit.pair_fifo ? ",pairs=fifo" : ",pairs=shared";
  return spec;
}

std::vector<Comparison> predict_rows(const Measurements& m, const std::string& spec) {
  Topology t = make_topology(spec);
  if (t.num_endpoints() < static_cast<std::size_t>(m.ranks))
    throw InvalidArgument(fmt::format("topology '{}' has {} endpoints, too few for {}'s {} ranks",
                                      spec, t.num_endpoints(), m.source, m.ranks));
  t.eager_bytes = m.eager_bytes;  // the record's own protocol, whatever the spec's
  t.pair_fifo = one_connection_per_pair(m.backend);
  std::vector<Comparison> out;
  for (const auto& r : m.rows) out.push_back({r, time_to_us(simulate_row(m, r, t).total)});
  return out;
}

namespace {

// Per size, the labels within 1e-6 of the fastest by `time`, fastest first.
template <typename Time>
std::map<std::uint64_t, std::vector<std::string>> fastest(const std::vector<Comparison>& rows,
                                                          Time time) {
  std::map<std::uint64_t, double> best;
  for (const auto& c : rows)
    if (const auto [it, fresh] = best.try_emplace(c.row.bytes, time(c)); !fresh)
      it->second = std::min(it->second, time(c));
  std::map<std::uint64_t, std::vector<std::pair<double, std::string>>> near;
  for (const auto& c : rows)
    if (time(c) <= best[c.row.bytes] * (1 + 1e-6))
      near[c.row.bytes].emplace_back(time(c),
                                     coll::candidate_label(c.row.algo, c.row.chunks, c.row.inner));
  std::map<std::uint64_t, std::vector<std::string>> out;
  for (auto& [bytes, list] : near) {
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [t, label] : list) out[bytes].push_back(std::move(label));
  }
  return out;
}

}  // namespace

std::vector<SizeAgreement> agreement(const std::vector<Comparison>& rows) {
  const auto measured = fastest(rows, [](const Comparison& c) { return c.row.time_us; });
  const auto predicted = fastest(rows, [](const Comparison& c) { return c.predicted_us; });
  std::map<std::pair<std::uint64_t, std::string>, double> time_of;
  for (const auto& c : rows)
    time_of[{c.row.bytes, coll::candidate_label(c.row.algo, c.row.chunks, c.row.inner)}] =
        c.row.time_us;
  std::vector<SizeAgreement> out;
  for (const auto& [bytes, algos] : measured) {
    SizeAgreement a{bytes, algos.front(), predicted.at(bytes)};
    a.agrees = std::find(a.predicted.begin(), a.predicted.end(), a.measured) != a.predicted.end();
    double chosen = 0;
    for (const auto& label : a.predicted) chosen = std::max(chosen, time_of.at({bytes, label}));
    a.cost = chosen / time_of.at({bytes, a.measured});
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace cclab::sim
