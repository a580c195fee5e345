/*
 * refine_fixture.h: what the live-refinement suites (test_refine_*.c,
 * server/core/ts_refine.h) share: the default patch stepped by the
 * mass-spring method or XPBD (sim), the 5 mm sphere pressed 3 mm into it,
 * a copy of a pressed patch (sim_clone), the checks every refinement must
 * pass (refine_and_check: old nodes bit for bit, new nodes at their parent
 * edges' midpoints, a closed consistently wound 2-manifold with Euler
 * characteristic 2, the total mass, every prism valid), the no-jump
 * measure against an unrefined twin (step_jump), and the no-jump
 * case (run_case: the step after a refinement, the blend, a second
 * refinement during it, the equilibrium after it). Header-only, static
 * inline; needs Check's ck_assert. Each suite is its own program, so
 * g_hmode is one per suite.
 */
#ifndef TS_TEST_REFINE_FIXTURE_H
#define TS_TEST_REFINE_FIXTURE_H

#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_handover.h"
#include "ts_massspring.h"
#include "ts_refine.h"
#include "ts_tissue.h"
#include "ts_tool.h"
#include "ts_xpbd.h"

#define QUANTUM 10e-6 /* TS_DEFAULT_QUANTUM, proto/ts_codec.h: the wire's resolution, m */
#define DT 1e-3

/* The mass-spring step's form of the hand-over that refine_and_check and
 * the async case ask for (ts_refine_opts.handover): the default, but where
 * a case compares it with the node forces alone (loop_smooth_rest) */
static int g_hmode = TS_HANDOVER_MS_DEFAULT;

typedef struct sim {
  ts_tissue *t;
  ts_xpbd *x; /* NULL: mass-spring */
} sim;

static inline ts_tool press_tool(double depth) {
  ts_tool tool = {0};
  tool.kind = TS_TOOL_SPHERE;
  tool.active = 1;
  tool.radius = 0.005;
  tool.quat[0] = 1;
  tool.pos[0] = 0.0021;
  tool.pos[1] = 0.005 - depth;
  tool.pos[2] = -0.0013;
  return tool;
}

static inline void step(sim *s, ts_tool *tool) {
  int rc = s->x ? ts_xpbd_step(s->x, s->t, DT, tool, 1, NULL)
                : ts_massspring_step(s->t, DT, tool, 1, NULL);
  ck_assert_int_eq(rc, 0);
}

static inline void sim_init(sim *s, int xpbd) {
  ts_patch_def d = ts_default_patch_def();
  ck_assert_int_eq(ts_patch_create(&d, &s->t), 0);
  s->x = NULL;
  if (xpbd) {
    ts_xpbd_def xd = ts_xpbd_default_def();
    xd.damping = s->t->drag;
    ck_assert_int_eq(ts_xpbd_build(s->t, &xd, &s->x), 0);
  }
}

/* dst: a fresh patch (and solver) in src's state: positions, velocities,
 * previous positions, time and step count, all a refinement carries over
 * (ts_refine.c), so that refining dst is refining src. src has no
 * hand-over. Pressing one patch and copying it keeps the suite short. */
static inline void sim_clone(sim *dst, const sim *src) {
  sim_init(dst, src->x != NULL);
  const ts_tissue *a = src->t;
  ts_tissue *b = dst->t;
  ck_assert_uint_eq(a->n_nodes, b->n_nodes);
  ck_assert_ptr_null(a->hand);
  memcpy(b->x, a->x, sizeof *b->x * a->n_nodes);
  memcpy(b->v, a->v, sizeof *b->v * a->n_nodes);
  memcpy(b->x_prev, a->x_prev, sizeof *b->x_prev * a->n_nodes);
  b->time = a->time;
  b->steps = a->steps;
}

static inline void sim_free(sim *s) {
  ts_xpbd_destroy(s->x);
  ts_tissue_destroy(s->t);
}

/* Presses the tool in over 100 steps and holds it for 50 (tool 0: the
 * tool stays away, the patch sags under gravity from rest). */
static inline void press(sim *s, int tool_on) {
  for (int i = 1; i <= 150; i++) {
    ts_tool tool = press_tool(0.003 * (i < 100 ? i / 100.0 : 1.0));
    tool.active = tool_on;
    step(s, &tool);
  }
}

