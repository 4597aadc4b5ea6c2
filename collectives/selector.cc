#include "cclab/collectives/selector.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/error.h"
#include "cclab/collectives/json_field.h"

namespace cclab::coll {
namespace {

using nlohmann::json;

// 1048576 -> "1 MiB", 1000 -> "1000 B": sizes as people write them.
std::string bytes_label(std::uint64_t b) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, ++u;
  return fmt::format("{} {}", b, kUnits[u]);
}

[[noreturn]] void bad_field(const std::string& source, const std::string& field,
                            const std::string& why) {
  throw InvalidArgument(fmt::format("tuning table '{}': {}: {}", source, field, why));
}

// The value of `key` in `obj` as T, or an error naming `field`.
template <typename T>
T field_as(const json& obj, const char* key, const std::string& field, const std::string& source) {
  return json_field<T>(obj, key, fmt::format("tuning table '{}'", source), field);
}

// "upper_groups" and "rotate_levels" (both optional): hier all-reduce's
// levels when the table was tuned (AlgoConfig's), checked as make_schedule
// would.
void parse_table_levels(const json& doc, TuningTable& t) {
  const std::string& source = t.source;
  if (const auto u = doc.find("upper_groups"); u != doc.end()) {
    if (!u->is_array()) bad_field(source, "upper_groups", "expected an array of integers");
    for (std::size_t i = 0; i < u->size(); ++i) {
      const json& level = (*u)[i];
      if (!level.is_number_integer() || level.get<std::int64_t>() < 2 ||
          level.get<std::int64_t>() > t.ranks)
        bad_field(source, fmt::format("upper_groups[{}]", i),
                  fmt::format("{} is not a level (allowed: an integer from 2 to the ranks)",
                              level.dump()));
      t.upper_groups.push_back(level.get<int>());
    }
    if (!t.upper_groups.empty() &&
        (t.group_size < 2 || t.ranks % group_levels_span(t.group_size, t.upper_groups) != 0))
      bad_field(source, "upper_groups",
                fmt::format("the top groups of {} do not divide the {} ranks",
                            group_levels_name(t.group_size, t.upper_groups), t.ranks));
  }
  if (doc.contains("rotate_levels"))
    t.rotate_levels = field_as<bool>(doc, "rotate_levels", "rotate_levels", source);
  if ((!t.upper_groups.empty() || t.rotate_levels) && !has_levels(t.collective))
    bad_field(source, t.upper_groups.empty() ? "rotate_levels" : "upper_groups",
              fmt::format("levels are hier's only (allreduce, reducescatter, allgather), not {}",
                          collective_name(t.collective)));
}

// A band's "inner": hier's algorithm between groups (all-reduce: any inner
// algorithm; reduce-scatter and all-gather: ring, hd or biring).
Algorithm parse_band_inner(const json& b, Algorithm algo, CollectiveKind kind,
                           const std::string& field, const std::string& source) {
  const auto name = field_as<std::string>(b, "inner", field + ".inner", source);
  if (algo != Algorithm::kHierarchical)
    bad_field(source, field + ".inner",
              fmt::format("only hier has an inner algorithm, not '{}'", algorithm_name(algo)));
  const Algorithm inner =
      parse_inner(name, fmt::format("tuning table '{}': {}.inner", source, field));
  if (!allows_inner(kind, inner))
    bad_field(source, field + ".inner",
              fmt::format("'{}' is not allowed for {} (allowed: {}; its hier runs rings inside its "
                          "groups)",
                          name, collective_name(kind), join_names(inners_for(kind), ", ")));
  return inner;
}

TuningBand parse_band(const json& b, CollectiveKind kind, const std::string& field,
                      const std::string& source) {
  if (!b.is_object()) bad_field(source, field, "expected an object");
  TuningBand band;
  band.min_bytes = field_as<std::uint64_t>(b, "min_bytes", field + ".min_bytes", source);
  const auto algo = field_as<std::string>(b, "algo", field + ".algo", source);
  band.algo = parse_algorithm(algo, fmt::format("tuning table '{}': {}.algo", source, field));
  if (band.algo == Algorithm::kAuto || !supports(kind, band.algo))
    bad_field(source, field + ".algo",
              fmt::format("'{}' does not implement {}", algo, collective_name(kind)));
  band.chunks = field_as<int>(b, "chunks", field + ".chunks", source);
  if (band.chunks < 1) bad_field(source, field + ".chunks", "must be at least 1");
  if (b.contains("inner")) band.inner = parse_band_inner(b, band.algo, kind, field, source);
  if (b.contains("predicted_at_bytes"))
    band.predicted_at =
        field_as<std::uint64_t>(b, "predicted_at_bytes", field + ".predicted_at_bytes", source);
  if (const auto p = b.find("predicted_us"); p != b.end()) {
    if (!p->is_object()) bad_field(source, field + ".predicted_us", "expected an object");
    for (const auto& [label, us] : p->items()) {
      if (!us.is_number())
        bad_field(source, fmt::format("{}.predicted_us.{}", field, label), "expected a number");
      band.predicted.push_back({label, us.get<double>()});
    }
    std::stable_sort(
        band.predicted.begin(), band.predicted.end(),
        [](const Prediction& a, const Prediction& b) { return a.time_us < b.time_us; });
  }
  return band;
}

// The caller's chunks where it asked for some, else what the rule gives
// (`rule`).
std::string chunks_phrase(const AlgoConfig& requested, std::string rule) {
  if (requested.chunks > 1) return fmt::format("the {} chunks asked for", requested.chunks);
  return rule;
}

// Up to kHierMinChunks chunks while `what` stays kHierMinChunkBytes or more.
std::string wave_phrase(const AlgoConfig& requested, std::string_view what) {
  return chunks_phrase(requested, fmt::format("up to {} chunks while {} {} or more", kHierMinChunks,
                                              what, bytes_label(kHierMinChunkBytes)));
}

// What the grouped rule runs past its smallest messages: hier in chunks (a
// pipeline), all-reduce's with the ring or, between many groups while a
// group's share is small, hd.
std::string grouped_hier_rule(const CollectiveShape& shape, const AlgoConfig& requested) {
  // The chunks: of the buffer or, for reduce-scatter and all-gather, of the
  // whole buffer, with the floor on what a chunk's pieces must stay.
  const auto chunks = [&](std::string_view of, std::string_view floor,
                          std::uint64_t min_chunk = kHierMinChunkBytes) {
    if (min_chunk >= kHierChunkBytes)  // no floor
      return chunks_phrase(
          requested, fmt::format("chunks of {}{} (at most {})", bytes_label(kHierChunkBytes), of,
                                 kHierMaxChunks));
    return chunks_phrase(
        requested, fmt::format("chunks of {}{} (at most {}; at least {} while {} {} or more)",
                               bytes_label(kHierChunkBytes), of, kHierMaxChunks, kHierMinChunks,
                               floor, bytes_label(min_chunk)));
  };
  const int groups = shape.ranks / requested.group_size;
  const bool hd_pipelines = grouped_rule_pipelines_hd(groups);
  const bool levels = !requested.upper_groups.empty() || requested.rotate_levels;
  if (shape.kind != CollectiveKind::kAllReduce && levels)
    return fmt::format("hier with the ring across its {} top groups, in {}",
                       top_groups(shape.ranks, requested),
                       wave_phrase(requested, "a rank's block splits into pieces of"));
  if (shape.kind != CollectiveKind::kAllReduce)
    return fmt::format("hier{} in {}",
                       hd_pipelines ? fmt::format(" with hd between its {} groups", groups) : "",
                       chunks(" of the whole buffer", "a rank's block splits into pieces of"));
  if (levels) {
    const int top = top_groups(shape.ranks, requested);
    if (top < kGroupedHdInnerFrom || grouped_rule_pipelines_hd(top))
      return fmt::format("hier with {} across its {} top groups, unchunked (levels run phased)",
                         top < kGroupedHdInnerFrom ? "the ring" : "hd", top);
    return fmt::format(
        "hier with hd across its {} top groups while a group's share is below {}, past it the "
        "ring, unchunked (levels run phased)",
        top, bytes_label(kGroupedRingShareFrom));
  }
  const std::string in = chunks("", "they stay");
  if (groups < kGroupedHdInnerFrom)
    return fmt::format("hier with the ring between its {} groups in {}", groups, in);
  if (hd_pipelines)
    return fmt::format("hier with hd between its {} groups in {}", groups,
                       chunks("", "they stay", kHierHdMinChunkBytes));
  return fmt::format(
      "hier with hd between its {} groups while a group's share is below {}, past it with the "
      "ring in {}",
      groups, bytes_label(kGroupedRingShareFrom), in);
}

// "groups of 4", "levels 4x4", "levels 4x4, rotated".
std::string groups_phrase(const AlgoConfig& c) {
  if (c.upper_groups.empty() && !c.rotate_levels) return fmt::format("groups of {}", c.group_size);
  return fmt::format("levels {}{}", group_levels_name(c.group_size, c.upper_groups),
                     c.rotate_levels ? ", rotated" : "");
}

// The rule where the reverse ring's links are idle (AlgoConfig::prefer_biring).
std::string two_way_rule(const CollectiveShape& shape, const AlgoConfig& requested) {
  const bool grouped = has_groups(shape, requested);
  std::string past = "biring";
  if (grouped)
    past = fmt::format("hier with biring in its {}, in {}", groups_phrase(requested),
                       wave_phrase(requested, "they stay"));
  return fmt::format(
      "built-in size rule on links both ways (the reverse ring's are its own): below 8 ranks "
      "direct while (ranks-1) x bytes is at most {}, from 8 ranks hd while a rank's block is at "
      "most {}, else {}",
      bytes_label(grouped ? kGroupedDirectTrafficLimit : kDirectTrafficLimit),
      bytes_label(two_way_hd_block_limit(shape, requested)), past);
}

// Broadcast's (broadcast_chain_pieces).
std::string broadcast_rule(const CollectiveShape& shape, const AlgoConfig& requested) {
  std::string chain = "the pipelined chain (ring)";
  const Algorithm a = broadcast_chain(shape, requested);
  if (a == Algorithm::kBiRing)
    chain = "the pipelined chain each way round (biring; links both ways)";
  else if (a == Algorithm::kRings)
    chain = fmt::format(
        "the pipelined chain on the rails of its groups of {} (rings; their own links between the "
        "groups)",
        requested.group_size);
  const std::string in = chunks_phrase(
      requested,
      fmt::format("chunks of {} (at most {})", bytes_label(kBroadcastChunkBytes), kHierMaxChunks));
  return fmt::format(
      "built-in size rule: from 3 ranks {} in {} where bytes make at least ranks/2 of {}, else "
      "tree up to 64 KiB or below 8 ranks, else hd",
      chain, in, bytes_label(kBroadcastChunkBytes));
}

std::string builtin_rule(const CollectiveShape& shape, const AlgoConfig& requested) {
  if (takes_two_way_rule(shape, requested)) return two_way_rule(shape, requested);
  if (shape.kind == CollectiveKind::kBroadcast) return broadcast_rule(shape, requested);
  const bool grouped = has_groups(shape, requested);
  std::string whose, past = "ring";
  if (grouped) {
    whose = fmt::format(" for ranks in {}", groups_phrase(requested));
    past = grouped_hier_rule(shape, requested);
  }
  return fmt::format(
      "built-in size rule{}: below 8 ranks direct while (ranks-1) x bytes is at most {}, from 8 "
      "ranks hd while a rank's block is at most {}, else {}",
      whose, bytes_label(grouped ? kGroupedDirectTrafficLimit : kDirectTrafficLimit),
      bytes_label(grouped ? kGroupedHdBlockLimit : kHdBlockLimit), past);
}

// The band's predictions: its winner, then the fastest of up to three other
// algorithms, with how much slower each is.
std::string explain_band(const TuningBand& band) {
  const auto shown = fastest_per_algorithm(band.predicted);
  if (shown.empty()) return "no predictions recorded";
  std::string out = fmt::format("at {}: ", bytes_label(band.predicted_at));
  for (std::size_t i = 0; i < shown.size() && i < 4; ++i) {
    const auto& p = shown[i];
    out += fmt::format("{}{} {:.2f} us", i == 0 ? "" : ", ", p.candidate, p.time_us);
    if (i > 0 && shown[0].time_us > 0)
      out += fmt::format(" (+{:.0f}%)", 100 * (p.time_us / shown[0].time_us - 1));
  }
  return out;
}

// Which rule decides a call, and what it gives: cheap, as make_schedule
// resolves every auto call through it; the reason is written only on demand.
struct Resolved {
  AlgoConfig config;
  enum class By { kCaller, kForced, kTable, kBuiltIn } by = By::kCaller;
  const TuningTable* table = nullptr;  // kTable
  const TuningBand* band = nullptr;    // kTable
};

// Why CCLAB_ALGO's choice does not run this call, or "" where it does: an
// algorithm the collective lacks, or an inner its hier refuses here.
std::string forced_refusal(const AlgoConfig& forced, const CollectiveShape& shape,
                           const AlgoConfig& requested) {
  if (!supports(shape.kind, forced.algo) || !allows_inner(shape.kind, forced.inner))
    return fmt::format("CCLAB_ALGO={} does not implement {}", candidate_label(forced),
                       collective_name(shape.kind));
  if (forced.algo != Algorithm::kHierarchical) return "";
  const auto why = hier_inner_refusal(shape.kind, shape.ranks, requested.group_size, forced.inner);
  if (why.empty()) return "";
  return fmt::format("CCLAB_ALGO={} does not run here: {}", candidate_label(forced), why);
}

// A table's hier levels apply where the caller asks for none, in the table's
// groups (or none).
bool takes_table_levels(const AlgoConfig& requested, const TuningTable& t) {
  return requested.upper_groups.empty() && !requested.rotate_levels &&
         (requested.group_size == 0 || requested.group_size == t.group_size);
}

Resolved resolve_choice(const CollectiveShape& shape, std::size_t elem_bytes,
                        const AlgoConfig& requested, const SelectorSettings& settings) {
  Resolved r{requested};
  if (requested.algo != Algorithm::kAuto) return r;
  if (settings.forced && forced_refusal(*settings.forced, shape, requested).empty()) {
    r.by = Resolved::By::kForced;
    r.config.algo = settings.forced->algo;
    r.config.chunks = settings.forced->chunks;
    r.config.inner = settings.forced->inner;
    return r;
  }
  const TuningTable* t = settings.table_for(shape.kind, shape.ranks);
  if (t != nullptr) {
    r.by = Resolved::By::kTable;
    r.table = t;
    r.band = t->band_for(table_bytes(shape, elem_bytes));
    CCLAB_CHECK(r.band != nullptr, "a tuning table without a band at 0 bytes");
    r.config.algo = r.band->algo;
    r.config.chunks = r.band->chunks;
    if (r.band->algo == Algorithm::kHierarchical) r.config.inner = r.band->inner;
    if (uses_groups(r.band->algo) && requested.group_size == 0) r.config.group_size = t->group_size;
    if (takes_table_levels(requested, *t)) {
      r.config.upper_groups = t->upper_groups;
      r.config.rotate_levels = t->rotate_levels;
    }
    return r;
  }
  r.by = Resolved::By::kBuiltIn;
  r.config = choose_config(shape, elem_bytes, requested);
  return r;
}

// The choice, with levels (AlgoConfig::upper_groups, rotate_levels) kept
// only where it is hier that runs them (reduce-scatter's and all-gather's
// with the ring, one way or both, between the top groups): an auto call may
// ask for them, for hier.
Resolved resolve(const CollectiveShape& shape, std::size_t elem_bytes, const AlgoConfig& requested,
                 const SelectorSettings& settings) {
  Resolved r = resolve_choice(shape, elem_bytes, requested, settings);
  const bool hier = r.config.algo == Algorithm::kHierarchical && has_levels(shape.kind);
  const bool rings_between =
      r.config.inner == Algorithm::kRing || r.config.inner == Algorithm::kBiRing;
  if (!hier || (shape.kind != CollectiveKind::kAllReduce && !rings_between)) {
    r.config.upper_groups.clear();
    r.config.rotate_levels = false;
  }
  return r;
}

// "allreduce at 8 ranks ('a.json')": what a table is for.
std::string table_scope(const TuningTable& t) {
  return fmt::format("{} at {} ranks ('{}')", collective_name(t.collective), t.ranks, t.source);
}

// "allreduce at 8 ranks ('a.json'), allgather at 8 ranks ('b.json')"
std::string table_scopes(const SelectorSettings& settings) {
  std::string out;
  for (const auto& t : settings.tables) out += (out.empty() ? "" : ", ") + table_scope(t);
  return out;
}

// Why the built-in rule decided: what the environment offered and why it did
// not apply, then the rule.
std::string builtin_reason(const CollectiveShape& shape, const AlgoConfig& requested,
                           const SelectorSettings& settings) {
  std::string why;
  if (settings.forced) why = forced_refusal(*settings.forced, shape, requested) + "; ";
  if (!settings.tables.empty())
    why += fmt::format("no tuning table for {} at {} ranks (tables: {}); ",
                       collective_name(shape.kind), shape.ranks, table_scopes(settings));
  return why + builtin_rule(shape, requested);
}

void add_table(SelectorSettings& s, const std::string& path) {
  try {
    TuningTable t = load_tuning_table(path);
    if (const TuningTable* same = s.table_for(t.collective, t.ranks))
      throw InvalidArgument(
          fmt::format("'{}' and '{}' are both for {} at {} ranks (allowed: one table "
                      "per collective and rank count)",
                      same->source, path, collective_name(t.collective), t.ranks));
    s.tables.push_back(std::move(t));
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("CCLAB_TUNING: {}", e.what()));
  }
}

