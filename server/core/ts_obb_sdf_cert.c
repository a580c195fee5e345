/*
 * ts_obb_sdf_cert.c: the certificate that lets the bounded signed distance
 * of a mesh tool (ts_obb_tree_mesh_sdf_within, ts_obb_sdf.c) stop at the
 * root box: where the mesh's signed distance is positive everywhere outside
 * its root box, so that a point there farther than the bound from the
 * surface is farther in signed distance too, and the query need not find
 * its closest point.
 *
 * A closed, manifold, consistently oriented mesh (without
 * self-intersections): a negative signed distance means inside (Baerentzen
 * and Aanaes 2005, the pseudonormal's theorem, ts_obb_sdf.c), and the inside
 * lies in the convex hull of the vertices, so in the root box.
 *
 * An open one (ts_obb_sdf.c: its rim counts as outside, and elsewhere it
 * bounds the region behind its faces) may be negative outside its root box
 * through its opening: points beyond the opening of a shallow tray whose
 * closest point is on its bottom. Certified here is the instrument's kind:
 * one rim loop, flat (its corners within 1e-9 of the reach of a plane Q) and
 * convex in Q, every other vertex strictly on one side of Q, no edge across
 * the loop. Cap the loop with the convex polygon it bounds: M' is closed,
 * and within the hull of the vertices. Let p be outside the root box with a
 * negative distance and c its closest point, on a feature off the rim (the
 * rim is positive), so not on the cap. A point q of the segment c-p near c
 * has c as its closest point in M' too, with the same pseudonormal (c's
 * faces are all in M), so q is inside M'; p, outside the box, is outside
 * M'. The segment leaves M' between q and p: not through M (p's closest
 * point is c), so through the cap, and p lies beyond Q. So the bounded
 * query stops early only outside the root box and not beyond Q
 * (ts_obb_tree.sdf_open_plane); beyond Q it is the full query.
 */
#include <math.h>
#include <stdlib.h>

#include "ts_obb_tree.h"

void ts__obb_sdf_certify(ts_obb_tree *t, const uint8_t *vbound, const uint32_t (*rim)[2],
                         uint32_t n_rim);
int ts__obb_beyond_open_plane(const ts_obb_tree *t, const double p[3]);

#define TS__CERT_TOL 1e-9     /* of the reach: a rim corner on Q; the rest off it */
#define TS__BEYOND_MARGIN 1e-6 /* of the reach: "beyond Q" starts this much before it */
#define TS__PI 3.14159265358979323846

