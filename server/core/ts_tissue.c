/*
 * ts_tissue.c: the tissue object (allocation, reset, bounds) and the builder
 * of the built-in stomach-wall patch (see ts_tissue.h for the node layout).
 *
 * The patch. Sheet 0 is a res x res grid over the square [-size/2, size/2]^2
 * in x and z on the dome y = -(x^2 + z^2) / (2R), so its centre is at y = 0
 * and its outward normal points up (+y). Sheet s lies below sheet 0 along the
 * dome's normal, at the depth of the layers above it. Each grid quad is cut
 * into two triangles along alternating diagonals (a symmetric "union jack"
 * pattern, so the patch has no preferred shear direction); a sheet triangle
 * swept from sheet l to sheet l+1 is a prism of layer l.
 *
 * Springs (ts_spring.kind):
 *   EDGE        every triangle edge of every sheet;
 *   INTERLAYER  node j of sheet l to node j of sheet l+1;
 *   SHEAR       one diagonal of the side face that each sheet edge sweeps
 *               through slab l, its direction alternating from edge to edge
 *               and slab to slab (so the patch has no handedness; with the
 *               prism's edges this makes each prism rigid).
 * Stiffness follows the link-element equivalence k = E*A/L with the spring's
 * cross-section A = V/L, V being the volume of material attributed to the
 * spring, i.e. k = E*V/L^2 (the rule Van Gelder derived for triangle and
 * tetrahedral meshes: A. Van Gelder, "Approximate simulation of elastic
 * membranes by triangulated spring meshes", J. Graphics Tools 3(2):21-42,
 * 1998). The volumes:
 *   EDGE        half the thickness of each slab next to the sheet times the
 *               area of the sheet triangles on the edge (Van Gelder's membrane
 *               rule). A sheet between two slabs carries both halves in
 *               parallel (the k add up); the spring is labelled with the layer
 *               that gives the larger share.
 *   INTERLAYER  the slab's column around the node: thickness times the node's
 *               area (a third of its triangles', mean of the two sheets). This
 *               is exact for uniform through-thickness compression.
 *   SHEAR       the slab volume around the face: thickness times the area of
 *               the edge's triangles (mean of the two sheets).
 * In a slab much thinner than the grid spacing the side diagonals are nearly
 * horizontal, so the slab's in-plane stiffness is then about twice Van
 * Gelder's membrane value while its transverse shear stays softer than an
 * incompressible solid's; the fitted nonlinear materials of a later issue
 * calibrate against measured responses instead.
 * Kelvin dampers: c = 2 * zeta * sqrt(k * mu), mu the reduced mass of the two
 * ends (the free end's mass when the other is anchored). Node masses: density
 * times a sixth of the volume of every prism on the node. Every node on the
 * outer boundary ring of every sheet is anchored (inv_mass = 0).
 *
 * Render surface, counter-clockwise seen from outside: group 0 (the first
 * layer) holds the top sheet (facing +y) and the side walls of layer 0, group
 * i the side walls of layer i, and the last group also the bottom sheet
 * (facing -y).
 */
#include "ts_tissue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_massspring.h"

/* Largest patch accepted: 4 Mi nodes (e.g. 1024 x 1024 x 4 sheets). */
#define TS__PATCH_MAX_NODES (1u << 22)

/* ---- material defaults ----
 * Layer thicknesses are the nominal human gastric wall of the project's
 * scenarios (mucosa 1.0 mm, submucosa 1.5 mm, muscularis 2.0 mm; 4.5 mm in
 * all). Stomach-wall layers are nonlinear, layer-dependent and, except for the
 * mucosa, anisotropic, with peak stresses from about 15 to 200 kPa depending
 * on region and direction (porcine stomach, layer-separated biaxial tests: M. Bauer et al.,
 * "Biomechanical and microstructural characterisation of the porcine stomach
 * wall: location- and layer-dependent investigations", Acta Biomaterialia
 * 102:83-99, 2020). The linear moduli below are small-strain values in that
 * range: the mucosa softest, the collagen-rich submucosa stiffest; with them
 * the default patch sags about 1.4 mm under its own weight. Densities are
 * those of soft tissue and smooth muscle (about 1040-1060 kg/m^3). The
 * per-spring dampers are light (5 % of critical): they quench the fast
 * through-thickness ringing, and each extra per cent of critical shortens the
 * stable substep (see ts_massspring.c). */
static const ts_layer ts__default_layers[3] = {
    {"mucosa", 1.0e-3, 30e3, 1040.0, 0.05},
    {"submucosa", 1.5e-3, 90e3, 1050.0, 0.05},
    {"muscularis", 2.0e-3, 70e3, 1060.0, 0.05},
};

