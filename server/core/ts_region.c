/*
 * ts_region.c: breadth-first region search around a contact, point-triangle
 * distance and ray pick (ts_region.h).
 *
 * The search uses the region's own triangle list as its FIFO queue: a
 * triangle is appended when first reached and in range, and its edge
 * neighbours are examined when the read head passes it. Visited flags are
 * generation stamps, so a new search costs nothing to clear.
 */
#include "ts_region.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

int ts_region_alloc(uint32_t n_verts, uint32_t n_tris, ts_region **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!n_verts || !n_tris) return TS_EINVAL;
  ts_region *r = calloc(1, sizeof *r);
  if (!r) return TS_ENOMEM;
  r->cap_verts = n_verts;
  r->cap_tris = n_tris;
  r->tris = malloc(sizeof *r->tris * n_tris);
  r->verts = malloc(sizeof *r->verts * n_verts);
  r->vert_in_range = malloc(n_verts);
  r->tri_mark = calloc(n_tris, sizeof *r->tri_mark);
  r->vert_mark = calloc(n_verts, sizeof *r->vert_mark);
  if (!r->tris || !r->verts || !r->vert_in_range || !r->tri_mark || !r->vert_mark) {
    ts_region_free(r);
    return TS_ENOMEM;
  }
  *out = r;
  return 0;
}

void ts_region_free(ts_region *r) {
  if (!r) return;
  free(r->tris);
  free(r->verts);
  free(r->vert_in_range);
  free(r->tri_mark);
  free(r->vert_mark);
  free(r);
}

static double ts__dot(const double *a, const double *b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

double ts_point_triangle_distance(const double p[3], const double a[3], const double b[3],
                                  const double c[3], double q[3]) {
  double ab[3], ac[3], ap[3], bp[3], cp[3], r[3];
  for (int k = 0; k < 3; k++) {
    ab[k] = b[k] - a[k];
    ac[k] = c[k] - a[k];
    ap[k] = p[k] - a[k];
    bp[k] = p[k] - b[k];
    cp[k] = p[k] - c[k];
  }
  double d1 = ts__dot(ab, ap), d2 = ts__dot(ac, ap);
  double d3 = ts__dot(ab, bp), d4 = ts__dot(ac, bp);
  double d5 = ts__dot(ab, cp), d6 = ts__dot(ac, cp);
  double va = d3 * d6 - d5 * d4, vb = d5 * d2 - d1 * d6, vc = d1 * d4 - d3 * d2;
  if (d1 <= 0 && d2 <= 0) {
    memcpy(r, a, sizeof r);
  } else if (d3 >= 0 && d4 <= d3) {
    memcpy(r, b, sizeof r);
  } else if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    double v = d1 / (d1 - d3);
    for (int k = 0; k < 3; k++) r[k] = a[k] + v * ab[k];
  } else if (d6 >= 0 && d5 <= d6) {
    memcpy(r, c, sizeof r);
  } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    double w = d2 / (d2 - d6);
    for (int k = 0; k < 3; k++) r[k] = a[k] + w * ac[k];
  } else if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
    double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    for (int k = 0; k < 3; k++) r[k] = b[k] + w * (c[k] - b[k]);
  } else {
    double den = va + vb + vc;
    double v = vb / den, w = vc / den;
    for (int k = 0; k < 3; k++) r[k] = a[k] + ab[k] * v + ac[k] * w;
  }
  if (q) memcpy(q, r, sizeof r);
  double d[3] = {p[0] - r[0], p[1] - r[1], p[2] - r[2]};
  return sqrt(ts__dot(d, d));
}

static double ts__tri_dist(const ts_mesh *m, uint32_t f, const double *p) {
  const uint32_t *t = m->t[f];
  return ts_point_triangle_distance(p, m->v[t[0]], m->v[t[1]], m->v[t[2]], NULL);
}

static void ts__add_tri(ts_region *r, const ts_mesh *m, uint32_t f, const double *p, double range) {
  r->tris[r->n_tris++] = f;
  for (int i = 0; i < 3; i++) {
    uint32_t v = m->t[f][i];
    if (r->vert_mark[v] == r->stamp) continue;
    r->vert_mark[v] = r->stamp;
    double d[3] = {m->v[v][0] - p[0], m->v[v][1] - p[1], m->v[v][2] - p[2]};
    r->vert_in_range[r->n_verts] = sqrt(ts__dot(d, d)) <= range;
    r->verts[r->n_verts++] = v;
  }
}

