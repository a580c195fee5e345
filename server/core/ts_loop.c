/*
 * ts_loop.c: Loop subdivision as a plan of stencils (ts_loop.h; C. T. Loop,
 * "Smooth subdivision surfaces based on triangles", M.S. thesis, University
 * of Utah, 1987), whole-mesh or on a selected region made conforming by
 * red-green closure (a triangle split into four is "red"; its neighbours that
 * must be cut to avoid hanging vertices are "green": R. E. Bank, A. H.
 * Sherman and A. Weiser, "Refinement algorithms and data structures for
 * regular local mesh refinement", Scientific Computing, 1983), applied
 * unchanged to every sheet of a multi-layer extrusion.
 *
 * The vertex weight is written as Loop's alpha(n) = n beta = 5/8 - (3/8 +
 * 1/4 cos(2 pi / n))^2, so an interior vertex is (1 - alpha) p + (alpha / n)
 * sum q, the same algebra as the beta form.
 */
#include "ts_loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude_internal.h"
#include "ts_meshtopo.h"

void ts_loop_plan_free(ts_loop_plan *p) {
  if (!p) return;
  free(p->tris);
  free(p->tri_parent);
  free(p->edge_ends);
  free(p->st_off);
  free(p->st_idx);
  free(p->st_w);
  free(p);
}

void ts_loop_apply(const ts_loop_plan *p, const double (*src)[3], double (*dst)[3]) {
  for (uint32_t i = 0; i < p->n_verts; i++) {
    double s0 = 0, s1 = 0, s2 = 0;
    for (uint32_t k = p->st_off[i]; k < p->st_off[i + 1]; k++) {
      const double *q = src[p->st_idx[k]];
      double w = p->st_w[k];
      s0 += w * q[0];
      s1 += w * q[1];
      s2 += w * q[2];
    }
    dst[i][0] = s0;
    dst[i][1] = s1;
    dst[i][2] = s2;
  }
}

static double ts__dist2(const double *a, const double *b) {
  double d0 = a[0] - b[0], d1 = a[1] - b[1], d2 = a[2] - b[2];
  return d0 * d0 + d1 * d1 + d2 * d2;
}

/* Loop's vertex weight alpha(n) = n * beta(n). */
static double ts__loop_alpha(uint32_t n) {
  double t = 3.0 / 8.0 + 0.25 * cos(2.0 * M_PI / (double)n);
  return 5.0 / 8.0 - t * t;
}