static inline int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The render surface less the inner layers' top sheets (the solid's
 * boundary) is closed, consistently wound and 2-manifold (every
 * directed edge once, its reverse once), no triangle degenerate at the
 * current positions; returns V - E + F over the used vertices. */
static inline long check_surface(const ts_tissue *t) {
  /* the solid's boundary: the inner layers' top sheets (every node on one
   * sheet s, 0 < s < n_sheets - 1) lie inside it and are left out */
  uint32_t *sheet = malloc(sizeof *sheet * t->n_nodes);
  ck_assert_ptr_nonnull(sheet);
  for (uint32_t i = 0; i < t->n_nodes; i++) sheet[i] = t->nodes_per_sheet ? i / t->nodes_per_sheet : 0;
  if (t->column_node)
    for (uint32_t s = 0; s < t->n_sheets; s++)
      for (uint32_t j = 0; j < t->n_columns; j++) sheet[t->column_node[s * t->n_columns + j]] = s;
  uint32_t nh = 0;
  uint32_t(*hull)[3] = malloc(sizeof *hull * t->n_tris);
  ck_assert_ptr_nonnull(hull);
  for (uint32_t i = 0; i < t->n_tris; i++) {
    uint32_t s0 = sheet[t->tris[i][0]];
    if (s0 > 0 && s0 + 1 < t->n_sheets && sheet[t->tris[i][1]] == s0 && sheet[t->tris[i][2]] == s0) continue;
    memcpy(hull[nh++], t->tris[i], sizeof *hull);
  }
  free(sheet);
  size_t ne = 3 * (size_t)nh;
  uint64_t *dir = malloc(sizeof *dir * ne);
  uint8_t *used = calloc(t->n_nodes, 1);
  ck_assert(dir && used);
  /* here and in the checks below: plain checks per item and one assertion
   * for the first that fails (each passing Check assertion writes its
   * location to the runner's file: a system call per item, hundreds of
   * thousands a case) */
  uint32_t degenerate = UINT32_MAX, outside = UINT32_MAX;
  for (uint32_t i = 0; i < nh; i++) {
    const uint32_t *tr = hull[i];
    double u[3], v[3], n[3];
    for (int c = 0; c < 3; c++) {
      u[c] = t->x[tr[1]][c] - t->x[tr[0]][c];
      v[c] = t->x[tr[2]][c] - t->x[tr[0]][c];
    }
    n[0] = u[1] * v[2] - u[2] * v[1];
    n[1] = u[2] * v[0] - u[0] * v[2];
    n[2] = u[0] * v[1] - u[1] * v[0];
    /* smallest triangle of the twice-refined patch: ~1e-7 m^2 (0.7 mm edges
       over 1 mm layers); 1e-12 m^2 is degenerate by any measure */
    if (!(0.5 * sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]) > 1e-12) && degenerate == UINT32_MAX)
      degenerate = i;
    for (int k = 0; k < 3; k++) {
      if (tr[k] >= t->n_nodes) {
        outside = i;
        break;
      }
      used[tr[k]] = 1;
      dir[3 * (size_t)i + k] = (uint64_t)tr[k] << 32 | tr[(k + 1) % 3];
    }
  }
  ck_assert_msg(outside == UINT32_MAX, "triangle %u: a node past %u", outside, t->n_nodes);
  ck_assert_msg(degenerate == UINT32_MAX, "triangle %u degenerate", degenerate);
  qsort(dir, ne, sizeof *dir, cmp);
  int twice = 0, single = 0;
  for (size_t i = 0; i + 1 < ne; i++) twice |= dir[i] == dir[i + 1];
  ck_assert_msg(!twice, "directed edge twice");
  for (size_t i = 0; i < ne && !single; i++) {
    uint64_t rev = (dir[i] & 0xffffffffu) << 32 | dir[i] >> 32;
    single = bsearch(&rev, dir, ne, sizeof *dir, cmp) == NULL;
  }
  ck_assert_msg(!single, "edge with one triangle (T-junction or hole)");
  long V = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) V += used[i];
  free(dir);
  free(used);
  free(hull);
  return V - (long)(ne / 2) + (long)nh;
}

