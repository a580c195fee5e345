/*
 * ts_self_contact.h: a tissue's contact with itself (issue 5: "self-contact
 * where enabled"): a fold of the surface that brings one part onto another
 * must not pass through it. Off by default in a session (CreateSession.
 * self_contact): it costs a walk of the tissue's tree against itself per
 * (sub)step, and the daemon refuses it on large tissues (session_self.h).
 *
 * The primitive is vertex-triangle proximity on the contact surface
 * (ts_tissue_contact_tris: the solid's closed boundary, outward faces): a
 * node p over a triangle T (its projection onto T's plane inside T), on
 * T's front side closer than the thickness h (signed distance
 * s = (p - T0) . n_T in [0, h), n_T T's unit outward normal) and no corner
 * of T, is in contact. A node beside T (nearest T's edge) is the
 * neighbouring face's: pushed along T's normal it went sideways (see
 * ts_self_contact.c). The candidates come from the
 * tissue's AABB tree refitted for the same positions (ts_aabb_tree.h),
 * walked against itself (ts_aabb_self.h): each pair of leaves whose fat
 * boxes come within h of each other, once; at a leaf pair each triangle's
 * own corners (a node belongs to the lowest-numbered triangle using it,
 * whose fat box holds it) are tested against the other triangle. So every
 * (node, triangle) pair is tested at most once, and every pair in contact
 * (the node within h of a point of the triangle) is met. The walk leaves
 * out, as high up the tree as it can, the subtree pairs whose rest boxes
 * lie wholly within rest_skip of each other (every pair below them is
 * skipped by the rule below) and those whose displacement boxes (x - rest)
 * lie wholly within rest_skip - h (see ts_self_contact.c): a tissue at
 * rest, sagging or dented is done near the root. Measured (bench_self,
 * load 11-12 on 2 cores, CPU time, the standard path's dented states):
 * patch-L's 40,882 surface nodes 2.2 ms a step beside 130 ms for the
 * former method, one box query per surface node
 * (ts_self_contact_detect_pernode, kept as the reference); the liver's
 * 4,388 0.81 ms beside 7.9 ms. A fold leaves little to prune: patch-L
 * folded in half 150 ms beside 203 ms, patch-S 9.9 ms beside 5.7 ms.
 *
 * Left out (the skip rule): a pair whose node and triangle are closer than
 * rest_skip in the rest shape (the node's rest position to the triangle's
 * rest triangle). The layer structure puts many surface nodes within a
 * layer's thickness of surface triangles by construction: the same prism
 * column (the side walls at the rim), the neighbouring triangles of the
 * node's fan, a thin patch's outer and inner sheets. Those distances are
 * the elastic model's to keep (springs across the layers, volume), not a
 * contact's; a real self-contact brings together parts that were far apart
 * at rest (a fold's two halves). Comparing rest distances needs no
 * topology (columns, layers) and holds for every builder and for refined
 * tissues. The price: a fold sharper than rest_skip near its crease is left
 * to the elastic model there.
 *
 * Response: the constraint C = (p - sum bc_j x_j) . n - h >= 0 (bc the
 * closest point's barycentric coordinates, n the triangle's normal, both
 * taken at detection), projected with mass weighting (the node moves by
 * w_p / W of the correction, each corner j by w_j bc_j / W against it,
 * W = w_p + sum w_j bc_j^2; anchored nodes do not move). The XPBD solver
 * projects it as a rigid constraint in every sweep (ts_xpbd_set_self_contact);
 * the mass-spring session projects after the step and keeps velocities
 * consistent (ts_self_contact_settle). Frictionless: the tissue's own
 * surfaces slide over each other (the tools' Coulomb friction needs
 * per-contact anchors this pass does not keep).
 *
 * Bounded work: at most cap contacts per detection (further ones are
 * counted in `overflow`, never silently dropped; the per-node reference
 * also takes at most cand_cap candidate triangles per node, further ones
 * counted too). Nothing is allocated after ts_self_contact_init but the
 * walk's per-tree data (ts_self_contact_bind).
 */
#ifndef TS_SELF_CONTACT_H
#define TS_SELF_CONTACT_H

#include <stdint.h>

#include "ts_aabb_self.h"
#include "ts_aabb_tree.h"
#include "ts_tissue.h"

typedef struct ts_self_contact_def {
  double thickness; /* h, m (> 0): the gap kept between a node and a triangle */
  double rest_skip; /* m (>= 0): pairs closer than this at rest are not contacts */
  uint32_t cap;      /* contacts per detection (>= 1) */
  uint32_t cand_cap; /* candidate triangles per node query (>= 1) */
} ts_self_contact_def;

