/*
 * ts_ms_springs.c: the mass-spring step's own copy of the springs
 * (ts_ms_internal.h). ts_massspring_prepare validates every ts_spring and
 * turns it into a compact hot record: the law's terms merged and ordered
 * (a linear spring, one exponential term or two), the inverse rest length
 * precomputed, and the records sorted by their number of exponential terms
 * and then by node, so that the force loop (ts_ms_forces.c) runs three
 * branch-free loops walking memory in order.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_material.h"
#include "ts_ms_internal.h"

static int spring_ok(const ts_spring *s, uint32_t n) {
  if (s->a >= n || s->b >= n || s->a == s->b) return 0;
  double v[6] = {s->rest, s->k, s->k1, s->k2, s->c, 0};
  for (int i = 0; i < 5; i++)
    if (!isfinite(v[i]) || v[i] < 0) return 0;
  if (!isfinite(s->b1) || !isfinite(s->b2) || s->b1 < 0 || s->b2 < 0 || s->b1 > 100 ||
      s->b2 > 100)
    return 0;
  if ((s->b1 > 0 || s->b2 > 0) && !(s->rest > 0)) return 0; /* the law needs a strain */
  if (!isfinite(s->strain_min) || !isfinite(s->strain_max)) return 0;
  if (s->strain_min != 0 || s->strain_max != 0)
    if (!(s->strain_min > -1 && s->strain_min <= 0 && s->strain_max >= 0 &&
          s->strain_min < s->strain_max))
      return 0;
  return 1;
}

/* The hot record of spring s; its class (number of exponential terms). */
int ts__ms_hot_spring(const ts_spring *s, ts__hs *o) {
  o->a = s->a;
  o->b = s->b;
  o->L0 = s->rest;
  o->iL0 = s->rest > 0 ? 1.0 / s->rest : 0.0;
  o->c = s->c;
  double k1 = s->k1, b1 = s->b1, k2 = s->k2, b2 = s->b2;
  if (k1 == 0 && k2 == 0) k1 = s->k, b1 = 0; /* hand-made linear spring */
  if (k1 == 0) k1 = k2, b1 = b2, k2 = 0, b2 = 0;
  if (k2 > 0 && b2 == b1) k1 += k2, k2 = 0, b2 = 0;
  if (k2 == 0) b2 = 0;
  if (b1 == 0 && k2 > 0) { /* keep the linear part second: it costs nothing */
    double tk = k1, tb = b1;
    k1 = k2, b1 = b2, k2 = tk, b2 = tb;
  }
  o->k1 = k1, o->b1 = b1, o->k2 = k2, o->b2 = b2;
  return k2 > 0 ? 2 : b1 > 0 ? 1 : 0;
}

/* ts_ms_internal.h. The order: by class, then by node a, then by index,
 * a counting sort (stable: the springs are dealt out in index order)
 * over the 3 n_nodes (class, a) buckets; the same order as sorting by
 * that key with the index breaking ties, which a qsort did before (on
 * patch-S refined by Loop, 85,000 springs, this took 29 ms with the
 * qsort). The stop (ts_tissue.stop) is looked at every 2^20 springs of
 * either pass: on a 1,048,576-node patch the whole takes seconds. */
int ts__ms_build_hot(const ts_tissue *t, ts__hs *hs, uint32_t cnt[3], uint32_t *orig) {
  const uint32_t ns = t->n_springs, n = t->n_nodes;
  for (uint32_t i = 0; i < n; i++)
    if (!isfinite(t->inv_mass[i]) || t->inv_mass[i] < 0) return -1;
  /* first[bucket]: the first position of (class, a) = class * n + a */
  const size_t nbk = 3 * (size_t)n + 1;
  uint32_t *first = calloc(nbk, sizeof *first);
  uint8_t *cls = malloc(ns ? ns : 1);
  int rc = -2;
  if (!first || !cls) goto done;
  rc = -1;
  cnt[0] = cnt[1] = cnt[2] = 0;
  for (uint32_t s = 0; s < ns; s++) {
    if (!(s & 0xfffffu) && ts_tissue_stop_asked(t)) {
      rc = -3;
      goto done;
    }
    if (!spring_ok(&t->springs[s], n)) goto done;
    ts__hs h;
    const int c = ts__ms_hot_spring(&t->springs[s], &h);
    cls[s] = (uint8_t)c;
    cnt[c]++;
    first[(size_t)c * n + h.a + 1]++;
  }
  for (size_t k = 1; k < nbk; k++) first[k] += first[k - 1];
  for (uint32_t s = 0; s < ns; s++) {
    if (!(s & 0xfffffu) && ts_tissue_stop_asked(t)) {
      rc = -3;
      goto done;
    }
    const uint32_t pos = first[(size_t)cls[s] * n + t->springs[s].a]++;
    ts__ms_hot_spring(&t->springs[s], &hs[pos]);
    if (orig) orig[pos] = s;
  }
  rc = 0;
done:
  free(first);
  free(cls);
  return rc;
}
