/*
 * bench_collide.c: collision per physics step (issue 5, "Benchmark"): the
 * tissue's AABB tree refitted for the step's positions plus the query of
 * the standard tool (the dental instrument's OBB tree on the standard path,
 * bench_path.h) against it, beside the brute-force all-pairs test
 * (ts_collide_tool_tissue_brute) on the same poses and positions; and the
 * contact response of ts_contact.h (candidates from the same tree, the swept
 * projection) for the sphere on the path's tip, the tool the daemon's
 * clients use.
 *
 *   bench_collide [--quick | --full] [SCENARIO ...]   (default: all)
 *
 * The tissue deforms as under the tool, locally and step by step, without
 * the cost of a mechanics step in the figures: every step each surface node
 * within 12 mm of the tip (measured in the tangent plane) is pushed along
 * -normal by 0.8 of the tip's depth below the undeformed surface times the
 * smooth bump (1 - (d / 12 mm)^2)^2, all others rest (so the tool is in
 * contact, a fifth of its depth into the dent). So the refit sees what a real
 * press and drag give it: the nodes around the tool move every step, the
 * rest of the tissue not at all (the case the fat boxes of ts_aabb_tree.h
 * are for). The refit is told which nodes moved (dented this step or the
 * last, as the mechanics knows which nodes it moved: ts_aabb_tree_refit_moved)
 * and checks only those; the first step checks every node
 * (ts_aabb_tree_refit). On the brute-force steps the tree is also validated
 * (untimed; invalid_trees counts failures).
 *
 * Steps of 1 ms (the session dt). --quick: 300 steps from t = 2.5 s (press
 * into drag); default: 2000 steps from t = 2 s; --full: the whole 10 s path.
 * Brute force on every 20th step (every 5th in --full is too slow on
 * patch-L: every 50th there).
 *
 * The mass-spring step's triangle pass of a thin mesh tool (ts_ms_contact.c,
 * ts__ms_thin_pass) for the instrument at the same poses on the same dented
 * positions: through the surface's AABB tree (refitted in the pass) beside
 * the scan of every triangle, each from the same positions; positions that
 * differ after the two count as mismatches.
 *
 * Tool against tool (tool_tool below): the pass a session adds to each
 * step, apart, touching, and a mesh tool touching, beside the mass-spring
 * step with the same two tools (ms_step_two_tools_us_per_step).
 *
 * The instrument's response (ts_contact_begin + the swept ts_contact_project)
 * on the same dented positions, its candidates by the descent of both trees
 * beside the former query of the tool's swept root box
 * (ts_contact_def.box_candidates): positions that differ count as mismatches.
 *
 * Tissue self-contact (ts_self_contact.h): its detection on the same
 * refitted tree at each step's dented positions (a dent is no fold: the
 * cost of a pass that finds nothing, the tree walked against itself;
 * bench_self has it beside the former per-node query), beside the tool's
 * refit + query.
 *
 * Lines: refit_query_us_per_step (ref brute_force_us_per_step, target 100
 * on patch-L), self_contact_us_per_step (ref refit_query_us_per_step),
 * refit_us_per_step, contact_response_us_per_step (sphere),
 * instrument_response_us_per_step (ref root_box_response_us_per_step),
 * ms_thin_pass_us_per_step (ref ms_thin_scan_us_per_step), and the contact
 * counts that show both found the same set.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_path.h"
#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_self_contact.h"
#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_contact.h"
#include "ts_error.h"
#include "ts_mesh.h"
#include "ts_mesh_io.h"
#include "ts_ms_internal.h"
#include "ts_obb_tree.h"
#include "ts_tool_contact.h"
#include "ts_xpbd.h"

#define DENT_RADIUS 0.012 /* m */
#define DENT_SHARE 0.8    /* of the tip's depth: the tool stays 20 % of it into the dent */


typedef struct plan {
  const char *name;
  double t0;      /* s: path time of the first step */
  uint32_t steps; /* of 1 ms */
  uint32_t brute_every;
} plan;

static plan plan_for(ts_bench_mode m) {
  if (m == TS_BENCH_QUICK) return (plan){"quick", 2.5, 300, 20};
  if (m == TS_BENCH_FULL) return (plan){"full", 0.0, 10000, 50};
  return (plan){"default", 2.0, 2000, 20};
}

static const char *shared_dir(void) {
  const char *env = getenv("TS_SHARED_DIR");
  return env && env[0] ? env : TS_SHARED_DIR;
}

/* The dented positions for the tip at `tip`; the nodes dented are appended
 * to moved (*n_moved counts them). */
static void dent(const ts_tissue *t, const ts_bench_path *p, const double tip[3], double (*x)[3],
                 uint32_t *moved, uint32_t *n_moved) {
  double rel[3];
  for (int k = 0; k < 3; k++) rel[k] = tip[k] - p->centre[k];
  const double depth =
      -DENT_SHARE * (rel[0] * p->normal[0] + rel[1] * p->normal[1] + rel[2] * p->normal[2]);
  memcpy(x, t->rest, sizeof *x * t->n_nodes);
  if (!(depth > 0)) return;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    double d[3];
    for (int k = 0; k < 3; k++) d[k] = t->rest[i][k] - tip[k];
    const double dn = d[0] * p->normal[0] + d[1] * p->normal[1] + d[2] * p->normal[2];
    double r2 = 0;
    for (int k = 0; k < 3; k++) {
      const double tk = d[k] - dn * p->normal[k];
      r2 += tk * tk;
    }
    const double u = r2 / (DENT_RADIUS * DENT_RADIUS);
    if (u >= 1) continue;
    const double s = depth * (1 - u) * (1 - u);
    for (int k = 0; k < 3; k++) x[i][k] -= s * p->normal[k];
    moved[(*n_moved)++] = i;
  }
}

/* Tool against tool (ts_tool_contact.h) at the cost it adds to a session's
 * step: from the path's start (the approach, 300 steps at most: a tissue
 * at rest cannot take the pressed tool of the window above at once, it
 * diverges) the mass-spring step
 * of the tissue with two tools, the path's 5 mm sphere and a capsule
 * (radius 3 mm, 20 mm, upright) hovering 30 mm over the sphere, is the
 * reference; at each step's poses the tool-tool pass is timed with the
 * capsule there (apart: the root boxes only), with the capsule lowered
 * 0.5 mm into the sphere's top (touching: one leaf pair), and with the
 * instrument at its path pose and the capsule across the instrument's
 * first vertex (touching a mesh: the instrument's tree descended). Each
 * figure is one pass timed right after the mechanics (cold cache, the
 * clock read included: apart and touching take turns going first);
 * warm_us_per_pass is the same pass repeated TT_REPS times back to back.
 * The tissue goes back to rest first (the refit loop above dented it). */