ts_patch_def ts_default_patch_def(void) {
  ts_patch_def d;
  memset(&d, 0, sizeof d);
  d.size = 0.08;
  d.resolution = 24;
  d.curvature_radius = 0.15;
  d.n_layers = 3;
  for (int i = 0; i < 3; i++) d.layers[i] = ts__default_layers[i];
  d.gravity[1] = -9.81;
  /* close to critical for the first bending mode (w1 ~ sqrt(g / sag) ~ 80
   * rad/s for this patch's 1.4 mm gravity sag): the sheet settles within a
   * few tens of ms instead of ringing for seconds, which the light per-spring
   * dampers (5 % of critical) would let it do */
  d.drag = 150.0;
  return d;
}

/* ---- tissue object ---- */

int ts_tissue_alloc(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (n_nodes == 0) return TS_EINVAL;
  ts_tissue *t = calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->n_nodes = n_nodes;
  t->n_springs = n_springs;
  t->n_tris = n_tris;
  t->x = calloc(n_nodes, sizeof *t->x);
  t->v = calloc(n_nodes, sizeof *t->v);
  t->f = calloc(n_nodes, sizeof *t->f);
  t->rest = calloc(n_nodes, sizeof *t->rest);
  t->inv_mass = calloc(n_nodes, sizeof *t->inv_mass);
  t->springs = calloc(n_springs ? n_springs : 1, sizeof *t->springs);
  t->tris = calloc(n_tris ? n_tris : 1, sizeof *t->tris);
  if (!t->x || !t->v || !t->f || !t->rest || !t->inv_mass || !t->springs || !t->tris) {
    ts_tissue_destroy(t);
    return TS_ENOMEM;
  }
  *out = t;
  return 0;
}

void ts_tissue_destroy(ts_tissue *t) {
  if (!t) return;
  free(t->x);
  free(t->v);
  free(t->f);
  free(t->rest);
  free(t->inv_mass);
  free(t->springs);
  free(t->tris);
  free(t);
}

void ts_tissue_reset(ts_tissue *t) {
  if (!t) return;
  memcpy(t->x, t->rest, sizeof *t->x * t->n_nodes);
  memset(t->v, 0, sizeof *t->v * t->n_nodes);
  memset(t->f, 0, sizeof *t->f * t->n_nodes);
}

void ts_tissue_bounds(const ts_tissue *t, double lo[3], double hi[3]) {
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = 0.0;
  if (!t || t->n_nodes == 0) return;
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = t->x[0][a];
  for (uint32_t i = 1; i < t->n_nodes; i++) {
    for (int a = 0; a < 3; a++) {
      double c = t->x[i][a];
      if (c < lo[a]) lo[a] = c;
      if (c > hi[a]) hi[a] = c;
    }
  }
}

/* ---- patch: validation ---- */

static int finite_pos(double v) { return isfinite(v) && v > 0; }

