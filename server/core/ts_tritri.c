/*
 * ts_tritri.c: exact narrow phase: closest points (Ericson, "Real-Time
 * Collision Detection", 2005, 5.1.2, 5.1.5, 5.1.9), triangle-triangle
 * intersection by Moller's interval method (J. Graphics Tools 2(2), 1997)
 * with the intersection segment, and the contacts of tool features (face,
 * sphere, capsule, box) with a triangle. See ts_tritri.h.
 *
 * Clipping (coplanar triangles, the part of a triangle over a tool face or
 * inside a box) is Sutherland-Hodgman against planes m.x >= d, keeping points
 * on the plane, so touching features clip to a non-empty polygon.
 */
#include "ts_tritri.h"

#include <math.h>
#include <string.h>

/* relative size under which a distance counts as zero (see ts_tritri.h) */
#define SNAP 1e-12
/* a triangle whose |normal| is at most DEGEN * (longest edge)^2 has no
 * reliable plane: it is handled as a segment */
#define DEGEN 1e-10
/* room for a triangle clipped by up to 6 planes */
#define MAXPOLY 12

/* ---- small vector helpers ---- */

static double dot(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static void sub(const double a[3], const double b[3], double o[3]) {
  o[0] = a[0] - b[0], o[1] = a[1] - b[1], o[2] = a[2] - b[2];
}
static void cross(const double a[3], const double b[3], double o[3]) {
  double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2],
         z = a[0] * b[1] - a[1] * b[0];
  o[0] = x, o[1] = y, o[2] = z;
}
static void copy(const double a[3], double o[3]) { o[0] = a[0], o[1] = a[1], o[2] = a[2]; }
static void lerp(const double a[3], const double b[3], double s, double o[3]) {
  for (int k = 0; k < 3; k++) o[k] = a[k] + s * (b[k] - a[k]);
}
static double dist(const double a[3], const double b[3]) {
  double d[3];
  sub(a, b, d);
  return sqrt(dot(d, d));
}
static double len(const double a[3]) { return sqrt(dot(a, a)); }

/* Longest edge length of t, and the normal (b-a)x(c-a). */
static double tri_frame(const double t[3][3], double n[3]) {
  double e0[3], e1[3], e2[3];
  sub(t[1], t[0], e0);
  sub(t[2], t[0], e1);
  sub(t[2], t[1], e2);
  cross(e0, e1, n);
  double l = fmax(dot(e0, e0), fmax(dot(e1, e1), dot(e2, e2)));
  return sqrt(l);
}

static int degenerate(const double n[3], double L) { return !(len(n) > DEGEN * L * L); }

/* The longest edge of a degenerate triangle (its whole extent). */
static void longest_edge(const double t[3][3], double a[3], double b[3]) {
  int best = 0;
  double bl = -1;
  for (int i = 0; i < 3; i++) {
    double l = dist(t[i], t[(i + 1) % 3]);
    if (l > bl) bl = l, best = i;
  }
  copy(t[best], a);
  copy(t[(best + 1) % 3], b);
}

/* Clips polygon in[0..n) to m.x >= d; returns the new count (<= n + 1). */
static int clip(const double (*in)[3], int n, const double m[3], double d, double (*out)[3]) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    const double *p = in[i], *q = in[(i + 1) % n];
    double dp = dot(m, p) - d, dq = dot(m, q) - d;
    if (dp >= 0) copy(p, out[k++]);
    if ((dp > 0 && dq < 0) || (dp < 0 && dq > 0)) lerp(p, q, dp / (dp - dq), out[k++]);
  }
  return k;
}

/* Clips triangle t to the prism over triangle f (its three edge planes,
 * normals pointing inwards for counter-clockwise f about nf). */
static int clip_to_prism(const double t[3][3], const double f[3][3], const double nf[3],
                         double (*poly)[3]) {
  double a[MAXPOLY][3], b[MAXPOLY][3];
  memcpy(a, t, sizeof(double[3][3]));
  int n = 3;
  double(*src)[3] = a, (*dst)[3] = b;
  for (int e = 0; e < 3 && n > 0; e++) {
    double edge[3], m[3];
    sub(f[(e + 1) % 3], f[e], edge);
    cross(nf, edge, m);
    n = clip((const double(*)[3])src, n, m, dot(m, f[e]), dst);
    double(*tmp)[3] = src;
    src = dst, dst = tmp;
  }
  memcpy(poly, src, sizeof(double[3]) * (size_t)n);
  return n;
}

