/*
 * ts_extrude_cross.c: the global self-intersection check of an extrusion
 * (ts_extrude.h): sheets that pass through each other away from any
 * inverted prism. The prism test (ts_prism_check) is local: it sees a
 * column fold over, not a thin part of an organ offset deeper than half its
 * thickness (the sheets from its two sides meet in the middle and cross,
 * every prism still valid) nor the opposite walls of a narrow fold offset
 * into each other.
 *
 * Every sheet's triangles (sheet s holds the surface's triangles over its
 * nodes s*nv + j) and the side walls of an open surface's layers go into
 * one AABB tree (ts_aabb_tree.h, no margin: the tree is queried once) and
 * the tree is queried against itself
 * (ts_collide_tissue_self, the AABB x AABB descent of tissue-tissue
 * detection), so each sheet is tested against the others and against
 * itself. Pairs with a column in common (a node of one and a node of the
 * other on the same surface vertex's line) are skipped: such triangles
 * meet by construction (neighbours along their common edge or corner, a
 * wall and the sheets it joins) or come within a layer's thickness. Every other pair of closed
 * triangles that meet is a crossing: in a valid layered solid two
 * triangles with no column in common are at least a layer's thickness or a
 * triangle apart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"
#include "ts_extrude_internal.h"

/* Contacts kept: the first is reported, the rest only counted. */
#define TS__CROSS_KEEP 16
/* Room for the pairs the thinning marks, before a second query is needed
 * (the shared meshes cross at up to 282 pairs). */
#define TS__CROSS_MARK 1024

typedef struct cross_ctx {
  const uint32_t (*tris)[3]; /* the tree's triangles, over e's nodes */
  uint32_t nv;               /* nodes per sheet: node n is on column n % nv */
} cross_ctx;

static int same_column(void *ctx, uint32_t ka, uint32_t kb) {
  const cross_ctx *c = ctx;
  const uint32_t *a = c->tris[ka], *b = c->tris[kb];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      if (a[i] % c->nv == b[j] % c->nv) return 1;
  return 0;
}

/* Render triangle k of e is a side wall (its nodes on two sheets). */
static int is_wall(const ts_extrusion *e, uint32_t k) {
  uint32_t s = e->tris[k][0] / e->nv;
  return e->tris[k][1] / e->nv != s || e->tris[k][2] / e->nv != s;
}

/* Every crossing pair of e's sheets into buf (re-sized to hold them all
 * when keep_all, else the first TS__CROSS_KEEP; buf->total counts them).
 * The tree's triangles: sheet s's over surface triangle f at s*nt + f, then
 * the side walls of e's render surface (when assembled; an open surface's
 * layers are closed by them, so two parallel sheets overlapping near a
 * boundary are found where a wall passes through the other sheet). *walls
 * gets the render index of each wall (caller frees). Returns 0,
 * TS_ETOOBIG or TS_ENOMEM. */
static int find_crossings(const ts_extrusion *e, int keep_all, ts_contacts *buf, uint32_t **walls) {
  const uint32_t nt = e->n_surface_tris, nv = e->nv, S = e->n_sheets;
  *walls = NULL;
  uint32_t nw = 0;
  if (e->tris)
    for (uint32_t k = 0; k < e->n_tris; k++) nw += is_wall(e, k);
  uint64_t n = (uint64_t)S * nt + nw;
  if (n > UINT32_MAX / 2) return TS_ETOOBIG;
  uint32_t(*tris)[3] = malloc(sizeof *tris * n);
  uint32_t *wl = malloc(sizeof *wl * (nw ? nw : 1));
  if (!tris || !wl) {
    free(tris);
    free(wl);
    return TS_ENOMEM;
  }
  for (uint32_t s = 0; s < S; s++)
    for (uint32_t f = 0; f < nt; f++)
      for (int k = 0; k < 3; k++) tris[(size_t)s * nt + f][k] = s * nv + e->surface_tris[f][k];
  for (uint32_t k = 0, w = 0; e->tris && k < e->n_tris; k++)
    if (is_wall(e, k)) {
      memcpy(tris[(size_t)S * nt + w], e->tris[k], sizeof *tris);
      wl[w++] = k;
    }
  ts_aabb_tree_def def = ts_default_aabb_tree_def();
  def.margin = 0;
  ts_aabb_tree *tree = NULL;
  int rc = ts_aabb_tree_create(&def, S * nv, (const double(*)[3])e->x, (uint32_t)n,
                               (const uint32_t(*)[3])tris, &tree);
  if (rc) {
    free(tris);
    free(wl);
    return rc;
  }
  cross_ctx ctx = {(const uint32_t(*)[3])tris, nv};
  rc = ts_collide_tissue_self(tree, (const double(*)[3])e->x, same_column, &ctx, buf, NULL);
  if (rc == TS_EFULL && keep_all) {
    uint32_t total = buf->total;
    ts_contacts_free(buf);
    rc = ts_contacts_init(buf, total);
    if (!rc) rc = ts_collide_tissue_self(tree, (const double(*)[3])e->x, same_column, &ctx, buf, NULL);
  }
  if (rc == TS_EFULL) rc = 0; /* counted in total */
  ts_aabb_tree_destroy(tree);
  free(tris);
  if (rc) free(wl);
  else *walls = wl;
  return rc;
}

