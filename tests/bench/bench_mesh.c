/*
 * bench_mesh.c: real meshes all the way (issue 4's benchmark): getting a
 * tissue ready (import, extrusion, solver setup), Loop subdivision of a
 * 1,000-triangle region of the liver through its three layers, and the
 * XPBD step, each printed beside the mass-spring step on the same tissue
 * (the reference: what the session pays every millisecond anyway).
 *
 *   bench_mesh [--quick | --full] [SCENARIO ...]   (default: liver patch-L)
 *
 * Lines per scenario (CPU seconds of one thread; ref "massspring_step",
 * ref_value the mean mass-spring step, ts_massspring_step at the session's
 * 1 ms, without tools, from rest; ratio = how many steps the operation
 * costs):
 *   massspring_step_s  the reference itself (steps timed);
 *   import_s, extrude_s, build_s   the liver's stages (ts_mesh_import_file,
 *                      ts_extrude, ts_tissue_build + ts_massspring_prepare);
 *   setup_s            the whole mass-spring tissue: the liver's three
 *                      stages, or ts_patch_create for the generated patch
 *                      (its extrusion and build; there is no file);
 *   xpbd_setup_s       ts_xpbd_build (default settings) on that tissue;
 *   xpbd_step_s        one ts_xpbd_step (defaults: automatic substeps, 4
 *                      sweeps), from rest, no tools;
 *   xpbd_step_volume_s ts_xpbd_step with the prism volume constraints
 *                      (def.volume = 1), ref "xpbd_step": the step without
 *                      them, timed again right after; beside it its setup
 *                      and substeps;
 *   xpbd_live_cpu_per_sim_s  (liver) CPU seconds per simulated second of
 *                      the live setting (README, "Live sessions of large
 *                      meshes": XPBD stepping dt = 1/60 s, once per 60 Hz
 *                      frame, LIVE_SUBSTEPS substeps of LIVE_ITERATIONS
 *                      sweeps), from rest for LIVE_SIM_S, without tools;
 *                      ref "xpbd_default": the same LIVE_SIM_S at the
 *                      session's 1 ms with the default settings (automatic
 *                      substeps); under 1 keeps up with wall time on one
 *                      core. Beside them the mean node displacement from
 *                      rest each reached at the end (mm): how much softer
 *                      the live setting acts;
 *   loop_region_s      (liver) ts_loop_extrusion of the first 1,000
 *                      triangles, breadth-first (ts_region), around the
 *                      surface triangle nearest the tool path's centre,
 *                      through all sheets (plan, apply, render surface and
 *                      prism checks), with the refined counts beside it;
 *   refine_xpbd_s      a live refinement as an XPBD session does it
 *                      (server/refine.c: ts_refine_run, the hand-over's
 *                      rest lengths fitted to trial steps by
 *                      ts_handover_fit_xpbd, ts_xpbd_build), ref
 *                      "massspring_refine": ts_refine_run alone, what a
 *                      mass-spring session does, on the same region and
 *                      state. The state: a 5 mm sphere pressed REFINE_PRESS
 *                      into the top of the tissue by XPBD over
 *                      REFINE_PRESS_STEPS steps of 1 ms; the region: Loop on
 *                      the surface triangles a ray down the sphere's axis
 *                      picks within the daemon's default range (5 mm).
 *                      Beside them the fit alone (fit_s), its trial steps,
 *                      the nodes they step and the remaining error, and the
 *                      60 Hz frame interval: the physics thread is held for
 *                      refine_xpbd_s;
 *   fit_region_s       the fit alone (trials on the refined region and its
 *                      rings, ts_handover.h), ref "fit_whole": the same fit
 *                      with its trials over the whole tissue (TS_FIT_WHOLE,
 *                      how it was done before);
 *   live_refine_max_interval_s  the stepping thread's longest interval
 *                      between two step starts (its CPU time; the wall
 *                      clock's beside it) while an XPBD
 *                      session is refined live, stepping back to back as a
 *                      physics thread that has fallen behind does, the
 *                      sphere held pressed in: the refinement off the
 *                      stepping thread as server/refine.c does it (snapshot;
 *                      ts_refine_run, the fit and the solver on another
 *                      thread while the steps go on; the install), ref
 *                      "inline_max_interval": the same refinement between
 *                      two steps (as the daemon did before), in the same
 *                      run from the same state. Beside them the step, the
 *                      snapshot, the install (and whether the fit ran again
 *                      there, ts_handover_install_plan), the rounds of the
 *                      chase (the fit again on the other thread at a fresh
 *                      snapshot, as server/refine.c does while the tissue
 *                      is further than TS_HANDOVER_CARRY_DRIFT from the last
 *                      fit's snapshot), that distance at the install, the
 *                      first step's largest difference from the unrefined
 *                      tissue's step from the same state (um; a new node
 *                      against its parents' mean; that step is not timed),
 *                      the interval with the install and the first step
 *                      after it beside the mean of the refined tissue's
 *                      next ones (a refined, blending tissue steps slower:
 *                      what the install adds is their difference) and the
 *                      longest before the request, the
 *                      install without a fit (ts_refine_restate and
 *                      ts_handover_renew alone, what a mass-spring session
 *                      or a tissue at rest costs), the other thread's time
 *                      and the steps taken meanwhile (all CPU
 *                      seconds of the thread that ran them);
 *   live_refine_install_s  the install alone on the stepping thread as a
 *                      mass-spring session does it (ts_refine_restate and
 *                      ts_handover_renew: the hand-over made again on the
 *                      refined region, ts_handover.h), ref
 *                      "inline_massspring_refine": ts_refine_run, what the
 *                      inline refinement held the thread for; beside them
 *                      XPBD's install in the same run (xpbd_install_s, with
 *                      the fit again when the chase left the tissue too far
 *                      from the last fit, xpbd_install_refit; the chase's
 *                      rounds, xpbd_chase_rounds) and XPBD's inline
 *                      refinement.
 *   refined_step_loop_s, refined_step_leb_s   the mass-spring step (mean,
 *                      from rest, no tools, as massspring_step_s) of the
 *                      tissue refined at rest by Loop or LEB on the region
 *                      refine_xpbd_s picks (no hand-over), with its column
 *                      map, so with selective mass scaling (ts_ms_sms.c)
 *                      where it lengthens the stable substep, and with the
 *                      local mass scaling of the refined region
 *                      (ts_ms_local.c, on by default);
 *                      ref "unrefined_step": the unrefined tissue's step;
 *                      beside them the same refined tissue without the
 *                      local scaling (nolocal_step_s: the refined region's
 *                      physical masses, as before it), then also without
 *                      the map (nomap_step_s: no columns, so lumped masses,
 *                      as a refined tissue was stepped before it had one),
 *                      the substeps of the last step of each, and the
 *                      local scaling's added inertia (nodes, per cent of
 *                      their mass and of the tissue's);
 *   refine_rebuild_loop_s, refine_rebuild_leb_s   the refinement's springs
 *                      rebuilt locally against the whole build, on the same
 *                      region at rest (bench_mesh_rebuild.c says what);
 *   refine_smooth_cross_s   the crossing check's share of a refinement with
 *                      Loop's smoothing rules, on the same region at rest
 *                      (bench_mesh_smooth.c says what);
 *   blend_smooth_cpu_per_sim_s, blend_midpoint_cpu_per_sim_s   the
 *                      mass-spring step through a live refinement's blend
 *                      (the same region, the sphere pressed 2 mm, Loop with
 *                      the smoothing rules or midpoints, the default
 *                      hand-over), CPU per simulated second and substeps,
 *                      beside the unrefined twin stepped from the same
 *                      state (bench_mesh_blend.c says what).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_mesh_blend.h"
#include "bench_mesh_rebuild.h"
#include "bench_mesh_smooth.h"
#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_handover.h"
#include "ts_loop.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_meshtopo.h"
#include "ts_refine.h"
#include "ts_region.h"
#include "ts_tissue.h"
#include "ts_xpbd.h"

#define REGION_TRIS 1000u
#define LIVE_DT (1.0 / 60.0) /* s: one step per 60 Hz frame */
#define LIVE_SUBSTEPS 4u
#define LIVE_ITERATIONS 4u
#define LIVE_SIM_S 0.1 /* s simulated by both settings */
#define REFINE_PRESS 0.002    /* m: the sphere's press before the refinement */
#define REFINE_PRESS_STEPS 30 /* 1 ms steps of that press */
#define REFINE_RADIUS 0.005   /* m: the sphere */
#define REFINE_RANGE 0.005    /* m: the region (server/refine.c's default) */
#define FRAME_S (1.0 / 60.0)  /* s: a frame interval at 60 Hz */

