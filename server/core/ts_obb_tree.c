/*
 * ts_obb_tree.c: OBB trees for rigid tools (Gottschalk, Lin, Manocha 1996,
 * "OBBTree", SIGGRAPH: boxes fitted to the covariance of their triangles,
 * built top-down), the primitive tools (sphere, capsule, grasper jaws), and
 * placing a tree at a pose. See ts_obb_tree.h.
 *
 * Covariance of a set of triangles taken as uniform area distributions
 * (Gottschalk et al. section 3.1): with A_i the area, m_i the centroid and
 * p_i, q_i, r_i the corners of triangle i, A = sum A_i and mu = sum A_i m_i / A,
 *   C = 1/A sum A_i/12 (9 m_i m_i^T + p_i p_i^T + q_i q_i^T + r_i r_i^T) - mu mu^T.
 * Its eigenvectors (cyclic Jacobi rotations) are the box axes; the box spans
 * the corners' projections. Computed about the centroids' mean so that a
 * tool far from its frame's origin loses no digits.
 */
#include "ts_obb_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

/* beyond this depth the split is by count (median), bounding the depth */
#define MEDIAN_DEPTH 48

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
static void normalize(double a[3]) {
  double l = sqrt(dot(a, a));
  if (l > 0) a[0] /= l, a[1] /= l, a[2] /= l;
}
static void rotate(const double R[3][3], const double a[3], double o[3]) {
  double x = dot(R[0], a), y = dot(R[1], a), z = dot(R[2], a);
  o[0] = x, o[1] = y, o[2] = z;
}

ts_tool_shape_def ts_default_tool_shape_def(void) {
  ts_tool_shape_def d = {
      .kind = TS_SHAPE_SPHERE,
      .radius = 5e-3,
      .length = 20e-3,
      .jaw_width = 4e-3,
      .jaw_thickness = 1.5e-3,
      .jaw_max_angle = M_PI / 3,
      .mesh = NULL,
      .mesh_scale = 1.0,
      .thin_pass = 1,
      .thin_sweep = 1,
  };
  return d;
}

/* ---- eigenvectors of a symmetric 3x3 matrix ---- */

/* Cyclic Jacobi: A becomes diagonal (the eigenvalues), the columns of V the
 * eigenvectors. */
static void jacobi3(double A[3][3], double V[3][3]) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) V[i][j] = i == j;
  for (int sweep = 0; sweep < 64; sweep++) {
    double off = A[0][1] * A[0][1] + A[0][2] * A[0][2] + A[1][2] * A[1][2];
    double diag = A[0][0] * A[0][0] + A[1][1] * A[1][1] + A[2][2] * A[2][2];
    if (!(off > 1e-32 * diag)) break;
    for (int p = 0; p < 2; p++)
      for (int q = p + 1; q < 3; q++) {
        if (A[p][q] == 0) continue;
        double theta = (A[q][q] - A[p][p]) / (2.0 * A[p][q]);
        double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
        double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
        double J[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
        J[p][p] = c, J[q][q] = c, J[p][q] = s, J[q][p] = -s;
        double T[3][3], N[3][3];
        for (int i = 0; i < 3; i++) /* T = A J */
          for (int j = 0; j < 3; j++)
            T[i][j] = A[i][0] * J[0][j] + A[i][1] * J[1][j] + A[i][2] * J[2][j];
        for (int i = 0; i < 3; i++) /* A = J^T T */
          for (int j = 0; j < 3; j++)
            N[i][j] = J[0][i] * T[0][j] + J[1][i] * T[1][j] + J[2][i] * T[2][j];
        memcpy(A, N, sizeof N);
        A[p][q] = A[q][p] = 0;
        for (int i = 0; i < 3; i++) /* V = V J */
          for (int j = 0; j < 3; j++)
            N[i][j] = V[i][0] * J[0][j] + V[i][1] * J[1][j] + V[i][2] * J[2][j];
        memcpy(V, N, sizeof N);
      }
  }
}

/* Orthonormal right-handed rows from the eigenvector columns of V. */
static void axes_from(const double V[3][3], double r[3][3]) {
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) r[i][k] = V[k][i];
  normalize(r[0]);
  double d = dot(r[1], r[0]);
  for (int k = 0; k < 3; k++) r[1][k] -= d * r[0][k];
  normalize(r[1]);
  cross(r[0], r[1], r[2]);
  normalize(r[2]);
}