static int validate_def(const ts_patch_def *d) {
  if (!finite_pos(d->size)) return TS_EINVAL;
  if (d->resolution < 3 || d->resolution > 1024) return TS_EINVAL;
  if (d->n_layers < 1 || d->n_layers > TS_MAX_LAYERS) return TS_EINVAL;
  double total = 0;
  for (uint32_t l = 0; l < d->n_layers; l++) {
    const ts_layer *L = &d->layers[l];
    if (!memchr(L->name, 0, TS_NAME_MAX) || L->name[0] == 0) return TS_EINVAL;
    if (!finite_pos(L->thickness) || !finite_pos(L->young) || !finite_pos(L->density))
      return TS_EINVAL;
    if (!isfinite(L->damping_ratio) || L->damping_ratio < 0 || L->damping_ratio > 10)
      return TS_EINVAL;
    total += L->thickness;
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

/* ---- patch: geometry helpers ---- */

static void sub3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}
static void cross3(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}
static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static double dist3(const double a[3], const double b[3]) {
  double d[3];
  sub3(a, b, d);
  return sqrt(dot3(d, d));
}
static double tri_area(const double a[3], const double b[3], const double c[3]) {
  double u[3], v[3], n[3];
  sub3(b, a, u);
  sub3(c, a, v);
  cross3(u, v, n);
  return 0.5 * sqrt(dot3(n, n));
}
static double tet_volume(const double a[3], const double b[3], const double c[3],
                         const double d[3]) {
  double u[3], v[3], w[3], n[3];
  sub3(b, a, u);
  sub3(c, a, v);
  sub3(d, a, w);
  cross3(u, v, n);
  return fabs(dot3(n, w)) / 6.0;
}

/* Index of the grid edge between in-sheet nodes ja and jb (adjacent in the
 * triangulation): horizontal edges (along x) first, then vertical (along z),
 * then one diagonal per quad. */
static uint32_t edge_index(uint32_t res, uint32_t ja, uint32_t jb) {
  uint32_t ax = ja % res, az = ja / res, bx = jb % res, bz = jb / res;
  uint32_t x0 = ax < bx ? ax : bx, z0 = az < bz ? az : bz;
  uint32_t nh = (res - 1) * res, nv = res * (res - 1);
  if (az == bz) return az * (res - 1) + x0;
  if (ax == bx) return nh + ax * (res - 1) + z0;
  return nh + nv + z0 * (res - 1) + x0;
}

static void edge_nodes(uint32_t res, uint32_t e, uint32_t *ja, uint32_t *jb) {
  uint32_t nh = (res - 1) * res, nv = res * (res - 1);
  if (e < nh) {
    uint32_t z = e / (res - 1), x = e % (res - 1);
    *ja = z * res + x;
    *jb = z * res + x + 1;
  } else if (e < nh + nv) {
    e -= nh;
    uint32_t x = e / (res - 1), z = e % (res - 1);
    *ja = z * res + x;
    *jb = (z + 1) * res + x;
  } else {
    e -= nh + nv;
    uint32_t z = e / (res - 1), x = e % (res - 1);
    if ((x + z) % 2 == 0) { /* diagonal a-c */
      *ja = z * res + x;
      *jb = (z + 1) * res + x + 1;
    } else { /* diagonal b-d */
      *ja = z * res + x + 1;
      *jb = (z + 1) * res + x;
    }
  }
}

/* Triangles of one sheet as in-sheet indices, counter-clockwise seen from +y.
 * For the quad a=(x,z) b=(x+1,z) c=(x+1,z+1) d=(x,z+1): (a,d,c),(a,c,b) when
 * cut along a-c, (a,d,b),(b,d,c) when cut along b-d. */
static void sheet_triangles(uint32_t res, uint32_t (*tri)[3]) {
  uint32_t k = 0;
  for (uint32_t z = 0; z + 1 < res; z++) {
    for (uint32_t x = 0; x + 1 < res; x++) {
      uint32_t a = z * res + x, b = a + 1, c = a + res + 1, d = a + res;
      if ((x + z) % 2 == 0) {
        tri[k][0] = a, tri[k][1] = d, tri[k][2] = c, k++;
        tri[k][0] = a, tri[k][1] = c, tri[k][2] = b, k++;
      } else {
        tri[k][0] = a, tri[k][1] = d, tri[k][2] = b, k++;
        tri[k][0] = b, tri[k][1] = d, tri[k][2] = c, k++;
      }
    }
  }
}

static void place_nodes(ts_tissue *t, const ts_patch_def *d) {
  uint32_t res = d->resolution, nps = res * res;
  double h = d->size / (res - 1), R = d->curvature_radius;
  for (uint32_t z = 0; z < res; z++) {
    for (uint32_t x = 0; x < res; x++) {
      double px = -0.5 * d->size + x * h, pz = -0.5 * d->size + z * h;
      double py = R > 0 ? -(px * px + pz * pz) / (2 * R) : 0.0;
      /* outward normal of the dome: gradient of y + (x^2 + z^2) / (2R) */
      double n[3] = {R > 0 ? px / R : 0.0, 1.0, R > 0 ? pz / R : 0.0};
      double nl = sqrt(dot3(n, n));
      double depth = 0;
      for (uint32_t s = 0; s <= d->n_layers; s++) {
        double *p = t->rest[s * nps + z * res + x];
        p[0] = px - depth * n[0] / nl;
        p[1] = py - depth * n[1] / nl;
        p[2] = pz - depth * n[2] / nl;
        if (s < d->n_layers) depth += d->layers[s].thickness;
      }
    }
  }
  memcpy(t->x, t->rest, sizeof *t->x * t->n_nodes);
}

static int on_boundary(uint32_t res, uint32_t j) {
  uint32_t x = j % res, z = j / res;
  return x == 0 || z == 0 || x == res - 1 || z == res - 1;
}

static void add_spring(ts_tissue *t, uint32_t *k, uint32_t a, uint32_t b, double stiff,
                       uint8_t layer, uint8_t kind) {
  ts_spring *s = &t->springs[(*k)++];
  s->a = a < b ? a : b;
  s->b = a < b ? b : a;
  s->rest = dist3(t->rest[a], t->rest[b]);
  s->k = stiff;
  s->c = 0;
  s->layer = layer;
  s->kind = kind;
}

/* Appends the triangle (a, b, c), flipped if needed so that its normal points
 * along `out`. */
static void add_tri(ts_tissue *t, uint32_t *k, uint32_t a, uint32_t b, uint32_t c,
                    const double out[3]) {
  double u[3], v[3], n[3];
  sub3(t->rest[b], t->rest[a], u);
  sub3(t->rest[c], t->rest[a], v);
  cross3(u, v, n);
  uint32_t *tri = t->tris[(*k)++];
  tri[0] = a;
  if (dot3(n, out) >= 0) {
    tri[1] = b;
    tri[2] = c;
  } else {
    tri[1] = c;
    tri[2] = b;
  }
}

/* Side walls of slab l: each boundary edge of the grid sweeps a quad from
 * sheet l to sheet l+1, cut into two triangles facing away from the patch. */
static void add_walls(ts_tissue *t, uint32_t *k, uint32_t res, uint32_t l) {
  uint32_t nps = res * res, top = l * nps, bot = (l + 1) * nps;
  for (uint32_t side = 0; side < 4; side++) {
    double out[3] = {0, 0, 0};
    for (uint32_t i = 0; i + 1 < res; i++) {
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
      add_tri(t, k, top + p, bot + p, bot + q, out);
      add_tri(t, k, top + p, bot + q, top + q, out);
    }
  }
}

/* ---- patch: builder ---- */

int ts_patch_create(const ts_patch_def *def, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!def) return TS_EINVAL;
  int rc = validate_def(def);
  if (rc) return rc;

  const uint32_t res = def->resolution, L = def->n_layers, nps = res * res;
  const uint32_t S = L + 1;                                 /* sheets */
  const uint32_t E = 2 * res * (res - 1) + (res - 1) * (res - 1); /* edges per sheet */
  const uint32_t T = 2 * (res - 1) * (res - 1);             /* triangles per sheet */
  const uint32_t n_nodes = S * nps;
  const uint32_t n_springs = S * E + L * nps + L * E;
  const uint32_t n_tris = 2 * T + 8 * (res - 1) * L;

  ts_tissue *t;
  rc = ts_tissue_alloc(n_nodes, n_springs, n_tris, &t);
  if (rc) return rc;

  /* construction scratch */
  uint32_t (*stri)[3] = malloc(sizeof *stri * T);
  double *edge_area = calloc((size_t)S * E, sizeof *edge_area); /* per sheet edge */
  double *node_area = calloc((size_t)S * nps, sizeof *node_area);
  double *mass = calloc(n_nodes, sizeof *mass);
  if (!stri || !edge_area || !node_area || !mass) {
    rc = TS_ENOMEM;
    goto done;
  }

  t->n_layers = L;
  t->n_sheets = S;
  t->nodes_per_sheet = nps;
  for (uint32_t l = 0; l < L; l++) t->layers[l] = def->layers[l];
  for (int a = 0; a < 3; a++) t->gravity[a] = def->gravity[a];
  t->drag = def->drag;

  place_nodes(t, def);
  sheet_triangles(res, stri);

  /* areas: per sheet, each triangle's area goes to its three edges (whole)
   * and its three nodes (a third each) */
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t k = 0; k < T; k++) {
      const uint32_t *tr = stri[k];
      double A = tri_area(t->rest[s * nps + tr[0]], t->rest[s * nps + tr[1]],
                          t->rest[s * nps + tr[2]]);
      for (int e = 0; e < 3; e++) {
        edge_area[(size_t)s * E + edge_index(res, tr[e], tr[(e + 1) % 3])] += A;
        node_area[(size_t)s * nps + tr[e]] += A / 3.0;
      }
    }
  }

  /* masses: a sixth of each prism's volume (split into three tetrahedra) to
   * each of its six nodes */
  for (uint32_t l = 0; l < L; l++) {
    for (uint32_t k = 0; k < T; k++) {
      uint32_t n[6];
      for (int i = 0; i < 3; i++) {
        n[i] = l * nps + stri[k][i];
        n[i + 3] = (l + 1) * nps + stri[k][i];
      }
      double (*p)[3] = t->rest;
      double V = tet_volume(p[n[0]], p[n[1]], p[n[2]], p[n[3]]) +
                 tet_volume(p[n[1]], p[n[2]], p[n[3]], p[n[4]]) +
                 tet_volume(p[n[2]], p[n[3]], p[n[4]], p[n[5]]);
      for (int i = 0; i < 6; i++) mass[n[i]] += def->layers[l].density * V / 6.0;
    }
  }
  for (uint32_t i = 0; i < n_nodes; i++)
    t->inv_mass[i] = on_boundary(res, i % nps) || !(mass[i] > 0) ? 0.0 : 1.0 / mass[i];

  /* springs */
  uint32_t ns = 0;
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t e = 0; e < E; e++) {
      uint32_t ja, jb;
      edge_nodes(res, e, &ja, &jb);
      double len = dist3(t->rest[s * nps + ja], t->rest[s * nps + jb]);
      double A_e = edge_area[(size_t)s * E + e];
      double k_above = 0, k_below = 0; /* shares of slab s-1 and slab s */
      if (s > 0) {
        const ts_layer *m = &def->layers[s - 1];
        k_above = m->young * 0.5 * m->thickness * A_e / (len * len);
      }
      if (s < L) {
        const ts_layer *m = &def->layers[s];
        k_below = m->young * 0.5 * m->thickness * A_e / (len * len);
      }
      uint8_t layer = (uint8_t)(s == L || (s > 0 && k_above > k_below) ? s - 1 : s);
      add_spring(t, &ns, s * nps + ja, s * nps + jb, k_above + k_below, layer,
                 TS_SPRING_EDGE);
    }
    if (s == L) break;
    const ts_layer *m = &def->layers[s];
    for (uint32_t j = 0; j < nps; j++) {
      uint32_t a = s * nps + j, b = a + nps;
      double len = dist3(t->rest[a], t->rest[b]);
      double A = 0.5 * (node_area[(size_t)s * nps + j] + node_area[(size_t)(s + 1) * nps + j]);
      add_spring(t, &ns, a, b, m->young * m->thickness * A / (len * len), (uint8_t)s,
                 TS_SPRING_INTERLAYER);
    }
    for (uint32_t e = 0; e < E; e++) {
      uint32_t ja, jb;
      edge_nodes(res, e, &ja, &jb);
      double V = m->thickness * 0.5 *
                 (edge_area[(size_t)s * E + e] + edge_area[(size_t)(s + 1) * E + e]);
      /* one diagonal per face, its direction alternating with the edge's
       * position and the slab, so that the patch has no handedness */
      if ((ja % res + ja / res + s) % 2) {
        uint32_t tmp = ja;
        ja = jb;
        jb = tmp;
      }
      uint32_t a = s * nps + ja, b = (s + 1) * nps + jb;
      double len = dist3(t->rest[a], t->rest[b]);
      add_spring(t, &ns, a, b, m->young * V / (len * len), (uint8_t)s, TS_SPRING_SHEAR);
    }
  }
  if (ns != n_springs) {
    rc = TS_EINTERNAL;
    goto done;
  }

  /* Kelvin dampers: a fraction of critical for the spring between its ends */
  for (uint32_t i = 0; i < n_springs; i++) {
    ts_spring *sp = &t->springs[i];
    int fa = t->inv_mass[sp->a] > 0, fb = t->inv_mass[sp->b] > 0;
    double mu = fa && fb ? mass[sp->a] * mass[sp->b] / (mass[sp->a] + mass[sp->b])
                : fa     ? mass[sp->a]
                : fb     ? mass[sp->b]
                         : 0.0;
    sp->c = 2.0 * def->layers[sp->layer].damping_ratio * sqrt(sp->k * mu);
  }

  /* render surface */
  uint32_t nt = 0;
  const double up[3] = {0, 1, 0}, down[3] = {0, -1, 0};
  for (uint32_t l = 0; l < L; l++) {
    uint32_t start = nt;
    if (l == 0)
      for (uint32_t k = 0; k < T; k++) add_tri(t, &nt, stri[k][0], stri[k][1], stri[k][2], up);
    add_walls(t, &nt, res, l);
    if (l == L - 1) {
      uint32_t b = L * nps;
      for (uint32_t k = 0; k < T; k++)
        add_tri(t, &nt, b + stri[k][0], b + stri[k][2], b + stri[k][1], down);
    }
    t->layer_tri_count[l] = nt - start;
    memcpy(t->render_group_name[l], def->layers[l].name, TS_NAME_MAX);
    t->render_group_name[l][TS_NAME_MAX - 1] = 0;
  }
  t->n_render_groups = L;
  if (nt != n_tris) rc = TS_EINTERNAL;

  if (!rc) {
    t->stable_dt = ts_massspring_stable_dt(t); /* 0 only when out of memory */
    if (!(t->stable_dt > 0)) rc = TS_ENOMEM;
  }

done:
  free(stri);
  free(edge_area);
  free(node_area);
  free(mass);
  if (rc) {
    ts_tissue_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}
