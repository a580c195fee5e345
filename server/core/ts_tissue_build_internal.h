/*
 * ts_tissue_build_internal.h: the pieces of the tissue builder
 * (ts_tissue_build.c) that the refinement's local spring rebuild
 * (ts_refine_springs.c) shares with it, so that a spring computed there is
 * computed by the same code, to the bit: one prism's volume shares, their
 * accumulation per edge and vertex, and the emission of the spring(s) of one
 * node pair from its shares. Not a public interface.
 */
#ifndef TS_TISSUE_BUILD_INTERNAL_H
#define TS_TISSUE_BUILD_INTERNAL_H

#include <stdint.h>

#include "ts_tissue.h"

/* One prism's volume shares (ts_tissue_build.c's top comment). */
typedef struct ts__prism_share {
  double volume;     /* v, m^3 */
  double face[3];    /* in-plane edge k (vertices k, k+1): V for top and bottom
                        face together (each takes half) */
  double vert;       /* the three INTERLAYER springs together */
  double diag[3][2]; /* the side diagonals of edge k: P[k]-Q[k+1], P[k+1]-Q[k] */
} ts__prism_share;

/* P: top nodes, Q: bottom nodes (triangle order). Returns -1 for a prism
 * ts_prism_check refuses. */
int ts__prism_shares(const double P[3][3], const double Q[3][3], ts__prism_share *o);

/* Adds the shares ps of the prism on surface triangle tr (its edges te[k],
 * edge k from tr[k] to tr[k+1], as indices into the sorted edge list) of
 * one layer to that layer's sums: face_l[2 e + 0 top, 1 bottom],
 * diag_l[2 e + 0: (l, lo)-(l+1, hi), 1: (l, hi)-(l+1, lo)], vert_l[vertex]. */
void ts__build_add_prism(const uint32_t tr[3], const uint32_t te[3], const ts__prism_share *ps,
                         double *face_l, double *diag_l, double *vert_l);

/* One layer's volume share of a spring. */
typedef struct ts__contrib {
  uint32_t layer;
  double volume; /* m^3 */
} ts__contrib;

/* Where springs are emitted, and what their constants read: x the rest
 * positions of the extrusion's nodes (s * nv + j), normal the extrusion
 * direction per surface vertex, mass the nodes' masses (ts_tissue_build's
 * rule, unscaled) and free_node whether a node moves. */
typedef struct ts__spring_sink {
  ts_spring *s;
  uint32_t n, cap;
  const double (*x)[3];
  const double (*normal)[3];
  uint32_t nv;
  const ts_layer *layers;
  const double *mass;
  const uint8_t *free_node;
} ts__spring_sink;

/* Emits the spring(s) between extrusion nodes a and b made of the shares
 * cb[0..ncb) (ncb <= 2). Returns -1 for a zero-length spring or a full sink. */
int ts__build_emit(ts__spring_sink *sk, uint32_t a, uint32_t b, const ts__contrib *cb, int ncb,
                   uint8_t kind);

/* The room a sink needs for the springs of S = L + 1 sheets of nv nodes
 * whose surface has E edges: at most two springs on every sheet edge (the
 * shares of the layers above and below may be emitted apart, ncb <= 2),
 * one INTERLAYER spring per layer and vertex, two side diagonals per layer
 * and edge. Allocates *out for that many (*cap); the builder and the
 * refinement's local rebuild size their sinks by this one rule. Returns 0,
 * TS_ETOOBIG (more than UINT32_MAX / 2) or TS_ENOMEM. */
int ts__spring_sink_alloc(uint32_t L, uint32_t nv, uint32_t E, ts_spring **out, uint32_t *cap);

/* qsort/bsearch order of uint64_t keys. */
int ts__cmp_u64(const void *a, const void *b);

#endif