typedef struct reps {
  int ms_steps, xpbd_steps, loops, setups, refines;
} reps;

/* One line beside the mass-spring step. */
static void emit_vs_step(const char *scen, const char *metric, double value, double step) {
  cJSON *L = ts_bench_line("mesh", scen, metric, value, "s");
  ts_bench_line_ref(L, "massspring_step", step);
  ts_bench_line_emit(L);
}

static double time_steps(ts_tissue *t, int n, uint32_t *substeps);

/* Mean mass-spring step from rest, CPU seconds; <0 on error. */
static double time_massspring(ts_tissue *t, int n) {
  uint32_t substeps;
  return time_steps(t, n, &substeps);
}

/* XPBD setup and mean step from rest, the defaults with or without the
 * prism volume constraints; 0 or -1. */
static int time_xpbd(ts_tissue *t, int n, int volume, double *setup_s, double *step_s, uint32_t *substeps) {
  double c0 = ts_bench_cpu_s();
  ts_xpbd_def def = ts_xpbd_default_def();
  def.volume = volume;
  ts_xpbd *x = NULL;
  int rc = ts_xpbd_build(t, &def, &x);
  double c1 = ts_bench_cpu_s();
  if (rc) {
    fprintf(stderr, "bench_mesh: ts_xpbd_build: %s\n", ts_err_name(rc));
    return -1;
  }
  ts_tissue_reset(t);
  ts_xpbd_stats st;
  memset(&st, 0, sizeof st);
  double c2 = ts_bench_cpu_s();
  for (int i = 0; i < n && !rc; i++) rc = ts_xpbd_step(x, t, TS_BENCH_DT, NULL, 0, &st);
  double c3 = ts_bench_cpu_s();
  ts_xpbd_destroy(x);
  ts_tissue_reset(t);
  if (rc) {
    fprintf(stderr, "bench_mesh: ts_xpbd_step: %s\n", ts_err_name(rc));
    return -1;
  }
  *setup_s = c1 - c0;
  *step_s = (c3 - c2) / n;
  *substeps = st.substeps;
  return 0;
}

/* XPBD from rest for sim_s simulated seconds in steps of dt with the given
 * substeps (0: automatic) and sweeps, damped by the tissue's drag as a
 * session is: CPU seconds per simulated second and the mean node
 * displacement from rest at the end (m). 0 or -1. */
