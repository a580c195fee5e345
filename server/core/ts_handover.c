/*
 * ts_handover.c: the hand-over of a live refinement (see ts_handover.h for
 * why and how): the extra node forces that give the refined network the
 * unrefined one's accelerations, the rest lengths that carry the tensions
 * over (their fit to XPBD's own step: ts_handover_fit.c), the new nodes'
 * contact allowances against every kind of tool, and the smooth fade of
 * all; each computed on the nodes the refinement touched, the rest carried
 * (ts_handover.h, "Local"). This file makes them, renews them at an
 * install and copies them; the other parts, one concept a file, are
 * listed in ts_handover_internal.h.
 */
#include "ts_handover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover_internal.h"

double ts_handover_weight(const ts_handover *h, double at) {
  if (!h) return 0.0;
  double u = (at - h->start) / h->duration;
  if (!(u > 0)) return 1.0;
  if (u >= 1) return 0.0;
  return 1.0 - u * u * (3.0 - 2.0 * u);
}

void ts_handover_free(ts_handover *h) {
  if (!h) return;
  ts__handover_map_free(h->map);
  free(h->f);
  free(h->f_res);
  free(h->rest);
  free(h->depth);
  free(h);
}

void ts_handover_expire(ts_tissue *t, double at) {
  if (t && t->hand && ts_handover_weight(t->hand, at) == 0.0) {
    ts_handover_free(t->hand);
    t->hand = NULL;
  }
}

/* The unrefined network's accelerations at its current state, carried to
 * the refined one's touched nodes (acc; m's touched nodes only): an old
 * node keeps its own, a new node gets the mean of its parents' with the
 * push of a parent held by a tool into it removed (the tool's reaction
 * cancels it, so the node's motion, which its new neighbours interpolate,
 * has none). The forces are old's springs at their rest lengths blended
 * with hrest at weight w, gravity, and w times the node forces hf (the
 * view of one solver of the earlier hand-over); fo: scratch, old->n_nodes. */
static void carried_acc(const ts_tissue *old, const ts_handover_map *m, const uint32_t (*parents)[2],
                        const ts_tool *tools, int n_tools, const ts__placed_tool *placed, const double *hrest,
                        const double (*hf)[3], double w, double (*fo)[3], double (*acc)[3]) {
  const uint32_t n0 = m->n0, n = m->n;
  int any = 0;
  for (int k = 0; k < n_tools; k++) any |= tools[k].active;
  ts__handover_node_forces(old, m->nodes, m->n_old_nodes, m->touched, m->old_springs, m->n_old_springs, hrest, hf, w, fo);
  for (uint32_t q = 0; q < m->n_old_nodes; q++) {
    const uint32_t i = m->nodes[q];
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
    double nrm[3], band = 0;
    if (old->inv_mass[i] > 0 && any) {
      double pen = ts__handover_tool_depth(tools, n_tools, placed, old->x[i], nrm, &band);
      double an = acc[i][0] * nrm[0] + acc[i][1] * nrm[1] + acc[i][2] * nrm[2];
      if (pen > -band && an < 0)
        for (int c = 0; c < 3; c++) acc[i][c] -= an * nrm[c];
    }
  }
  for (uint32_t i = n0; i < n; i++) {
    const uint32_t p = parents[i - n0][0], q = parents[i - n0][1];
    for (int c = 0; c < 3; c++) acc[i][c] = 0.5 * (acc[p][c] + acc[q][c]);
  }
  /* an old node keeps its own acceleration before the tool's reaction (the
   * tool reacts on it in the refined tissue as in the unrefined one) */
  for (uint32_t q = 0; q < m->n_old_nodes; q++) {
    const uint32_t i = m->nodes[q];
    for (int c = 0; c < 3; c++) acc[i][c] = fo[i][c] * old->inv_mass[i];
  }
}

/* ts_handover_create's arguments checked. 0 or TS_EINVAL. */
static int create_args(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, int ms_mode) {
  if (ms_mode < TS_HANDOVER_MS_DEFAULT || ms_mode > TS_HANDOVER_MS_FORCE) return TS_EINVAL;
  if (!old || !nt || nt->n_nodes < old->n_nodes || (nt->n_nodes > old->n_nodes && !parents) ||
      !(duration > 0) || !isfinite(duration) || n_tools < 0 || (n_tools > 0 && !tools))
    return TS_EINVAL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  for (uint32_t i = n0; i < n; i++)
    if (parents[i - n0][0] >= i || parents[i - n0][1] >= i) return TS_EINVAL;
  return 0;
}

