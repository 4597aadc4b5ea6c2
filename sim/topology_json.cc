// The JSON topology format, for networks the generators do not describe:
//
//   {
//     "group_size": 8,                                  // optional hint
//     "upper_groups": [4], "rotate_levels": true,      // optional: hier all-reduce's levels
//     "nodes": [ {"name": "gpu0", "kind": "endpoint", "transit": false,
//                 "reduce": "200GBps"},                 // transit, reduce optional
//                {"name": "sw0", "kind": "switch"}, ... ],  // kinds: endpoint, switch, nic
//     "links": [ {"from": "gpu0", "to": "sw0", "bw": "100Gbps", "lat": "1us",
//                 "duplex": true,                      // duplex (default true): both ways
//                 "tier": "up", "tier_back": "down"}, ... ],  // optional names for reports
//     "latency_factor": [[0, 1.5], [65536, 1.0]],     // optional [from_bytes, factor]
//     "bandwidth_factor": "0:0.5/64K:0.9",            // bands, or the spec's string form
//     "eager": "64K",                                 // optional, bytes or "64K": eager limit
//     "overhead": "2us",                              // optional: host time per message end
//     "cpus": 2,                                      // optional: CPUs the hosts share for it
//     "pairs": "shared"                               // optional: fifo (default) or shared
//   }
//
// A link's "tier" names the level of the network it is on for `cclab sim
// --links` (from->to; "tier_back" names the way back of a duplex, default
// the same); without one, reports group links by the kinds of node they join.
// Ranks map onto endpoints in the order they are listed. Every error names the
// JSON path of the field ("links[3].bw").
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"
#include "cclab/collectives/json_field.h"
#include "cclab/sim/topology.h"

namespace cclab::sim {
namespace {

using nlohmann::json;

const json& member(const json& obj, const std::string& key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InvalidArgument(fmt::format("{}.{}: missing field", path, key));
  return *it;
}

std::string string_field(const json& obj, const std::string& key, const std::string& path) {
  const json& v = member(obj, key, path);
  if (!v.is_string())
    throw InvalidArgument(fmt::format("{}.{}: expected a string (got {})", path, key, v.dump()));
  return v.get<std::string>();
}

std::string optional_string(const json& obj, const std::string& key, const std::string& path,
                            const std::string& fallback) {
  return obj.contains(key) ? string_field(obj, key, path) : fallback;
}

bool bool_field(const json& obj, const std::string& key, const std::string& path, bool fallback) {
  if (!obj.contains(key)) return fallback;
  const json& v = obj.at(key);
  if (!v.is_boolean())
    throw InvalidArgument(
        fmt::format("{}.{}: expected true or false (got {})", path, key, v.dump()));
  return v.get<bool>();
}

const json& array_field(const json& root, const std::string& key, const std::string& what) {
  const json& v = member(root, key, what);
  if (!v.is_array()) throw InvalidArgument(fmt::format("{}.{}: expected an array", what, key));
  return v;
}

NodeKind parse_kind(const std::string& text, const std::string& field) {
  for (NodeKind k : {NodeKind::kEndpoint, NodeKind::kSwitch, NodeKind::kNic})
    if (text == node_kind_name(k)) return k;
  throw InvalidArgument(
      fmt::format("{}: unknown kind '{}' (allowed: endpoint, switch, nic)", field, text));
}

void add_nodes(Topology& t, const json& nodes, const std::string& what,
               std::map<std::string, NodeId>& ids) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string path = fmt::format("{}.nodes[{}]", what, i);
    if (!nodes[i].is_object()) throw InvalidArgument(fmt::format("{}: expected an object", path));
    const std::string name = string_field(nodes[i], "name", path);
    const NodeKind kind = parse_kind(string_field(nodes[i], "kind", path), path + ".kind");
    if (ids.contains(name))
      throw InvalidArgument(fmt::format("{}.name: duplicate node name '{}'", path, name));
    const bool transit = bool_field(nodes[i], "transit", path, kind != NodeKind::kEndpoint);
    if (kind == NodeKind::kEndpoint) {
      const double reduce =
          nodes[i].contains("reduce")
              ? parse_bandwidth(string_field(nodes[i], "reduce", path), path + ".reduce")
              : 0.0;
      ids[name] = t.add_endpoint(name, transit, reduce);
    } else {
      ids[name] = t.add_node(kind, name, transit);
    }
  }
}

void add_links(Topology& t, const json& links, const std::string& what,
               const std::map<std::string, NodeId>& ids) {
  for (std::size_t i = 0; i < links.size(); ++i) {
    const std::string path = fmt::format("{}.links[{}]", what, i);
    if (!links[i].is_object()) throw InvalidArgument(fmt::format("{}: expected an object", path));
    NodeId ends[2];
    for (int k = 0; k < 2; ++k) {
      const char* key = k == 0 ? "from" : "to";
      const std::string name = string_field(links[i], key, path);
      const auto it = ids.find(name);
      if (it == ids.end())
        throw InvalidArgument(fmt::format("{}.{}: unknown node '{}'", path, key, name));
      ends[k] = it->second;
    }
    const double bw = parse_bandwidth(string_field(links[i], "bw", path), path + ".bw");
    const Time lat = parse_latency(string_field(links[i], "lat", path), path + ".lat");
    const std::string tier = optional_string(links[i], "tier", path, "");
    if (bool_field(links[i], "duplex", path, true))
      t.add_duplex(ends[0], ends[1], bw, lat, tier,
                   optional_string(links[i], "tier_back", path, tier));
    else if (links[i].contains("tier_back"))
      throw InvalidArgument(
          fmt::format("{}.tier_back: a link with \"duplex\": false has no way back", path));
    else
      t.add_link(ends[0], ends[1], bw, lat, tier);
  }
}