static int ts__begin(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, const double *p,
                     double range) {
  if (!r || !m || !topo || !p) return TS_EINVAL;
  if (topo->n_tris != m->n_tris || topo->n_verts != m->n_verts) return TS_EINVAL;
  if (m->n_verts > r->cap_verts || m->n_tris > r->cap_tris) return TS_EINVAL;
  if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]) || !isfinite(range)) return TS_ENAN;
  if (range < 0) return TS_EINVAL;
  if (++r->stamp == 0) { /* wrapped: clear the marks once */
    memset(r->tri_mark, 0, sizeof *r->tri_mark * r->cap_tris);
    memset(r->vert_mark, 0, sizeof *r->vert_mark * r->cap_verts);
    r->stamp = 1;
  }
  r->n_tris = r->n_verts = 0;
  return 0;
}

/* Breadth-first from the seeds already in r->tris. */
static void ts__bfs(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, const double *p,
                    double range) {
  for (uint32_t head = 0; head < r->n_tris; head++) {
    uint32_t f = r->tris[head];
    for (int i = 0; i < 3; i++) {
      uint32_t e = topo->tri_edges[f][i];
      for (uint32_t q = topo->edge_tri_off[e]; q < topo->edge_tri_off[e + 1]; q++) {
        uint32_t g = topo->edge_tris[q];
        if (r->tri_mark[g] == r->stamp) continue;
        r->tri_mark[g] = r->stamp;
        if (ts__tri_dist(m, g, p) <= range) ts__add_tri(r, m, g, p, range);
      }
    }
  }
}

int ts_region_from_triangle(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, uint32_t tri,
                            const double point[3], double range) {
  int rc = ts__begin(r, m, topo, point, range);
  if (rc) return rc;
  if (tri >= m->n_tris) return TS_EINVAL;
  r->tri_mark[tri] = r->stamp;
  ts__add_tri(r, m, tri, point, range);
  ts__bfs(r, m, topo, point, range);
  return 0;
}

int ts_region_from_edge(ts_region *r, const ts_mesh *m, const ts_meshtopo *topo, uint32_t a, uint32_t b,
                        const double point[3], double range) {
  int rc = ts__begin(r, m, topo, point, range);
  if (rc) return rc;
  uint32_t e = ts_meshtopo_find_edge(topo, a, b);
  if (e == TS_MESHTOPO_NONE) return TS_EINVAL;
  for (uint32_t q = topo->edge_tri_off[e]; q < topo->edge_tri_off[e + 1]; q++) {
    uint32_t g = topo->edge_tris[q];
    r->tri_mark[g] = r->stamp;
    ts__add_tri(r, m, g, point, range);
  }
  ts__bfs(r, m, topo, point, range);
  return 0;
}

int ts_region_raypick(const ts_mesh *m, const double origin[3], const double dir[3], uint32_t *tri,
                      double point[3], double *t) {
  if (!m || !origin || !dir || !tri || !point || !t) return TS_EINVAL;
  for (int k = 0; k < 3; k++)
    if (!isfinite(origin[k]) || !isfinite(dir[k])) return TS_ENAN;
  if (!(ts__dot(dir, dir) > 0)) return TS_EINVAL;
  double best = INFINITY;
  uint32_t bf = UINT32_MAX;
  for (uint32_t f = 0; f < m->n_tris; f++) {
    const double *a = m->v[m->t[f][0]], *b = m->v[m->t[f][1]], *c = m->v[m->t[f][2]];
    double e1[3], e2[3], s[3], pv[3], qv[3];
    for (int k = 0; k < 3; k++) {
      e1[k] = b[k] - a[k];
      e2[k] = c[k] - a[k];
      s[k] = origin[k] - a[k];
    }
    pv[0] = dir[1] * e2[2] - dir[2] * e2[1];
    pv[1] = dir[2] * e2[0] - dir[0] * e2[2];
    pv[2] = dir[0] * e2[1] - dir[1] * e2[0];
    double det = ts__dot(e1, pv);
    if (det == 0) continue;
    double inv = 1.0 / det, u = ts__dot(s, pv) * inv;
    if (u < 0 || u > 1) continue;
    qv[0] = s[1] * e1[2] - s[2] * e1[1];
    qv[1] = s[2] * e1[0] - s[0] * e1[2];
    qv[2] = s[0] * e1[1] - s[1] * e1[0];
    double v = ts__dot(dir, qv) * inv;
    if (v < 0 || u + v > 1) continue;
    double tt = ts__dot(e2, qv) * inv;
    if (tt >= 0 && tt < best) best = tt, bf = f;
  }
  if (bf == UINT32_MAX) return TS_ERANGE;
  *tri = bf;
  *t = best;
  for (int k = 0; k < 3; k++) point[k] = origin[k] + best * dir[k];
  return 0;
}
