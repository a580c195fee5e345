/*
 * ts_qstatic_refine.c: the quasi-static solve on a copy of the contact region
 * refined by longest-edge bisection (ts_qstatic_refine.h says what the copy
 * is, how its springs get their constants and why).
 *
 * A solve: copy the region's surface triangles (local vertex numbers),
 * refine them (ts_leb_refine, rim frozen), lay the nodes out on every sheet
 * (new nodes at their parents' midpoints, in creation order), give each node
 * its role and external force (an original node its own, a new node none), gather the springs of every refined triangle as (pair, K)
 * entries, sort and merge them, then relax and write the original nodes
 * back. The per-triangle shares: an EDGE or SHEAR spring of a triangle that
 * is not split keeps K * A_tri / (area of the edge's triangles), an
 * INTERLAYER spring and a node's mass K * A_tri / (area of the vertex's fan),
 * so that a spring whose triangles are all in the copy and unsplit gets back
 * its own K. A split triangle's children share its stiffness volume
 * sum K L^2 per kind as the header says.
 *
 * The relaxation: each free node's 3 x 3 step omega B_i^-1 (the header's
 * "Step") is gathered from the active springs and inverted by the adjugate
 * (node_steps), again whenever the sum of the sweeps' largest moves reaches
 * TS_QSREFINE_DRIFT times the shortest active spring; a sweep is then R at
 * the current positions and x_i += S_i R_i. The old global step stays as
 * TS_QSREFINE_STEP_GLOBAL and as the fallback.
 */
#include "ts_qstatic_refine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_leb.h"
#include "ts_mat3.h"
#include "ts_mesh.h"
#include "ts_meshtopo.h"
#include "ts_region.h"

#define NONE UINT32_MAX