int ts_loop_plan_build(const ts_mesh *m, const uint32_t *sel, uint32_t n_sel, int mode,
                       ts_loop_plan **out, char *err, size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!m || (mode != TS_LOOP_SMOOTH && mode != TS_LOOP_LINEAR) || (n_sel && !sel)) return TS_EINVAL;
  if (m->n_tris == 0 || m->n_verts == 0) {
    if (err && errcap) snprintf(err, errcap, "mesh is empty");
    return TS_EMESH;
  }
  uint32_t nv = m->n_verts, nt = m->n_tris;
  ts_meshtopo *topo = NULL;
  int rc = ts_meshtopo_build(m, &topo);
  if (rc == TS_EMESH && err && errcap) snprintf(err, errcap, "a triangle's vertex index is out of range");
  if (rc) return rc;

  ts_loop_plan *p = calloc(1, sizeof *p);
  uint8_t *red = calloc(nt, 1);
  uint8_t *split = calloc(topo->n_edges ? topo->n_edges : 1, 1);
  uint8_t *moves = calloc(nv, 1);
  uint8_t *bnd = calloc(nv, 1);
  uint32_t *evert = malloc(sizeof *evert * (topo->n_edges ? topo->n_edges : 1));
  double(*pos)[3] = NULL;
  if (!p || !red || !split || !moves || !bnd || !evert) {
    rc = TS_ENOMEM;
    goto done;
  }

  /* manifold enough for Loop's rules */
  for (uint32_t e = 0; e < topo->n_edges; e++) {
    uint32_t k = ts_meshtopo_edge_valence(topo, e);
    if (k > 2 || topo->edges[e][0] == topo->edges[e][1]) {
      if (err && errcap)
        snprintf(err, errcap, "edge (%u,%u) is shared by %u triangles: not a manifold", topo->edges[e][0],
                 topo->edges[e][1], k);
      rc = TS_EMESH;
      goto done;
    }
  }
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t nbe = 0;
    for (uint32_t q = topo->vert_edge_off[v]; q < topo->vert_edge_off[v + 1]; q++)
      if (ts_meshtopo_edge_valence(topo, topo->vert_edges[q]) == 1) nbe++;
    if (nbe > 2) {
      if (err && errcap) snprintf(err, errcap, "vertex %u has %u boundary edges: not a manifold", v, nbe);
      rc = TS_EMESH;
      goto done;
    }
    bnd[v] = nbe > 0;
  }

  /* red triangles, split edges, closure */
  if (!sel) {
    memset(red, 1, nt);
  } else {
    for (uint32_t i = 0; i < n_sel; i++) {
      if (sel[i] >= nt) {
        if (err && errcap) snprintf(err, errcap, "selected triangle %u is out of range (%u triangles)", sel[i], nt);
        rc = TS_EINVAL;
        goto done;
      }
      red[sel[i]] = 1;
    }
  }
  for (uint32_t f = 0; f < nt; f++)
    if (red[f])
      for (int i = 0; i < 3; i++) split[topo->tri_edges[f][i]] = 1;
  uint64_t ntris = 0;
  for (uint32_t f = 0; f < nt; f++) {
    uint32_t k = split[topo->tri_edges[f][0]] + split[topo->tri_edges[f][1]] + split[topo->tri_edges[f][2]];
    if (k == 3) red[f] = 1; /* all its edges split anyway: four children, no new split */
    ntris += red[f] ? 4 : k + 1;
    if (red[f])
      p->n_red++;
    else if (k)
      p->n_green++;
  }
  uint32_t nsplit = 0;
  for (uint32_t e = 0; e < topo->n_edges; e++) evert[e] = split[e] ? nv + nsplit++ : TS_MESHTOPO_NONE;
  if ((uint64_t)nv + nsplit > TS_LOOP_MAX || ntris > TS_LOOP_MAX) {
    if (err && errcap) snprintf(err, errcap, "subdivided mesh would exceed %u vertices or triangles", TS_LOOP_MAX);
    rc = TS_ETOOBIG;
    goto done;
  }
  p->n_old_verts = nv;
  p->n_verts = nv + nsplit;
  p->n_tris = (uint32_t)ntris;

  /* which old vertices move: those whose every triangle is red */
  if (mode == TS_LOOP_SMOOTH)
    for (uint32_t v = 0; v < nv; v++) {
      uint32_t a = topo->vert_tri_off[v], b = topo->vert_tri_off[v + 1];
      moves[v] = a < b;
      for (uint32_t q = a; q < b && moves[v]; q++) moves[v] = red[topo->vert_tris[q]];
    }

  /* stencils */
  p->st_off = malloc(sizeof *p->st_off * ((size_t)p->n_verts + 1));
  p->edge_ends = malloc(sizeof *p->edge_ends * (nsplit ? nsplit : 1));
  if (!p->st_off || !p->edge_ends) {
    rc = TS_ENOMEM;
    goto done;
  }
  uint64_t nst = 0;
  for (uint32_t v = 0; v < nv; v++) {
    p->st_off[v] = (uint32_t)nst;
    uint32_t deg = topo->vert_edge_off[v + 1] - topo->vert_edge_off[v];
    nst += !moves[v] ? 1 : bnd[v] ? 3 : 1 + deg;
  }
  for (uint32_t e = 0, i = 0; e < topo->n_edges; e++) {
    if (!split[e]) continue;
    p->st_off[nv + i++] = (uint32_t)nst;
    nst += (mode == TS_LOOP_SMOOTH && ts_meshtopo_edge_valence(topo, e) == 2) ? 4 : 2;
  }
  p->st_off[p->n_verts] = (uint32_t)nst;
  p->st_idx = malloc(sizeof *p->st_idx * nst);
  p->st_w = malloc(sizeof *p->st_w * nst);
  if (!p->st_idx || !p->st_w) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t k = p->st_off[v];
    p->st_idx[k] = v;
    if (!moves[v]) {
      p->st_w[k] = 1.0;
      continue;
    }
    if (bnd[v]) { /* 3/4 p + 1/8 (two boundary neighbours) */
      p->st_w[k++] = 0.75;
      for (uint32_t q = topo->vert_edge_off[v]; q < topo->vert_edge_off[v + 1]; q++) {
        uint32_t e = topo->vert_edges[q];
        if (ts_meshtopo_edge_valence(topo, e) != 1) continue;
        p->st_idx[k] = topo->edges[e][0] == v ? topo->edges[e][1] : topo->edges[e][0];
        p->st_w[k++] = 0.125;
      }
      continue;
    }
    uint32_t deg = topo->vert_edge_off[v + 1] - topo->vert_edge_off[v];
    double alpha = ts__loop_alpha(deg);
    p->st_w[k++] = 1.0 - alpha;
    for (uint32_t q = topo->vert_edge_off[v]; q < topo->vert_edge_off[v + 1]; q++) {
      uint32_t e = topo->vert_edges[q];
      p->st_idx[k] = topo->edges[e][0] == v ? topo->edges[e][1] : topo->edges[e][0];
      p->st_w[k++] = alpha / (double)deg;
    }
  }
  for (uint32_t e = 0; e < topo->n_edges; e++) {
    if (!split[e]) continue;
    uint32_t i = evert[e] - nv, k = p->st_off[evert[e]];
    uint32_t a = topo->edges[e][0], b = topo->edges[e][1];
    p->edge_ends[i][0] = a;
    p->edge_ends[i][1] = b;
    if (p->st_off[evert[e] + 1] - k == 4) {
      const uint32_t *et = topo->edge_tris + topo->edge_tri_off[e];
      p->st_idx[k] = a, p->st_w[k++] = 0.375;
      p->st_idx[k] = b, p->st_w[k++] = 0.375;
      p->st_idx[k] = ts_meshtopo_opposite(m, topo, et[0], e), p->st_w[k++] = 0.125;
      p->st_idx[k] = ts_meshtopo_opposite(m, topo, et[1], e), p->st_w[k++] = 0.125;
    } else {
      p->st_idx[k] = a, p->st_w[k++] = 0.5;
      p->st_idx[k] = b, p->st_w[k++] = 0.5;
    }
  }

  /* new positions on this mesh: the green quads pick their shorter diagonal */
  pos = malloc(sizeof *pos * p->n_verts);
  p->tris = malloc(sizeof *p->tris * p->n_tris);
  p->tri_parent = malloc(sizeof *p->tri_parent * p->n_tris);
  if (!pos || !p->tris || !p->tri_parent) {
    rc = TS_ENOMEM;
    goto done;
  }
  ts_loop_apply(p, (const double(*)[3])m->v, pos);
  uint32_t n = 0;