SelectorSettings read_env() {
  SelectorSettings s;
  if (const char* algo = std::getenv("CCLAB_ALGO"); algo != nullptr && *algo != '\0') {
    s.forced = parse_candidate(algo, "CCLAB_ALGO");
    if (s.forced->algo == Algorithm::kAuto) s.forced.reset();
  }
  if (const char* paths = std::getenv("CCLAB_TUNING"); paths != nullptr && *paths != '\0') {
    const std::string list = paths;
    for (std::size_t pos = 0; pos <= list.size();) {
      const auto colon = std::min(list.find(':', pos), list.size());
      if (colon > pos) add_table(s, list.substr(pos, colon - pos));
      pos = colon + 1;
    }
  }
  return s;
}

// Whether the band's choice goes on at best's size: it is the fastest there,
// or its spread reaches below the fastest's.
bool still_holds(const TuningBand& band, const TimedCandidate& best,
                 const std::vector<TimedCandidate>& times) {
  const auto same = [&](const TimedCandidate& t) {
    return t.algo == band.algo && t.chunks == band.chunks && t.inner == band.inner;
  };
  if (same(best)) return true;
  for (const auto& t : times)
    if (t.bytes == best.bytes && same(t)) return t.low_us < best.high_us;
  return false;
}

}  // namespace

