/*
 * ts_learn_apply.c: force applications for the learned shortcut
 * (ts_learn.h): a tool press picks the control points, then an interval is
 * answered by the quasi-static solve (recording the samples) or by the
 * trained model; and the comparison of both from one state, which gives the
 * held-out error. Scratch is allocated by ts_learner_create only.
 */
#include "ts_learn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_learn_internal.h"
#include "ts_mat3.h"

int ts_learner_create(ts_qstatic *q, double range, uint32_t sample_cap, ts_learner **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!q || !isfinite(range) || range < 0 || (range > 0 && !q->surf)) return TS_EINVAL;
  ts_learner *l = calloc(1, sizeof *l);
  if (!l) return TS_ENOMEM;
  l->q = q;
  l->range = range;
  l->local = range > 0;
  uint32_t n = q->n_nodes;
  int rc = ts_learn_set_create(sample_cap, q->n_sheets, &l->set);
  l->x0 = malloc(sizeof *l->x0 * n);
  l->ctrl = malloc(sizeof *l->ctrl * n);
  l->ctrl_pos = malloc(sizeof *l->ctrl_pos * n);
  l->nodes = malloc(sizeof *l->nodes * n);
  l->feat = malloc(sizeof *l->feat * n);
  l->va = malloc(sizeof *l->va * n);
  l->vb = malloc(sizeof *l->vb * n);
  l->vm = malloc(sizeof *l->vm * n);
  l->dinv = malloc(sizeof *l->dinv * n);
  l->binv = malloc(sizeof *l->binv * n);
  l->cmap = malloc(sizeof *l->cmap * n);
  if (l->cmap)
    for (uint32_t i = 0; i < n; i++) l->cmap[i] = UINT32_MAX;
  if (rc || !l->x0 || !l->ctrl || !l->ctrl_pos || !l->nodes || !l->feat || !l->va || !l->vb ||
      !l->vm || !l->dinv || !l->binv || !l->cmap) {
    ts_learner_destroy(l);
    return rc ? rc : TS_ENOMEM;
  }
  *out = l;
  return 0;
}

void ts_learner_destroy(ts_learner *l) {
  if (!l) return;
  ts_learn_set_free(l->set);
  free(l->x0);
  free(l->ctrl);
  free(l->ctrl_pos);
  free(l->nodes);
  free(l->feat);
  free(l->va);
  free(l->vb);
  free(l->vm);
  free(l->dinv);
  free(l->binv);
  free(l->cmap);
  free(l->ca);
  free(l->cb);
  free(l->cm);
  free(l->cbinv);
  free(l->cd);
  ts_qsrefine_destroy(l->rq);
  free(l);
}

int ts_learner_set_refine(ts_learner *l, const ts_tissue *t, double refine_edge) {
  if (!l || !(refine_edge >= 0)) return TS_EINVAL;
  if (refine_edge == 0) {
    ts_qsrefine_destroy(l->rq);
    l->rq = NULL;
    return 0;
  }
  if (!l->local || !t) return TS_EINVAL;
  ts_qsrefine_def d = {.max_edge = refine_edge};
  ts_qsrefine *rq = NULL;
  int rc = ts_qsrefine_create(l->q, t, &d, &rq);
  if (rc) return rc;
  ts_qsrefine_destroy(l->rq);
  l->rq = rq;
  return 0;
}

/* The solve of an interval begun by begin(): the region's free nodes of x
 * relaxed, on the tissue's mesh or on the refined copy. */
static int solve_interval(ts_learner *l, double (*x)[3], const double point[3], uint32_t nc,
                          ts_qstatic_stats *st) {
  if (!l->rq) return ts_qstatic_relax(l->q, x, l->f_ext, st);
  if (l->copy_built) { /* begin() built this interval's copy for spread2r */
    l->copy_built = 0;
    return ts_qsrefine_finish(l->rq, x, st);
  }
  return ts_qsrefine_solve_selected(l->rq, x, point, l->range, l->ctrl,
                                    (const double(*)[3])l->ctrl_pos, nc, l->f_ext, st);
}

