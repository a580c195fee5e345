/*
 * bench_self.c: tissue self-contact detection (ts_self_contact.h) per step,
 * the tree walked against itself (ts_self_contact_detect, ts_aabb_self.h)
 * beside the former per-surface-node box query
 * (ts_self_contact_detect_pernode) on the same positions in the same run.
 *
 * Two kinds of state, each tree refitted for it (untimed; the session pays
 * the refit for the tools too):
 *   - dent: the scenario's tissue at rest dented by the standard path's tip
 *     (bench_collide's dent: 12 mm radius, 80 % of the tip's depth), one
 *     state per 1 ms step of the path from 2.5 s: no fold, no pairs, the
 *     cost of a pass that finds nothing (what every step of a session
 *     without a fold pays);
 *   - fold (patch-S and patch-L only): a flat patch of the scenario's
 *     resolution, its right half turned over the left (outer surfaces
 *     0.4-0.9 mm apart, inside the 1 mm thickness) and every node moved up
 *     to 0.2 mm along each axis: half the outer sheet in contact, the cost
 *     with thousands of pairs.
 * Both methods must find the same pairs: every state compares the sorted
 * pair lists (node and corners), mismatches counted.
 *
 * Lines: self_walk_us_per_step (ref pernode_us_per_step) for dent and
 * fold (metric suffix), with surface nodes, mean pairs, the walk's node
 * pairs tested / pruned by the rest and the displacement boxes / leaf
 * pairs, mismatches; and
 * walk_ns_per_surface_node, the rule the daemon's --self-contact-max-nodes
 * default was chosen by.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_path.h"
#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_aabb_tree.h"
#include "ts_self_contact.h"
#include "ts_tissue.h"

#define DENT_RADIUS 0.012 /* m */
#define DENT_SHARE 0.8

typedef struct plan {
  const char *name;
  uint32_t states;    /* dented states (1 ms apart on the path) */
  uint32_t pernode;   /* of them, the reference measured on every k-th */
  uint32_t folds;     /* folded states */
} plan;

static plan plan_for(ts_bench_mode m) {
  if (m == TS_BENCH_QUICK) return (plan){"quick", 100, 10, 4};
  if (m == TS_BENCH_FULL) return (plan){"full", 2000, 10, 40};
  return (plan){"default", 500, 10, 10};
}

static void dent(const ts_tissue *t, const ts_bench_path *p, const double tip[3], double (*x)[3]) {
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
  }
}

/* a random number in [0, 1) (the bench's own generator: same states every run) */
static double rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0;
}

static int cmp_pair(const void *a, const void *b) {
  const ts_self_pair *p = a, *q = b;
  if (p->node != q->node) return p->node < q->node ? -1 : 1;
  for (int j = 0; j < 3; j++)
    if (p->tri[j] != q->tri[j]) return p->tri[j] < q->tri[j] ? -1 : 1;
  return 0;
}

typedef struct tally {
  double t_walk, t_node;
  uint32_t n_walk, n_node, mismatches;
  uint64_t pairs, node_pairs, pruned_rest, pruned_disp, leaf_pairs, overflow;
} tally;

/* one state: the walk timed; every `ref`-th also the per-node method, and
 * the two pair lists compared */
static int one_state(ts_aabb_tree *tree, const ts_tissue *t, const double (*x)[3],
                     ts_self_contact *w, ts_self_contact *r, int ref, tally *ty) {
  if (ts_aabb_tree_refit(tree, x) < 0) return -1;
  const uint64_t ov0 = w->overflow + r->overflow;
  double c0 = ts_bench_cpu_s();
  ts_self_contact_detect(w, tree, t, x);
  ty->t_walk += ts_bench_cpu_s() - c0;
  ty->n_walk++;
  ty->pairs += w->found;
  ty->node_pairs += w->walk.node_pairs;
  ty->pruned_rest += w->walk.pruned[0];
  ty->pruned_disp += w->walk.pruned[1];
  ty->leaf_pairs += w->walk.leaf_pairs;
  if (ref) {
    c0 = ts_bench_cpu_s();
    ts_self_contact_detect_pernode(r, tree, t, x);
    ty->t_node += ts_bench_cpu_s() - c0;
    ty->n_node++;
    qsort(r->pair, r->n, sizeof *r->pair, cmp_pair);
    int same = r->found == w->found && r->n == w->n;
    for (uint32_t i = 0; same && i < w->n; i++)
      same = cmp_pair(&r->pair[i], &w->pair[i]) == 0;
    ty->mismatches += !same;
  }
  ty->overflow += w->overflow + r->overflow - ov0;
  return 0;
}

static void report(const char *scn, const char *kind, const tally *ty, uint32_t surface,
                   const plan *pl) {
  char metric[64];
  snprintf(metric, sizeof metric, "self_walk_us_per_step_%s", kind);
  const double walk = ty->n_walk ? ty->t_walk / ty->n_walk * 1e6 : 0;
  cJSON *o = ts_bench_line("self", scn, metric, walk, "us");
  ts_bench_line_ref(o, "pernode_us_per_step", ty->n_node ? ty->t_node / ty->n_node * 1e6 : 0);
  ts_bench_line_num(o, "states", ty->n_walk);
  ts_bench_line_num(o, "ref_states", ty->n_node);
  ts_bench_line_num(o, "mismatches", ty->mismatches);
  ts_bench_line_num(o, "overflow", (double)ty->overflow);
  ts_bench_line_num(o, "surface_nodes", surface);
  ts_bench_line_num(o, "mean_pairs", ty->n_walk ? (double)ty->pairs / ty->n_walk : 0);
  ts_bench_line_num(o, "mean_node_pairs", ty->n_walk ? (double)ty->node_pairs / ty->n_walk : 0);
  ts_bench_line_num(o, "mean_pruned_rest", ty->n_walk ? (double)ty->pruned_rest / ty->n_walk : 0);
  ts_bench_line_num(o, "mean_pruned_displacement",
                    ty->n_walk ? (double)ty->pruned_disp / ty->n_walk : 0);
  ts_bench_line_num(o, "mean_leaf_pairs", ty->n_walk ? (double)ty->leaf_pairs / ty->n_walk : 0);
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
  snprintf(metric, sizeof metric, "walk_ns_per_surface_node_%s", kind);
  o = ts_bench_line("self", scn, metric, surface ? walk * 1e3 / surface : 0, "ns");
  ts_bench_line_str(o, "plan", pl->name);
  ts_bench_line_emit(o);
}

