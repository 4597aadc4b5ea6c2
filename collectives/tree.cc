// Double binary tree all-reduce (as in NCCL): the data is split in two halves,
// each reduced up one binary tree to its root and broadcast back down.
//
// Tree 0 places rank r at in-order position p = r+1 of a binary tree over
// positions 1..n where a node's children are p -/+ lowbit(p)/2 (so odd
// positions are leaves) and the root is the highest power of two <= n. Tree 1
// is tree 0 mirrored (n even) or rotated by one (n odd), which turns tree 0's
// leaves into inner nodes: every rank is a leaf in at least one tree, so every
// rank sends and receives about one half's worth of data per direction.
//
// Each half moves in `chunks` pipeline chunks: a node forwards chunk c up as
// soon as its children's chunk c is reduced into it, so for depth d the up
// pass costs about (d + C) chunk-times instead of d full messages. Cost per
// tree for S/2 bytes: 2 (d + C - 1)(a + S/(2CB)) with d = ceil(log2 n).
//
// Under in-order issue the order of a rank's steps decides how well the two
// trees and the chunks overlap. A rank posts its leaf tree's sends up, all
// chunks, before anything of its inner tree (a leaf send queued behind the
// inner tree's wait for its children made each chunk wait for both trees);
// and it posts the next chunk's first-child receive, and on the way down the
// next chunk's receive from the parent, before the current chunk's steps
// that wait. Simulated on switch:n=64 at 16 MiB, tree:16 takes 4.19 ms
// where leaf sends in chunk order took 10.65 (ring: 2.89).
#include <array>
#include <optional>
#include <vector>

#include "blocks.h"
#include "cclab/collectives/algorithms.h"

