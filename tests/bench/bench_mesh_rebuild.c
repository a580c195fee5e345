/*
 * bench_mesh_rebuild.c: the refinement's spring rebuild, local against
 * whole (ts_refine_springs.c), for bench_mesh. One line per refinement
 * method (Loop, LEB) on the region bench_mesh's refinement picks (5 mm at
 * the top of the tissue, at rest, no hand-over):
 *   refine_rebuild_loop_s, refine_rebuild_leb_s   the rebuild stage alone:
 *            ts__refine_springs (the springs with an end on a changed
 *            vertex computed from their ring's prisms, the rest copied
 *            from the old tissue, in the builder's order), ref
 *            "full_rebuild": ts_tissue_build on the refined extrusion and
 *            the renumbering, what ts_refine_run did before (its other
 *            parts, the masses, render triangles and step preparation,
 *            are the same for both). Beside them ts_refine_run whole with
 *            each (refine_local_s, refine_full_s, CPU seconds, the mean of
 *            the runs), the springs and how many the local path computed,
 *            the prisms whose shares it computed against all of them, and
 *            whether the two tissues' springs are identical to the bit
 *            (1: they must be; test_refine_rebuild asserts it).
 */
#include "bench_mesh_rebuild.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "ts_error.h"
#include "ts_refine_springs.h"

/* Mean CPU seconds of reps ts_refine_run with `how`; the last result kept
 * in *out / *sout (caller frees), info filled. <0 on error. */
static double time_run(const ts_refine_src *src, const ts_tissue *t, const uint32_t *sel, uint32_t ns, int method,
                       int how, int reps, ts_tissue **out, ts_refine_src **sout, ts_refine_info *info) {
  double total = 0;
  for (int r = 0; r < reps; r++) {
    ts_tissue_destroy(*out);
    ts_refine_src_free(*sout);
    *out = NULL;
    *sout = NULL;
    ts_refine_opts o = {method, 0, 0, 0, -1.0, NULL, 0, how, 0, 0};
    char err[256];
    memset(info, 0, sizeof *info);
    double c0 = ts_bench_cpu_s();
    int rc = ts_refine_run(src, t, sel, ns, &o, out, sout, info, err, sizeof err);
    total += ts_bench_cpu_s() - c0;
    free(info->parents);
    info->parents = NULL;
    if (rc) {
      fprintf(stderr, "bench_mesh: refinement: %s (%s)\n", err, ts_err_name(rc));
      return -1;
    }
  }
  return total / reps;
}

int ts_bench_mesh_rebuild(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                          uint32_t ns, int reps) {
  if (reps < 1) reps = 1;
  for (int method = TS_REFINE_LOOP; method <= TS_REFINE_LEB; method++) {
    ts_tissue *tl = NULL, *tf = NULL;
    ts_refine_src *sl = NULL, *sf = NULL;
    ts_refine_info il, iff;
    int status = -1;
    const double run_local = time_run(src, t, sel, ns, method, TS_REFINE_REBUILD_LOCAL, reps, &tl, &sl, &il);
    const double run_full = time_run(src, t, sel, ns, method, TS_REFINE_REBUILD_FULL, reps, &tf, &sf, &iff);
    double stage_local = 0, stage_full = 0;
    int identical = 0;
    if (run_local < 0 || run_full < 0 || !il.local) goto next;
    identical = tl->n_springs == tf->n_springs;
    for (uint32_t i = 0; identical && i < tl->n_springs; i++) /* every field, not the padding */
      identical = memcmp(&tl->springs[i], &tf->springs[i], offsetof(ts_spring, kind) + 1) == 0;
    /* the stage alone, on the refinement's own inputs (the refined source:
     * its extrusion, node map and anchors; its masses are the scaled ones,
     * which change the dampers' values, not the work) */
    for (int r = 0; r < reps; r++) {
      ts__refine_springs_in in = {src->e, t, sl->e, sl->node_of, src->layers, sl->anchored, sl->mass, 1};
      ts__refine_springs_out o;
      double c0 = ts_bench_cpu_s();
      int rc = ts__refine_springs(&in, &o);
      stage_local += ts_bench_cpu_s() - c0;
      free(o.springs);
      if (rc) {
        fprintf(stderr, "bench_mesh: %s: local rebuild: %d\n", name, rc);
        goto next;
      }
      ts_tissue *nt = NULL;
      c0 = ts_bench_cpu_s();
      rc = ts_tissue_build(sl->e, src->layers, sl->anchored, src->gravity, &nt);
      ts_spring *sp = rc ? NULL : malloc(sizeof *sp * (nt->n_springs + 1));
      if (sp)
        for (uint32_t i = 0; i < nt->n_springs; i++) {
          ts_spring s = nt->springs[i];
          uint32_t a = sl->node_of[s.a], b = sl->node_of[s.b];
          s.a = a < b ? a : b;
          s.b = a < b ? b : a;
          sp[i] = s;
        }
      stage_full += ts_bench_cpu_s() - c0;
      free(sp);
      ts_tissue_destroy(nt);
      if (rc) {
        fprintf(stderr, "bench_mesh: %s: whole build: %s\n", name, ts_err_name(rc));
        goto next;
      }
    }
    stage_local /= reps;
    stage_full /= reps;
    cJSON *L = ts_bench_line("mesh", name, method == TS_REFINE_LOOP ? "refine_rebuild_loop_s" : "refine_rebuild_leb_s",
                             stage_local, "s");
    ts_bench_line_ref(L, "full_rebuild", stage_full);
    ts_bench_line_num(L, "refine_local_s", run_local);
    ts_bench_line_num(L, "refine_full_s", run_full);
    ts_bench_line_num(L, "springs", tl->n_springs);
    ts_bench_line_num(L, "springs_computed", il.springs_computed);
    ts_bench_line_num(L, "prisms_computed", il.prisms_computed);
    ts_bench_line_num(L, "prisms_total", iff.prisms_computed);
    ts_bench_line_num(L, "region_triangles", ns);
    ts_bench_line_num(L, "identical", identical);
    ts_bench_line_num(L, "runs", reps);
    ts_bench_line_emit(L);
    status = 0;
  next:
    ts_tissue_destroy(tl);
    ts_tissue_destroy(tf);
    ts_refine_src_free(sl);
    ts_refine_src_free(sf);
    if (status) return -1;
  }
  return 0;
}