/* Whether old's spring k, at weight w of the earlier hand-over's rest
 * lengths hrest, keeping its tension in nt's spring sp (same ends, other
 * constants) would take a rest length more than its length away from its
 * length (create_mapped says why that is refused). */
static int changed_far(const ts_tissue *old, uint32_t k, const double *hrest, double w, const ts_tissue *nt,
                       const ts_spring *sp) {
  const ts_spring *os = &old->springs[k];
  const double l = ts__handover_spring_length(nt, sp);
  const double T = ts__handover_tension(os, ts__handover_spring_length(old, os), ts__handover_rest_at(old, k, hrest, w));
  return fabs(ts__handover_rest_for(sp, l, T) - l) > l;
}

/* ts_handover_create with the topologies' map m (made for old and nt; not
 * taken: out->map is NULL, or reuse's map when reuse is given); ms_rest:
 * the mass-spring step's form (TS_HANDOVER_MS_REST: 1). reuse (NULL: none)
 * is a hand-over of nt, made over again in place: *out is reuse, its
 * arrays written anew (nothing here reads them; unchanged on failure).
 * Why: an install renews the hand-over on the physics thread
 * (ts_handover_renew), and fresh arrays there are first touched by its
 * passes: a resolution-50 patch's renew took 5 ms with fresh arrays, 0.9
 * ms in reused ones, measured in the daemon.
 * keep: reuse is plain (ts_handover.plain) on the map m; then, when no
 * earlier hand-over is in effect either, the untouched entries already
 * hold what they would be given, and only the touched nodes and springs
 * are written. With that and the map's scratch (ts_handover_internal.h),
 * patch-S's renewal took 1.0 ms instead of 2.6-3.0 ms (tests/bench/run
 * --quick refine_hold, renew_s). */
