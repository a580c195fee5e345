/*
 * bench_mesh_smooth.c: the cost of Loop's smoothing rules in a live
 * refinement (ts_refine_smooth.c), for bench_mesh. One line on the region
 * bench_mesh's refinement picks (5 mm at the top of the tissue, at rest, no
 * hand-over):
 *   refine_smooth_cross_s   the crossing check of one smoothed refinement:
 *            the tree over the refined extrusion's sheet triangles
 *            (ts__cross_check_new) and one descent (ts__cross_check_mark)
 *            per round of the limiter, the rounds that refinement took
 *            (the refits of the limited vertices between rounds left out:
 *            they touch a few columns); ref "refine_smooth": ts_refine_run
 *            whole with smooth_rest 1, what the check is a part of. Beside
 *            them ts_refine_run with midpoints (refine_midpoint_s, the
 *            live path without the smoothing), the smoothed rest shape
 *            alone (ts__refine_smooth: both Loop extrusions, the limiter
 *            with its prism, turned-triangle and crossing checks:
 *            smooth_rest_s), the limiter's rounds, the vertices it limited
 *            and the largest rest change left (all CPU seconds, the mean
 *            of the runs).
 */
#include "bench_mesh_smooth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "ts_error.h"
#include "ts_extrude_internal.h"
#include "ts_refine_smooth.h"

/* Mean CPU seconds of reps ts_refine_run, smooth_rest `smooth`; info of the
 * last. <0 on error. */
static double time_run(const ts_refine_src *src, const ts_tissue *t, const uint32_t *sel, uint32_t ns, int smooth,
                       int reps, ts_refine_info *info) {
  double total = 0;
  for (int r = 0; r < reps; r++) {
    ts_tissue *out = NULL;
    ts_refine_src *sout = NULL;
    ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, smooth, -1.0, NULL, 0, 0, 0, 0};
    char err[256];
    memset(info, 0, sizeof *info);
    double c0 = ts_bench_cpu_s();
    int rc = ts_refine_run(src, t, sel, ns, &o, &out, &sout, info, err, sizeof err);
    total += ts_bench_cpu_s() - c0;
    free(info->parents);
    info->parents = NULL;
    ts_tissue_destroy(out);
    ts_refine_src_free(sout);
    if (rc) {
      fprintf(stderr, "bench_mesh: refinement: %s (%s)\n", err, ts_err_name(rc));
      return -1;
    }
  }
  return total / reps;
}

int ts_bench_mesh_smooth(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                         uint32_t ns, int reps) {
  if (reps < 1) reps = 1;
  ts_refine_info is, im;
  const double run_smooth = time_run(src, t, sel, ns, 1, reps, &is);
  const double run_mid = time_run(src, t, sel, ns, 0, reps, &im);
  if (run_smooth < 0 || run_mid < 0) return -1;
  double rest_s = 0, cross_s = 0;
  ts__refine_smooth_out so;
  memset(&so, 0, sizeof so);
  uint8_t *mark = NULL;
  for (int r = 0; r < reps; r++) {
    ts_extrusion *out = NULL;
    ts_loop_plan *plan = NULL;
    char err[256] = "";
    double c0 = ts_bench_cpu_s();
    int rc = ts__refine_smooth(src->e, sel, ns, TS_REFINE_SMOOTH_RATE, TS_REFINE_SMOOTH_MAX_BLEND, &out, &plan, &so,
                               err, sizeof err);
    rest_s += ts_bench_cpu_s() - c0;
    ts_loop_plan_free(plan);
    if (rc) {
      fprintf(stderr, "bench_mesh: %s: smoothed rest: %s (%s)\n", name, err, ts_err_name(rc));
      return -1;
    }
    /* the check as the limiter runs it: built once, one descent a round */
    if (!mark) mark = calloc(out->nv, 1);
    ts__cross_check *cc = NULL;
    uint32_t pairs = 0;
    c0 = ts_bench_cpu_s();
    rc = mark ? ts__cross_check_new(out, &cc) : TS_ENOMEM;
    for (uint32_t k = 0; !rc && k < so.rounds; k++) {
      rc = ts__cross_check_mark(cc, out, mark, &pairs, NULL, 0);
      if (rc == TS_EMESH) rc = 0;
    }
    cross_s += ts_bench_cpu_s() - c0;
    ts__cross_check_free(cc);
    ts_extrusion_free(out);
    if (rc) {
      fprintf(stderr, "bench_mesh: %s: crossing check: %s\n", name, ts_err_name(rc));
      free(mark);
      return -1;
    }
  }
  free(mark);
  cJSON *L = ts_bench_line("mesh", name, "refine_smooth_cross_s", cross_s / reps, "s");
  ts_bench_line_ref(L, "refine_smooth", run_smooth);
  ts_bench_line_num(L, "refine_midpoint_s", run_mid);
  ts_bench_line_num(L, "smooth_rest_s", rest_s / reps);
  ts_bench_line_num(L, "rounds", so.rounds);
  ts_bench_line_num(L, "limited", so.limited);
  ts_bench_line_num(L, "rest_move_m", so.rest_move);
  ts_bench_line_num(L, "region_triangles", ns);
  ts_bench_line_num(L, "runs", reps);
  ts_bench_line_emit(L);
  return 0;
}
