// Where a simulated collective's bytes went (`cclab sim --links`): the links
// in tiers, and the busiest of them.
//
// A tier is the links that join the same kinds of node at the same bandwidth
// ("endpoint->switch 450 GB/s": the GPUs' NVLink into their switch on a
// `nodes` topology; "nic->switch 50 GB/s": the NICs' uplinks), so an
// algorithm's load on each level of the network reads at a glance: hier
// moves its bytes on NVLink, the flat ring through the NICs. A link's
// utilisation is its bytes over what it could carry in the collective's
// time, bytes / (bandwidth * time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cclab/sim/simulator.h"
#include "cclab/sim/topology.h"

namespace cclab::sim {

struct LinkTier {
  std::string name;             // "endpoint->switch 450 GB/s"
  int links = 0;                // of the topology
  int used = 0;                 // that carried bytes
  double bytes = 0;             // all its links together
  double mean_utilisation = 0;  // over all its links, idle ones too
  double max_utilisation = 0;
  LinkId busiest = -1;  // -1 when none carried bytes
};

// The tiers in the order of their first link.
std::vector<LinkTier> link_tiers(const Topology& topology, const SimResult& result);

// Up to `k` links that carried bytes, the highest utilisation first (ties:
// the lower link id).
std::vector<LinkId> busiest_links(const Topology& topology, const SimResult& result, std::size_t k);

double link_utilisation(const Topology& topology, const SimResult& result, LinkId link);

}  // namespace cclab::sim