/* Every prism valid at rest and in the current shape. */
static inline void check_prisms(const ts_refine_src *src, const ts_tissue *t) {
  const ts_extrusion *e = src->e;
  int rc = 0, rc_rest = 0;
  for (uint32_t l = 0; l < e->n_layers && !rc && !rc_rest; l++)
    for (uint32_t f = 0; f < e->n_surface_tris; f++) {
      double P[3][3], Q[3][3], Pr[3][3], Qr[3][3];
      for (int k = 0; k < 3; k++) {
        uint32_t a = src->node_of[l * e->nv + e->surface_tris[f][k]];
        uint32_t b = src->node_of[(l + 1) * e->nv + e->surface_tris[f][k]];
        memcpy(P[k], t->x[a], sizeof P[k]);
        memcpy(Q[k], t->x[b], sizeof Q[k]);
        memcpy(Pr[k], t->rest[a], sizeof P[k]);
        memcpy(Qr[k], t->rest[b], sizeof Q[k]);
      }
      if (!rc) rc = ts_prism_check((const double (*)[3])P, (const double (*)[3])Q, NULL, NULL);
      if (!rc_rest) rc_rest = ts_prism_check((const double (*)[3])Pr, (const double (*)[3])Qr, NULL, NULL);
    }
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(rc_rest, 0);
}

/* Each new node is the midpoint (same formula, so bit for bit) of its two
 * parents, created before it, in position, velocity and previous position;
 * and its rest position is the midpoint of theirs to rounding (LEB and
 * Loop's topology with midpoints, ts_refine.h; not with Loop's smoothing). */
/* a sanitizer build (TS_TEST_SANITIZED) starts the live cases' loops at
 * the pressed variant where the sagging one runs no other code: see each
 * suite */
#ifdef TS_TEST_SANITIZED
#define SAG_FIRST 1
#else
#define SAG_FIRST 0
#endif

static inline void check_midpoints(const ts_tissue *t, uint32_t n_old, const uint32_t (*par)[2], int smooth) {
  uint32_t bad = UINT32_MAX;
  for (uint32_t i = n_old; i < t->n_nodes && bad == UINT32_MAX; i++) {
    uint32_t p = par[i - n_old][0], q = par[i - n_old][1];
    if (!(p < i && q < i)) {
      bad = i;
      break;
    }
    for (int c = 0; c < 3; c++) {
      int ok = t->x[i][c] == 0.5 * (t->x[p][c] + t->x[q][c]) && t->v[i][c] == 0.5 * (t->v[p][c] + t->v[q][c]) &&
               t->x_prev[i][c] == 0.5 * (t->x_prev[p][c] + t->x_prev[q][c]);
      /* 1e-15 m: rounding of the rest coordinates (~0.05 m) */
      if (!smooth) ok = ok && fabs(t->rest[i][c] - 0.5 * (t->rest[p][c] + t->rest[q][c])) < 1e-15;
      if (!ok) bad = i;
    }
  }
  ck_assert_msg(bad == UINT32_MAX, "node %u: not the midpoint of its parents", bad);
}

/* Mass of the tissue's free nodes plus the source's anchored ones equals
 * the source's total (the tissue's masses are the source's). */
static inline void check_masses(const ts_refine_src *src, const ts_tissue *t, double total) {
  double m = ts_refine_total_mass(src), sum = 0;
  /* 1e-12 relative: the scale to the old total leaves only rounding, ~1e-16
     per node over a few thousand nodes */
  ck_assert_msg(fabs(m - total) <= 1e-12 * total, "total mass %.17g, was %.17g", m, total);
  size_t nn = (size_t)src->e->n_sheets * src->e->nv, bad = SIZE_MAX;
  for (size_t k = 0; k < nn; k++) {
    uint32_t i = src->node_of[k];
    sum += t->inv_mass[i] > 0 ? 1.0 / t->inv_mass[i] : src->mass[k];
    if (t->inv_mass[i] > 0 && !(fabs(1.0 / t->inv_mass[i] - src->mass[k]) <= 1e-12 * src->mass[k]) && bad == SIZE_MAX)
      bad = k;
  }
  ck_assert_msg(bad == SIZE_MAX, "source node %zu: its mass is not the source's", bad);
  ck_assert_msg(fabs(sum - total) <= 1e-12 * total, "tissue mass %.17g, was %.17g", sum, total);
}

/* Refines s->t in place (and s->x rebuilt); checks the carried state.
 * blend: the hand-over's blend time (ts_refine_opts); tool: the step's
 * tool (NULL for none). *par (when not NULL) gets the new nodes' parents
 * (caller frees). Returns the new-node count. */