static int run_xpbd_for(ts_tissue *t, double dt, uint32_t substeps, uint32_t iterations,
                        double sim_s, double *cpu_per_s, double *mean_disp) {
  ts_xpbd_def def = ts_xpbd_default_def();
  def.damping = t->drag;
  def.substeps = substeps;
  def.iterations = iterations;
  ts_xpbd *x = NULL;
  int rc = ts_xpbd_build(t, &def, &x);
  if (rc) {
    fprintf(stderr, "bench_mesh: ts_xpbd_build: %s\n", ts_err_name(rc));
    return -1;
  }
  ts_tissue_reset(t);
  int steps = (int)lround(sim_s / dt);
  double c0 = ts_bench_cpu_s();
  for (int i = 0; i < steps && !rc; i++) rc = ts_xpbd_step(x, t, dt, NULL, 0, NULL);
  double c1 = ts_bench_cpu_s();
  ts_xpbd_destroy(x);
  double d = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double e[3] = {t->x[i][0] - t->rest[i][0], t->x[i][1] - t->rest[i][1],
                   t->x[i][2] - t->rest[i][2]};
    d += sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
  }
  ts_tissue_reset(t);
  if (rc) {
    fprintf(stderr, "bench_mesh: ts_xpbd_step: %s\n", ts_err_name(rc));
    return -1;
  }
  *cpu_per_s = (c1 - c0) / (steps * dt);
  *mean_disp = d / t->n_nodes;
  return 0;
}

/* The first REGION_TRIS triangles breadth-first around the surface triangle
 * nearest point p, into sel; returns how many (fewer when the surface is
 * smaller) or 0 on error. */
static uint32_t pick_region(const ts_extrusion *e, const double p[3], uint32_t *sel) {
  ts_mesh surf = {e->nv, e->n_surface_tris, e->x, e->surface_tris};
  ts_meshtopo *topo = NULL;
  ts_region *r = NULL;
  uint32_t n = 0;
  if (ts_meshtopo_build(&surf, &topo) || ts_region_alloc(surf.n_verts, surf.n_tris, &r)) goto out;
  uint32_t seed = 0;
  double best = INFINITY, q[3];
  for (uint32_t f = 0; f < surf.n_tris; f++) {
    const uint32_t *t = surf.t[f];
    double d = ts_point_triangle_distance(p, surf.v[t[0]], surf.v[t[1]], surf.v[t[2]], q);
    if (d < best) best = d, seed = f;
  }
  /* widen the range until the region holds enough triangles */
  for (double range = 0.002; range < 1; range *= 1.25) {
    if (ts_region_from_triangle(r, &surf, topo, seed, p, range)) goto out;
    if (r->n_tris >= REGION_TRIS || r->n_tris == surf.n_tris) break;
  }
  n = r->n_tris < REGION_TRIS ? r->n_tris : REGION_TRIS;
  memcpy(sel, r->tris, sizeof *sel * n); /* breadth-first order: a connected patch */
out:
  ts_region_free(r);
  ts_meshtopo_free(topo);
  return n;
}

static int time_live_refine(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                            uint32_t ns, const ts_tool *tool, const ts_xpbd_def *def, double ms_refine_s);

/* A live refinement on both solvers' paths (see the top of this file).
 * 0 or -1. */
static int time_refine(const char *name, ts_tissue *t, const ts_extrusion *ex, const reps *n) {
  int status = -1;
  ts_refine_src *src = ts_bench_refine_source(name, t, ex);
  ts_xpbd *x = NULL;
  uint32_t *sel = NULL, ns = 0;
  if (!src) return -1;
  /* the top of the outer sheet (its first nv nodes) at rest */
  uint32_t nv = src->e->nv, top = 0;
  for (uint32_t j = 1; j < nv; j++)
    if (t->rest[j][1] > t->rest[top][1]) top = j;
  ts_tool tool;
  memset(&tool, 0, sizeof tool);
  tool.kind = TS_TOOL_SPHERE;
  tool.active = 1;
  tool.radius = REFINE_RADIUS;
  tool.quat[0] = 1;
  ts_xpbd_def def = ts_xpbd_default_def();
  def.damping = t->drag;
  ts_tissue_reset(t);
  int rc = ts_xpbd_build(t, &def, &x);
  for (int k = 1; k <= REFINE_PRESS_STEPS && !rc; k++) {
    const double d = REFINE_PRESS * k / REFINE_PRESS_STEPS;
    tool.pos[0] = t->rest[top][0];
    tool.pos[1] = t->rest[top][1] + REFINE_RADIUS - d;
    tool.pos[2] = t->rest[top][2];
    rc = ts_xpbd_step(x, t, TS_BENCH_DT, &tool, 1, NULL);
  }
  if (rc) {
    fprintf(stderr, "bench_mesh: %s: pressing: %s\n", name, ts_err_name(rc));
    goto out;
  }
  const double o[3] = {tool.pos[0], tool.pos[1] + 0.05, tool.pos[2]}, dir[3] = {0, -1, 0};
  rc = ts_refine_pick(src, t, o, dir, REFINE_RANGE, &sel, &ns, NULL);
  if (rc) {
    fprintf(stderr, "bench_mesh: %s: ts_refine_pick: %s\n", name, ts_err_name(rc));
    goto out;
  }
  ts_refine_opts opts = {TS_REFINE_LOOP, 0, 0, 0, 0, &tool, 1, 0, 0, 0};
  double ms_s = 0, xp_s = 0, fit_s = 0, fit_err = 0, whole_s = 0, whole_err = 0;
  uint32_t new_nodes = 0, n_after = 0, trials = 0, fit_nodes = 0, whole_trials = 0;
  char err[256];
  /* pass 0: mass-spring; 1: XPBD (the fit on the refined region, as the
     daemon does); 2: XPBD with the fit's trials over the whole tissue */
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < n->refines; i++) {
      ts_tissue *r = NULL;
      ts_refine_src *rs = NULL;
      ts_refine_info info;
      info.parents = NULL;
      ts_xpbd *rx = NULL;
      double c0 = ts_bench_cpu_s(), c1 = c0;
      rc = ts_refine_run(src, t, sel, ns, &opts, &r, &rs, &info, err, sizeof err);
      if (!rc && pass > 0) {
        ts_handover_fit_stats fs;
        c1 = ts_bench_cpu_s();
        rc = ts_handover_fit_xpbd(r, t, (const uint32_t(*)[2])info.parents, &def, &tool, 1,
                                  pass == 2 ? TS_FIT_WHOLE : 0, TS_BENCH_DT, &fs);
        const double f = (ts_bench_cpu_s() - c1) / n->refines;
        if (pass == 1) {
          fit_s += f;
          fit_err = fs.err;
          trials = fs.trials;
          fit_nodes = fs.nodes;
        } else {
          whole_s += f;
          whole_err = fs.err;
          whole_trials = fs.trials;
        }
        if (!rc) rc = ts_xpbd_build(r, &def, &rx);
      }
      double c2 = ts_bench_cpu_s();
      if (!rc) {
        new_nodes = info.new_nodes;
        n_after = info.n_nodes;
      }
      if (pass < 2) *(pass ? &xp_s : &ms_s) += (c2 - c0) / n->refines;
      ts_xpbd_destroy(rx);
      free(info.parents);
      ts_tissue_destroy(r);
      ts_refine_src_free(rs);
      if (rc) {
        fprintf(stderr, "bench_mesh: %s: refinement: %s (%s)\n", name, err, ts_err_name(rc));
        goto out;
      }
    }
  cJSON *L = ts_bench_line("mesh", name, "refine_xpbd_s", xp_s, "s");
  ts_bench_line_ref(L, "massspring_refine", ms_s);
  ts_bench_line_num(L, "fit_s", fit_s);
  ts_bench_line_num(L, "fit_trials", trials);
  ts_bench_line_num(L, "fit_nodes", fit_nodes);
  ts_bench_line_num(L, "fit_err_um", fit_err * 1e6);
  ts_bench_line_num(L, "frame_interval_s", FRAME_S);
  ts_bench_line_num(L, "region_triangles", ns);
  ts_bench_line_num(L, "nodes_before", t->n_nodes);
  ts_bench_line_num(L, "new_nodes", new_nodes);
  ts_bench_line_num(L, "nodes_after", n_after);
  ts_bench_line_num(L, "repeats", n->refines);
  ts_bench_line_emit(L);
  L = ts_bench_line("mesh", name, "fit_region_s", fit_s, "s");
  ts_bench_line_ref(L, "fit_whole", whole_s);
  ts_bench_line_num(L, "whole_trials", whole_trials);
  ts_bench_line_num(L, "whole_err_um", whole_err * 1e6);
  ts_bench_line_emit(L);
  if (time_live_refine(name, t, src, sel, ns, &tool, &def, ms_s)) goto out;
  status = 0;
