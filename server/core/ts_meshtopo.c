/*
 * ts_meshtopo.c: connectivity tables and the manifold / winding / Euler check
 * of a triangle mesh (ts_meshtopo.h).
 *
 * The tables come from one sort: every triangle side is a half-edge record
 * keyed by its unordered vertex pair, sorted by (key, half-edge index); runs
 * of equal keys are the unique edges (so edges come out sorted by (a, b) and
 * each edge's triangles in increasing order), and counting sorts give the
 * per-vertex tables. The check counts fans around each vertex with a small
 * union-find over the vertex's triangles, and components and boundary loops
 * with a union-find over vertices. The Euler characteristic and genus follow
 * the classification of compact surfaces: chi = V - E + F = 2C - 2g - B for
 * an orientable surface with C components, genus g and B boundary loops.
 */
#include "ts_meshtopo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

typedef struct ts__halfedge {
  uint64_t key; /* min << 32 | max */
  uint32_t he;  /* 3 * triangle + corner */
} ts__halfedge;

static int ts__he_cmp(const void *pa, const void *pb) {
  const ts__halfedge *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->he > b->he) - (a->he < b->he);
}

static uint64_t ts__edge_key(uint32_t a, uint32_t b) {
  return a < b ? ((uint64_t)a << 32) | b : ((uint64_t)b << 32) | a;
}

void ts_meshtopo_free(ts_meshtopo *t) {
  if (!t) return;
  free(t->edges);
  free(t->tri_edges);
  free(t->edge_tri_off);
  free(t->edge_tris);
  free(t->vert_tri_off);
  free(t->vert_tris);
  free(t->vert_edge_off);
  free(t->vert_edges);
  free(t);
}

int ts_meshtopo_build(const ts_mesh *m, ts_meshtopo **out) {
  if (!m || !out) return TS_EINVAL;
  *out = NULL;
  if (m->n_tris && (!m->t || m->n_tris > UINT32_MAX / 3)) return TS_EINVAL;
  for (uint32_t f = 0; f < m->n_tris; f++)
    for (int i = 0; i < 3; i++)
      if (m->t[f][i] >= m->n_verts) return TS_EMESH;

  uint32_t nt = m->n_tris, nv = m->n_verts, nh = 3 * nt;
  ts_meshtopo *t = calloc(1, sizeof *t);
  ts__halfedge *he = malloc(sizeof *he * (nh ? nh : 1));
  if (!t || !he) {
    free(t);
    free(he);
    return TS_ENOMEM;
  }
  t->n_verts = nv;
  t->n_tris = nt;
  for (uint32_t f = 0; f < nt; f++)
    for (uint32_t i = 0; i < 3; i++) {
      he[3 * f + i].key = ts__edge_key(m->t[f][i], m->t[f][(i + 1) % 3]);
      he[3 * f + i].he = 3 * f + i;
    }
  qsort(he, nh, sizeof *he, ts__he_cmp);

  uint32_t ne = 0;
  for (uint32_t h = 0; h < nh; h++)
    if (h == 0 || he[h].key != he[h - 1].key) ne++;
  t->n_edges = ne;
  t->edges = malloc(sizeof *t->edges * (ne ? ne : 1));
  t->tri_edges = malloc(sizeof *t->tri_edges * (nt ? nt : 1));
  t->edge_tri_off = calloc((size_t)ne + 1, sizeof *t->edge_tri_off);
  t->edge_tris = malloc(sizeof *t->edge_tris * (nh ? nh : 1));
  t->vert_tri_off = calloc((size_t)nv + 1, sizeof *t->vert_tri_off);
  t->vert_tris = malloc(sizeof *t->vert_tris * (nh ? nh : 1));
  t->vert_edge_off = calloc((size_t)nv + 1, sizeof *t->vert_edge_off);
  t->vert_edges = malloc(sizeof *t->vert_edges * (2 * (size_t)ne + 1));
  if (!t->edges || !t->tri_edges || !t->edge_tri_off || !t->edge_tris || !t->vert_tri_off ||
      !t->vert_tris || !t->vert_edge_off || !t->vert_edges) {
    free(he);
    ts_meshtopo_free(t);
    return TS_ENOMEM;
  }

  /* edges and edge -> triangles, straight from the sorted runs */
  uint32_t e = UINT32_MAX;
  for (uint32_t h = 0; h < nh; h++) {
    if (h == 0 || he[h].key != he[h - 1].key) {
      e++;
      t->edges[e][0] = (uint32_t)(he[h].key >> 32);
      t->edges[e][1] = (uint32_t)he[h].key;
      t->edge_tri_off[e] = h;
    }
    t->edge_tris[h] = he[h].he / 3;
    t->tri_edges[he[h].he / 3][he[h].he % 3] = e;
  }
  t->edge_tri_off[ne] = nh;
  free(he);

  /* vertex -> triangles (each triangle once per distinct vertex) */
  for (uint32_t f = 0; f < nt; f++) {
    const uint32_t *v = m->t[f];
    t->vert_tri_off[v[0] + 1]++;
    if (v[1] != v[0]) t->vert_tri_off[v[1] + 1]++;
    if (v[2] != v[0] && v[2] != v[1]) t->vert_tri_off[v[2] + 1]++;
  }
  for (uint32_t i = 0; i < nv; i++) t->vert_tri_off[i + 1] += t->vert_tri_off[i];
  uint32_t *fill = malloc(sizeof *fill * (nv ? nv : 1));
  if (!fill) {
    ts_meshtopo_free(t);
    return TS_ENOMEM;
  }
  memcpy(fill, t->vert_tri_off, sizeof *fill * nv);
  for (uint32_t f = 0; f < nt; f++) {
    const uint32_t *v = m->t[f];
    t->vert_tris[fill[v[0]]++] = f;
    if (v[1] != v[0]) t->vert_tris[fill[v[1]]++] = f;
    if (v[2] != v[0] && v[2] != v[1]) t->vert_tris[fill[v[2]]++] = f;
  }

  /* vertex -> edges */
  for (uint32_t k = 0; k < ne; k++) {
    t->vert_edge_off[t->edges[k][0] + 1]++;
    if (t->edges[k][1] != t->edges[k][0]) t->vert_edge_off[t->edges[k][1] + 1]++;
  }
  for (uint32_t i = 0; i < nv; i++) t->vert_edge_off[i + 1] += t->vert_edge_off[i];
  memcpy(fill, t->vert_edge_off, sizeof *fill * nv);
  for (uint32_t k = 0; k < ne; k++) {
    t->vert_edges[fill[t->edges[k][0]]++] = k;
    if (t->edges[k][1] != t->edges[k][0]) t->vert_edges[fill[t->edges[k][1]]++] = k;
  }
  free(fill);
  *out = t;
  return 0;
}

