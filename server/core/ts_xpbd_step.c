/*
 * ts_xpbd_step.c: the position-based solver's step (ts_xpbd.c for the
 * method): the arguments checked, the substep count, the tools' segments
 * at the start and end of the step, a refinement's hand-over blended in,
 * then per substep the prediction, the contact candidates, the distance
 * constraints' per-substep constants and the Gauss-Seidel sweeps, the
 * velocities and the multipliers summed into the forces; health checks and
 * statistics at the end (a diverged step resets the tissue).
 */
#include <math.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"
#include "ts_xpbd_internal.h"

/* The first substep's prediction without a hand-over's forces (the
 * watched tree's case): as the loop in the step, returning the largest
 * predicted speed squared over the free nodes. */
static double first_predict(double (*restrict x)[3], double (*restrict v)[3],
                            double (*restrict xp)[3], const double *restrict im, uint32_t nn,
                            double h, double gx, double gy, double gz) {
  double vp2 = 0;
  for (uint32_t i = 0; i < nn; i++) {
    xp[i][0] = x[i][0], xp[i][1] = x[i][1], xp[i][2] = x[i][2];
    if (im[i] == 0) continue;
    v[i][0] += h * gx, v[i][1] += h * gy, v[i][2] += h * gz;
    x[i][0] += h * v[i][0], x[i][1] += h * v[i][1], x[i][2] += h * v[i][2];
    const double v2 = v[i][0] * v[i][0] + v[i][1] * v[i][1] + v[i][2] * v[i][2];
    vp2 = v2 > vp2 ? v2 : vp2;
  }
  return vp2;
}

int ts_xpbd_step(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                 ts_xpbd_stats *stats) {
  return ts_xpbd_step_posed(s, t, dt, tools, n_tools, NULL, NULL, 0, stats);
}