static int create_mapped(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                         const ts_handover_map *m, const ts_tool *tools, int n_tools, double duration,
                         int ms_rest, ts_handover *reuse, int keep, ts_handover **out) {
  *out = NULL;
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  ts_handover *h = reuse ? reuse : calloc(1, sizeof *h);
  /* scratch per node, written and read at the touched nodes only: the
   * map's (ts_handover_internal.h), or made here */
  double(*const own)[3] = m->scratch ? NULL : malloc(sizeof *own * 3 * ((size_t)n + 1));
  double(*const scratch)[3] = m->scratch ? m->scratch : own;
  double(*fo)[3] = scratch, (*acc)[3] = scratch ? scratch + n : NULL, (*accx)[3] = scratch ? scratch + 2 * (size_t)n : NULL;
  ts__placed_tool *placed = calloc((size_t)n_tools + 1, sizeof *placed);
  if (h && !reuse) {
    h->f = malloc(sizeof *h->f * n);
    h->f_res = malloc(sizeof *h->f_res * n);
    h->rest = malloc(sizeof *h->rest * (nt->n_springs + 1));
    h->depth = malloc(sizeof *h->depth * n);
  }
  int rc = TS_ENOMEM;
  if (!h || !fo || !acc || !accx || !placed || !h->f || !h->f_res || !h->rest || !h->depth ||
      (rc = ts__handover_place_all(tools, n_tools, placed)) != 0) {
    if (h != reuse) ts_handover_free(h);
    free(own);
    free(placed);
    return rc;
  }
  /* the unrefined network's accelerations, carried to the new nodes: the
   * mass-spring view (its own springs and the earlier hand-over's node
   * forces) and XPBD's (the earlier hand-over's rest lengths and residual) */
  const ts_handover *oh = old->hand;
  const double w_old = ts_handover_weight(oh, old->time);
  const double *ohrest = oh ? oh->rest : NULL;
  /* the mass-spring step's view: an earlier hand-over in rest lengths
   * blends its rest lengths there too (ts_ms_handover.c) */
  const double *ms_ohrest = oh && oh->ms_rest ? ohrest : NULL;
  const int earlier = oh && w_old > 0; /* an earlier hand-over in effect */
  const int local = reuse && keep && !earlier;
  carried_acc(old, m, parents, tools, n_tools, placed, ms_ohrest, oh ? (const double(*)[3])oh->f : NULL, w_old,
              fo, acc);
  carried_acc(old, m, parents, tools, n_tools, placed, ohrest, oh ? (const double(*)[3])oh->f_res : NULL, w_old,
              fo, accx);

  /* the springs' hand-over rest lengths: each spring of the refined
   * network keeps the tension it had (a spring that was there) or its
   * parent edge's (a half of a split edge); any other new spring starts
   * unstretched. The tensions are the unrefined tissue's as the XPBD step
   * sees it (rest lengths blended by an earlier hand-over); the
   * mass-spring step's in rest lengths (ms_rest) sees the same, but after
   * an earlier hand-over made with node forces (a change of form between
   * two refinements, which a session does not make: its form is the
   * default) it saw the springs' own rest lengths, and these rest lengths
   * are then XPBD's. */
  /* A spring that was there with other constants (same ends: the prisms
   * around it were split, so its volume share, and k, fell) keeps its
   * tension, except during an earlier hand-over where that would put its
   * rest length more than its length away from its length (changed_far):
   * there it keeps its blended rest length (its strain). Why: the tension
   * kept in a softer spring scales its compression by the stiffness ratio,
   * and a hand-over's rest lengths are already such a scaled tension, so a
   * second refinement during the blend scales it again. Measured
   * (test_refine_smooth's smooth_live, XPBD, sphere pressed 3 mm, Loop with
   * the smoothing rules, then LEB 40 ms into its 0.262 s blend, weight
   * 0.94): the column spring under the sphere, k 70.3 -> 13.5 N/m at 0.83
   * mm, got a rest length of 8.1 mm (the first hand-over's 2.3 mm, itself
   * a tension kept with k 4x down); XPBD's unconverged sweeps cannot
   * balance such a prestress: the fit's first trial was 0.46 mm off and its
   * 12 trials ended 71 um off. With the strain kept there: the first trial
   * 0.16 mm off, fitted to 1.5 um, the blend's later steps within 4.2 um
   * beyond the twin's. For every changed spring during a blend (not only
   * the far ones) the midpoint cases' second refinement went from 1.7-2.3
   * to 2.7-3.2 um in its first step; with the bound 2.3-2.8 um, its later
   * steps 4.9-5.9 um beyond the twin's (3.3-3.8 um before; test_refine_xpbd,
   * all within the 10 um quantum). A first
   * refinement keeps the tension (the strain there: the smoothed case's
   * first trial 41 um off against 2.3 um, a blend step 11 um over the
   * twin's). The mass-spring step's node term makes up the force either
   * way (its figures unchanged). */
  const uint32_t n_sp = local ? m->n_new_springs : nt->n_springs;
  for (uint32_t q = 0; q < n_sp; q++) {
    const uint32_t j = local ? m->new_springs[q] : q;
    const ts_spring *sp = &nt->springs[j];
    const uint32_t k = m->from[j];
    if (k != UINT32_MAX && m->same[j]) {
      h->rest[j] = ts__handover_rest_at(old, k, ohrest, w_old); /* the same spring: as it was */
    } else if (k != UINT32_MAX && oh && w_old > 0 && old->springs[k].a == sp->a && old->springs[k].b == sp->b &&
               changed_far(old, k, ohrest, w_old, nt, sp)) {
      h->rest[j] = ts__handover_rest_at(old, k, ohrest, w_old); /* changed during a blend: its strain */
    } else if (k != UINT32_MAX) {
      const ts_spring *os = &old->springs[k];
      const double told = ts__handover_tension(os, ts__handover_spring_length(old, os), ts__handover_rest_at(old, k, ohrest, w_old));
      h->rest[j] = ts__handover_rest_for(sp, ts__handover_spring_length(nt, sp), told);
    } else {
      /* a new spring: unstretched, but in the mass-spring form its rest
       * length not below half its own (strain -0.5 of it, the default
       * strain limit, ts_material.c): the node term makes up the force.
       * Unstretched, a column spring of a new column in the top layer
       * crushed under the pressed sphere took its length, 0.066-0.15 mm
       * against its own 1 mm, as its rest length: the layer opening by
       * 0.05 mm then stretched it 70 % on the exponential law (phi 100-550
       * within a step, the substep count measured at its start 8) and the
       * session diverged in the first step after the install
       * (test_refine_press). Its own rest length for every compressed new
       * spring instead put Loop's smoothed rest shape (new springs 34-43 %
       * off their lengths) into dead node loads: the liver's first step
       * 0.65 mm off its twin's (test_refine_smooth_liver) */
      const double l = ts__handover_spring_length(nt, sp);
      h->rest[j] = l > 0 ? (ms_rest && l < 0.5 * sp->rest ? 0.5 * sp->rest : l) : sp->rest;
    }
  }
  int any_tool = 0;
  for (int k = 0; k < n_tools; k++) any_tool |= tools[k].active;
  /* the refined network's forces at the touched nodes, and what makes up
   * the difference: against its own springs (the mass-spring step's term)
   * and against the hand-over rest lengths (XPBD's residual term) */
  ts__handover_node_forces(nt, m->nodes, m->n_nodes, m->touched, m->new_springs, m->n_new_springs, NULL, NULL, 0.0, h->f);
  ts__handover_node_forces(nt, m->nodes, m->n_nodes, m->touched, m->new_springs, m->n_new_springs, h->rest, NULL, 1.0, fo);
  /* in rest lengths (ts_ms_handover.c) the mass-spring step's node term is
   * what the hand-over rest lengths leave, as XPBD's f_res, but against
   * the mass-spring view of the unrefined accelerations and kept with a
   * tool on the tissue (the step sums the forces exactly) */
  if (ms_rest)
    for (uint32_t q = 0; q < m->n_nodes; q++) memcpy(h->f[m->nodes[q]], fo[m->nodes[q]], sizeof fo[0]);
  const uint32_t n_nd = local ? m->n_nodes : n;
  for (uint32_t q = 0; q < n_nd; q++) {
    const uint32_t i = local ? m->nodes[q] : q;
    const double im = nt->inv_mass[i];
    if (im == 0) {
      memset(h->f[i], 0, sizeof h->f[i]);
      memset(h->f_res[i], 0, sizeof h->f_res[i]);
      h->depth[i] = 0;
      continue;
    }
    if (!m->touched[i]) {
      /* untouched (ts_handover.h, "Local"): the earlier hand-over's terms
       * at its weight, none without one */
      for (int c = 0; c < 3; c++) {
        h->f[i][c] = oh && w_old > 0 ? w_old * oh->f[i][c] : 0.0;
        h->f_res[i][c] = oh && w_old > 0 && !any_tool ? w_old * oh->f_res[i][c] : 0.0;
      }
      h->depth[i] = oh && oh->depth ? fmax(0.0, w_old * oh->depth[i]) : 0.0;
      continue;
    }
    double fn = 0, nrm[3] = {0, 0, 0}, band = 0, pen = -INFINITY;
    if (any_tool && i >= n0) {
      pen = ts__handover_tool_depth(tools, n_tools, placed, nt->x[i], nrm, &band);
      /* both parents on a tool: the edge the node splits lies on it */
      double bp = 0;
      int on = 1;
      for (int k = 0; k < 2 && on; k++) {
        const uint32_t p = parents[i - n0][k];
        on = p < n0 && ts__handover_tool_depth(tools, n_tools, placed, old->x[p], NULL, &bp) > -0.1 * bp;
      }
      if (!on) band = 0;
      /* touching: within the mass-spring step's skin (a tenth of the band),
       * where its contact marks the node; a new node is on the tool shrunk
       * by its allowance */
      if (band > 0 && pen > -0.1 * band) fn = h->f[i][0] * nrm[0] + h->f[i][1] * nrm[1] + h->f[i][2] * nrm[2];
    }
    for (int c = 0; c < 3; c++) {
      h->f[i][c] = acc[i][c] / im - h->f[i][c]; /* h->f: the refined network's forces (fo in rest lengths) */
      h->f_res[i][c] = accx[i][c] / im - fo[i][c];
    }
    /* a new node on a tool (the tool shrunk by its allowance), on an edge
     * whose ends are both on it, whose springs push it into the tool: the
     * tool's reaction holds it (the
     * mass-spring step marks it before the first substep), so the part of
     * the node force that would stand in for that reaction, pushing it
     * off the tool by up to the springs' push, is left to the reaction.
     * Kept, it is a dead load: right after a fast press the springs under
     * the tool push hard (the tissue lags the press) and relax within a
     * few steps while the load stays, driving the node into the tissue
     * (on the liver, 2 mm pressed at 67 um a step and refined at once:
     * 0.016 N on a new node, 6,200 times its weight, 0.48 mm in the third
     * step, test_refine_liver). The first step stays as it was (its
     * parents' accelerations have no push into the tool, so the node's
     * normal one is about zero either way). The old nodes keep their
     * force: the same rule on them left a second refinement under the
     * tool 29 um off in its first step (run_case, refine_fixture.h), against 8.6 um; and
     * so does a new node with a parent off the tool (the reaction's
     * friction then dragged the node the moving sphere holds 2.3 um off
     * the twin's, against 0.5 um: test_refine_async's async case). */
    if (fn < 0) {
      const double off = h->f[i][0] * nrm[0] + h->f[i][1] * nrm[1] + h->f[i][2] * nrm[2];
      const double cut = fmin(fmax(off, 0.0), -fn);
      for (int c = 0; c < 3; c++) h->f[i][c] -= cut * nrm[c];
    }
    /* the allowance: a new node's depth inside a tool; an old node is
     * where the unrefined tissue had it and meets the tools as it did (a
     * node a mesh tool's projection left inside by its last substep is
     * pushed on as in the unrefined tissue: 13 um sideways in one step,
     * measured, which an allowance would hold back) */
    if (i < n0) pen = 0.0;
    double d = fmax(pen, 0.0);
    if (any_tool) /* a tool on the tissue: XPBD's rest lengths alone (ts_handover.h) */
      h->f_res[i][0] = h->f_res[i][1] = h->f_res[i][2] = 0;
    if (i < n0 && oh && oh->depth) d = fmax(d, w_old * oh->depth[i]);
    h->depth[i] = d;
  }
  for (int k = 0; k < n_tools; k++) ts__handover_placed_free(&placed[k]);
  free(placed);
  free(own);
  h->start = nt->time;
  h->duration = duration;
  h->ms_rest = ms_rest;
  h->plain = !earlier;
  *out = h;
  return 0;
}