out:
  free(sel);
  ts_xpbd_destroy(x);
  ts_refine_src_free(src);
  ts_tissue_reset(t);
  return status;
}

/* ---- a live refinement off the stepping thread (server/refine.c) ---- */

/* The calling thread's CPU time, s: on a shared machine a thread's wall
 * time is inflated by the others' load (measured 8-10x on a loaded 2-core
 * box), its CPU time is what it would take alone on a core. */
static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double real_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct live_job {
  const ts_refine_src *src;
  ts_tissue *snap;
  const uint32_t *sel;
  uint32_t ns;
  ts_tool tool;
  ts_xpbd_def def;
  ts_tissue *nt;
  ts_refine_src *nsrc;
  ts_refine_info info;
  double *fix;
  double fit_err; /* m: the last fit's trials left */
  ts_xpbd *nx;
  int rc;
  int chase;      /* the work is a round of the chase (live_chase) */
  double work_s;
  atomic_int done;
} live_job;

/* The refinement thread's part: refine, fit (corrections kept apart),
 * build the solver. */
static void live_work(live_job *j) {
  double w0 = wall_s();
  char err[256];
  ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, 0, 0, &j->tool, 1, 0, 0, 0};
  j->info.parents = NULL;
  j->rc = ts_refine_run(j->src, j->snap, j->sel, j->ns, &o, &j->nt, &j->nsrc, &j->info, err, sizeof err);
  if (!j->rc) {
    j->fix = calloc((size_t)j->nt->n_springs + 1, sizeof *j->fix);
    ts_handover_fit_stats fs = {NAN, 0, 0};
    j->rc = j->fix ? ts_handover_fit_carried(j->nt, j->snap, (const uint32_t(*)[2])j->info.parents, &j->def,
                                             &j->tool, 1, 0, TS_BENCH_DT, j->fix, &fs)
                   : TS_ENOMEM;
    j->fit_err = fs.err;
  }
  if (!j->rc) j->rc = ts_xpbd_build(j->nt, &j->def, &j->nx);
  j->work_s = wall_s() - w0;
}

/* A round of the chase (server/refine.c's chase_work): the fit again at
 * the fresh snapshot, from the corrections so far. */
static void live_chase(live_job *j) {
  double w0 = wall_s();
  const uint32_t(*par)[2] = (const uint32_t(*)[2])j->info.parents;
  j->rc = ts_refine_restate(j->nt, j->snap, par);
  ts_handover_fit_stats fs = {NAN, 0, 0};
  if (!j->rc)
    (void)ts_handover_fit_carried(j->nt, j->snap, par, &j->def, &j->tool, 1, TS_FIT_QUICK, TS_BENCH_DT, j->fix,
                                  &fs);
  j->fit_err = fs.err;
  j->work_s += wall_s() - w0;
}

static void *live_thread(void *arg) {
  live_job *j = arg;
  if (j->chase)
    live_chase(j);
  else
    live_work(j);
  atomic_store(&j->done, 1);
  return NULL;
}

#define LIVE_BEFORE 5     /* steps before the request */
#define LIVE_AFTER 5      /* steps after the install */
#define LIVE_MAX_STEPS 20000

typedef struct live_out {
  double max_interval, max_interval_wall, step_s, snapshot_s, install_s, renew_s, work_s;
  int refit, steps_during, rounds;
  double drift;     /* m: moved since the last fit's snapshot, at the install */
  double before_max;       /* the longest interval before the request */
  double install_interval; /* the interval with the install and the first step after it */
  double after_mean;       /* the mean interval after that (the refined tissue's steps) */
  double first_off; /* m: the first step after the install against the
                       unrefined tissue's from the same state (a new node:
                       its parents' mean); NaN inline */
} live_out;

