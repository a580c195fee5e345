/*
 * ts_extrude_dir.c: the inward offset direction of every surface vertex for
 * the extrusion (ts_extrude.c).
 *
 * Usually the angle-weighted vertex normal (G. Thuermer and C. A. Wuethrich,
 * "Computing vertex normals from polygonal facets", Journal of Graphics Tools
 * 3(1):43-46, 1998): the sum of the unit normals of the triangles around the
 * vertex, each weighted by the triangle's angle at the vertex. Unlike area or
 * uniform weights this depends only on the surface's shape, not on how it is
 * triangulated (a cube's corner normal is (1,1,1)/sqrt(3) whatever the
 * diagonals), so the layers do not shift with the meshing.
 *
 * At a sharp crease or saddle of a coarse mesh that normal can lean more
 * than 90 degrees away from one of the vertex's triangles (the shared
 * liver.obj has such vertices): the lateral edge then leaves that triangle
 * on its outer side and the prism under it is inverted at any depth
 * (ts_prism_check). Where the angle-weighted normal leans more than
 * TS__TILT_MAX_DEG from one of its triangles, the vertex is offset instead
 * along the "most normal" direction, the unit n that maximises the smallest
 * n . m_f over the vertex's inward unit face normals m_f (R. Aubry and
 * R. Loehner, "On the 'most normal' normal", Communications in Numerical
 * Methods in Engineering 24(12):1641-1652, 2008). That n is the direction of
 * the point of the convex hull of the m_f nearest the origin, and its
 * smallest dot product is that point's distance (the dual of the nearest-point
 * problem); the nearest point lies inside a hull face of at most three of the
 * m_f, found here by trying every one, two and three of them (a vertex has a
 * handful of triangles; valences over TS__TILT_MAX_VALENCE keep the
 * angle-weighted normal). When even the most normal direction leans 89.9
 * degrees or more from a triangle, no offset keeps that vertex's prisms
 * valid: the surface is refused, the vertex named.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude_internal.h"
#include "ts_meshtopo.h"

#define TS__TILT_MAX_DEG 80.0
#define TS__TILT_MAX_VALENCE 64
#define TS__MIN_COS 1.7e-3 /* cos(89.9 degrees) */

static void sub3(const double *a, const double *b, double *o) {
  o[0] = a[0] - b[0];
  o[1] = a[1] - b[1];
  o[2] = a[2] - b[2];
}