ts_learn_solve ts_learner_solve(const ts_learner *l) {
  ts_learn_solve s = {TS_LEARN_SOLVE_PLAIN, 0};
  if (l && l->rq) {
    s.kind = TS_LEARN_SOLVE_REFINED;
    s.refine_edge = l->rq->def.max_edge;
  }
  return s;
}

int ts_learner_set_model(ts_learner *l, const ts_learn_model *m) {
  if (!l || !m || m->n_sheets != l->q->n_sheets ||
      ts_learn_n_params(m->kind, m->n_sheets) != m->n_params || m->n_params == 0)
    return TS_EINVAL;
  l->model = *m;
  l->learned = 1;
  return 0;
}

/* Control points of a press at positions x; returns their count. */
static uint32_t press_controls(ts_learner *l, const double (*x)[3], const ts_learn_press *p) {
  const ts_qstatic *q = l->q;
  uint32_t nc = 0;
  double r2 = p->radius * p->radius;
  for (uint32_t i = 0; i < q->n_surf; i++) {
    if (!(q->mass[i] > 0)) continue;
    double d[3] = {x[i][0] - p->point[0], x[i][1] - p->point[1], x[i][2] - p->point[2]};
    if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] > r2) continue;
    l->ctrl[nc] = i;
    for (int c = 0; c < 3; c++) l->ctrl_pos[nc][c] = x[i][c] + p->depth * p->dir[c];
    nc++;
  }
  return nc;
}

static int press_ok(const ts_learn_press *p) {
  for (int c = 0; c < 3; c++)
    if (!isfinite(p->point[c]) || !isfinite(p->dir[c])) return TS_ENAN;
  if (!isfinite(p->radius) || !isfinite(p->depth)) return TS_ENAN;
  double n = sqrt(p->dir[0] * p->dir[0] + p->dir[1] * p->dir[1] + p->dir[2] * p->dir[2]);
  if (fabs(n - 1) > 1e-6 || !(p->radius > 0)) return TS_EINVAL;
  return 0;
}

/* Which features an interval computes (x0 and g always; f, the internal
 * force at x0, only for the kinds that read it: a learned step of a spread
 * kind leaves it zero). */
enum {
  FEAT_F1 = 1,
  FEAT_SPREAD = 2,
  FEAT_SPREAD2 = 4,
  FEAT_SPREAD2R = 8,
  FEAT_F = 16,
  FEAT_ALL = FEAT_F | FEAT_F1 | FEAT_SPREAD | FEAT_SPREAD2 | FEAT_SPREAD2R
};

static unsigned model_features(ts_learn_kind k) {
  switch (k) {
  case TS_LEARN_METHOD:
    return FEAT_F;
  case TS_LEARN_RICH:
    return FEAT_F | FEAT_F1;
  case TS_LEARN_SPREAD:
    return FEAT_SPREAD;
  case TS_LEARN_SPREAD2:
    return FEAT_SPREAD2;
  case TS_LEARN_SPREAD2R:
    return FEAT_SPREAD2R;
  default:
    return 0;
  }
}

/* spread2's step of node i at positions x: l->binv[i] = omega (B_i)^-1,
 * B_i = sum_j K_ij e e^T + eps D_i I over its springs (ts_learn.h), by the
 * adjugate; zero for a node without springs. */
