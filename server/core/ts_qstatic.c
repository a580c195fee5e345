/*
 * ts_qstatic.c: the quasi-static solve of the second method (ts_qstatic.h
 * gives the spring law, the residual and the relaxation x <- x + alpha R).
 *
 * The springs touching a free node are gathered once per solve (the active
 * list); each sweep clears R on the free nodes, adds gravity and external
 * forces, accumulates every active spring's force on its free ends, then
 * moves every free node by alpha R and takes max |R|. No allocation after
 * ts_qstatic_create.
 */
#include "ts_qstatic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_mesh.h"
#include "ts_meshtopo.h"
#include "ts_region.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

ts_qstatic_params ts_qstatic_default_params(const ts_tissue *t) {
  ts_qstatic_params p;
  memset(&p, 0, sizeof p);
  if (!t || t->n_springs == 0 || t->n_nodes == 0) return p;
  double *k = malloc(sizeof *k * t->n_springs);
  if (!k) return p;
  for (uint32_t s = 0; s < t->n_springs; s++) k[s] = t->springs[s].k;
  qsort(k, t->n_springs, sizeof *k, cmp_double);
  p.E = k[t->n_springs / 2];
  free(k);
  p.b = 1.0;
  p.d = 0.5;
  p.alpha = 0.0;
  double gmag = sqrt(t->gravity[0] * t->gravity[0] + t->gravity[1] * t->gravity[1] +
                     t->gravity[2] * t->gravity[2]);
  double wmax = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] > 0) {
      double w = gmag / t->inv_mass[i];
      if (w > wmax) wmax = w;
    }
  p.tol = fmax(1e-4 * wmax, 1e-12);
  p.max_iter = 200000;
  return p;
}

static int params_ok(const ts_qstatic_params *p) {
  return isfinite(p->E) && p->E > 0 && isfinite(p->b) && p->b > 0 && isfinite(p->d) && p->d > 0 &&
         isfinite(p->alpha) && p->alpha >= 0 && isfinite(p->tol) && p->tol > 0 && p->max_iter >= 1;
}

void ts_qstatic_destroy(ts_qstatic *q) {
  if (!q) return;
  free(q->ends);
  free(q->L0);
  free(q->K);
  free(q->mass);
  free(q->adj_off);
  free(q->adj);
  ts_mesh_free(q->surf);
  ts_meshtopo_free(q->topo);
  ts_region_free(q->region);
  free(q->region_nodes);
  free(q->role);
  free(q->free_nodes);
  free(q->active);
  free(q->R);
  free(q->x_start);
  free(q);
}

/* The outer surface: the triangles whose nodes all lie on sheet 0. */
static int build_surface(ts_qstatic *q, const ts_tissue *t) {
  uint32_t ns = q->n_surf, nt = 0;
  for (uint32_t i = 0; i < t->n_tris; i++)
    if (t->tris[i][0] < ns && t->tris[i][1] < ns && t->tris[i][2] < ns) nt++;
  if (nt == 0) return 0;
  int rc = ts_mesh_alloc(ns, nt, &q->surf);
  if (rc) return rc;
  memcpy(q->surf->v, t->rest, sizeof *q->surf->v * ns);
  nt = 0;
  for (uint32_t i = 0; i < t->n_tris; i++)
    if (t->tris[i][0] < ns && t->tris[i][1] < ns && t->tris[i][2] < ns)
      memcpy(q->surf->t[nt++], t->tris[i], sizeof t->tris[i]);
  rc = ts_meshtopo_build(q->surf, &q->topo);
  if (rc) return rc;
  return ts_region_alloc(ns, nt, &q->region);
}