int ts_handover_create(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                       const ts_tool *tools, int n_tools, double duration, int ms_mode, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  int rc = create_args(old, nt, parents, tools, n_tools, duration, ms_mode);
  if (rc) return rc;
  ts_handover_map *m = NULL;
  rc = ts__handover_map_build(old, nt, parents, &m);
  if (!rc) rc = create_mapped(old, nt, parents, m, tools, n_tools, duration, ms_mode != TS_HANDOVER_MS_FORCE, NULL, 0, out);
  if (rc) {
    ts__handover_map_free(m);
    return rc;
  }
  (*out)->map = m;
  return 0;
}

int ts_handover_alloc(uint32_t n, uint32_t ns, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_handover *c = calloc(1, sizeof *c);
  if (c) {
    c->f = malloc(sizeof *c->f * ((size_t)n + 1));
    c->f_res = malloc(sizeof *c->f_res * ((size_t)n + 1));
    c->rest = malloc(sizeof *c->rest * ((size_t)ns + 1));
    c->depth = malloc(sizeof *c->depth * ((size_t)n + 1));
  }
  if (!c || !c->f || !c->f_res || !c->rest || !c->depth) {
    ts_handover_free(c);
    return TS_ENOMEM;
  }
  *out = c;
  return 0;
}

int ts_handover_copy_into(const ts_handover *h, uint32_t n, uint32_t ns, ts_handover *dst) {
  if (!h || !dst || !h->f || !h->f_res || !h->rest || !h->depth || !dst->f || !dst->f_res || !dst->rest ||
      !dst->depth)
    return TS_EINVAL;
  ts__handover_map_free(dst->map);
  ts_handover a = *dst; /* dst's arrays, h's scalars */
  *dst = *h;
  dst->map = NULL;
  dst->f = a.f, dst->f_res = a.f_res, dst->rest = a.rest, dst->depth = a.depth;
  memcpy(dst->f, h->f, sizeof *dst->f * n);
  memcpy(dst->f_res, h->f_res, sizeof *dst->f_res * n);
  memcpy(dst->rest, h->rest, sizeof *dst->rest * ns);
  memcpy(dst->depth, h->depth, sizeof *dst->depth * n);
  return 0;
}