static void block_scale(ts_learner *l, const double (*x)[3], uint32_t i) {
  const ts_qstatic *q = l->q;
  double B[9] = {0}, D = 0;
  for (uint32_t e = q->adj_off[i]; e < q->adj_off[i + 1]; e++) {
    uint32_t sp = q->adj[e];
    uint32_t j = q->ends[sp][0] == i ? q->ends[sp][1] : q->ends[sp][0];
    double d[3] = {x[j][0] - x[i][0], x[j][1] - x[i][1], x[j][2] - x[i][2]};
    double L2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    D += q->K[sp];
    if (!(L2 > 0)) continue;
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) B[3 * a + b] += q->K[sp] * d[a] * d[b] / L2;
  }
  for (int a = 0; a < 3; a++) B[4 * a] += TS_LEARN_SPREAD2_EPS * D;
  double *o = l->binv[i];
  const double det = ts_mat3_inv_scaled(B, TS_LEARN_SPREAD_OMEGA, o);
  if (!(D > 0) || !(det > 0) || !isfinite(det)) memset(o, 0, sizeof l->binv[0]);
}

/* The spread models' features of the nf free nodes fr (ts_learn.h): from
 * y = x (the start state, the roles of the solve just prepared), sweeps of
 * the relaxation with momentum
 *   m <- mu m + S_i R(y),  y <- y + m
 * over the free nodes (R: springs and gravity, control points and fixed
 * nodes at x), S_i = omega / D_i (block 0: the spread model) or omega
 * B_i^-1 (block 1: spread2), the displacement y - x kept at 1, 2, 4, ...,
 * 2^(hops-1) sweeps as increments (in u, or u2 for block 1). Uses l->va
 * (y), l->vb (R), l->vm (m), l->dinv or l->binv, indexed by node; entries
 * of nodes that are not free are never read. */
static void spread_features(ts_learner *l, const double (*x)[3], uint32_t nf, const uint32_t *fr,
                            int block) {
  const ts_qstatic *q = l->q;
  const uint32_t hops = block ? TS_LEARN_HOPS2 : TS_LEARN_HOPS;
  double(*y)[3] = l->va, (*R)[3] = l->vb, (*m)[3] = l->vm;
  for (uint32_t k = 0; k < nf; k++) {
    uint32_t i = fr[k];
    if (block) {
      block_scale(l, x, i);
    } else {
      double D = 0;
      for (uint32_t e = q->adj_off[i]; e < q->adj_off[i + 1]; e++) D += q->K[q->adj[e]];
      l->dinv[i] = D > 0 ? TS_LEARN_SPREAD_OMEGA / D : 0;
    }
    memcpy(y[i], x[i], sizeof y[0]);
    memset(m[i], 0, sizeof m[0]);
  }
  uint32_t sweeps = 0;
  for (uint32_t h = 0; h < hops; h++) {
    uint32_t target = 1u << h;
    for (; sweeps < target; sweeps++) {
      for (uint32_t k = 0; k < nf; k++) {
        uint32_t i = fr[k];
        for (int c = 0; c < 3; c++) R[i][c] = q->mass[i] * q->gravity[c];
      }
      for (uint32_t e = 0; e < q->n_active; e++) {
        uint32_t sp = q->active[e], a = q->ends[sp][0], b = q->ends[sp][1];
        int fa = q->role[a] == TS_QS_FREE, fb = q->role[b] == TS_QS_FREE;
        const double *xa = fa ? y[a] : x[a], *xb = fb ? y[b] : x[b];
        double d[3] = {xb[0] - xa[0], xb[1] - xa[1], xb[2] - xa[2]};
        double L = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        if (!(L > 0)) continue;
        double c = q->K[sp] * (L - q->L0[sp]) / L;
        for (int j = 0; j < 3; j++) {
          if (fa) R[a][j] += c * d[j];
          if (fb) R[b][j] -= c * d[j];
        }
      }
      if (block) {
        for (uint32_t k = 0; k < nf; k++) {
          uint32_t i = fr[k];
          const double *S = l->binv[i];
          for (int c = 0; c < 3; c++) {
            m[i][c] = TS_LEARN_SPREAD_MU * m[i][c] + S[3 * c] * R[i][0] + S[3 * c + 1] * R[i][1] +
                      S[3 * c + 2] * R[i][2];
          }
          for (int c = 0; c < 3; c++) y[i][c] += m[i][c];
        }
      } else {
        for (uint32_t k = 0; k < nf; k++) {
          uint32_t i = fr[k];
          for (int c = 0; c < 3; c++) {
            m[i][c] = TS_LEARN_SPREAD_MU * m[i][c] + l->dinv[i] * R[i][c];
            y[i][c] += m[i][c];
          }
        }
      }
    }
    /* u_h = v^(2^h) - v^(2^(h-1)), v the displacement y - x */
    for (uint32_t k = 0; k < nf; k++) {
      ts_learn_sample *s = &l->feat[k];
      double(*u)[3] = block ? s->u2 : s->u;
      uint32_t i = fr[k];
      for (int c = 0; c < 3; c++) {
        double prev = 0;
        for (uint32_t j = 0; j < h; j++) prev += u[j][c];
        u[h][c] = (y[i][c] - x[i][c]) - prev;
      }
    }
  }
}

