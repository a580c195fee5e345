/*
 * ts_aabb_self.h: a tissue's AABB tree (ts_aabb_tree.h) against itself
 * (issue 5: "tissue against tissue ... AABB against AABB"): every pair of
 * distinct leaves whose boxes come within `grow` of each other, each
 * unordered pair once. Tissue self-contact (ts_self_contact.h) takes its
 * candidates from it instead of one box query per surface node.
 *
 * The walk descends both sides of the same tree: a node against itself
 * splits into its two children against themselves and against each other,
 * and a pair of distinct nodes descends the larger side while their boxes
 * overlap when one is grown by `grow`; so the mirror (b, a) of a pair
 * (a, b) is never visited and a leaf never meets itself.
 *
 * Pruning by other boxes (optional, up to two sets): per tree node the box
 * of other vectors of its triangles' corners (self-contact: their rest
 * positions, and their displacements from rest; ts_aabb_self_boxes). A
 * pair whose boxes of one set are so close that every point of one lies
 * closer than that set's `skip` to every point of the other (the largest
 * distance between the two boxes under skip, less 1e-9 of it against
 * rounding) is left out with everything under it; so is a node against
 * itself when its box's diagonal is under skip. The caller's leaf test must
 * find nothing where that holds (ts_self_contact.h says why it does).
 *
 * No allocation; recursion depth at most twice the tree's depth.
 */
#ifndef TS_AABB_SELF_H
#define TS_AABB_SELF_H

#include <stdint.h>

#include "ts_aabb_tree.h"

typedef struct ts_aabb_self_prune {
  const double (*lo)[3]; /* per tree node boxes (NULL: this set unused) */
  const double (*hi)[3];
  double skip;           /* prune where the boxes lie wholly within this of each other */
} ts_aabb_self_prune;

typedef struct ts_aabb_self_def {
  double grow; /* m (>= 0): pairs whose boxes come this close */
  ts_aabb_self_prune prune[2];
} ts_aabb_self_def;

typedef struct ts_aabb_self_stats {
  uint64_t node_pairs; /* pairs of tree nodes whose boxes were tested */
  uint64_t pruned[2];  /* pairs (and node self-pairs) left out by each prune set */
  uint64_t leaf_pairs; /* leaf pairs handed to the callback */
} ts_aabb_self_stats;

/* Called for each overlapping pair of distinct leaves: their triangles
 * (tree->tris indices), each unordered pair once. */
typedef void (*ts_aabb_self_fn)(void *ctx, uint32_t tri_a, uint32_t tri_b);

/* Walks tree against itself. st (may be NULL) is overwritten. Returns 0,
 * or TS_EINVAL (NULL tree, def or fn, grow not finite or negative). */
int ts_aabb_self_walk(const ts_aabb_tree *tree, const ts_aabb_self_def *def, ts_aabb_self_fn fn,
                      void *ctx, ts_aabb_self_stats *st);

/* Boxes for a prune set: per tree node the box of p - q (q NULL: of p)
 * over its triangles' corners (the tree's point numbering), into lo/hi
 * (tree->n_nodes each). Depends on the tree's structure: recompute after
 * a rebuild (tree->stats.rebuilds changes). Returns 0 or TS_EINVAL. No
 * allocation. */
int ts_aabb_self_boxes(const ts_aabb_tree *tree, const double (*p)[3], const double (*q)[3],
                       double (*lo)[3], double (*hi)[3]);

#endif