int ts_qstatic_create(const ts_tissue *t, const ts_qstatic_params *p, ts_qstatic **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!t || !p || t->n_springs == 0 || t->n_nodes == 0 || !params_ok(p)) return TS_EINVAL;
  uint32_t n = t->n_nodes, m = t->n_springs;
  ts_qstatic *q = calloc(1, sizeof *q);
  if (!q) return TS_ENOMEM;
  q->p = *p;
  q->stop = t->stop;
  q->n_nodes = n;
  q->n_springs = m;
  memcpy(q->gravity, t->gravity, sizeof q->gravity);
  q->ends = malloc(sizeof *q->ends * m);
  q->L0 = malloc(sizeof *q->L0 * m);
  q->K = malloc(sizeof *q->K * m);
  q->mass = malloc(sizeof *q->mass * n);
  q->adj_off = calloc(n + 1, sizeof *q->adj_off);
  q->adj = malloc(sizeof *q->adj * 2 * (size_t)m);
  q->region_nodes = malloc(sizeof *q->region_nodes * n);
  q->role = calloc(n, 1);
  q->free_nodes = malloc(sizeof *q->free_nodes * n);
  q->active = malloc(sizeof *q->active * m);
  q->R = calloc(n, sizeof *q->R);
  q->x_start = malloc(sizeof *q->x_start * n);
  int rc = TS_ENOMEM;
  if (!q->ends || !q->L0 || !q->K || !q->mass || !q->adj_off || !q->adj || !q->region_nodes ||
      !q->role || !q->free_nodes || !q->active || !q->R || !q->x_start)
    goto fail;
  rc = TS_EINVAL;
  for (uint32_t i = 0; i < n; i++) {
    double im = t->inv_mass[i];
    if (!isfinite(im) || im < 0) goto fail;
    q->mass[i] = im > 0 ? 1.0 / im : 0.0;
  }
  q->L_min = INFINITY;
  q->L_max = 0;
  for (uint32_t s = 0; s < m; s++) {
    uint32_t a = t->springs[s].a, b = t->springs[s].b;
    if (a >= n || b >= n || a == b) goto fail;
    double d[3] = {t->rest[b][0] - t->rest[a][0], t->rest[b][1] - t->rest[a][1],
                   t->rest[b][2] - t->rest[a][2]};
    double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(L > 0) || !isfinite(L)) goto fail;
    q->ends[s][0] = a;
    q->ends[s][1] = b;
    q->L0[s] = L;
    if (L < q->L_min) q->L_min = L;
    if (L > q->L_max) q->L_max = L;
    q->adj_off[a + 1]++;
    q->adj_off[b + 1]++;
  }
  int uniform = q->L_max - q->L_min < 1e-12 * q->L_max;
  double kmax_row = 0;
  for (uint32_t s = 0; s < m; s++) {
    double sn = uniform ? 1.0 : (q->L0[s] - q->L_min) / (q->L_max - q->L_min);
    q->K[s] = p->E * (1.0 + p->d) / (pow(sn, p->b) + p->d);
  }
  for (uint32_t i = 0; i < n; i++) q->adj_off[i + 1] += q->adj_off[i];
  {
    /* fill the per-node lists, using free_nodes as the fill cursor */
    uint32_t *cur = q->free_nodes;
    memcpy(cur, q->adj_off, sizeof *cur * n);
    for (uint32_t s = 0; s < m; s++) {
      q->adj[cur[q->ends[s][0]]++] = s;
      q->adj[cur[q->ends[s][1]]++] = s;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    double row = 0;
    for (uint32_t k = q->adj_off[i]; k < q->adj_off[i + 1]; k++) row += q->K[q->adj[k]];
    if (row > kmax_row) kmax_row = row;
  }
  q->alpha = p->alpha > 0 ? p->alpha : 0.9 / kmax_row;
  q->n_sheets = t->n_sheets ? t->n_sheets : 1;
  q->n_surf = t->nodes_per_sheet && t->n_sheets ? t->nodes_per_sheet : n;
  if (q->n_surf > n) goto fail;
  rc = build_surface(q, t);
  if (rc) goto fail;
  *out = q;
  return 0;
fail:
  ts_qstatic_destroy(q);
  return rc;
}

void ts_qstatic_node_force(const ts_qstatic *q, const double (*x)[3], uint32_t i, double f[3]) {
  f[0] = f[1] = f[2] = 0;
  for (uint32_t k = q->adj_off[i]; k < q->adj_off[i + 1]; k++) {
    uint32_t s = q->adj[k];
    uint32_t j = q->ends[s][0] == i ? q->ends[s][1] : q->ends[s][0];
    double d[3] = {x[j][0] - x[i][0], x[j][1] - x[i][1], x[j][2] - x[i][2]};
    double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (L <= 0) continue;
    double c = q->K[s] * (L - q->L0[s]) / L;
    f[0] += c * d[0];
    f[1] += c * d[1];
    f[2] += c * d[2];
  }
}

