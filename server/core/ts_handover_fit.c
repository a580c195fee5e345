/*
 * ts_handover_fit.c: the fit of a live refinement's hand-over rest lengths
 * to XPBD's own step (ts_handover_fit_xpbd, see ts_handover.h): a trial
 * step of the unrefined tissue gives each node's target displacement, then
 * trial steps of the refined one on the region around the new nodes
 * (ts_handover_region.c) correct the rest lengths until its first step
 * matches, with the tools on the solver's node-wise or tree-based path.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_xpbd.h"
#include "ts_handover_internal.h"

#define TS_FIT_MAX_TOOLS 64 /* tools a trial step takes (ts_xpbd_step's limit) */

#define FIT_PASSES 12    /* trial steps at most */
#define FIT_TOL 0.5e-6   /* m: the first step's error at which the fit stops */
#define FIT_RING 6       /* spring rings around the new nodes that the trials step */
/* TS_FIT_QUICK: a fit again from corrections close to their answer (see
 * ts_handover.h) takes fewer trials on a smaller region. Measured on the
 * default patch (test_refine_async.c's async setting, the first step against
 * the twin's): 2 rings instead of 6 change it by 0.1-0.3 um; 3 trials from
 * a full fit's corrections 1-5 steps old leave it 2-7 um above 12 trials'
 * (the chase's rounds each start from the last round's, see ts_handover.h,
 * and end within 0.2-2 um of a full fit at the install, measured). */
#define FIT_QUICK_PASSES 3
#define FIT_QUICK_RING 2
#define AUTO_H_OMEGA 0.8 /* XPBD's automatic substep (ts_xpbd.c): h omega <= 0.8 */

/* The trial steps' tools on the tree-based contact path (as an XPBD
 * session's, server/session_contact.c): each active tool placed at its
 * pose, standing still through the step, with a contact workspace for the
 * trial tissue; no grasp. */
typedef struct trial_tools {
  int n;
  ts_aabb_tree *tree;
  ts__placed_tool pl[TS_FIT_MAX_TOOLS];
  ts_contact_ws ws[TS_FIT_MAX_TOOLS];
  ts_xpbd_tool xt[TS_FIT_MAX_TOOLS];
} trial_tools;

static void trial_tools_free(trial_tools *tt) {
  if (!tt) return;
  for (int k = 0; k < tt->n; k++) {
    ts__handover_placed_free(&tt->pl[k]);
    ts_contact_ws_free(&tt->ws[k]);
  }
  ts_aabb_tree_destroy(tt->tree);
  free(tt);
}

/* The tree-based tools for trial steps of t (NULL tools: none). *out NULL
 * when no tool is active. Returns 0, TS_ENOMEM or a builder's error. */
static int trial_tools_make(const ts_tissue *t, const ts_tool *tools, int n_tools, trial_tools **out) {
  *out = NULL;
  int any = 0;
  for (int k = 0; k < n_tools && k < TS_FIT_MAX_TOOLS; k++) any |= tools[k].active;
  if (!any) return 0;
  trial_tools *tt = calloc(1, sizeof *tt);
  if (!tt) return TS_ENOMEM;
  int rc = ts_aabb_tree_create_tissue(NULL, t, &tt->tree);
  const uint32_t nct = ts_tissue_n_contact_tris(t);
  for (int k = 0; !rc && k < n_tools && k < TS_FIT_MAX_TOOLS; k++) {
    const ts_tool *tl = &tools[k];
    if (!tl->active) continue;
    const int q = tt->n;
    rc = ts__handover_placed_make(tl, &tt->pl[q]);
    if (rc) break;
    tt->n++; /* from here on freed with the rest */
    rc = ts_contact_ws_init(&tt->ws[q], NULL, t->n_nodes, t->n_nodes, nct ? nct : 1);
    if (rc) {
      memset(&tt->ws[q], 0, sizeof tt->ws[q]);
      break;
    }
    tt->ws[q].def.mu_static = tl->mu_static;
    tt->ws[q].def.mu_kinetic = tl->mu_kinetic;
    ts_xpbd_tool *x = &tt->xt[q];
    x->posed = &tt->pl[q].pt;
    x->pose = tt->pl[q].pt.pose;
    x->prev = x->pose;
    x->contact = &tt->ws[q];
    x->grasp = NULL;
  }
  if (rc) {
    trial_tools_free(tt);
    return rc;
  }
  *out = tt;
  return 0;
}