/* Steps a copy of t0 (XPBD, the sphere held) back to back and refines it
 * live after LIVE_BEFORE steps: inline (1) or off the stepping thread (0).
 * 0 or a ts_errno. */
static int live_run(const ts_tissue *t0, const ts_refine_src *src, const uint32_t *sel, uint32_t ns,
                    const ts_tool *tool0, const ts_xpbd_def *def, int inl, live_out *out) {
  memset(out, 0, sizeof *out);
  ts_tissue *t = NULL;
  ts_xpbd *x = NULL;
  ts_tool tool = *tool0;
  live_job j;
  memset(&j, 0, sizeof j);
  atomic_init(&j.done, 0);
  pthread_t th;
  double(*twin)[3] = NULL; /* the unrefined tissue's next positions at the install */
  int after_n = 0;
  uint32_t n_old = 0;
  out->first_off = NAN;
  int started = 0, installed = 0, rc = ts_refine_snapshot(t0, &t);
  if (!rc) rc = ts_xpbd_build(t, def, &x);
  double last = wall_s(), last_wall = real_s(), steps_total = 0;
  int n_steps = 0;
  for (int k = 0; !rc && k < LIVE_MAX_STEPS; k++) {
    double now = wall_s(), now_wall = real_s();
    if (k > 0) out->max_interval = fmax(out->max_interval, now - last);
    if (k > 0 && k <= LIVE_BEFORE) out->before_max = fmax(out->before_max, now - last);
    if (installed && k == installed + 1) out->install_interval = now - last;
    if (installed && k > installed + 1) {
      out->after_mean += now - last;
      after_n++;
    }
    if (k > 0) out->max_interval_wall = fmax(out->max_interval_wall, now_wall - last_wall);
    last = now;
    last_wall = now_wall;
    if (k == LIVE_BEFORE) { /* the request */
      double s0 = wall_s();
      j.src = src;
      j.sel = sel;
      j.ns = ns;
      j.tool = tool;
      j.def = *def;
      rc = ts_refine_snapshot(t, &j.snap);
      if (rc) break;
      if (inl) {
        live_work(&j);
        atomic_store(&j.done, 1);
      } else {
        out->snapshot_s = wall_s() - s0;
        if (pthread_create(&th, NULL, live_thread, &j)) {
          rc = TS_EINTERNAL;
          break;
        }
        started = 1;
      }
    }
    if (k >= LIVE_BEFORE && !installed && atomic_load(&j.done)) { /* the install */
      if (started) pthread_join(th, NULL);
      started = 0;
      rc = j.rc;
      if (rc) break;
      const uint32_t(*par)[2] = (const uint32_t(*)[2])j.info.parents;
      double i0 = wall_s();
      int plan = TS_INSTALL_CARRY;
      if (!inl) {
        out->drift = ts_handover_drift(t, j.snap);
        plan = ts_handover_install_plan(out->drift, j.fit_err, out->rounds);
      }
      if (plan == TS_INSTALL_CHASE) { /* a fresh snapshot, fitted again on the other thread */
        ts_tissue_destroy(j.snap);
        j.snap = NULL;
        rc = ts_refine_snapshot(t, &j.snap);
        if (rc) break;
        j.tool = tool;
        j.chase = 1;
        out->rounds++;
        atomic_store(&j.done, 0);
        if (pthread_create(&th, NULL, live_thread, &j)) {
          rc = TS_EINTERNAL;
          break;
        }
        started = 1;
      }
      if (!inl && plan != TS_INSTALL_CHASE) {
        /* the install without a fit, timed on the result itself (as the
           daemon installs it: with the hand-over's map from the
           refinement thread; a copy would have none). What follows makes
           the hand-over again from the same state, so it is as if this
           had not run */
        double r0 = wall_s();
        rc = ts_refine_restate(j.nt, t, par);
        if (!rc) rc = ts_handover_renew(j.nt, t, par, &tool, 1, j.fix);
        out->renew_s = wall_s() - r0;
        if (rc) break;
        i0 = wall_s();
        rc = ts_refine_restate(j.nt, t, par);
        if (!rc && plan == TS_INSTALL_REFIT) {
          out->refit = 1;
          rc = ts_handover_fit_carried(j.nt, t, par, def, &tool, 1, 0, TS_BENCH_DT, j.fix, NULL);

        } else if (!rc) {
          rc = ts_handover_renew(j.nt, t, par, &tool, 1, j.fix);
        }
        if (rc) break;
        out->install_s = wall_s() - i0;
        /* the unrefined tissue's step from here (not timed: the interval
           starts after it), for the first step's difference */
        double a0 = wall_s(), a0w = real_s();
        n_old = t->n_nodes;
        twin = malloc(sizeof *twin * n_old);
        if (!twin) {
          rc = TS_ENOMEM;
          break;
        }
        ts_tool tw = tool;
        rc = ts_xpbd_step(x, t, TS_BENCH_DT, &tw, 1, NULL);
        if (rc) break;
        memcpy(twin, t->x, sizeof *twin * n_old);
        last += wall_s() - a0;
        last_wall += real_s() - a0w;
      }
      if (plan == TS_INSTALL_CHASE) goto step;
      ts_xpbd_carry_tools(j.nx, x); /* the tool's last pose, as the daemon's install */
      ts_tissue_destroy(t);
      ts_xpbd_destroy(x);
      t = j.nt;
      x = j.nx;
      j.nt = NULL;
      j.nx = NULL;
      if (inl) out->install_s = 0;
      out->work_s = j.work_s;
      installed = k;
    }
  step:
    if (installed && k >= installed + LIVE_AFTER) break;
    double s0 = wall_s();
    rc = ts_xpbd_step(x, t, TS_BENCH_DT, &tool, 1, NULL);
    steps_total += wall_s() - s0;
    n_steps++;
    if (k >= LIVE_BEFORE && !installed) out->steps_during++;
    if (!rc && twin && k == installed) { /* the first step after the install */
      const uint32_t(*par)[2] = (const uint32_t(*)[2])j.info.parents;
      double m = 0;
      for (uint32_t i = 0; i < t->n_nodes; i++)
        for (int c = 0; c < 3; c++) {
          const double w = i < n_old ? twin[i][c]
                                     : 0.5 * (twin[par[i - n_old][0]][c] + twin[par[i - n_old][1]][c]);
          m = fmax(m, fabs(t->x[i][c] - w));
        }
      out->first_off = m;
    }
  }
  free(twin);
  if (started) pthread_join(th, NULL);
  if (!rc && !installed) rc = TS_EINTERNAL;
  if (after_n) out->after_mean /= after_n;
  out->step_s = n_steps ? steps_total / n_steps : 0;
  ts_tissue_destroy(j.snap);
  ts_tissue_destroy(j.nt);
  ts_refine_src_free(j.nsrc);
  ts_xpbd_destroy(j.nx);
  free(j.info.parents);
  free(j.fix);
  ts_xpbd_destroy(x);
  ts_tissue_destroy(t);
  return rc;
}