/* ---- mesh build ---- */

typedef struct builder {
  ts_obb_tree *t;
  uint32_t *perm;    /* triangle order */
  double (*cent)[3]; /* centroids */
  double *area;
  double *key; /* per triangle: split key */
  int32_t next;
} builder;

static void fit_box(builder *b, const uint32_t *idx, uint32_t n, ts_obb *box) {
  const ts_obb_tree *t = b->t;
  double o[3] = {0, 0, 0};
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) o[k] += b->cent[idx[i]][k] / n;
  double A = 0, mu[3] = {0, 0, 0}, S[3][3] = {{0}};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t f = idx[i];
    double a = b->area[f], m[3], P[3][3];
    sub(b->cent[f], o, m);
    for (int c = 0; c < 3; c++) sub(t->v[t->t[f][c]], o, P[c]);
    A += a;
    for (int j = 0; j < 3; j++) {
      mu[j] += a * m[j];
      for (int k = 0; k < 3; k++)
        S[j][k] += a / 12.0 *
                   (9.0 * m[j] * m[k] + P[0][j] * P[0][k] + P[1][j] * P[1][k] + P[2][j] * P[2][k]);
    }
  }
  double C[3][3];
  if (A > 0) {
    for (int j = 0; j < 3; j++) mu[j] /= A;
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) C[j][k] = S[j][k] / A - mu[j] * mu[k];
  } else {
    /* no area at all: the covariance of the corners */
    double cnt = 3.0 * n;
    memset(mu, 0, sizeof mu);
    memset(C, 0, sizeof C);
    for (uint32_t i = 0; i < n; i++)
      for (int c = 0; c < 3; c++) {
        double P[3];
        sub(t->v[t->t[idx[i]][c]], o, P);
        for (int j = 0; j < 3; j++) {
          mu[j] += P[j] / cnt;
          for (int k = 0; k < 3; k++) C[j][k] += P[j] * P[k] / cnt;
        }
      }
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) C[j][k] -= mu[j] * mu[k];
  }
  double V[3][3];
  jacobi3(C, V);
  axes_from(V, box->r);
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      double P[3];
      sub(t->v[t->t[idx[i]][c]], o, P);
      for (int a = 0; a < 3; a++) {
        double s = dot(box->r[a], P);
        lo[a] = fmin(lo[a], s), hi[a] = fmax(hi[a], s);
      }
    }
  for (int k = 0; k < 3; k++) box->c[k] = o[k];
  for (int a = 0; a < 3; a++) {
    box->e[a] = 0.5 * (hi[a] - lo[a]);
    double mid = 0.5 * (hi[a] + lo[a]);
    for (int k = 0; k < 3; k++) box->c[k] += mid * box->r[a][k];
  }
}

/* Quickselect on (key, index): v[k] in place, smaller before it. */
static int kless(const double *key, uint32_t a, uint32_t b) {
  return key[a] < key[b] || (key[a] == key[b] && a < b);
}
static void select_kth(const double *key, uint32_t *v, uint32_t n, uint32_t k) {
  uint32_t lo = 0, hi = n - 1;
  while (hi > lo) {
    uint32_t mid = lo + (hi - lo) / 2, s;
    if (kless(key, v[mid], v[lo])) s = v[mid], v[mid] = v[lo], v[lo] = s;
    if (kless(key, v[hi], v[lo])) s = v[hi], v[hi] = v[lo], v[lo] = s;
    if (kless(key, v[mid], v[hi])) s = v[mid], v[mid] = v[hi], v[hi] = s;
    uint32_t pivot = v[hi], store = lo;
    for (uint32_t i = lo; i < hi; i++)
      if (kless(key, v[i], pivot)) s = v[i], v[i] = v[store], v[store] = s, store++;
    s = v[store], v[store] = v[hi], v[hi] = s;
    if (store == k) return;
    if (store < k)
      lo = store + 1;
    else
      hi = store - 1;
  }
}