uint32_t ts_meshtopo_find_edge(const ts_meshtopo *t, uint32_t a, uint32_t b) {
  if (a > b) {
    uint32_t s = a;
    a = b;
    b = s;
  }
  uint32_t lo = 0, hi = t->n_edges;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const uint32_t *e = t->edges[mid];
    if (e[0] < a || (e[0] == a && e[1] < b))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < t->n_edges && t->edges[lo][0] == a && t->edges[lo][1] == b) return lo;
  return TS_MESHTOPO_NONE;
}

uint32_t ts_meshtopo_opposite(const ts_mesh *m, const ts_meshtopo *t, uint32_t tri, uint32_t e) {
  for (int i = 0; i < 3; i++)
    if (t->tri_edges[tri][i] == e) return m->t[tri][(i + 2) % 3];
  return TS_MESHTOPO_NONE;
}

/* ---- check ---- */

static uint32_t ts__uf_find(uint32_t *p, uint32_t x) {
  while (p[x] != x) {
    p[x] = p[p[x]];
    x = p[x];
  }
  return x;
}

static void ts__uf_union(uint32_t *p, uint32_t a, uint32_t b) {
  a = ts__uf_find(p, a);
  b = ts__uf_find(p, b);
  if (a != b) p[a < b ? b : a] = a < b ? a : b;
}

/* The vertex edge e leaves from in triangle tri (its winding), or NONE. */
static uint32_t ts__edge_from(const ts_mesh *m, const ts_meshtopo *t, uint32_t tri, uint32_t e) {
  for (int i = 0; i < 3; i++)
    if (t->tri_edges[tri][i] == e) return m->t[tri][i];
  return TS_MESHTOPO_NONE;
}