static double tri_area3(const double a[3], const double b[3], const double c[3]) {
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  double v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  double n[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
  return 0.5 * sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
}

static double dist3(const double a[3], const double b[3]) {
  double d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

void ts_qsrefine_destroy(ts_qsrefine *r) {
  if (!r) return;
  free(r->rest);
  free(r->tri_area);
  free(r->edge_area);
  free(r->fan_area);
  free(r->lmap);
  free(r->cmark);
  free(r->vmap);
  free(r->parents);
  free(r->tris);
  free(r->tri_parent);
  free(r->n_children);
  free(r->in_range);
  free(r->X);
  free(r->x);
  free(r->mass);
  free(r->role);
  free(r->anchored);
  free(r->spr);
  free(r->spr_tmp);
  free(r->bucket);
  free(r->dens);
  free(r->free_nodes);
  free(r->active);
  free(r->R);
  free(r->step);
  free(r->kdiag);
  free(r->x_start);
  free(r->fext);
  free(r);
}

int ts_qsrefine_create(ts_qstatic *q, const ts_tissue *t, const ts_qsrefine_def *def,
                       ts_qsrefine **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!q || !t || !def || !(def->max_edge > 0) || !q->surf || !q->topo) return TS_EINVAL;
  if ((unsigned)def->step > TS_QSREFINE_STEP_GLOBAL) return TS_EINVAL;
  if (t->n_nodes != q->n_nodes || !t->rest) return TS_EINVAL;
  ts_qsrefine *r = calloc(1, sizeof *r);
  if (!r) return TS_ENOMEM;
  r->q = q;
  r->def = *def;
  if (!r->def.max_verts) r->def.max_verts = TS_QSREFINE_DEFAULT_MAX_VERTS;
  r->n_sheets = q->n_sheets;
  r->n_surf = q->n_surf;
  const ts_mesh *m = q->surf;
  const ts_meshtopo *tp = q->topo;
  r->rest = malloc(sizeof *r->rest * q->n_nodes);
  r->tri_area = malloc(sizeof *r->tri_area * m->n_tris);
  r->edge_area = calloc(tp->n_edges ? tp->n_edges : 1, sizeof *r->edge_area);
  r->fan_area = calloc(r->n_surf, sizeof *r->fan_area);
  r->lmap = malloc(sizeof *r->lmap * r->n_surf);
  r->cmark = calloc(q->n_nodes, 1);
  if (!r->rest || !r->tri_area || !r->edge_area || !r->fan_area || !r->lmap || !r->cmark) {
    ts_qsrefine_destroy(r);
    return TS_ENOMEM;
  }
  memcpy(r->rest, t->rest, sizeof *r->rest * q->n_nodes);
  for (uint32_t i = 0; i < r->n_surf; i++) r->lmap[i] = NONE;
  for (uint32_t f = 0; f < m->n_tris; f++) {
    const uint32_t *v = m->t[f];
    double a = tri_area3(r->rest[v[0]], r->rest[v[1]], r->rest[v[2]]);
    r->tri_area[f] = a;
    for (int i = 0; i < 3; i++) {
      r->edge_area[tp->tri_edges[f][i]] += a;
      r->fan_area[v[i]] += a;
    }
  }
  *out = r;
  return 0;
}

/* Springs entries one refined triangle contributes. */
static uint32_t per_tri(const ts_qsrefine *r) {
  uint32_t slabs = r->n_sheets - 1;
  return 3 * r->n_sheets + 9 * slabs;
}

/* Stiffness volume densities of tissue triangle P (N/m per m^2 of surface,
 * per spring of the kind: see the header) and mass per area per vertex. */
typedef struct ts_qsrefine_densities {
  double edge[TS_MAX_LAYERS + 1], mass[TS_MAX_LAYERS + 1];
  double diag[TS_MAX_LAYERS], inter[TS_MAX_LAYERS];
} densities;

#define GROW(ptr, n)                                   \
  do {                                                 \
    void *np_ = realloc((ptr), sizeof *(ptr) * (n));   \
    if (!np_) return TS_ENOMEM;                        \
    (ptr) = np_;                                       \
  } while (0)

/* Room for nv copy surface vertices and nt refined triangles. */
static int grow(ts_qsrefine *r, uint32_t nv, uint32_t nt) {
  if (nv > r->cap_v) {
    uint32_t c = nv;
    size_t nn = (size_t)c * r->n_sheets;
    GROW(r->vmap, c);
    GROW(r->parents, c);
    GROW(r->in_range, c);
    GROW(r->X, nn);
    GROW(r->x, nn);
    GROW(r->mass, nn);
    GROW(r->role, nn);
    GROW(r->anchored, nn);
    GROW(r->free_nodes, nn);
    GROW(r->R, nn);
    GROW(r->step, nn);
    GROW(r->kdiag, nn);
    GROW(r->x_start, nn);
    GROW(r->fext, nn);
    GROW(r->bucket, nn + 1);
    r->cap_v = c;
  }
  if (nt > r->cap_t) {
    GROW(r->tris, nt);
    GROW(r->tri_parent, nt);
    GROW(r->n_children, nt);
    GROW(r->dens, nt);
    size_t ns = (size_t)nt * per_tri(r);
    if (ns > UINT32_MAX) return TS_EFULL;
    GROW(r->spr, ns);
    GROW(r->spr_tmp, ns);
    GROW(r->active, ns);
    r->cap_t = nt;
    r->cap_s = (uint32_t)ns;
  }
  return 0;
}

/* The tissue's spring constant between nodes i and j (summed over springs
 * with these ends; 0 when none) and its rest length. */
static double korig(const ts_qstatic *q, uint32_t i, uint32_t j, double *L0) {
  double K = 0;
  for (uint32_t e = q->adj_off[i]; e < q->adj_off[i + 1]; e++) {
    uint32_t s = q->adj[e];
    uint32_t o = q->ends[s][0] == i ? q->ends[s][1] : q->ends[s][0];
    if (o == j) {
      K += q->K[s];
      *L0 = q->L0[s];
    }
  }
  return K;
}

static void add_spring(ts_qsrefine *r, uint32_t a, uint32_t b, double K, double L0) {
  if (!(K > 0)) return;
  uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
  ts_qsrefine_spring *s = &r->spr[r->n_springs++];
  s->key = (uint64_t)lo << 32 | hi;
  s->K = K;
  s->L0 = L0;
}

/* One stable counting-sort pass of the n springs in src into dst by one end
 * (hi: the higher-numbered end, else the lower), over r->n_nodes nodes. */
static void sort_pass(ts_qsrefine *r, const ts_qsrefine_spring *src, ts_qsrefine_spring *dst,
                      uint32_t n, int hi) {
  uint32_t *cnt = r->bucket, nn = r->n_nodes;
  memset(cnt, 0, sizeof *cnt * (nn + 1));
  for (uint32_t k = 0; k < n; k++)
    cnt[1 + (hi ? (uint32_t)src[k].key : (uint32_t)(src[k].key >> 32))]++;
  for (uint32_t i = 0; i < nn; i++) cnt[i + 1] += cnt[i];
  for (uint32_t k = 0; k < n; k++)
    dst[cnt[hi ? (uint32_t)src[k].key : (uint32_t)(src[k].key >> 32)]++] = src[k];
}

/* r->spr sorted by key, stably (entries of one pair keep their order, so
 * their merged K is summed in the order they were added): by the higher
 * end, then by the lower (two counting passes, linear in springs and nodes;
 * qsort took about 2/3 of a build on patch-S: 5.1 ms, now 2.0, bench_learn). */
static void sort_springs(ts_qsrefine *r) {
  sort_pass(r, r->spr, r->spr_tmp, r->n_springs, 1);
  sort_pass(r, r->spr_tmp, r->spr, r->n_springs, 0);
}

/* Original shares of tissue triangle P for the refined triangle T (= P). */
static void add_unsplit(ts_qsrefine *r, const uint32_t T[3], uint32_t P) {
  const ts_qstatic *q = r->q;
  uint32_t ns = r->n_surf, nv = r->nv, S = r->n_sheets;
  double AP = r->tri_area[P];
  for (int i = 0; i < 3; i++) {
    uint32_t u = T[i], w = T[(i + 1) % 3], ou = r->vmap[u], ow = r->vmap[w];
    double fe = AP / r->edge_area[q->topo->tri_edges[P][i]];
    double fv = AP / r->fan_area[ou];
    double L0 = 0;
    for (uint32_t s = 0; s < S; s++) {
      double K = korig(q, s * ns + ou, s * ns + ow, &L0) * fe;
      add_spring(r, s * nv + u, s * nv + w, K, L0);
      r->mass[s * nv + u] += q->mass[s * ns + ou] * fv;
    }
    for (uint32_t l = 0; l + 1 < S; l++) {
      double K = korig(q, l * ns + ou, (l + 1) * ns + ow, &L0) * fe;
      add_spring(r, l * nv + u, (l + 1) * nv + w, K, L0);
      K = korig(q, l * ns + ow, (l + 1) * ns + ou, &L0) * fe;
      add_spring(r, l * nv + w, (l + 1) * nv + u, K, L0);
      K = korig(q, l * ns + ou, (l + 1) * ns + ou, &L0) * fv;
      add_spring(r, l * nv + u, (l + 1) * nv + u, K, L0);
    }
  }
}

static void tri_densities(const ts_qsrefine *r, uint32_t P, densities *d) {
  const ts_qstatic *q = r->q;
  const uint32_t *V = q->surf->t[P];
  uint32_t ns = r->n_surf, S = r->n_sheets;
  double AP = r->tri_area[P];
  memset(d, 0, sizeof *d);
  for (int i = 0; i < 3; i++) {
    uint32_t ou = V[i], ow = V[(i + 1) % 3];
    double fe = AP / r->edge_area[q->topo->tri_edges[P][i]];
    double fv = AP / r->fan_area[ou];
    double L0 = 0;
    for (uint32_t s = 0; s < S; s++) {
      double K = korig(q, s * ns + ou, s * ns + ow, &L0) * fe;
      if (K > 0) d->edge[s] += K * L0 * L0;
      d->mass[s] += q->mass[s * ns + ou] * fv;
    }
    for (uint32_t l = 0; l + 1 < S; l++) {
      double K = korig(q, l * ns + ou, (l + 1) * ns + ow, &L0) * fe;
      if (K > 0) d->diag[l] += K * L0 * L0;
      K = korig(q, l * ns + ow, (l + 1) * ns + ou, &L0) * fe;
      if (K > 0) d->diag[l] += K * L0 * L0;
      K = korig(q, l * ns + ou, (l + 1) * ns + ou, &L0) * fv;
      if (K > 0) d->inter[l] += K * L0 * L0;
    }
  }
  for (uint32_t s = 0; s < S; s++) {
    d->edge[s] /= 3 * AP;
    d->mass[s] /= 3 * AP;
  }
  for (uint32_t l = 0; l + 1 < S; l++) {
    d->diag[l] /= 6 * AP;
    d->inter[l] /= 3 * AP;
  }
}

/* A child T of a split triangle with densities d. */
static void add_child(ts_qsrefine *r, const uint32_t T[3], const densities *d) {
  uint32_t nv = r->nv, S = r->n_sheets;
  double (*X)[3] = r->X;
  double Ac = tri_area3(X[T[0]], X[T[1]], X[T[2]]);
  for (int i = 0; i < 3; i++) {
    uint32_t u = T[i], w = T[(i + 1) % 3];
    for (uint32_t s = 0; s < S; s++) {
      uint32_t a = s * nv + u, b = s * nv + w;
      double L = dist3(X[a], X[b]);
      add_spring(r, a, b, d->edge[s] * Ac / (L * L), L);
      r->mass[a] += d->mass[s] * Ac;
    }
    for (uint32_t l = 0; l + 1 < S; l++) {
      uint32_t a = l * nv + u, b = (l + 1) * nv + w;
      double L = dist3(X[a], X[b]);
      add_spring(r, a, b, d->diag[l] * Ac / (L * L), L);
      a = l * nv + w, b = (l + 1) * nv + u;
      L = dist3(X[a], X[b]);
      add_spring(r, a, b, d->diag[l] * Ac / (L * L), L);
      a = l * nv + u, b = (l + 1) * nv + u;
      L = dist3(X[a], X[b]);
      add_spring(r, a, b, d->inter[l] * Ac / (L * L), L);
    }
  }
}

typedef struct ball {
  double c[3], range, h;
} ball;

static double ball_size(const double p[3], void *ud) {
  const ball *b = ud;
  return dist3(p, b->c) <= b->range ? b->h : INFINITY;
}

int ts_qsrefine_build(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                      const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                      const double (*f_ext)[3]) {
  if (!r || !x || !point || (n_ctrl && (!ctrl || !ctrl_pos))) return TS_EINVAL;
  ts_qstatic *q = r->q;
  if (!isfinite(point[0]) || !isfinite(point[1]) || !isfinite(point[2]) || !isfinite(range))
    return TS_ENAN;
  if (range < 0 || !q->has_region) return TS_EINVAL;
  const ts_region *reg = q->region;
  uint32_t ns = r->n_surf, S = r->n_sheets;
  /* validate everything before touching x */
  for (uint32_t c = 0; c < n_ctrl; c++) {
    if (ctrl[c] >= q->n_nodes) return TS_EINVAL;
    if (!isfinite(ctrl_pos[c][0]) || !isfinite(ctrl_pos[c][1]) || !isfinite(ctrl_pos[c][2]))
      return TS_ENAN;
  }
  for (uint32_t k = 0; k < reg->n_verts; k++)
    for (uint32_t s = 0; s < S; s++) {
      const double *p = x[s * ns + reg->verts[k]];
      if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) return TS_ENAN;
    }
  /* every node's force, as ts_qstatic_prepare checks it */
  for (uint32_t i = 0; f_ext && i < q->n_nodes; i++)
    if (!isfinite(f_ext[i][0]) || !isfinite(f_ext[i][1]) || !isfinite(f_ext[i][2]))
      return TS_ENAN;
  int rc = 0;
  for (uint32_t c = 0; c < n_ctrl && !rc; c++) {
    if (r->cmark[ctrl[c]]) rc = TS_EINVAL; /* repeated */
    r->cmark[ctrl[c]] = 1;
  }
  if (rc) {
    for (uint32_t c = 0; c < n_ctrl; c++) r->cmark[ctrl[c]] = 0;
    return rc;
  }
  for (uint32_t c = 0; c < n_ctrl; c++) memcpy(x[ctrl[c]], ctrl_pos[c], sizeof x[0]);

  /* the copy's surface, local numbering */
  for (uint32_t k = 0; k < r->nv0; k++) r->lmap[r->vmap[k]] = NONE;
  r->nv0 = r->nv = r->nt = r->n_nodes = r->n_springs = r->n_free = r->n_active = 0;
  r->n_outside = r->n_forced = 0;
  uint32_t nv0 = reg->n_verts, nt0 = reg->n_tris;
  if (nv0 > r->def.max_verts) rc = TS_EFULL;
  if (!rc) rc = grow(r, nv0, nt0);
  if (rc) goto out;
  for (uint32_t k = 0; k < nv0; k++) {
    r->vmap[k] = reg->verts[k];
    r->lmap[reg->verts[k]] = k;
    r->in_range[k] = reg->vert_in_range[k];
    r->anchored[k] = !reg->vert_in_range[k]; /* frozen flags for the refinement */
    memcpy(r->R[k], x[reg->verts[k]], sizeof r->R[k]);
  }
  r->nv0 = nv0;
  for (uint32_t k = 0; k < nt0; k++)
    for (int i = 0; i < 3; i++) r->tris[k][i] = r->lmap[q->surf->t[reg->tris[k]][i]];

  ts_leb_result *res = NULL;
  if (isfinite(r->def.max_edge)) {
    ball b = {{point[0], point[1], point[2]}, range, r->def.max_edge};
    ts_leb_def d = {.size_at = ball_size, .size_ud = &b, .max_verts = r->def.max_verts,
                    .frozen = r->anchored};
    ts_mesh m = {nv0, nt0, r->R, r->tris};
    rc = ts_leb_refine(&m, &d, &res, NULL, 0);
    if (rc) goto out;
  }
  uint32_t nv = res ? res->mesh->n_verts : nv0, nt = res ? res->mesh->n_tris : nt0;
  rc = grow(r, nv, nt);
  if (rc) goto out;
  r->nv = nv;
  r->nt = nt;
  r->n_nodes = nv * S;
  memset(r->n_children, 0, sizeof *r->n_children * nt0);
  if (res) {
    memcpy(r->tris, res->mesh->t, sizeof *r->tris * nt);
    for (uint32_t k = 0; k < nt; k++) r->tri_parent[k] = res->tri_parent[k];
    for (uint32_t i = 0; i < res->n_new; i++) {
      memcpy(r->parents[nv0 + i], res->parents[i], sizeof r->parents[0]);
      int in = dist3(res->mesh->v[nv0 + i], point) <= range;
      r->in_range[nv0 + i] = (uint8_t)in;
      if (!in) r->n_outside++;
    }
    r->n_forced = res->n_forced;
    ts_leb_result_free(res);
    res = NULL;
  } else {
    for (uint32_t k = 0; k < nt; k++) r->tri_parent[k] = k;
  }
  for (uint32_t k = 0; k < nt; k++) r->n_children[r->tri_parent[k]]++;

  /* nodes: rest and current positions, anchors, roles */
  for (uint32_t s = 0; s < S; s++)
    for (uint32_t v = 0; v < nv; v++) {
      uint32_t c = s * nv + v;
      if (v < nv0) {
        uint32_t i = s * ns + r->vmap[v];
        memcpy(r->X[c], r->rest[i], sizeof r->X[c]);
        memcpy(r->x[c], x[i], sizeof r->x[c]);
        if (f_ext)
          memcpy(r->fext[c], f_ext[i], sizeof r->fext[c]);
        else
          memset(r->fext[c], 0, sizeof r->fext[c]);
        r->anchored[c] = !(q->mass[i] > 0);
        r->role[c] = r->cmark[i] ? TS_QS_CONTROL
                     : (r->anchored[c] || !r->in_range[v]) ? TS_QS_FIXED
                                                          : TS_QS_FREE;
      } else {
        uint32_t a = s * nv + r->parents[v][0], b = s * nv + r->parents[v][1];
        for (int k = 0; k < 3; k++) {
          r->X[c][k] = 0.5 * (r->X[a][k] + r->X[b][k]);
          r->x[c][k] = 0.5 * (r->x[a][k] + r->x[b][k]);
        }
        memset(r->fext[c], 0, sizeof r->fext[c]); /* the load stays on the tissue's nodes */
        r->anchored[c] = r->anchored[a] && r->anchored[b];
        r->role[c] = (r->role[a] == TS_QS_CONTROL && r->role[b] == TS_QS_CONTROL) ? TS_QS_CONTROL
                     : (r->anchored[c] || !r->in_range[v]) ? TS_QS_FIXED
                                                          : TS_QS_FREE;
      }
    }

  /* springs and masses */
  if ((uint64_t)nt * per_tri(r) > r->cap_s) {
    rc = TS_EINTERNAL;
    goto out;
  }
  memset(r->mass, 0, sizeof *r->mass * r->n_nodes);
  /* a split triangle's densities once for all its children (taken again
   * per child, they made a patch-S build 1.9 ms instead of 1.6) */
  for (uint32_t k = 0; k < nt0; k++)
    if (r->n_children[k] > 1) tri_densities(r, reg->tris[k], &r->dens[k]);
  for (uint32_t k = 0; k < nt; k++) {
    uint32_t lp = r->tri_parent[k], P = reg->tris[lp];
    if (r->n_children[lp] == 1)
      add_unsplit(r, r->tris[k], P);
    else
      add_child(r, r->tris[k], &r->dens[lp]);
  }
  sort_springs(r);
  uint32_t m = 0;
  for (uint32_t k = 0; k < r->n_springs; k++) {
    if (m && r->spr[m - 1].key == r->spr[k].key)
      r->spr[m - 1].K += r->spr[k].K;
    else
      r->spr[m++] = r->spr[k];
  }
  r->n_springs = m;

  /* free nodes, active springs, the step */
  for (uint32_t c = 0; c < r->n_nodes; c++) {
    r->R[c][0] = 0;
    if (r->role[c] == TS_QS_FREE) {
      if (r->mass[c] > 0)
        r->free_nodes[r->n_free++] = c;
      else
        r->role[c] = TS_QS_FIXED;
    }
  }
  for (uint32_t k = 0; k < m; k++) {
    uint32_t a = (uint32_t)(r->spr[k].key >> 32), b = (uint32_t)r->spr[k].key;
    r->R[a][0] += r->spr[k].K;
    r->R[b][0] += r->spr[k].K;
    if (r->role[a] == TS_QS_FREE || r->role[b] == TS_QS_FREE) r->active[r->n_active++] = k;
  }
  double rowmax = 0;
  for (uint32_t c = 0; c < r->n_nodes; c++)
    if (r->R[c][0] > rowmax) rowmax = r->R[c][0];
  r->alpha = q->alpha;
  if (rowmax > 0 && 0.9 / rowmax < r->alpha) r->alpha = 0.9 / rowmax;
out:
  for (uint32_t c = 0; c < n_ctrl; c++) r->cmark[ctrl[c]] = 0;
  if (rc) r->nv = r->nt = r->n_nodes = r->n_springs = r->n_free = r->n_active = 0;
  return rc;
}

