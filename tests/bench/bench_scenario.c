/*
 * bench_scenario.c: builds the standard scenarios (see bench_scenario.h).
 */
#include "bench_scenario.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_mesh_io.h"
#include "ts_refine.h"

const char *const ts_bench_scenario_names[] = {"patch-S", "patch-L", "liver", NULL};

int ts_bench_scenario_known(const char *name) {
  for (int i = 0; ts_bench_scenario_names[i]; i++)
    if (strcmp(name, ts_bench_scenario_names[i]) == 0) return 1;
  return 0;
}

static int build_patch(uint32_t resolution, ts_tissue **out, char *err, size_t cap) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = resolution;
  int rc = ts_patch_create(&d, out);
  if (rc) snprintf(err, cap, "ts_patch_create(resolution %u): %s", resolution, ts_err_name(rc));
  return rc ? -1 : 0;
}

/* The path over the top of the tissue, centred on the point p: coming down
 * along -y, dragged along +x. */
static int place_path(ts_bench_scenario *s, const double p[3], char *err, size_t cap) {
  const double up[3] = {0, 1, 0}, along[3] = {1, 0, 0};
  if (ts_bench_path_init(&s->path, p, up, along)) {
    snprintf(err, cap, "%s: cannot place the tool path", s->name);
    return -1;
  }
  return 0;
}

/* The outer-sheet node with the largest y at rest. */
static uint32_t top_node(const ts_tissue *t) {
  uint32_t n = t->nodes_per_sheet ? t->nodes_per_sheet : t->n_nodes, top = 0;
  for (uint32_t i = 1; i < n; i++)
    if (t->rest[i][1] > t->rest[top][1]) top = i;
  return top;
}

/* Where ../shared is: $TS_SHARED_DIR, else the build's TS_SHARED_DIR. */
static const char *shared_dir(void) {
  const char *env = getenv("TS_SHARED_DIR");
  return env && env[0] ? env : TS_SHARED_DIR;
}

/* The liver: liver-smooth.obj (centimetres) through the import pipeline,
 * extruded inward along the vertex normals into the default stomach-wall
 * layers (ts_material_default_layers: 1.0 + 1.5 + 2.0 mm), built into a
 * tissue with the patch's gravity and drag. The organ is only about 64 mm
 * across and thinner than twice 4.5 mm at its rim, and has a pleat of about
 * a millimetre: the extrusion may move pleat vertices by up to
 * TS__LIVER_RELAX and thin the layers where they would fold down to
 * TS__LIVER_MIN_DEPTH of their depth (ts_extrude.h; at the time of writing
 * two vertices move by 0.28 mm and 1198 of 2194 keep less than the full
 * depth, the least 0.107 of it, 130 of them where the innermost sheet would
 * cross itself; bench_mesh prints these counts). The mesh is a closed surface, so
 * something has to hold it: it rests on a support, every node (of every
 * sheet) within TS__LIVER_SUPPORT of its lowest point being anchored. */
#define TS__LIVER_SUPPORT 0.005 /* m */
#define TS__LIVER_RELAX 1e-3    /* m */
#define TS__LIVER_MIN_DEPTH 0.1

int ts_bench_liver_create(ts_tissue **out, ts_extrusion **keep, ts_bench_build_times *times, char *err,
                          size_t cap) {
  *out = NULL;
  if (keep) *keep = NULL;
  ts_bench_build_times tm = {0, 0, 0};
  double c0 = ts_bench_cpu_s();
  char path[1024], msg[512] = "";
  snprintf(path, sizeof path, "%s/data/meshes/liver-smooth.obj", shared_dir());
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = 0.01; /* cm */
  ts_mesh *mesh = NULL;
  ts_extrusion *ex = NULL;
  uint8_t *anchored = NULL;
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &mesh, NULL, NULL, msg, sizeof msg);
  double c1 = ts_bench_cpu_s();
  tm.import_s = c1 - c0;
  if (rc) {
    snprintf(err, cap, "liver: %s (%s)", msg, ts_err_name(rc));
    goto out;
  }
  ts_layer layers[TS_MAX_LAYERS];
  uint32_t nl = ts_material_default_layers(layers);
  ts_extrude_def d;
  memset(&d, 0, sizeof d);
  d.n_layers = nl;
  d.mode = TS_EXTRUDE_NORMAL;
  d.max_relax = TS__LIVER_RELAX;
  d.min_depth_fraction = TS__LIVER_MIN_DEPTH;
  for (uint32_t l = 0; l < nl; l++) d.thickness[l] = layers[l].thickness;
  rc = ts_extrude(mesh, &d, &ex, msg, sizeof msg);
  double c2 = ts_bench_cpu_s();
  tm.extrude_s = c2 - c1;
  if (rc) {
    snprintf(err, cap, "liver: extrusion: %s (%s)", msg, ts_err_name(rc));
    goto out;
  }
  if (msg[0]) fprintf(stderr, "liver: extrusion: %s\n", msg); /* the warning */
  uint32_t nodes = ex->n_sheets * ex->nv;
  anchored = calloc(nodes, 1);
  if (!anchored) {
    rc = TS_ENOMEM;
    snprintf(err, cap, "liver: out of memory");
    goto out;
  }
  double low = ex->x[0][1];
  for (uint32_t i = 1; i < nodes; i++)
    if (ex->x[i][1] < low) low = ex->x[i][1];
  for (uint32_t i = 0; i < nodes; i++) anchored[i] = ex->x[i][1] < low + TS__LIVER_SUPPORT;
  ts_patch_def pd = ts_default_patch_def();
  double c3 = ts_bench_cpu_s();
  rc = ts_tissue_build(ex, layers, anchored, pd.gravity, out);
  if (rc) {
    snprintf(err, cap, "liver: ts_tissue_build: %s", ts_err_name(rc));
    goto out;
  }
  (*out)->drag = pd.drag;
  rc = ts_massspring_prepare(*out); /* the stability bounds see the drag */
  if (rc) {
    snprintf(err, cap, "liver: ts_massspring_prepare: %s", ts_err_name(rc));
    ts_tissue_destroy(*out);
    *out = NULL;
  }
  tm.build_s = ts_bench_cpu_s() - c3;
