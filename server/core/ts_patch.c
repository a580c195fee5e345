/*
 * ts_patch.c: the built-in stomach-wall patch ("stomach-patch"): a gently
 * curved square sheet of three layers with its boundary anchored, built as a
 * multi-layer extrusion (ts_extrude.h) and turned into a tissue by
 * ts_tissue_build (ts_tissue_build.c), like any real mesh.
 *
 * Geometry. Sheet 0 is a res x res grid over the square [-size/2, size/2]^2
 * in x and z on the dome y = -(x^2 + z^2) / (2R), so its centre is at y = 0
 * and its outward normal points up (+y). Sheet s lies below sheet 0 along the
 * dome's normal, at the depth of the layers above it (the extrusion's
 * offset along the inward normal). Each grid quad is cut into two triangles
 * along alternating diagonals (a symmetric "union jack" pattern, so the
 * patch has no preferred shear direction).
 *
 * The extrusion's render surface, counter-clockwise seen from outside: group
 * i (layer i) holds the layer's top sheet (sheet i, facing +y) and its side
 * walls, and the last group also the bottom sheet (facing -y), as
 * ts_extrude.h specifies. Every node on the
 * outer boundary ring of every sheet is anchored.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_tissue.h"

/* Largest patch accepted: 4 Mi nodes (e.g. 1024 x 1024 x 4 sheets). */
#define TS__PATCH_MAX_NODES (1u << 22)

ts_patch_def ts_default_patch_def(void) {
  ts_patch_def d;
  memset(&d, 0, sizeof d);
  d.size = 0.08;
  d.resolution = 24;
  d.curvature_radius = 0.15;
  d.n_layers = ts_material_default_layers(d.layers);
  d.gravity[1] = -9.81;
  /* close to critical for the first bending mode (w1 of a few tens of rad/s
   * for this patch): the sheet settles within a few tens of ms instead of
   * ringing for seconds, which the light per-spring dampers (5 % of
   * critical) would let it do */
  d.drag = 150.0;
  return d;
}

/* ---- validation ---- */

static int finite_pos(double v) { return isfinite(v) && v > 0; }

static int validate_def(const ts_patch_def *d) {
  if (!finite_pos(d->size)) return TS_EINVAL;
  if (d->resolution < 3 || d->resolution > 1024) return TS_EINVAL;
  if (d->n_layers < 1 || d->n_layers > TS_MAX_LAYERS) return TS_EINVAL;
  double total = 0;
  for (uint32_t l = 0; l < d->n_layers; l++) {
    if (ts_layer_validate(&d->layers[l])) return TS_EINVAL;
    total += d->layers[l].thickness;
  }
  /* a "gentle" dome: the offset sheets must not fold over */
  double R = d->curvature_radius;
  if (!isfinite(R) || R < 0) return TS_EINVAL;
  if (R > 0 && (R < 0.5 * d->size || R < 2 * total)) return TS_EINVAL;
  if (total > d->size) return TS_EINVAL;
  for (int a = 0; a < 3; a++)
    if (!isfinite(d->gravity[a]) || fabs(d->gravity[a]) > 1e3) return TS_EINVAL;
  if (!isfinite(d->drag) || d->drag < 0 || d->drag > 1e6) return TS_EINVAL;
  uint64_t nodes = (uint64_t)(d->n_layers + 1) * d->resolution * d->resolution;
  if (nodes > TS__PATCH_MAX_NODES) return TS_ETOOBIG;
  return 0;
}

/* ---- the extrusion ---- */

static void free_extrusion(ts_extrusion *e) {
  if (!e) return;
  free(e->x);
  free(e->surface_tris);
  free(e->boundary);
  free(e->tris);
  free(e);
}

static void sub3(const double a[3], const double b[3], double o[3]) {
  for (int i = 0; i < 3; i++) o[i] = a[i] - b[i];
}

/* Appends the triangle (a, b, c), flipped if needed so that its normal points
 * along `out`. */
static void add_tri(ts_extrusion *e, uint32_t *k, uint32_t a, uint32_t b, uint32_t c,
                    const double out[3]) {
  double u[3], v[3];
  sub3(e->x[b], e->x[a], u);
  sub3(e->x[c], e->x[a], v);
  double n[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                 u[0] * v[1] - u[1] * v[0]};
  uint32_t *tri = e->tris[(*k)++];
  int keep = n[0] * out[0] + n[1] * out[1] + n[2] * out[2] >= 0;
  tri[0] = a;
  tri[1] = keep ? b : c;
  tri[2] = keep ? c : b;
}

/* Side walls of slab l: each boundary edge of the grid sweeps a quad from
 * sheet l to sheet l+1, cut into two triangles facing away from the patch. */
static void add_walls(ts_extrusion *e, uint32_t *k, uint32_t res, uint32_t l) {
  uint32_t nps = res * res, top = l * nps, bot = (l + 1) * nps;
  for (uint32_t side = 0; side < 4; side++) {
    for (uint32_t i = 0; i + 1 < res; i++) {
      double out[3] = {0, 0, 0};
      uint32_t p, q;
      switch (side) {
      case 0: /* z = min */
        p = i, q = i + 1, out[2] = -1;
        break;
      case 1: /* z = max */
        p = (res - 1) * res + i, q = p + 1, out[2] = 1;
        break;
      case 2: /* x = min */
        p = i * res, q = p + res, out[0] = -1;
        break;
      default: /* x = max */
        p = i * res + res - 1, q = p + res, out[0] = 1;
        break;
      }
      add_tri(e, k, top + p, bot + p, bot + q, out);
      add_tri(e, k, top + p, bot + q, top + q, out);
    }
  }
}