double ts_qsrefine_mean_edge(const ts_qstatic *q, const ts_tissue *t) {
  if (!q || !t || !q->surf || !t->rest || t->n_nodes != q->n_nodes) return 0;
  double sum = 0;
  uint64_t n = 0;
  for (uint32_t f = 0; f < q->surf->n_tris; f++)
    for (int i = 0; i < 3; i++) {
      sum += dist3(t->rest[q->surf->t[f][i]], t->rest[q->surf->t[f][(i + 1) % 3]]);
      n++;
    }
  return n ? sum / (double)n : 0;
}

void ts_qsrefine_forces(const ts_qsrefine *r, double (*f)[3]) {
  if (!r || !f) return;
  memset(f, 0, sizeof *f * r->n_nodes);
  for (uint32_t k = 0; k < r->n_springs; k++) {
    uint32_t a = (uint32_t)(r->spr[k].key >> 32), b = (uint32_t)r->spr[k].key;
    double d[3] = {r->x[b][0] - r->x[a][0], r->x[b][1] - r->x[a][1], r->x[b][2] - r->x[a][2]};
    double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(L > 0)) continue;
    double c = r->spr[k].K * (L - r->spr[k].L0) / L;
    for (int i = 0; i < 3; i++) {
      f[a][i] += c * d[i];
      f[b][i] -= c * d[i];
    }
  }
}

