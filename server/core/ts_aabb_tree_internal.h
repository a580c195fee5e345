/*
 * ts_aabb_tree_internal.h: what the AABB tree's own files share
 * (ts_aabb_tree.c, the build, refits and queries; ts_aabb_tree_watch.c,
 * the watched refit): the escape distance's rounding hair, a reference's
 * update and the refit of the escaped points' triangles.
 */
#ifndef TS_AABB_TREE_INTERNAL_H
#define TS_AABB_TREE_INTERNAL_H

#include "ts_aabb_tree.h"

/* A point escapes a hair before it reaches the margin, so that rounding in
 * the fat box (ref -+ margin) can never leave a point outside it. */
#define ESCAPE (1.0 - 1e-9)

/* Point slot i's reference set to x (rounded to float). */
void ts__aabb_set_ref(ts_aabb_tree *t, uint32_t i, const double x[3]);

/* Step 2 of a refit, for the n_esc escaped points in t->queue (slots, each
 * once, their references already moved): their triangles get new fat boxes
 * (each once), then the walk up; a rebuild when that made the tree loose.
 * Returns 0 or 1 (rebuilt). */
int ts__aabb_refit_escaped(ts_aabb_tree *t, const double (*x)[3], uint32_t n_esc);

#endif