/* ---- closest points ---- */

double ts_closest_point_segment(const double p[3], const double a[3], const double b[3],
                                double c[3]) {
  double ab[3], ap[3];
  sub(b, a, ab);
  sub(p, a, ap);
  double l2 = dot(ab, ab), s = 0.0;
  if (l2 > 0) {
    s = dot(ap, ab) / l2;
    s = s < 0 ? 0 : s > 1 ? 1 : s;
  }
  lerp(a, b, s, c);
  return dist(p, c);
}

double ts_closest_point_triangle(const double p[3], const double t[3][3], double c[3]) {
  const double *a = t[0], *b = t[1], *cc = t[2];
  double n[3];
  double L = tri_frame(t, n);
  if (degenerate(n, L)) {
    double best = INFINITY, q[3];
    for (int i = 0; i < 3; i++) {
      double d = ts_closest_point_segment(p, t[i], t[(i + 1) % 3], q);
      if (d < best) best = d, copy(q, c);
    }
    return best;
  }
  /* Voronoi regions of the vertices, edges and face (Ericson 5.1.5) */
  double ab[3], ac[3], ap[3], bp[3], cp[3];
  sub(b, a, ab);
  sub(cc, a, ac);
  sub(p, a, ap);
  double d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) {
    copy(a, c);
    return dist(p, c);
  }
  sub(p, b, bp);
  double d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) {
    copy(b, c);
    return dist(p, c);
  }
  double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    lerp(a, b, d1 / (d1 - d3), c);
    return dist(p, c);
  }
  sub(p, cc, cp);
  double d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) {
    copy(cc, c);
    return dist(p, c);
  }
  double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    lerp(a, cc, d2 / (d2 - d6), c);
    return dist(p, c);
  }
  double va = d3 * d6 - d5 * d4;
  if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
    lerp(b, cc, (d4 - d3) / ((d4 - d3) + (d5 - d6)), c);
    return dist(p, c);
  }
  double den = 1.0 / (va + vb + vc);
  double v = vb * den, w = vc * den;
  for (int k = 0; k < 3; k++) c[k] = a[k] + ab[k] * v + ac[k] * w;
  return dist(p, c);
}

double ts_closest_segment_segment(const double p0[3], const double p1[3], const double q0[3],
                                  const double q1[3], double cp[3], double cq[3]) {
  /* Ericson 5.1.9 */
  double d1[3], d2[3], r[3];
  sub(p1, p0, d1);
  sub(q1, q0, d2);
  sub(p0, q0, r);
  double a = dot(d1, d1), e = dot(d2, d2), f = dot(d2, r);
  double s, t;
  if (a <= 0 && e <= 0) {
    s = t = 0;
  } else if (a <= 0) {
    s = 0;
    t = f / e;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
  } else {
    double c = dot(d1, r);
    if (e <= 0) {
      t = 0;
      s = -c / a;
      s = s < 0 ? 0 : s > 1 ? 1 : s;
    } else {
      double b = dot(d1, d2), den = a * e - b * b;
      s = den > 0 ? (b * f - c * e) / den : 0.0;
      s = s < 0 ? 0 : s > 1 ? 1 : s;
      t = (b * s + f) / e;
      if (t < 0) {
        t = 0;
        s = -c / a;
        s = s < 0 ? 0 : s > 1 ? 1 : s;
      } else if (t > 1) {
        t = 1;
        s = (b - c) / a;
        s = s < 0 ? 0 : s > 1 ? 1 : s;
      }
    }
  }
  lerp(p0, p1, s, cp);
  lerp(q0, q1, t, cq);
  return dist(cp, cq);
}