double ts_qsrefine_residual_at(const ts_qsrefine *r, const double (*x)[3], double (*R)[3]) {
  const double *g = r->q->gravity;
  for (uint32_t k = 0; k < r->n_free; k++) {
    uint32_t i = r->free_nodes[k];
    for (int c = 0; c < 3; c++) R[i][c] = r->mass[i] * g[c] + r->fext[i][c];
  }
  for (uint32_t k = 0; k < r->n_active; k++) {
    const ts_qsrefine_spring *s = &r->spr[r->active[k]];
    uint32_t a = (uint32_t)(s->key >> 32), b = (uint32_t)s->key;
    double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
    double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(L > 0)) continue;
    double c = s->K * (L - s->L0) / L;
    /* fixed and control ends accumulate too; their R is never read */
    R[a][0] += c * d[0];
    R[a][1] += c * d[1];
    R[a][2] += c * d[2];
    R[b][0] -= c * d[0];
    R[b][1] -= c * d[1];
    R[b][2] -= c * d[2];
  }
  double rmax2 = 0;
  for (uint32_t k = 0; k < r->n_free; k++) {
    uint32_t i = r->free_nodes[k];
    double r2 = R[i][0] * R[i][0] + R[i][1] * R[i][1] + R[i][2] * R[i][2];
    if (r2 > rmax2 || r2 != r2) rmax2 = r2;
  }
  return sqrt(rmax2);
}