/* Features of the free nodes at x (the start state, controls placed):
 * x0 and g, and those of `need` (FEAT_*). spread2r's need the copy
 * built (l->copy_built) when the solve is refined; on the plain solve they
 * are spread2's (ts_learn.h). */
static int features(ts_learner *l, const double (*x)[3], uint32_t nf, const uint32_t *fr,
                     unsigned need) {
  const ts_qstatic *q = l->q;
  for (uint32_t k = 0; k < nf; k++) {
    uint32_t i = fr[k];
    ts_learn_sample *s = &l->feat[k];
    memcpy(s->x0, x[i], sizeof s->x0);
    if (need & FEAT_F)
      ts_qstatic_node_force(q, x, i, s->f);
    else
      memset(s->f, 0, sizeof s->f);
    for (int c = 0; c < 3; c++) s->g[c] = q->mass[i] * q->gravity[c];
    s->sheet = i / q->n_surf;
    memset(s->x1, 0, sizeof s->x1);
    memset(s->f1, 0, sizeof s->f1);
    memset(s->u, 0, sizeof s->u);
    memset(s->u2, 0, sizeof s->u2);
    memset(s->u2r, 0, sizeof s->u2r);
    if (!(need & FEAT_F1)) continue;
    double acc[3] = {0, 0, 0};
    uint32_t deg = q->adj_off[i + 1] - q->adj_off[i];
    for (uint32_t e = q->adj_off[i]; e < q->adj_off[i + 1]; e++) {
      uint32_t sp = q->adj[e];
      uint32_t j = q->ends[sp][0] == i ? q->ends[sp][1] : q->ends[sp][0];
      double fj[3];
      ts_qstatic_node_force(q, x, j, fj);
      for (int c = 0; c < 3; c++) acc[c] += fj[c];
    }
    for (int c = 0; c < 3; c++) s->f1[c] = deg ? acc[c] / deg : 0;
  }
  if (need & FEAT_SPREAD) spread_features(l, x, nf, fr, 0);
  if (need & FEAT_SPREAD2R && !l->rq) need |= FEAT_SPREAD2;
  if (need & FEAT_SPREAD2) spread_features(l, x, nf, fr, 1);
  if (!(need & FEAT_SPREAD2R)) return 0;
  if (l->rq) return ts__learn_spread2r_features(l, nf, fr);
  for (uint32_t k = 0; k < nf; k++) {
    _Static_assert(TS_LEARN_HOPS2R <= TS_LEARN_HOPS2,
                   "spread2r reads spread2's on the plain solve");
    memcpy(l->feat[k].u2r, l->feat[k].u2, sizeof l->feat[k].u2r);
  }
  return 0;
}

/* Region and free nodes of an interval whose nc controls are in l->ctrl /
 * l->ctrl_pos; features when wanted (FEAT_* beyond x0, f, g in need). */
