// Link use by tier and the busiest links (see link_use.h).
#include "cclab/sim/link_use.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace cclab::sim {
namespace {

// The tier's name, or the kinds of node it joins where it has none; and the
// bandwidth, so links of one name at different rates stay apart.
using TierKey = std::pair<std::string, double>;

TierKey tier_of(const Topology& t, LinkId l) {
  const Link& link = t.link(l);
  const std::string_view name = t.link_tier(l);
  if (!name.empty()) return {std::string(name), link.bw_bps};
  return {fmt::format("{}->{}", node_kind_name(t.node(link.from).kind),
                      node_kind_name(t.node(link.to).kind)),
          link.bw_bps};
}

std::string tier_name(const TierKey& key) {
  return fmt::format("{} {:g} GB/s", key.first, key.second * 1e-9);
}

}  // namespace

double link_utilisation(const Topology& topology, const SimResult& result, LinkId link) {
  if (result.total <= 0) return 0;
  return result.link_bytes[link] / (topology.link(link).bw_bps * time_to_seconds(result.total));
}

std::vector<LinkTier> link_tiers(const Topology& topology, const SimResult& result) {
  std::map<TierKey, std::size_t> index;  // into `tiers`
  std::vector<LinkTier> tiers;
  for (std::size_t i = 0; i < topology.num_links(); ++i) {
    const auto l = static_cast<LinkId>(i);
    const TierKey key = tier_of(topology, l);
    const auto [it, fresh] = index.try_emplace(key, tiers.size());
    if (fresh) tiers.push_back({tier_name(key)});
    LinkTier& tier = tiers[it->second];
    const double u = link_utilisation(topology, result, l);
    ++tier.links;
    tier.bytes += result.link_bytes[l];
    tier.mean_utilisation += u;  // a sum until the end
    if (result.link_bytes[l] <= 0) continue;
    ++tier.used;
    if (u > tier.max_utilisation || tier.busiest < 0) {
      tier.max_utilisation = u;
      tier.busiest = l;
    }
  }
  for (LinkTier& tier : tiers) tier.mean_utilisation /= tier.links;
  return tiers;
}

std::vector<LinkId> busiest_links(const Topology& topology, const SimResult& result,
                                  std::size_t k) {
  std::vector<LinkId> used;
  for (std::size_t i = 0; i < topology.num_links(); ++i)
    if (result.link_bytes[i] > 0) used.push_back(static_cast<LinkId>(i));
  const auto busier = [&](LinkId a, LinkId b) {
    const double ua = link_utilisation(topology, result, a);
    const double ub = link_utilisation(topology, result, b);
    return ua != ub ? ua > ub : a < b;
  };
  const std::size_t n = std::min(k, used.size());
  std::partial_sort(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(n), used.end(),
                    busier);
  used.resize(n);
  return used;
}

}  // namespace cclab::sim
