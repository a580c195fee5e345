/*
 * ts_aabb_tree.h: the bounding-volume tree of a deforming (non-rigid) object,
 * the tissue: a binary tree of axis-aligned boxes over its surface triangles,
 * one triangle per leaf. Tool queries descend it together with a tool's OBB
 * tree (ts_collide.h).
 *
 * Built top-down (each node's triangles split at the median of their
 * centroids along the longest axis of the centroids' bounds, so the depth is
 * at most ceil(log2 n) + 1), then refitted bottom-up every step. As in
 * Box2D's b2DynamicTree (Catto; Box2D v3 src/dynamic_tree.c), leaves hold
 * enlarged ("fat") boxes so that a step refits only what moved out of its fat
 * box: every surface node keeps a reference position, a leaf's fat box is
 * the box of its corners' reference positions grown by `margin` (and by the
 * rounding of the references, kept in single precision), and a node
 * escapes (takes its current position as its new reference) when it moves
 * `margin` away from its reference (Euclidean distance, which bounds the
 * move along every axis; less 1e-9 of it, against rounding). So a triangle
 * always lies inside its leaf's fat box, and a step costs one comparison per
 * surface node plus, for each escaped node, new fat boxes for its triangles
 * and a walk up to the root that stops where a box does not change. Internal
 * boxes are always the exact union of their children's. That comparison
 * can also run in a caller's own code (the deferred refit,
 * ts_aabb_tree_defer_*): the mass-spring contact notes the nodes it moves,
 * so the later uses of the tree within a substep refit only those. (Fused
 * into XPBD's prediction, a test of every node, it was dearer than the
 * pass over the surface nodes: ts_xpbd_contact.c.)
 *
 * The tree is rebuilt (top-down again, from the current positions) when the
 * topology changes (ts_aabb_tree_set_topology, after refinement) or when
 * refitting has made it loose: when the summed surface area of all its
 * boxes, the cost that a query pays (the surface area heuristic, Goldsmith &
 * Salmon 1987), exceeds `loose_ratio` times its value right after the last
 * build.
 *
 * No allocation after creation except in ts_aabb_tree_set_topology.
 */
#ifndef TS_AABB_TREE_H
#define TS_AABB_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "ts_tissue.h"

typedef struct ts_aabb_node {
  double lo[3], hi[3]; /* box, m: leaves the fat box, internal nodes the union of the children */
  int32_t parent;      /* -1 for the root */
  int32_t child[2];    /* -1 for leaves */
  int32_t tri;         /* leaves: the triangle; -1 for internal nodes */
} ts_aabb_node;

typedef struct ts_aabb_tree_def {
  double margin;      /* fat-box enlargement and escape distance, m (>= 0) */
  double loose_ratio; /* rebuild when the summed box area exceeds this multiple of
                         its value after the last build (>= 1) */
} ts_aabb_tree_def;

typedef struct ts_aabb_tree_stats {
  uint64_t refits;         /* ts_aabb_tree_refit calls */
  uint64_t rebuilds;       /* builds, including the first */
  uint64_t watch_passes;   /* ts_aabb_tree_refit_watch calls (full passes listing the
                              points near their escape) */
  uint32_t escaped;        /* last refit: nodes that left their reference box */
  uint32_t leaves_refit;   /* last refit: leaves given a new fat box */
  uint32_t internal_refit; /* last refit: internal boxes recomputed */
} ts_aabb_tree_stats;

typedef struct ts_aabb_tree {
  ts_aabb_tree_def def;
  uint32_t n_points;   /* positions the triangles index (the tissue's nodes) */
  uint32_t n_tris;     /* triangles (leaves) */
  uint32_t (*tris)[3]; /* the tree's own copy of the triangles */
  uint32_t n_nodes;    /* 2 n_tris - 1 (0 when there are no triangles) */
  ts_aabb_node *nodes; /* root at index 0, every child after its parent */
  int32_t *leaf;       /* per triangle: its leaf node */
  uint32_t depth;      /* levels: 1 for a single leaf */
  double area;         /* summed surface area of all boxes now, m^2 */
  double area_built;   /* the same right after the last build */
  ts_aabb_tree_stats stats;

  /* private */
  uint32_t n_used;
  uint32_t *used;    /* points some triangle uses, ascending */
  float (*ref)[3];   /* per used point (same order): reference position; float
                           halves the memory the per-step scan reads, and the fat
                           boxes allow for its rounding */
  uint32_t *slot;    /* per point: its index in used (UINT32_MAX: unused) */
  uint32_t *adj_off; /* n_points + 1 offsets into adj */
  uint32_t *adj;     /* triangles around each point */
  uint32_t *mark;    /* per triangle: stamp of the last refit that queued it */
  uint32_t stamp;
  uint32_t *pmark;   /* per used point: stamp of the last refit_moved that queued it */
  uint32_t pstamp;
  uint32_t *queue;   /* refit scratch: escaped points (slots) */
  uint32_t *pend;    /* deferred refit: points noted as escaped (indices into x) */
  uint32_t n_pend;
  int armed;         /* deferred refit: every point not in pend is within its escape distance */
  double esc2;       /* the escape distance squared (margin less the rounding hair) */
  uint32_t *watch;   /* watched refit: points (slots, ascending) near their escape */
  uint32_t n_watch;
  uint32_t *tqueue;  /* refit scratch: their triangles */
  uint32_t *perm;    /* build scratch: triangle order */
  double (*cent)[3]; /* build scratch: triangle centroids */
} ts_aabb_tree;