namespace cclab::coll::detail {
namespace {

int lowbit(int p) { return p & -p; }

// Parent position of p in the in-order tree over 1..n, 0 for the root.
int parent_pos(int p, int n) {
  const int b = lowbit(p);
  int up = (p ^ b) | (b << 1);
  if (up > n) up = p ^ b;  // the right spine: climb to the nearest ancestor in range
  return up;
}

struct TreeNode {
  int parent = -1;                  // rank, -1 for the root
  std::array<int, 2> kids{-1, -1};  // ranks, -1 for none
};

int position(int tree, int rank, int n) {
  if (tree == 0) return rank + 1;
  return n % 2 == 0 ? n - rank : (rank + 1) % n + 1;
}

int rank_at(int tree, int pos, int n) {
  if (tree == 0) return pos - 1;
  return n % 2 == 0 ? n - pos : (pos - 2 + n) % n;
}

TreeNode tree_node(int tree, int rank, int n) {
  TreeNode node;
  const int p = position(tree, rank, n);
  if (const int up = parent_pos(p, n); up != 0) node.parent = rank_at(tree, up, n);
  // Children are p - b/2 and the first of p + b/2, p + b/4, ... that is in
  // range and names p as its parent.
  int k = 0;
  const int b = lowbit(p);
  if (b > 1) node.kids[k++] = rank_at(tree, p - b / 2, n);
  for (int h = b / 2; h >= 1; h /= 2) {
    if (p + h <= n && parent_pos(p + h, n) == p) {
      node.kids[k++] = rank_at(tree, p + h, n);
      break;
    }
  }
  return node;
}

}  // namespace

// Exposed for tests: the tree shape as (parent, kid0, kid1) ranks.
std::array<int, 3> double_tree_links(int tree, int rank, int n) {
  const TreeNode t = tree_node(tree, rank, n);
  return {t.parent, t.kids[0], t.kids[1]};
}

Program tree_all_reduce(int n, int me, std::uint64_t count, int chunks, Frame frame) {
  Emitter e("tree-up", frame);
  if (n == 1) {
    if (count > 0) co_yield e.copy({BufferId::kInput, 0, count}, {BufferId::kOutput, 0, count});
    co_return;
  }
  const Partition halves{count, 2};
  const std::array<TreeNode, 2> node{tree_node(0, me, n), tree_node(1, me, n)};
  // Per (tree, chunk): the last reduction into it and the send up of it.
  std::vector<std::int64_t> reduced(2 * chunks, -1), sent_up(2 * chunks, -1);
  auto chunk = [&](BufferId buf, int t, int c) {
    const Partition cp{halves.size(t), std::uint64_t(chunks)};
    return Region{buf, halves.offset(t) + cp.offset(c), cp.size(c)};
  };
  // Up: reduce the children's partial sums into mine, pass the result up.
  // A tree where this rank is a leaf (every rank is one in at least one)
  // sends all its chunks first: they wait for nothing, and under in-order
  // issue a leaf send queued behind the other tree's wait for its children
  // couples the two trees, so that each chunk waits for both.
  auto is_leaf = [&](int t) { return node[t].kids[0] < 0 && node[t].kids[1] < 0; };
  for (int t = 0; t < 2; ++t) {
    if (!is_leaf(t) || node[t].parent < 0) continue;
    for (int c = 0; c < chunks; ++c) {
      const Region in = chunk(BufferId::kInput, t, c);
      if (in.count == 0) continue;
      co_yield e.send(node[t].parent, in, {}, /*into_reduce=*/true);
      sent_up[t * chunks + c] = e.last();
    }
  }
  // In the other tree, the first child's receive of chunk c+1 is posted
  // before chunk c's second receive and send, which wait.
  auto first_recv = [&](int t, int c) -> std::optional<Step> {
    const int kid = node[t].kids[0];
    if (c >= chunks || kid < 0) return std::nullopt;
    const Region in = chunk(BufferId::kInput, t, c), out = chunk(BufferId::kOutput, t, c);
    if (out.count == 0) return std::nullopt;
    const Step s = e.recv_reduce(kid, in, out);
    reduced[t * chunks + c] = e.last();
    return s;
  };
  for (int t = 0; t < 2; ++t) {
    if (is_leaf(t)) continue;
    if (auto s = first_recv(t, 0)) co_yield *s;
    for (int c = 0; c < chunks; ++c) {
      if (auto s = first_recv(t, c + 1)) co_yield *s;
      const Region in = chunk(BufferId::kInput, t, c), out = chunk(BufferId::kOutput, t, c);
      if (out.count == 0) continue;
      const int i = t * chunks + c;
      if (const int kid = node[t].kids[1]; kid >= 0) {
        co_yield e.recv_reduce(kid, reduced[i] < 0 ? in : out, out, Deps(reduced[i]));
        reduced[i] = e.last();
      }
      if (node[t].parent >= 0) {
        co_yield e.send(node[t].parent, reduced[i] < 0 ? in : out, Deps(reduced[i]),
                        /*into_reduce=*/true);
        sent_up[i] = e.last();
      }
    }
  }
  // Down: the root's result flows back to every rank, tree 0 first in each
  // chunk, chunk c+1's receives posted before chunk c's sends.
  e.set_phase("tree-down");
  std::vector<std::int64_t> have = reduced;  // the chunk's final value: mine, or from above
  auto down_recv = [&](int t, int c) -> std::optional<Step> {
    if (c >= chunks || node[t].parent < 0) return std::nullopt;
    const Region out = chunk(BufferId::kOutput, t, c);
    const int i = t * chunks + c;
    if (out.count == 0) return std::nullopt;
    // The send up may still be reading this chunk (in place, even a leaf's).
    const Step s = e.recv(node[t].parent, out, Deps(sent_up[i]));
    have[i] = e.last();
    return s;
  };
  for (int t = 0; t < 2; ++t)
    if (auto s = down_recv(t, 0)) co_yield *s;
  for (int c = 0; c < chunks; ++c) {
    for (int t = 0; t < 2; ++t) {
      if (auto s = down_recv(t, c + 1)) co_yield *s;
      const Region out = chunk(BufferId::kOutput, t, c);
      if (out.count == 0) continue;
      for (int kid : node[t].kids)
        if (kid >= 0) co_yield e.send(kid, out, Deps(have[t * chunks + c]));
    }
  }
}

}  // namespace cclab::coll::detail
