/*
 * ts_obb_sdf.c: the signed distance of a point from a triangle-mesh tool
 * (TS_SHAPE_MESH, ts_obb_tree.h), which the contact response needs to push
 * tissue vertices out of a mesh tool (ts_contact.h) as it does for the
 * primitives.
 *
 * Distance: the closest point on the mesh, found by a depth-first descent of
 * the tool's OBB tree that visits the nearer child first and prunes every
 * box farther than the best triangle so far (the distance to an oriented box
 * is a lower bound for the distance to any triangle in it); at the leaves,
 * the closest point on a triangle by its Voronoi regions (C. Ericson,
 * "Real-Time Collision Detection", 2005, section 5.1.5), which also tells
 * whether it lies inside the face, on an edge or at a vertex.
 *
 * Sign: the angle-weighted pseudonormal of that feature (J. A. Baerentzen and
 * H. Aanaes, "Signed distance computation using the angle weighted
 * pseudonormal", IEEE TVCG 11(3):243-253, 2005): the face normal for a face,
 * the sum of the two face normals for an edge, and for a vertex the sum of
 * its faces' normals weighted by their angles at it. For a closed, oriented
 * mesh (p - closest) . pseudonormal < 0 exactly when p is inside. An open
 * mesh (e.g. an instrument whose handle end is cut off) has no inside near
 * its rim: a point whose closest feature is a boundary edge or vertex counts
 * as outside, so the rim never pulls tissue in; elsewhere an open mesh bounds
 * the region behind its faces.
 *
 * Bounded (ts_obb_tree_mesh_sdf_within): a caller that only acts on points
 * within a bound of the surface or inside (the mass-spring node projection,
 * ts_ms_contact.c) gets the same descent with every box farther than the
 * bound pruned too, where the tree certifies that no point outside its root
 * box is inside (ts_obb_sdf_cert.c); a far point ends at the root.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_edgehash.h"
#include "ts_error.h"
#include "ts_obb_tree.h"

static double dot(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static void sub(const double a[3], const double b[3], double o[3]) {
  for (int k = 0; k < 3; k++) o[k] = a[k] - b[k];
}
static void cross(const double a[3], const double b[3], double o[3]) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}
static void normalize(double a[3]) {
  double l = sqrt(dot(a, a));
  if (l > 0)
    for (int k = 0; k < 3; k++) a[k] /= l;
}

void ts__obb_sdf_certify(ts_obb_tree *t, const uint8_t *vbound, const uint32_t (*rim)[2],
                         uint32_t n_rim); /* ts_obb_sdf_cert.c */
int ts__obb_beyond_open_plane(const ts_obb_tree *t, const double p[3]);

int ts__obb_mesh_pseudonormals(ts_obb_tree *t) {
  const uint32_t nt = t->n_tris, nv = t->n_verts;
  t->fnorm = malloc(sizeof *t->fnorm * nt);
  t->enorm = calloc(nt, sizeof *t->enorm);
  t->vnorm = calloc(nv, sizeof *t->vnorm);
  uint8_t *vbound = calloc(nv, 1);
  uint32_t(*rim)[2] = malloc(sizeof *rim * (nt ? 3 * nt : 1)); /* rim edges, as their faces run them */
  uint32_t n_rim = 0;
  int nonmanifold = 0, misoriented = 0;
  ts_edgehash h;
  memset(&h, 0, sizeof h);
  int rc = (!t->fnorm || !t->enorm || !t->vnorm || !vbound || !rim) ? TS_ENOMEM
                                                              : ts_edgehash_init(&h, 3 * nt / 2 + 8);
  /* face normals; angle-weighted vertex sums; the edges' triangles */
  for (uint32_t f = 0; f < nt && !rc; f++) {
    const uint32_t *tri = t->t[f];
    double e1[3], e2[3];
    sub(t->v[tri[1]], t->v[tri[0]], e1);
    sub(t->v[tri[2]], t->v[tri[0]], e2);
    cross(e1, e2, t->fnorm[f]);
    normalize(t->fnorm[f]);
    for (int c = 0; c < 3; c++) {
      double u[3], w[3];
      sub(t->v[tri[(c + 1) % 3]], t->v[tri[c]], u);
      sub(t->v[tri[(c + 2) % 3]], t->v[tri[c]], w);
      normalize(u);
      normalize(w);
      double cs = dot(u, w);
      double ang = acos(cs < -1 ? -1 : cs > 1 ? 1 : cs);
      for (int k = 0; k < 3; k++) t->vnorm[tri[c]][k] += ang * t->fnorm[f][k];
      int r = ts_edgehash_add(&h, tri[c], tri[(c + 1) % 3], f);
      if (r == TS_EFULL) { /* a non-manifold edge: its ends count as rim vertices */
        vbound[tri[c]] = vbound[tri[(c + 1) % 3]] = 1;
        nonmanifold = 1;
      } else if (r) {
        rc = r;
        break;
      }
    }
  }
  /* edge pseudonormals: the sum of both faces' normals; rim edges (one
   * face) keep zero, and so do their vertices */
  for (uint32_t f = 0; f < nt && !rc; f++) {
    const uint32_t *tri = t->t[f];
    for (int c = 0; c < 3; c++) {
      uint32_t a = tri[c], b = tri[(c + 1) % 3];
      ts_edgehash_slot *s = ts_edgehash_get(&h, a, b);
      if (!s || s->tri[0] == TS_EDGEHASH_NONE || s->tri[1] == TS_EDGEHASH_NONE) {
        vbound[a] |= 1;
        vbound[b] |= 1;
        rim[n_rim][0] = a;
        rim[n_rim++][1] = b;
        continue;
      }
      uint32_t g = s->tri[0] == f ? s->tri[1] : s->tri[0];
      int back = 0; /* g runs the edge the other way: b to a */
      for (int k = 0; k < 3; k++) back |= t->t[g][k] == b && t->t[g][(k + 1) % 3] == a;
      misoriented |= !back;
      for (int k = 0; k < 3; k++) t->enorm[f][c][k] = t->fnorm[f][k] + t->fnorm[g][k];
      normalize(t->enorm[f][c]);
    }
  }
  for (uint32_t i = 0; i < nv && !rc; i++) {
    if (vbound[i])
      memset(t->vnorm[i], 0, sizeof t->vnorm[i]);
    else
      normalize(t->vnorm[i]);
  }
  /* the bounded query's certificate: for a manifold, consistently oriented
   * mesh only */
  if (!rc && !nonmanifold && !misoriented) ts__obb_sdf_certify(t, vbound, (const uint32_t(*)[2])rim, n_rim);
  ts_edgehash_destroy(&h);
  free(vbound);
  free(rim);
  return rc;
}