static int ts__degenerate(const ts_mesh *m, uint32_t f) {
  const uint32_t *v = m->t[f];
  if (v[0] == v[1] || v[1] == v[2] || v[2] == v[0]) return 1;
  const double *a = m->v[v[0]], *b = m->v[v[1]], *c = m->v[v[2]];
  double u[3], w[3], d[3], n[3];
  for (int k = 0; k < 3; k++) {
    u[k] = b[k] - a[k];
    w[k] = c[k] - a[k];
    d[k] = c[k] - b[k];
  }
  n[0] = u[1] * w[2] - u[2] * w[1];
  n[1] = u[2] * w[0] - u[0] * w[2];
  n[2] = u[0] * w[1] - u[1] * w[0];
  double l2 = fmax(u[0] * u[0] + u[1] * u[1] + u[2] * u[2],
                   fmax(w[0] * w[0] + w[1] * w[1] + w[2] * w[2], d[0] * d[0] + d[1] * d[1] + d[2] * d[2]));
  double area2 = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]); /* = longest * height */
  return !(area2 > 1e-12 * l2) || !isfinite(area2);
}

int ts_meshtopo_check(const ts_mesh *m, const ts_meshtopo *t, ts_meshtopo_report *r, char *err,
                      size_t errcap) {
  if (!m || !t || !r || t->n_tris != m->n_tris || t->n_verts != m->n_verts) return TS_EINVAL;
  memset(r, 0, sizeof *r);
  if (err && errcap) err[0] = 0;
  int bad = 0;
#define TS__PROBLEM(...)                                                                           \
  do {                                                                                             \
    if (!bad && err && errcap) snprintf(err, errcap, __VA_ARGS__);                                 \
    bad = 1;                                                                                       \
  } while (0)

  uint32_t nv = t->n_verts;
  r->n_tris = t->n_tris;
  r->n_edges = t->n_edges;
  for (uint32_t v = 0; v < nv; v++)
    if (t->vert_tri_off[v + 1] > t->vert_tri_off[v]) r->n_verts_used++;

  uint32_t *uf = malloc(sizeof *uf * (nv ? nv : 1));
  uint32_t *ufb = malloc(sizeof *ufb * (nv ? nv : 1));
  uint8_t *onb = calloc(nv ? nv : 1, 1);
  if (!uf || !ufb || !onb) {
    free(uf);
    free(ufb);
    free(onb);
    return TS_ENOMEM;
  }
  for (uint32_t v = 0; v < nv; v++) uf[v] = ufb[v] = v;

  for (uint32_t e = 0; e < t->n_edges; e++) {
    uint32_t a = t->edges[e][0], b = t->edges[e][1], k = ts_meshtopo_edge_valence(t, e);
    const uint32_t *et = t->edge_tris + t->edge_tri_off[e];
    ts__uf_union(uf, a, b);
    if (k == 1) {
      r->n_boundary_edges++;
      ts__uf_union(ufb, a, b);
      onb[a] = onb[b] = 1;
    } else if (k > 2) {
      r->n_nonmanifold_edges++;
      TS__PROBLEM("edge (%u,%u) is shared by %u triangles (%u, %u, %u%s)", a, b, k, et[0], et[1],
                  et[2], k > 3 ? ", ..." : "");
    } else if (a != b && ts__edge_from(m, t, et[0], e) == ts__edge_from(m, t, et[1], e)) {
      r->n_misoriented_edges++;
      TS__PROBLEM("triangles %u and %u share edge (%u,%u) with the same orientation", et[0], et[1],
                  a, b);
    }
  }

  /* fans around each vertex: union-find over the vertex's triangles, joined
   * through the manifold edges at the vertex */
  uint32_t maxk = 0;
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t k = t->vert_tri_off[v + 1] - t->vert_tri_off[v];
    if (k > maxk) maxk = k;
  }
  uint32_t *loc = malloc(sizeof *loc * (maxk ? maxk : 1));
  if (!loc) {
    free(uf);
    free(ufb);
    free(onb);
    return TS_ENOMEM;
  }
  for (uint32_t v = 0; v < nv; v++) {
    const uint32_t *vt = t->vert_tris + t->vert_tri_off[v];
    uint32_t k = t->vert_tri_off[v + 1] - t->vert_tri_off[v];
    if (k < 2) continue;
    for (uint32_t i = 0; i < k; i++) loc[i] = i;
    for (uint32_t q = t->vert_edge_off[v]; q < t->vert_edge_off[v + 1]; q++) {
      uint32_t e = t->vert_edges[q];
      if (ts_meshtopo_edge_valence(t, e) != 2) continue;
      const uint32_t *et = t->edge_tris + t->edge_tri_off[e];
      uint32_t i0 = UINT32_MAX, i1 = UINT32_MAX;
      for (uint32_t i = 0; i < k; i++) {
        if (vt[i] == et[0]) i0 = i;
        if (vt[i] == et[1]) i1 = i;
      }
      if (i0 != UINT32_MAX && i1 != UINT32_MAX) ts__uf_union(loc, i0, i1);
    }
    uint32_t fans = 0;
    for (uint32_t i = 0; i < k; i++)
      if (ts__uf_find(loc, i) == i) fans++;
    if (fans > 1) {
      r->n_nonmanifold_verts++;
      TS__PROBLEM("vertex %u: its %u triangles form %u separate fans", v, k, fans);
    }
  }
  free(loc);

  for (uint32_t f = 0; f < t->n_tris; f++)
    if (ts__degenerate(m, f)) {
      r->n_degenerate_tris++;
      TS__PROBLEM("triangle %u (%u,%u,%u) is degenerate", f, m->t[f][0], m->t[f][1], m->t[f][2]);
    }

  for (uint32_t v = 0; v < nv; v++) {
    if (t->vert_tri_off[v + 1] > t->vert_tri_off[v] && ts__uf_find(uf, v) == v) r->n_components++;
    if (onb[v] && ts__uf_find(ufb, v) == v) r->n_boundary_loops++;
  }
  r->euler = (int64_t)r->n_verts_used - (int64_t)r->n_edges + (int64_t)r->n_tris;
  int64_t twog = 2 * (int64_t)r->n_components - (int64_t)r->n_boundary_loops - r->euler;
  r->genus = -1;
  if (!r->n_nonmanifold_edges && !r->n_nonmanifold_verts && !r->n_misoriented_edges &&
      twog >= 0 && twog % 2 == 0)
    r->genus = (int32_t)(twog / 2);
  free(uf);
  free(ufb);
  free(onb);