/* One residual evaluation over the copy's free nodes at r->x; returns max |R|. */
static double residual(ts_qsrefine *r) {
  return ts_qsrefine_residual_at(r, (const double (*)[3])r->x, r->R);
}

/* The step of every free node (the header's "Step"): B[i] = omega B_i^-1
 * (block) or omega / D_i I (else) from the springs at the positions x,
 * row-major, m/N, and D[i] the sum of its springs' K. A node whose block
 * cannot be inverted (no springs) takes the global step. */
static void steps_at(const ts_qsrefine *r, const double (*x)[3], int block, double (*B)[9],
                     double *D) {
  for (uint32_t k = 0; k < r->n_free; k++) {
    uint32_t i = r->free_nodes[k];
    memset(B[i], 0, sizeof B[0]);
    D[i] = 0;
  }
  for (uint32_t k = 0; k < r->n_active; k++) {
    const ts_qsrefine_spring *s = &r->spr[r->active[k]];
    uint32_t e[2] = {(uint32_t)(s->key >> 32), (uint32_t)s->key};
    double M[9] = {0};
    if (block) {
      double d[3] = {x[e[1]][0] - x[e[0]][0], x[e[1]][1] - x[e[0]][1], x[e[1]][2] - x[e[0]][2]};
      double L2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], L = sqrt(L2);
      if (L2 > 0) {
        /* K [e e^T + g (I - e e^T)], g = |1 - L0/L|: the spring's tangent
         * stiffness with the magnitude of its transverse term, so that the
         * block bounds the tangent's diagonal from above in tension and the
         * step stays bounded along the directions a compressed spring
         * softens (with g = max(0, 1 - L0/L), test_qstatic_refine's 1.5 mm
         * press on 0.5 mm springs grew without bound) */
        double g = fabs(1.0 - s->L0 / L);
        for (int a = 0; a < 3; a++)
          for (int b = 0; b < 3; b++) M[3 * a + b] = s->K * (1 - g) * d[a] * d[b] / L2;
        for (int a = 0; a < 3; a++) M[4 * a] += s->K * g;
      }
    }
    for (int j = 0; j < 2; j++) {
      uint32_t i = e[j];
      if (r->role[i] != TS_QS_FREE) continue;
      D[i] += s->K;
      if (block)
        for (int c = 0; c < 9; c++) B[i][c] += M[c];
    }
  }
  for (uint32_t k = 0; k < r->n_free; k++) {
    uint32_t i = r->free_nodes[k];
    double *o = B[i];
    if (!(D[i] > 0)) {
      memset(o, 0, sizeof B[0]);
      o[0] = o[4] = o[8] = r->alpha;
      continue;
    }
    if (!block) {
      memset(o, 0, sizeof B[0]);
      o[0] = o[4] = o[8] = TS_QSREFINE_OMEGA / D[i];
      continue;
    }
    double b[9];
    memcpy(b, o, sizeof b);
    for (int a = 0; a < 3; a++) b[4 * a] += TS_QSREFINE_BLOCK_EPS * D[i];
    const double det = ts_mat3_inv_scaled(b, TS_QSREFINE_OMEGA, o); /* omega b^-1 */
    if (!(det > 0) || !isfinite(det)) { /* cannot happen for a positive block; be safe */
      memset(o, 0, sizeof B[0]);
      o[0] = o[4] = o[8] = TS_QSREFINE_OMEGA / D[i];
    }
  }
}

