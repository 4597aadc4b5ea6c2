#include "cclab/sim/calibrate.h"

#include <Eigen/Dense>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"
#include "cclab/collectives/selector.h"
#include "cclab/collectives/types.h"
#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"
#include "cclab/sim/units.h"

namespace cclab::sim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& why) {
  throw InvalidArgument(fmt::format("bench record '{}': {}: {}", source, field, why));
}

template <typename T>
T get(const json& obj, const char* key, const std::string& field, const std::string& source) {
  const auto it = obj.find(key);
  if (it == obj.end()) bad(source, field, "missing field");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    bad(source, field, fmt::format("unexpected value {}", it->dump()));
  }
}

// A row of ours that ran and was right; false otherwise. `chunks` is the
// record's config.chunks where it is one number (older records, whose rows
// carry none), else 0.
bool usable_row(const json& r, std::size_t i, const std::string& source, int chunks,
                MeasuredRow& out) {
  const std::string field = fmt::format("rows[{}]", i);
  if (get<bool>(r, "peer", field + ".peer", source) || r.contains("skipped")) return false;
  const auto algo = get<std::string>(r, "algo", field + ".algo", source);
  if (algo.rfind("auto", 0) == 0) return false;  // "auto", "auto:4"
  if (const auto w = r.find("wrong"); w != r.end() && !w->is_null() && w->get<double>() != 0)
    bad(source, field + ".wrong", "a row with wrong results cannot calibrate anything");
  // "ring" or "ring:4"; a row's own chunks win over the config's.
  const auto config =
      coll::parse_candidate(algo, fmt::format("bench record '{}': {}.algo", source, field));
  out.algo = config.algo;
  out.chunks = r.contains("chunks") ? get<int>(r, "chunks", field + ".chunks", source)
               : algo.find(':') != std::string::npos ? config.chunks
                                                     : chunks;
  if (out.chunks < 1)
    bad(source, field + ".chunks", "missing (neither the row nor config.chunks gives it)");
  out.bytes = get<std::uint64_t>(r, "size_bytes", field + ".size_bytes", source);
  out.time_us = get<double>(r, "time_us_median", field + ".time_us_median", source);
  if (!(out.time_us > 0)) bad(source, field + ".time_us_median", "must be positive");
  return true;
}

SimResult simulate_row(const Measurements& m, const MeasuredRow& r, const Topology& t) {
  // Sizes are the whole buffer (cclab bench's), counts a rank's.
  const std::uint64_t count = coll::count_of_total(m.coll, m.ranks, r.bytes / m.elem_bytes);
  const coll::CollectiveShape shape{m.coll, m.ranks, count, m.root};
  const bool hier = coll::uses_groups(r.algo);
  const auto sched =
      coll::make_schedule(shape, {r.algo, r.chunks, hier ? m.group_size : 0}, m.elem_bytes);
  return simulate(t, *sched, {m.elem_bytes, nullptr});
}

// One parameter at a time (1 us a link, or 1 MB/s), the others out of the
// way: no latency, free reductions, or a bandwidth this high.
constexpr const char* kHuge = "1000000000TBps";  // 1e21 B/s: 128 MiB in 0.13 ps

// Per row, the coefficients of (lat in us, 1e6/bw, 1e6/reduce): its
// simulated time in us with each parameter alone at 1 us or 1 MB/s.
Eigen::MatrixXd coefficients(const Measurements& m) {
  const int n = m.ranks;
  const std::string eager = m.eager_bytes > 0 ? fmt::format(",eager={}", m.eager_bytes) : "";
  const Topology lat_only =
      generate_topology(fmt::format("switch:n={},bw={},lat=1us{}", n, kHuge, eager));
  // The fabric (cores x bw, see calibrate.h) scales with bw: still linear.
  const std::string fabric = m.cores > 0 ? fmt::format(",fabric={}MBps", m.cores) : "";
  const Topology bw_only =
      generate_topology(fmt::format("switch:n={},bw=1MBps,lat=0{}{}", n, fabric, eager));
  const Topology reduce_only =
      generate_topology(fmt::format("switch:n={},bw={},lat=0,reduce=1MBps{}", n, kHuge, eager));
  Eigen::MatrixXd a(static_cast<Eigen::Index>(m.rows.size()), 3);
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    const auto& r = m.rows[i];
    const auto row = static_cast<Eigen::Index>(i);
    a(row, 0) = time_to_us(simulate_row(m, r, lat_only).total);     // per us of latency
    a(row, 1) = time_to_us(simulate_row(m, r, bw_only).total);      // per us/MB moved
    a(row, 2) = time_to_us(simulate_row(m, r, reduce_only).total);  // per us/MB reduced
  }
  return a;
}

// Weighted least squares over the columns in `use` (relative errors: each
// row divided by its measured time); the unused parameters are 0.
Eigen::Vector3d solve(const Eigen::MatrixXd& a, const Eigen::VectorXd& t,
                      const std::vector<int>& use) {
  Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(use.size()));
  for (std::size_t j = 0; j < use.size(); ++j)
    sub.col(static_cast<Eigen::Index>(j)) = a.col(use[j]).cwiseQuotient(t);
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(a.rows());
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(sub);
  Eigen::Vector3d x = Eigen::Vector3d::Zero();
  if (qr.rank() < static_cast<Eigen::Index>(use.size())) return Eigen::Vector3d::Constant(NAN);
  const Eigen::VectorXd y = qr.solve(ones);
  for (std::size_t j = 0; j < use.size(); ++j) x(use[j]) = y(static_cast<Eigen::Index>(j));
  return x;
}

}  // namespace

