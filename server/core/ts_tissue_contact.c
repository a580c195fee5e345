/*
 * ts_tissue_contact.c: the tissue's contact surface (ts_tissue.h): the
 * closed boundary of the layered solid, which tool contact, grasp and the
 * thin pass test, kept apart from the render triangles, which also hold
 * every inner layer's top sheet (so that hiding a layer shows the next one,
 * ts_extrude.h). Those inner sheets lie inside the solid; testing them too
 * roughly doubled the contact work on patch-L (refit and query 113 ->
 * 412 us a step) for surfaces a tool from outside never meets first.
 */
#include <stdlib.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_tissue.h"

/* Replaces t's contact surface by tris (owned, n of them). */
static void set(ts_tissue *t, uint32_t (*tris)[3], uint32_t n) {
  free(t->contact_tris);
  t->contact_tris = tris;
  t->n_contact_tris = n;
}

int ts_tissue_set_contact_extrusion(ts_tissue *t, const ts_extrusion *e, const uint32_t *map) {
  if (!t || !e || (e->n_tris && !e->tris)) return TS_EINVAL;
  uint32_t n = 0;
  for (uint32_t k = 0; k < e->n_tris; k++) n += !ts_extrusion_tri_inner(e, k);
  uint32_t(*c)[3] = malloc(sizeof *c * (n ? n : 1));
  if (!c) return TS_ENOMEM;
  for (uint32_t k = 0, j = 0; k < e->n_tris; k++) {
    if (ts_extrusion_tri_inner(e, k)) continue;
    for (int i = 0; i < 3; i++) c[j][i] = map ? map[e->tris[k][i]] : e->tris[k][i];
    j++;
  }
  set(t, c, n);
  return 0;
}

int ts_tissue_copy_contact(ts_tissue *dst, const ts_tissue *src, const uint32_t *loc) {
  if (!src->contact_tris) {
    set(dst, NULL, 0);
    return 0;
  }
  uint32_t n = 0;
  for (uint32_t k = 0; k < src->n_contact_tris; k++) {
    const uint32_t *tr = src->contact_tris[k];
    n += !loc || (loc[tr[0]] != UINT32_MAX && loc[tr[1]] != UINT32_MAX && loc[tr[2]] != UINT32_MAX);
  }
  uint32_t(*c)[3] = malloc(sizeof *c * (n ? n : 1));
  if (!c) return TS_ENOMEM;
  for (uint32_t k = 0, j = 0; k < src->n_contact_tris; k++) {
    const uint32_t *tr = src->contact_tris[k];
    if (loc && (loc[tr[0]] == UINT32_MAX || loc[tr[1]] == UINT32_MAX || loc[tr[2]] == UINT32_MAX))
      continue;
    for (int i = 0; i < 3; i++) c[j][i] = loc ? loc[tr[i]] : tr[i];
    j++;
  }
  set(dst, c, n);
  return 0;
}