std::vector<Prediction> fastest_per_algorithm(const std::vector<Prediction>& fastest_first) {
  std::vector<Prediction> out;
  for (const auto& p : fastest_first) {
    const auto algo = p.candidate.substr(0, p.candidate.find(':'));
    const bool seen = std::any_of(out.begin(), out.end(), [&](const Prediction& q) {
      return q.candidate.substr(0, q.candidate.find(':')) == algo;
    });
    if (!seen) out.push_back(p);
  }
  return out;
}

const TuningTable* SelectorSettings::table_for(CollectiveKind kind, int ranks) const {
  for (const auto& t : tables)
    if (t.collective == kind && t.ranks == ranks) return &t;
  return nullptr;
}

std::uint64_t table_bytes(const CollectiveShape& shape, std::size_t elem_bytes) {
  return std::max(shape.input_count(), shape.output_count()) * elem_bytes;
}

const TuningBand* TuningTable::band_for(std::uint64_t bytes) const {
  const auto after =
      std::upper_bound(bands.begin(), bands.end(), bytes,
                       [](std::uint64_t b, const TuningBand& band) { return b < band.min_bytes; });
  return after == bands.begin() ? nullptr : &*(after - 1);
}

std::string candidate_label(Algorithm a, int chunks, Algorithm inner) {
  std::string out(algorithm_name(a));
  if (a == Algorithm::kHierarchical && inner != Algorithm::kRing)
    out += fmt::format("/{}", algorithm_name(inner));
  if (chunks > 1) out += fmt::format(":{}", chunks);
  return out;
}

