/*
 * bench_scenario.h: the standard scenarios of DESIGN.md ("Standard
 * scenarios"), built the same way for every benchmark so that numbers
 * compare: a tissue, the standard tool path placed on it (bench_path.h) and
 * the session time step.
 *
 *   patch-S  the built-in stomach-wall patch (ts_patch_create), 3 layers,
 *            resolution 50: 2,500 nodes per sheet;
 *   patch-L  the same patch at resolution 141: 19,881 nodes per sheet;
 *   liver    ../shared/data/meshes/liver-smooth.obj (centimetres), extruded
 *            inward into the three stomach-wall layers (ts_extrude, its pleat
 *            relaxed and its layers thinned where they would fold, then
 *            ts_tissue_build).
 *
 * The path goes over the top of the tissue: its centre is the outer-sheet
 * node with the largest y at rest (the patch's centre, the liver's highest
 * point), approached from above (+y, against gravity), dragged along +x.
 * A benchmark that wants the tool to meet the tissue where it hangs under
 * gravity lets it settle first (ts_bench_scenario_settle), which moves the
 * path onto that node's settled position, so that "press 8 mm" is 8 mm into
 * the tissue whatever its material's sag.
 */
#ifndef TS_BENCH_SCENARIO_H
#define TS_BENCH_SCENARIO_H

#include <stddef.h>

#include "bench_path.h"
#include "ts_extrude.h"
#include "ts_tissue.h"

#define TS_BENCH_DT 1e-3 /* s: the session default (the haptic rate) */

typedef struct ts_bench_scenario {
  char name[16];
  ts_tissue *tissue;
  ts_bench_path path;
  uint32_t path_node;  /* the node the path is centred on */
  double dt;           /* s */
  double build_s;      /* wall seconds it took to build */
  double sag;          /* m: how far path_node sank while settling (0 before) */
} ts_bench_scenario;

/* The scenario names, NULL-terminated, in the order benchmarks run them. */
extern const char *const ts_bench_scenario_names[];

/* 1 when name is a standard scenario. */
int ts_bench_scenario_known(const char *name);

/* Builds a scenario. Returns 0, or -1 with a message in err (unknown name,
 * a mesh that does not load, a builder error). */
int ts_bench_scenario_create(const char *name, ts_bench_scenario *out, char *err, size_t errcap);

/* Steps the tissue without a tool for `seconds` of simulated time (steps of
 * s->dt, ts_massspring_step) so that it settles under gravity, then centres
 * the path on path_node's current position. Returns 0 or the step's error
 * (a negative ts_errno). */
int ts_bench_scenario_settle(ts_bench_scenario *s, double seconds);

void ts_bench_scenario_destroy(ts_bench_scenario *s);

/* CPU seconds of the liver's three stages. */
typedef struct ts_bench_build_times {
  double import_s;  /* reading, validating and repairing the OBJ */
  double extrude_s; /* ts_extrude (relaxing, directions, thinning, checks) */
  double build_s;   /* ts_tissue_build and ts_massspring_prepare */
} ts_bench_build_times;

/* The liver scenario's tissue (as ts_bench_scenario_create builds it), and
 * when keep is not NULL the extrusion it was built from (the caller frees
 * it), and when times is not NULL the stages' CPU times. Returns 0, or -1
 * with a message in err. */
int ts_bench_liver_create(ts_tissue **out, ts_extrusion **keep, ts_bench_build_times *times, char *err,
                          size_t cap);

/* The source a session keeps for refining the scenario's tissue t (built
 * from ex, the extrusion ts_bench_liver_create kept, for the liver; the
 * patch's own for patch-S/L, ex NULL); NULL on error, with a message on
 * stderr. */
struct ts_refine_src *ts_bench_refine_source(const char *name, const ts_tissue *t, const ts_extrusion *ex);

/* How long a benchmark runs: --quick, the default, or --full. */
typedef enum { TS_BENCH_QUICK, TS_BENCH_DEFAULT, TS_BENCH_FULL } ts_bench_mode;

/* The command line every benchmark takes, "[--quick | --full] [SCENARIO
 * ...]" (usage is its whole --help text): sets *mode and puts the named
 * scenarios in names (at most cap; *n_names of them, 0 when none is named).
 * Returns 0 to run, 1 after printing the usage for --help (exit 0), or 2
 * after printing an error and the usage (exit 2). */
int ts_bench_args(int argc, char **argv, const char *usage, ts_bench_mode *mode,
                  const char **names, int cap, int *n_names);

#endif