int ts_xpbd_step_posed(ts_xpbd *s, ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_aabb_tree *tree, ts_xpbd_tool *posed, int n_posed,
                       ts_xpbd_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!s || !t || !t->x || !t->v || !t->inv_mass || !t->rest) return TS_EINVAL;
  if (t->n_nodes != s->n_nodes || t->n_springs != s->n_springs) return TS_EINVAL;
  if (!isfinite(dt)) return TS_ENAN;
  if (!(dt > 0) || dt > TS__MAX_DT) return TS_EINVAL;
  if (n_tools < 0 || n_tools > TS__MAX_TOOLS || (n_tools > 0 && !tools)) return TS_EINVAL;
  for (int k = 0; k < 3; k++)
    if (!isfinite(t->gravity[k])) return TS_ENAN;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (!(t->inv_mass[i] >= 0) || !isfinite(t->inv_mass[i])) return TS_EINVAL;
  for (int i = 0; i < n_tools; i++) {
    if (!tools[i].active) continue;
    int rc = ts__xpbd_valid_tool(&tools[i]);
    if (rc) return rc;
  }
  {
    int rc = ts__xpbd_valid_posed(t, tree, posed, n_posed);
    if (rc) return rc;
  }

  uint32_t nsub = s->def.substeps;
  const uint32_t nit = s->def.iterations;
  if (nsub == 0) {
    double n = ceil(dt * s->omega / TS__AUTO_H_OMEGA);
    if (!(n <= TS__MAX_SUB)) return TS_ERANGE; /* also catches NaN */
    nsub = n < 1 ? 1 : (uint32_t)n;
  }

  ts__ptool pt[TS__MAX_TOOLS];
  int np = 0;
  for (int i = 0; i < n_tools; i++) {
    ts_tool *tl = &tools[i];
    tl->force[0] = tl->force[1] = tl->force[2] = 0;
    tl->contacts = 0;
    ts__prev_tool *pv = &s->prev[i];
    if (!tl->active) {
      pv->valid = 0;
      continue;
    }
    ts__ptool *p = &pt[np++];
    memset(p, 0, sizeof *p);
    p->tool = tl;
    p->index = (uint32_t)i;
    p->r = tl->radius;
    ts_tool_segment(tl, p->a1, p->b1);
    if (pv->valid && pv->kind == tl->kind) {
      memcpy(p->a0, pv->a, sizeof p->a0);
      memcpy(p->b0, pv->b, sizeof p->b0);
    } else {
      memcpy(p->a0, p->a1, sizeof p->a0);
      memcpy(p->b0, p->b1, sizeof p->b0);
    }
    pv->valid = 1;
    pv->kind = tl->kind;
    memcpy(pv->a, p->a1, sizeof pv->a);
    memcpy(pv->b, p->b1, sizeof pv->b);
  }
  for (int i = n_tools; i < TS__MAX_TOOLS; i++) s->prev[i].valid = 0;
  for (int q = 0; q < n_posed; q++) {
    ts_xpbd_tool *p = &posed[q];
    memset(p->force, 0, sizeof p->force);
    memset(p->torque, 0, sizeof p->torque);
    p->contacts = 0;
    p->held = p->grasp ? p->grasp->n : 0;
  }

  const double h = dt / nsub, ih2 = 1.0 / (h * h);
  const double bh = s->def.stiffness_damping / h; /* gamma of a damper beta k */
  const double damp = 1.0 / (1.0 + s->def.damping * h);
  const double gx = t->gravity[0], gy = t->gravity[1], gz = t->gravity[2];
  const uint32_t nn = t->n_nodes;
  double (*restrict x)[3] = t->x;
  double (*restrict v)[3] = t->v;
  double (*restrict xp)[3] = s->x_prev;
  const double *restrict im = t->inv_mass;

  /* the inversion guard's prisms for this step (ts_xpbd_guard.c) */
  ts__xpbd_guard_watch(s, t);
  uint32_t guard_pushes = 0;

  memset(s->sum_d, 0, sizeof *s->sum_d * s->n_springs);
  if (s->n_bend) memset(s->sum_b, 0, sizeof *s->sum_b * s->n_bend);
  if (s->n_vol) memset(s->sum_v, 0, sizeof *s->sum_v * s->n_vol);
  s->n_contact_out = 0;

  /* a refinement's hand-over (ts_handover.h), weighted at the middle of
   * the step: extra forces in the prediction, contact allowances */
  const double wh = ts_handover_weight(t->hand, t->time + 0.5 * dt);
  const double(*hf)[3] = wh > 0 ? (const double(*)[3])t->hand->f_res : NULL;
  const double *hdepth = wh > 0 ? t->hand->depth : NULL;
  if (wh > 0 || s->rest_blended) { /* the constraints' rest lengths, blended */
    const double *hr = wh > 0 ? t->hand->rest : NULL;
    for (uint32_t j = 0; j < s->n_springs; j++) {
      const uint32_t q = s->spring_of[j];
      const double L0 = t->springs[q].rest;
      s->dist[j].rest = hr ? L0 + wh * (hr[q] - L0) : L0;
    }
    s->rest_blended = wh > 0;
  }

  /* The posed tools' surface tree is refitted in full at the first
   * substep and watched after (ts__xpbd_refit_posed) while a bound on
   * every node's move since that refit stays within the slack (none with
   * a hand-over's forces, which the bound leaves out). From the base
   * substep b of the last full refit to substep k (at the predictions P):
   * P_k - P_b = h v_k - h v_b + sum over j = b..k-1 of (x - x_prev) at the
   * end of substep j, so |P_k - P_b| <= h (|v_b| + |v_k|) + h/damp sum
   * |v_end,j|, the velocities the largest over the nodes: the first
   * prediction's measured (first_predict), later ones bounded by the last
   * substep's end speed plus h |g|, the end speeds measured in the
   * velocities' loop. */
  const double slack = n_posed && !hf ? fmin(s->def.tree_slack, 0.5 * tree->def.margin) : 0.0;
  const double hg = h * sqrt(gx * gx + gy * gy + gz * gz);
  double v_base = 0, v_end = 0, walked = 0;
  int based = 0; /* a full refit's bound runs */

  int bad = 0;
  ts__xpbd_why why = {0}; /* the first node that made the step bad */
  uint32_t dropped = 0;
  double residual = 0;
  for (uint32_t k = 0; k < nsub && !bad; k++) {
    if (ts_tissue_stop_asked(t)) return TS_ESHUTDOWN; /* the daemon is stopping: mid-step */
    double vp2 = 0; /* the prediction's largest speed squared (the first substep's, watched) */
    if (k == 0 && slack > 0)
      vp2 = first_predict(x, v, xp, im, nn, h, gx, gy, gz);
    else
      for (uint32_t i = 0; i < nn; i++) {
        xp[i][0] = x[i][0], xp[i][1] = x[i][1], xp[i][2] = x[i][2];
        if (im[i] == 0) continue;
        v[i][0] += h * gx, v[i][1] += h * gy, v[i][2] += h * gz;
        if (hf) {
          const double hw = h * wh * im[i];
          v[i][0] += hw * hf[i][0], v[i][1] += hw * hf[i][1], v[i][2] += hw * hf[i][2];
        }
        x[i][0] += h * v[i][0], x[i][1] += h * v[i][1], x[i][2] += h * v[i][2];
      }
    for (int q = 0; q < np; q++) ts__xpbd_place_tool(&pt[q], (double)(k + 1) / nsub);
    s->n_contacts = np ? ts__xpbd_gather_contacts(s, t, pt, np, &dropped) : 0;
    if (n_posed) {
      /* 1e-6: the rounding of the speeds and sums, with room */
      const double moved =
          based ? (h * (v_base + v_end + hg) + walked) * (1.0 + 1e-6) : INFINITY;
      const int rb = ts__xpbd_refit_posed(t, tree, moved, slack);
      based = rb >= 0;
      if (rb == 1) {
        v_base = k == 0 ? sqrt(vp2) : v_end + hg;
        walked = 0;
      }
      ts__xpbd_plan_posed(tree, posed, n_posed, k, nsub, rb, slack);
    }
    dropped += ts__xpbd_begin_posed(t, tree, posed, n_posed, k, nsub);
    if (s->self) { /* at the predicted positions, the tree refitted for them */
      if (ts_aabb_tree_refit(s->self_tree, (const double (*)[3])x) < 0) s->self->n = 0;
      else ts_self_contact_detect(s->self, s->self_tree, t, (const double (*)[3])x);
    }
    ts__xpbd_linearise_distance(s, t, h, s->def.stiffness_damping);

    /* solve */
    memset(s->lam_d, 0, sizeof *s->lam_d * s->n_springs);
    if (s->n_bend) memset(s->lam_b, 0, sizeof *s->lam_b * s->n_bend);
    if (s->n_vol) memset(s->lam_v, 0, sizeof *s->lam_v * s->n_vol);
    for (uint32_t it = 0; it < nit; it++) {
      residual = ts__xpbd_sweep_distance(s, t);
      if (s->n_bend) ts__xpbd_sweep_bending(s, t, ih2, bh);
      if (s->n_vol) ts__xpbd_sweep_volume(s, t, ih2, bh);
      if (s->guard) {
        const uint32_t gp = ts__xpbd_sweep_guard(s, t, ih2, it == 0);
        if (it == 0) guard_pushes += gp;
      }
      if (s->n_contacts) ts__xpbd_sweep_contacts(s, t, pt, hdepth, wh);
      if (n_posed)
        ts__xpbd_sweep_posed(s, t, posed, n_posed, it == 0 ? TS_CONTACT_SWEEP : TS_CONTACT_SWEEP_THIN,
                    hdepth, wh);
      if (s->self && s->self->n) ts_self_contact_project(s->self, x, im);
    }

    /* velocities, damping, health (and the largest speed, for the tree's
     * bound) */
    double ve2 = 0;
    for (uint32_t i = 0; i < nn; i++) {
      if (im[i] == 0) continue;
      double vx = (x[i][0] - xp[i][0]) / h * damp;
      double vy = (x[i][1] - xp[i][1]) / h * damp;
      double vz = (x[i][2] - xp[i][2]) / h * damp;
      v[i][0] = vx, v[i][1] = vy, v[i][2] = vz;
      const double v2 = vx * vx + vy * vy + vz * vz;
      bad |= !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED);
      ve2 = v2 > ve2 ? v2 : ve2;
    }
    if (bad) /* the first node that failed, looked for again (the loop above stays lean) */
      for (uint32_t i = 0; i < nn && !why.why; i++) {
        const double v2 = ts__xpbd_dot3(v[i], v[i]);
        if (im[i] != 0 && !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED))
          ts__xpbd_why_note(&why, x[i], v2, i, k + 1);
      }
    v_end = sqrt(ve2);
    walked += h * v_end / damp;

    /* forces: multipliers summed over the substeps; contacts per tool */
    for (uint32_t j = 0; j < s->n_springs; j++) s->sum_d[j] += s->lam_d[j];
    for (uint32_t j = 0; j < s->n_bend; j++) s->sum_b[j] += s->lam_b[j];
    for (uint32_t j = 0; j < s->n_vol; j++) s->sum_v[j] += s->lam_v[j];
    int last = k + 1 == nsub;
    for (int q = 0; q < n_posed; q++) {
      ts_xpbd_tool *p = &posed[q];
      double f[3], tq[3], fg[3], tg[3];
      ts_contact_reaction(p->contact, (const double (*)[3])x, 1.0, f, tq);
      ts_grasp_reaction(p->grasp, (const double (*)[3])x, 1.0, fg, tg);
      for (int c = 0; c < 3; c++) {
        p->force[c] += f[c] + fg[c];
        p->torque[c] += tq[c] + tg[c];
      }
      if (last) {
        p->contacts = p->contact->touching;
        p->held = p->grasp ? p->grasp->n : 0;
      }
    }
    for (uint32_t j = 0; j < s->n_contacts; j++) {
      const ts__contact *c = &s->contacts[j];
      if (!(c->lambda > 0)) continue;
      ts__ptool *p = &pt[c->tool];
      for (int q = 0; q < 3; q++) p->force[q] -= c->lambda * c->n[q];
      if (last) {
        ts_xpbd_contact *o = &s->contact_out[s->n_contact_out++];
        o->node = c->node;
        o->tool = p->index;
        for (int q = 0; q < 3; q++) o->force[q] = -c->lambda * c->n[q] * ih2;
        p->tool->contacts++;
      }
    }
  }
  ts__xpbd_plan_posed(tree, posed, n_posed, 0, 0, -1, 0); /* the plans end with the step */
  t->time += dt;
  t->steps++;
  ts_handover_expire(t, t->time);

  /* health and statistics */
  double vmax2 = 0, ke = 0;
  for (uint32_t i = 0; i < nn && !bad; i++) {
    double v2 = ts__xpbd_dot3(v[i], v[i]);
    if (!isfinite(x[i][0] + x[i][1] + x[i][2]) || !(v2 <= TS__MAX_SPEED * TS__MAX_SPEED)) {
      ts__xpbd_why_note(&why, x[i], v2, i, nsub);
      bad = 1;
      break;
    }
    if (im[i] == 0) continue;
    if (v2 > vmax2) vmax2 = v2;
    ke += 0.5 * v2 / im[i];
  }
  if (bad) {
    ts_tissue_reset(t);
    ts__xpbd_guard_forget(s);
    memset(s->sum_d, 0, sizeof *s->sum_d * s->n_springs);
    memset(s->tension, 0, sizeof *s->tension * s->n_springs);
    if (s->n_bend) memset(s->sum_b, 0, sizeof *s->sum_b * s->n_bend);
    if (s->n_vol) memset(s->sum_v, 0, sizeof *s->sum_v * s->n_vol);
    s->n_contact_out = 0;
    s->force_scale = 0;
    for (int i = 0; i < TS__MAX_TOOLS; i++) s->prev[i].valid = 0;
    for (int q = 0; q < np; q++) pt[q].tool->contacts = 0;
    for (int q = 0; q < n_posed; q++) {
      memset(posed[q].force, 0, sizeof posed[q].force);
      memset(posed[q].torque, 0, sizeof posed[q].torque);
      posed[q].contacts = 0;
      if (posed[q].grasp) ts_grasp_release(posed[q].grasp);
      ts_contact_forget(posed[q].contact); /* the tissue is back at rest */
      posed[q].held = 0;
    }
    if (n_posed) ts_aabb_tree_rebuild(tree, (const double (*)[3])t->x);
    if (stats) {
      stats->substeps = nsub;
      stats->iterations = nit;
      stats->diverged = 1;
      stats->diverged_why = why.why;
      stats->diverged_node = why.node;
      stats->diverged_value = why.speed;
      stats->diverged_substep = why.substep;
    }
    return TS_EDIVERGED;
  }

  /* the nodes near the tools now (the last substep's contact candidates
   * and held nodes): the next step's guard leaves their prisms to them */
  if (s->guard) {
    for (uint32_t j = 0; j < s->n_contacts; j++) ts__xpbd_guard_touch(s, s->contacts[j].node);
    for (int q = 0; q < n_posed; q++) {
      const ts_contact_ws *cw = posed[q].contact;
      for (uint32_t i = 0; i < cw->n; i++) ts__xpbd_guard_touch(s, cw->v[i].node);
      if (posed[q].grasp)
        for (uint32_t i = 0; i < posed[q].grasp->n; i++) ts__xpbd_guard_touch(s, posed[q].grasp->node[i]);
    }
  }

  /* mean forces over the substeps: lambda / h^2 each */
  s->force_scale = ih2 / nsub;
  for (uint32_t j = 0; j < s->n_springs; j++)
    s->tension[s->spring_of[j]] = -s->sum_d[j] * s->force_scale;
  uint32_t contacts = 0;
  for (int q = 0; q < np; q++) {
    for (int k = 0; k < 3; k++) pt[q].tool->force[k] = pt[q].force[k] * s->force_scale;
    contacts += pt[q].tool->contacts;
  }
  for (int q = 0; q < n_posed; q++) {
    for (int k = 0; k < 3; k++) {
      posed[q].force[k] *= s->force_scale;
      posed[q].torque[k] *= s->force_scale;
    }
    contacts += posed[q].contacts;
  }
  if (stats) {
    stats->substeps = nsub;
    stats->iterations = nit;
    stats->contacts = contacts;
    stats->contacts_dropped = dropped;
    stats->max_speed = sqrt(vmax2);
    stats->kinetic_energy = ke;
    stats->residual = residual;
    stats->self_contacts = s->self ? s->self->n : 0;
    stats->guard_pushes = guard_pushes;
  }
  return 0;
}
