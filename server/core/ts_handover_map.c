/*
 * ts_handover_map.c: what a live refinement's hand-over finds of the
 * unrefined and the refined networks' topologies (ts_handover.h, "Local"):
 * the spring of the unrefined network each refined spring takes its
 * tension from, which springs are unchanged, and the nodes the refinement
 * touched with the springs on them; kept with the hand-over so that its
 * renewal at an install and the fits reuse it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover_internal.h"

static int cmp_key(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Index of old's spring between nodes a and b (keys: sorted (min << 32 |
 * max) << 0 pairs with the index in the next word), or -1. */
static int64_t find_spring(const uint64_t *keys, uint32_t n, uint32_t a, uint32_t b) {
  uint64_t k = (uint64_t)(a < b ? a : b) << 32 | (a < b ? b : a);
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (keys[2 * (size_t)mid] < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && keys[2 * (size_t)lo] == k ? (int64_t)keys[2 * (size_t)lo + 1] : -1;
}

void ts__handover_map_free(ts_handover_map *m) {
  if (!m) return;
  free(m->from);
  free(m->same);
  free(m->touched);
  free(m->nodes);
  free(m->old_springs);
  free(m->new_springs);
  free(m->ord_old);
  free(m->ord_new);
  free(m->role[0]);
  free(m->role[1]);
  free(m->scratch);
  free(m);
}

/* A mass change smaller than this (relative) is rounding of the
 * refinement's rescaling to the old total (ts_refine.c), not a change */
#define MAP_MASS_TOL 1e-12

/* The map of old -> nt (ts_handover_create's checks done). Returns 0 and
 * *out, or TS_ENOMEM. */
int ts__handover_map_build(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                           ts_handover_map **out) {
  *out = NULL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes, ns0 = old->n_springs, ns = nt->n_springs;
  ts_handover_map *m = calloc(1, sizeof *m);
  uint64_t *keys = malloc(sizeof *keys * 2 * ((size_t)ns0 + 1));
  int32_t *cnt = calloc((size_t)n0 + 1, sizeof *cnt);
  if (m) {
    m->from = malloc(sizeof *m->from * ((size_t)ns + 1));
    m->same = malloc((size_t)ns + 1);
    m->touched = calloc((size_t)n + 1, 1);
  }
  if (!m || !keys || !cnt || !m->from || !m->same || !m->touched) {
    ts__handover_map_free(m);
    free(keys);
    free(cnt);
    return TS_ENOMEM;
  }
  m->n0 = n0, m->n = n, m->ns0 = ns0, m->ns = ns;
  for (uint32_t j = 0; j < ns0; j++) {
    const ts_spring *sp = &old->springs[j];
    keys[2 * (size_t)j] = (uint64_t)(sp->a < sp->b ? sp->a : sp->b) << 32 | (sp->a < sp->b ? sp->b : sp->a);
    keys[2 * (size_t)j + 1] = j;
    cnt[sp->a]--, cnt[sp->b]--;
  }
  qsort(keys, ns0, 2 * sizeof *keys, cmp_key);
  /* two springs on one pair: their ends are taken as touched (the match
     below finds one of them) */
  for (uint32_t j = 1; j < ns0; j++)
    if (keys[2 * (size_t)j] == keys[2 * (size_t)j - 2]) {
      const uint64_t k = keys[2 * (size_t)j];
      m->touched[k >> 32] = m->touched[k & 0xffffffffu] = 1;
    }
  for (uint32_t j = 0; j < ns; j++) {
    const ts_spring *sp = &nt->springs[j];
    int64_t k = -1;
    if (sp->a < n0 && sp->b < n0) {
      k = find_spring(keys, ns0, sp->a, sp->b);
    } else {
      uint32_t mm = sp->a >= n0 ? sp->a : sp->b, o = sp->a >= n0 ? sp->b : sp->a;
      const uint32_t *pq = parents[mm - n0];
      if (o == pq[0] || o == pq[1]) k = find_spring(keys, ns0, pq[0], pq[1]);
    }
    m->from[j] = k >= 0 ? (uint32_t)k : UINT32_MAX;
    m->same[j] = 0;
    if (k >= 0 && sp->a < n0 && sp->b < n0) {
      const ts_spring *os = &old->springs[k];
      m->same[j] = os->k == sp->k && os->k1 == sp->k1 && os->k2 == sp->k2 && os->b1 == sp->b1 &&
                   os->b2 == sp->b2 && os->rest == sp->rest;
    }
    if (m->same[j])
      cnt[sp->a]++, cnt[sp->b]++;
    else
      m->touched[sp->a] = m->touched[sp->b] = 1;
  }
  free(keys);
  /* an old node is untouched when each of its springs is unchanged, none
     was removed (as many unchanged ones as it had) and its mass is the
     same; the new nodes and their parents are touched */
  for (uint32_t i = 0; i < n0; i++) {
    const double a = old->inv_mass[i], b = nt->inv_mass[i];
    if (cnt[i] != 0 || (a == 0) != (b == 0) || (a > 0 && !(fabs(b / a - 1.0) <= MAP_MASS_TOL)))
      m->touched[i] = 1;
  }
  free(cnt);
  for (uint32_t i = n0; i < n; i++) {
    m->touched[i] = 1;
    m->touched[parents[i - n0][0]] = m->touched[parents[i - n0][1]] = 1;
  }
  for (uint32_t i = 0; i < n; i++) m->n_nodes += m->touched[i], m->n_old_nodes += i < n0 && m->touched[i];
  for (uint32_t j = 0; j < ns0; j++)
    m->n_old_springs += m->touched[old->springs[j].a] || m->touched[old->springs[j].b];
  for (uint32_t j = 0; j < ns; j++)
    m->n_new_springs += m->touched[nt->springs[j].a] || m->touched[nt->springs[j].b];
  m->nodes = malloc(sizeof *m->nodes * ((size_t)m->n_nodes + 1));
  m->old_springs = malloc(sizeof *m->old_springs * ((size_t)m->n_old_springs + 1));
  m->new_springs = malloc(sizeof *m->new_springs * ((size_t)m->n_new_springs + 1));
  if (!m->nodes || !m->old_springs || !m->new_springs) {
    ts__handover_map_free(m);
    return TS_ENOMEM;
  }
  uint32_t q = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m->touched[i]) m->nodes[q++] = i;
  q = 0;
  for (uint32_t j = 0; j < ns0; j++)
    if (m->touched[old->springs[j].a] || m->touched[old->springs[j].b]) m->old_springs[q++] = j;
  q = 0;
  for (uint32_t j = 0; j < ns; j++)
    if (m->touched[nt->springs[j].a] || m->touched[nt->springs[j].b]) m->new_springs[q++] = j;
  /* the scratch's touched rows written once here (ts_handover_internal.h) */
  m->scratch = malloc(sizeof *m->scratch * 3 * ((size_t)n + 1));
  for (uint32_t k = 0; m->scratch && k < 3; k++)
    for (uint32_t i = 0; i < m->n_nodes; i++)
      memset(m->scratch[(size_t)k * n + m->nodes[i]], 0, sizeof m->scratch[0]);
  *out = m;
  return 0;
}

/* 1 when m was made for networks of old's and nt's sizes. */
int ts__handover_map_fits(const ts_handover_map *m, const ts_tissue *old, const ts_tissue *nt) {
  return m && m->n0 == old->n_nodes && m->n == nt->n_nodes && m->ns0 == old->n_springs &&
         m->ns == nt->n_springs;
}