/* Splits idx[0..n) in place; returns the size of the first part (1..n-1). */
static uint32_t split(builder *b, uint32_t *idx, uint32_t n, const ts_obb *box, uint32_t depth) {
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++) /* axes by extent, longest first */
    for (int j = i + 1; j < 3; j++)
      if (box->e[order[j]] > box->e[order[i]]) {
        int s = order[i];
        order[i] = order[j], order[j] = s;
      }
  if (depth < MEDIAN_DEPTH) {
    for (int ai = 0; ai < 3; ai++) {
      const double *ax = box->r[order[ai]];
      double mean = 0;
      for (uint32_t i = 0; i < n; i++) mean += dot(ax, b->cent[idx[i]]) / n;
      uint32_t left = 0;
      for (uint32_t i = 0; i < n; i++) {
        if (dot(ax, b->cent[idx[i]]) < mean) {
          uint32_t s = idx[i];
          idx[i] = idx[left], idx[left] = s;
          left++;
        }
      }
      if (left > 0 && left < n) return left;
    }
  }
  const double *ax = box->r[order[0]];
  for (uint32_t i = 0; i < n; i++) b->key[idx[i]] = dot(ax, b->cent[idx[i]]);
  uint32_t half = n / 2;
  select_kth(b->key, idx, n, half);
  return half;
}

static int32_t build(builder *b, uint32_t *idx, uint32_t n, uint32_t depth) {
  ts_obb_tree *t = b->t;
  int32_t me = b->next++;
  ts_obb_node *nd = &t->nodes[me];
  if (depth > t->depth) t->depth = depth;
  fit_box(b, idx, n, &nd->box);
  nd->count = n;
  if (n == 1) {
    nd->child[0] = nd->child[1] = -1;
    nd->feature = (int32_t)idx[0];
    return me;
  }
  nd->feature = -1;
  ts_obb box = nd->box;
  uint32_t left = split(b, idx, n, &box, depth);
  int32_t c0 = build(b, idx, left, depth + 1);
  int32_t c1 = build(b, idx + left, n - left, depth + 1);
  t->nodes[me].child[0] = c0;
  t->nodes[me].child[1] = c1;
  return me;
}

/* ---- thickness of a mesh: inward rays ---- */

/* Ray o + s d (s > smin) against triangle f: the hit's s or INFINITY
 * (Moller & Trumbore 1997). */
static double ray_tri(const ts_obb_tree *t, uint32_t f, const double o[3], const double d[3],
                      double smin) {
  const double *a = t->v[t->t[f][0]], *b = t->v[t->t[f][1]], *c = t->v[t->t[f][2]];
  double e1[3], e2[3], p[3], q[3], s[3];
  sub(b, a, e1);
  sub(c, a, e2);
  cross(d, e2, p);
  double det = dot(e1, p);
  if (det == 0) return INFINITY;
  double inv = 1.0 / det;
  sub(o, a, s);
  double u = dot(s, p) * inv;
  if (u < 0 || u > 1) return INFINITY;
  cross(s, e1, q);
  double v = dot(d, q) * inv;
  if (v < 0 || u + v > 1) return INFINITY;
  double h = dot(e2, q) * inv;
  return h > smin ? h : INFINITY;
}

/* Entry parameter of the ray into a box, INFINITY when it misses before smax. */
static double ray_box(const ts_obb *bx, const double o[3], const double d[3], double smax) {
  double lo = 0, hi = smax, w[3];
  sub(o, bx->c, w);
  for (int a = 0; a < 3; a++) {
    double os = dot(w, bx->r[a]), ds = dot(d, bx->r[a]);
    double e = bx->e[a] * (1 + 1e-12) + 1e-15;
    if (ds == 0) {
      if (fabs(os) > e) return INFINITY;
      continue;
    }
    double s0 = (-e - os) / ds, s1 = (e - os) / ds;
    if (s0 > s1) {
      double s = s0;
      s0 = s1, s1 = s;
    }
    lo = fmax(lo, s0), hi = fmin(hi, s1);
    if (lo > hi) return INFINITY;
  }
  return lo;
}