#define TT_REPS 50

static int tool_tool(const char *name, const plan *pl, ts_bench_scenario *sc,
                     const ts_obb_tree *itree, const double tip_local[3]) {
  ts_tissue *t = sc->tissue;
  ts_tissue_reset(t);
  /* one workspace per pair of shapes, as a session keeps its tools' trees */
  ts_tool_contact tc, tm;
  if (ts_tool_contact_init(&tc, 2, 0)) return -1;
  if (ts_tool_contact_init(&tm, 2, 0)) {
    ts_tool_contact_free(&tc);
    return -1;
  }
  const uint32_t steps = pl->steps < 300 ? pl->steps : 300;
  double t_step = 0, t_apart = 0, t_touch = 0, t_mesh = 0, passes = 0, warm[3] = {0, 0, 0};
  uint64_t c_apart = 0, c_touch = 0, c_mesh = 0, b_apart = 0, b_touch = 0, b_mesh = 0;
  int status = -1;
  for (uint32_t k = 0; k < steps; k++) {
    const double time = k * sc->dt;
    ts_tool tools[2];
    ts_bench_path_sphere(&sc->path, time, TS_BENCH_SPHERE_RADIUS, &tools[0]);
    memset(&tools[1], 0, sizeof tools[1]);
    tools[1].kind = TS_TOOL_CAPSULE;
    tools[1].active = 1;
    tools[1].radius = 0.003; /* over 1.73 patch-S edges: no thin pass, as the sphere */
    tools[1].length = 0.02;
    tools[1].quat[0] = 1;
    tools[1].mu_static = TS_TOOL_MU_STATIC_DEFAULT;
    tools[1].mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
    for (int a = 0; a < 3; a++) tools[1].pos[a] = tools[0].pos[a];
    tools[1].pos[1] += 0.03;
    ts_step_stats st;
    double c0 = ts_bench_cpu_s();
    int rc = ts_massspring_step(t, sc->dt, tools, 2, &st);
    if (rc) {
      fprintf(stderr, "collide: %s: ts_massspring_step: %s\n", name, ts_err_name(rc));
      goto out;
    }
    double c1 = ts_bench_cpu_s();
    /* apart and touching in turn first after the mechanics (whose sweep
     * over the nodes leaves the cache cold for whichever comes first) */
    double touch_y = tools[0].pos[1] + TS_BENCH_SPHERE_RADIUS + tools[1].radius - 0.0005;
    double apart_y = tools[1].pos[1], dt_case[2] = {0, 0};
    for (int q = 0; q < 2; q++) {
      int touching = (q + (int)k) % 2;
      tools[1].pos[1] = touching ? touch_y : apart_y;
      double q0 = ts_bench_cpu_s();
      if ((rc = ts_tool_contact_step(&tc, tools, 2))) goto fail;
      dt_case[touching] += ts_bench_cpu_s() - q0;
      if (!k) continue; /* the first builds the trees */
      if (touching)
        c_touch += tc.contacts, b_touch += tc.box_tests;
      else
        c_apart += tc.contacts, b_apart += tc.box_tests;
      /* the same pass again TT_REPS times back to back: the cost without
       * the clock's own (a thread CPU-time read is a system call) and with
       * a warm cache */
      double r0 = ts_bench_cpu_s();
      for (int r = 0; r < TT_REPS; r++)
        if ((rc = ts_tool_contact_step(&tc, tools, 2))) goto fail;
      warm[touching] += (ts_bench_cpu_s() - r0) / TT_REPS;
    }
    /* the instrument on the path, the capsule across its first vertex */
    double R[3][3], trans[3];
    ts_bench_path_instrument_pose(&sc->path, time, tip_local, 1.0, R, trans);
    memset(&tools[0], 0, sizeof tools[0]);
    tools[0].kind = TS_TOOL_MESH;
    tools[0].shape = itree;
    tools[0].active = 1;
    memcpy(tools[0].pos, trans, sizeof trans);
    ts_bench_path_instrument_quat(&sc->path, tools[0].quat);
    for (int a = 0; a < 3; a++)
      tools[1].pos[a] = R[a][0] * itree->v[0][0] + R[a][1] * itree->v[0][1] +
                        R[a][2] * itree->v[0][2] + trans[a];
    tools[1].pos[1] -= 0.001;
    tools[1].length = 0.002;
    tools[1].radius = 0.0005;
    double c5 = ts_bench_cpu_s();
    if ((rc = ts_tool_contact_step(&tm, tools, 2))) goto fail;
    double c6 = ts_bench_cpu_s();
    if (!k) continue; /* the trees are built at a tool's first step (a join): not timed */
    c_mesh += tm.contacts, b_mesh += tm.box_tests;
    double r0 = ts_bench_cpu_s();
    for (int r = 0; r < TT_REPS; r++)
      if ((rc = ts_tool_contact_step(&tm, tools, 2))) goto fail;
    warm[2] += (ts_bench_cpu_s() - r0) / TT_REPS;
    t_step += c1 - c0, t_apart += dt_case[0], t_touch += dt_case[1], t_mesh += c6 - c5;
    passes += st.substeps;
    continue;
  fail:
    fprintf(stderr, "collide: %s: ts_tool_contact_step: %s\n", name, ts_err_name(rc));
    goto out;
  }
  const double n = steps - 1, step_us = t_step / n * 1e6;
  struct {
    const char *metric, *tools;
    double us;
    uint64_t contacts, boxes;
  } rows[3] = {{"tool_tool_apart_us_per_step", "sphere 5 mm + capsule 3 mm 30 mm above", t_apart, c_apart, b_apart},
               {"tool_tool_touching_us_per_step", "sphere 5 mm + capsule 3 mm 0.5 mm into it", t_touch, c_touch, b_touch},
               {"tool_tool_mesh_touching_us_per_step", "dental_instrument_light + capsule 0.5 mm on its vertex 0", t_mesh, c_mesh, b_mesh}};
  for (int r = 0; r < 3; r++) {
    cJSON *o = ts_bench_line("collide", name, rows[r].metric, rows[r].us / n * 1e6, "us");
    ts_bench_line_ref(o, "ms_step_two_tools_us_per_step", step_us);
    ts_bench_line_num(o, "mean_tool_contacts", rows[r].contacts / n);
    ts_bench_line_num(o, "mean_box_tests", rows[r].boxes / n);
    ts_bench_line_num(o, "warm_us_per_pass", warm[r] / n * 1e6);
    ts_bench_line_num(o, "ms_mean_passes", passes / n);
    ts_bench_line_num(o, "steps", n);
    ts_bench_line_str(o, "tools", rows[r].tools);
    ts_bench_line_str(o, "plan", pl->name);
    ts_bench_line_emit(o);
  }
  status = 0;
out:
  if (status) fprintf(stderr, "collide: %s: the tool-tool steps failed\n", name);
  ts_tool_contact_free(&tc);
  ts_tool_contact_free(&tm);
  return status;
}