/* Both ways from the same pressed state (time_refine's), two lines (the
 * install alone in the second; ms_refine_s: ts_refine_run's time, the
 * inline mass-spring refinement). 0 or -1. */
static int time_live_refine(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                            uint32_t ns, const ts_tool *tool, const ts_xpbd_def *def, double ms_refine_s) {
  live_out a, b;
  int rc = live_run(t, src, sel, ns, tool, def, 1, &b);
  if (!rc) rc = live_run(t, src, sel, ns, tool, def, 0, &a);
  if (rc) {
    fprintf(stderr, "bench_mesh: %s: live refinement: %s\n", name, ts_err_name(rc));
    return -1;
  }
  cJSON *L = ts_bench_line("mesh", name, "live_refine_max_interval_s", a.max_interval, "s");
  ts_bench_line_ref(L, "inline_max_interval", b.max_interval);
  ts_bench_line_num(L, "step_s", a.step_s);
  ts_bench_line_num(L, "snapshot_s", a.snapshot_s);
  ts_bench_line_num(L, "install_s", a.install_s);
  ts_bench_line_num(L, "install_refit", a.refit);
  ts_bench_line_num(L, "install_interval_s", a.install_interval);
  ts_bench_line_num(L, "refined_interval_s", a.after_mean);
  ts_bench_line_num(L, "before_max_interval_s", a.before_max);
  ts_bench_line_num(L, "chase_rounds", a.rounds);
  ts_bench_line_num(L, "install_drift_um", a.drift * 1e6);
  ts_bench_line_num(L, "first_step_off_um", a.first_off * 1e6);
  ts_bench_line_num(L, "install_no_fit_s", a.renew_s);
  ts_bench_line_num(L, "worker_s", a.work_s);
  ts_bench_line_num(L, "steps_meanwhile", a.steps_during);
  ts_bench_line_num(L, "inline_refine_s", b.work_s);
  ts_bench_line_num(L, "wall_max_interval_s", a.max_interval_wall);
  ts_bench_line_num(L, "inline_wall_max_interval_s", b.max_interval_wall);
  ts_bench_line_num(L, "frame_interval_s", FRAME_S);
  ts_bench_line_emit(L);
  /* the install alone: a mass-spring session's (no fit), beside what an
     inline mass-spring refinement held the thread for; XPBD's beside it */
  L = ts_bench_line("mesh", name, "live_refine_install_s", a.renew_s, "s");
  ts_bench_line_ref(L, "inline_massspring_refine", ms_refine_s);
  ts_bench_line_num(L, "xpbd_install_s", a.install_s);
  ts_bench_line_num(L, "xpbd_install_refit", a.refit);
  ts_bench_line_num(L, "xpbd_chase_rounds", a.rounds);
  ts_bench_line_num(L, "inline_xpbd_refine_s", b.work_s);
  ts_bench_line_num(L, "frame_interval_s", FRAME_S);
  ts_bench_line_emit(L);
  return 0;
}

/* Mean mass-spring step from rest over n steps (CPU seconds) and the
 * substeps of the last; <0 on error. */
static double time_steps(ts_tissue *t, int n, uint32_t *substeps) {
  ts_tissue_reset(t);
  ts_step_stats st;
  memset(&st, 0, sizeof st);
  double c0 = ts_bench_cpu_s();
  for (int i = 0; i < n; i++) {
    int rc = ts_massspring_step(t, TS_BENCH_DT, NULL, 0, &st);
    if (rc) {
      fprintf(stderr, "bench_mesh: mass-spring step: %s\n", ts_err_name(rc));
      return -1;
    }
  }
  double s = (ts_bench_cpu_s() - c0) / n;
  *substeps = st.substeps;
  ts_tissue_reset(t);
  return s;
}

/* The mass-spring step before and after a refinement, with and without
 * the refined tissue's column map (see the top of this file). 0 or -1. */