#undef TS__PROBLEM
  return bad ? TS_EMESH : 0;
}

int ts_meshtopo_boundary_loops(const ts_mesh *m, const ts_meshtopo *t, uint32_t **verts,
                               uint32_t **offsets, uint32_t *n_loops) {
  if (!m || !t || !verts || !offsets || !n_loops) return TS_EINVAL;
  *verts = *offsets = NULL;
  *n_loops = 0;
  uint32_t nv = t->n_verts, nb = 0;
  uint32_t *next = malloc(sizeof *next * (nv ? nv : 1));
  uint8_t *in = calloc(nv ? nv : 1, 1);
  if (!next || !in) {
    free(next);
    free(in);
    return TS_ENOMEM;
  }
  for (uint32_t v = 0; v < nv; v++) next[v] = TS_MESHTOPO_NONE;
  int rc = 0;
  for (uint32_t e = 0; e < t->n_edges && !rc; e++) {
    if (ts_meshtopo_edge_valence(t, e) != 1) continue;
    uint32_t tri = t->edge_tris[t->edge_tri_off[e]];
    uint32_t from = ts__edge_from(m, t, tri, e);
    uint32_t to = from == t->edges[e][0] ? t->edges[e][1] : t->edges[e][0];
    if (next[from] != TS_MESHTOPO_NONE || in[to]) rc = TS_EMESH;
    next[from] = to;
    in[to] = 1;
    nb++;
  }
  uint32_t *vs = malloc(sizeof *vs * (nb ? nb : 1));
  uint32_t *off = malloc(sizeof *off * ((size_t)nb + 1));
  if (!rc && (!vs || !off)) rc = TS_ENOMEM;
  uint32_t n = 0, nl = 0;
  memset(in, 0, nv ? nv : 1); /* now: visited */
  for (uint32_t s = 0; s < nv && !rc; s++) {
    if (next[s] == TS_MESHTOPO_NONE || in[s]) continue;
    off[nl++] = n;
    uint32_t v = s;
    do {
      if (next[v] == TS_MESHTOPO_NONE || in[v]) {
        rc = TS_EMESH; /* an open chain: boundary edges wound inconsistently */
        break;
      }
      in[v] = 1;
      vs[n++] = v;
      v = next[v];
    } while (v != s);
  }
  free(next);
  free(in);
  if (rc) {
    free(vs);
    free(off);
    return rc;
  }
  off[nl] = n;
  *verts = vs;
  *offsets = off;
  *n_loops = nl;
  return 0;
}