std::string candidate_label(const AlgoConfig& c) {
  return candidate_label(c.algo, c.chunks, c.inner);
}

AlgoConfig parse_candidate(const std::string& text, const std::string& what) {
  AlgoConfig c;
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const auto slash = name.find('/');
  c.algo = parse_algorithm(name.substr(0, slash), what);
  if (slash != std::string::npos) {
    if (c.algo != Algorithm::kHierarchical)
      throw InvalidArgument(
          fmt::format("{}: '{}' has no inner algorithm (allowed: hier/INNER, e.g. hier/tree)", what,
                      name.substr(0, slash)));
    c.inner = parse_inner(name.substr(slash + 1), what);
  }
  if (colon == std::string::npos) return c;
  const std::string digits = text.substr(colon + 1);
  const bool numeric =
      !digits.empty() && digits.size() <= 6 &&
      std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  c.chunks = numeric ? std::stoi(digits) : 0;
  if (c.chunks < 1)
    throw InvalidArgument(fmt::format(
        "{}: malformed chunks in '{}' (allowed: ALGO or ALGO:CHUNKS, CHUNKS from 1, e.g. ring:4)",
        what, text));
  return c;
}

TuningTable parse_tuning_table(const std::string& json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text, refuse_duplicate_keys(fmt::format("tuning table '{}'", source)));
  } catch (const json::parse_error& e) {
    throw InvalidArgument(fmt::format("tuning table '{}': not JSON ({})", source, e.what()));
  }
  if (!doc.is_object()) bad_field(source, "(top level)", "expected an object");
  TuningTable t;
  t.source = source;
  if (const auto tool = doc.find("tool"); tool != doc.end() && tool->is_string())
    t.tool = tool->get<std::string>();
  const auto kind = field_as<std::string>(doc, "collective", "collective", source);
  try {
    t.collective = parse_collective(kind, "collective");
  } catch (const InvalidArgument&) {
    bad_field(source, "collective",
              fmt::format("'{}' (allowed: allreduce, reducescatter, allgather, broadcast)", kind));
  }
  t.topology = field_as<std::string>(doc, "topology", "topology", source);
  t.ranks = field_as<int>(doc, "ranks", "ranks", source);
  if (t.ranks < 1) bad_field(source, "ranks", "must be at least 1");
  t.group_size = field_as<int>(doc, "group_size", "group_size", source);
  if (t.group_size < 0 || (t.group_size > 0 && t.ranks % t.group_size != 0))
    bad_field(source, "group_size",
              fmt::format("{} does not divide the {} ranks (allowed: a divisor, or 0)",
                          t.group_size, t.ranks));
  parse_table_levels(doc, t);
  const auto bands = doc.find("bands");
  if (bands == doc.end() || !bands->is_array() || bands->empty())
    bad_field(source, "bands", "expected a non-empty array");
  for (std::size_t i = 0; i < bands->size(); ++i) {
    const std::string field = fmt::format("bands[{}]", i);
    t.bands.push_back(parse_band((*bands)[i], t.collective, field, source));
    if (t.bands.back().algo == Algorithm::kHierarchical)
      if (const auto why =
              hier_inner_refusal(t.collective, t.ranks, t.group_size, t.bands.back().inner);
          !why.empty())
        bad_field(source, field + ".inner", why);
    const std::uint64_t min = t.bands.back().min_bytes;
    if (i == 0 && min != 0) bad_field(source, field + ".min_bytes", "the first band starts at 0");
    if (i > 0 && min <= t.bands[i - 1].min_bytes)
      bad_field(
          source, field + ".min_bytes",
          fmt::format("{} is not above the previous band's {}", min, t.bands[i - 1].min_bytes));
  }
  return t;
}