/* The daemon's step along the standard path (issue 5's "refit + query per
 * step" as the live step runs it), on the dented positions of the loop
 * above, each step's motion spread over the solvers' substeps (the
 * automatic counts at the session dt, from one untimed step of each at
 * rest): substep j of nsub has every node at x_prev + s (x - x_prev), s =
 * (j + 1) / nsub, written by a loop over all nodes as a solver's
 * prediction writes them.
 *
 * XPBD (ts_xpbd_step.c, ts_xpbd_contact.c): per substep the prediction,
 * the tissue tree's refit for it and the instrument's candidates
 * (ts_contact_begin over the substep's poses). Three forms in turn (the
 * first meets the coldest cache, so the order rotates): the prediction
 * alone (prediction_us_per_step); the live form as the XPBD step runs it
 * (ts_xpbd_def.tree_slack), the first substep's prediction also finding
 * the step's largest node move, a full pass of the tree
 * (ts_aabb_tree_refit_watch) at the first substep and watched refits
 * after while the bound (that move times the fraction of the step since
 * the pass) is within the default slack, and the candidates from the plan
 * made where the bound restarts (ts_contact_plan: one walk of the tissue
 * tree for the substeps to the step's end; planned_begins_per_step of
 * them took it, from mean_planned_triangles) (live_refit_query_us_per_step);
 * the form of before, ts_aabb_tree_refit's pass over the surface nodes at
 * every substep (substep_refit_query_us_per_step). Each form's collision
 * is timed on its own, from its prediction's end (one more clock read a
 * substep, about 1.4 us); the line's figures are those. The whole form
 * less the prediction alone (live_minus_prediction_us_per_step,
 * substep_minus_prediction_us_per_step, the line's figures before) is kept
 * beside them: a difference of figures each several times larger, it moved
 * by hundreds of us between runs on a loaded machine and came out negative
 * on a quiet one (patch-L: -72 and -96 us, the prediction alone 2,199 us
 * that run, as the cache happens to hold the positions or not), where the
 * direct timing said 449 us. Each keeps its own
 * tree; their candidate sets must agree (mismatches) and the watched tree
 * stay valid (invalid_trees, checked untimed on the brute-force steps).
 *
 * Mass-spring (ts_ms_contact.c), on every LIVE_MS_EVERY-th step: per
 * substep the instrument's contact, ts__ms_contact (the node scan, the
 * projection and the triangle pass through the surface tree, standing at
 * the step's pose) as the step runs it, beside the node scan without the
 * pass followed by the pass alone (each of the tree's uses a full refit),
 * and the step's form with the node projection's full signed distance
 * (the tree's sdf_outside_root cleared: ts_obb_tree_mesh_sdf_within is
 * then ts_obb_tree_mesh_sdf, the query of before the bounded one;
 * ms_full_query_contact_us_per_step), each from the same positions;
 * positions that differ after them count as mismatches. After the path,
 * the whole mass-spring step (ts_massspring_step) with the instrument on
 * the path from the plan's start, MS_PATH_STEPS steps from rest, with the
 * bounded query (ms_step_instrument_us_per_step) and then with the full
 * one (the reference), the positions after them compared. */
#define LIVE_MS_EVERY 50 /* the full query's node projection was 0.66 s a step on patch-L */
#define MS_PATH_STEPS 10 /* the whole mass-spring steps along the path, each query */

static void predict(double (*y)[3], const double (*xa)[3], const double (*xb)[3], uint32_t n,
                    double s) {
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) y[i][k] = xa[i][k] + s * (xb[i][k] - xa[i][k]);
}

/* The same, also returning the step's largest move of a node, |xb - xa|
 * (the speed the XPBD step's first prediction measures for its bound). */
static double predict_most(double (*y)[3], const double (*xa)[3], const double (*xb)[3],
                           uint32_t n, double s) {
  double m2 = 0;
  for (uint32_t i = 0; i < n; i++) {
    double d2 = 0;
    for (int k = 0; k < 3; k++) {
      const double d = xb[i][k] - xa[i][k];
      y[i][k] = xa[i][k] + s * d;
      d2 += d * d;
    }
    m2 = d2 > m2 ? d2 : m2;
  }
  return sqrt(m2);
}

