// The catalogue of algorithms: each is a generator of schedules (see
// schedule.h), parameterised by pipeline chunks, and `make_schedule` is the one
// place that maps a (collective, algorithm) choice to its generator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cclab/collectives/schedule.h"

namespace cclab::coll {

enum class Algorithm : std::uint8_t {
  kAuto,             // chosen by select_algorithm() (selector.h)
  kRing,             // bandwidth-optimal ring (reduce-scatter + all-gather); chain broadcast
  kTree,             // double binary tree all-reduce; binomial-tree broadcast
  kHalvingDoubling,  // Rabenseifner: recursive halving + recursive doubling; their halves for
                     // reduce-scatter / all-gather; scatter + doubling broadcast
  kHierarchical,     // two-level: intra-group reduce-scatter, inner all-reduce, all-gather;
                     // reduce-scatter / all-gather: rings inside groups, then along rails
  kDirect,           // one-shot: every rank reads every peer's data
  kRings,            // rail-rotated rings: one ring per local rank of a group (NCCL's channels);
                     // broadcast: a chain along each
  kBiRing,           // bidirectional ring: half of the data each way round; broadcast: a chain
                     // each way round
};

std::string_view algorithm_name(Algorithm a);  // "ring", "tree", "hd", "hier", "direct", "auto"
Algorithm parse_algorithm(std::string_view name, std::string_view what = "algo");
std::string algorithm_names();
// {kRing, kTree} -> "ring,tree" with `separator` between the names.
std::string join_names(const std::vector<Algorithm>& algos, std::string_view separator = ",");
// Whether the algorithm takes AlgoConfig::group_size (hier, rings).
bool uses_groups(Algorithm a);
// "1,4" -> {1, 4}: pipeline chunk counts, each an integer from 1 (the sweeps'
// --chunks); throws InvalidArgument naming `what` and the item.
std::vector<int> parse_chunk_list(std::string_view text, std::string_view what);

struct AlgoConfig {
  Algorithm algo = Algorithm::kAuto;
  int chunks = 1;                      // pipeline chunks per transfer, >= 1
  int group_size = 0;                  // hier, rings: ranks per group; 0 = default_group_size()
  Algorithm inner = Algorithm::kRing;  // hierarchical: the cross-group all-reduce
  // The caller's output does not overlap its input (an out-of-place call):
  // `direct` then builds the result in the output instead of in scratch
  // behind a fence and a copy. Only local steps depend on it, so ranks that
  // differ in it still match. Executors set it from the call's pointers
  // (output_is_disjoint); the checker proves each setting in its placement.
  bool disjoint_output = false;
  // hier (all-reduce, reduce-scatter, all-gather: has_levels): levels above
  // the groups of group_size, innermost first, each a number of the level
  // below's groups per group (group_size 4 and {4} on a 4x4x4 torus:
  // reduce-scatter along x, then along y, all-reduce along z, all-gather
  // back); `inner` runs across the top level's groups (reduce-scatter's and
  // all-gather's: the ring, as along the others). Empty: two levels.
  // Written 4x4 (group_levels_name).
  std::vector<int> upper_groups = {};
  // hier (has_levels): a part of the vector (of each rank's block) per level,
  // the top one included, part w visiting the levels from level w round
  // (x-y-z, y-z-x, z-x-y), the parts at once: on a torus every dimension
  // works in every phase.
  bool rotate_levels = false;
  // For the built-in rule only (executors ignore it): the network gives a
  // ring's sends and the reverse ring's links of their own (a torus, a ring
  // of direct links; cclab sim finds it from the routes), so the
  // bidirectional ring moves half the data on links the ring leaves idle.
  // The rule then runs biring where it would run the ring (choose_config).
  bool prefer_biring = false;
  // For the built-in rule only: the rail rings of group_size's groups
  // (`rings`) cross between the groups on links of their own (a NIC per
  // GPU; cclab sim finds it from the routes), so together they have
  // group_size times a ring's bandwidth there. Broadcast's rule then runs
  // its chain on the rails (choose_config).
  bool prefer_rails = false;
};

// "4x4" -> {4, {4}}: a --group-size with its levels; "4" -> {4, {}}, "0" -> the
// default. Throws InvalidArgument naming `what` and the item: each level an
// integer, above 1 where there are several.
struct GroupLevels {
  int group_size = 0;
  std::vector<int> upper;
};
GroupLevels parse_group_levels(std::string_view text, std::string_view what);
// {4, {4}} -> "4x4"; {4, {}} -> "4".
std::string group_levels_name(int group_size, const std::vector<int>& upper);
// The ranks in one of the top level's groups: the group size times every
// upper level (4x4: 16), held at 2^40 past that, above any rank count.
std::int64_t group_levels_span(int group_size, const std::vector<int>& upper);

// The ranks as a grid, one dimension per level (hier's levels; cclab sim's
// test of a topology's rings): `size` ranks `stride` apart along each, the
// group size's first, then each upper level's, then the top groups' (n over
// their product), dimensions of one rank left out. All the ranks as one
// dimension where the group size is 0 or the levels do not divide them.
struct GridDim {
  int size = 1;
  int stride = 1;
  int coord(int rank) const { return rank / stride % size; }
  // The first rank of `rank`'s line along this dimension.
  int line_base(int rank) const { return rank - coord(rank) * stride; }
};
std::vector<GridDim> rank_grid(int ranks, int group_size, const std::vector<int>& upper);

// Which algorithms implement a collective (kAuto excluded), in display order.
std::vector<Algorithm> algorithms_for(CollectiveKind kind);
bool supports(CollectiveKind kind, Algorithm a);
// What hier all-reduce may run between groups (AlgoConfig::inner): the flat
// all-reduces, in display order.
std::vector<Algorithm> inner_algorithms();
// Whether `kind`'s hier may run `inner` between groups: all-reduce's any of
// inner_algorithms(), reduce-scatter's and all-gather's the ring, hd or
// biring (hier_inner_refusal() says where hd can run), broadcast (no hier)
// the ring, the default.
bool allows_inner(CollectiveKind kind, Algorithm inner);
// Those of inner_algorithms() that allows_inner(kind, ...), in display order.
std::vector<Algorithm> inners_for(CollectiveKind kind);
// One of inner_algorithms() by name; throws InvalidArgument naming `what`
// and the allowed names.
Algorithm parse_inner(std::string_view name, std::string_view what);
// "a,b,,c" -> {"a", "b", "", "c"}: the items of a comma list (views into
// `list`), empty ones kept so that parsers refuse them by name.
std::vector<std::string_view> split_list(std::string_view list);
// "ring,hd" -> {kRing, kHalvingDoubling}: `kind`'s algorithms, `all` standing
// for every one of them (algorithms_for) and `auto` for the selector's choice;
// throws InvalidArgument naming `what` and the item, before anything runs,
// for a name that is unknown or that `kind` has not (the sweeps' --algo).
std::vector<Algorithm> parse_algorithm_list(std::string_view list, CollectiveKind kind,
                                            std::string_view what);
// "ring,tree" -> {kRing, kTree}: inner algorithms, each once (the sweeps'
// --inner; `all` for every one); throws InvalidArgument naming `what` and the
// item.
std::vector<Algorithm> parse_inner_list(std::string_view text, std::string_view what);
// The same for --coll `kind`: only those allows_inner(kind, ...), and `all`
// for every one of them (inners_for(kind)).
std::vector<Algorithm> parse_inner_list(std::string_view text, std::string_view what,
                                        CollectiveKind kind);
// Whether an --inner list names `all`: then a row that cannot run where it
// is asked (hier_inner_refusal) is skipped, where a named one is an error.
bool names_all_inners(std::string_view text);

// The group size the hierarchical algorithm uses when none is given and no
// topology says otherwise: the smallest divisor of `ranks` that is at least
// sqrt(ranks), so a prime rank count gives a single group.
int default_group_size(int ranks);
// `group_size` where given (above 0), else default_group_size(ranks).
int group_size_or_default(int ranks, int group_size);
// Whether hd between `groups` groups can run as hier's pipeline, the halving
// and doubling along each rail: where they are a power of two (hier
// all-reduce's hd between others runs phased, reduce-scatter's and
// all-gather's is refused).
bool hd_pipelines_between(int groups);
// Why `kind`'s hier cannot run `inner` between the groups of `group_size`
// (0: the default) at `ranks` ranks, or "" where it can: reduce-scatter's and
// all-gather's hd needs a power of two of groups. make_schedule refuses the
// config with it ("inner: ..."), CCLAB_ALGO falls back past it, a tuning table
// is refused with it, cclab check skips the rank count.
// In levels (`levels`: upper_groups or rotate_levels) they run the ring only.
std::string hier_inner_refusal(CollectiveKind kind, int ranks, int group_size, Algorithm inner,
                               bool levels = false);

// The built-in size rule select_algorithm() falls back on without a tuning
// table for the call: below 8 ranks direct while (ranks-1) x bytes is at most
// kDirectTrafficLimit; from 8 ranks hd while a rank's block (all-reduce:
// bytes/ranks) is at most kHdBlockLimit; else ring (broadcast: binomial tree,
// then hd). bytes = count x element size. Never returns kAuto.
inline constexpr std::uint64_t kDirectTrafficLimit = 256u << 10;
inline constexpr std::uint64_t kHdBlockLimit = 32u << 10;
Algorithm choose_algorithm(const CollectiveShape& shape, std::size_t elem_bytes);

// The built-in rule where the ranks are known to sit in groups (the
// topology's nodes or leaves, the hosts of a gloo communicator, or
// --group-size): config.group_size g with 1 < g < ranks, dividing them.
// All-reduce, reduce-scatter and all-gather then go hier, except for the
// smallest messages: below 8 ranks direct while (ranks-1) x bytes is at
// most kGroupedDirectTrafficLimit (its traffic between the groups is twice
// hier's), from 8 ranks hd while a rank's block is at most
// kGroupedHdBlockLimit. All-reduce's hier runs hd between
// kGroupedHdInnerFrom groups or more where they are a power of two, or
// otherwise while a group's share (bytes / groups) is below
// kGroupedRingShareFrom, else the ring. Where that is a pipeline
// (hier_all_reduce_pipelines), and config.chunks is left at 1, it runs in
// hier_pipeline_chunks(bytes, bytes) chunks, with hd in
// hier_pipeline_chunks(bytes, bytes, kHierHdMinChunkBytes); reduce-scatter's
// and all-gather's hier in hier_pipeline_chunks(ranks x bytes, bytes), by
// their whole buffer and a rank's block, with hd between the groups where
// grouped_rule_pipelines_hd(). Chunks above 1 are the caller's and kept. In
// levels (upper_groups, rotate_levels) all-reduce's hier runs phased: the
// same inner rule across top_groups(), unchunked. Without such groups,
// choose_algorithm(); broadcast: broadcast_chain_pieces() below. Returns
// `config` with algo (and inner, chunks) set.
inline constexpr std::uint64_t kGroupedDirectTrafficLimit = 64u << 10;
inline constexpr std::uint64_t kGroupedHdBlockLimit = 1u << 10;
inline constexpr int kGroupedHdInnerFrom = 4;
inline constexpr std::uint64_t kGroupedRingShareFrom = 512u << 10;
bool has_groups(const CollectiveShape& shape, const AlgoConfig& config);
// Whether `kind`'s hier takes levels (AlgoConfig::upper_groups,
// rotate_levels): all-reduce, reduce-scatter, all-gather.
bool has_levels(CollectiveKind kind);
// The groups of config's top level: ranks over the group size times its
// upper_groups (1 where they span every rank).
int top_groups(int ranks, const AlgoConfig& config);
// Whether the grouped rule runs hier with hd between `groups` groups as a
// pipeline, in every collective it runs hier for: kGroupedHdInnerFrom or more
// groups where hd_pipelines_between().
bool grouped_rule_pipelines_hd(int groups);
// What the grouped rule's hier all-reduce of `bytes` runs between `groups`
// groups.
Algorithm inner_between_groups(int groups, std::uint64_t bytes);
// Whether hier all-reduce in chunks with `inner` between `groups` groups is
// one pipeline (the ring, or hd between a power of two of groups), rather
// than phases each in chunks.
bool hier_all_reduce_pipelines(Algorithm inner, int groups);
// The grouped rule's chunk count for hier in chunks (a pipeline) on a buffer
// of `bytes` of which a rank owns `block` (all-reduce: the whole buffer;
// reduce-scatter, all-gather: its block): bytes / kHierChunkBytes, but at
// least kHierMinChunks (one wave of the pipeline: the phased order without
// its fences) while the block's pieces stay kHierMinChunkBytes or more,
// rounded down to a power of two, 1 to kHierMaxChunks. (Over gloo on two
// emulated hosts all-reduce in 4 chunks of 16 KiB took 1.7-1.9x the
// unchunked hier's time, in 4 of 64 KiB 0.72-0.96x; reduce-scatter and
// all-gather of 64 KiB blocks in 4 chunks 1.2-1.3x.) With hd between the
// groups there is no such floor (kHierHdMinChunkBytes is a whole chunk): over
// gloo on 4 emulated hosts of 2 ranks, hier/hd in 4 chunks took 1.20-1.44x
// the unchunked hier/hd's time at 256 KiB and 1.03-1.20x at 1 MiB, in 2
// chunks at 1 MiB 0.98-1.03x (the simulator's grid lost 1.074x -> 1.087x by
// it).
inline constexpr std::uint64_t kHierChunkBytes = 512u << 10;
inline constexpr std::uint64_t kHierMinChunkBytes = 64u << 10;
inline constexpr std::uint64_t kHierHdMinChunkBytes = kHierChunkBytes;
inline constexpr int kHierMinChunks = 4;
inline constexpr int kHierMaxChunks = 256;
int hier_pipeline_chunks(std::uint64_t bytes, std::uint64_t block,
                         std::uint64_t min_chunk = kHierMinChunkBytes);
// With config.prefer_biring, for all-reduce, reduce-scatter and all-gather:
// below 8 ranks direct as above; from 8 ranks hd while a rank's block is at
// most two_way_hd_block_limit() (hd's far exchanges cross several of those
// links); else biring, or between groups hier with biring (its phases
// inside the groups bidirectional too) in hier_pipeline_chunks(whole
// buffer, block) chunks but at most kHierMinChunks, in levels as well.
// Broadcast keeps its rule below.
inline constexpr std::uint64_t kTwoWayHdBlockLimit = 16;
// kTwoWayHdBlockLimit, or kGroupedHdBlockLimit where rotated levels are of
// unequal sizes (rotated_levels_unequal: their phases last as long as the
// longest level's, which costs latency hd does not pay) and for grouped
// reduce-scatter and all-gather, as the grouped rule: their hier's rings
// carry a rank's block in a piece per ring of each level, about n messages
// a rank (at 4,096 ranks, 256 B blocks, hier/biring was past 300 s to
// simulate where hd took 0.45).
bool rotated_levels_unequal(int ranks, const AlgoConfig& config);
std::uint64_t two_way_hd_block_limit(const CollectiveShape& shape, const AlgoConfig& config);
// Whether choose_config takes that rule for the call.
bool takes_two_way_rule(const CollectiveShape& shape, const AlgoConfig& config);
// Broadcast: from 3 ranks, where the buffer makes at least ranks/2 pieces
// of kBroadcastChunkBytes (broadcast_chain_pieces), the pipelined chain in
// that many pieces: each way round where config.prefer_biring (biring in
// half as many chunks, a piece each), else on the rails where
// config.prefer_rails and the group size gives groups (rings, in 1/g as
// many chunks, at least 1), else the ring (broadcast_chain); past them
// choose_algorithm()'s unpipelined tree or hd. Chunks above 1 are the
// caller's and kept. The chain's (n-2+C)/C whole-message
// times beat hd's 2 once its C chunks reach about n, the tree's
// ceil(log2 n) before. In the simulator smaller pieces still win (it charges
// a message no cost of its own); over gloo on 4 emulated hosts of 1 Gbit/s,
// pieces of 64 KiB and 256 KiB took the same time, on the threads backend
// (4 ranks) 256 KiB led 64 KiB and 1 MiB, over gloo on one host's
// loopback (4 ranks on 2 cores) 256 KiB took 1.4-1.6x 1 MiB's time and the
// unpipelined tree led both (README, "Choosing").
inline constexpr std::uint64_t kBroadcastChunkBytes = 256u << 10;
// bytes / kBroadcastChunkBytes rounded down to a power of two, at most
// kHierMaxChunks, or 0 where the chain does not take the broadcast of
// `bytes` at `ranks` ranks.
int broadcast_chain_pieces(int ranks, std::uint64_t bytes);
// The chain broadcast's rule runs: biring, rings or ring, as above.
Algorithm broadcast_chain(const CollectiveShape& shape, const AlgoConfig& config);
AlgoConfig choose_config(const CollectiveShape& shape, std::size_t elem_bytes, AlgoConfig config);

// Validates the pair and builds the schedule; throws InvalidArgument naming the
// offending field (algo for this collective, chunks, group size, inner).
std::unique_ptr<Schedule> make_schedule(const CollectiveShape& shape, const AlgoConfig& config,
                                        std::size_t elem_bytes = 4);

}  // namespace cclab::coll