static int begin(ts_learner *l, double (*x)[3], const double point[3], uint32_t nc,
                 int want_features, unsigned need) {
  int rc;
  if (l->local) {
    rc = ts_qstatic_select_region(l->q, (const double(*)[3])x, point, l->range);
    if (rc) return rc;
  }
  rc = ts_qstatic_prepare(l->q, x, l->ctrl, (const double(*)[3])l->ctrl_pos, nc, l->f_ext,
                          l->local);
  if (rc) return rc;
  l->copy_built = 0;
  if (want_features && (need & FEAT_SPREAD2R) && l->rq) {
    /* the refined copy the solve will relax, built once for both */
    rc = ts_qsrefine_build(l->rq, x, point, l->range, l->ctrl, (const double(*)[3])l->ctrl_pos,
                           nc, l->f_ext);
    if (rc) return rc;
    l->copy_built = 1;
  }
  if (want_features)
    return features(l, (const double(*)[3])x, l->q->n_free, l->q->free_nodes, need);
  return 0;
}

static int run(ts_learner *l, double (*x)[3], const double point[3], uint32_t nc, int record,
               ts_learn_step_stats *stats);

int ts_learner_step(ts_learner *l, double (*x)[3], const ts_learn_press *p, int record,
                    ts_learn_step_stats *stats) {
  if (!l || !x || !p) return TS_EINVAL;
  int rc = press_ok(p);
  if (rc) return rc;
  uint32_t nc = press_controls(l, (const double(*)[3])x, p);
  if (nc == 0) return TS_ERANGE;
  return run(l, x, p->point, nc, record, stats);
}

int ts_learner_step_controls(ts_learner *l, double (*x)[3], const uint32_t *ctrl,
                             const double (*ctrl_pos)[3], uint32_t n_ctrl, const double point[3],
                             int record, ts_learn_step_stats *stats) {
  if (!l || !x || !point || (n_ctrl && (!ctrl || !ctrl_pos)) || n_ctrl > l->q->n_nodes)
    return TS_EINVAL;
  for (int c = 0; c < 3; c++)
    if (!isfinite(point[c])) return TS_ENAN;
  for (uint32_t k = 0; k < n_ctrl; k++) {
    if (ctrl[k] >= l->q->n_nodes) return TS_EINVAL;
    for (int c = 0; c < 3; c++)
      if (!isfinite(ctrl_pos[k][c])) return TS_ENAN;
    l->ctrl[k] = ctrl[k];
    memcpy(l->ctrl_pos[k], ctrl_pos[k], sizeof l->ctrl_pos[k]);
  }
  return run(l, x, point, n_ctrl, record, stats);
}

static int run(ts_learner *l, double (*x)[3], const double point[3], uint32_t nc, int record,
               ts_learn_step_stats *stats) {
  ts_learn_step_stats st;
  memset(&st, 0, sizeof st);
  int use_model = l->learned && !record;
  int rc = begin(l, x, point, nc, use_model || record,
                 record ? FEAT_ALL : model_features(l->model.kind));
  if (rc) return rc;
  const ts_qstatic *q = l->q;
  uint32_t nf = q->n_free;
  st.n_ctrl = nc;
  st.n_free = nf;
  if (use_model) {
    for (uint32_t k = 0; k < nf; k++)
      ts_learn_predict_sample(&l->model, &l->feat[k], x[q->free_nodes[k]]);
    for (uint32_t k = 0; k < nf; k++)
      if (!isfinite(x[q->free_nodes[k]][0]) || !isfinite(x[q->free_nodes[k]][1]) ||
          !isfinite(x[q->free_nodes[k]][2])) {
        for (uint32_t m = 0; m < nf; m++) memcpy(x[q->free_nodes[m]], l->feat[m].x0, sizeof x[0]);
        return TS_EDIVERGED;
      }
  } else {
    rc = solve_interval(l, x, point, nc, &st.qs);
    if (rc) return rc;
    if (record) {
      l->set->intervals++;
      if (!st.qs.converged) l->set->unconverged++;
      if (st.qs.residual > l->set->worst_residual) l->set->worst_residual = st.qs.residual;
      ts_learn_set *set = l->set;
      uint32_t take = nf;
      if (set->n + (uint64_t)nf > set->cap) {
        rc = TS_EFULL;
        take = set->cap - set->n;
      }
      if (ts_learn_set_reserve(set, set->n + take)) { /* out of memory: none recorded */
        rc = TS_EFULL;
        set->grow_failed = 1;
        take = 0;
      }
      for (uint32_t k = 0; k < take; k++) {
        ts_learn_sample *s = &set->s[set->n++];
        *s = l->feat[k];
        memcpy(s->x1, x[q->free_nodes[k]], sizeof s->x1);
      }
    }
  }
  if (stats) *stats = st;
  return rc;
}

