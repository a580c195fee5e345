/*
 * shortcut.c: the quasi-static session's step (see shortcut.h): presses
 * from tool movements, solved quasi-statically and recorded, or answered by
 * the installed model.
 */
#include "shortcut.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"

/* The tissue's positions at gravity equilibrium, kept for resets. */
typedef struct shortcut_priv {
  ts_shortcut pub;
  double (*x_eq)[3];
  uint32_t n;
} shortcut_priv;

int ts_shortcut_create(ts_tissue *t, double interval, uint32_t sample_cap, ts_shortcut **out) {
  *out = NULL;
  if (!t || !(interval > 0) || sample_cap == 0) return TS_EINVAL;
  shortcut_priv *p = calloc(1, sizeof *p);
  if (!p) return TS_ENOMEM;
  ts_shortcut *sc = &p->pub;
  sc->interval = interval;
  sc->use_learned = 1;
  ts_qstatic_params qp = ts_qstatic_default_params(t);
  int rc = ts_qstatic_create(t, &qp, &sc->q);
  if (!rc) rc = ts_learner_create(sc->q, TS_SHORTCUT_RANGE, sample_cap, &sc->l);
  if (!rc) sc->solve = ts_learner_solve(sc->l);
  if (!rc) {
    sc->ctrl = malloc(sizeof *sc->ctrl * sc->q->n_surf);
    sc->ctrl_pos = malloc(sizeof *sc->ctrl_pos * sc->q->n_surf);
    if (!sc->ctrl || !sc->ctrl_pos) rc = TS_ENOMEM;
  }
  if (!rc && ts_learn_material_id(t, &qp, sc->material, sizeof sc->material) == 0) rc = TS_EINVAL;
  if (!rc) {
    /* the whole tissue at rest under gravity: the state presses start from.
     * Accelerated: the plain relaxation took 38,093 sweeps here (1,156
     * nodes, 7 to 13 s of the worker beside a running session), this 615
     * (0.1 s), to the same tolerance */
    ts_qstatic_stats st;
    rc = ts_qstatic_prepare(sc->q, t->x, NULL, NULL, 0, (const double(*)[3])t->f_ext, 0);
    if (!rc) rc = ts_qstatic_relax_accel(sc->q, t->x, (const double(*)[3])t->f_ext, &st);
  }
  if (!rc) {
    p->n = t->n_nodes;
    p->x_eq = malloc(sizeof *p->x_eq * p->n);
    if (!p->x_eq) rc = TS_ENOMEM;
    else memcpy(p->x_eq, t->x, sizeof *p->x_eq * p->n);
    memset(t->v, 0, sizeof *t->v * t->n_nodes);
  }
  if (rc) {
    ts_shortcut_destroy(sc);
    return rc;
  }
  *out = sc;
  return 0;
}

void ts_shortcut_destroy(ts_shortcut *sc) {
  if (!sc) return;
  shortcut_priv *p = (shortcut_priv *)sc;
  ts_learner_destroy(sc->l);
  free(sc->ctrl);
  free(sc->ctrl_pos);
  ts_qstatic_destroy(sc->q);
  free(p->x_eq);
  free(p);
}

int ts_shortcut_set_refine(ts_shortcut *sc, const ts_tissue *t, double refine_edge) {
  if (!sc) return TS_EINVAL;
  if (refine_edge < 0) {
    refine_edge = ts_qsrefine_mean_edge(sc->q, t);
    if (!(refine_edge > 0)) return 0; /* no outer surface to refine: the tissue's own mesh */
  }
  int rc = ts_learner_set_refine(sc->l, t, refine_edge);
  sc->solve = ts_learner_solve(sc->l);
  return rc;
}

int ts_shortcut_install(ts_shortcut *sc, const ts_learn_model *m) {
  int rc = ts_learner_set_model(sc->l, m);
  if (!rc) sc->has_model = 1;
  return rc;
}

int ts_shortcut_reset(ts_shortcut *sc, ts_tissue *t) {
  shortcut_priv *p = (shortcut_priv *)sc;
  if (t->n_nodes != p->n) return TS_EINVAL;
  memcpy(t->x, p->x_eq, sizeof *t->x * p->n);
  memset(t->v, 0, sizeof *t->v * t->n_nodes);
  memset(sc->have_last, 0, sizeof sc->have_last);
  memset(sc->touching, 0, sizeof sc->touching);
  sc->acc = 0;
  return 0;
}

/* The reaction on a tool holding the control points of the last interval:
 * each is in equilibrium between the tool, its springs, gravity and its
 * external force, so the tool carries their sum on them, N. */
static void reaction(const ts_shortcut *sc, const double (*x)[3], const double (*f_ext)[3],
                     uint32_t n_ctrl, double f[3]) {
  f[0] = f[1] = f[2] = 0;
  const ts_qstatic *q = sc->q;
  for (uint32_t k = 0; k < n_ctrl; k++) {
    uint32_t i = sc->l->ctrl[k];
    double fi[3];
    ts_qstatic_node_force(q, x, i, fi);
    for (int c = 0; c < 3; c++)
      f[c] += fi[c] + q->mass[i] * q->gravity[c] + (f_ext ? f_ext[i][c] : 0);
  }
}

/* Is the model's answer for the last interval within what a press of this
 * depth can do: no free node moved more than TS_SHORTCUT_GUARD times the
 * depth (at least TS_SHORTCUT_GUARD_MIN)? Applied again and again, a model
 * with a large error can otherwise drift the tissue away interval by
 * interval. */
