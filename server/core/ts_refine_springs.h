/*
 * ts_refine_springs.h: the springs of a refined tissue, rebuilt locally
 * (ts_refine.h; the rule in ts_refine_springs.c). Internal to the
 * refinement (ts_refine.c) and its tests.
 */
#ifndef TS_REFINE_SPRINGS_H
#define TS_REFINE_SPRINGS_H

#include <stdint.h>

#include "ts_extrude.h"
#include "ts_tissue.h"

/* What the local rebuild reads. */
typedef struct ts__refine_springs_in {
  const ts_extrusion *e;  /* the extrusion before the refinement */
  const ts_tissue *t;     /* e's tissue: its springs in ts_tissue_build's order,
                             in tissue nodes (map2 gives e's nodes' too) */
  const ts_extrusion *e2; /* the refined extrusion: e's surface vertices keep their
                             indices, new ones follow */
  const uint32_t *map2;   /* e2's node -> refined tissue node */
  const ts_layer *layers; /* e2->n_layers */
  const uint8_t *anchored; /* per e2 node */
  const double *mass;     /* per e2 node: ts_tissue_build's rule, unscaled */
  uint32_t ring;          /* 1: the ring as ts_refine_springs.c says; 0: only the
                             changed prisms themselves (too narrow: for the tests,
                             which show that it differs from the full build) */
} ts__refine_springs_in;

typedef struct ts__refine_springs_out {
  ts_spring *springs;  /* malloc'd, in refined tissue nodes, the builder's order */
  uint32_t n;          /* springs */
  uint32_t computed;   /* of them computed anew (the rest copied from t) */
  uint32_t prisms;     /* prisms whose shares were computed */
} ts__refine_springs_out;

/* Returns 0 and *o; 1 when t's springs are not the builder's for e (then
 * the caller builds them whole); TS_EMESH (a prism refused, a spring of
 * zero length) or TS_ENOMEM. */
int ts__refine_springs(const ts__refine_springs_in *in, ts__refine_springs_out *o);

#endif
