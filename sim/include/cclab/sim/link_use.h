// Where a simulated collective's bytes went (`cclab sim --links`): the links
// in tiers, and the busiest of them.
//
// A tier is the links of one tier name at one bandwidth (Topology::link_tier:
// "gpu->nvsw 450 GB/s", the GPUs' NVLink into their switch on a `nodes`
// topology; "nic->net 50 GB/s", the NICs' uplinks; "x+" on a torus), or,
// for links without a name, those joining the same kinds of node at the same
// bandwidth ("endpoint->switch 100 GB/s"). An algorithm's load on each level
// of the network then reads at a glance: hier moves its bytes on NVLink, the
// flat ring through the NICs; a torus ring uses one direction of one
// dimension. A link's
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
  std::string name;             // "gpu->nvsw 450 GB/s"
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