int ts_segment_triangle_intersect(const double a[3], const double b[3], const double t[3][3],
                                  double x[3]) {
  double n[3];
  double L = tri_frame(t, n);
  double ls = dist(a, b);
  if (degenerate(n, L)) {
    /* the triangle is a segment (or a point): they meet when they touch */
    double e0[3], e1[3], ca[3], cb[3];
    longest_edge(t, e0, e1);
    double d = ts_closest_segment_segment(a, b, e0, e1, ca, cb);
    if (d > SNAP * fmax(L, ls)) return 0;
    for (int k = 0; k < 3; k++) x[k] = 0.5 * (ca[k] + cb[k]);
    return 1;
  }
  double nl = len(n);
  double un[3] = {n[0] / nl, n[1] / nl, n[2] / nl};
  double tol = SNAP * fmax(L, ls);
  double da[3], db[3];
  sub(a, t[0], da);
  sub(b, t[0], db);
  double sa = dot(un, da), sb = dot(un, db);
  if (fabs(sa) <= tol) sa = 0;
  if (fabs(sb) <= tol) sb = 0;
  if ((sa > 0 && sb > 0) || (sa < 0 && sb < 0)) return 0;

  /* the part of the segment in the prism over t: parameter interval */
  double lo = 0, hi = 1;
  if (sa != 0 || sb != 0) {
    /* one crossing point (or an endpoint on the plane) */
    double s = sa == sb ? 0 : sa / (sa - sb);
    lo = hi = s;
  }
  for (int e = 0; e < 3; e++) {
    double edge[3], m[3];
    sub(t[(e + 1) % 3], t[e], edge);
    cross(un, edge, m);
    double ml = len(m);
    double d0 = (dot(m, a) - dot(m, t[e])) / ml, d1 = (dot(m, b) - dot(m, t[e])) / ml;
    /* keep s with d0 + s (d1 - d0) >= -tol */
    double dd = d1 - d0;
    if (dd == 0) {
      if (d0 < -tol) return 0;
    } else {
      double s = (-tol - d0) / dd;
      if (dd > 0)
        lo = fmax(lo, s);
      else
        hi = fmin(hi, s);
    }
    if (lo > hi) return 0;
  }
  lerp(a, b, 0.5 * (lo + hi), x);
  return 1;
}

double ts_closest_segment_triangle(const double a[3], const double b[3], const double t[3][3],
                                   double cs[3], double ct[3]) {
  double x[3];
  if (ts_segment_triangle_intersect(a, b, t, x)) {
    copy(x, cs);
    copy(x, ct);
    return 0.0;
  }
  double best = INFINITY, p[3], q[3];
  for (int i = 0; i < 2; i++) {
    const double *e = i ? b : a;
    double d = ts_closest_point_triangle(e, t, q);
    if (d < best) best = d, copy(e, cs), copy(q, ct);
  }
  for (int i = 0; i < 3; i++) {
    double d = ts_closest_segment_segment(a, b, t[i], t[(i + 1) % 3], p, q);
    if (d < best) best = d, copy(p, cs), copy(q, ct);
  }
  return best;
}

/* ---- triangle-triangle ---- */

/* Where triangle p (signed distances d to the other plane, snapped) cuts
 * that plane: up to two points. */
static int plane_cut(const double p[3][3], const double d[3], double pts[4][3]) {
  int k = 0;
  for (int i = 0; i < 3; i++)
    if (d[i] == 0) copy(p[i], pts[k++]);
  for (int i = 0; i < 3; i++) {
    int j = (i + 1) % 3;
    if ((d[i] < 0 && d[j] > 0) || (d[i] > 0 && d[j] < 0))
      lerp(p[i], p[j], d[i] / (d[i] - d[j]), pts[k++]);
  }
  return k;
}

/* Signed distances (scaled by |n|) of p's corners from the plane with normal
 * n through o, snapped to zero when |d| <= tol |n| (tol2n2 = tol^2 |n|^2,
 * no square root); returns 1 when all lie strictly on one side. */
static int plane_side(const double p[3][3], const double n[3], const double o[3], double tol2n2,
                      double d[3]) {
  for (int i = 0; i < 3; i++) {
    double v[3];
    sub(p[i], o, v);
    d[i] = dot(n, v);
    if (d[i] * d[i] <= tol2n2) d[i] = 0;
  }
  return (d[0] > 0 && d[1] > 0 && d[2] > 0) || (d[0] < 0 && d[1] < 0 && d[2] < 0);
}