/* Defaults: margin 0.2 mm, loose_ratio 2. The margin trades refits for
 * query work: a node escapes after moving 0.2 mm (tissue pushed by a tool
 * at 0.5 m/s escapes every 1 ms step, the rest of the tissue hardly ever),
 * while leaf boxes grow by 0.4 mm, a fraction of the 0.5..3 mm triangles of
 * the standard scenarios; 0.5 mm made patch-L queries about four times
 * slower for a tenth of the refit work. */
ts_aabb_tree_def ts_default_aabb_tree_def(void);

/* Builds the tree over n_tris triangles indexing n_points positions x (m).
 * def NULL means defaults; the triangles are copied. Returns 0, TS_EINVAL
 * (bad def, index out of range, NULL arrays), TS_ENAN (a used position not
 * finite) or TS_ENOMEM. n_tris 0 gives an empty tree that queries find
 * nothing in. */
int ts_aabb_tree_create(const ts_aabb_tree_def *def, uint32_t n_points, const double (*x)[3],
                        uint32_t n_tris, const uint32_t (*tris)[3], ts_aabb_tree **out);

/* The same over a tissue's contact surface (ts_tissue_contact_tris over
 * t->x: the solid's closed boundary, not the inner layers' render sheets). */
int ts_aabb_tree_create_tissue(const ts_aabb_tree_def *def, const ts_tissue *t, ts_aabb_tree **out);

/* New topology (refinement changed the triangles or the points): reallocates
 * and rebuilds. On error the tree is unchanged. Returns as ts_aabb_tree_create. */
int ts_aabb_tree_set_topology(ts_aabb_tree *tree, uint32_t n_points, const double (*x)[3],
                              uint32_t n_tris, const uint32_t (*tris)[3]);

/* The per-step update for new positions x (same points as at build):
 * refits what escaped its fat box, bottom-up, and rebuilds when that made
 * the tree loose. Returns 0 (refitted), 1 (rebuilt), TS_EINVAL (NULL), or
 * TS_ENAN when a used position is not finite (the tree is then unchanged).
 * No allocation. */
int ts_aabb_tree_refit(ts_aabb_tree *tree, const double (*x)[3]);

/* The same update when the caller knows which points moved (a mechanics
 * that moves only the tissue around a tool): only the n_moved points listed
 * in moved (indices into x, any order, repeats allowed; points that no
 * triangle uses are skipped) are checked against their references, so a
 * step costs O(n_moved) instead of a pass over every surface point. Every
 * point not listed must be exactly where it was at the last refit or build
 * (or at least within its escape distance of its reference, the promise of
 * the deferred refit below): then the tree ends as ts_aabb_tree_refit leaves it (ts_aabb_tree_validate
 * finds a broken promise: a point beyond the margin of its reference). Returns as
 * ts_aabb_tree_refit, and TS_EINVAL for moved NULL with n_moved > 0 or an
 * index >= n_points (tree unchanged). No allocation. */
int ts_aabb_tree_refit_moved(ts_aabb_tree *tree, const double (*x)[3], const uint32_t *moved,
                             uint32_t n_moved);

/* Deferred refit, for a caller that knows which points it moves, or whose
 * own pass over the points can test them on the way, so that the tree's
 * refit needs no pass of its own (the escape test of ts_aabb_tree_refit in
 * the caller's code, as Box2D's solver tests each body's box in its own
 * finalising loop):
 *
 *   ts_aabb_tree_defer_begin(tree);            the tree is armed, nothing noted
 *   for every point i that moved (or every point, when the caller does not
 *   know which): ts_aabb_tree_defer_note(tree, i, x[i]);
 *   ts_aabb_tree_defer_refit(tree, x);         refits what was noted, disarms
 *
 * The promise: at defer_refit, every point that is not noted is within its
 * escape distance of its reference, which holds when each point was noted
 * at its last move since defer_begin, or since the last refit or build for
 * a caller that began right after one (a point that moves back inside after
 * a note is only refitted needlessly). defer_refit on a tree that is not
 * armed (any other refit, rebuild or topology change disarms it) or whose
 * notes overflowed (more than n_points) refits as ts_aabb_tree_refit does.
 * Returns as ts_aabb_tree_refit. No allocation. */