static void cross3(const double *a, const double *b, double *o) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot3(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* Inward unit normal of triangle f; 0 when degenerate. */
static int face_normal(const ts_mesh *m, uint32_t f, double n[3]) {
  const uint32_t *t = m->t[f];
  double e0[3], e1[3];
  sub3(m->v[t[1]], m->v[t[0]], e0);
  sub3(m->v[t[2]], m->v[t[0]], e1);
  cross3(e1, e0, n); /* counter-clockwise from outside: e0 x e1 points out */
  double l = sqrt(dot3(n, n));
  if (!(l > 0)) return 0;
  for (int k = 0; k < 3; k++) n[k] /= l;
  return 1;
}

/* Nearest point to the origin of the affine hull of the k (1..3) points s,
 * when it lies inside their simplex (barycentric weights >= 0): writes it to
 * p and returns 1; 0 otherwise (outside, or the points affinely dependent). */
static int simplex_nearest(const double (*s)[3], int k, double p[3]) {
  if (k == 1) {
    memcpy(p, s[0], sizeof(double) * 3);
    return 1;
  }
  double e[2][3], G[2][2], r[2], lam[2] = {0, 0};
  for (int i = 0; i < k - 1; i++) sub3(s[i + 1], s[0], e[i]);
  for (int i = 0; i < k - 1; i++) {
    r[i] = -dot3(e[i], s[0]);
    for (int j = 0; j < k - 1; j++) G[i][j] = dot3(e[i], e[j]);
  }
  if (k == 2) {
    if (!(G[0][0] > 1e-24)) return 0;
    lam[0] = r[0] / G[0][0];
  } else {
    double det = G[0][0] * G[1][1] - G[0][1] * G[1][0];
    if (!(fabs(det) > 1e-12 * G[0][0] * G[1][1]) || !(det != 0)) return 0;
    lam[0] = (r[0] * G[1][1] - r[1] * G[0][1]) / det;
    lam[1] = (G[0][0] * r[1] - G[1][0] * r[0]) / det;
  }
  const double eps = -1e-12;
  if (lam[0] < eps || lam[1] < eps || 1 - lam[0] - lam[1] < eps) return 0;
  for (int c = 0; c < 3; c++) p[c] = s[0][c] + lam[0] * e[0][c] + (k == 3 ? lam[1] * e[1][c] : 0);
  return 1;
}

/* Tries the simplex of the k vectors m[idx[0..k-1]]: when its nearest point
 * p to the origin is the hull's (every m . p >= |p|^2) and farther than
 * *best, keeps it (*best = |p|, dir = p / |p|). */
static void try_simplex(const double (*m)[3], uint32_t n, const uint32_t *idx, int k, double *best,
                        double dir[3]) {
  double s[3][3], p[3];
  for (int i = 0; i < k; i++) memcpy(s[i], m[idx[i]], sizeof s[i]);
  if (!simplex_nearest((const double (*)[3])s, k, p)) return;
  double pp = dot3(p, p);
  if (!(pp > 1e-18)) return;
  for (uint32_t f = 0; f < n; f++)
    if (!(dot3(m[f], p) >= pp * (1 - 1e-9))) return;
  double pl = sqrt(pp);
  if (pl > *best) {
    *best = pl;
    for (int q = 0; q < 3; q++) dir[q] = p[q] / pl;
  }
}

/* The most normal direction of the n unit vectors m (see the top): writes
 * it to dir and returns its smallest dot product with them, or -1 when the
 * origin is inside their hull (no direction sees them all; dir is zero). */
static double most_normal(const double (*m)[3], uint32_t n, double dir[3]) {
  double best = -1;
  dir[0] = dir[1] = dir[2] = 0;
  for (uint32_t a = 0; a < n; a++) {
    uint32_t i1[1] = {a};
    try_simplex(m, n, i1, 1, &best, dir);
    for (uint32_t b = a + 1; b < n; b++) {
      uint32_t i2[2] = {a, b};
      try_simplex(m, n, i2, 2, &best, dir);
      for (uint32_t c = b + 1; c < n; c++) {
        uint32_t i3[3] = {a, b, c};
        try_simplex(m, n, i3, 3, &best, dir);
      }
    }
  }
  return best;
}

int ts__vertex_direction(const ts_mesh *m, const ts_meshtopo *topo, uint32_t j, double dir[3],
                         double *min_cos, int *tilted) {
  double fm[TS__TILT_MAX_VALENCE][3], sum[3] = {0, 0, 0}, wsum = 0;
  uint32_t nf = 0;
  *tilted = 0;
  *min_cos = -1;
  dir[0] = dir[1] = dir[2] = 0;
  for (uint32_t q = topo->vert_tri_off[j]; q < topo->vert_tri_off[j + 1]; q++) {
    uint32_t f = topo->vert_tris[q];
    double fn[3];
    if (!face_normal(m, f, fn)) continue; /* degenerate: refused by the surface check */
    const uint32_t *t = m->t[f];
    int i = t[0] == j ? 0 : t[1] == j ? 1 : 2;
    double a[3], b[3], c[3];
    sub3(m->v[t[(i + 1) % 3]], m->v[j], a);
    sub3(m->v[t[(i + 2) % 3]], m->v[j], b);
    cross3(a, b, c);
    double ang = atan2(sqrt(dot3(c, c)), dot3(a, b));
    for (int k = 0; k < 3; k++) sum[k] += ang * fn[k];
    wsum += ang;
    if (nf < TS__TILT_MAX_VALENCE) memcpy(fm[nf], fn, sizeof fn);
    nf++;
  }
  if (nf == 0) return TS_EINVAL;
  double len = sqrt(dot3(sum, sum)), lo = -1;
  if (len > 1e-9 * wsum) {
    for (int k = 0; k < 3; k++) dir[k] = sum[k] / len;
    lo = INFINITY;
    for (uint32_t q = 0; q < nf && q < TS__TILT_MAX_VALENCE; q++) lo = fmin(lo, dot3(fm[q], dir));
  }
  if (lo < cos(TS__TILT_MAX_DEG * M_PI / 180.0) && nf <= TS__TILT_MAX_VALENCE) {
    double mn[3];
    double c = most_normal((const double (*)[3])fm, nf, mn);
    if (c > lo) {
      memcpy(dir, mn, sizeof mn);
      lo = c;
      *tilted = 1;
    }
  }
  *min_cos = lo;
  return lo > TS__MIN_COS ? 0 : TS_EMESH;
}

int ts__extrude_directions(const ts_mesh *m, const ts_meshtopo *topo, double (*nrm)[3],
                           uint32_t *n_tilted, char *err, size_t errcap) {
  *n_tilted = 0;
  for (uint32_t j = 0; j < m->n_verts; j++) {
    double c;
    int tilted;
    int rc = ts__vertex_direction(m, topo, j, nrm[j], &c, &tilted);
    *n_tilted += (uint32_t)tilted;
    if (rc == TS_EINVAL) {
      if (err && errcap) snprintf(err, errcap, "surface vertex %u is used by no triangle", j);
      return TS_EMESH;
    }
    if (rc) {
      if (err && errcap)
        snprintf(err, errcap,
                 "surface vertex %u: no direction points inwards from all its %u triangles (a "
                 "crease folded back on itself); smooth or remesh the surface there",
                 j, topo->vert_tri_off[j + 1] - topo->vert_tri_off[j]);
      return TS_EMESH;
    }
  }
  return 0;
}