int ts_qstatic_prepare(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                       const double (*ctrl_pos)[3], uint32_t n_ctrl, const double (*f_ext)[3],
                       int local) {
  if (!q || !x || (n_ctrl && (!ctrl || !ctrl_pos))) return TS_EINVAL;
  if (local && !q->has_region) return TS_EINVAL;
  uint32_t n = q->n_nodes, n_cand = local ? q->n_region : n;
  q->n_free = q->n_active = 0;
  for (uint32_t k = 0; k < n_cand; k++) {
    uint32_t i = local ? q->region_nodes[k] : k;
    if (!isfinite(x[i][0]) || !isfinite(x[i][1]) || !isfinite(x[i][2])) return TS_ENAN;
    if (f_ext && (!isfinite(f_ext[i][0]) || !isfinite(f_ext[i][1]) || !isfinite(f_ext[i][2])))
      return TS_ENAN;
  }
  for (uint32_t c = 0; c < n_ctrl; c++) {
    if (ctrl[c] >= n) return TS_EINVAL;
    if (!isfinite(ctrl_pos[c][0]) || !isfinite(ctrl_pos[c][1]) || !isfinite(ctrl_pos[c][2]))
      return TS_ENAN;
  }
  memset(q->role, TS_QS_FIXED, n);
  for (uint32_t c = 0; c < n_ctrl; c++) {
    if (q->role[ctrl[c]] == TS_QS_CONTROL) {
      memset(q->role, TS_QS_FIXED, n);
      return TS_EINVAL; /* repeated */
    }
    q->role[ctrl[c]] = TS_QS_CONTROL;
  }
  for (uint32_t c = 0; c < n_ctrl; c++) memcpy(x[ctrl[c]], ctrl_pos[c], sizeof x[0]);
  for (uint32_t k = 0; k < n_cand; k++) {
    uint32_t i = local ? q->region_nodes[k] : k;
    if (q->mass[i] > 0 && q->role[i] == TS_QS_FIXED) {
      q->role[i] = TS_QS_FREE;
      q->free_nodes[q->n_free++] = i;
    }
  }
  for (uint32_t k = 0; k < q->n_free; k++) {
    uint32_t i = q->free_nodes[k];
    for (uint32_t e = q->adj_off[i]; e < q->adj_off[i + 1]; e++) {
      uint32_t sp = q->adj[e];
      uint32_t j = q->ends[sp][0] == i ? q->ends[sp][1] : q->ends[sp][0];
      if (q->role[j] != TS_QS_FREE || j > i) q->active[q->n_active++] = sp;
    }
  }
  return 0;
}

/* One residual evaluation over the free nodes; returns max |R|. */
static double residual(ts_qstatic *q, const double (*x)[3], const double (*f_ext)[3]) {
  double(*R)[3] = q->R;
  for (uint32_t k = 0; k < q->n_free; k++) {
    uint32_t i = q->free_nodes[k];
    double m = q->mass[i];
    R[i][0] = m * q->gravity[0];
    R[i][1] = m * q->gravity[1];
    R[i][2] = m * q->gravity[2];
    if (f_ext) {
      R[i][0] += f_ext[i][0];
      R[i][1] += f_ext[i][1];
      R[i][2] += f_ext[i][2];
    }
  }
  for (uint32_t k = 0; k < q->n_active; k++) {
    uint32_t s = q->active[k], a = q->ends[s][0], b = q->ends[s][1];
    double d[3] = {x[b][0] - x[a][0], x[b][1] - x[a][1], x[b][2] - x[a][2]};
    double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(L > 0)) continue;
    double c = q->K[s] * (L - q->L0[s]) / L;
    double f[3] = {c * d[0], c * d[1], c * d[2]}; /* on a, towards b when stretched */
    /* fixed and control ends accumulate too; their R is never read */
    R[a][0] += f[0];
    R[a][1] += f[1];
    R[a][2] += f[2];
    R[b][0] -= f[0];
    R[b][1] -= f[1];
    R[b][2] -= f[2];
  }
  double rmax2 = 0;
  for (uint32_t k = 0; k < q->n_free; k++) {
    uint32_t i = q->free_nodes[k];
    double r2 = R[i][0] * R[i][0] + R[i][1] * R[i][1] + R[i][2] * R[i][2];
    if (r2 > rmax2 || r2 != r2) rmax2 = r2;
  }
  return sqrt(rmax2);
}