static inline uint32_t refine_and_check(sim *s, ts_refine_src **srcp, int method, int smooth, double blend,
                                 const ts_tool *tool, uint32_t *n_sel, uint32_t (**par)[2]) {
  ts_refine_src *src = *srcp, *nsrc = NULL;
  ts_tissue *t = s->t;
  uint32_t *sel = NULL, n = 0;
  const double o[3] = {0.003, 0.05, 0.002}, d[3] = {0, -1, 0};
  ck_assert_int_eq(ts_refine_pick(src, t, o, d, 0.005, &sel, &n, NULL), 0);
  ck_assert_uint_gt(n, 4);
  double total = ts_refine_total_mass(src);
  ts_refine_opts opts = {method, 0, 0, smooth, blend, tool, tool ? 1 : 0, 0, g_hmode, 0};
  ts_tissue *r = NULL;
  ts_refine_info info;
  info.parents = NULL;
  char err[256];
  int rc = ts_refine_run(src, t, sel, n, &opts, &r, &nsrc, &info, err, sizeof err);
  ck_assert_msg(rc == 0, "refine: %s", err);
  if (smooth && method == TS_REFINE_LOOP)
    printf("  smoothed rest: moved up to %.3g m, %u vertices limited, scale %.3g, blend %.3g s\n",
           info.rest_move, info.smooth_limited, info.smooth_scale, info.blend_time);
  ts_refine_src_free(src);
  src = *srcp = nsrc;
  free(sel);
  ck_assert_uint_eq(info.n_nodes, r->n_nodes);
  ck_assert_uint_eq(info.new_nodes, r->n_nodes - t->n_nodes);
  ck_assert_uint_gt(info.new_nodes, 0);
  ck_assert_uint_eq(info.new_verts * t->n_sheets, info.new_nodes);
  /* old nodes untouched, bit for bit */
  ck_assert(memcmp(r->x, t->x, sizeof *r->x * t->n_nodes) == 0);
  ck_assert(memcmp(r->v, t->v, sizeof *r->v * t->n_nodes) == 0);
  check_midpoints(r, t->n_nodes, (const uint32_t(*)[2])info.parents, smooth);
  ck_assert_int_eq(check_surface(r), 2);
  check_masses(src, r, total);
  check_prisms(src, r);
  /* anchored nodes stay anchored */
  uint32_t moved_anchor = UINT32_MAX;
  for (uint32_t i = 0; i < t->n_nodes && moved_anchor == UINT32_MAX; i++)
    if ((t->inv_mass[i] == 0) != (r->inv_mass[i] == 0)) moved_anchor = i;
  ck_assert_msg(moved_anchor == UINT32_MAX, "node %u anchored in one tissue only", moved_anchor);
  ck_assert_uint_eq(r->steps, t->steps);
  /* the hand-over is there unless asked away */
  ck_assert_int_eq(r->hand != NULL, blend >= 0);
  *n_sel = info.selected;
  if (s->x) {
    ts_xpbd_def xd = ts_xpbd_default_def();
    xd.damping = r->drag;
    if (blend >= 0) { /* the fit, as server/refine.c does for an XPBD session */
      ts_handover_fit_stats fs;
      ck_assert_int_eq(ts_handover_fit_xpbd(r, t, (const uint32_t(*)[2])info.parents, &xd, tool,
                                            tool ? 1 : 0, 0, DT, &fs), 0);
      printf("  fit: %u trials over %u nodes, %.3g m off\n", fs.trials, fs.nodes, fs.err);
      ck_assert(fs.err < QUANTUM);
    }
    ts_xpbd_destroy(s->x);
    s->x = NULL;
    ck_assert_int_eq(ts_xpbd_build(r, &xd, &s->x), 0);
  }
  if (par)
    *par = info.parents;
  else
    free(info.parents);
  ts_tissue_destroy(t);
  s->t = r;
  return info.new_nodes;
}

/* The jump of a refinement, as the issue measures it: `ref` (refined from
 * the state x0 that `plain`, the unrefined twin, had before its last step)
 * takes one step; every old node's displacement is compared with the twin's
 * in that step, and every new node's with that of its interpolated position
 * (the midpoints, recursively, of the twin's nodes: where a client drawing
 * the unrefined surface sees it). Returns the largest difference (m);
 * *moved gets the twin's largest displacement in the step. */