/* Closest point c on triangle (a, b, cc) to p; returns the feature: 0 the
 * face, 1 + k edge k (from corner k to k + 1), 4 + k corner k. */
static int closest_on_triangle(const double p[3], const double a[3], const double b[3],
                               const double c[3], double out[3]) {
  double ab[3], ac[3], ap[3];
  sub(b, a, ab);
  sub(c, a, ac);
  sub(p, a, ap);
  double d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) {
    memcpy(out, a, sizeof(double) * 3);
    return 4;
  }
  double bp[3];
  sub(p, b, bp);
  double d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) {
    memcpy(out, b, sizeof(double) * 3);
    return 5;
  }
  double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    double v = d1 / (d1 - d3);
    for (int k = 0; k < 3; k++) out[k] = a[k] + v * ab[k];
    return 1; /* edge a-b */
  }
  double cp[3];
  sub(p, c, cp);
  double d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) {
    memcpy(out, c, sizeof(double) * 3);
    return 6;
  }
  double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    double w = d2 / (d2 - d6);
    for (int k = 0; k < 3; k++) out[k] = a[k] + w * ac[k];
    return 3; /* edge c-a */
  }
  double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
    double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    for (int k = 0; k < 3; k++) out[k] = b[k] + w * (c[k] - b[k]);
    return 2; /* edge b-c */
  }
  double den = 1.0 / (va + vb + vc);
  double v = vb * den, w = vc * den;
  for (int k = 0; k < 3; k++) out[k] = a[k] + ab[k] * v + ac[k] * w;
  return 0;
}

/* Squared distance from p to an oriented box (0 inside). */
static double box_dist2(const ts_obb *b, const double p[3]) {
  double d[3], s = 0;
  sub(p, b->c, d);
  for (int i = 0; i < 3; i++) {
    double o = fabs(dot(d, b->r[i])) - b->e[i];
    if (o > 0) s += o * o;
  }
  return s;
}

/* The closest triangle to p by the descent above, pruning every box
 * nearer than best2 (as ts_obb_tree_mesh_sdf always did) and, besides,
 * every box farther than lim2 (squared; INFINITY prunes nothing more, and
 * the comparison then never holds, so the full query's arithmetic and
 * order are untouched). A box the full descent visits is visited here too
 * unless lim2 prunes it: the visits keep their order, and the best so far
 * is never nearer than the full descent's at the same point, so the full
 * descent's winner, when no box of its ancestors is farther than lim2, is
 * this one's too (first among equals). */