/* Normal (b-a)x(c-a) and the squared longest edge, without square roots. */
static double tri_frame2(const double t[3][3], double n[3]) {
  double e0[3], e1[3], e2[3];
  sub(t[1], t[0], e0);
  sub(t[2], t[0], e1);
  sub(t[2], t[1], e2);
  cross(e0, e1, n);
  double a = dot(e0, e0), b = dot(e1, e1), c = dot(e2, e2);
  return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* Coplanar triangles: p clipped to the prism over q (normal nq). */
static int coplanar(const double p[3][3], const double q[3][3], const double nq[3], double s0[3],
                    double s1[3]) {
  double poly[MAXPOLY][3];
  int n = clip_to_prism(p, q, nq, poly);
  if (n == 0) return 0;
  double c[3] = {0, 0, 0};
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) c[k] += poly[i][k] / n;
  copy(c, s0);
  copy(c, s1);
  return 2;
}

int ts_tri_tri_intersect(const double p[3][3], const double q[3][3], double s0[3], double s1[3]) {
  double np[3], nq[3], tmp0[3], tmp1[3];
  if (!s0) s0 = tmp0;
  if (!s1) s1 = tmp1;
  double Lp2 = tri_frame2(p, np), Lq2 = tri_frame2(q, nq);
  /* degenerate: |n| <= DEGEN L^2 */
  int dp = !(dot(np, np) > DEGEN * DEGEN * Lp2 * Lp2);
  int dq = !(dot(nq, nq) > DEGEN * DEGEN * Lq2 * Lq2);
  if (dp || dq) {
    double a[3], b[3], x[3];
    double L = sqrt(Lp2 > Lq2 ? Lp2 : Lq2);
    if (dp && dq) {
      double c[3], e0[3], e1[3], ca[3];
      longest_edge(p, a, b);
      longest_edge(q, e0, e1);
      double d = ts_closest_segment_segment(a, b, e0, e1, ca, c);
      if (d > SNAP * L) return 0;
      for (int k = 0; k < 3; k++) x[k] = 0.5 * (ca[k] + c[k]);
    } else {
      longest_edge(dp ? p : q, a, b);
      if (!ts_segment_triangle_intersect(a, b, dp ? q : p, x)) return 0;
    }
    copy(x, s0);
    copy(x, s1);
    return 1;
  }
  /* plane rejections first: most pairs end here, without a square root */
  const double tol2 = SNAP * SNAP * (Lp2 > Lq2 ? Lp2 : Lq2);
  double dP[3], dQ[3];
  if (plane_side(p, nq, q[0], tol2 * dot(nq, nq), dP)) return 0;
  if (dP[0] == 0 && dP[1] == 0 && dP[2] == 0) return coplanar(p, q, nq, s0, s1);
  if (plane_side(q, np, p[0], tol2 * dot(np, np), dQ)) return 0;
  /* q in p's plane although p is not in q's (p much larger than q):
   * coplanar all the same */
  if (dQ[0] == 0 && dQ[1] == 0 && dQ[2] == 0) return coplanar(q, p, np, s0, s1);

  /* both cut the other's plane: two segments on the common line */
  const double tol = sqrt(tol2);
  double cp[4][3], cq[4][3];
  int kp = plane_cut(p, dP, cp), kq = plane_cut(q, dQ, cq);
  if (kp == 0 || kq == 0) return 0;
  double D[3];
  cross(np, nq, D);
  double Dl = len(D);
  if (!(Dl > 0)) {
    /* parallel planes within rounding, yet neither triangle in the other's
     * plane: the cuts are points of p on q's plane; they meet if one of
     * them lies in q */
    for (int i = 0; i < kp; i++) {
      double c[3];
      if (ts_closest_point_triangle(cp[i], q, c) <= tol) {
        copy(cp[i], s0);
        copy(cp[i], s1);
        return 1;
      }
    }
    return 0;
  }
  for (int k = 0; k < 3; k++) D[k] /= Dl;
  /* intervals along D; each end remembers its point */
  int ip0 = 0, ip1 = 0, iq0 = 0, iq1 = 0;
  double tp[4] = {0, 0, 0, 0}, tq[4] = {0, 0, 0, 0}; /* kp, kq >= 1 here */
  for (int i = 0; i < kp; i++) {
    tp[i] = dot(D, cp[i]);
    if (tp[i] < tp[ip0]) ip0 = i;
    if (tp[i] > tp[ip1]) ip1 = i;
  }
  for (int i = 0; i < kq; i++) {
    tq[i] = dot(D, cq[i]);
    if (tq[i] < tq[iq0]) iq0 = i;
    if (tq[i] > tq[iq1]) iq1 = i;
  }
  /* the cut points lie on the common line only within rounding, so compare
   * with the snap tolerance */
  if (tp[ip1] < tq[iq0] - tol || tq[iq1] < tp[ip0] - tol) return 0;
  const double *lo = tp[ip0] >= tq[iq0] ? cp[ip0] : cq[iq0];
  const double *hi = tp[ip1] <= tq[iq1] ? cp[ip1] : cq[iq1];
  if (dot(D, lo) > dot(D, hi)) {
    /* touching within tolerance: one point */
    double m[3];
    for (int k = 0; k < 3; k++) m[k] = 0.5 * (lo[k] + hi[k]);
    copy(m, s0);
    copy(m, s1);
    return 1;
  }
  copy(lo, s0);
  copy(hi, s1);
  return 1;
}