// A correction field: [[from_bytes, factor], ...] or the "0:1.5/64K:1" string.
std::vector<FactorBand> factor_field(const json& root, const std::string& key,
                                     const std::string& what) {
  const std::string path = fmt::format("{}.{}", what, key);
  const json& v = root.at(key);
  if (v.is_string()) return parse_factor_bands(v.get<std::string>(), path);
  if (!v.is_array())
    throw InvalidArgument(
        fmt::format("{}: expected [[from_bytes, factor], ...] or a string", path));
  std::vector<FactorBand> bands;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& b = v[i];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() || !b[1].is_number())
      throw InvalidArgument(
          fmt::format("{}[{}]: expected [from_bytes, factor] with from_bytes >= 0 (got {})", path,
                      i, b.dump()));
    bands.push_back({b[0].get<std::uint64_t>(), b[1].get<double>()});
  }
  check_factor_bands(bands, path);
  return bands;
}

// The eager limit: a byte count, as a number or a string such as "64K".
std::uint64_t eager_field(const json& v, const std::string& path) {
  if (v.is_string()) return parse_bytes(v.get<std::string>(), path);
  if (!v.is_number_unsigned())
    throw InvalidArgument(fmt::format(
        "{}: expected a byte count >= 0 or a string such as \"64K\" (got {})", path, v.dump()));
  return v.get<std::uint64_t>();
}

constexpr long kMaxLevel = 1 << 20;

// "upper_groups" and "rotate_levels" (optional): hier all-reduce's levels
// above "group_size" (Topology::upper_groups_hint, rotate_levels_hint).
void parse_levels(const json& root, const std::string& what, Topology& t) {
  if (root.contains("upper_groups")) {
    const json& u = root.at("upper_groups");
    if (!u.is_array())
      throw InvalidArgument(
          fmt::format("{}.upper_groups: expected an array of integers (got {})", what, u.dump()));
    for (std::size_t i = 0; i < u.size(); ++i) {
      if (!u[i].is_number_integer() || u[i].get<long>() < 2 || u[i].get<long>() > kMaxLevel)
        throw InvalidArgument(
            fmt::format("{}.upper_groups[{}]: expected an integer from 2 to {} (got {})", what, i,
                        kMaxLevel, u[i].dump()));
      t.upper_groups_hint.push_back(u[i].get<int>());
    }
    if (!t.upper_groups_hint.empty() && t.group_size_hint < 2)
      throw InvalidArgument(fmt::format(
          "{}.upper_groups: levels above groups need a group_size of at least 2 (got {})", what,
          t.group_size_hint));
  }
  if (root.contains("rotate_levels")) {
    const json& r = root.at("rotate_levels");
    if (!r.is_boolean())
      throw InvalidArgument(
          fmt::format("{}.rotate_levels: expected true or false (got {})", what, r.dump()));
    t.rotate_levels_hint = r.get<bool>();
    if (t.rotate_levels_hint && t.group_size_hint < 1)
      throw InvalidArgument(
          fmt::format("{}.rotate_levels: rotates the levels of a group_size; give one", what));
  }
}

}  // namespace

Topology parse_topology_json(std::string_view text, std::string_view what_view) {
  const std::string what(what_view);
  json root;
  try {
    root = json::parse(text, coll::refuse_duplicate_keys(what));
  } catch (const json::parse_error& e) {
    throw InvalidArgument(fmt::format("{}: not valid JSON: {}", what, e.what()));
  }
  if (!root.is_object()) throw InvalidArgument(fmt::format("{}: expected a JSON object", what));
  Topology t;
  std::map<std::string, NodeId> ids;
  add_nodes(t, array_field(root, "nodes", what), what, ids);
  add_links(t, array_field(root, "links", what), what, ids);
  if (root.contains("group_size")) {
    const json& g = root.at("group_size");
    if (!g.is_number_integer() || g.get<long>() < 0)
      throw InvalidArgument(fmt::format("{}.group_size: expected an integer >= 0", what));
    t.group_size_hint = g.get<int>();
  }
  parse_levels(root, what, t);
  if (root.contains("latency_factor"))
    t.corrections.latency = factor_field(root, "latency_factor", what);
  if (root.contains("bandwidth_factor"))
    t.corrections.bandwidth = factor_field(root, "bandwidth_factor", what);
  if (root.contains("eager")) t.eager_bytes = eager_field(root.at("eager"), what + ".eager");
  if (root.contains("overhead"))
    t.overhead = parse_latency(string_field(root, "overhead", what), what + ".overhead");
  if (root.contains("cpus")) {
    const json& c = root.at("cpus");
    if (!c.is_number_unsigned() || c.get<std::uint64_t>() < 1 || c.get<std::uint64_t>() > 1u << 22)
      throw InvalidArgument(fmt::format("{}.cpus: expected an integer from 1 to {} (got {})", what,
                                        1 << 22, c.dump()));
    t.host_cpus = c.get<int>();
  }
  if (root.contains("pairs"))
    t.pair_fifo = parse_pair_order(string_field(root, "pairs", what), what + ".pairs");
  t.description = what;
  t.validate(what);
  return t;
}

Topology load_topology_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("topology: cannot open file '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology_json(text.str(), path);
}

}  // namespace cclab::sim
