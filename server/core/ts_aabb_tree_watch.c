/*
 * ts_aabb_tree_watch.c: the watched refit of the tissue's AABB tree
 * (ts_aabb_tree.h): one full pass over the surface points per step that
 * also lists the points near their escape, then, in the step's later
 * refits (a solver's substeps), a check of the listed points only, for as
 * long as the caller's bound on every point's move since the pass stays
 * within the slack. The escapes, their order and so the tree are those of
 * ts_aabb_tree_refit at every refit; only the pass is saved.
 */
#include <math.h>

#include "ts_aabb_tree_internal.h"
#include "ts_error.h"

/* The listing threshold's own hair: a point listed at the escape distance
 * less slack, less this fraction of it, so that the rounding of the
 * distances (a few ulp of the squares) never lets an unlisted point that
 * moved slack reach the escape distance. */
#define WATCH_HAIR 1e-9

int ts_aabb_tree_refit_watch(ts_aabb_tree *t, const double (*x)[3], double slack) {
  if (!t || (!x && t->n_used) || !(slack >= 0) || !(slack <= 0.5 * t->def.margin))
    return TS_EINVAL;
  /* the escape test exactly as ts_aabb_tree_refit computes it */
  const double m = t->def.margin * ESCAPE, m2 = m * m;
  const double w = (m - slack) * (1.0 - WATCH_HAIR), w2 = w * w;
  t->stats.refits++;
  t->stats.watch_passes++;
  t->stats.escaped = t->stats.leaves_refit = t->stats.internal_refit = 0;
  t->armed = 0;

  const uint32_t n_used = t->n_used, *used = t->used;
  const float(*ref)[3] = (const float(*)[3])t->ref;
  uint32_t *queue = t->queue, *watch = t->watch, n_esc = 0, n_watch = 0;
  for (uint32_t i = 0; i < n_used; i++) {
    const double *a = x[used[i]];
    const float *r = ref[i];
    double dx = a[0] - r[0], dy = a[1] - r[1], dz = a[2] - r[2];
    const double d2 = dx * dx + dy * dy + dz * dz;
    if (!(d2 <= w2)) {
      /* near or past its escape (a NaN too: refused below) */
      watch[n_watch++] = i;
      if (!(d2 <= m2)) {
        if (!isfinite(a[0]) || !isfinite(a[1]) || !isfinite(a[2])) {
          t->n_watch = 0;
          return TS_ENAN;
        }
        queue[n_esc++] = i;
      }
    }
  }
  t->n_watch = n_watch;
  for (uint32_t i = 0; i < n_esc; i++) ts__aabb_set_ref(t, queue[i], x[used[queue[i]]]);
  /* a rebuild clears the list: every point is then at its reference */
  return ts__aabb_refit_escaped(t, x, n_esc);
}

int ts_aabb_tree_refit_watched(ts_aabb_tree *t, const double (*x)[3]) {
  if (!t || (!x && t->n_used)) return TS_EINVAL;
  const double m = t->def.margin * ESCAPE, m2 = m * m;
  t->stats.refits++;
  t->stats.escaped = t->stats.leaves_refit = t->stats.internal_refit = 0;
  t->armed = 0;

  /* the listed points in ascending order, as the full pass meets them; an
   * escaped point stays listed (at its new reference it is only checked
   * needlessly) */
  const uint32_t n_watch = t->n_watch, *watch = t->watch, *used = t->used;
  const float(*ref)[3] = (const float(*)[3])t->ref;
  uint32_t *queue = t->queue, n_esc = 0;
  for (uint32_t j = 0; j < n_watch; j++) {
    const uint32_t i = watch[j];
    const double *a = x[used[i]];
    const float *r = ref[i];
    double dx = a[0] - r[0], dy = a[1] - r[1], dz = a[2] - r[2];
    if (!(dx * dx + dy * dy + dz * dz <= m2)) {
      if (!isfinite(a[0]) || !isfinite(a[1]) || !isfinite(a[2])) return TS_ENAN;
      queue[n_esc++] = i;
    }
  }
  for (uint32_t i = 0; i < n_esc; i++) ts__aabb_set_ref(t, queue[i], x[used[queue[i]]]);
  return ts__aabb_refit_escaped(t, x, n_esc);
}