static void descend(const ts_obb_tree *t, const double p[3], double lim2, double *best2_out,
                    double bc[3], uint32_t *bf_out, int *bfeat_out) {
  double best2 = INFINITY;
  uint32_t bf = 0;
  int bfeat = 0;
  int32_t stack[256];
  int sp = 0;
  stack[sp++] = 0;
  while (sp > 0) {
    const ts_obb_node *nd = &t->nodes[stack[--sp]];
    const double b2 = box_dist2(&nd->box, p);
    if (b2 >= best2 || b2 > lim2) continue;
    if (nd->feature >= 0) {
      uint32_t f = (uint32_t)nd->feature;
      double c[3], d[3];
      int feat = closest_on_triangle(p, t->v[t->t[f][0]], t->v[t->t[f][1]], t->v[t->t[f][2]], c);
      sub(p, c, d);
      double d2 = dot(d, d);
      if (d2 < best2) {
        best2 = d2;
        memcpy(bc, c, sizeof(double) * 3);
        bf = f;
        bfeat = feat;
      }
      continue;
    }
    if (sp + 2 > (int)(sizeof stack / sizeof stack[0])) continue; /* deeper than any built tree */
    const ts_obb_node *c0 = &t->nodes[nd->child[0]], *c1 = &t->nodes[nd->child[1]];
    /* the nearer child on top */
    if (box_dist2(&c0->box, p) <= box_dist2(&c1->box, p)) {
      stack[sp++] = nd->child[1];
      stack[sp++] = nd->child[0];
    } else {
      stack[sp++] = nd->child[0];
      stack[sp++] = nd->child[1];
    }
  }
  *best2_out = best2;
  *bf_out = bf;
  *bfeat_out = bfeat;
}

/* The signed distance and direction from the closest point bc (feature
 * bfeat of triangle bf, squared distance best2). */
static double finish(const ts_obb_tree *t, const double p[3], double best2, const double bc[3],
                     uint32_t bf, int bfeat, double n[3]) {
  const double *pn = bfeat == 0   ? t->fnorm[bf]
                     : bfeat <= 3 ? t->enorm[bf][bfeat - 1]
                                  : t->vnorm[t->t[bf][bfeat - 4]];
  double d[3];
  sub(p, bc, d);
  double dist = sqrt(best2);
  double s = dot(d, pn);
  int rim = !(dot(pn, pn) > 0);
  double nn[3];
  if (!n) n = nn;
  if (dist > 0) {
    for (int k = 0; k < 3; k++) n[k] = d[k] / dist;
  } else {
    memcpy(n, rim ? t->fnorm[bf] : pn, sizeof nn);
  }
  if (!rim && s < 0) { /* inside: out is towards the closest point */
    for (int k = 0; k < 3; k++) n[k] = -n[k];
    return -dist;
  }
  return dist;
}

double ts_obb_tree_mesh_sdf(const ts_obb_tree *t, const double p[3], double n[3]) {
  if (!t || t->kind != TS_SHAPE_MESH || !t->fnorm || !p) return NAN;
  double best2, bc[3] = {0, 0, 0};
  uint32_t bf;
  int bfeat;
  descend(t, p, INFINITY, &best2, bc, &bf, &bfeat);
  if (best2 == INFINITY) return NAN;
  return finish(t, p, best2, bc, bf, bfeat, n);
}

/* Outside the root box (sdf_outside_root, ts_obb_sdf_cert.c; and for an
 * open mesh not beyond its opening) the signed distance is positive,
 * so a point there farther than limit from the surface is farther than
 * limit in signed distance too. The descent prunes at limit grown by
 * TS__WITHIN_MARGIN of (limit + reach): box_dist2 is a lower bound of a
 * triangle's squared distance up to rounding (ulps of the tool's size, ~1e-16
 * reach), far below the margin, so that every ancestor box of a triangle
 * within limit passes, and the winner is the full query's whenever it is
 * within limit. A best beyond limit may not be the full query's winner
 * (one at the margin's edge may have been pruned), but then the full
 * query's is beyond limit too: "farther". */
#define TS__WITHIN_MARGIN 1e-9

double ts_obb_tree_mesh_sdf_within(const ts_obb_tree *t, const double p[3], double limit,
                                   double n[3]) {
  if (!t || t->kind != TS_SHAPE_MESH || !t->fnorm || !p || isnan(limit)) return NAN;
  const double r2 = t->sdf_outside_root ? box_dist2(&t->nodes[0].box, p) : 0.0;
  /* in the root box, or beyond an open mesh's opening (ts_obb_sdf_cert.c):
   * maybe inside */
  if (!(r2 > 0) || ts__obb_beyond_open_plane(t, p)) return ts_obb_tree_mesh_sdf(t, p, n);
  /* positive here: a negative limit is as 0 */
  const double l0 = limit > 0 ? limit : 0.0;
  const double lim = l0 + TS__WITHIN_MARGIN * (l0 + t->reach), lim2 = lim * lim;
  if (r2 > lim2) return INFINITY; /* every triangle is farther */
  double best2, bc[3] = {0, 0, 0};
  uint32_t bf;
  int bfeat;
  descend(t, p, lim2, &best2, bc, &bf, &bfeat);
  if (!(sqrt(best2) <= l0)) return INFINITY; /* as finish rounds the distance */
  return finish(t, p, best2, bc, bf, bfeat, n);
}