static void node_steps(ts_qsrefine *r) {
  steps_at(r, (const double (*)[3])r->x, r->def.step == TS_QSREFINE_STEP_BLOCK, r->step, r->kdiag);
}

void ts_qsrefine_block_steps(const ts_qsrefine *r, const double (*x)[3], double (*B)[9],
                             double *D) {
  steps_at(r, x, 1, B, D);
}

/* The old step's sweeps: x <- x + alpha R, one alpha for every node. */
static double relax_global(ts_qsrefine *r, double res, ts_qstatic_stats *s) {
  const double a = r->alpha, tol = r->q->p.tol;
  const uint32_t cap = r->q->p.max_iter;
  while (isfinite(res) && res >= tol && s->iterations < cap &&
         !ts__qs_stop_asked(r->q, s->iterations)) {
    for (uint32_t k = 0; k < r->n_free; k++) {
      uint32_t i = r->free_nodes[k];
      r->x[i][0] += a * r->R[i][0];
      r->x[i][1] += a * r->R[i][1];
      r->x[i][2] += a * r->R[i][2];
    }
    s->iterations++;
    res = residual(r);
  }
  return res;
}

/* The per-node steps' sweeps: x_i <- x_i + S_i R_i, the steps S_i taken
 * again at the positions reached whenever the nodes may have moved by
 * TS_QSREFINE_DRIFT times the copy's shortest active spring since they were
 * last taken (the sum over the sweeps of the largest move). Returns the last
 * max |R|; *blown is set (and the sweeps stop) when it left
 * TS_QSREFINE_BLOWUP times the start's or became non-finite. */