static int live_path(const char *name, const plan *pl, ts_bench_scenario *sc, ts_obb_tree *itree,
                     ts_posed_tool *ipt, const double tip_local[3], ts_contacts *bbuf) {
  ts_tissue *t = sc->tissue;
  const uint32_t nn = t->n_nodes;
  int status = -1;
  ts_aabb_tree *tl = NULL, *tp = NULL;
  ts_contact_ws wl, wp;
  memset(&wl, 0, sizeof wl);
  memset(&wp, 0, sizeof wp);
  double (*xa)[3] = malloc(sizeof *xa * nn), (*xb)[3] = malloc(sizeof *xb * nn);
  double (*y)[3] = malloc(sizeof *y * nn);
  double (*xs)[3] = malloc(sizeof *xs * nn);
  uint32_t *scratch = malloc(sizeof *scratch * nn), n_scratch = 0;
  if (!xa || !xb || !y || !xs || !scratch) goto out;

  /* the solvers' substep counts at the session dt */
  uint32_t nx = 0, nm = 0;
  {
    ts_tissue_reset(t);
    ts_xpbd *xp = ts_xpbd_create(t, NULL);
    if (!xp) goto out;
    ts_xpbd_stats xst;
    int rc = ts_xpbd_step(xp, t, sc->dt, NULL, 0, &xst);
    ts_xpbd_destroy(xp);
    ts_tissue_reset(t);
    ts_step_stats mst;
    if (!rc) rc = ts_massspring_step(t, sc->dt, NULL, 0, &mst);
    ts_tissue_reset(t);
    if (rc) {
      fprintf(stderr, "collide: %s: substep counts: %s\n", name, ts_err_name(rc));
      goto out;
    }
    nx = xst.substeps, nm = mst.substeps;
  }
  if (ts_aabb_tree_create_tissue(NULL, t, &tl) || ts_aabb_tree_create_tissue(NULL, t, &tp)) goto out;
  const uint32_t nct = ts_tissue_n_contact_tris(t);
  if (ts_contact_ws_init(&wl, NULL, nn, nn, nct) || ts_contact_ws_init(&wp, NULL, nn, nn, nct))
    goto out;
  memcpy(xa, t->rest, sizeof *xa * nn);
  double t_live_coll = 0, t_sub_coll = 0; /* each form's refits and candidates alone */
  double t_form[3] = {0, 0, 0}, t_msl = 0, t_msp = 0, t_msf = 0, t_mss = 0, t_mss_full = 0;
  uint32_t mismatches = 0, invalid = 0, ms_mismatches = 0, ms_steps = 0, ms_step_mismatches = 0;
  uint64_t escaped = 0, cand = 0, full_escaped = 0, watch_passes = 0, watch_pts = 0, plan_tris = 0;
  double t_brute = 0;
  uint32_t n_brute = 0;
  ts_pose prev = {.jaw = 0};
  for (uint32_t k = 0; k < pl->steps; k++) {
    const double time = pl->t0 + k * sc->dt;
    double tip[3], R[3][3], trans[3];
    ts_bench_path_tip(&sc->path, time, tip);
    n_scratch = 0;
    dent(t, &sc->path, tip, xb, scratch, &n_scratch);
    ts_bench_path_instrument_pose(&sc->path, time, tip_local, 1.0, R, trans);
    ts_pose ip = {.jaw = 0};
    memcpy(ip.p, trans, sizeof ip.p);
    ts_bench_path_instrument_quat(&sc->path, ip.q);
    if (k == 0) {
      /* the first step from rest to the first dent, untimed: the trees at
       * the dented positions, the poses' start */
      memcpy(xa, xb, sizeof *xa * nn);
      if (ts_aabb_tree_refit(tl, (const double (*)[3])xa) < 0 ||
          ts_aabb_tree_refit(tp, (const double (*)[3])xa) < 0)
        goto out;
      prev = ip;
      continue;
    }
    double most = 0, base_s = 0; /* the watched form's bound: most (s - base_s) */
    for (uint32_t j = 0; j < nx; j++) {
      const double s = (double)(j + 1) / nx;
      ts_pose a, b;
      ts_pose_lerp(&prev, &ip, (double)j / nx, &a);
      ts_pose_lerp(&prev, &ip, s, &b);
      for (int q = 0; q < 3; q++) {
        const int form = (q + (int)(k + j)) % 3;
        const double c0 = ts_bench_cpu_s();
        double c1 = c0;
        int rc = 0;
        if (form == 0) {
          predict(y, (const double (*)[3])xa, (const double (*)[3])xb, nn, s);
        } else if (form == 1) {
          /* the XPBD step's: a full pass at the step's first substep (or
           * when the bound passes the slack), watched after */
          double moved = INFINITY;
          if (j == 0) {
            most = predict_most(y, (const double (*)[3])xa, (const double (*)[3])xb, nn, s);
          } else {
            predict(y, (const double (*)[3])xa, (const double (*)[3])xb, nn, s);
            moved = most * (s - base_s) * (1.0 + 1e-6);
          }
          c1 = ts_bench_cpu_s();
          if (moved <= TS_XPBD_TREE_SLACK_DEFAULT) {
            rc = ts_aabb_tree_refit_watched(tl, (const double (*)[3])y);
          } else {
            rc = ts_aabb_tree_refit_watch(tl, (const double (*)[3])y, TS_XPBD_TREE_SLACK_DEFAULT);
            watch_passes++;
            watch_pts += tl->n_watch;
          }
          if (rc == 1 || moved > TS_XPBD_TREE_SLACK_DEFAULT) {
            /* the bound restarts: the candidates planned from here to the
             * step's end (ts_xpbd_contact.c, ts__xpbd_plan_posed) */
            base_s = s;
            ts_contact_unplan(&wl);
            if (rc >= 0) {
              ts_pose e;
              ts_pose_lerp(&prev, &ip, 1.0, &e);
              (void)ts_contact_plan(&wl, ipt, &a, &e, tl, TS_XPBD_TREE_SLACK_DEFAULT);
            }
          }
          if (rc < 0) ts_contact_unplan(&wl);
          if (rc >= 0) rc = ts_contact_begin(&wl, ipt, &a, &b, tl, t->inv_mass, NULL);
        } else {
          predict(y, (const double (*)[3])xa, (const double (*)[3])xb, nn, s);
          c1 = ts_bench_cpu_s();
          rc = ts_aabb_tree_refit(tp, (const double (*)[3])y);
          if (rc >= 0) rc = ts_contact_begin(&wp, ipt, &a, &b, tp, t->inv_mass, NULL);
        }
        const double c2 = ts_bench_cpu_s();
        t_form[form] += c2 - c0;
        if (form == 1) t_live_coll += c2 - c1;
        if (form == 2) t_sub_coll += c2 - c1;
        if (rc < 0 && rc != TS_EFULL) goto out;
        if (form == 1) escaped += tl->stats.escaped;
        if (form == 2) full_escaped += tp->stats.escaped;
      }
      cand += wl.n;
      plan_tris += wl.planned ? wl.plan_n : 0;
      /* the same candidates (vertices, in order) from both trees */
      int same = wl.n == wp.n && wl.n_tris == wp.n_tris;
      for (uint32_t v = 0; same && v < wl.n; v++) same = wl.v[v].node == wp.v[v].node;
      mismatches += !same;
    }
    if (k % pl->brute_every == 0) {
      invalid += ts_aabb_tree_validate(tl, (const double (*)[3])xb, NULL, 0) != 0;
      /* the brute force at the step's end pose and positions */
      if (ts_posed_tool_set_pose(ipt, &ip)) goto out;
      const double b0 = ts_bench_cpu_s();
      const int rc = ts_collide_tool_tissue_brute(ipt, tl, (const double (*)[3])xb, bbuf);
      t_brute += ts_bench_cpu_s() - b0;
      if (rc < 0 && rc != TS_EFULL) goto out;
      n_brute++;
    }

    if (k % LIVE_MS_EVERY == 0) {
      /* the mass-spring contact of the instrument at this step's pose */
      ts_tool mt;
      memset(&mt, 0, sizeof mt);
      mt.kind = TS_TOOL_MESH;
      mt.shape = itree;
      mt.active = 1;
      memcpy(mt.pos, ip.p, sizeof mt.pos);
      memcpy(mt.quat, ip.q, sizeof mt.quat);
      ts__ptool mp;
      ts__ms_prepare_tool(&mp, &mt);
      for (uint32_t j = 0; j < nm; j++) {
        predict(y, (const double (*)[3])xa, (const double (*)[3])xb, nn, (double)(j + 1) / nm);
        for (int q = 0; q < 3; q++) {
          /* 0: the scan then the pass; 1: live; 2: live with the full query */
          const int form = (q + (int)j) % 3, live = form != 0;
          memcpy(t->x, y, sizeof *y * nn);
          for (uint32_t i = 0; i < nn; i++) { /* the same state for both */
            memcpy(t->x_prev[i], y[i], sizeof y[i]);
            memset(t->v[i], 0, sizeof t->v[i]);
          }
          ts__ms_clear_contacts(t->ms);
          const double c0 = ts_bench_cpu_s();
          if (form == 2) {
            const int cert = itree->sdf_outside_root;
            itree->sdf_outside_root = 0; /* ts_obb_tree_mesh_sdf_within: the full query */
            ts__ms_contact(t, t->ms, &mp, 0);
            itree->sdf_outside_root = cert;
          } else if (live) {
            ts__ms_contact(t, t->ms, &mp, 0);
          } else {
            itree->thin_pass = 0; /* the scan alone, then the pass with the tree's full refit */
            ts__ms_contact(t, t->ms, &mp, 0);
            itree->thin_pass = 1;
            (void)ts__ms_thin_pass(t, t->ms, &mp, (const double (*)[3])mp.at_R, mp.at_pos, 0, 1, 1);
          }
          *(form == 2 ? &t_msf : live ? &t_msl : &t_msp) += ts_bench_cpu_s() - c0;
          if (q == 0)
            memcpy(xs, t->x, sizeof *xs * nn);
          else
            ms_mismatches += memcmp(xs, t->x, sizeof *xs * nn) != 0;
        }
      }
      ts__ms_clear_contacts(t->ms);
      ms_steps++;
    }
    memcpy(xa, xb, sizeof *xa * nn);
    prev = ip;
  }
  /* the whole mass-spring step (ts_massspring_step) with the instrument
   * along the path from the plan's start, MS_PATH_STEPS steps from rest
   * (the step's data made afresh), with the bounded query and then with
   * the full one (the tree's sdf_outside_root cleared), the positions
   * after them compared */
  const int cert = itree->sdf_outside_root;
  for (int full = 0; full < 2; full++) {
    ts_tissue_reset(t);
    if (ts_massspring_prepare(t) || ts_massspring_carry_tools(t, NULL)) goto out;
    itree->sdf_outside_root = full ? 0 : cert;
    int rc = 0;
    for (uint32_t k = 0; k < MS_PATH_STEPS && !rc; k++) {
      double R[3][3];
      ts_tool mt;
      memset(&mt, 0, sizeof mt);
      mt.kind = TS_TOOL_MESH;
      mt.shape = itree;
      mt.active = 1;
      ts_bench_path_instrument_pose(&sc->path, pl->t0 + k * sc->dt, tip_local, 1.0, R, mt.pos);
      ts_bench_path_instrument_quat(&sc->path, mt.quat);
      const double c0 = ts_bench_cpu_s();
      rc = ts_massspring_step(t, sc->dt, &mt, 1, NULL);
      *(full ? &t_mss_full : &t_mss) += ts_bench_cpu_s() - c0;
    }
    itree->sdf_outside_root = cert;
    if (rc) goto out;
    if (!full)
      memcpy(xs, t->x, sizeof *xs * nn);
    else
      ms_step_mismatches = memcmp(xs, t->x, sizeof *xs * nn) != 0;
  }
  const double n = pl->steps - 1;
  const double live_us = t_live_coll / n * 1e6, full_us = t_sub_coll / n * 1e6;
  cJSON *o = ts_bench_line("collide", name, "live_refit_query_us_per_step", live_us, "us");
  ts_bench_line_ref(o, "substep_refit_query_us_per_step", full_us);
  ts_bench_line_num(o, "brute_force_us_per_step", n_brute ? t_brute / n_brute * 1e6 : 0);
  if (strcmp(name, "patch-L") == 0) ts_bench_line_num(o, "target", 100);
  ts_bench_line_num(o, "prediction_us_per_step", t_form[0] / n * 1e6);
  ts_bench_line_num(o, "live_minus_prediction_us_per_step", (t_form[1] - t_form[0]) / n * 1e6);
  ts_bench_line_num(o, "substep_minus_prediction_us_per_step", (t_form[2] - t_form[0]) / n * 1e6);
  ts_bench_line_num(o, "xpbd_substeps", nx);
  ts_bench_line_num(o, "mean_escaped_per_substep", full_escaped / (n * nx));
  ts_bench_line_num(o, "watched_mean_escaped_per_substep", escaped / (n * nx));
  ts_bench_line_num(o, "full_passes_per_step", watch_passes / n);
  ts_bench_line_num(o, "mean_watched_points", watch_passes ? (double)watch_pts / watch_passes : 0);
  ts_bench_line_num(o, "mean_candidates", cand / (n * nx));
  ts_bench_line_num(o, "planned_begins_per_step", wl.plan_uses / n);
  ts_bench_line_num(o, "mean_planned_triangles", wl.plan_uses ? (double)plan_tris / wl.plan_uses : 0);
  ts_bench_line_num(o, "mismatches", mismatches);
  ts_bench_line_num(o, "invalid_trees", invalid);
  ts_bench_line_num(o, "surface_nodes", tl->n_used);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "ms_live_contact_us_per_step", ms_steps ? t_msl / ms_steps * 1e6 : 0, "us");
  ts_bench_line_ref(o, "ms_scan_then_pass_us_per_step", ms_steps ? t_msp / ms_steps * 1e6 : 0);
  ts_bench_line_num(o, "ms_full_query_contact_us_per_step", ms_steps ? t_msf / ms_steps * 1e6 : 0);
  ts_bench_line_num(o, "ms_substeps", nm);
  ts_bench_line_num(o, "steps", ms_steps);
  ts_bench_line_num(o, "mismatches", ms_mismatches);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "ms_step_instrument_us_per_step", t_mss / MS_PATH_STEPS * 1e6, "us");
  ts_bench_line_ref(o, "ms_step_instrument_full_query_us_per_step", t_mss_full / MS_PATH_STEPS * 1e6);
  ts_bench_line_num(o, "steps", MS_PATH_STEPS);
  ts_bench_line_num(o, "mismatches", ms_step_mismatches);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  status = 0;