#define TS__TRI(A, B, C, F)                                                                        \
  do {                                                                                             \
    p->tris[n][0] = (A), p->tris[n][1] = (B), p->tris[n][2] = (C);                                 \
    p->tri_parent[n++] = (F);                                                                      \
  } while (0)
  for (uint32_t f = 0; f < nt; f++) {
    const uint32_t *t = m->t[f];
    uint32_t mid[3]; /* mid[i] on edge t[i] -> t[i+1] */
    for (int i = 0; i < 3; i++) mid[i] = evert[topo->tri_edges[f][i]];
    if (red[f]) {
      TS__TRI(t[0], mid[0], mid[2], f);
      TS__TRI(mid[0], t[1], mid[1], f);
      TS__TRI(mid[2], mid[1], t[2], f);
      TS__TRI(mid[0], mid[1], mid[2], f);
      continue;
    }
    int k = (mid[0] != TS_MESHTOPO_NONE) + (mid[1] != TS_MESHTOPO_NONE) + (mid[2] != TS_MESHTOPO_NONE);
    if (k == 0) {
      TS__TRI(t[0], t[1], t[2], f);
    } else if (k == 1) {
      int i = mid[0] != TS_MESHTOPO_NONE ? 0 : mid[1] != TS_MESHTOPO_NONE ? 1 : 2;
      uint32_t a = t[i], b = t[(i + 1) % 3], c = t[(i + 2) % 3], mm = mid[i];
      TS__TRI(a, mm, c, f);
      TS__TRI(mm, b, c, f);
    } else { /* k == 2: edge j = a -> b unsplit, m1 on b -> c, m2 on c -> a */
      int j = mid[0] == TS_MESHTOPO_NONE ? 0 : mid[1] == TS_MESHTOPO_NONE ? 1 : 2;
      uint32_t a = t[j], b = t[(j + 1) % 3], c = t[(j + 2) % 3];
      uint32_t m1 = mid[(j + 1) % 3], m2 = mid[(j + 2) % 3];
      TS__TRI(m2, m1, c, f);
      if (ts__dist2(pos[a], pos[m1]) <= ts__dist2(pos[b], pos[m2])) {
        TS__TRI(a, b, m1, f);
        TS__TRI(a, m1, m2, f);
      } else {
        TS__TRI(a, b, m2, f);
        TS__TRI(b, m1, m2, f);
      }
    }
  }
