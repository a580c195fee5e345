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
 *
 * The descent is ts_collide_tissue_self's, through its visiting form
 * (ts_collide_tissue_self_visit), because it must stop: an upload of many
 * overlapping closed parts (up to --max-mesh-triangles) has pairs growing
 * with the square of the overlap, and a descent that counts them all keeps
 * a worker busy for as long as it likes. Past TS__CROSS_CAP pairs the
 * visitor stops it and the extrusion is refused with the count and the cap
 * named. The shared meshes cross at 6
 * (liver.obj), 282 (liver-smooth) and 52 (spot) pairs at full depth.
 *
 * The thinning queries once per round with only the thinned columns moved
 * (ts__cross_check): the tree is built once and refitted for the moved
 * nodes (ts_aabb_tree_refit_moved; margin 0, so every listed node takes its
 * new box) rather than rebuilt, which finds the same pairs (a descent finds
 * every pair of overlapping leaf boxes whatever the tree's shape) and made
 * liver-smooth's thinning rounds (16 of them, 282 pairs in the first)
 * cheaper; figures in the commit and README.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"
#include "ts_extrude_internal.h"
#include "ts_tritri.h"

struct ts__cross_check {
  uint32_t nt, nv, S;   /* surface triangles, nodes per sheet, sheets */
  uint32_t n;           /* tree triangles: S * nt sheet triangles, then the walls */
  uint32_t (*tris)[3];  /* the tree's triangles, over e's nodes */
  uint32_t *walls;      /* per wall triangle (n - S nt of them): its render index */
  ts_aabb_tree *tree;
};

/* Render triangle k of e is a side wall (its nodes on two sheets). */
static int is_wall(const ts_extrusion *e, uint32_t k) {
  uint32_t s = e->tris[k][0] / e->nv;
  return e->tris[k][1] / e->nv != s || e->tris[k][2] / e->nv != s;
}

void ts__cross_check_free(ts__cross_check *c) {
  if (!c) return;
  ts_aabb_tree_destroy(c->tree);
  free(c->tris);
  free(c->walls);
  free(c);
}

/* The tree's triangles: sheet s's over surface triangle f at s*nt + f, then
 * the side walls of e's render surface (when assembled; an open surface's
 * layers are closed by them, so two parallel sheets overlapping near a
 * boundary are found where a wall passes through the other sheet). */
int ts__cross_check_new(const ts_extrusion *e, ts__cross_check **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!e || !e->x || !e->surface_tris || e->n_surface_tris == 0) return TS_EINVAL;
  const uint32_t nt = e->n_surface_tris, nv = e->nv, S = e->n_sheets;
  uint32_t nw = 0;
  if (e->tris)
    for (uint32_t k = 0; k < e->n_tris; k++) nw += is_wall(e, k);
  uint64_t n = (uint64_t)S * nt + nw;
  if (n > UINT32_MAX / 2) return TS_ETOOBIG;
  ts__cross_check *c = calloc(1, sizeof *c);
  if (!c) return TS_ENOMEM;
  c->nt = nt, c->nv = nv, c->S = S, c->n = (uint32_t)n;
  c->tris = malloc(sizeof *c->tris * n);
  c->walls = malloc(sizeof *c->walls * (nw ? nw : 1));
  if (!c->tris || !c->walls) {
    ts__cross_check_free(c);
    return TS_ENOMEM;
  }
  for (uint32_t s = 0; s < S; s++)
    for (uint32_t f = 0; f < nt; f++)
      for (int k = 0; k < 3; k++) c->tris[(size_t)s * nt + f][k] = s * nv + e->surface_tris[f][k];
  for (uint32_t k = 0, w = 0; e->tris && k < e->n_tris; k++)
    if (is_wall(e, k)) {
      memcpy(c->tris[(size_t)S * nt + w], e->tris[k], sizeof *c->tris);
      c->walls[w++] = k;
    }
  ts_aabb_tree_def def = ts_default_aabb_tree_def();
  def.margin = 0;
  int rc = ts_aabb_tree_create(&def, S * nv, (const double(*)[3])e->x, (uint32_t)n,
                               (const uint32_t(*)[3])c->tris, &c->tree);
  if (rc) {
    ts__cross_check_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int ts__cross_check_moved(ts__cross_check *c, const ts_extrusion *e, const uint32_t *moved,
                          uint32_t n_moved) {
  if (!c || !e || !e->x) return TS_EINVAL;
  int rc = ts_aabb_tree_refit_moved(c->tree, (const double(*)[3])e->x, moved, n_moved);
  return rc == 1 ? 0 : rc; /* 1: refitting made it loose, rebuilt */
}

/* Whether tree triangles ka, kb have a column in common (a node of each on
 * one surface vertex's line) or share a node. */
static int same_column(const ts__cross_check *c, uint32_t ka, uint32_t kb) {
  const uint32_t *a = c->tris[ka], *b = c->tris[kb];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      if (a[i] % c->nv == b[j] % c->nv) return 1;
  return 0;
}

/* What a descent found: n pairs (it stops at cap + 1), the first (a < b,
 * tree indices) and a point where it meets; optionally every pair. */
typedef struct found {
  uint32_t n, cap;
  uint32_t a, b;
  double point[3];
  uint8_t *mark;           /* when not NULL: the columns of every pair's triangles */
  uint32_t (*pairs)[2];    /* when not NULL: every pair, up to pairs_cap */
  uint32_t pairs_cap;
} found;

/* The descent's context: the check (for its columns) and what it found. */
typedef struct descent {
  const ts__cross_check *c;
  found *f;
} descent;

static int skip_column(void *ctx, uint32_t ka, uint32_t kb) {
  return same_column(((const descent *)ctx)->c, ka, kb); /* also every pair sharing a node */
}

/* One crossing pair: counted, the first kept; stops the descent past the cap. */
static int take_pair(void *ctx, uint32_t ka, uint32_t kb, const ts_hit *h) {
  const descent *d = ctx;
  const ts__cross_check *c = d->c;
  found *f = d->f;
  if (f->n == 0) {
    f->a = ka, f->b = kb;
    memcpy(f->point, h->point, sizeof f->point);
  }
  if (f->pairs && f->n < f->pairs_cap) f->pairs[f->n][0] = ka, f->pairs[f->n][1] = kb;
  if (f->mark)
    for (int q = 0; q < 3; q++) f->mark[c->tris[ka][q] % c->nv] = f->mark[c->tris[kb][q] % c->nv] = 1;
  return ++f->n > f->cap;
}

/* Every crossing pair of the tree's triangles at positions x, in the order
 * of ts_collide_tissue_self's descent (the same descent, stopped by
 * take_pair), until more than f->cap are found. Returns 0 or TS_EINTERNAL
 * (stack). */
static int descend(const ts__cross_check *c, const double (*x)[3], found *f) {
  f->n = 0;
  descent d = {c, f};
  return ts_collide_tissue_self_visit(c->tree, x, skip_column, take_pair, &d, NULL);
}

/* Fills e->n_crossings and e->cross_* from f, naming the first pair in err. */
static void report(const ts__cross_check *c, ts_extrusion *e, const found *f, char *err, size_t errcap) {
  const uint32_t nt = c->nt, S = c->S;
  e->n_crossings = f->n;
  char what[2][96];
  const uint32_t k2[2] = {f->a, f->b};
  for (int i = 0; i < 2; i++) {
    uint32_t k = k2[i];
    if (k < S * nt) {
      e->cross_sheet[i] = k / nt, e->cross_tri[i] = k % nt;
      snprintf(what[i], sizeof what[i], "sheet %u's triangle over surface triangle %u", k / nt, k % nt);
    } else { /* a side wall: the layer it closes, no surface triangle */
      const uint32_t *w = c->tris[k];
      uint32_t lo = w[0] < w[1] ? w[0] : w[1];
      lo = lo < w[2] ? lo : w[2];
      e->cross_sheet[i] = lo / e->nv, e->cross_tri[i] = UINT32_MAX;
      snprintf(what[i], sizeof what[i], "the side wall of layer %u at boundary vertex %u", lo / e->nv,
               lo % e->nv);
    }
  }
  memcpy(e->cross_point, f->point, sizeof e->cross_point);
  if (!err || !errcap) return;
  if (f->n > f->cap)
    snprintf(err, errcap,
             "sheets cross at %u or more triangle pairs, past the crossing check's cap of %u per "
             "thinning round (overlapping or nested parts? the layers of a single organ cross at "
             "a few hundred at most); the first: %s passes through %s at (%.4g, %.4g, %.4g) mm",
             f->n, f->cap, what[0], what[1], e->cross_point[0] * 1e3, e->cross_point[1] * 1e3,
             e->cross_point[2] * 1e3);
  else
    snprintf(err, errcap,
             "sheets cross: %s passes through %s at (%.4g, %.4g, %.4g) mm (layers deeper than "
             "half the thickness of a thin part, or opposite walls of a narrow fold offset into "
             "each other); %u crossing triangle pairs in all",
             what[0], what[1], e->cross_point[0] * 1e3, e->cross_point[1] * 1e3, e->cross_point[2] * 1e3,
             e->n_crossings);
}

static void clear_crossings(ts_extrusion *e) {
  e->n_crossings = 0;
  memset(e->cross_sheet, 0, sizeof e->cross_sheet);
  memset(e->cross_tri, 0, sizeof e->cross_tri);
  memset(e->cross_point, 0, sizeof e->cross_point);
}

int ts__cross_check_mark(const ts__cross_check *c, ts_extrusion *e, uint8_t *mark, uint32_t *n_pairs,
                         char *err, size_t errcap) {
  if (!c || !e || !e->x || !mark || !n_pairs) return TS_EINVAL;
  found f = {.cap = TS__CROSS_CAP, .mark = mark};
  int rc = descend(c, (const double(*)[3])e->x, &f);
  if (rc) return rc;
  *n_pairs = f.n;
  if (f.n <= f.cap) return 0;
  report(c, e, &f, err, errcap);
  return TS_EMESH;
}

int ts__cross_check_pairs(const ts__cross_check *c, const ts_extrusion *e, uint32_t (*pairs)[2],
                          uint32_t cap, uint32_t *n) {
  if (!c || !e || !e->x || !n || (!pairs && cap)) return TS_EINVAL;
  found f = {.cap = TS__CROSS_CAP, .pairs = pairs, .pairs_cap = cap};
  int rc = descend(c, (const double(*)[3])e->x, &f);
  *n = f.n;
  return rc;
}

int ts__extrusion_count_crossings(ts_extrusion *e, char *err, size_t errcap) {
  if (!e || !e->x || !e->surface_tris || e->n_surface_tris == 0) return TS_EINVAL;
  clear_crossings(e);
  ts__cross_check *c = NULL;
  int rc = ts__cross_check_new(e, &c);
  if (rc) return rc;
  found f = {.cap = TS__CROSS_CAP};
  rc = descend(c, (const double(*)[3])e->x, &f);
  if (rc == 0 && f.n) report(c, e, &f, err, errcap);
  ts__cross_check_free(c);
  return rc;
}