static int relax(ts_qstatic *q, double (*x)[3], const double (*f_ext)[3], ts_qstatic_stats *st) {
  ts_qstatic_stats s = {0, 0, 0, q->n_free, q->n_active};
  double r = residual(q, (const double(*)[3])x, f_ext);
  double a = q->alpha;
  int stopped = 0;
  while (isfinite(r) && r >= q->p.tol && s.iterations < q->p.max_iter &&
         !(stopped = ts__qs_stop_asked(q, s.iterations))) {
    for (uint32_t k = 0; k < q->n_free; k++) {
      uint32_t i = q->free_nodes[k];
      x[i][0] += a * q->R[i][0];
      x[i][1] += a * q->R[i][1];
      x[i][2] += a * q->R[i][2];
    }
    s.iterations++;
    r = residual(q, (const double(*)[3])x, f_ext);
  }
  s.residual = r;
  s.converged = isfinite(r) && r < q->p.tol;
  if (st) *st = s;
  if (stopped) return TS_ESHUTDOWN;
  return isfinite(r) ? 0 : TS_EDIVERGED;
}

int ts_qstatic_relax(ts_qstatic *q, double (*x)[3], const double (*f_ext)[3],
                     ts_qstatic_stats *stats) {
  if (!q || !x) return TS_EINVAL;
  for (uint32_t k = 0; k < q->n_free; k++)
    memcpy(q->x_start[k], x[q->free_nodes[k]], sizeof x[0]);
  int rc = relax(q, x, f_ext, stats);
  if (rc) /* no NaN (nor a half-done solve) leaves it: back to the start */
    for (uint32_t k = 0; k < q->n_free; k++)
      memcpy(x[q->free_nodes[k]], q->x_start[k], sizeof x[0]);
  return rc;
}

static int solve(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl, const double (*ctrl_pos)[3],
                 uint32_t n_ctrl, const double (*f_ext)[3], ts_qstatic_stats *stats, int local) {
  int rc = ts_qstatic_prepare(q, x, ctrl, ctrl_pos, n_ctrl, f_ext, local);
  return rc ? rc : ts_qstatic_relax(q, x, f_ext, stats);
}

int ts_qstatic_solve(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                     const double (*ctrl_pos)[3], uint32_t n_ctrl, const double (*f_ext)[3],
                     ts_qstatic_stats *stats) {
  return solve(q, x, ctrl, ctrl_pos, n_ctrl, f_ext, stats, 0);
}

int ts_qstatic_solve_region(ts_qstatic *q, double (*x)[3], const uint32_t *ctrl,
                            const double (*ctrl_pos)[3], uint32_t n_ctrl,
                            const double (*f_ext)[3], ts_qstatic_stats *stats) {
  return solve(q, x, ctrl, ctrl_pos, n_ctrl, f_ext, stats, 1);
}