static inline double step_jump_with(sim *ref, const sim *plain, const double (*x0)[3], const uint32_t (*par)[2],
                             ts_tool *tool, double *moved) {
  const uint32_t n0 = plain->t->n_nodes, n = ref->t->n_nodes;
  ck_assert(memcmp(x0, ref->t->x, sizeof *x0 * n0) == 0);
  step(ref, tool);
  double(*ip)[3] = malloc(sizeof *ip * n);
  ck_assert_ptr_nonnull(ip);
  memcpy(ip, plain->t->x, sizeof *ip * n0);
  for (uint32_t i = n0; i < n; i++)
    for (int c = 0; c < 3; c++) ip[i][c] = 0.5 * (ip[par[i - n0][0]][c] + ip[par[i - n0][1]][c]);
  double worst = 0;
  *moved = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      worst = fmax(worst, fabs(ref->t->x[i][c] - ip[i][c]));
      if (i < n0) *moved = fmax(*moved, fabs(plain->t->x[i][c] - x0[i][c]));
    }
  free(ip);
  return worst;
}

static inline double step_jump(sim *ref, const sim *plain, const double (*x0)[3], const uint32_t (*par)[2],
                        int tool_on, double *moved) {
  ts_tool tool = press_tool(0.003);
  tool.active = tool_on;
  return step_jump_with(ref, plain, x0, par, &tool, moved);
}

/* Largest coordinate change of the first n nodes between x0 and t's x. */
static inline double max_move(const ts_tissue *t, const double (*x0)[3], uint32_t n) {
  double m = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) m = fmax(m, fabs(t->x[i][c] - x0[i][c]));
  return m;
}

static inline double (*snapshot(const ts_tissue *t))[3] {
  double(*x)[3] = malloc(sizeof *x * t->n_nodes);
  ck_assert_ptr_nonnull(x);
  memcpy(x, t->x, sizeof *x * t->n_nodes);
  return x;
}

static inline void energy(const sim *s, double *k, double *p) {
  /* the mass-spring measure on both (XPBD steps the same springs) */
  ts_tissue *t = s->t;
  if (!t->ms) ck_assert_int_eq(ts_massspring_prepare(t), 0);
  ck_assert_int_eq(ts_massspring_energy(t, k, p), 0);
}

#define BLEND 0.1       /* s: the blend time here (half the default, to keep the suite short;
                           a shorter blend is the harder case for the per-step bound) */
#define BLEND_STEPS 120 /* > the blend, 1 ms steps */
#define SECOND_AT 40    /* the second refinement, in the middle of the first blend */
#define SETTLE_STEPS 25 /* d's blend (from SECOND_AT) ends before these do */

/* The no-jump bound, for one solver, method and load (tool_on 0:
 * sagging under gravity from rest; 1: a 5 mm sphere pressed 3 mm in).
 * Four copies of the same pressed patch (a pressed, the others copied
 * from it): a (never refined: the twin), b
 * (refined with the hand-over), c (refined without it: the old behaviour,
 * and the finer network's own equilibrium), d (under the tool only: refined
 * as b, then refined again in the middle of b's blend, with b as its twin
 * then). */