TuningTable load_tuning_table(const std::string& path) {
  return parse_tuning_table(read_text_file(path, "tuning table"), path);
}

std::string tuning_table_json(const TuningTable& t) {
  json bands = json::array();
  for (const auto& b : t.bands) {
    json predicted = json::object();
    for (const auto& p : b.predicted) predicted[p.candidate] = p.time_us;
    json band = {{"min_bytes", b.min_bytes},
                 {"algo", algorithm_name(b.algo)},
                 {"chunks", b.chunks},
                 {"predicted_at_bytes", b.predicted_at},
                 {"predicted_us", std::move(predicted)}};
    if (b.algo == Algorithm::kHierarchical) band["inner"] = algorithm_name(b.inner);
    bands.push_back(std::move(band));
  }
  json doc = {{"tool", t.tool},
              {"collective", collective_name(t.collective)},
              {"topology", t.topology},
              {"ranks", t.ranks},
              {"group_size", t.group_size},
              {"bands", std::move(bands)}};
  if (!t.upper_groups.empty()) doc["upper_groups"] = t.upper_groups;
  if (t.rotate_levels) doc["rotate_levels"] = true;
  return doc.dump(2) + "\n";
}

TuningTable tuning_table_from_times(const std::vector<TimedCandidate>& times) {
  std::vector<std::uint64_t> sizes;
  for (const auto& t : times) sizes.push_back(t.bytes);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  TuningTable table;
  for (const std::uint64_t bytes : sizes) {
    const TimedCandidate* best = nullptr;
    TuningBand band;
    for (const auto& t : times) {
      if (t.bytes != bytes) continue;
      band.predicted.push_back({candidate_label(t.algo, t.chunks, t.inner), t.time_us});
      if (best == nullptr || t.time_us < best->time_us) best = &t;
    }
    std::stable_sort(
        band.predicted.begin(), band.predicted.end(),
        [](const Prediction& a, const Prediction& b) { return a.time_us < b.time_us; });
    if (!table.bands.empty() && still_holds(table.bands.back(), *best, times)) continue;
    band.min_bytes = table.bands.empty() ? 0 : bytes;
    band.predicted_at = bytes;
    band.algo = best->algo;
    band.chunks = best->chunks;
    band.inner = best->inner;
    table.bands.push_back(std::move(band));
  }
  return table;
}

