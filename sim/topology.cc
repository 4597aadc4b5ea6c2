// Topology construction and validation. Validation checks connectivity with
// two breadth-first searches from endpoint 0 (forward and against the links),
// never passing through non-transit endpoints, so it costs O(nodes + links).
#include "cclab/sim/topology.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::sim {

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kEndpoint:
      return "endpoint";
    case NodeKind::kSwitch:
      return "switch";
    case NodeKind::kNic:
      return "nic";
  }
  return "?";
}

NodeId Topology::add_node(NodeKind kind, std::string name, bool transit) {
  nodes_.push_back(Node{kind, std::move(name), transit, 0, {}, {}});
  const auto id = static_cast<NodeId>(nodes_.size() - 1);
  if (kind == NodeKind::kEndpoint) endpoints_.push_back(id);
  return id;
}

NodeId Topology::add_endpoint(std::string name, bool transit, double reduce_bps) {
  const NodeId id = add_node(NodeKind::kEndpoint, std::move(name), transit);
  nodes_[id].reduce_bps = reduce_bps;
  return id;
}

LinkId Topology::add_link(NodeId from, NodeId to, double bw_bps, Time latency,
                          std::string_view tier) {
  links_.push_back(Link{from, to, bw_bps, latency});
  const auto [at, fresh] =
      tier_ids_.try_emplace(std::string(tier), static_cast<std::uint32_t>(tier_names_.size()));
  if (fresh) tier_names_.emplace_back(tier);
  link_tiers_.push_back(at->second);
  const auto id = static_cast<LinkId>(links_.size() - 1);
  nodes_[from].out.push_back(id);
  nodes_[to].in.push_back(id);
  return id;
}

void Topology::add_duplex(NodeId a, NodeId b, double bw_bps, Time latency, std::string_view ab,
                          std::string_view ba) {
  add_link(a, b, bw_bps, latency, ab);
  add_link(b, a, bw_bps, latency, ba);
}

std::string Topology::link_name(LinkId id) const {
  const Link& l = links_[id];
  return fmt::format("{}->{}", nodes_[l.from].name, nodes_[l.to].name);
}

std::vector<NodeId> Topology::reachable(NodeId from, bool forward) const {
  std::vector<char> seen(nodes_.size(), 0);
  std::deque<NodeId> queue{from};
  seen[from] = 1;
  std::vector<NodeId> found;
  while (!queue.empty()) {
    const NodeId n = queue.front();
    queue.pop_front();
    found.push_back(n);
    if (n != from && !nodes_[n].transit) continue;  // reached, but no passing through
    for (LinkId l : forward ? nodes_[n].out : nodes_[n].in) {
      const NodeId next = forward ? links_[l].to : links_[l].from;
      if (!seen[next]) {
        seen[next] = 1;
        queue.push_back(next);
      }
    }
  }
  return found;
}

void Topology::validate(std::string_view what) const {
  if (endpoints_.empty()) throw InvalidArgument(fmt::format("{}: no endpoints", what));
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    if (!(l.bw_bps > 0) || !std::isfinite(l.bw_bps))
      throw InvalidArgument(fmt::format("{}: link {} ({}): bw must be positive", what, i,
                                        link_name(static_cast<LinkId>(i))));
    if (l.latency < 0)
      throw InvalidArgument(fmt::format("{}: link {} ({}): lat must not be negative", what, i,
                                        link_name(static_cast<LinkId>(i))));
  }
  for (bool forward : {true, false}) {
    std::vector<char> hit(nodes_.size(), 0);
    for (NodeId n : reachable(endpoints_[0], forward)) hit[n] = 1;
    for (NodeId e : endpoints_)
      if (!hit[e])
        throw InvalidArgument(fmt::format(
            "{}: disconnected: endpoint '{}' {} endpoint '{}'", what, nodes_[e].name,
            forward ? "cannot be reached from" : "cannot reach", nodes_[endpoints_[0]].name));
  }
}

Topology make_topology(std::string_view spec_or_path) {
  const std::string text(spec_or_path);
  if (text.ends_with(".json") || std::filesystem::is_regular_file(text))
    return load_topology_json(text);
  return generate_topology(spec_or_path);
}

double Corrections::lookup(const std::vector<FactorBand>& bands, std::uint64_t bytes) {
  double factor = 1;
  for (const FactorBand& b : bands) {
    if (b.from_bytes > bytes) break;
    factor = b.factor;
  }
  return factor;
}

void check_factor_bands(const std::vector<FactorBand>& bands, std::string_view field) {
  for (std::size_t i = 0; i < bands.size(); ++i) {
    if (!(bands[i].factor > 0) || !std::isfinite(bands[i].factor))
      throw InvalidArgument(
          fmt::format("{}: band {} factor must be positive (got {})", field, i, bands[i].factor));
    if (i > 0 && bands[i].from_bytes <= bands[i - 1].from_bytes)
      throw InvalidArgument(fmt::format(
          "{}: band {} starts at {} B, not after band {} ({} B); list bands by ascending size",
          field, i, bands[i].from_bytes, i - 1, bands[i - 1].from_bytes));
  }
}

std::vector<FactorBand> parse_factor_bands(std::string_view text, std::string_view field) {
  std::vector<FactorBand> bands;
  for (std::size_t pos = 0; pos <= text.size();) {
    const auto slash = std::min(text.find('/', pos), text.size());
    const auto item = text.substr(pos, slash - pos);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos)
      throw InvalidArgument(fmt::format(
          "{}: '{}' is not from:factor (e.g. 0:1.5/64K:1.0, sizes with K, M, G)", field, item));
    FactorBand b;
    b.from_bytes = parse_bytes(item.substr(0, colon), field);
    const std::string number(item.substr(colon + 1));
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), b.factor);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size())
      throw InvalidArgument(fmt::format("{}: '{}' is not a number", field, number));
    bands.push_back(b);
    pos = slash + 1;
  }
  check_factor_bands(bands, field);
  return bands;
}

}  // namespace cclab::sim