Measurements parse_bench_record(const std::string& json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw InvalidArgument(fmt::format("bench record '{}': not JSON ({})", source, e.what()));
  }
  if (!doc.is_object()) bad(source, "(top level)", "expected an object");
  if (doc.value("tool", "") != "cclab bench") bad(source, "tool", "not a `cclab bench` record");
  const auto config = doc.find("config");
  if (config == doc.end() || !config->is_object()) bad(source, "config", "missing object");
  Measurements m;
  m.source = source;
  const auto coll_name = get<std::string>(*config, "coll", "config.coll", source);
  m.coll = coll::parse_collective(coll_name, fmt::format("bench record '{}': config.coll", source));
  if (m.coll == coll::CollectiveKind::kBroadcast)
    m.root = get<int>(*config, "root", "config.root", source);
  m.backend = get<std::string>(*config, "backend", "config.backend", source);
  m.ranks = get<int>(*config, "ranks", "config.ranks", source);
  // One number in records written before --chunks took a list (their rows
  // carry none), a list since.
  const auto chunks = config->find("chunks");
  if (chunks == config->end()) bad(source, "config.chunks", "missing field");
  if (!chunks->is_number_integer() && !chunks->is_array())
    bad(source, "config.chunks", fmt::format("unexpected value {}", chunks->dump()));
  const int config_chunks = chunks->is_number_integer() ? chunks->get<int>() : 0;
  m.group_size = get<int>(*config, "group_size", "config.group_size", source);
  m.elem_bytes = coll::dtype_size(coll::parse_dtype(
      get<std::string>(*config, "dtype", "config.dtype", source), "config.dtype"));
  if (m.ranks < 2) bad(source, "config.ranks", "needs at least 2 ranks (nothing moves at 1)");
  if (m.root < 0 || m.root >= m.ranks)
    bad(source, "config.root", fmt::format("{} is not one of the {} ranks", m.root, m.ranks));
  if (const auto machine = doc.find("machine"); machine != doc.end() && machine->is_object())
    m.cores = machine->value("cores", 0);
  if (m.backend == "gloo") {  // null: the executor's default
    const auto eager = config->find("eager_bytes");
    m.eager_bytes = eager == config->end() || eager->is_null()
                        ? coll::kGlooDefaultEagerBytes
                        : get<std::uint64_t>(*config, "eager_bytes", "config.eager_bytes", source);
  }
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array()) bad(source, "rows", "missing array");
  for (std::size_t i = 0; i < rows->size(); ++i) {
    MeasuredRow r;
    if (usable_row((*rows)[i], i, source, config_chunks, r)) m.rows.push_back(r);
  }
  return m;
}

Measurements load_bench_record(const std::string& path) {
  return parse_bench_record(read_text_file(path, "bench record"), path);
}

LinkFit fit_switch(const Measurements& m) {
  if (m.rows.size() < 2)
    throw InvalidArgument(fmt::format(
        "bench record '{}': {} row(s) of ours; a fit needs at least 2 (sizes or algorithms)",
        m.source, m.rows.size()));
  const Eigen::MatrixXd a = coefficients(m);
  Eigen::VectorXd t(a.rows());
  for (std::size_t i = 0; i < m.rows.size(); ++i)
    t(static_cast<Eigen::Index>(i)) = m.rows[i].time_us;
  LinkFit fit;
  // All three, then without what comes out negative or cannot be told apart.
  Eigen::Vector3d x = solve(a, t, {0, 1, 2});
  if (!x.allFinite() || x(2) < 0) {
    fit.note = std::isfinite(x(2))
                   ? "reductions fit as free (a negative reduce time came out)"
                   : "reductions cannot be told from the bytes moved in these rows: folded into bw";
    x = solve(a, t, {0, 1});
  }
  if (x.allFinite() && x(0) < 0) {
    fit.note +=
        std::string(fit.note.empty() ? "" : "; ") + "latency fit as 0 (it came out negative)";
    x = solve(a, t, {1, 2});
    if (!x.allFinite() || x(2) < 0) x = solve(a, t, {1});
  }
  if (!x.allFinite() || !(x(1) > 0))
    throw InvalidArgument(fmt::format(
        "bench record '{}': no positive bandwidth fits these rows (add sizes that move data)",
        m.source));
  fit.lat_us = x(0);
  fit.bw_Bps = 1e6 / x(1);  // x(1) in units of (1 MB/s)^-1
  fit.reduce_Bps = x(2) > 0 ? 1e6 / x(2) : 0;
  fit.fabric_Bps = m.cores > 0 ? m.cores * fit.bw_Bps : 0;
  fit.eager_bytes = m.eager_bytes;
  return fit;
}

std::string switch_spec(const LinkFit& fit, int ranks) {
  std::string spec = fmt::format("switch:n={},bw={:.3f}MBps,lat={:.0f}ps", ranks, fit.bw_Bps / 1e6,
                                 fit.lat_us * 1e6);
  if (fit.reduce_Bps > 0) spec += fmt::format(",reduce={:.3f}MBps", fit.reduce_Bps / 1e6);
  if (fit.fabric_Bps > 0) spec += fmt::format(",fabric={:.3f}MBps", fit.fabric_Bps / 1e6);
  if (fit.eager_bytes > 0) spec += fmt::format(",eager={}", fit.eager_bytes);
  return spec;
}

std::vector<Comparison> predict_rows(const Measurements& m, const std::string& spec) {
  Topology t = generate_topology(spec);
  t.eager_bytes = m.eager_bytes;  // the record's own protocol, whatever the spec's
  std::vector<Comparison> out;
  for (const auto& r : m.rows) out.push_back({r, time_to_us(simulate_row(m, r, t).total)});
  return out;
}

}  // namespace cclab::sim