static double dot(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* One loop through every rim edge (next[a] the end of the rim edge from a),
 * convex in the plane of unit normal n and turning once around it. */
static int loop_convex(const ts_obb_tree *t, const uint32_t *next, uint32_t start, uint32_t n_rim,
                       const double n[3]) {
  /* a basis (u, w) of the plane */
  double u[3] = {0, 0, 0}, w[3];
  u[fabs(n[0]) < 0.6 ? 0 : 1] = 1;
  const double un = dot(u, n);
  for (int k = 0; k < 3; k++) u[k] -= un * n[k];
  const double ul = sqrt(dot(u, u));
  for (int k = 0; k < 3; k++) u[k] /= ul;
  w[0] = n[1] * u[2] - n[2] * u[1];
  w[1] = n[2] * u[0] - n[0] * u[2];
  w[2] = n[0] * u[1] - n[1] * u[0];
  uint32_t i = start, steps = 0;
  double turn = 0;
  int side = 0;
  do {
    const uint32_t j = next[i], k = next[j];
    if (j == UINT32_MAX || k == UINT32_MAX) return 0;
    const double e1[2] = {dot(t->v[j], u) - dot(t->v[i], u), dot(t->v[j], w) - dot(t->v[i], w)};
    const double e2[2] = {dot(t->v[k], u) - dot(t->v[j], u), dot(t->v[k], w) - dot(t->v[j], w)};
    const double cr = e1[0] * e2[1] - e1[1] * e2[0], dt = e1[0] * e2[0] + e1[1] * e2[1];
    if (cr != 0) {
      const int s = cr > 0 ? 1 : -1;
      if (side && s != side) return 0; /* a reflex corner */
      side = s;
    }
    turn += atan2(cr, dt);
    i = j;
  } while (++steps <= n_rim && i != start);
  /* every rim edge in the loop, turning once (not a star) */
  return steps == n_rim && i == start && fabs(fabs(turn) - 2.0 * TS__PI) < 1e-6;
}

void ts__obb_sdf_certify(ts_obb_tree *t, const uint8_t *vbound, const uint32_t (*rim)[2],
                         uint32_t n_rim) {
  t->sdf_outside_root = 0;
  for (int k = 0; k < 4; k++) t->sdf_open_plane[k] = 0;
  if (!t->n_nodes) return;
  if (n_rim == 0) {
    t->sdf_outside_root = 1; /* closed */
    return;
  }
  const uint32_t nv = t->n_verts;
  const double tol = TS__CERT_TOL * t->reach;
  uint32_t *next = malloc(sizeof *next * nv);
  if (!next) return; /* no certificate: the full query */
  for (uint32_t i = 0; i < nv; i++) next[i] = UINT32_MAX;
  int ok = 1;
  for (uint32_t e = 0; e < n_rim && ok; e++) {
    ok = next[rim[e][0]] == UINT32_MAX; /* one rim edge from each rim corner */
    next[rim[e][0]] = rim[e][1];
  }
  /* no edge across the loop: an edge of two rim corners is a rim edge */
  for (uint32_t f = 0; f < t->n_tris && ok; f++)
    for (int c = 0; c < 3 && ok; c++) {
      const uint32_t a = t->t[f][c], b = t->t[f][(c + 1) % 3];
      ok = !(vbound[a] && vbound[b]) || next[a] == b || next[b] == a;
    }
  /* Q: the loop's normal by Newell's sums, through the corners' mean */
  double n[3] = {0, 0, 0}, d = 0;
  for (uint32_t e = 0; e < n_rim && ok; e++) {
    const double *a = t->v[rim[e][0]], *b = t->v[rim[e][1]];
    n[0] += (a[1] - b[1]) * (a[2] + b[2]);
    n[1] += (a[2] - b[2]) * (a[0] + b[0]);
    n[2] += (a[0] - b[0]) * (a[1] + b[1]);
  }
  const double nl = sqrt(dot(n, n));
  ok = ok && nl > 0;
  for (int k = 0; k < 3 && ok; k++) n[k] /= nl;
  for (uint32_t e = 0; e < n_rim && ok; e++) d += dot(t->v[rim[e][0]], n) / n_rim;
  /* the corners on Q, the rest strictly on one side: n away from it */
  int side = 0;
  for (uint32_t i = 0; i < nv && ok; i++) {
    const double o = dot(t->v[i], n) - d;
    if (vbound[i]) {
      ok = fabs(o) <= tol;
    } else {
      const int s = o > tol ? 1 : o < -tol ? -1 : 0;
      ok = s != 0 && (!side || s == side);
      side = s;
    }
  }
  ok = ok && side != 0 && loop_convex(t, next, rim[0][0], n_rim, n);
  free(next);
  if (!ok) return;
  for (int k = 0; k < 3; k++) t->sdf_open_plane[k] = -side * n[k];
  t->sdf_open_plane[3] = -side * d;
  t->sdf_outside_root = 1;
}

int ts__obb_beyond_open_plane(const ts_obb_tree *t, const double p[3]) {
  const double *q = t->sdf_open_plane;
  if (q[0] == 0 && q[1] == 0 && q[2] == 0) return 0; /* closed */
  return dot(p, q) - q[3] > -TS__BEYOND_MARGIN * t->reach;
}