static double mesh_thickness(const ts_obb_tree *t) {
  double *vn = calloc((size_t)t->n_verts * 3, sizeof *vn);
  if (!vn) return 0;
  for (uint32_t f = 0; f < t->n_tris; f++) {
    double e1[3], e2[3], n[3];
    sub(t->v[t->t[f][1]], t->v[t->t[f][0]], e1);
    sub(t->v[t->t[f][2]], t->v[t->t[f][0]], e2);
    cross(e1, e2, n);
    for (int c = 0; c < 3; c++)
      for (int k = 0; k < 3; k++) vn[3 * t->t[f][c] + k] += n[k];
  }
  const ts_obb *root = &t->nodes[0].box;
  double size = 2 * fmax(root->e[0], fmax(root->e[1], root->e[2]));
  double smin = 1e-9 * size, best = INFINITY;
  int32_t stack[2 * MEDIAN_DEPTH + 64];
  for (uint32_t i = 0; i < t->n_verts; i++) {
    double d[3] = {-vn[3 * i], -vn[3 * i + 1], -vn[3 * i + 2]};
    if (!(dot(d, d) > 0)) continue;
    normalize(d);
    double hit = INFINITY;
    int sp = 0;
    stack[sp++] = 0;
    while (sp > 0) {
      const ts_obb_node *nd = &t->nodes[stack[--sp]];
      if (ray_box(&nd->box, t->v[i], d, hit) == INFINITY) continue;
      if (nd->feature >= 0) {
        uint32_t f = (uint32_t)nd->feature;
        if (t->t[f][0] == i || t->t[f][1] == i || t->t[f][2] == i) continue;
        double s = ray_tri(t, f, t->v[i], d, smin);
        if (s < hit) hit = s;
      } else if (sp + 2 <= (int)(sizeof stack / sizeof stack[0])) {
        stack[sp++] = nd->child[0];
        stack[sp++] = nd->child[1];
      }
    }
    if (hit < best) best = hit;
  }
  free(vn);
  return best == INFINITY ? 0 : best;
}

/* ---- primitives ---- */

/* The jaw boxes and their root for an opening angle theta (rad) between the
 * jaws, in the tool frame: out[0] root, out[1] jaw 0, out[2] jaw 1. */
static void jaw_boxes(const ts_obb_tree *t, double theta, ts_obb out[3]) {
  const double L = t->length, w = t->jaw_width, th = t->jaw_thickness;
  for (int j = 0; j < 2; j++) {
    double s = j == 0 ? 1.0 : -1.0, phi = s * theta / 2, cs = cos(phi), sn = sin(phi);
    ts_obb *b = &out[1 + j];
    double r0[3] = {cs, sn, 0}, r1[3] = {-sn, cs, 0}, r2[3] = {0, 0, 1};
    memcpy(b->r[0], r0, sizeof r0);
    memcpy(b->r[1], r1, sizeof r1);
    memcpy(b->r[2], r2, sizeof r2);
    b->e[0] = th / 2, b->e[1] = L / 2, b->e[2] = w / 2;
    /* hinge + (L/2) down the jaw + (th/2) outwards across it */
    double down[3] = {sn, -cs, 0};
    for (int k = 0; k < 3; k++) b->c[k] = (k == 1 ? L : 0) + L / 2 * down[k] + s * th / 2 * r0[k];
  }
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (int j = 1; j <= 2; j++) {
    double c[8][3];
    ts_obb_corners(&out[j], c);
    for (int n = 0; n < 8; n++)
      for (int k = 0; k < 3; k++) lo[k] = fmin(lo[k], c[n][k]), hi[k] = fmax(hi[k], c[n][k]);
  }
  memset(&out[0], 0, sizeof out[0]);
  for (int k = 0; k < 3; k++) {
    out[0].r[k][k] = 1;
    out[0].c[k] = 0.5 * (lo[k] + hi[k]);
    out[0].e[k] = 0.5 * (hi[k] - lo[k]);
  }
}

static void set_axes_identity(ts_obb *b) {
  memset(b->r, 0, sizeof b->r);
  for (int k = 0; k < 3; k++) b->r[k][k] = 1;
}

/* ---- create / destroy ---- */

void ts_obb_tree_destroy(ts_obb_tree *t) {
  if (!t) return;
  free(t->nodes);
  free(t->v);
  free(t->t);
  free(t->fnorm);
  free(t->enorm);
  free(t->vnorm);
  free(t);
}

int ts__obb_mesh_pseudonormals(ts_obb_tree *t); /* ts_obb_sdf.c */

static int finite_pos(double x) { return isfinite(x) && x > 0; }