double ts_closest_triangle_triangle(const double p[3][3], const double q[3][3], double cp[3],
                                    double cq[3]) {
  double s0[3], s1[3];
  if (ts_tri_tri_intersect(p, q, s0, s1)) {
    for (int k = 0; k < 3; k++) cp[k] = cq[k] = 0.5 * (s0[k] + s1[k]);
    return 0.0;
  }
  /* disjoint: the closest pair is a vertex-face or an edge-edge pair */
  double best = INFINITY, a[3], b[3];
  for (int i = 0; i < 3; i++) {
    double d = ts_closest_point_triangle(p[i], q, b);
    if (d < best) best = d, copy(p[i], cp), copy(b, cq);
    d = ts_closest_point_triangle(q[i], p, a);
    if (d < best) best = d, copy(a, cp), copy(q[i], cq);
  }
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double d = ts_closest_segment_segment(p[i], p[(i + 1) % 3], q[j], q[(j + 1) % 3], a, b);
      if (d < best) best = d, copy(a, cp), copy(b, cq);
    }
  return best;
}

/* ---- contacts ---- */

/* t's inward unit normal, or -y for a degenerate t. */
static void inward_normal(const double t[3][3], double out[3]) {
  double n[3];
  double L = tri_frame(t, n);
  if (degenerate(n, L)) {
    out[0] = 0, out[1] = -1, out[2] = 0;
    return;
  }
  double l = len(n);
  for (int k = 0; k < 3; k++) out[k] = -n[k] / l;
}

/* 1 when the bounding boxes of a and b are apart by more than slack (a
 * billionth of their summed extents): such triangles cannot touch, since the
 * exact test's tolerance is a thousand times smaller. */
static int boxes_apart(const double a[3][3], const double b[3][3]) {
  double alo[3], ahi[3], blo[3], bhi[3], ext = 0;
  for (int k = 0; k < 3; k++) {
    alo[k] = ahi[k] = a[0][k];
    blo[k] = bhi[k] = b[0][k];
    for (int i = 1; i < 3; i++) {
      if (a[i][k] < alo[k]) alo[k] = a[i][k];
      if (a[i][k] > ahi[k]) ahi[k] = a[i][k];
      if (b[i][k] < blo[k]) blo[k] = b[i][k];
      if (b[i][k] > bhi[k]) bhi[k] = b[i][k];
    }
    ext += (ahi[k] - alo[k]) + (bhi[k] - blo[k]);
  }
  double slack = 1e-9 * ext;
  for (int k = 0; k < 3; k++)
    if (alo[k] > bhi[k] + slack || blo[k] > ahi[k] + slack) return 1;
  return 0;
}

int ts_contact_face_triangle(const double face[3][3], const double t[3][3], ts_hit *hit) {
  if (boxes_apart(face, t)) return 0;
  double s0[3], s1[3];
  int r = ts_tri_tri_intersect(face, t, s0, s1);
  if (!r) return 0;
  double nf[3];
  double L = tri_frame(face, nf);
  if (degenerate(nf, L)) return 0;
  double l = len(nf);
  for (int k = 0; k < 3; k++) nf[k] /= l;
  double poly[MAXPOLY][3];
  int n = clip_to_prism(t, face, nf, poly);
  double depth = 0;
  for (int i = 0; i < n; i++) {
    double v[3];
    sub(poly[i], face[0], v);
    double d = -dot(nf, v);
    if (d > depth) depth = d;
  }
  for (int k = 0; k < 3; k++) {
    hit->point[k] = 0.5 * (s0[k] + s1[k]);
    hit->normal[k] = nf[k];
  }
  hit->depth = depth;
  return 1;
}