int ts_learner_compare_models(ts_learner *l, double (*x)[3], const ts_learn_press *p,
                              const ts_learn_model *models, uint32_t n, ts_learn_error *err) {
  if (!l || !x || !p || !models || !err || n == 0) return TS_EINVAL;
  unsigned need = 0;
  for (uint32_t m = 0; m < n; m++) {
    if (models[m].n_sheets != l->q->n_sheets ||
        ts_learn_n_params(models[m].kind, models[m].n_sheets) != models[m].n_params ||
        models[m].n_params == 0)
      return TS_EINVAL;
    need |= model_features(models[m].kind);
  }
  int rc = press_ok(p);
  if (rc) return rc;
  uint32_t nc = press_controls(l, (const double(*)[3])x, p);
  if (nc == 0) return TS_ERANGE;
  rc = begin(l, x, p->point, nc, 1, need);
  if (rc) return rc;
  rc = solve_interval(l, x, p->point, nc, NULL);
  if (rc) return rc;
  const ts_qstatic *q = l->q;
  for (uint32_t k = 0; k < q->n_free; k++) {
    const double *x1 = x[q->free_nodes[k]];
    double d2 = 0;
    for (int c = 0; c < 3; c++) d2 += (x1[c] - l->feat[k].x0[c]) * (x1[c] - l->feat[k].x0[c]);
    for (uint32_t m = 0; m < n; m++) {
      double y[3], e2 = 0;
      ts_learn_predict_sample(&models[m], &l->feat[k], y);
      for (int c = 0; c < 3; c++) e2 += (y[c] - x1[c]) * (y[c] - x1[c]);
      ts_learn_error *e = &err[m];
      e->n++;
      e->sum_err2 += e2;
      e->sum_disp2 += d2;
      if (sqrt(e2) > e->max_err) e->max_err = sqrt(e2);
      if (sqrt(d2) > e->max_disp) e->max_disp = sqrt(d2);
    }
  }
  return 0;
}

int ts_learner_compare(ts_learner *l, double (*x)[3], const ts_learn_press *p,
                       ts_learn_error *err) {
  if (!l || !l->learned) return TS_EINVAL;
  return ts_learner_compare_models(l, x, p, &l->model, 1, err);
}

size_t ts_learn_material_id(const ts_tissue *t, const ts_qstatic_params *p, char *buf, size_t cap) {
  if (!t || !p || !buf || cap == 0) return 0;
  size_t n = 0;
  buf[0] = 0;
  for (uint32_t i = 0; i < t->n_layers && i < TS_MAX_LAYERS; i++) {
    const ts_layer *L = &t->layers[i];
    int w = snprintf(buf + n, cap - n, "%s%.*s:%.6g,%.6g/%.6g,%.6g/%.6g", i ? ";" : "",
                     TS_NAME_MAX, L->name, L->thickness, L->axial.a, L->axial.b, L->radial.a,
                     L->radial.b);
    if (w < 0 || (size_t)w >= cap - n) return cap - 1;
    n += (size_t)w;
  }
  int w = snprintf(buf + n, cap - n, "%sqs:E=%.6g,b=%.6g,d=%.6g", n ? "|" : "", p->E, p->b, p->d);
  if (w < 0 || (size_t)w >= cap - n) return cap - 1;
  return n + (size_t)w;
}