/* The patch as an extrusion (every field of ts_extrusion filled). */
static int patch_extrusion(const ts_patch_def *d, ts_extrusion **out) {
  const uint32_t res = d->resolution, L = d->n_layers, S = L + 1, nps = res * res;
  const uint32_t T = 2 * (res - 1) * (res - 1);
  ts_extrusion *e = calloc(1, sizeof *e);
  if (!e) return TS_ENOMEM;
  e->n_layers = L;
  e->n_sheets = S;
  e->nv = nps;
  e->n_surface_tris = T;
  e->n_tris = (L + 1) * T + 8 * (res - 1) * L;
  e->n_groups = L;
  e->x = calloc((size_t)S * nps, sizeof *e->x);
  e->surface_tris = calloc(T, sizeof *e->surface_tris);
  e->boundary = calloc(nps, 1);
  e->tris = calloc(e->n_tris, sizeof *e->tris);
  if (!e->x || !e->surface_tris || !e->boundary || !e->tris) {
    free_extrusion(e);
    return TS_ENOMEM;
  }

  /* nodes: the dome, then each sheet along its normal */
  double h = d->size / (res - 1), R = d->curvature_radius;
  for (uint32_t z = 0; z < res; z++) {
    for (uint32_t xi = 0; xi < res; xi++) {
      double px = -0.5 * d->size + xi * h, pz = -0.5 * d->size + z * h;
      double py = R > 0 ? -(px * px + pz * pz) / (2 * R) : 0.0;
      /* outward normal of the dome: gradient of y + (x^2 + z^2) / (2R) */
      double n[3] = {R > 0 ? px / R : 0.0, 1.0, R > 0 ? pz / R : 0.0};
      double nl = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
      double depth = 0;
      for (uint32_t s = 0; s < S; s++) {
        double *p = e->x[s * nps + z * res + xi];
        p[0] = px - depth * n[0] / nl;
        p[1] = py - depth * n[1] / nl;
        p[2] = pz - depth * n[2] / nl;
        if (s < L) depth += d->layers[s].thickness;
      }
      e->boundary[z * res + xi] = xi == 0 || z == 0 || xi == res - 1 || z == res - 1;
    }
  }

  /* surface triangles, counter-clockwise seen from +y: for the quad
   * a=(x,z) b=(x+1,z) c=(x+1,z+1) d=(x,z+1), (a,d,c),(a,c,b) when cut along
   * a-c, (a,d,b),(b,d,c) when cut along b-d */
  uint32_t k = 0;
  for (uint32_t z = 0; z + 1 < res; z++) {
    for (uint32_t xi = 0; xi + 1 < res; xi++) {
      uint32_t a = z * res + xi, b = a + 1, c = a + res + 1, dd = a + res;
      uint32_t(*tri)[3] = e->surface_tris;
      if ((xi + z) % 2 == 0) {
        tri[k][0] = a, tri[k][1] = dd, tri[k][2] = c, k++;
        tri[k][0] = a, tri[k][1] = c, tri[k][2] = b, k++;
      } else {
        tri[k][0] = a, tri[k][1] = dd, tri[k][2] = b, k++;
        tri[k][0] = b, tri[k][1] = dd, tri[k][2] = c, k++;
      }
    }
  }

  /* render surface, grouped by layer */
  uint32_t nt = 0;
  const double up[3] = {0, 1, 0}, down[3] = {0, -1, 0};
  for (uint32_t l = 0; l < L; l++) {
    uint32_t start = nt;
    for (uint32_t i = 0; i < T; i++) { /* the layer's top sheet */
      const uint32_t *tr = e->surface_tris[i], b = l * nps;
      add_tri(e, &nt, b + tr[0], b + tr[1], b + tr[2], up);
    }
    add_walls(e, &nt, res, l);
    if (l == L - 1) {
      uint32_t b = L * nps;
      for (uint32_t i = 0; i < T; i++) {
        const uint32_t *tr = e->surface_tris[i];
        add_tri(e, &nt, b + tr[0], b + tr[2], b + tr[1], down);
      }
    }
    e->group_tri_count[l] = nt - start;
  }
  if (nt != e->n_tris) {
    free_extrusion(e);
    return TS_EINTERNAL;
  }
  *out = e;
  return 0;
}

int ts_patch_extrusion(const ts_patch_def *def, ts_extrusion **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!def) return TS_EINVAL;
  int rc = validate_def(def);
  if (rc) return rc;
  return patch_extrusion(def, out);
}

/* ---- builder ---- */

int ts_patch_create(const ts_patch_def *def, ts_tissue **out) {
  return ts_patch_create_stoppable(def, NULL, out);
}

int ts_patch_create_stoppable(const ts_patch_def *def, const atomic_int *stop, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!def) return TS_EINVAL;
  int rc = validate_def(def);
  if (rc) return rc;
  ts_extrusion *e = NULL;
  rc = patch_extrusion(def, &e);
  if (rc) return rc;
  uint32_t n = e->n_sheets * e->nv;
  uint8_t *anchored = malloc(n);
  if (!anchored) {
    free_extrusion(e);
    return TS_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) anchored[i] = e->boundary[i % e->nv];
  ts_tissue *t = NULL;
  rc = ts_tissue_build_unprepared(e, def->layers, anchored, def->gravity, stop, &t);
  free(anchored);
  free_extrusion(e);
  if (rc) return rc;
  t->stop = stop;
  rc = ts_massspring_prepare(t); /* as ts_tissue_build makes it: before the drag is set */
  if (rc) {
    ts_tissue_destroy(t);
    return rc;
  }
  t->drag = def->drag;
  t->stable_dt = ts_massspring_stable_dt(t); /* with the drag */
  *out = t;
  return 0;
}