static int time_refined_steps(const char *name, ts_tissue *t, const ts_extrusion *ex, const reps *n) {
  int status = -1;
  ts_refine_src *src = ts_bench_refine_source(name, t, ex);
  uint32_t *sel = NULL, ns = 0;
  if (!src) return -1;
  uint32_t nv = src->e->nv, top = 0;
  for (uint32_t j = 1; j < nv; j++)
    if (t->rest[j][1] > t->rest[top][1]) top = j;
  ts_tissue_reset(t);
  const double o[3] = {t->rest[top][0], t->rest[top][1] + 0.05, t->rest[top][2]}, dir[3] = {0, -1, 0};
  int rc = ts_refine_pick(src, t, o, dir, REFINE_RANGE, &sel, &ns, NULL);
  if (rc) {
    fprintf(stderr, "bench_mesh: %s: ts_refine_pick: %s\n", name, ts_err_name(rc));
    goto out;
  }
  if (ts_bench_mesh_rebuild(name, t, src, sel, ns, n->refines)) goto out;
  if (ts_bench_mesh_smooth(name, t, src, sel, ns, n->refines)) goto out;
  uint32_t sub0 = 0;
  const double base = time_steps(t, n->ms_steps, &sub0);
  if (base < 0) goto out;
  /* the blend: twice the timed steps, the whole blend with --full */
  if (ts_bench_mesh_blend(name, t, src, sel, ns, top, n->ms_steps >= 100 ? 0 : 2 * n->ms_steps, sub0)) goto out;
  for (int method = TS_REFINE_LOOP; method <= TS_REFINE_LEB; method++) {
    ts_refine_opts opts = {method, 0, 0, 0, -1.0, NULL, 0, 0, 0, 0};
    ts_tissue *r = NULL;
    ts_refine_src *rs = NULL;
    char err[256];
    rc = ts_refine_run(src, t, sel, ns, &opts, &r, &rs, NULL, err, sizeof err);
    ts_refine_src_free(rs);
    if (rc) {
      fprintf(stderr, "bench_mesh: %s: refinement: %s (%s)\n", name, err, ts_err_name(rc));
      goto out;
    }
    uint32_t sub_map = 0, sub_nomap = 0, sub_nolocal = 0;
    ts_local_mass lm;
    memset(&lm, 0, sizeof lm);
    const double with_map = time_steps(r, n->ms_steps, &sub_map);
    (void)ts_massspring_local_mass(r, &lm, NULL);
    r->local_mass_scaling = 0; /* the reference: physical masses in the refined region */
    rc = ts_massspring_prepare(r);
    const double no_local = rc ? -1 : time_steps(r, n->ms_steps, &sub_nolocal);
    free(r->column_node); /* as before the map: no columns, lumped masses */
    r->column_node = NULL;
    r->n_columns = 0;
    rc = ts_massspring_prepare(r);
    const double no_map = rc ? -1 : time_steps(r, n->ms_steps, &sub_nomap);
    const uint32_t nodes_after = r->n_nodes;
    ts_tissue_destroy(r);
    if (with_map < 0 || no_map < 0 || no_local < 0) goto out;
    cJSON *L = ts_bench_line("mesh", name, method == TS_REFINE_LOOP ? "refined_step_loop_s" : "refined_step_leb_s",
                             with_map, "s");
    ts_bench_line_ref(L, "unrefined_step", base);
    ts_bench_line_num(L, "nolocal_step_s", no_local);
    ts_bench_line_num(L, "nomap_step_s", no_map);
    ts_bench_line_num(L, "substeps_unrefined", sub0);
    ts_bench_line_num(L, "substeps_refined", sub_map);
    ts_bench_line_num(L, "substeps_nolocal", sub_nolocal);
    ts_bench_line_num(L, "substeps_nomap", sub_nomap);
    ts_bench_line_num(L, "added_mass_nodes", lm.nodes);
    ts_bench_line_num(L, "added_mass_pct_of_region", lm.region_mass > 0 ? 100 * lm.added / lm.region_mass : 0);
    ts_bench_line_num(L, "added_mass_pct_of_tissue", lm.tissue_mass > 0 ? 100 * lm.added / lm.tissue_mass : 0);
    ts_bench_line_num(L, "region_triangles", ns);
    ts_bench_line_num(L, "nodes_before", t->n_nodes);
    ts_bench_line_num(L, "nodes_after", nodes_after);
    ts_bench_line_num(L, "steps", n->ms_steps);
    ts_bench_line_emit(L);
  }
  status = 0;
out:
  free(sel);
  ts_refine_src_free(src);
  ts_tissue_reset(t);
  return status;
}