/* One XPBD step of a copy of t's state with the solver *xs (built from
 * def for t's topology on first use, and again after a diverged step):
 * disp gets each node's displacement, m. Tools: the tree-based ones of tt
 * when posed (NULL: none), else the sphere and capsule tools of `tools`
 * (others left out) on the solver's node-wise path. A solver carries
 * nothing from one such step to the next that the step does not set anew
 * (multipliers, previous positions, the blended rest lengths; the tools
 * stand still), so the trials share one. t is left as it was (the copy
 * has its own state arrays, in ws: 6 per node, and its own hand-over,
 * since a diverged step resets it). Returns 0 or an error of
 * ts_xpbd_build/step. */
static int trial_step(const ts_tissue *t, ts_xpbd **xs, const ts_xpbd_def *def, const ts_tool *tools,
                      int n_tools, int posed, trial_tools *tt, double dt, double (*ws)[3], uint8_t *branch,
                      double (*disp)[3]) {
  const uint32_t n = t->n_nodes;
  ts_tissue c = *t;
  c.x = ws;
  c.v = ws + n;
  c.x_prev = ws + 2 * (size_t)n;
  c.f = ws + 3 * (size_t)n;
  c.acc = ws + 4 * (size_t)n;
  c.acc_prev = ws + 5 * (size_t)n;
  c.branch = branch;
  c.ms = NULL;
  memcpy(c.x, t->x, sizeof *c.x * n);
  memcpy(c.v, t->v, sizeof *c.v * n);
  memcpy(c.x_prev, t->x_prev, sizeof *c.x_prev * n);
  memset(c.f, 0, sizeof *c.f * n);
  memset(c.acc, 0, sizeof *c.acc * n);
  memset(c.acc_prev, 0, sizeof *c.acc_prev * n);
  memset(branch, 0, n);
  int rc = 0;
  c.hand = ts__handover_copy(t->hand, n, t->n_springs, &rc);
  if (rc) return rc;
  ts_tool tl[TS_FIT_MAX_TOOLS];
  int k = 0;
  for (int i = 0; !posed && i < n_tools && k < TS_FIT_MAX_TOOLS; i++)
    if (tools[i].kind == TS_TOOL_SPHERE || tools[i].kind == TS_TOOL_CAPSULE) tl[k++] = tools[i];
  if (!*xs) rc = ts_xpbd_build(&c, def, xs);
  if (!rc && posed && tt)
    rc = ts_xpbd_step_posed(*xs, &c, dt, NULL, 0, tt->tree, tt->xt, tt->n, NULL);
  else if (!rc)
    rc = ts_xpbd_step(*xs, &c, dt, k > 0 ? tl : NULL, k, NULL);
  if (rc == TS_EDIVERGED) { /* built afresh for the next trial */
    ts_xpbd_destroy(*xs);
    *xs = NULL;
  }
  ts_handover_free(c.hand);
  if (rc) return rc;
  for (uint32_t i = 0; i < n; i++)
    for (int q = 0; q < 3; q++) disp[i][q] = c.x[i][q] - t->x[i][q];
  return 0;
}

/* The substep count ts_xpbd_build's automatic rule gives t at step dt
 * (ts_xpbd.c: h omega <= 0.8, omega the mean of sqrt(w / alpha0) over the
 * compliant distance constraints); 0 when the rule cannot be followed here
 * (given compliances, no compliant constraint, an absurd count). */
static uint32_t auto_substeps(const ts_tissue *t, double dt) {
  double osum = 0;
  uint32_t on = 0;
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const ts_spring *sp = &t->springs[j];
    double k = sp->k1 == 0 && sp->k2 == 0 ? sp->k : sp->k1 + sp->k2;
    double w = t->inv_mass[sp->a] + t->inv_mass[sp->b];
    if (!(k > 0) || !isfinite(k)) continue;
    double alpha0 = 1.0 / k;
    if (!(alpha0 > 0) || !(w > 0) || !isfinite(w)) continue;
    osum += sqrt(w / alpha0);
    on++;
  }
  if (!on) return 0;
  double n = ceil(dt * (osum / on) / AUTO_H_OMEGA);
  if (!(n <= 10000)) return 0;
  return n < 1 ? 1 : (uint32_t)n;
}