out:
  free(anchored);
  if (keep && !rc) {
    *keep = ex;
    ex = NULL;
  }
  ts_extrusion_free(ex);
  ts_mesh_free(mesh);
  if (times) *times = tm;
  return rc ? -1 : 0;
}

int ts_bench_scenario_create(const char *name, ts_bench_scenario *s, char *err, size_t cap) {
  memset(s, 0, sizeof *s);
  if (!ts_bench_scenario_known(name)) {
    snprintf(err, cap, "unknown scenario '%s' (patch-S, patch-L, liver)", name);
    return -1;
  }
  snprintf(s->name, sizeof s->name, "%s", name);
  s->dt = TS_BENCH_DT;
  double t0 = ts_bench_wall_s();
  int rc;
  if (strcmp(name, "patch-S") == 0)
    rc = build_patch(50, &s->tissue, err, cap);
  else if (strcmp(name, "patch-L") == 0)
    rc = build_patch(141, &s->tissue, err, cap);
  else
    rc = ts_bench_liver_create(&s->tissue, NULL, NULL, err, cap);
  s->build_s = ts_bench_wall_s() - t0;
  if (!rc) {
    s->path_node = top_node(s->tissue);
    rc = place_path(s, s->tissue->rest[s->path_node], err, cap);
  }
  if (rc) ts_bench_scenario_destroy(s);
  return rc;
}

int ts_bench_scenario_settle(ts_bench_scenario *s, double seconds) {
  ts_tissue *t = s->tissue;
  long n = lround(seconds / s->dt);
  for (long i = 0; i < n; i++) {
    ts_step_stats st;
    int rc = ts_massspring_step(t, s->dt, NULL, 0, &st);
    if (rc) return rc;
  }
  const double *p = t->x[s->path_node];
  s->sag = t->rest[s->path_node][1] - p[1];
  char err[64];
  return place_path(s, p, err, sizeof err) ? TS_EINVAL : 0;
}

void ts_bench_scenario_destroy(ts_bench_scenario *s) {
  if (!s) return;
  ts_tissue_destroy(s->tissue);
  s->tissue = NULL;
}

int ts_bench_args(int argc, char **argv, const char *usage, ts_bench_mode *mode,
                  const char **names, int cap, int *n_names) {
  *mode = TS_BENCH_DEFAULT;
  *n_names = 0;
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      *mode = TS_BENCH_QUICK;
    } else if (strcmp(argv[i], "--full") == 0) {
      *mode = TS_BENCH_FULL;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      return 1;
    } else if (ts_bench_scenario_known(argv[i]) && *n_names < cap) {
      names[(*n_names)++] = argv[i];
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n%s", prog, argv[i], usage);
      return 2;
    }
  }
  return 0;
}

ts_refine_src *ts_bench_refine_source(const char *name, const ts_tissue *t, const ts_extrusion *ex) {
  ts_refine_src *src = NULL;
  ts_patch_def pd = ts_default_patch_def();
  if (ex) {
    ts_layer layers[TS_MAX_LAYERS];
    ts_material_default_layers(layers);
    uint8_t *anch = malloc(t->n_nodes);
    if (!anch) return NULL;
    for (uint32_t i = 0; i < t->n_nodes; i++) anch[i] = t->inv_mass[i] == 0; /* node = extrusion node */
    int rc = ts_refine_src_create(ex, layers, anch, pd.gravity, &src);
    free(anch);
    if (rc) fprintf(stderr, "bench: %s: ts_refine_src_create: %s\n", name, ts_err_name(rc));
    return rc ? NULL : src;
  }
  pd.resolution = strcmp(name, "patch-S") == 0 ? 50 : 141; /* as ts_bench_scenario_create builds them */
  int rc = ts_refine_src_patch(&pd, &src);
  if (rc) fprintf(stderr, "bench: %s: ts_refine_src_patch: %s\n", name, ts_err_name(rc));
  return rc ? NULL : src;
}