int ts_contact_sphere_triangle(const double c[3], double r, const double t[3][3], ts_hit *hit) {
  double q[3];
  double d = ts_closest_point_triangle(c, t, q);
  if (!(d <= r)) return 0;
  copy(q, hit->point);
  if (d > SNAP * r) {
    for (int k = 0; k < 3; k++) hit->normal[k] = (q[k] - c[k]) / d;
    hit->depth = r - d;
  } else {
    inward_normal(t, hit->normal);
    hit->depth = r;
  }
  return 1;
}

int ts_contact_capsule_triangle(const double a[3], const double b[3], double r,
                                const double t[3][3], ts_hit *hit) {
  double cs[3], ct[3];
  double d = ts_closest_segment_triangle(a, b, t, cs, ct);
  if (!(d <= r)) return 0;
  copy(ct, hit->point);
  if (d > SNAP * r) {
    for (int k = 0; k < 3; k++) hit->normal[k] = (ct[k] - cs[k]) / d;
    hit->depth = r - d;
  } else {
    /* the core meets t: push t below the deepest end of the core */
    double n[3];
    inward_normal(t, n);
    double reach = 0;
    for (int i = 0; i < 2; i++) {
      double v[3];
      sub(i ? b : a, t[0], v);
      double h = dot(n, v);
      if (h > reach) reach = h;
    }
    copy(n, hit->normal);
    hit->depth = r + reach;
  }
  return 1;
}

int ts_contact_box_triangle(const ts_obb *box, const double t[3][3], ts_hit *hit) {
  double a[MAXPOLY][3], b[MAXPOLY][3];
  memcpy(a, t, sizeof(double[3][3]));
  int n = 3;
  double(*src)[3] = a, (*dst)[3] = b;
  for (int i = 0; i < 3 && n > 0; i++) {
    double rc = dot(box->r[i], box->c);
    for (int s = -1; s <= 1 && n > 0; s += 2) {
      /* keep s * r_i . x <= s * r_i . c + e_i, i.e. m.x >= d with m = -s r_i */
      double m[3] = {-s * box->r[i][0], -s * box->r[i][1], -s * box->r[i][2]};
      n = clip((const double(*)[3])src, n, m, -(s * rc + box->e[i]), dst);
      double(*tmp)[3] = src;
      src = dst, dst = tmp;
    }
  }
  if (n == 0) return 0;
  /* the face needing the shortest push-out */
  double best = INFINITY;
  int bi = 0, bs = 1;
  for (int i = 0; i < 3; i++) {
    for (int s = -1; s <= 1; s += 2) {
      double push = -INFINITY;
      for (int v = 0; v < n; v++) {
        double w[3];
        sub(src[v], box->c, w);
        double h = box->e[i] - s * dot(box->r[i], w);
        if (h > push) push = h;
      }
      if (push < best) best = push, bi = i, bs = s;
    }
  }
  /* the point: the mean of the corners as deep as the deepest (within 1e-9
   * of the box's size), so that corners equally deep up to rounding (an
   * edge parallel to the face) give one answer */
  double tol = 1e-9 * (box->e[0] + box->e[1] + box->e[2]), sum[3] = {0, 0, 0};
  int cnt = 0;
  for (int v = 0; v < n; v++) {
    double w[3];
    sub(src[v], box->c, w);
    double h = box->e[bi] - bs * dot(box->r[bi], w);
    if (h >= best - tol) {
      for (int k = 0; k < 3; k++) sum[k] += src[v][k];
      cnt++;
    }
  }
  for (int k = 0; k < 3; k++) {
    hit->normal[k] = bs * box->r[bi][k];
    hit->point[k] = sum[k] / cnt;
  }
  hit->depth = best > 0 ? best : 0;
  return 1;
}