int ts_obb_tree_create(const ts_tool_shape_def *def, ts_obb_tree **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!def) return TS_EINVAL;
  ts_obb_tree *t = calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->kind = def->kind;
  t->thin_pass = def->thin_pass != 0;
  t->thin_sweep = def->thin_sweep != 0;
  int rc = 0;
  switch (def->kind) {
  case TS_SHAPE_SPHERE:
  case TS_SHAPE_CAPSULE: {
    if (isnan(def->radius) || (def->kind == TS_SHAPE_CAPSULE && isnan(def->length))) {
      rc = TS_ENAN;
      break;
    }
    if (!finite_pos(def->radius) ||
        (def->kind == TS_SHAPE_CAPSULE && !(def->length >= 0 && isfinite(def->length)))) {
      rc = TS_EINVAL;
      break;
    }
    t->radius = def->radius;
    t->length = def->kind == TS_SHAPE_CAPSULE ? def->length : 0;
    t->n_nodes = 1;
    t->nodes = calloc(1, sizeof *t->nodes);
    if (!t->nodes) {
      rc = TS_ENOMEM;
      break;
    }
    ts_obb_node *nd = &t->nodes[0];
    set_axes_identity(&nd->box);
    nd->box.c[1] = t->length / 2;
    nd->box.e[0] = nd->box.e[2] = t->radius;
    nd->box.e[1] = t->length / 2 + t->radius;
    nd->child[0] = nd->child[1] = -1;
    nd->feature = 0;
    nd->count = 1;
    t->depth = 1;
    t->thickness = 2 * t->radius;
    t->reach = t->length + t->radius;
    break;
  }
  case TS_SHAPE_JAWS: {
    if (isnan(def->length) || isnan(def->jaw_width) || isnan(def->jaw_thickness) ||
        isnan(def->jaw_max_angle)) {
      rc = TS_ENAN;
      break;
    }
    if (!finite_pos(def->length) || !finite_pos(def->jaw_width) ||
        !finite_pos(def->jaw_thickness) || !finite_pos(def->jaw_max_angle) ||
        !(def->jaw_max_angle < M_PI)) {
      rc = TS_EINVAL;
      break;
    }
    t->length = def->length;
    t->jaw_width = def->jaw_width;
    t->jaw_thickness = def->jaw_thickness;
    t->jaw_max_angle = def->jaw_max_angle;
    t->n_nodes = 3;
    t->nodes = calloc(3, sizeof *t->nodes);
    if (!t->nodes) {
      rc = TS_ENOMEM;
      break;
    }
    ts_obb boxes[3];
    jaw_boxes(t, 0, boxes);
    for (int i = 0; i < 3; i++) t->nodes[i].box = boxes[i];
    t->nodes[0].child[0] = 1, t->nodes[0].child[1] = 2, t->nodes[0].feature = -1;
    t->nodes[0].count = 2;
    for (int i = 1; i < 3; i++) {
      t->nodes[i].child[0] = t->nodes[i].child[1] = -1;
      t->nodes[i].feature = i - 1;
      t->nodes[i].count = 1;
    }
    t->depth = 2;
    t->thickness = t->jaw_thickness;
    /* hinge distance plus the farthest corner from the hinge */
    t->reach = t->length + sqrt(t->length * t->length + t->jaw_thickness * t->jaw_thickness +
                                t->jaw_width * t->jaw_width / 4);
    break;
  }
  case TS_SHAPE_MESH: {
    const ts_mesh *m = def->mesh;
    double scale = def->mesh_scale == 0 ? 1.0 : def->mesh_scale;
    if (isnan(scale)) {
      rc = TS_ENAN;
      break;
    }
    if (!m || !m->v || !m->t || m->n_tris == 0 || m->n_verts == 0 || !finite_pos(scale) ||
        m->n_tris > (1u << 30)) {
      rc = TS_EINVAL;
      break;
    }
    for (uint32_t f = 0; f < m->n_tris && !rc; f++)
      for (int c = 0; c < 3; c++)
        if (m->t[f][c] >= m->n_verts) rc = TS_EINVAL;
    for (uint32_t i = 0; i < m->n_verts && !rc; i++)
      for (int k = 0; k < 3; k++)
        if (!isfinite(m->v[i][k] * scale)) rc = TS_ENAN;
    if (rc) break;
    t->n_verts = m->n_verts;
    t->n_tris = m->n_tris;
    t->n_nodes = 2 * m->n_tris - 1;
    t->v = malloc(sizeof *t->v * m->n_verts);
    t->t = malloc(sizeof *t->t * m->n_tris);
    t->nodes = calloc(t->n_nodes, sizeof *t->nodes);
    builder b = {.t = t, .next = 0};
    b.perm = calloc(m->n_tris, sizeof *b.perm);
    b.cent = calloc(m->n_tris, sizeof *b.cent);
    b.area = calloc(m->n_tris, sizeof *b.area);
    b.key = calloc(m->n_tris, sizeof *b.key);
    if (t->v && t->t && t->nodes && b.perm && b.cent && b.area && b.key) {
      for (uint32_t i = 0; i < m->n_verts; i++)
        for (int k = 0; k < 3; k++) t->v[i][k] = m->v[i][k] * scale;
      memcpy(t->t, m->t, sizeof *t->t * m->n_tris);
      for (uint32_t f = 0; f < m->n_tris; f++) {
        const double *p = t->v[t->t[f][0]], *q = t->v[t->t[f][1]], *r = t->v[t->t[f][2]];
        double e1[3], e2[3], n[3];
        sub(q, p, e1);
        sub(r, p, e2);
        cross(e1, e2, n);
        b.area[f] = 0.5 * sqrt(dot(n, n));
        for (int k = 0; k < 3; k++) b.cent[f][k] = (p[k] + q[k] + r[k]) / 3.0;
        b.perm[f] = f;
      }
      build(&b, b.perm, m->n_tris, 1);
      double reach = 0;
      for (uint32_t i = 0; i < m->n_verts; i++) reach = fmax(reach, sqrt(dot(t->v[i], t->v[i])));
      t->reach = reach;
      t->thickness = mesh_thickness(t);
      rc = ts__obb_mesh_pseudonormals(t);
    } else {
      rc = TS_ENOMEM;
    }
    free(b.perm);
    free(b.cent);
    free(b.area);
    free(b.key);
    break;
  }
  default:
    rc = TS_EINVAL;
  }
  if (rc) {
    ts_obb_tree_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}

