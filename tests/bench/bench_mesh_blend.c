/*
 * bench_mesh_blend.c: what a live refinement's hand-over blend costs the
 * mass-spring step (issue 4; ts_ms_handover.c), for bench_mesh. The tissue
 * settles under gravity, the daemon's default sphere (5 mm) is pressed
 * BLEND_PRESS into its top node over BLEND_PRESS_STEPS steps and held,
 * then the region bench_mesh picks is refined by Loop (the live default
 * hand-over, in rest lengths, the sphere for the contact allowance), once
 * with the smoothing rules (the live default) and once with midpoint rest
 * positions; each refined tissue steps the blend beside an unrefined twin
 * from the same state with the same tool, both timed (CPU seconds of this
 * thread). Lines:
 *   blend_smooth_cpu_per_sim_s, blend_midpoint_cpu_per_sim_s   the refined
 *            tissue's CPU seconds per simulated second over the timed
 *            steps of its blend; ref "unrefined_twin": the twin's over the
 *            same steps (what the same session costs unrefined). Beside
 *            them the mean substeps per step of each (substeps_blend,
 *            substeps_twin), the unrefined tissue's at rest without a
 *            tool (substeps_rest: what the press itself adds is the
 *            twin's over it), the blend's length, the steps timed and
 *            the nodes before and after.
 */
#include "bench_mesh_blend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_error.h"
#include "ts_handover.h"
#include "ts_massspring.h"
#include "ts_tool.h"

#define BLEND_PRESS 0.002    /* m: test_refine_smooth_liver's press */
#define BLEND_PRESS_STEPS 20 /* 100 um a step, a tenth of the daemon's tool speed limit */
#define BLEND_SETTLE_STEPS 5 /* under gravity before the press */
#define BLEND_RADIUS 0.005   /* m: the daemon's default tool */

static void sphere_at(ts_tool *tool, const double top[3], double depth) {
  memset(tool, 0, sizeof *tool);
  tool->kind = TS_TOOL_SPHERE;
  tool->active = 1;
  tool->radius = BLEND_RADIUS;
  tool->quat[0] = 1;
  tool->mu_static = TS_TOOL_MU_STATIC_DEFAULT;
  tool->mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
  tool->pos[0] = top[0];
  tool->pos[1] = top[1] + BLEND_RADIUS - depth;
  tool->pos[2] = top[2];
}

/* One step of t, its CPU seconds and substeps added to *cpu and *sub. */
static int timed_step(ts_tissue *t, ts_tool *tool, double *cpu, double *sub) {
  ts_step_stats st;
  const double c0 = ts_bench_cpu_s();
  const int rc = ts_massspring_step(t, TS_BENCH_DT, tool, 1, &st);
  *cpu += ts_bench_cpu_s() - c0;
  *sub += st.substeps;
  if (rc) fprintf(stderr, "bench_mesh: blend: mass-spring step: %s\n", ts_err_name(rc));
  return rc;
}

/* The pressed tissue p refined (smooth_rest `smooth`) and stepped beside a
 * copy of p; one line. 0 or -1. */
static int blend_line(const char *name, const ts_tissue *p, const ts_refine_src *src, const uint32_t *sel,
                      uint32_t ns, const ts_tool *held, int smooth, int steps, uint32_t sub_rest) {
  ts_tissue *twin = NULL, *snap = NULL, *r = NULL;
  ts_refine_src *rs = NULL;
  ts_tool ta = *held, tb = *held;
  int status = -1;
  char err[256] = "";
  if (ts_refine_snapshot(p, &twin) || ts_refine_snapshot(p, &snap)) goto out;
  ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, smooth, 0, &tb, 1, TS_REFINE_REBUILD_LOCAL, TS_HANDOVER_MS_DEFAULT, 0};
  int rc = ts_refine_run(src, snap, sel, ns, &o, &r, &rs, NULL, err, sizeof err);
  if (rc || !r->hand) {
    fprintf(stderr, "bench_mesh: %s: blend refinement: %s (%s)\n", name, err, ts_err_name(rc));
    goto out;
  }
  if (ts_massspring_carry_tools(r, p)) goto out;
  const double blend = r->hand->duration;
  const int n = steps > 0 ? steps : (int)(blend / TS_BENCH_DT + 0.5);
  double ca = 0, cb = 0, sa = 0, sb = 0;
  for (int k = 0; k < n; k++)
    if (timed_step(twin, &ta, &ca, &sa) || timed_step(r, &tb, &cb, &sb)) goto out;
  const double sim = n * TS_BENCH_DT;
  cJSON *L = ts_bench_line("mesh", name, smooth ? "blend_smooth_cpu_per_sim_s" : "blend_midpoint_cpu_per_sim_s",
                           cb / sim, "s");
  ts_bench_line_ref(L, "unrefined_twin", ca / sim);
  ts_bench_line_num(L, "substeps_blend", sb / n);
  ts_bench_line_num(L, "substeps_twin", sa / n);
  ts_bench_line_num(L, "substeps_rest", sub_rest);
  ts_bench_line_num(L, "blend_s", blend);
  ts_bench_line_num(L, "steps", n);
  ts_bench_line_num(L, "nodes_before", p->n_nodes);
  ts_bench_line_num(L, "nodes_after", r->n_nodes);
  ts_bench_line_emit(L);
  status = 0;
out:
  ts_tissue_destroy(twin);
  ts_tissue_destroy(snap);
  ts_tissue_destroy(r);
  ts_refine_src_free(rs);
  return status;
}

int ts_bench_mesh_blend(const char *name, ts_tissue *t, const ts_refine_src *src, const uint32_t *sel, uint32_t ns,
                        uint32_t top, int steps, uint32_t sub_rest) {
  ts_tool tool;
  double at[3], cpu = 0, sub = 0;
  int status = -1;
  ts_tissue_reset(t);
  memcpy(at, t->rest[top], sizeof at);
  sphere_at(&tool, at, 0);
  tool.active = 0;
  for (int i = 0; i < BLEND_SETTLE_STEPS; i++)
    if (timed_step(t, &tool, &cpu, &sub)) goto out;
  memcpy(at, t->x[top], sizeof at);
  for (int i = 1; i <= BLEND_PRESS_STEPS; i++) {
    sphere_at(&tool, at, BLEND_PRESS * i / BLEND_PRESS_STEPS);
    if (timed_step(t, &tool, &cpu, &sub)) goto out;
  }
  if (blend_line(name, t, src, sel, ns, &tool, 1, steps, sub_rest) ||
      blend_line(name, t, src, sel, ns, &tool, 0, steps, sub_rest))
    goto out;
  status = 0;
out:
  ts_tissue_reset(t);
  return status;
}