out:
  if (status) fprintf(stderr, "collide: %s: the live path failed\n", name);
  ts_tissue_reset(t);
  ts_contact_ws_free(&wl);
  ts_contact_ws_free(&wp);
  ts_aabb_tree_destroy(tl);
  ts_aabb_tree_destroy(tp);
  free(xa);
  free(xb);
  free(y);
  free(xs);
  free(scratch);
  return status;
}

static int run_scenario(const char *name, const plan *pl, const ts_mesh *instrument) {
  char err[1024] = "";
  ts_bench_scenario sc;
  if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
    fprintf(stderr, "collide: %s\n", err);
    return -1;
  }
  ts_tissue *t = sc.tissue;
  int status = -1;
  ts_aabb_tree *tree = NULL;
  ts_obb_tree *itree = NULL, *stree = NULL;
  ts_posed_tool ipt, spt;
  memset(&ipt, 0, sizeof ipt);
  memset(&spt, 0, sizeof spt);
  ts_contacts buf, bbuf;
  memset(&buf, 0, sizeof buf);
  memset(&bbuf, 0, sizeof bbuf);
  ts_contact_ws ws, iws, ibox, sbox;
  memset(&ws, 0, sizeof ws);
  memset(&iws, 0, sizeof iws);
  memset(&ibox, 0, sizeof ibox);
  memset(&sbox, 0, sizeof sbox);
  double (*xi)[3] = NULL; /* the instrument's response, from the dented positions */
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  double (*x0)[3] = malloc(sizeof *x0 * t->n_nodes);
  /* the nodes that moved since the last step: dented now or dented before
   * (back at rest now), as a mechanics would flag them */
  uint32_t *moved = malloc(sizeof *moved * t->n_nodes), n_moved = 0;
  uint32_t *cur = malloc(sizeof *cur * t->n_nodes), *prev = malloc(sizeof *prev * t->n_nodes);
  uint32_t n_prev = 0, *mark = calloc(t->n_nodes, sizeof *mark);
  double (*xs)[3] = malloc(sizeof *xs * t->n_nodes);
  if (!x || !x0 || !moved || !cur || !prev || !mark || !xs) goto out;
  if (ts_massspring_prepare(t)) goto out;
  if (ts_aabb_tree_create_tissue(NULL, t, &tree)) goto out;
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = instrument;
  if (ts_obb_tree_create(&d, &itree) || ts_posed_tool_init(&ipt, itree)) goto out;
  d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_SPHERE;
  d.radius = TS_BENCH_SPHERE_RADIUS;
  if (ts_obb_tree_create(&d, &stree) || ts_posed_tool_init(&spt, stree)) goto out;
  if (ts_contacts_init(&buf, 1u << 16) || ts_contacts_init(&bbuf, 1u << 16)) goto out;
  if (ts_contact_ws_init(&ws, NULL, t->n_nodes, t->n_nodes, ts_tissue_n_contact_tris(t))) goto out;
  ts_contact_def boxdef = ts_default_contact_def();
  boxdef.box_candidates = 1;
  if (ts_contact_ws_init(&iws, NULL, t->n_nodes, t->n_nodes, ts_tissue_n_contact_tris(t)) ||
      ts_contact_ws_init(&ibox, &boxdef, t->n_nodes, t->n_nodes, ts_tissue_n_contact_tris(t)) ||
      ts_contact_ws_init(&sbox, &boxdef, t->n_nodes, t->n_nodes, ts_tissue_n_contact_tris(t)))
    goto out;
  xi = malloc(sizeof *xi * t->n_nodes);
  if (!xi) goto out;
  double t_icontact = 0, t_ibox = 0, t_sbox = 0;
  uint64_t icand = 0, ibcand = 0;
  uint32_t imismatch = 0;
  ts_pose inst_prev;
  int have_iprev = 0;
  double tip_local[3];
  if (ts_bench_instrument_tip(instrument, tip_local)) goto out;
  /* the live step's path first (its lines come out early; it leaves the
   * tissue at rest) */
  if (live_path(name, pl, &sc, itree, &ipt, tip_local, &bbuf)) goto out;

  /* tissue self-contact (ts_self_contact.h): its detection on the same
   * refitted tree each step, beside the tool's refit + query */
  ts_self_contact self;
  if (ts_self_contact_init(&self, NULL)) goto out;
  double t_self = 0;
  uint64_t self_pairs = 0, self_overflow0 = 0;
  double t_refit = 0, t_query = 0, t_brute = 0, t_contact = 0, t_thin = 0, t_scan = 0;
  uint32_t thin_mismatches = 0;
  uint64_t thin_marked = 0;
  uint32_t n_brute = 0, mismatches = 0, invalid = 0;
  uint64_t contacts = 0, brute_contacts = 0, escaped = 0, rebuilds0 = tree->stats.rebuilds;
  uint64_t sphere_touch = 0, box_tests = 0, leaf_tests = 0, moved_sum = 0;
  uint64_t leaves_refit = 0, internal_refit = 0;
  ts_pose sphere_prev;
  int have_prev = 0;
  for (uint32_t k = 0; k < pl->steps; k++) {
    const double time = pl->t0 + k * sc.dt;
    double tip[3], R[3][3], trans[3];
    ts_bench_path_tip(&sc.path, time, tip);
    uint32_t n_cur = 0;
    dent(t, &sc.path, tip, x, cur, &n_cur);
    /* the union, each node once (as a mechanics' per-node flag gives it) */
    memcpy(moved, cur, sizeof *moved * n_cur);
    n_moved = n_cur;
    for (uint32_t i = 0; i < n_cur; i++) mark[cur[i]] = k + 1;
    for (uint32_t i = 0; i < n_prev; i++)
      if (mark[prev[i]] != k + 1) moved[n_moved++] = prev[i];
    moved_sum += n_moved;
    uint32_t *swap = prev;
    prev = cur, cur = swap, n_prev = n_cur;
    ts_bench_path_instrument_pose(&sc.path, time, tip_local, 1.0, R, trans);
    ts_pose ip;
    memcpy(ip.p, trans, sizeof ip.p);
    ts_bench_path_instrument_quat(&sc.path, ip.q);
    ip.jaw = 0;
    if (ts_posed_tool_set_pose(&ipt, &ip)) goto out;

    double c0 = ts_bench_cpu_s();
    int rc;
    /* the first step checks every node (the tree was built at t->x) */
    rc = k ? ts_aabb_tree_refit_moved(tree, (const double (*)[3])x, moved, n_moved)
           : ts_aabb_tree_refit(tree, (const double (*)[3])x);
    if (rc < 0) goto out;
    double c1 = ts_bench_cpu_s();
    ts_collide_stats cst;
    rc = ts_collide_tool_tissue(&ipt, tree, (const double (*)[3])x, &buf, &cst);
    double c2 = ts_bench_cpu_s();
    if (rc < 0 && rc != TS_EFULL) goto out;
    t_refit += c1 - c0;
    t_query += c2 - c1;
    {
      const double s0 = ts_bench_cpu_s();
      self_pairs += ts_self_contact_detect(&self, tree, t, (const double (*)[3])x);
      t_self += ts_bench_cpu_s() - s0;
    }
    contacts += buf.total;
    box_tests += cst.box_tests;
    leaf_tests += cst.leaf_tests;
    escaped += tree->stats.escaped;
    leaves_refit += tree->stats.leaves_refit;
    internal_refit += tree->stats.internal_refit;
    if (k % pl->brute_every == 0) {
      double b0 = ts_bench_cpu_s();
      rc = ts_collide_tool_tissue_brute(&ipt, tree, (const double (*)[3])x, &bbuf);
      t_brute += ts_bench_cpu_s() - b0;
      if (rc < 0 && rc != TS_EFULL) goto out;
      n_brute++;
      brute_contacts += bbuf.total;
      /* the moved-node refit keeps every invariant (checked untimed) */
      invalid += ts_aabb_tree_validate(tree, (const double (*)[3])x, NULL, 0) != 0;
      mismatches += bbuf.total != buf.total;
    }

    /* the mass-spring thin pass at the instrument's pose: the scan, then
     * the tree, each from the dented positions */
    {
      ts_tool mt;
      memset(&mt, 0, sizeof mt);
      mt.kind = TS_TOOL_MESH;
      mt.shape = itree;
      mt.active = 1;
      memcpy(mt.pos, ip.p, sizeof mt.pos);
      memcpy(mt.quat, ip.q, sizeof mt.quat);
      ts__ptool mp;
      ts__ms_prepare_tool(&mp, &mt);
      const double (*mR)[3] = (const double (*)[3])mp.R;
      memcpy(t->x, x, sizeof *x * t->n_nodes);
      double m0 = ts_bench_cpu_s();
      ts__ms_thin_pass(t, t->ms, &mp, mR, mt.pos, 0, 1, 0);
      double m1 = ts_bench_cpu_s();
      ts__ms_clear_contacts(t->ms);
      memcpy(xs, t->x, sizeof *xs * t->n_nodes);
      memcpy(t->x, x, sizeof *x * t->n_nodes);
      double m2 = ts_bench_cpu_s();
      thin_marked += ts__ms_thin_pass(t, t->ms, &mp, mR, mt.pos, 0, 1, 1);
      double m3 = ts_bench_cpu_s();
      ts__ms_clear_contacts(t->ms);
      t_scan += m1 - m0;
      t_thin += m3 - m2;
      thin_mismatches += memcmp(xs, t->x, sizeof *xs * t->n_nodes) != 0;
    }

    /* the instrument's response (ts_contact.h) from the dented positions:
     * candidates by the descent, beside the former root-box query */
    {
      if (!have_iprev) inst_prev = ip, have_iprev = 1;
      memcpy(xi, x, sizeof *xi * t->n_nodes);
      double i0 = ts_bench_cpu_s();
      rc = ts_contact_begin(&ibox, &ipt, &inst_prev, &ip, tree, t->inv_mass, NULL);
      if (rc < 0 && rc != TS_EFULL) goto out;
      rc = ts_contact_project(&ibox, &ipt, xi, (const double (*)[3])x, t->inv_mass, 1);
      double i1 = ts_bench_cpu_s();
      if (rc < 0) goto out;
      memcpy(xs, x, sizeof *xs * t->n_nodes);
      double i2 = ts_bench_cpu_s();
      rc = ts_contact_begin(&iws, &ipt, &inst_prev, &ip, tree, t->inv_mass, NULL);
      if (rc < 0 && rc != TS_EFULL) goto out;
      rc = ts_contact_project(&iws, &ipt, xs, (const double (*)[3])x, t->inv_mass, 1);
      double i3 = ts_bench_cpu_s();
      if (rc < 0) goto out;
      t_ibox += i1 - i0;
      t_icontact += i3 - i2;
      icand += iws.n_tris, ibcand += ibox.n_tris;
      imismatch += memcmp(xs, xi, sizeof *xs * t->n_nodes) != 0;
      inst_prev = ip;
    }

    /* the sphere's response on the same tree (positions x0 -> x) */
    ts_tool sp;
    ts_bench_path_sphere(&sc.path, time, TS_BENCH_SPHERE_RADIUS, &sp);
    ts_pose spose = {.p = {sp.pos[0], sp.pos[1], sp.pos[2]},
                     .q = {sp.quat[0], sp.quat[1], sp.quat[2], sp.quat[3]}};
    if (!have_prev) sphere_prev = spose, have_prev = 1;
    memcpy(x0, x, sizeof *x0 * t->n_nodes);
    /* the root box's candidates on a copy, before the descent's on even
     * steps and after it on odd ones (the first of the two meets the
     * colder caches) */
    memcpy(xi, x, sizeof *xi * t->n_nodes);
    int touching = 0;
    for (int pass = 0; pass < 2; pass++) {
      const int box = (pass == 0) == (k % 2 == 0);
      ts_contact_ws *w = box ? &sbox : &ws;
      double (*y)[3] = box ? xi : x;
      double s0 = ts_bench_cpu_s();
      rc = ts_contact_begin(w, &spt, &sphere_prev, &spose, tree, t->inv_mass, NULL);
      if (rc < 0 && rc != TS_EFULL) goto out;
      rc = ts_contact_project(w, &spt, y, (const double (*)[3])x0, t->inv_mass, 1);
      *(box ? &t_sbox : &t_contact) += ts_bench_cpu_s() - s0;
      if (rc < 0) goto out;
      if (!box) touching = rc;
    }
    rc = touching;
    sphere_touch += (uint64_t)rc;
    sphere_prev = spose;
  }
  const double n = pl->steps;
  const double per_step = (t_refit + t_query) / n * 1e6;
  const double brute_per = n_brute ? t_brute / n_brute * 1e6 : 0;
  cJSON *o = ts_bench_line("collide", name, "refit_query_us_per_step", per_step, "us");
  ts_bench_line_ref(o, "brute_force_us_per_step", brute_per);
  if (strcmp(name, "patch-L") == 0) ts_bench_line_num(o, "target", 100);
  ts_bench_line_num(o, "steps", n);
  ts_bench_line_num(o, "brute_steps", n_brute);
  ts_bench_line_num(o, "mean_contacts", contacts / n);
  ts_bench_line_num(o, "brute_mean_contacts", n_brute ? (double)brute_contacts / n_brute : 0);
  ts_bench_line_num(o, "count_mismatches", mismatches);
  ts_bench_line_num(o, "invalid_trees", invalid);
  ts_bench_line_num(o, "mean_box_tests", box_tests / n);
  ts_bench_line_num(o, "mean_leaf_tests", leaf_tests / n);
  ts_bench_line_num(o, "triangles", ts_tissue_n_contact_tris(t)); /* the contact surface */
  ts_bench_line_num(o, "render_triangles", t->n_tris);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "self_contact_us_per_step", t_self / n * 1e6, "us");
  ts_bench_line_ref(o, "refit_query_us_per_step", per_step);
  ts_bench_line_num(o, "mean_pairs", self_pairs / n);
  ts_bench_line_num(o, "overflow", (double)(self.overflow - self_overflow0));
  ts_bench_line_num(o, "surface_nodes", tree->n_used);
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  ts_self_contact_free(&self);
  o = ts_bench_line("collide", name, "refit_us_per_step", t_refit / n * 1e6, "us");
  ts_bench_line_num(o, "mean_escaped_nodes", escaped / n);
  ts_bench_line_num(o, "mean_moved_nodes", moved_sum / n);
  ts_bench_line_num(o, "mean_leaves_refit", leaves_refit / n);
  ts_bench_line_num(o, "mean_internal_refit", internal_refit / n);
  ts_bench_line_num(o, "rebuilds", (double)(tree->stats.rebuilds - rebuilds0));
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "contact_response_us_per_step", t_contact / n * 1e6, "us");
  ts_bench_line_ref(o, "root_box_response_us_per_step", t_sbox / n * 1e6);
  ts_bench_line_num(o, "mean_touching", sphere_touch / n);
  ts_bench_line_str(o, "tool", "sphere 5 mm");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "instrument_response_us_per_step", t_icontact / n * 1e6, "us");
  ts_bench_line_ref(o, "root_box_response_us_per_step", t_ibox / n * 1e6);
  ts_bench_line_num(o, "mean_candidate_triangles", icand / n);
  ts_bench_line_num(o, "root_box_mean_candidate_triangles", ibcand / n);
  ts_bench_line_num(o, "mismatches", imismatch);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  o = ts_bench_line("collide", name, "ms_thin_pass_us_per_step", t_thin / n * 1e6, "us");
  ts_bench_line_ref(o, "ms_thin_scan_us_per_step", t_scan / n * 1e6);
  ts_bench_line_num(o, "mean_marked", thin_marked / n);
  ts_bench_line_num(o, "mismatches", thin_mismatches);
  ts_bench_line_num(o, "triangles", ts_tissue_n_contact_tris(t)); /* the contact surface */
  ts_bench_line_num(o, "render_triangles", t->n_tris);
  ts_bench_line_str(o, "tool", "dental_instrument_light");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  if (tool_tool(name, pl, &sc, itree, tip_local)) goto out;
  status = 0;
