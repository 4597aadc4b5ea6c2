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
#include <array>
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

Program tree_all_reduce(int n, int me, std::uint64_t count, int chunks) {
  Emitter e("tree-up");
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
  // The tree where this rank is a leaf (every rank is one in at least one)
  // goes first in each chunk: its sends up wait for nothing, so they do not
  // stand behind the other tree's wait for its children (under in-order
  // issue, a rank deep in one tree held the other tree back by that depth).
  const bool leaf0 = node[0].kids[0] < 0 && node[0].kids[1] < 0;
  const std::array<int, 2> order = leaf0 ? std::array{0, 1} : std::array{1, 0};
  // Up: reduce the children's partial sums into mine, pass the result up.
  for (int c = 0; c < chunks; ++c) {
    for (int t : order) {
      const Region in = chunk(BufferId::kInput, t, c), out = chunk(BufferId::kOutput, t, c);
      if (out.count == 0) continue;
      const int i = t * chunks + c;
      for (int kid : node[t].kids) {
        if (kid < 0) continue;
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
  // Down: the root's result flows back to every rank, tree 0 first at every
  // rank. (The leaf tree first here too made the gloo executor's rank thread
  // sit in a wait its watchdog had to break: 4 ranks, 4 KiB, 2.08-2.15 ms
  // against 0.42-0.50.)
  e.set_phase("tree-down");
  for (int c = 0; c < chunks; ++c) {
    for (int t = 0; t < 2; ++t) {
      const Region out = chunk(BufferId::kOutput, t, c);
      if (out.count == 0) continue;
      const int i = t * chunks + c;
      std::int64_t have = reduced[i];
      if (node[t].parent >= 0) {
        // The send up may still be reading this chunk (in place, even a leaf's).
        co_yield e.recv(node[t].parent, out, Deps(sent_up[i]));
        have = e.last();
      }
      for (int kid : node[t].kids)
        if (kid >= 0) co_yield e.send(kid, out, Deps(have));
    }
  }
}

}  // namespace cclab::coll::detail