/* Defaults: h = 1 mm (half the default patch's thinnest layer pair, more
 * than a node moves in a 1 ms step at 0.5 m/s), rest_skip = 4 h (more than
 * the default patch's 4.5 mm thickness, so the outer and inner sheets of one
 * column are never a pair), 8192 contacts, 256 candidates per node (the
 * per-node reference). */
ts_self_contact_def ts_default_self_contact_def(void);

typedef struct ts_self_pair {
  uint32_t node;   /* p */
  uint32_t tri[3]; /* the triangle's corners */
  double bc[3];    /* closest point's barycentric coordinates at detection */
  double n[3];     /* the triangle's unit outward normal at detection */
  double lambda;   /* summed correction (m) since detection, for the reaction */
} ts_self_pair;

typedef struct ts_self_contact {
  ts_self_contact_def def;
  ts_self_pair *pair;
  uint32_t n;       /* pairs stored by the last detection */
  uint32_t found;   /* pairs the last detection found (may exceed def.cap) */
  uint64_t overflow; /* pairs and candidates left out over all detections */
  uint64_t detections;
  uint32_t *cand;   /* def.cand_cap (the per-node method only) */
  ts_aabb_self_stats walk; /* the last detection's tree walk */

  /* private: the walk's per-tree data (ts_self_contact_bind) */
  const ts_aabb_tree *b_tree;
  const ts_tissue *b_tissue;
  uint64_t b_rebuilds;     /* b_tree->stats.rebuilds when computed */
  uint32_t b_tris, b_nodes, b_points;
  uint32_t cap_tris, cap_nodes, cap_points;
  uint8_t *own;            /* per triangle: bit c when corner c is its own node */
  uint32_t *owner;         /* per point: scratch of the owners */
  double (*rlo)[3], (*rhi)[3]; /* per tree node: its corners' rest box */
  double (*dlo)[3], (*dhi)[3]; /* per tree node: its corners' displacement box (x - rest) */
} ts_self_contact;

/* Returns 0, TS_EINVAL (def out of range), TS_ENOMEM. def NULL: defaults. */
int ts_self_contact_init(ts_self_contact *sc, const ts_self_contact_def *def);
void ts_self_contact_free(ts_self_contact *sc);

/* Prepares the walk's per-tree data for tree (built over t's contact
 * surface with t's node numbering; rest positions t->rest): the only
 * allocation after init, to be called whenever a tree or tissue replaces
 * the one bound (ts_self_contact_detect binds by itself when given a
 * tree or tissue other than the bound one, or sizes that differ; a tree
 * freed and another made at the same address needs this call). Returns 0,
 * TS_EINVAL, TS_ENOMEM (then nothing is bound). */
int ts_self_contact_bind(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t);

/* The contacts at positions x (tree refitted for x, built over t's contact
 * surface with t's node numbering; rest positions t->rest), by the tree
 * walked against itself. The pairs stored are sorted by (node, corners).
 * Returns the pairs stored (sc->n). No allocation once bound (a rebuild of
 * the tree recomputes the rest boxes in place). */
uint32_t ts_self_contact_detect(ts_self_contact *sc, const ts_aabb_tree *tree, const ts_tissue *t,
                                const double (*x)[3]);

/* The former detection, one box query per surface node (at most cand_cap
 * candidates each, further ones counted in overflow), the same pairs in
 * node order: the benchmark's reference. No allocation. */
uint32_t ts_self_contact_detect_pernode(ts_self_contact *sc, const ts_aabb_tree *tree,
                                        const ts_tissue *t, const double (*x)[3]);

/* One Gauss-Seidel pass over the stored pairs on x (inverse masses im):
 * each violated constraint is projected. Returns the largest violation
 * met (m, >= 0). */
double ts_self_contact_project(ts_self_contact *sc, double (*x)[3], const double *im);

/* The mass-spring session's pass after a step: `iterations` projections,
 * then, for every pair, x_prev moved along with its nodes (no velocity
 * kick, as the tool contact's projection does) and the approaching part of
 * the pair's relative normal velocity removed with mass weighting
 * (inelastic). Returns the largest violation left (m). */
double ts_self_contact_settle(ts_self_contact *sc, ts_tissue *t, uint32_t iterations);

/* The brute-force reference of ts_self_contact_detect (tests, benchmarks):
 * every (surface node, contact triangle) pair by the same test, no tree;
 * writes up to cap pairs sorted by (node, first corner) into out; returns
 * the count found. */
uint32_t ts_self_contact_brute(const ts_self_contact_def *def, const ts_tissue *t,
                               const double (*x)[3], ts_self_pair *out, uint32_t cap);

#endif