void ts_aabb_tree_defer_begin(ts_aabb_tree *tree);
/* Disarms (the caller lost track of moves): the next defer_refit is a full
 * ts_aabb_tree_refit. */
void ts_aabb_tree_defer_cancel(ts_aabb_tree *tree);
int ts_aabb_tree_defer_refit(ts_aabb_tree *tree, const double (*x)[3]);
static inline int ts_aabb_tree_defer_armed(const ts_aabb_tree *tree) { return tree && tree->armed; }

/* Notes point i at position p (m) if it is a surface point beyond its
 * escape distance (a NaN counts as beyond, for defer_refit to refuse); a
 * no-op when the tree is not armed. Inline, and without a branch on
 * whether i is a surface point (surface and inner nodes alternate along a
 * solid's node order, a branch mispredicted about half the time): an
 * inner point reads reference 0 and is dropped with the rare escape. */
static inline void ts_aabb_tree_defer_note(ts_aabb_tree *tree, uint32_t i, const double p[3]) {
  if (!tree->armed) return;
  const uint32_t s = tree->slot[i], used = s != UINT32_MAX;
  const float *r = tree->ref[used ? s : 0];
  const double dx = p[0] - r[0], dy = p[1] - r[1], dz = p[2] - r[2];
  if (!((!(dx * dx + dy * dy + dz * dz <= tree->esc2)) & used)) return;
  if (tree->n_pend < tree->n_points)
    tree->pend[tree->n_pend++] = i;
  else
    tree->armed = 0; /* overflow (repeats): defer_refit takes the full pass */
}

/* Watched refit, for a caller that refits the tree at several positions
 * within a step (a solver's substeps) and can bound how far any point has
 * moved since the step's first refit (from the largest speed its own
 * passes see): the first refit is a full ts_aabb_tree_refit that also
 * lists the points within `slack` of their escape distance (distance from
 * the reference beyond the escape distance less slack; slack in m, taken
 * 0 to half the margin, else TS_EINVAL); a later one checks only those
 * listed:
 *
 *   ts_aabb_tree_refit_watch(tree, x, slack);  full, and the list
 *   ts_aabb_tree_refit_watched(tree, x);       while no point moved more
 *                                              than slack since then
 *
 * A point not listed is then still within its escape distance, so it
 * would not escape in ts_aabb_tree_refit either, and the listed ones
 * escape in the same (ascending) order as in its pass: the tree ends
 * bit for bit as ts_aabb_tree_refit leaves it (boxes, references, area,
 * rebuild), at a cost of the list's length instead of a pass over the
 * surface. The promise is the caller's; when its bound exceeds slack it
 * calls refit_watch again. A return of 1 (the tree was rebuilt, every
 * reference at x) restarts the bound at x too, as after refit_watch.
 * Returns as ts_aabb_tree_refit. No allocation. */
int ts_aabb_tree_refit_watch(ts_aabb_tree *tree, const double (*x)[3], double slack);
int ts_aabb_tree_refit_watched(ts_aabb_tree *tree, const double (*x)[3]);

/* Rebuilds top-down from positions x now. No allocation. Returns 0,
 * TS_EINVAL or TS_ENAN (tree unchanged). */
int ts_aabb_tree_rebuild(ts_aabb_tree *tree, const double (*x)[3]);

/* Checks every invariant against positions x: links, one leaf per triangle,
 * every node reachable, internal boxes the exact union of their children,
 * every triangle inside its leaf's fat box, every used point within margin
 * of its reference, the summed area. Returns 0, or TS_EINTERNAL with the
 * first broken invariant described in err (may be NULL). */
int ts_aabb_tree_validate(const ts_aabb_tree *tree, const double (*x)[3], char *err, size_t errcap);

/* Triangles whose leaf box overlaps the closed box [lo, hi] (m): writes up to
 * cap of them into out and returns how many there are (may exceed cap). */
uint32_t ts_aabb_tree_query_box(const ts_aabb_tree *tree, const double lo[3], const double hi[3],
                                uint32_t *out, uint32_t cap);

void ts_aabb_tree_destroy(ts_aabb_tree *tree);

#endif
