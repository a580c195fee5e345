/*
 * fuzz_ctlargs.c: fuzz target for tissuectl's command line
 * (client-c/ctl_args.c, ctl_parse_args): whatever a user or a script types
 * after "tissuectl". ctl_args.c is compiled into the target (it needs only
 * libc and libm).
 *
 * Input: the arguments, separated by NUL bytes (fuzz_argv.h: at most 64;
 * each its own allocation). Seeds: tests/fuzz/corpus/ctlargs/.
 *
 * Checks, besides ASan/UBSan and the leak check: the result is one of
 * CTL_RUN, CTL_HELP, CTL_USAGE, CTL_ERROR; an error says why in a
 * terminated message; a command to run holds what main() relies on without
 * checking again: a known command, the verb and its argument of models, a
 * tissue name (not empty) only for tissues delete and --with-records only
 * with it, a session id for poke, watch, refine, train, shortcut, reset and end that
 * fits a uint32_t, a solver 0..3 and not with --mesh, --self-contact only for create
 * without --mesh, --use learned or solve given
 * to shortcut and to no other command, a model id 0 or whole, only for
 * shortcut, a model kind only for train, every number
 * whole where it must be and within the bounds --help states (port
 * 1..65535, timeout 1..3600000 ms, depth 0..0.05 m, radius 0.0005..0.05 m,
 * scale 1e-6..1000, substeps and frame rate 1..1000 or unset, range and
 * max-edge 0..1, seconds 0.01..86400, 0 for watch until interrupted, frames
 * 1..1e9 whole or unset, and only for watch),
 * friction finite, no --substeps with --mesh, materials and fit's own
 * options only for them (fit's file, layer, direction axial or radial, name
 * all given, the tissue "stomach" unless named), create --materials' 1..8
 * names (at most 63 bytes, no comma, one not empty) only for the built-in
 * patch or an upload and not more than --layers, and every string either the
 * default or one of the arguments, read to its end; and what main() no
 * longer checks: a mesh's format by its extension, --scale and --layers
 * only with --mesh and --tissue only without, --name only with create, no empty tissue or
 * name, the layers 1..8 positive thicknesses, a model id > 0 for models
 * export and delete, a known model kind, the triangles 1..256 and the ray
 * six finite numbers (not both), --range not with --triangles, --max-edge
 * only with --leb and --midpoints not with it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../client-c/ctl_args.h"
#include "fuzz_argv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static void check_str(const fuzz_argv *a, const char *s, const char *dflt, int may_be_null) {
  if (!s) {
    if (!may_be_null) abort();
    return;
  }
  /* (a default is compared by content: the same literal in another file
   * need not have the same address) */
  if (!(dflt && !strcmp(s, dflt)) && !fuzz_argv_owns(a, s, 0)) abort();
  sink += strlen(s);
}

static void check_num(double v, double lo, double hi, int whole) {
  if (!isfinite(v) || v < lo || v > hi) abort();
  if (whole && v != floor(v)) abort();
}

static int is(const char *s, const char *t) { return s && strcmp(s, t) == 0; }

/* 1 when the file name ends in ".<ext>", case-insensitive. */
static int ends_in(const char *s, const char *ext) {
  size_t n = strlen(s), k = strlen(ext);
  if (n < k + 1 || s[n - k - 1] != '.') return 0;
  for (size_t i = 0; i < k; i++) {
    char ch = s[n - k + i];
    if ((ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch) != ext[i]) return 0;
  }
  return 1;
}