#undef TS__TRI
  rc = 0;

done:
  free(pos);
  free(red);
  free(split);
  free(moves);
  free(bnd);
  free(evert);
  ts_meshtopo_free(topo);
  if (rc) {
    ts_loop_plan_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int ts_loop_subdivide(const ts_mesh *m, const uint32_t *sel, uint32_t n_sel, int mode, ts_mesh **out,
                      char *err, size_t errcap) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_loop_plan *p = NULL;
  int rc = ts_loop_plan_build(m, sel, n_sel, mode, &p, err, errcap);
  if (rc) return rc;
  ts_mesh *r = NULL;
  rc = ts_mesh_alloc(p->n_verts, p->n_tris, &r);
  if (rc) {
    ts_loop_plan_free(p);
    return rc;
  }
  ts_loop_apply(p, (const double(*)[3])m->v, r->v);
  memcpy(r->t, p->tris, sizeof *r->t * p->n_tris);
  ts_loop_plan_free(p);
  *out = r;
  return 0;
}

int ts_loop_subdivide_n(const ts_mesh *m, uint32_t levels, ts_mesh **out, char *err, size_t errcap) {
  if (!out || !m) return TS_EINVAL;
  *out = NULL;
  ts_mesh *cur = NULL;
  int rc = ts_mesh_clone(m, &cur);
  for (uint32_t l = 0; l < levels && !rc; l++) {
    ts_mesh *next = NULL;
    rc = ts_loop_subdivide(cur, NULL, 0, TS_LOOP_SMOOTH, &next, err, errcap);
    ts_mesh_free(cur);
    cur = next;
  }
  if (rc) {
    ts_mesh_free(cur);
    return rc;
  }
  *out = cur;
  return 0;
}

int ts_loop_extrusion(const ts_extrusion *e, const uint32_t *sel, uint32_t n_sel, int mode,
                      ts_extrusion **out, ts_loop_plan **plan_out, char *err, size_t errcap) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (plan_out) *plan_out = NULL;
  if (!e || !e->x || !e->surface_tris || e->n_sheets != e->n_layers + 1) return TS_EINVAL;
  ts_mesh surf = {e->nv, e->n_surface_tris, e->x, e->surface_tris};
  ts_loop_plan *p = NULL;
  int rc = ts_loop_plan_build(&surf, sel, n_sel, mode, &p, err, errcap);
  if (rc) return rc;
  ts_extrusion *r = NULL;
  rc = ts__extrusion_new(e->n_layers, p->n_verts, p->n_tris, &r);
  if (rc) {
    ts_loop_plan_free(p);
    return rc;
  }
  memcpy(r->surface_tris, p->tris, sizeof *r->surface_tris * p->n_tris);
  for (uint32_t s = 0; s < e->n_sheets; s++)
    ts_loop_apply(p, (const double(*)[3])(e->x + (size_t)s * e->nv), r->x + (size_t)s * r->nv);
  rc = ts__extrusion_assemble(r, err, errcap);
  if (rc && !(rc == TS_EMESH && r->n_inverted)) {
    ts_extrusion_free(r);
    ts_loop_plan_free(p);
    return rc;
  }
  *out = r;
  if (plan_out)
    *plan_out = p;
  else
    ts_loop_plan_free(p);
  return rc;
}