/* A copy of a hand-over (its arrays too), or NULL for h NULL or out of
 * memory (*rc TS_ENOMEM then). */
ts_handover *ts__handover_copy(const ts_handover *h, uint32_t n, uint32_t ns, int *rc) {
  if (!h) return NULL;
  ts_handover *c = NULL;
  *rc = ts_handover_alloc(n, ns, &c);
  if (*rc) return NULL;
  *rc = ts_handover_copy_into(h, n, ns, c);
  if (*rc) {
    ts_handover_free(c);
    return NULL;
  }
  return c;
}

/* ---- a hand-over made on a snapshot, renewed at install (server/refine.c) ---- */

int ts_handover_copy(const ts_handover *h, uint32_t n_nodes, uint32_t n_springs, ts_handover **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!h) return 0;
  if (!h->f || !h->f_res || !h->rest || !h->depth) return TS_EINVAL;
  int rc = 0;
  *out = ts__handover_copy(h, n_nodes, n_springs, &rc);
  return rc;
}

int ts_handover_renew(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2], const ts_tool *tools,
                      int n_tools, const double *rest_fix) {
  if (!nt || !cur || nt->n_nodes < cur->n_nodes) return TS_EINVAL;
  if (!nt->hand) return 0; /* refined without a hand-over */
  const double duration = nt->hand->duration;
  const int ms_rest = nt->hand->ms_rest;
  int rc = create_args(cur, nt, parents, tools, n_tools, duration, TS_HANDOVER_MS_DEFAULT);
  if (rc) return rc;
  /* the map made with the snapshot's hand-over, or a new one */
  ts_handover_map *m = ts__handover_map_fits(nt->hand->map, cur, nt) ? nt->hand->map : NULL;
  const int fresh = m == NULL;
  if (fresh) rc = ts__handover_map_build(cur, nt, parents, &m);
  /* made again in nt's hand-over's own arrays (create_mapped says why) */
  ts_handover *h = NULL;
  if (!rc) rc = create_mapped(cur, nt, parents, m, tools, n_tools, duration, ms_rest, nt->hand, !fresh && nt->hand->plain, &h);
  if (rc) {
    if (fresh) ts__handover_map_free(m);
    return rc;
  }
  if (fresh) {
    ts__handover_map_free(h->map);
    h->map = m;
  }
  if (rest_fix) {
    for (uint32_t j = 0; j < nt->n_springs; j++) {
      const double r = h->rest[j] + rest_fix[j];
      if (isfinite(r) && r > 0) h->rest[j] = r;
    }
    h->plain = 0;
  }
  return 0;
}