int ts_qstatic_select_region(ts_qstatic *q, const double (*x)[3], const double point[3],
                             double range) {
  if (!q || !x || !point) return TS_EINVAL;
  if (!isfinite(point[0]) || !isfinite(point[1]) || !isfinite(point[2]) || !isfinite(range))
    return TS_ENAN;
  if (range < 0 || !q->surf) return TS_EINVAL;
  /* the surface follows the current positions of sheet 0 */
  memcpy(q->surf->v, x, sizeof *q->surf->v * q->n_surf);
  uint32_t best = 0;
  double bd = INFINITY;
  for (uint32_t t = 0; t < q->surf->n_tris; t++) {
    const uint32_t *v = q->surf->t[t];
    double dist = ts_point_triangle_distance(point, q->surf->v[v[0]], q->surf->v[v[1]],
                                             q->surf->v[v[2]], NULL);
    if (dist < bd) {
      bd = dist;
      best = t;
    }
  }
  int rc = ts_region_from_triangle(q->region, q->surf, q->topo, best, point, range);
  if (rc) return rc;
  q->n_region = 0;
  for (uint32_t k = 0; k < q->region->n_verts; k++) {
    if (!q->region->vert_in_range[k]) continue;
    uint32_t v = q->region->verts[k];
    for (uint32_t s = 0; s < q->n_sheets; s++) {
      uint64_t node = (uint64_t)s * q->n_surf + v;
      if (node < q->n_nodes) q->region_nodes[q->n_region++] = (uint32_t)node;
    }
  }
  q->has_region = 1;
  return 0;
}

/* Nesterov's accelerated gradient method (Y. Nesterov, "A method for
 * solving the convex programming problem with convergence rate O(1/k^2)",
 * 1983) on the spring energy, whose negative gradient is R, with the
 * gradient restart of B. O'Donoghue and E. Candes ("Adaptive restart for
 * accelerated gradient schemes", Found. Comput. Math. 15, 2015): the
 * momentum is dropped whenever the step goes against the force. In place:
 * x moves to the look-ahead point x + beta v, R is taken there, then x
 * moves on by a R and v = beta v + a R. The step a is half the relaxation's
 * (Gershgorin bounds the stiffness' largest eigenvalue by twice the largest
 * row sum, so a times it stays below 1, as the method needs). */
int ts_qstatic_relax_accel(ts_qstatic *q, double (*x)[3], const double (*f_ext)[3],
                           ts_qstatic_stats *stats) {
  if (!q || !x) return TS_EINVAL;
  ts_qstatic_stats s = {0, 0, 0, q->n_free, q->n_active};
  double(*v)[3] = calloc(q->n_free ? q->n_free : 1, sizeof *v);
  if (!v) return TS_ENOMEM;
  for (uint32_t k = 0; k < q->n_free; k++)
    memcpy(q->x_start[k], x[q->free_nodes[k]], sizeof x[0]);
  const double a = 0.5 * q->alpha;
  uint32_t since_restart = 0;
  double r = residual(q, (const double(*)[3])x, f_ext);
  int stopped = 0;
  while (isfinite(r) && r >= q->p.tol && s.iterations < q->p.max_iter &&
         !(stopped = ts__qs_stop_asked(q, s.iterations))) {
    double beta = (double)since_restart / (since_restart + 3.0);
    /* the step, and whether it goes with the force at the look-ahead point */
    double along = 0;
    for (uint32_t k = 0; k < q->n_free; k++) {
      uint32_t i = q->free_nodes[k];
      for (int c = 0; c < 3; c++) {
        v[k][c] = beta * v[k][c] + a * q->R[i][c];
        x[i][c] += a * q->R[i][c];
        along += q->R[i][c] * v[k][c];
      }
    }
    s.iterations++;
    if (along < 0) { /* against the force: restart from here without momentum */
      memset(v, 0, sizeof *v * q->n_free);
      since_restart = 0;
    } else {
      since_restart++;
    }
    /* on to the next look-ahead point */
    double nb = (double)since_restart / (since_restart + 3.0);
    for (uint32_t k = 0; k < q->n_free; k++) {
      uint32_t i = q->free_nodes[k];
      x[i][0] += nb * v[k][0];
      x[i][1] += nb * v[k][1];
      x[i][2] += nb * v[k][2];
    }
    r = residual(q, (const double(*)[3])x, f_ext);
  }
  free(v);
  s.residual = r;
  s.converged = isfinite(r) && r < q->p.tol;
  if (stats) *stats = s;
  if (stopped || !isfinite(r)) { /* no NaN (nor a half-done solve) leaves it: back to the start */
    for (uint32_t k = 0; k < q->n_free; k++)
      memcpy(x[q->free_nodes[k]], q->x_start[k], sizeof x[0]);
    return stopped ? TS_ESHUTDOWN : TS_EDIVERGED;
  }
  return 0;
}