/* ---- validation ---- */

static int vfail(char *err, size_t cap, const char *what, long a, long b) {
  if (err && cap) snprintf(err, cap, "%s (%ld, %ld)", what, a, b);
  return TS_EINTERNAL;
}

int ts_obb_tree_validate(const ts_obb_tree *t, double tol, char *err, size_t errcap) {
  if (!t || !t->nodes || t->n_nodes == 0) return vfail(err, errcap, "no tree", 0, 0);
  uint32_t features = t->kind == TS_SHAPE_MESH ? t->n_tris : t->kind == TS_SHAPE_JAWS ? 2 : 1;
  if (t->n_nodes != 2 * features - 1) return vfail(err, errcap, "node count", t->n_nodes, features);
  if (t->nodes[0].count != features)
    return vfail(err, errcap, "root count", t->nodes[0].count, features);
  uint8_t *seen = calloc(features, 1);
  if (!seen) return TS_ENOMEM;
  int rc = 0;
  for (uint32_t i = 0; i < t->n_nodes && !rc; i++) {
    const ts_obb_node *nd = &t->nodes[i];
    const ts_obb *b = &nd->box;
    for (int a = 0; a < 3 && !rc; a++) {
      if (!(b->e[a] >= 0)) rc = vfail(err, errcap, "negative extent", i, a);
      for (int c = 0; c < 3; c++)
        if (!(fabs(dot(b->r[a], b->r[c]) - (a == c)) <= 1e-9))
          rc = vfail(err, errcap, "axes not orthonormal", i, a);
    }
    double x[3];
    cross(b->r[0], b->r[1], x);
    if (!rc && !(dot(x, b->r[2]) > 0)) rc = vfail(err, errcap, "axes left-handed", i, 0);
    /* the subtree of i is the index range [i, i + 2 count - 1) */
    uint32_t end = i + 2 * nd->count - 1;
    if (!rc && (nd->count == 0 || end > t->n_nodes))
      rc = vfail(err, errcap, "bad count", i, nd->count);
    if (rc) break;
    if (nd->feature >= 0) {
      if (nd->count != 1 || nd->child[0] != -1 || nd->child[1] != -1)
        rc = vfail(err, errcap, "leaf shape", i, nd->feature);
      else if ((uint32_t)nd->feature >= features || seen[nd->feature]++)
        rc = vfail(err, errcap, "feature repeated or out of range", i, nd->feature);
    } else {
      int32_t c0 = nd->child[0], c1 = nd->child[1];
      if (c0 != (int32_t)i + 1 || c1 <= c0 || (uint32_t)c1 >= t->n_nodes ||
          t->nodes[c0].count + t->nodes[c1].count != nd->count ||
          (uint32_t)c1 != i + 2 * t->nodes[c0].count)
        rc = vfail(err, errcap, "bad children", i, c0);
    }
    if (rc || t->kind != TS_SHAPE_MESH) continue;
    for (uint32_t j = i; j < end && !rc; j++) {
      if (t->nodes[j].feature < 0) continue;
      const uint32_t *tri = t->t[t->nodes[j].feature];
      for (int c = 0; c < 3; c++)
        if (!ts_obb_contains(b, t->v[tri[c]], tol)) {
          rc = vfail(err, errcap, "triangle corner outside a box above it", i, t->nodes[j].feature);
          break;
        }
    }
  }
  for (uint32_t f = 0; f < features && !rc; f++)
    if (!seen[f]) rc = vfail(err, errcap, "feature without a leaf", f, 0);
  free(seen);
  return rc;
}