static int run(const char *name, const reps *n) {
  char err[512];
  ts_tissue *t = NULL;
  ts_extrusion *ex = NULL;
  ts_bench_build_times tm = {0, 0, 0};
  double setup = 0;
  int status = -1;
  int is_liver = strcmp(name, "liver") == 0;
  /* setup, timed over n->setups builds (the last one kept) */
  for (int i = 0; i < n->setups; i++) {
    ts_tissue_destroy(t);
    ts_extrusion_free(ex);
    t = NULL;
    ex = NULL;
    if (is_liver) {
      ts_bench_build_times one;
      if (ts_bench_liver_create(&t, &ex, &one, err, sizeof err)) {
        fprintf(stderr, "bench_mesh: %s\n", err);
        goto out;
      }
      tm.import_s += one.import_s / n->setups;
      tm.extrude_s += one.extrude_s / n->setups;
      tm.build_s += one.build_s / n->setups;
    } else {
      ts_bench_scenario s;
      double c0 = ts_bench_cpu_s();
      if (ts_bench_scenario_create(name, &s, err, sizeof err)) {
        fprintf(stderr, "bench_mesh: %s\n", err);
        goto out;
      }
      setup += (ts_bench_cpu_s() - c0) / n->setups;
      t = s.tissue; /* taken over */
      s.tissue = NULL;
      ts_bench_scenario_destroy(&s);
    }
  }
  if (is_liver) setup = tm.import_s + tm.extrude_s + tm.build_s;

  double step = time_massspring(t, n->ms_steps);
  if (step < 0) goto out;
  cJSON *L = ts_bench_line("mesh", name, "massspring_step_s", step, "s");
  ts_bench_line_num(L, "nodes", t->n_nodes);
  ts_bench_line_num(L, "springs", t->n_springs);
  ts_bench_line_num(L, "steps", n->ms_steps);
  ts_bench_line_emit(L);
  if (is_liver) {
    emit_vs_step(name, "import_s", tm.import_s, step);
    emit_vs_step(name, "extrude_s", tm.extrude_s, step);
    emit_vs_step(name, "build_s", tm.build_s, step);
  }
  L = ts_bench_line("mesh", name, "setup_s", setup, "s");
  ts_bench_line_ref(L, "massspring_step", step);
  if (ex) {
    ts_bench_line_num(L, "surface_vertices", ex->nv);
    ts_bench_line_num(L, "thinned_vertices", ex->n_thinned);
    ts_bench_line_num(L, "least_depth_fraction", ex->min_depth_kept);
    ts_bench_line_num(L, "relaxed_vertices", ex->n_relaxed);
  }
  ts_bench_line_emit(L);

  double xs, xt, vs, vt;
  uint32_t sub, vsub;
  if (time_xpbd(t, n->xpbd_steps, 0, &xs, &xt, &sub)) goto out;
  emit_vs_step(name, "xpbd_setup_s", xs, step);
  L = ts_bench_line("mesh", name, "xpbd_step_s", xt, "s");
  ts_bench_line_ref(L, "massspring_step", step);
  ts_bench_line_num(L, "substeps", sub);
  ts_bench_line_num(L, "steps", n->xpbd_steps);
  ts_bench_line_emit(L);
  /* the same with the prism volume constraints, beside the step without
     them, timed again in the same run */
  if (time_xpbd(t, n->xpbd_steps, 1, &vs, &vt, &vsub) || time_xpbd(t, n->xpbd_steps, 0, &xs, &xt, &sub))
    goto out;
  L = ts_bench_line("mesh", name, "xpbd_step_volume_s", vt, "s");
  ts_bench_line_ref(L, "xpbd_step", xt);
  ts_bench_line_num(L, "setup_s", vs);
  ts_bench_line_num(L, "substeps", vsub);
  ts_bench_line_num(L, "steps", n->xpbd_steps);
  ts_bench_line_emit(L);

  if (is_liver) {
    double live, live_d, def, def_d;
    if (run_xpbd_for(t, LIVE_DT, LIVE_SUBSTEPS, LIVE_ITERATIONS, LIVE_SIM_S, &live, &live_d) ||
        run_xpbd_for(t, TS_BENCH_DT, 0, 4, LIVE_SIM_S, &def, &def_d))
      goto out;
    L = ts_bench_line("mesh", name, "xpbd_live_cpu_per_sim_s", live, "s");
    ts_bench_line_ref(L, "xpbd_default", def);
    ts_bench_line_num(L, "dt", LIVE_DT);
    ts_bench_line_num(L, "substeps", LIVE_SUBSTEPS);
    ts_bench_line_num(L, "iterations", LIVE_ITERATIONS);
    ts_bench_line_num(L, "sim_s", LIVE_SIM_S);
    ts_bench_line_num(L, "mean_displacement_mm", live_d * 1e3);
    ts_bench_line_num(L, "ref_mean_displacement_mm", def_d * 1e3);
    ts_bench_line_emit(L);
  }

  if (ex) {
    uint32_t *sel = malloc(sizeof *sel * REGION_TRIS);
    if (!sel) goto out;
    uint32_t top = 0;
    for (uint32_t j = 1; j < ex->nv; j++)
      if (ex->x[j][1] > ex->x[top][1]) top = j;
    uint32_t ns = pick_region(ex, ex->x[top], sel);
    if (ns == 0) {
      fprintf(stderr, "bench_mesh: %s: no region\n", name);
      free(sel);
      goto out;
    }
    double c0 = ts_bench_cpu_s();
    ts_extrusion *r = NULL;
    int rc = 0;
    for (int i = 0; i < n->loops; i++) {
      ts_extrusion_free(r);
      r = NULL;
      rc = ts_loop_extrusion(ex, sel, ns, TS_LOOP_SMOOTH, &r, NULL, err, sizeof err);
      if (rc && !(rc == TS_EMESH && r)) break; /* inverted prisms: still timed, counted */
      rc = 0;
    }
    double lt = (ts_bench_cpu_s() - c0) / n->loops;
    free(sel);
    if (rc) {
      fprintf(stderr, "bench_mesh: %s: ts_loop_extrusion: %s (%s)\n", name, err, ts_err_name(rc));
      ts_extrusion_free(r);
      goto out;
    }
    L = ts_bench_line("mesh", name, "loop_region_s", lt, "s");
    ts_bench_line_ref(L, "massspring_step", step);
    ts_bench_line_num(L, "region_triangles", ns);
    ts_bench_line_num(L, "layers", ex->n_layers);
    ts_bench_line_num(L, "surface_triangles_after", r->n_surface_tris);
    ts_bench_line_num(L, "nodes_after", (double)r->n_sheets * r->nv);
    ts_bench_line_num(L, "inverted_prisms_after", r->n_inverted);
    ts_bench_line_num(L, "repeats", n->loops);
    ts_bench_line_emit(L);
    ts_extrusion_free(r);
  }
  if (time_refine(name, t, ex, n)) goto out;
  if (time_refined_steps(name, t, ex, n)) goto out;
  status = 0;
out:
  ts_extrusion_free(ex);
  ts_tissue_destroy(t);
  return status;
}

int main(int argc, char **argv) {
  static const char usage[] = "usage: bench_mesh [--quick | --full] [SCENARIO ...]\n";
  ts_bench_mode mode;
  const char *names[16];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 16, &n_names);
  if (a) return a == 1 ? 0 : 2;
  reps n = {20, 5, 5, 2, 2};
  if (mode == TS_BENCH_QUICK) n = (reps){5, 2, 2, 1, 1};
  if (mode == TS_BENCH_FULL) n = (reps){100, 20, 20, 5, 5};
  if (n_names == 0) {
    names[n_names++] = "liver";
    names[n_names++] = "patch-L";
  }
  int status = 0;
  for (int i = 0; i < n_names; i++)
    if (run(names[i], &n)) status = 1;
  return status;
}