static double relax_nodes(ts_qsrefine *r, double res, ts_qstatic_stats *s, int *blown) {
  const double tol = r->q->p.tol, limit = TS_QSREFINE_BLOWUP * res;
  const uint32_t cap = r->q->p.max_iter;
  double lmin = INFINITY;
  for (uint32_t k = 0; k < r->n_active; k++) lmin = fmin(lmin, r->spr[r->active[k]].L0);
  const double reach = TS_QSREFINE_DRIFT * lmin;
  double drift = INFINITY;
  *blown = 0;
  while (res >= tol && s->iterations < cap && !ts__qs_stop_asked(r->q, s->iterations)) {
    if (!(drift <= reach)) {
      node_steps(r);
      drift = 0;
      r->n_refresh++;
    }
    double dmax2 = 0;
    for (uint32_t k = 0; k < r->n_free; k++) {
      uint32_t i = r->free_nodes[k];
      const double *S = r->step[i], *R = r->R[i];
      double d[3] = {S[0] * R[0] + S[1] * R[1] + S[2] * R[2],
                     S[3] * R[0] + S[4] * R[1] + S[5] * R[2],
                     S[6] * R[0] + S[7] * R[1] + S[8] * R[2]};
      r->x[i][0] += d[0];
      r->x[i][1] += d[1];
      r->x[i][2] += d[2];
      double d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
      if (d2 > dmax2) dmax2 = d2;
    }
    drift += sqrt(dmax2);
    s->iterations++;
    res = residual(r);
    if (!(res <= limit)) { /* also NaN */
      *blown = 1;
      break;
    }
  }
  return res;
}