static void check_run(const fuzz_argv *a, const ctl_args *o, const char *cred) {
  const char *cmd = o->cmd;
  check_str(a, cmd, NULL, 0);
  if (!is(cmd, "sessions") && !is(cmd, "create") && !is(cmd, "poke") && !is(cmd, "watch") &&
      !is(cmd, "refine") && !is(cmd, "models") && !is(cmd, "train") && !is(cmd, "shortcut") &&
      !is(cmd, "reset") && !is(cmd, "end") && !is(cmd, "materials") && !is(cmd, "fit") &&
      !is(cmd, "tissues"))
    abort();
  check_str(a, o->host, DEFAULT_HOST, 0);
  check_str(a, o->cred, cred, 1);
  check_num(o->port, 1, 65535, 1);
  check_num(o->timeout, 1, 3600000, 0);
  if (o->is_poke != is(cmd, "poke") || o->is_watch != is(cmd, "watch") ||
      o->is_refine != is(cmd, "refine") || o->is_train != is(cmd, "train") ||
      o->is_shortcut != is(cmd, "shortcut") || o->is_reset != is(cmd, "reset") ||
      o->is_end != is(cmd, "end") || o->is_materials != is(cmd, "materials") ||
      o->is_fit != is(cmd, "fit") || o->is_tissues != is(cmd, "tissues"))
    abort();
  /* materials [--tissue T]; fit FILE --layer L --direction axial|radial --name N [--tissue T] */
  check_str(a, o->fit_tissue, "stomach", 1);
  if (o->fit_tissue && (!o->fit_tissue[0] || !(o->is_materials || o->is_fit))) abort();
  if (o->is_fit && !o->fit_tissue) abort();
  check_str(a, o->fit_file, NULL, 1);
  check_str(a, o->fit_layer, NULL, 1);
  check_str(a, o->fit_direction, NULL, 1);
  check_str(a, o->fit_name, NULL, 1);
  if (o->is_fit != (o->fit_file != NULL) || o->is_fit != (o->fit_layer != NULL) ||
      o->is_fit != (o->fit_direction != NULL) || o->is_fit != (o->fit_name != NULL))
    abort();
  if (o->is_fit && (!o->fit_layer[0] || !o->fit_name[0] ||
                    (!is(o->fit_direction, "axial") && !is(o->fit_direction, "radial")) ||
                    (o->fit_file[0] == '-' && o->fit_file[1])))
    abort();
  /* create --materials: 1..8 names of at most 63 bytes, one at least not
   * empty, for the built-in patch or an upload, no more than --layers */
  check_str(a, o->materials_s, NULL, 1);
  if (!o->materials_s != !o->n_materials || o->n_materials < 0 ||
      o->n_materials > CTL_MAX_LAYERS)
    abort();
  if (o->materials_s) {
    int named = 0;
    for (int k = 0; k < o->n_materials; k++) {
      const size_t len = strnlen(o->materials[k], sizeof o->materials[k]);
      if (len > 63 || strchr(o->materials[k], ',')) abort();
      named += len > 0;
    }
    if (!named || !is(cmd, "create") || !is(o->tissue, "stomach-patch")) abort();
    if (o->layers_s && o->n_materials > o->n_layers) abort();
  }
  /* the learned shortcut: create --solver, train --model, shortcut --use/--model-id */
  if (o->solver < 0 || o->solver > 3 || (o->solver && o->mesh)) abort();
  if (o->solver && !is(cmd, "create")) abort();
  /* create --self-contact: a flag of create --tissue alone */
  if (o->self_contact != 0 && (o->self_contact != 1 || !is(cmd, "create") || o->mesh)) abort();
  check_str(a, o->model_kind, NULL, 1);
  if (o->model_kind && !o->is_train) abort();
  if (o->model_kind && !is(o->model_kind, "method") && !is(o->model_kind, "rich") &&
      !is(o->model_kind, "spread") && !is(o->model_kind, "spread2") &&
      !is(o->model_kind, "spread2r"))
    abort();
  if (o->is_shortcut ? (o->use_learned != 0 && o->use_learned != 1) : o->use_learned != -1)
    abort();
  if (o->model_id != 0) check_num(o->model_id, 1, 9007199254740992.0, 1);
  if (o->model_id != 0 && !o->is_shortcut) abort();
  /* models: its verb, and an argument for all but list */
  if (is(cmd, "models")) {
    if (!is(o->verb, "list") && !is(o->verb, "export") && !is(o->verb, "import") &&
        !is(o->verb, "delete"))
      abort();
    if (is(o->verb, "list") != (o->verb_arg == NULL)) abort();
    check_str(a, o->verb_arg, NULL, 1);
    if ((is(o->verb, "export") || is(o->verb, "delete")) ? o->verb_id <= 0 : o->verb_id != 0)
      abort();
  } else if (o->verb || o->verb_arg || o->model_tissue || o->verb_id) {
    abort();
  }
  check_str(a, o->model_tissue, NULL, 1);
  if (o->model_tissue && !o->model_tissue[0]) abort();
  /* tissues delete NAME [--with-records]: a name, only for tissues */
  check_str(a, o->delete_tissue, NULL, 1);
  if (o->delete_tissue && (!o->delete_tissue[0] || !o->is_tissues)) abort();
  if (o->with_records && !o->delete_tissue) abort();
  /* create */
  check_str(a, o->tissue, "stomach-patch", 0);
  check_str(a, o->mesh, NULL, 1);
  check_str(a, o->name, NULL, 1);
  check_str(a, o->layers_s, NULL, 1);
  check_num(o->scale, 1e-6, 1000, 0);
  if (o->substeps != 0) check_num(o->substeps, 1, 1000, 1);
  if (o->substeps > 0 && o->mesh) abort();
  if (!o->tissue[0] || (o->name && !o->name[0])) abort();
  if (o->mesh) {
    static const char *const ext[] = {"obj", "stl", "ply"}; /* CTL_MESH_* */
    if (!is(cmd, "create") || !is(o->tissue, "stomach-patch")) abort();
    if (o->mesh_format < 0 || o->mesh_format > 2 || !ends_in(o->mesh, ext[o->mesh_format]))
      abort();
  } else if (o->layers_s || o->scale != 1 || o->mesh_format) {
    abort();
  }
  if (o->name && !is(cmd, "create")) abort();
  if (!o->layers_s != !o->n_layers || o->n_layers < 0 || o->n_layers > CTL_MAX_LAYERS) abort();
  for (int k = 0; k < o->n_layers; k++)
    if (!isfinite(o->layers[k]) || !(o->layers[k] > 0)) abort();
  /* poke, watch, refine, train, shortcut, reset, end */
  const int takes_session = o->is_poke || o->is_watch || o->is_refine || o->is_train ||
                            o->is_shortcut || o->is_reset || o->is_end;
  if (takes_session)
    check_num(o->session, 1, 4294967295.0, 1);
  else if (o->session != -1)
    abort();
  check_num(o->depth, 0, 0.05, 0);
  check_num(o->radius, 0.0005, 0.05, 0);
  if (o->is_poke) check_num(o->seconds, 0.01, 86400, 0);
  if (o->is_watch && o->seconds != 0) check_num(o->seconds, 0.01, 86400, 0);
  if (o->rate != 0) check_num(o->rate, 1, 1000, 1);
  if (o->frames != 0) check_num(o->frames, 1, 1e9, 1);
  if (o->frames != 0 && !o->is_watch) abort();
  check_num(o->range, 0, 1, 0);
  check_num(o->max_edge, 0, 1, 0);
  check_str(a, o->tris_s, NULL, 1);
  check_str(a, o->ray_s, NULL, 1);
  if (!o->tris_s != !o->n_tris || o->n_tris < 0 || o->n_tris > CTL_MAX_TRIANGLES) abort();
  for (int k = 0; k < o->n_tris; k++) sink += o->tris[k];
  if (o->tris_s && (o->ray_s || o->range != 0)) abort();
  for (int k = 0; k < 6; k++)
    if (o->ray_s ? !isfinite(o->ray[k]) : o->ray[k] != 0) abort();
  if ((o->tris_s || o->ray_s) && !o->is_refine) abort();
  if ((o->max_edge != 0 && !o->leb) || (o->leb && o->midpoints)) abort();
  if (o->have_mu && (!isfinite(o->mu[0]) || !isfinite(o->mu[1]))) abort();
  if (o->leb && !o->is_refine) abort();
  if (o->midpoints && !o->is_refine) abort();
  /* what main() casts (the session id only for the commands that take it) */
  if (takes_session) sink += (uint32_t)o->session;
  sink += (uint64_t)o->model_id;
  sink += (uint32_t)o->substeps + (uint32_t)o->rate + (unsigned)o->port;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  fuzz_argv a;
  fuzz_argv_make(&a, "tissuectl", data, size);
  static const char cred[] = "key-from-the-environment";
  ctl_args o;
  int rc = ctl_parse_args(a.argc, a.argv, size & 1 ? cred : NULL, &o);
  switch (rc) {
  case CTL_RUN: check_run(&a, &o, size & 1 ? cred : NULL); break;
  case CTL_HELP: break;
  case CTL_USAGE:
    if (o.cmd) abort();
    break;
  case CTL_ERROR:
    if (!o.err[0] || strnlen(o.err, sizeof o.err) >= sizeof o.err) abort();
    break;
  default: abort();
  }
  fuzz_argv_free(&a);
  return 0;
}