int ts__extrusion_count_crossings(ts_extrusion *e, char *err, size_t errcap) {
  if (!e || !e->x || !e->surface_tris || e->n_surface_tris == 0) return TS_EINVAL;
  e->n_crossings = 0;
  memset(e->cross_sheet, 0, sizeof e->cross_sheet);
  memset(e->cross_tri, 0, sizeof e->cross_tri);
  memset(e->cross_point, 0, sizeof e->cross_point);
  const uint32_t nt = e->n_surface_tris;
  ts_contacts buf;
  int rc = ts_contacts_init(&buf, TS__CROSS_KEEP);
  if (rc) return rc;
  uint32_t *walls = NULL;
  rc = find_crossings(e, 0, &buf, &walls);
  if (rc == 0 && buf.total) {
    const ts_contact *c = &buf.c[0];
    const uint32_t S = e->n_sheets;
    e->n_crossings = buf.total;
    char what[2][96];
    const uint32_t k2[2] = {c->a, c->b};
    for (int i = 0; i < 2; i++) {
      uint32_t k = k2[i];
      if (k < S * nt) {
        e->cross_sheet[i] = k / nt, e->cross_tri[i] = k % nt;
        snprintf(what[i], sizeof what[i], "sheet %u's triangle over surface triangle %u", k / nt, k % nt);
      } else { /* a side wall: the layer it closes, no surface triangle */
        const uint32_t *w = e->tris[walls[k - S * nt]];
        uint32_t lo = w[0] < w[1] ? w[0] : w[1];
        lo = lo < w[2] ? lo : w[2];
        e->cross_sheet[i] = lo / e->nv, e->cross_tri[i] = UINT32_MAX;
        snprintf(what[i], sizeof what[i], "the side wall of layer %u at boundary vertex %u", lo / e->nv,
                 lo % e->nv);
      }
    }
    memcpy(e->cross_point, c->point, sizeof e->cross_point);
    if (err && errcap)
      snprintf(err, errcap,
               "sheets cross: %s passes through %s at (%.4g, %.4g, %.4g) mm (layers deeper than "
               "half the thickness of a thin part, or opposite walls of a narrow fold offset into "
               "each other); %u crossing triangle pairs in all",
               what[0], what[1], e->cross_point[0] * 1e3, e->cross_point[1] * 1e3,
               e->cross_point[2] * 1e3, e->n_crossings);
  }
  free(walls);
  ts_contacts_free(&buf);
  return rc;
}

int ts__extrusion_mark_crossings(const ts_extrusion *e, uint8_t *mark, uint32_t *n_pairs) {
  if (!e || !e->x || !e->surface_tris || !mark || !n_pairs) return TS_EINVAL;
  *n_pairs = 0;
  const uint32_t nt = e->n_surface_tris;
  ts_contacts buf;
  int rc = ts_contacts_init(&buf, TS__CROSS_MARK);
  if (rc) return rc;
  uint32_t *walls = NULL;
  rc = find_crossings(e, 1, &buf, &walls);
  if (rc == 0) {
    const uint32_t S = e->n_sheets;
    for (uint32_t i = 0; i < buf.n; i++)
      for (int side = 0; side < 2; side++) {
        uint32_t k = side ? buf.c[i].b : buf.c[i].a;
        const uint32_t *v = k < S * nt ? e->surface_tris[k % nt] : e->tris[walls[k - S * nt]];
        for (int q = 0; q < 3; q++) mark[v[q] % e->nv] = 1;
      }
    *n_pairs = buf.total;
  }
  free(walls);
  ts_contacts_free(&buf);
  return rc;
}
