/*
 * bench_refine_hold.c: how long a live refinement holds the physics thread
 * (server/refine.c), which every session on that thread waits for: the
 * snapshot between two steps and the install between two later ones, as
 * the daemon does them now, beside the same work as it did them before,
 * in the same run on the same tissue and region.
 *
 *   bench_refine_hold [--quick | --full] [SCENARIO ...]
 *     (default: patch-S liver; --full adds patch-L)
 *
 * Each repetition refines the scenario's tissue (after 20 steps of sagging
 * under gravity, no tool) with Loop and its smoothing rules (the daemon's
 * default) on the surface triangles a ray down onto the tool path's centre
 * picks within the daemon's default range (5 mm), the tissue stepping 2
 * steps between the snapshot and the install. Line per scenario (wall
 * seconds of this thread, the median of the repetitions):
 *   refine_hold_s   the physics thread's part now: the snapshot copied into
 *                   a room the refinement thread made beforehand
 *                   (ts_refine_snapshot_reserve, ts_refine_snapshot_into),
 *                   the source shared (ts_refine_src_share), and the
 *                   install's ts_refine_restate and ts_handover_renew (the
 *                   hand-over made again in its own arrays); ref
 *                   "fresh_hold_s": the snapshot into fresh memory
 *                   (ts_refine_snapshot) with a copy of the source
 *                   (ts_refine_src_copy), the same install, then the
 *                   snapshot and a tissue of the refined size freed there
 *                   (the tissue an install replaces), as before. Beside
 *                   them: room_s and dispose_s (the refinement thread's
 *                   making of the room and its freeing of what an install
 *                   leaves), snapshot_s and renew_s (parts of
 *                   refine_hold_s), the hand-over's touched nodes (its
 *                   map, ts_handover.h "Local") beside the refined nodes,
 *                   and the snapshot's megabytes.
 * Large blocks are taken from the system and given back each time
 * (mallopt M_MMAP_THRESHOLD 128 KiB: glibc's default start, before it
 * raises it as blocks are freed), so that fresh memory is met first in
 * the copy, as the daemon's physics thread mostly met it (a resolution-50
 * patch's snapshot took 13-32 ms there, once 0.5 ms).
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_error.h"
#include "ts_handover.h"
#include "ts_handover_internal.h"
#include "ts_massspring.h"
#include "ts_refine.h"

#define RANGE 0.005 /* m: server/refine.c's TS_REFINE_DEFAULT_RANGE */
#define REPS_MAX 16

static const char usage[] =
    "usage: bench_refine_hold [--quick | --full] [SCENARIO ...]\n"
    "  the physics thread's hold in a live refinement (snapshot and install),\n"
    "  now and as before, on each SCENARIO (patch-S, patch-L, liver;\n"
    "  default patch-S liver, --full all three). JSON lines on stdout.\n";

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The scenario's tissue, the source a session keeps for refining it
 * (ts_bench_refine_source) and the node the standard path is centred on.
 * 0 or -1. */
static int load(const char *name, ts_tissue **t, ts_refine_src **src, uint32_t *path_node) {
  char err[512] = "";
  *t = NULL;
  *src = NULL;
  ts_extrusion *ex = NULL;
  if (strcmp(name, "liver") == 0) {
    if (ts_bench_liver_create(t, &ex, NULL, err, sizeof err)) {
      fprintf(stderr, "bench_refine_hold: %s: %s\n", name, err);
      return -1;
    }
    /* the highest node of the outer sheet, as the standard path's centre */
    uint32_t top = 0;
    for (uint32_t j = 1; j < ex->nv; j++)
      if ((*t)->rest[j][1] > (*t)->rest[top][1]) top = j;
    *path_node = top;
  } else {
    ts_bench_scenario sc;
    if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
      fprintf(stderr, "bench_refine_hold: %s: %s\n", name, err);
      return -1;
    }
    *t = sc.tissue;
    sc.tissue = NULL;
    *path_node = sc.path_node;
    ts_bench_scenario_destroy(&sc);
  }
  *src = ts_bench_refine_source(name, *t, ex);
  ts_extrusion_free(ex);
  return *src ? 0 : -1;
}