out:
  if (status) fprintf(stderr, "collide: %s failed\n", name);
  ts_contact_ws_free(&ws);
  ts_contact_ws_free(&iws);
  ts_contact_ws_free(&ibox);
  ts_contact_ws_free(&sbox);
  free(xi);
  ts_contacts_free(&buf);
  ts_contacts_free(&bbuf);
  ts_posed_tool_free(&ipt);
  ts_posed_tool_free(&spt);
  ts_obb_tree_destroy(itree);
  ts_obb_tree_destroy(stree);
  ts_aabb_tree_destroy(tree);
  free(x);
  free(x0);
  free(moved);
  free(cur);
  free(prev);
  free(mark);
  free(xs);
  ts_bench_scenario_destroy(&sc);
  return status;
}

static const char usage[] =
    "usage: bench_collide [--quick | --full] [SCENARIO ...]\n"
    "scenarios: patch-S patch-L liver (default: all)\n";

int main(int argc, char **argv) {
  ts_bench_mode mode;
  const char *names[16];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 16, &n_names);
  if (a) return a == 1 ? 0 : 2;
  if (n_names == 0)
    for (int i = 0; ts_bench_scenario_names[i]; i++) names[n_names++] = ts_bench_scenario_names[i];
  char path[1024], msg[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/dental_instrument_light.obj", shared_dir());
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = TS_BENCH_INSTRUMENT_SCALE;
  ts_mesh *instrument = NULL;
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &instrument, NULL, NULL, msg, sizeof msg);
  if (rc) {
    fprintf(stderr, "bench_collide: %s (%s)\n", msg, ts_err_name(rc));
    return 1;
  }
  const plan pl = plan_for(mode);
  int failed = 0;
  for (int i = 0; i < n_names; i++)
    if (run_scenario(names[i], &pl, instrument)) failed++;
  ts_mesh_free(instrument);
  return failed ? 1 : 0;
}