static int guard(const ts_shortcut *sc, double (*x)[3], double depth) {
  double lim = fmax(TS_SHORTCUT_GUARD * depth, TS_SHORTCUT_GUARD_MIN);
  const uint32_t *fr = sc->q->free_nodes;
  for (uint32_t k = 0; k < sc->q->n_free; k++) {
    const double *a = x[fr[k]], *b = sc->l->feat[k].x0;
    double d2 = (a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                (a[2] - b[2]) * (a[2] - b[2]);
    if (!(d2 <= lim * lim)) return 0;
  }
  return 1;
}

int ts_shortcut_step(ts_shortcut *sc, ts_tissue *t, ts_tool *tools, int n, double dt,
                     ts_shortcut_stats *st) {
  memset(st, 0, sizeof *st);
  t->time += dt;
  sc->acc += dt;
  if (sc->acc + 1e-12 < sc->interval) return 0;
  sc->acc = 0;
  if (n > TS_MAX_TOOLS) n = TS_MAX_TOOLS;
  for (int i = 0; i < n; i++) {
    ts_tool *tool = &tools[i];
    if (!tool->active) {
      sc->have_last[i] = 0;
      memset(tool->force, 0, sizeof tool->force);
      tool->contacts = 0;
      continue;
    }
    memset(tool->torque, 0, sizeof tool->torque);
    if (!sc->have_last[i]) {
      memcpy(sc->last[i], tool->pos, sizeof sc->last[i]);
      sc->have_last[i] = 1;
      continue;
    }
    double dist = 0;
    for (int c = 0; c < 3; c++)
      dist += (tool->pos[c] - sc->last[i][c]) * (tool->pos[c] - sc->last[i][c]);
    if (!(sqrt(dist) >= TS_SHORTCUT_MIN_MOVE)) continue; /* at rest: the state is an equilibrium */
    memcpy(sc->last[i], tool->pos, sizeof sc->last[i]);
    /* the control points: outer-surface nodes inside the sphere, pushed out
     * onto its surface along the ray from its centre */
    const double *cen = tool->pos, r = tool->radius;
    uint32_t nc = 0;
    for (uint32_t k = 0; k < sc->q->n_surf; k++) {
      if (!(sc->q->mass[k] > 0)) continue;
      double d[3] = {t->x[k][0] - cen[0], t->x[k][1] - cen[1], t->x[k][2] - cen[2]};
      double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      if (!(len < r)) continue;
      if (len < 1e-12) { /* at the very centre: straight down */
        d[0] = d[2] = 0;
        d[1] = -1;
        len = 1;
      }
      sc->ctrl[nc] = k;
      for (int c = 0; c < 3; c++) sc->ctrl_pos[nc][c] = cen[c] + r * d[c] / len;
      nc++;
    }
    if (nc == 0 && !sc->touching[i]) { /* moving through air */
      memset(tool->force, 0, sizeof tool->force);
      tool->contacts = 0;
      continue;
    }
    sc->touching[i] = nc > 0;
    int learned = ts_shortcut_learned(sc);
    sc->l->learned = learned;
    sc->l->f_ext = (const double(*)[3])t->f_ext; /* the tissue's loads, in every solve */
    ts_learn_step_stats ls;
    memset(&ls, 0, sizeof ls);
    int rc = ts_learner_step_controls(sc->l, t->x, sc->ctrl, (const double(*)[3])sc->ctrl_pos,
                                      nc, cen, !learned && !sc->full, &ls);
    if (rc == TS_EFULL) { /* recording stops; the session goes on */
      sc->full = 1;
      st->recorded_full = sc->l->set->grow_failed ? 2 : 1;
      rc = 0;
    }
    if (!rc && learned && !guard(sc, t->x, sqrt(dist))) {
      /* the model moved a node further than the press can explain: its
       * answer is dropped and the solve gives this interval */
      const uint32_t *fr = sc->q->free_nodes;
      for (uint32_t k = 0; k < sc->q->n_free; k++) memcpy(t->x[fr[k]], sc->l->feat[k].x0, sizeof t->x[0]);
      if (sc->l->rq)
        rc = ts_qsrefine_solve_selected(sc->l->rq, t->x, cen, sc->l->range, sc->ctrl,
                                        (const double(*)[3])sc->ctrl_pos, nc,
                                        (const double(*)[3])t->f_ext, &ls.qs);
      else
        rc = ts_qstatic_relax(sc->q, t->x, (const double(*)[3])t->f_ext, &ls.qs);
      sc->fallbacks++;
    }
    if (rc == TS_ESHUTDOWN) return rc; /* the daemon is stopping: the solve was left */
    if (rc) return TS_EDIVERGED; /* non-finite state or input: the session stops */
    if (learned && ls.qs.iterations == 0) sc->learned_presses++; /* not replaced */
    if (!learned || ls.qs.iterations > 0) { /* the solve answered */
      sc->solves++;
      if (!ls.qs.converged) sc->unconverged++;
      if (ls.qs.residual > sc->worst_residual) sc->worst_residual = ls.qs.residual;
    }
    reaction(sc, (const double(*)[3])t->x, (const double(*)[3])t->f_ext, ls.n_ctrl, tool->force);
    tool->contacts = ls.n_ctrl;
    st->presses++;
    st->iterations += ls.qs.iterations;
  }
  return 0;
}