static int run_dent(const char *name, const plan *pl) {
  ts_bench_scenario sc;
  char err[256];
  if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
    fprintf(stderr, "bench_self: %s\n", err);
    return -1;
  }
  ts_tissue *t = sc.tissue;
  int rc = -1;
  ts_aabb_tree *tree = NULL;
  ts_self_contact w, r;
  memset(&w, 0, sizeof w), memset(&r, 0, sizeof r);
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  if (!x || ts_aabb_tree_create_tissue(NULL, t, &tree) || ts_self_contact_init(&w, NULL) ||
      ts_self_contact_init(&r, NULL) || ts_self_contact_bind(&w, tree, t))
    goto out;
  tally ty;
  memset(&ty, 0, sizeof ty);
  for (uint32_t k = 0; k < pl->states; k++) {
    double tip[3];
    ts_bench_path_tip(&sc.path, 2.5 + k * sc.dt, tip);
    dent(t, &sc.path, tip, x);
    if (one_state(tree, t, (const double (*)[3])x, &w, &r, k % pl->pernode == 0, &ty)) goto out;
  }
  report(name, "dent", &ty, tree->n_used, pl);
  rc = 0;
out:
  ts_self_contact_free(&w);
  ts_self_contact_free(&r);
  ts_aabb_tree_destroy(tree);
  free(x);
  ts_bench_scenario_destroy(&sc);
  return rc;
}

/* the fold of a flat patch with the scenario's resolution */
static int run_fold(const char *name, uint32_t resolution, const plan *pl) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = resolution;
  d.curvature_radius = 0;
  ts_tissue *t = NULL;
  if (ts_patch_create(&d, &t)) return -1;
  int rc = -1;
  ts_aabb_tree *tree = NULL;
  ts_self_contact w, r;
  memset(&w, 0, sizeof w), memset(&r, 0, sizeof r);
  ts_self_contact_def sd = ts_default_self_contact_def();
  sd.cap = 1u << 20; /* every pair kept, so the lists compare whole */
  sd.cand_cap = 1u << 16;
  double (*x)[3] = malloc(sizeof *x * t->n_nodes);
  if (!x || ts_aabb_tree_create_tissue(NULL, t, &tree) || ts_self_contact_init(&w, &sd) ||
      ts_self_contact_init(&r, &sd) || ts_self_contact_bind(&w, tree, t))
    goto out;
  tally ty;
  memset(&ty, 0, sizeof ty);
  uint64_t seed = 17;
  for (uint32_t k = 0; k < pl->folds; k++) {
    /* the right half (x >= 0) turned about x = 0, y = gap / 2: its outer
     * surface (y = 0 at rest) faces down at y = gap over the left half's */
    const double gap = 0.4e-3 + 0.5e-3 * rnd(&seed);
    for (uint32_t i = 0; i < t->n_nodes; i++) {
      memcpy(x[i], t->rest[i], sizeof x[i]);
      if (t->rest[i][0] >= -1e-9) x[i][0] = -t->rest[i][0], x[i][1] = gap - t->rest[i][1];
      for (int c = 0; c < 3; c++) x[i][c] += 0.2e-3 * (2 * rnd(&seed) - 1);
    }
    if (one_state(tree, t, (const double (*)[3])x, &w, &r, 1, &ty)) goto out;
  }
  report(name, "fold", &ty, tree->n_used, pl);
  rc = 0;
out:
  ts_self_contact_free(&w);
  ts_self_contact_free(&r);
  ts_aabb_tree_destroy(tree);
  free(x);
  ts_tissue_destroy(t);
  return rc;
}

static const char usage[] =
    "usage: bench_self [--quick | --full] [SCENARIO ...]\n"
    "Tissue self-contact detection per step: the tree walked against itself beside the\n"
    "former per-surface-node box query, on dented states of each scenario and on folded\n"
    "flat patches of patch-S's and patch-L's resolutions. JSON lines on stdout.\n"
    "Scenarios: patch-S, patch-L, liver (default: all).\n";

int main(int argc, char **argv) {
  ts_bench_mode mode;
  const char *names[16];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 16, &n_names);
  if (a) return a == 1 ? 0 : 2;
  if (n_names == 0)
    for (int i = 0; ts_bench_scenario_names[i]; i++) names[n_names++] = ts_bench_scenario_names[i];
  const plan pl = plan_for(mode);
  int failed = 0;
  for (int i = 0; i < n_names; i++) {
    if (run_dent(names[i], &pl)) failed++;
    if (strcmp(names[i], "patch-S") == 0 && run_fold(names[i], 50, &pl)) failed++;
    if (strcmp(names[i], "patch-L") == 0 && run_fold(names[i], 141, &pl)) failed++;
  }
  return failed ? 1 : 0;
}