typedef struct rep {
  double hold, fresh, room, dispose, renew, snap;
  uint32_t touched, nodes;
  int rc;
} rep;

/* One refinement on `snap` (untimed: the refinement thread's), then its
 * install on t after two steps (timed into *install_s); *nt the result. */
static int refine_install(ts_tissue *t, ts_tissue *snap, const ts_refine_src *src, const uint32_t *sel, uint32_t ns,
                          ts_tissue **nt, double *install_s, double *renew_s) {
  ts_refine_opts o = {TS_REFINE_LOOP, 0, 0, 1, 0, NULL, 0, TS_REFINE_REBUILD_LOCAL, TS_HANDOVER_MS_DEFAULT, 0};
  ts_refine_src *nsrc = NULL;
  ts_refine_info info;
  memset(&info, 0, sizeof info);
  char err[256] = "";
  int rc = ts_refine_run(src, snap, sel, ns, &o, nt, &nsrc, &info, err, sizeof err);
  ts_refine_src_free(nsrc);
  if (rc) {
    fprintf(stderr, "bench_refine_hold: ts_refine_run: %s\n", err);
    return rc;
  }
  for (int k = 0; k < 2 && !rc; k++) rc = ts_massspring_step(t, TS_BENCH_DT, NULL, 0, NULL);
  const uint32_t(*par)[2] = (const uint32_t(*)[2])info.parents;
  const double i0 = ts_bench_wall_s();
  if (!rc) rc = ts_refine_restate(*nt, t, par);
  const double r0 = ts_bench_wall_s();
  if (!rc) rc = ts_handover_renew(*nt, t, par, NULL, 0, NULL);
  const double i1 = ts_bench_wall_s();
  *install_s = i1 - i0;
  *renew_s = i1 - r0;
  free(info.parents);
  return rc;
}

static void one_rep(ts_tissue *t, ts_refine_src *src, const uint32_t *sel, uint32_t ns, rep *out) {
  memset(out, 0, sizeof *out);
  /* now: the room first (the refinement thread), then the copy into it */
  ts_tissue *room = NULL, *nt = NULL, *snap = NULL;
  double w0 = ts_bench_wall_s();
  int rc = ts_refine_snapshot_reserve(t->n_nodes, t->n_springs, t->n_tris, t->hand != NULL, &room);
  double w1 = ts_bench_wall_s();
  out->room = w1 - w0;
  if (!rc) rc = ts_refine_snapshot_into(t, room);
  ts_refine_src *shared = rc ? NULL : ts_refine_src_share(src);
  double w2 = ts_bench_wall_s();
  double install = 0, renew = 0;
  if (!rc) rc = refine_install(t, room, shared, sel, ns, &nt, &install, &renew);
  out->hold = (w2 - w1) + install;
  out->snap = w2 - w1;
  out->renew = renew;
  if (!rc && nt->hand && nt->hand->map) out->touched = nt->hand->map->n_nodes;
  if (nt) out->nodes = nt->n_nodes;
  w0 = ts_bench_wall_s();
  ts_tissue_destroy(room);
  ts_tissue_destroy(nt);
  ts_refine_src_free(shared);
  out->dispose = ts_bench_wall_s() - w0;
  nt = NULL;
  if (rc) {
    out->rc = rc;
    return;
  }
  /* before: fresh memory on the physics thread, the source copied, and the
   * snapshot and the replaced tissue freed there */
  ts_refine_src *copy = NULL;
  w0 = ts_bench_wall_s();
  rc = ts_refine_snapshot(t, &snap);
  if (!rc) rc = ts_refine_src_copy(src, &copy);
  w1 = ts_bench_wall_s();
  if (!rc) rc = refine_install(t, snap, copy, sel, ns, &nt, &install, &renew);
  w2 = ts_bench_wall_s();
  ts_tissue_destroy(snap);
  ts_tissue_destroy(nt);
  ts_refine_src_free(copy);
  out->fresh = (w1 - w0) + install + (ts_bench_wall_s() - w2);
  out->rc = rc;
}

