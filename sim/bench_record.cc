// Reading `cclab bench --json` records for calibration (calibrate.h): the
// rows of ours that ran and were right, with the config and machine fields
// the model needs; every error names the file and the field.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"
#include "cclab/collectives/gloo.h"
#include "cclab/collectives/json_field.h"
#include "cclab/collectives/selector.h"
#include "cclab/collectives/types.h"
#include "cclab/sim/calibrate.h"

namespace cclab::sim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& why) {
  throw InvalidArgument(fmt::format("bench record '{}': {}: {}", source, field, why));
}

// The value of `key` in `obj` as T, or an error naming `field`.
template <typename T>
T field_as(const json& obj, const char* key, const std::string& field, const std::string& source) {
  return coll::json_field<T>(obj, key, fmt::format("bench record '{}'", source), field);
}

// What a record's rows inherit from its config: older records' rows carry
// neither their chunks nor hier's inner algorithm.
struct RowDefaults {
  int chunks = 0;                                  // config.chunks where it is one number, else 0
  coll::Algorithm inner = coll::Algorithm::kRing;  // config.inner where it is one name
};

// A row of ours that ran and was right; false otherwise.
bool usable_row(const json& r, std::size_t i, const std::string& source,
                const RowDefaults& defaults, MeasuredRow& out) {
  const std::string field = fmt::format("rows[{}]", i);
  if (field_as<bool>(r, "peer", field + ".peer", source) || r.contains("skipped")) return false;
  const auto algo = field_as<std::string>(r, "algo", field + ".algo", source);
  if (algo.rfind("auto", 0) == 0) return false;  // "auto", "auto:4"
  if (const auto w = r.find("wrong");
      w != r.end() && !w->is_null() && field_as<double>(r, "wrong", field + ".wrong", source) != 0)
    bad(source, field + ".wrong", "a row with wrong results cannot calibrate anything");
  // "ring", "ring:4" or "hier/tree"; a row's own chunks and inner algorithm
  // win over the config's.
  const auto config =
      coll::parse_candidate(algo, fmt::format("bench record '{}': {}.algo", source, field));
  out.algo = config.algo;
  out.chunks = r.contains("chunks") ? field_as<int>(r, "chunks", field + ".chunks", source)
               : algo.find(':') != std::string::npos ? config.chunks
                                                     : defaults.chunks;
  out.inner = algo.find('/') != std::string::npos ? config.inner : defaults.inner;
  if (out.chunks < 1)
    bad(source, field + ".chunks", "missing (neither the row nor config.chunks gives it)");
  out.bytes = field_as<std::uint64_t>(r, "size_bytes", field + ".size_bytes", source);
  out.time_us = field_as<double>(r, "time_us_median", field + ".time_us_median", source);
  if (!(out.time_us > 0)) bad(source, field + ".time_us_median", "must be positive");
  return true;
}

}  // namespace

Measurements parse_bench_record(const std::string& json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text,
                      coll::refuse_duplicate_keys(fmt::format("bench record '{}'", source)));
  } catch (const json::parse_error& e) {
    throw InvalidArgument(fmt::format("bench record '{}': not JSON ({})", source, e.what()));
  }
  if (!doc.is_object()) bad(source, "(top level)", "expected an object");
  if (doc.value("tool", "") != "cclab bench") bad(source, "tool", "not a `cclab bench` record");
  const auto config = doc.find("config");
  if (config == doc.end() || !config->is_object()) bad(source, "config", "missing object");
  Measurements m;
  m.source = source;
  const auto coll_name = field_as<std::string>(*config, "coll", "config.coll", source);
  m.coll = coll::parse_collective(coll_name, fmt::format("bench record '{}': config.coll", source));
  if (m.coll == coll::CollectiveKind::kBroadcast)
    m.root = field_as<int>(*config, "root", "config.root", source);
  m.backend = field_as<std::string>(*config, "backend", "config.backend", source);
  m.ranks = field_as<int>(*config, "ranks", "config.ranks", source);
  // One number in records written before --chunks took a list (their rows
  // carry none), a list since.
  const auto chunks = config->find("chunks");
  if (chunks == config->end()) bad(source, "config.chunks", "missing field");
  if (!chunks->is_number_integer() && !chunks->is_array())
    bad(source, "config.chunks",
        fmt::format("expected an integer or a list of them, got {}", chunks->dump()));
  RowDefaults defaults;
  defaults.chunks =
      chunks->is_number_integer() ? field_as<int>(*config, "chunks", "config.chunks", source) : 0;
  // One name before --inner took a list (rows then said "hier"); since,
  // rows name theirs, and a list means the ring for a plain "hier".
  if (const auto inner = config->find("inner"); inner != config->end()) {
    const auto name = field_as<std::string>(*config, "inner", "config.inner", source);
    if (name.find(',') == std::string::npos)
      defaults.inner =
          coll::parse_inner(name, fmt::format("bench record '{}': config.inner", source));
  }
  m.group_size = field_as<int>(*config, "group_size", "config.group_size", source);
  m.elem_bytes = coll::dtype_size(coll::parse_dtype(
      field_as<std::string>(*config, "dtype", "config.dtype", source), "config.dtype"));
  if (m.ranks < 2) bad(source, "config.ranks", "needs at least 2 ranks (nothing moves at 1)");
  if (m.root < 0 || m.root >= m.ranks)
    bad(source, "config.root", fmt::format("{} is not one of the {} ranks", m.root, m.ranks));
  if (const auto machine = doc.find("machine"); machine != doc.end() && machine->is_object()) {
    m.cores = machine->value("cores", 0);
    m.cpu_model = machine->value("cpu_model", "");
  }
  if (m.backend == "gloo") {  // null: the executor's default
    const auto eager = config->find("eager_bytes");
    m.eager_bytes =
        eager == config->end() || eager->is_null()
            ? coll::kGlooDefaultEagerBytes
            : field_as<std::uint64_t>(*config, "eager_bytes", "config.eager_bytes", source);
  }
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array()) bad(source, "rows", "missing array");
  for (std::size_t i = 0; i < rows->size(); ++i) {
    MeasuredRow r;
    if (usable_row((*rows)[i], i, source, defaults, r)) m.rows.push_back(r);
  }
  return m;
}

Measurements load_bench_record(const std::string& path) {
  return parse_bench_record(read_text_file(path, "bench record"), path);
}

}  // namespace cclab::sim