std::string describe_bands(const TuningTable& table, const std::string& prefix) {
  std::string out;
  for (const auto& band : table.bands) {
    const auto p = fastest_per_algorithm(band.predicted);
    std::string at = "no times recorded";
    if (!p.empty()) at = fmt::format("at {} B: {:.2f} us; ", band.predicted_at, p[0].time_us);
    if (p.size() > 1)
      at += fmt::format("next {} {:.2f} us, +{:.0f}%", p[1].candidate, p[1].time_us,
                        100 * (p[1].time_us / p[0].time_us - 1));
    else if (!p.empty())
      at += "no other algorithm";
    std::string label = candidate_label(band.algo, band.chunks, band.inner);
    if (band.algo == Algorithm::kHierarchical &&
        (!table.upper_groups.empty() || table.rotate_levels))
      label +=
          fmt::format(" in levels {}{}", group_levels_name(table.group_size, table.upper_groups),
                      table.rotate_levels ? ", rotated" : "");
    out += fmt::format("{}from {:>11} B: {:<10} ({})\n", prefix, band.min_bytes, label, at);
  }
  return out;
}

const SelectorSettings& selector_settings_from_env() {
  static const SelectorSettings settings = read_env();  // a throw retries next call
  return settings;
}

Selection select_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                           const AlgoConfig& requested, const SelectorSettings& settings) {
  const Resolved r = resolve(shape, elem_bytes, requested, settings);
  Selection s{r.config, {}};
  switch (r.by) {
    case Resolved::By::kCaller:
      s.reason = "requested by the caller";
      break;
    case Resolved::By::kForced:
      s.reason = "CCLAB_ALGO=" + candidate_label(r.config);
      break;
    case Resolved::By::kTable: {
      const TuningTable& t = *r.table;
      const std::string kind = t.collective == CollectiveKind::kAllReduce
                                   ? ""
                                   : fmt::format("{}, ", collective_name(t.collective));
      const bool levels = !r.config.upper_groups.empty() || r.config.rotate_levels;
      s.reason =
          fmt::format("tuning table '{}' ({}{} ranks, {}{}), band from {}; {}", t.source, kind,
                      t.ranks, t.topology, levels ? ", hier in " + groups_phrase(r.config) : "",
                      bytes_label(r.band->min_bytes), explain_band(*r.band));
      break;
    }
    case Resolved::By::kBuiltIn:
      s.reason = builtin_reason(shape, requested, settings);
      break;
  }
  return s;
}

Selection select_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                           const AlgoConfig& requested) {
  if (requested.algo != Algorithm::kAuto) return {requested, "requested by the caller"};
  return select_algorithm(shape, elem_bytes, requested, selector_settings_from_env());
}

AlgoConfig resolve_algorithm(const CollectiveShape& shape, std::size_t elem_bytes,
                             const AlgoConfig& requested) {
  if (requested.algo != Algorithm::kAuto) return requested;
  return resolve(shape, elem_bytes, requested, selector_settings_from_env()).config;
}

}  // namespace cclab::coll