int ts_qsrefine_relax(ts_qsrefine *r, ts_qstatic_stats *stats) {
  if (!r) return TS_EINVAL;
  ts_qstatic_stats s = {0, 0, 0, r->n_free, r->n_active};
  double res = residual(r), tol = r->q->p.tol;
  if (r->def.step != TS_QSREFINE_STEP_GLOBAL && isfinite(res) && res >= tol) {
    for (uint32_t k = 0; k < r->n_free; k++)
      memcpy(r->x_start[k], r->x[r->free_nodes[k]], sizeof r->x_start[0]);
    int blown = 0;
    r->n_refresh = 0;
    res = relax_nodes(r, res, &s, &blown);
    if (blown) {
      /* not seen in the tests or benchmarks: the old step from the start */
      for (uint32_t k = 0; k < r->n_free; k++)
        memcpy(r->x[r->free_nodes[k]], r->x_start[k], sizeof r->x_start[0]);
      res = residual(r);
    }
  }
  res = relax_global(r, res, &s); /* the old step; nothing to do once converged */
  s.residual = res;
  s.converged = isfinite(res) && res < tol;
  if (stats) *stats = s;
  if (!s.converged && s.iterations < r->q->p.max_iter && isfinite(res) && ts__qs_stop_asked(r->q, 0))
    return TS_ESHUTDOWN; /* the sweeps stopped for it (the tissue's x is not touched) */
  return isfinite(res) ? 0 : TS_EDIVERGED;
}

int ts_qsrefine_finish(ts_qsrefine *r, double (*x)[3], ts_qstatic_stats *stats) {
  if (!r || !x) return TS_EINVAL;
  int rc = ts_qsrefine_relax(r, stats);
  if (rc) return rc;
  uint32_t ns = r->n_surf, nv = r->nv;
  for (uint32_t s = 0; s < r->n_sheets; s++)
    for (uint32_t v = 0; v < r->nv0; v++)
      if (r->role[s * nv + v] == TS_QS_FREE)
        memcpy(x[s * ns + r->vmap[v]], r->x[s * nv + v], sizeof x[0]);
  return 0;
}

int ts_qsrefine_solve_selected(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                               const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                               const double (*f_ext)[3], ts_qstatic_stats *stats) {
  int rc = ts_qsrefine_build(r, x, point, range, ctrl, ctrl_pos, n_ctrl, f_ext);
  return rc ? rc : ts_qsrefine_finish(r, x, stats);
}

int ts_qsrefine_solve(ts_qsrefine *r, double (*x)[3], const double point[3], double range,
                      const uint32_t *ctrl, const double (*ctrl_pos)[3], uint32_t n_ctrl,
                      const double (*f_ext)[3], ts_qstatic_stats *stats) {
  if (!r || !x || !point) return TS_EINVAL;
  int rc = ts_qstatic_select_region(r->q, (const double(*)[3])x, point, range);
  return rc ? rc
            : ts_qsrefine_solve_selected(r, x, point, range, ctrl, ctrl_pos, n_ctrl, f_ext, stats);
}