int ts_handover_fit_xpbd(ts_tissue *nt, const ts_tissue *old, const uint32_t (*parents)[2], const ts_xpbd_def *def,
                         const ts_tool *tools, int n_tools, int flags, double dt, ts_handover_fit_stats *stats) {
  const int posed = (flags & TS_FIT_POSED) != 0, quick = (flags & TS_FIT_QUICK) != 0;
  const int passes = quick ? FIT_QUICK_PASSES : FIT_PASSES;
  if (stats) {
    stats->err = NAN;
    stats->trials = 0;
    stats->nodes = 0;
  }
  if (!nt || !old || !def || !nt->hand || nt->n_nodes < old->n_nodes ||
      (nt->n_nodes > old->n_nodes && !parents) || !(dt > 0) || !(dt <= 1.0) || n_tools < 0 ||
      (n_tools > 0 && !tools))
    return TS_EINVAL;
  nt->hand->plain = 0; /* its rest lengths are fitted below */
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  uint8_t *role = malloc(n);
  uint32_t *loc = malloc(sizeof *loc * n), *lold = malloc(sizeof *lold * n);
  uint32_t *nmap = NULL, *smap = NULL, *omap = NULL, *osmap = NULL;
  ts_tissue *sn = NULL, *so = NULL;
  trial_tools *ttn = NULL, *tto = NULL;
  ts_xpbd *xn = NULL, *xo = NULL;
  double(*ws)[3] = NULL, (*want)[3] = NULL, (*e)[3] = NULL, (*be)[3] = NULL, *best = NULL;
  uint8_t *branch = NULL;
  int rc = TS_ENOMEM, started = 0;
  if (!role || !loc || !lold) goto out;
  /* the trials' region: the refined nodes and FIT_RING rings of springs
   * around them, the next ring held where it is (the step is local: far
   * nodes move alike in both tissues); the whole tissue when the region
   * would be most of it, or when the solver's own constraints need more
   * than the springs (given compliances, bending, volume) */
  int64_t moving = 0;
  /* what the hand-over's map keeps of an earlier fit of these networks */
  ts_handover_map *km = ts__handover_map_fits(nt->hand->map, old, nt) ? nt->hand->map : NULL;
  if (!(flags & TS_FIT_WHOLE) && !def->compliance && !((def->bending || def->volume) && ts_tissue_columns(old) > 0)) {
    if (km && km->role[quick]) {
      memcpy(role, km->role[quick], n);
      moving = km->moving[quick];
    } else {
      moving = ts__handover_fit_region(old, nt, role, quick ? FIT_QUICK_RING : FIT_RING);
      if (moving < 0) goto out;
      if (km && (km->role[quick] = malloc(n)) != NULL) {
        memcpy(km->role[quick], role, n);
        km->moving[quick] = moving;
      }
    }
  } else {
    memset(role, 1, n);
  }
  if (!moving) {
    memset(role, 1, n);
    moving = n;
  }
  rc = ts__handover_sub_tissue(nt, role, km ? ts__handover_kept_order(nt, &km->ord_new) : NULL, &sn, &nmap, &smap, loc);
  if (!rc) rc = ts__handover_sub_tissue(old, role, km ? ts__handover_kept_order(old, &km->ord_old) : NULL, &so, &omap, &osmap, lold);
  if (rc) goto out;
  /* both trials take the full tissues' substep count (a part's own mean
   * stiffness would give another) */
  ts_xpbd_def dn = *def, dold = *def;
  if (def->substeps == 0 && !def->compliance) {
    dn.substeps = auto_substeps(nt, dt);
    dold.substeps = auto_substeps(old, dt);
  }
  if (posed) {
    rc = trial_tools_make(sn, tools, n_tools, &ttn);
    if (!rc) rc = trial_tools_make(so, tools, n_tools, &tto);
    if (rc) goto out;
  }
  const uint32_t ln = sn->n_nodes, lns = sn->n_springs;
  rc = TS_ENOMEM;
  ws = malloc(sizeof *ws * 6 * (size_t)ln);
  branch = malloc(ln);
  want = calloc(n, sizeof *want);
  e = malloc(sizeof *e * ln);
  be = malloc(sizeof *be * ln);
  best = malloc(sizeof *best * (lns + 1));
  if (!ws || !branch || !want || !e || !be || !best) goto out;
  /* the unrefined tissue's step (nt's indices), interpolated onto the new
   * nodes */
  rc = trial_step(so, &xo, &dold, tools, n_tools, posed, tto, dt, ws, branch, e);
  if (rc) goto out;
  for (uint32_t l = 0; l < so->n_nodes; l++) memcpy(want[omap[l]], e[l], sizeof want[0]);
  for (uint32_t i = n0; i < n; i++)
    for (int k = 0; k < 3; k++) want[i][k] = 0.5 * (want[parents[i - n0][0]][k] + want[parents[i - n0][1]][k]);
  double *rest = sn->hand->rest, best_err = INFINITY, step = 1.0;
  memcpy(best, rest, sizeof *best * lns);
  started = 1;
  for (int pass = 0; pass < passes; pass++) {
    rc = trial_step(sn, &xn, &dn, tools, n_tools, posed, ttn, dt, ws, branch, e);
    if (stats) stats->trials++;
    int diverged = 0;
    if (rc == TS_EDIVERGED && pass > 0) { /* a correction too far: shorter */
      rc = 0;
      diverged = 1;
    } else if (rc) {
      goto out;
    }
    double emax = diverged ? INFINITY : 0.0;
    for (uint32_t l = 0; l < ln && !diverged; l++)
      for (int k = 0; k < 3; k++) {
        e[l][k] = sn->inv_mass[l] > 0 ? want[nmap[l]][k] - e[l][k] : 0.0;
        emax = fmax(emax, fabs(e[l][k]));
      }
    if (!(emax == emax)) emax = INFINITY; /* NaN */
    if (emax < best_err) { /* the best so far: correct from here */
      best_err = emax;
      memcpy(best, rest, sizeof *best * lns);
      memcpy(be, e, sizeof *be * ln);
      /* (the step stays: a full one after a shortened one overshoots
         again, measured) */
    } else { /* worse: a step half as long from the best */
      step *= 0.5;
    }
    if (best_err < FIT_TOL || pass + 1 == passes) break;
    /* move the network's equilibrium by step * e: each spring's rest length
       such that it keeps its tension when stretched by that */
    for (uint32_t j = 0; j < lns; j++) {
      const ts_spring *sp = &sn->springs[j];
      double d[3], l = 0, dl = 0;
      for (int k = 0; k < 3; k++) {
        d[k] = sn->x[sp->b][k] - sn->x[sp->a][k];
        l += d[k] * d[k];
      }
      l = sqrt(l);
      rest[j] = best[j];
      if (!(l > 0)) continue;
      for (int k = 0; k < 3; k++) dl += d[k] / l * (be[sp->b][k] - be[sp->a][k]);
      if (dl != 0) rest[j] = ts__handover_rest_for(sp, l + step * dl, ts__handover_tension(sp, l, best[j]));
    }
  }
  if (stats) {
    stats->err = best_err;
    stats->nodes = (uint32_t)moving;
  }
  rc = 0;
out:
  if (started) /* the best met, on the springs the trials stepped */
    for (uint32_t j = 0; j < sn->n_springs; j++) nt->hand->rest[smap[j]] = best[j];
  trial_tools_free(ttn);
  trial_tools_free(tto);
  ts_xpbd_destroy(xn);
  ts_xpbd_destroy(xo);
  ts_tissue_destroy(sn);
  ts_tissue_destroy(so);
  free(nmap);
  free(smap);
  free(omap);
  free(osmap);
  free(role);
  free(loc);
  free(lold);
  free(ws);
  free(branch);
  free(want);
  free(e);
  free(be);
  free(best);
  return rc;
}