/* ---- poses ---- */

void ts_quat_to_mat(const double q[4], double R[3][3]) {
  double w = q[0], x = q[1], y = q[2], z = q[3];
  R[0][0] = 1 - 2 * (y * y + z * z), R[0][1] = 2 * (x * y - w * z), R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z), R[1][1] = 1 - 2 * (x * x + z * z), R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y), R[2][1] = 2 * (y * z + w * x), R[2][2] = 1 - 2 * (x * x + y * y);
}

void ts_pose_lerp(const ts_pose *a, const ts_pose *b, double s, ts_pose *out) {
  ts_pose r;
  for (int k = 0; k < 3; k++) r.p[k] = a->p[k] + s * (b->p[k] - a->p[k]);
  r.jaw = a->jaw + s * (b->jaw - a->jaw);
  double qb[4], d = 0;
  for (int k = 0; k < 4; k++) d += a->q[k] * b->q[k];
  for (int k = 0; k < 4; k++) qb[k] = d < 0 ? -b->q[k] : b->q[k];
  d = fabs(d);
  double wa, wb;
  if (d > 0.9995) {
    wa = 1 - s, wb = s; /* nearly equal: normalised linear interpolation */
  } else {
    double th = acos(d), st = sin(th);
    wa = sin((1 - s) * th) / st, wb = sin(s * th) / st;
  }
  double n = 0;
  for (int k = 0; k < 4; k++) r.q[k] = wa * a->q[k] + wb * qb[k], n += r.q[k] * r.q[k];
  n = sqrt(n);
  if (n > 0)
    for (int k = 0; k < 4; k++) r.q[k] /= n;
  *out = r;
}

int ts_posed_tool_init(ts_posed_tool *pt, const ts_obb_tree *tree) {
  if (!pt || !tree) return TS_EINVAL;
  memset(pt, 0, sizeof *pt);
  pt->tree = tree;
  pt->world = malloc(sizeof *pt->world * tree->n_nodes);
  pt->stamp = calloc(tree->n_nodes, sizeof *pt->stamp);
  pt->reach = malloc(sizeof *pt->reach * tree->n_nodes);
  uint32_t nv = tree->n_verts ? tree->n_verts : 1;
  pt->wv = malloc(sizeof *pt->wv * nv);
  pt->vstamp = calloc(nv, sizeof *pt->vstamp);
  if (!pt->world || !pt->stamp || !pt->reach || !pt->wv || !pt->vstamp) {
    ts_posed_tool_free(pt);
    return TS_ENOMEM;
  }
  ts_pose id = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}, .jaw = 0};
  return ts_posed_tool_set_pose(pt, &id);
}

void ts_posed_tool_free(ts_posed_tool *pt) {
  if (!pt) return;
  free(pt->world);
  free(pt->stamp);
  free(pt->reach);
  free(pt->wv);
  free(pt->vstamp);
  pt->world = NULL;
  pt->stamp = NULL;
  pt->reach = NULL;
  pt->wv = NULL;
  pt->vstamp = NULL;
}

