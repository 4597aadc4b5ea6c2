// hier all-reduce over several levels of groups (AlgoConfig::upper_groups)
// and with its levels rotated (AlgoConfig::rotate_levels). The ranks are a
// grid: level k's groups are lines along dimension k (size levels[k],
// stride the product of the levels below), and the ranks left over, n over
// the product, are the top dimension. A rank reduce-scatters along each
// dimension in turn, on the shard the one before left it, runs the inner
// all-reduce along the last, and all-gathers back down: on a 4x4x4 torus in
// levels 4x4, the x links carry S, the y links S/4 and the z links S/16.
//
// Rotated, the vector is cut into one part per dimension, and part w goes
// through the dimensions starting from dimension w (x-y-z, y-z-x, z-x-y):
// in each phase every part is on a dimension of its own, so all of them
// work at once and each carries 1/D of what the one-way order puts on it.
// The parts' phases are interleaved step by step (each numbered in a frame
// of its own, its deps renumbered), and the phases are separated by fences.
// Where the levels are different links of one kind (a torus) this divides
// the bandwidth term by D; where a level is the slow link (NICs under
// NVLink), a part that starts there puts S/D on it instead of S/(gD): keep
// the one-way order. Simulated, 64 MiB, hier/biring: 4x4x4 torus 458 us
// rotated, 1339 one way, 1702 in two levels (rows); 4 nodes of 8 GPUs, hier:
// 1180 us rotated against 551.
#include <algorithm>
#include <vector>

#include "blocks.h"
#include "cclab/collectives/algorithms.h"

namespace cclab::coll::detail {
namespace {

// What rank `me` holds of the way's part once it has reduce-scattered along
// order[0..level): its shard of each dimension's partition in turn.
Region way_shard(const LevelsWay& way, int me, int level) {
  Region r = way.part;
  for (int k = 0; k < level; ++k) {
    const Partition shards{r.count, std::uint64_t(way.order[k].size)};
    const int l = way.order[k].coord(me);
    r = {r.buffer, r.offset + shards.offset(l), shards.size(l)};
  }
  return r;
}

// Phase `phase` of `way` at rank `me` (of 2D-1: D-1 reduce-scatters, the
// inner all-reduce along the last dimension, D-1 all-gathers), numbered
// from 0 in a frame of its own. Inside: the ring, or biring where the inner
// algorithm is. `scratch_at`: where the inner all-reduce may use scratch.
Program way_phase(const LevelsWay& way, int me, int phase, int chunks, Algorithm inner,
                  std::uint64_t scratch_at) {
  const int dims = static_cast<int>(way.order.size());
  const int level = phase < dims ? phase : 2 * dims - 2 - phase;
  const GridDim d = way.order[level];
  const int g = d.size, l = d.coord(me);
  const RankMap ranks{d.line_base(me), d.stride};
  const Region r = way_shard(way, me, level);
  const VectorRef out{BufferId::kOutput, r.offset};
  const VectorRef in{level == 0 ? BufferId::kInput : BufferId::kOutput, r.offset};
  if (phase == dims - 1)
    return flat_all_reduce(inner, g, l, r.count, chunks,
                           {0, ranks, {in, out, {BufferId::kScratch, scratch_at}}});
  const bool reduce = phase < dims - 1;
  if (inner == Algorithm::kBiRing)
    return biring_phase(g, l, r.count, chunks, reduce, {0, ranks, {in, out}});
  const Partition shards{r.count, std::uint64_t(g)};
  if (reduce)
    return ring_reduce_scatter(
        {g, l, ranks, shards, in, out, out.at(shards.offset(l), shards.size(l)), chunks});
  return ring_all_gather({g, l, ranks, shards, out, chunks});
}

}  // namespace

std::vector<LevelsWay> levels_ways(std::uint64_t count, const std::vector<GridDim>& dims,
                                   bool rotate) {
  const int ways = rotate && !dims.empty() ? static_cast<int>(dims.size()) : 1;
  const Partition parts{count, std::uint64_t(ways)};
  std::vector<LevelsWay> out(ways);
  for (int w = 0; w < ways; ++w) {
    out[w].part = {BufferId::kOutput, parts.offset(w), parts.size(w)};
    out[w].order = dims;
    std::rotate(out[w].order.begin(), out[w].order.begin() + w, out[w].order.end());
  }
  return out;
}

Program interleave(std::vector<Program> programs, std::int64_t first_id) {
  const int count = static_cast<int>(programs.size());
  std::int64_t next = first_id;
  // ids[w][i]: where program w's step i landed (its fences: the shared fence).
  std::vector<std::vector<std::int64_t>> ids(count);
  std::vector<char> done(count, 0), at_fence(count, 0);
  for (int running = count; running > 0;) {
    bool moved = false;
    for (int w = 0; w < count; ++w) {
      if (done[w] || at_fence[w]) continue;
      if (!programs[w].next()) {
        done[w] = 1;
        --running;
        continue;
      }
      Step s = programs[w].value();
      if (s.kind == StepKind::kFence) {
        at_fence[w] = 1;
        ids[w].push_back(-1);  // the shared fence's id, once it is made
        continue;
      }
      for (int k = 0; k < s.num_deps; ++k) s.deps[k] = ids[w][s.deps[k]];
      ids[w].push_back(next++);
      moved = true;
      co_yield s;
    }
    if (moved || std::find(at_fence.begin(), at_fence.end(), 1) == at_fence.end()) continue;
    // Every program still running waits at a fence: theirs, shared.
    for (int w = 0; w < count; ++w)
      if (at_fence[w]) ids[w].back() = next, at_fence[w] = 0;
    Step fence;
    fence.phase = "fence";
    ++next;
    co_yield fence;
  }
}

Program multilevel_hier_all_reduce(int me, std::uint64_t count, int chunks,
                                   std::vector<GridDim> dims, int inner_algo, bool rotate) {
  const auto inner = static_cast<Algorithm>(inner_algo);
  if (dims.empty()) dims.push_back({1, 1});  // one rank: the inner all-reduce's copy
  const int phases = 2 * static_cast<int>(dims.size()) - 1;
  const std::vector<LevelsWay> way = levels_ways(count, dims, rotate);
  const int ways = static_cast<int>(way.size());
  Emitter e;
  for (int phase = 0; phase < phases; ++phase) {
    if (phase > 0) co_yield e.fence();
    std::vector<Program> programs;
    for (int w = 0; w < ways; ++w)
      programs.push_back(way_phase(way[w], me, phase, chunks, inner, way[w].part.offset));
    CCLAB_YIELD_FROM(interleave(std::move(programs), e.next_id()), e);
  }
}

}  // namespace cclab::coll::detail