static int run_scenario(const char *name, int reps) {
  ts_tissue *t = NULL;
  ts_refine_src *src = NULL;
  uint32_t node = 0, *sel = NULL, ns = 0;
  int status = -1;
  if (load(name, &t, &src, &node)) goto out;
  int rc = ts_massspring_prepare(t);
  for (int k = 0; k < 20 && !rc; k++) rc = ts_massspring_step(t, TS_BENCH_DT, NULL, 0, NULL);
  const double o[3] = {t->x[node][0], t->x[node][1] + 0.05, t->x[node][2]}, dir[3] = {0, -1, 0};
  if (!rc) rc = ts_refine_pick(src, t, o, dir, RANGE, &sel, &ns, NULL);
  if (rc) {
    fprintf(stderr, "bench_refine_hold: %s: setting up: %s\n", name, ts_err_name(rc));
    goto out;
  }
  double hold[REPS_MAX], fresh[REPS_MAX], room[REPS_MAX], dispose[REPS_MAX], renew[REPS_MAX], snap[REPS_MAX];
  rep r;
  for (int i = 0; i < reps; i++) {
    fprintf(stderr, "bench_refine_hold: %s: repetition %d of %d\n", name, i + 1, reps);
    one_rep(t, src, sel, ns, &r);
    if (r.rc) {
      fprintf(stderr, "bench_refine_hold: %s: %s\n", name, ts_err_name(r.rc));
      goto out;
    }
    hold[i] = r.hold, fresh[i] = r.fresh, room[i] = r.room, dispose[i] = r.dispose, renew[i] = r.renew;
    snap[i] = r.snap;
  }
  /* what ts_refine_snapshot copies: eight vectors, a mass and a branch flag a node */
  const double mb = ((double)t->n_nodes * (8 * sizeof(double[3]) + sizeof(double) + 1) +
                     (double)t->n_springs * sizeof(ts_spring) + (double)t->n_tris * sizeof(uint32_t[3])) /
                    1048576.0;
  cJSON *L = ts_bench_line("refine_hold", name, "refine_hold_s", median(hold, reps), "s");
  ts_bench_line_ref(L, "fresh_hold_s", median(fresh, reps));
  ts_bench_line_num(L, "room_s", median(room, reps));
  ts_bench_line_num(L, "dispose_s", median(dispose, reps));
  ts_bench_line_num(L, "snapshot_s", median(snap, reps));
  ts_bench_line_num(L, "renew_s", median(renew, reps));
  ts_bench_line_num(L, "touched_nodes", r.touched);
  ts_bench_line_num(L, "refined_nodes", r.nodes);
  ts_bench_line_num(L, "nodes", t->n_nodes);
  ts_bench_line_num(L, "springs", t->n_springs);
  ts_bench_line_num(L, "selected_triangles", ns);
  ts_bench_line_num(L, "snapshot_mb", mb);
  ts_bench_line_num(L, "repetitions", reps);
  ts_bench_line_emit(L);
  status = 0;
out:
  free(sel);
  ts_refine_src_free(src);
  ts_tissue_destroy(t);
  return status;
}

int main(int argc, char **argv) {
  ts_bench_mode mode;
  const char *names[8];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 8, &n_names);
  if (a) return a == 1 ? 0 : 2;
  if (n_names == 0) {
    names[n_names++] = "patch-S";
    names[n_names++] = "liver";
    if (mode == TS_BENCH_FULL) names[n_names++] = "patch-L";
  }
  mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* see the top of this file */
  const int reps = mode == TS_BENCH_QUICK ? 3 : mode == TS_BENCH_FULL ? 9 : 5;
  int failed = 0;
  for (int i = 0; i < n_names; i++)
    if (run_scenario(names[i], reps)) failed++;
  return failed ? 1 : 0;
}