int ts_posed_tool_set_pose(ts_posed_tool *pt, const ts_pose *pose) {
  if (!pt || !pose || !pt->tree) return TS_EINVAL;
  for (int k = 0; k < 3; k++)
    if (!isfinite(pose->p[k])) return TS_ENAN;
  for (int k = 0; k < 4; k++)
    if (!isfinite(pose->q[k])) return TS_ENAN;
  if (!isfinite(pose->jaw)) return TS_ENAN;
  double n = sqrt(pose->q[0] * pose->q[0] + pose->q[1] * pose->q[1] + pose->q[2] * pose->q[2] +
                  pose->q[3] * pose->q[3]);
  if (!(n >= 1e-6)) return TS_EQUAT;
  pt->pose = *pose;
  for (int k = 0; k < 4; k++) pt->pose.q[k] = pose->q[k] / n;
  pt->pose.jaw = pose->jaw < 0 ? 0 : pose->jaw > 1 ? 1 : pose->jaw;
  ts_quat_to_mat(pt->pose.q, pt->R);
  if (pt->tree->kind == TS_SHAPE_JAWS)
    jaw_boxes(pt->tree, pt->pose.jaw * pt->tree->jaw_max_angle, pt->jaw_local);
  if (++pt->cur == 0) {
    memset(pt->stamp, 0, sizeof *pt->stamp * pt->tree->n_nodes);
    if (pt->tree->n_verts) memset(pt->vstamp, 0, sizeof *pt->vstamp * pt->tree->n_verts);
    pt->cur = 1;
  }
  return 0;
}

const ts_obb *ts_posed_tool_box_ext(ts_posed_tool *pt, int32_t i, const double **ext) {
  const ts_obb *w = ts_posed_tool_box(pt, i);
  if (ext) *ext = pt->reach[i];
  return w;
}

const ts_obb *ts_posed_tool_box(ts_posed_tool *pt, int32_t i) {
  ts_obb *w = &pt->world[i];
  if (pt->stamp[i] == pt->cur) return w;
  const ts_obb *l = pt->tree->kind == TS_SHAPE_JAWS ? &pt->jaw_local[i] : &pt->tree->nodes[i].box;
  rotate(pt->R, l->c, w->c);
  for (int k = 0; k < 3; k++) w->c[k] += pt->pose.p[k];
  for (int a = 0; a < 3; a++) rotate(pt->R, l->r[a], w->r[a]);
  memcpy(w->e, l->e, sizeof w->e);
  for (int k = 0; k < 3; k++)
    pt->reach[i][k] =
        w->e[0] * fabs(w->r[0][k]) + w->e[1] * fabs(w->r[1][k]) + w->e[2] * fabs(w->r[2][k]);
  pt->stamp[i] = pt->cur;
  return w;
}

void ts_posed_tool_triangle(ts_posed_tool *pt, uint32_t tri, double out[3][3]) {
  const ts_obb_tree *t = pt->tree;
  for (int c = 0; c < 3; c++) {
    uint32_t v = t->t[tri][c];
    if (pt->vstamp[v] != pt->cur) {
      rotate(pt->R, t->v[v], pt->wv[v]);
      for (int k = 0; k < 3; k++) pt->wv[v][k] += pt->pose.p[k];
      pt->vstamp[v] = pt->cur;
    }
    memcpy(out[c], pt->wv[v], sizeof out[c]);
  }
}

void ts_posed_tool_segment(const ts_posed_tool *pt, double a[3], double b[3]) {
  for (int k = 0; k < 3; k++) {
    a[k] = pt->pose.p[k];
    b[k] = pt->pose.p[k] + pt->tree->length * pt->R[k][1];
  }
}

void ts_posed_tool_jaw(const ts_posed_tool *pt, int jaw, ts_obb *out) {
  const ts_obb *l = &pt->jaw_local[jaw ? 2 : 1];
  rotate(pt->R, l->c, out->c);
  for (int k = 0; k < 3; k++) out->c[k] += pt->pose.p[k];
  for (int a = 0; a < 3; a++) rotate(pt->R, l->r[a], out->r[a]);
  memcpy(out->e, l->e, sizeof out->e);
}