int ts_handover_fit_carried(ts_tissue *nt, const ts_tissue *cur, const uint32_t (*parents)[2],
                            const struct ts_xpbd_def *def, const ts_tool *tools, int n_tools, int flags,
                            double dt, double *rest_fix, ts_handover_fit_stats *stats) {
  if (!nt || !cur || !def || !rest_fix || !nt->hand) return TS_EINVAL;
  int rc = ts_handover_renew(nt, cur, parents, tools, n_tools, NULL);
  if (rc) return rc;
  const uint32_t ns = nt->n_springs;
  double *rest0 = malloc(sizeof *rest0 * (ns + 1));
  if (!rest0) return TS_ENOMEM;
  double *rest = nt->hand->rest;
  nt->hand->plain = 0; /* corrected, then fitted */
  memcpy(rest0, rest, sizeof *rest0 * ns);
  for (uint32_t j = 0; j < ns; j++) {
    const double r = rest[j] + rest_fix[j];
    if (isfinite(r) && r > 0) rest[j] = r;
  }
  rc = ts_handover_fit_xpbd(nt, cur, parents, def, tools, n_tools, flags, dt, stats);
  /* what the fit left (its best, or the carried corrections when it could
   * not run) */
  for (uint32_t j = 0; j < ns; j++) rest_fix[j] = rest[j] - rest0[j];
  free(rest0);
  return rc;
}