static inline void run_case_with(int xpbd, int method, int tool_on, int smooth) {
  sim a, b, c, d = {NULL, NULL};
  sim_init(&a, xpbd);
  /* d only under the tool (the harder case), to keep the suite short (with
     Loop's smoothing in XPBD too: its fit ended 71 um off before a changed
     spring kept its strain during a blend, ts_handover.c) */
  const int second = tool_on;
  ts_patch_def pd = ts_default_patch_def();
  ts_refine_src *sb = NULL, *sc = NULL, *sd = NULL;
  ck_assert_int_eq(ts_refine_src_patch(&pd, &sb), 0);
  ck_assert_int_eq(ts_refine_src_patch(&pd, &sc), 0);
  if (second) ck_assert_int_eq(ts_refine_src_patch(&pd, &sd), 0);
  press(&a, tool_on);
  sim_clone(&b, &a);
  sim_clone(&c, &a);
  if (second) sim_clone(&d, &a);
  ts_tool tool = press_tool(0.003);
  tool.active = tool_on;
  const uint32_t n0 = a.t->n_nodes;
  uint32_t nsel = 0, (*par)[2] = NULL, (*par_c)[2] = NULL;
  uint32_t added = refine_and_check(&b, &sb, method, smooth, BLEND, tool_on ? &tool : NULL, &nsel, &par);
  refine_and_check(&c, &sc, method, smooth, -1, NULL, &nsel, &par_c);
  if (second) refine_and_check(&d, &sd, method, smooth, BLEND, tool_on ? &tool : NULL, &nsel, NULL);
  const uint32_t n1 = b.t->n_nodes;
  /* with Loop's smoothing the blend is as long as the rest change needs
     (ts_refine_smooth.h), and a second refinement's at least as long: the
     steps cover both, and the settling starts when d's has ended */
  const double blend_b = b.t->hand->duration;
  const int blend_steps = smooth ? (int)ceil(blend_b / DT) + 20 : BLEND_STEPS;
  const int settle_steps = smooth ? SECOND_AT + SETTLE_STEPS : SETTLE_STEPS;
  printf("%s %s, %s: %u triangles selected, %u -> %u nodes (+%u)\n", xpbd ? "xpbd" : "mass-spring",
         method == TS_REFINE_LOOP ? "loop" : "leb", tool_on ? "sphere pressed 3 mm" : "sagging",
         nsel, n0, n1, added);

  /* the step after the refinement */
  double(*x0)[3] = snapshot(a.t);
  step(&a, &tool);
  double moved = 0, moved_c = 0;
  const double jump_c = step_jump(&c, &a, (const double(*)[3])x0, (const uint32_t(*)[2])par_c, tool_on, &moved_c);
  const double jump = step_jump(&b, &a, (const double(*)[3])x0, (const uint32_t(*)[2])par, tool_on, &moved);
  if (second) {
    step(&d, &tool);
    ck_assert(memcmp(b.t->x, d.t->x, sizeof *b.t->x * n1) == 0); /* b and d: the same so far */
  }
  printf("  no-jump: first step after the refinement differs by %.3g m with the hand-over, %.3g m "
         "without (the twin moved %.3g m)\n", jump, jump_c, moved);
  /* The bound: below the quantum plus what the twin's own motion
     explains. With the hand-over the refined tissue starts with the
     unrefined one's accelerations (XPBD: its rest lengths fitted to trial
     steps, ts_handover.h), so what is left is the two networks' different
     response within the step: measured 0.01-0.5 um for the mass-spring
     step, 0.1-0.15 um for XPBD sagging and 0.7-1.4 um for XPBD under the
     tool (2-2.3 um after the second refinement; the fit stops at 0.5 um or
     after 12 trials). */
  const double bound = QUANTUM;
  ck_assert_msg(jump < bound + moved, "the first step differs by %.3g m (twin moved %.3g m)", jump, moved);
  free(x0);

  /* the blend: no step moves a node by more than the quantum plus the
     twin's largest move in the same step; d is refined again on the way */
  double worst_excess = -1, worst_excess2 = -1, jump2 = 0, moved2 = 0;
  uint32_t n2 = 0;
  for (int k = 1; k <= blend_steps; k++) {
    double(*xa)[3] = snapshot(a.t), (*xb)[3] = snapshot(b.t), (*xd)[3] = second ? snapshot(d.t) : NULL;
    const uint32_t nd_before = second ? d.t->n_nodes : 0;
    step(&a, &tool);
    step(&b, &tool);
    step(&c, &tool);
    double ma = max_move(a.t, (const double(*)[3])xa, n0), mb = max_move(b.t, (const double(*)[3])xb, n1);
    worst_excess = fmax(worst_excess, mb - ma);
    ck_assert_msg(mb < bound + ma, "step %d of the blend moved a node %.3g m (twin %.3g m)", k, mb, ma);
    if (!second) {
      /* no d */
    } else if (k == SECOND_AT) { /* d: a second refinement during the blend */
      ck_assert_ptr_nonnull(d.t->hand);
      uint32_t(*par2)[2] = NULL;
      refine_and_check(&d, &sd, method == TS_REFINE_LOOP ? TS_REFINE_LEB : TS_REFINE_LOOP, smooth, BLEND,
                       tool_on ? &tool : NULL, &nsel, &par2);
      n2 = d.t->n_nodes;
      /* a refinement during a blend takes at least that blend's time (its
         rest change still under way); the LEB's own would be BLEND */
      ck_assert(d.t->hand->duration >= blend_b);
      jump2 = step_jump(&d, &b, (const double(*)[3])xd, (const uint32_t(*)[2])par2, tool_on, &moved2);
      printf("  second refinement during the blend: %u -> %u nodes, first step differs by %.3g m "
             "(twin moved %.3g m)\n", nd_before, n2, jump2, moved2);
      ck_assert_msg(jump2 < bound + moved2, "second refinement: the first step differs by %.3g m", jump2);
      free(par2);
    } else {
      step(&d, &tool);
      if (k > SECOND_AT) {
        double md = max_move(d.t, (const double(*)[3])xd, nd_before);
        worst_excess2 = fmax(worst_excess2, md - mb);
        ck_assert_msg(md < bound + mb, "step %d after the second refinement moved a node %.3g m (twin %.3g m)",
                      k - SECOND_AT, md, mb);
      }
    }
    free(xa);
    free(xb);
    free(xd);
  }
  printf("  blend: largest step over the twin's %.3g m (after the second refinement %.3g m)\n", worst_excess,
         worst_excess2);
  /* the blend ends: the hand-over is gone from b (its 0.2 s are over) */
  ck_assert_ptr_null(b.t->hand);
  /* and b goes to the refined network's own equilibrium: that of c */
  for (int k = 0; k < settle_steps; k++) {
    step(&a, &tool);
    step(&b, &tool);
    step(&c, &tool);
    if (second) step(&d, &tool);
  }
  if (second) ck_assert_ptr_null(d.t->hand);
  double dbc = 0;
  for (uint32_t i = 0; i < n1; i++)
    for (int k = 0; k < 3; k++) {
      ck_assert(isfinite(b.t->x[i][k]) && isfinite(b.t->v[i][k]));
      dbc = fmax(dbc, fabs(b.t->x[i][k] - c.t->x[i][k]));
    }
  printf("  after the blend: within %.3g m of the refined tissue without the hand-over\n", dbc);
  if (smooth && tool_on && !xpbd) {
    /* c (mass-spring), refined with Loop's smoothing under the sphere and no hand-over,
       snaps 1.6 mm in its first step and settles into another contact
       state (measured 1.6 mm from b): not a reference here. b at rest
       instead: its last step moves no node by more than 1 um (a tenth of
       the quantum; a tissue still blending moves 2-8 um a step) */
    double(*xb)[3] = snapshot(b.t);
    step(&b, &tool);
    const double mb = max_move(b.t, (const double(*)[3])xb, n1);
    free(xb);
    printf("  after the blend: b's step moves %.3g m\n", mb);
    ck_assert_msg(mb < 1e-6, "not at rest after the blend: %.3g m a step", mb);
    dbc = 0;
  }
  /* 1 um: both are the same network under the same load, 40 ms after the
     blend ended; the drag (150 1/s) has damped the difference out to well
     below the quantum (measured with 60 ms: 3 nm) */
  ck_assert_msg(dbc < 1e-6, "not at the refined equilibrium: %.3g m off", dbc);
  for (uint32_t i = 0; second && i < d.t->n_nodes; i++)
    ck_assert(isfinite(d.t->x[i][0] + d.t->x[i][1] + d.t->x[i][2]));
  /* no explosion: energy bounded by the unrefined tissue's (the same press;
     2x allows the finer mesh's different discretisation of the same strain
     field) */
  double ka, pa, kb, pb;
  energy(&a, &ka, &pa);
  energy(&b, &kb, &pb);
  printf("  kinetic %.3g / %.3g J, potential %.3g / %.3g J (refined / not)\n", kb, ka, pb, pa);
  ck_assert_msg(pb < 2 * fabs(pa) + 1e-9 && kb < 2 * ka + 1e-6, "energy grew: %g %g vs %g %g", kb, pb, ka, pa);
  /* the old nodes have not gone elsewhere: within 0.5 mm of the unrefined
     solution (measured 0.22-0.28 mm under the tool: the finer mesh follows
     the sphere closer) */
  double dmax = 0;
  for (uint32_t i = 0; i < n0; i++)
    for (int k = 0; k < 3; k++) dmax = fmax(dmax, fabs(a.t->x[i][k] - b.t->x[i][k]));
  printf("  old nodes within %.3g m of the unrefined tissue\n", dmax);
  ck_assert(dmax < 5e-4);
  free(par);
  free(par_c);
  ts_refine_src_free(sb);
  ts_refine_src_free(sc);
  if (second) ts_refine_src_free(sd);
  sim_free(&a);
  sim_free(&b);
  sim_free(&c);
  if (second) sim_free(&d);
}

static inline void run_case(int xpbd, int method, int tool_on) { run_case_with(xpbd, method, tool_on, 0); }

#endif
