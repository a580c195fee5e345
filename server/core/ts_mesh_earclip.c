/*
 * ts_mesh_earclip.c: triangulation of a (possibly concave) planar polygon by
 * ear clipping (Meisters, "Polygons have ears", Amer. Math. Monthly 82, 1975;
 * the O(n^2)-per-ear form of Eberly, "Triangulation by Ear Clipping").
 *
 * The polygon is projected onto the coordinate plane most perpendicular to
 * its Newell normal (Newell's method, as in Sutherland, Sproull and
 * Schumacker 1974), with the two axes ordered so the polygon runs
 * counter-clockwise there. An ear is a convex corner whose triangle contains
 * no other corner; cutting it keeps every triangle inside the outline and
 * with the polygon's winding, which a fan from the first corner does not do
 * for a concave face. A polygon with no ear (degenerate, or self-intersecting
 * as some exporters write them) has its most convex corner cut, so the result
 * always has n - 2 triangles. No allocation: TS_MESH_MAX_POLYGON bounds n.
 *
 * Cost: a simple polygon finds an ear within a few candidates, O(n) each, so
 * O(n^2) in all; a hostile one could make every candidate fail late, O(n^3).
 * The containment tests are therefore budgeted at 4 n^2 per polygon; past
 * that, the first convex corner is cut without the test (the triangles keep
 * the winding but may overlap, which only a pathological face can cause).
 */
#include <math.h>

#include "ts_mesh_read.h"

/* Twice the signed area of the 2D triangle (a, b, c). */
static double orient(const double *x, const double *y, int a, int b, int c) {
  return (x[b] - x[a]) * (y[c] - y[a]) - (y[b] - y[a]) * (x[c] - x[a]);
}

void ts__earclip(const double (*v)[3], const uint32_t *poly, uint32_t n, uint32_t (*out)[3]) {
  if (n == 3) {
    out[0][0] = poly[0], out[0][1] = poly[1], out[0][2] = poly[2];
    return;
  }
  /* Newell normal, relative to the first corner for accuracy */
  const double *o = v[poly[0]];
  double nrm[3] = {0, 0, 0};
  for (uint32_t i = 0; i < n; i++) {
    const double *p = v[poly[i]], *q = v[poly[(i + 1) % n]];
    double a[3] = {p[0] - o[0], p[1] - o[1], p[2] - o[2]};
    double b[3] = {q[0] - o[0], q[1] - o[1], q[2] - o[2]};
    nrm[0] += (a[1] - b[1]) * (a[2] + b[2]);
    nrm[1] += (a[2] - b[2]) * (a[0] + b[0]);
    nrm[2] += (a[0] - b[0]) * (a[1] + b[1]);
  }
  int k = 0;
  for (int i = 1; i < 3; i++)
    if (fabs(nrm[i]) > fabs(nrm[k])) k = i;
  if (!(fabs(nrm[k]) > 0)) { /* no area at all: a fan is as good as anything */
    for (uint32_t i = 0; i + 2 < n; i++)
      out[i][0] = poly[0], out[i][1] = poly[i + 1], out[i][2] = poly[i + 2];
    return;
  }
  /* the Newell component along axis k is twice the signed area in the
   * (k+1, k+2) plane, so that order (or its swap) runs counter-clockwise */
  int ax = (k + 1) % 3, ay = (k + 2) % 3;
  if (nrm[k] < 0) {
    int s = ax;
    ax = ay;
    ay = s;
  }
  double x[TS_MESH_MAX_POLYGON], y[TS_MESH_MAX_POLYGON];
  int prev[TS_MESH_MAX_POLYGON], next[TS_MESH_MAX_POLYGON];
  for (uint32_t i = 0; i < n; i++) {
    x[i] = v[poly[i]][ax] - o[ax];
    y[i] = v[poly[i]][ay] - o[ay];
    prev[i] = (int)((i + n - 1) % n);
    next[i] = (int)((i + 1) % n);
  }
  uint32_t left = n, nt = 0;
  int64_t budget = 4 * (int64_t)n * n;
  int c = 0;
  while (left > 3) {
    int ear = -1, best = c;
    double best_o = -INFINITY;
    int s = c;
    for (uint32_t step = 0; step < left; step++, s = next[s]) {
      int a = prev[s], b = next[s];
      double w = orient(x, y, a, s, b);
      if (w > best_o) best_o = w, best = s;
      if (!(w > 0)) continue; /* reflex or flat corner */
      int inside = 0;
      for (int q = next[b]; q != a && budget > 0; q = next[q], budget--) {
        if (poly[q] == poly[a] || poly[q] == poly[s] || poly[q] == poly[b]) continue;
        if (orient(x, y, a, s, q) >= 0 && orient(x, y, s, b, q) >= 0 &&
            orient(x, y, b, a, q) >= 0) {
          inside = 1;
          break;
        }
      }
      if (!inside) {
        ear = s;
        break;
      }
    }
    if (ear < 0) ear = best;
    out[nt][0] = poly[prev[ear]], out[nt][1] = poly[ear], out[nt][2] = poly[next[ear]];
    nt++;
    next[prev[ear]] = next[ear];
    prev[next[ear]] = prev[ear];
    c = next[ear];
    left--;
  }
  out[nt][0] = poly[prev[c]], out[nt][1] = poly[c], out[nt][2] = poly[next[c]];
}
