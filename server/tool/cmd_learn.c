/*
 * cmd_learn.c: the learned-shortcut commands of tissuetool (issue 6; the
 * method is in server/core/ts_qstatic.h and ts_learn.h).
 *
 *   tissuetool learn [--db PATH] [--tissue stomach-patch] [--samples N]
 *                    [--model method|rich|spread|spread2|spread2r]
 *                    [--qs-refine-edge auto|METRES]
 *     presses a tool into the built-in patch at N points (4 intervals of
 *     1 mm each), solves each interval quasi-statically (as a daemon
 *     session does by default: on the region copied and refined, so that a
 *     session that loads the model is answered by a model of its own solve)
 *     and records the samples, trains theta by gradient descent (progress on stderr), checks
 *     it against the closed form, measures the error on 3 held-out presses,
 *     stores the model and prints it as one JSON object.
 *   tissuetool models [--db PATH] [list | export ID | import FILE | delete ID]
 *     lists the stored models (JSON array), exports one as JSON, imports one
 *     (FILE '-': standard input; refused unless its tissue is the built-in patch or catalogued in the
 *     database, and its material is that tissue's own; one that repeats a
 *     stored model stores nothing, as the daemon's ImportModel), deletes.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "config.h"
#include "model_doc.h"
#include "tissue_catalog.h"
#include "tool_util.h"
#include "ts_error.h"
#include "ts_learn.h"
#include "ts_qstatic.h"
#include "ts_storage.h"
#include "ts_tissue.h"

#define LEARN_TISSUE "stomach-patch"
#define LEARN_RANGE 0.015   /* m: region search range */
#define LEARN_RADIUS 0.003  /* m: nodes held by the tool */
#define LEARN_STEP 0.001    /* m per interval */
#define LEARN_STEPS 4       /* intervals per press */
#define LEARN_HELD 3        /* held-out presses */
#define LEARN_SPREAD 0.02   /* m: presses within this radius of the centre */
#define EXPORT_FORMAT TS_MODEL_DOC_FORMAT

/* The tissue a model is for, and the solver on it: the built-in patch with
 * its defaults, or (with a database) a catalogued mesh tissue built from
 * its stored mesh and layers as a daemon session of it is
 * (tissue_catalog.h), so that its material identity is the daemon's. */
typedef struct learn_ctx {
  ts_tissue *t;
  ts_qstatic *q;
  ts_qstatic_params p;
  char material[1024];
} learn_ctx;

static int ctx_open(const char *cmd, const char *tissue, uint32_t resolution, ts_storage *st,
                    learn_ctx *c, FILE *err) {
  memset(c, 0, sizeof *c);
  int rc = 0;
  if (strcmp(tissue, LEARN_TISSUE) == 0) {
    ts_patch_def d = ts_default_patch_def();
    d.resolution = resolution; /* the daemon's --patch-resolution */
    rc = ts_patch_create(&d, &c->t);
  } else if (!st) {
    fprintf(err, "tissuetool %s: unknown tissue '%s' (known: %s)\n", cmd, tissue, LEARN_TISSUE);
    return 1;
  } else {
    ts_mesh_tissue mt;
    char msg[600];
    rc = ts_catalog_build(st, tissue, NULL, &mt, NULL, msg, sizeof msg);
    if (rc == TS_ENOTISSUE) {
      fprintf(err, "tissuetool %s: unknown tissue '%s': %s\n", cmd, tissue, msg);
      return 1;
    }
    if (rc) {
      fprintf(err, "tissuetool %s: cannot build %s: %s\n", cmd, tissue, msg);
      return 1;
    }
    c->t = mt.t;
    mt.t = NULL;
    ts_mesh_tissue_free(&mt);
  }
  if (!rc) {
    c->p = ts_qstatic_default_params(c->t);
    rc = ts_qstatic_create(c->t, &c->p, &c->q);
  }
  if (rc) {
    fprintf(err, "tissuetool %s: cannot build %s: %s\n", cmd, tissue, ts_err_name(rc));
    ts_tissue_destroy(c->t);
    return 1;
  }
  ts_learn_material_id(c->t, &c->p, c->material, sizeof c->material);
  return 0;
}

/* --patch-resolution's value (3..512, the daemon's bounds) into *res; 0, or
 * 2 after saying why. */
static int parse_resolution(const char *cmd, const char *s, uint32_t *res, FILE *err) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!end || end == s || *end || v < 3 || v > 512) {
    fprintf(err, "tissuetool %s: --patch-resolution must be a whole number from 3 to 512\n", cmd);
    return 2;
  }
  *res = (uint32_t)v;
  return 0;
}

static void ctx_close(learn_ctx *c) {
  ts_qstatic_destroy(c->q);
  ts_tissue_destroy(c->t);
}

static int64_t tissue_id(const char *cmd, ts_storage *st, const char *name, FILE *err) {
  ts_tissue_rec r;
  if (ts_storage_get_tissue(st, name, &r) == 0) {
    int64_t id = r.id;
    ts_storage_tissue_free(&r);
    return id;
  }
  ts_tissue_rec nr;
  memset(&nr, 0, sizeof nr);
  nr.name = name;
  nr.kind = "builtin";
  nr.layer_spec = "{\"layers\":[\"mucosa\",\"submucosa\",\"muscularis\"]}";
  int64_t id = ts_storage_put_tissue(st, &nr);
  if (id <= 0) fprintf(err, "tissuetool %s: %s\n", cmd, ts_storage_errmsg(st));
  return id;
}

/* Press i of a golden-angle spiral (offset shifts the held-out ones). */
static void press_point(uint32_t i, uint32_t n, double offset, double *px, double *pz) {
  double r = LEARN_SPREAD * sqrt((i + 0.5) / n), a = (i + offset) * 2.39996322972865332;
  *px = r * cos(a);
  *pz = r * sin(a);
}

/* One press of LEARN_STEPS intervals from rest near (px, pz). */
static int press(ts_learner *l, const ts_tissue *t, double (*x)[3], double px, double pz,
                 ts_learn_error *e) {
  memcpy(x, t->rest, sizeof *x * t->n_nodes);
  uint32_t node = 0;
  double bd = INFINITY;
  for (uint32_t i = 0; i < t->nodes_per_sheet; i++) {
    double dx = t->rest[i][0] - px, dz = t->rest[i][2] - pz;
    if (dx * dx + dz * dz < bd) {
      bd = dx * dx + dz * dz;
      node = i;
    }
  }
  for (int k = 0; k < LEARN_STEPS; k++) {
    ts_learn_press p = {{x[node][0], x[node][1], x[node][2]}, {0, -1, 0}, LEARN_RADIUS, LEARN_STEP};
    int rc = e ? ts_learner_compare(l, x, &p, e) : ts_learner_step(l, x, &p, 1, NULL);
    if (rc) return rc;
  }
  return 0;
}

static void progress(void *ud, double fraction, double loss) {
  fprintf((FILE *)ud, "training: %5.1f %%  loss %.6g m^2\n", 100 * fraction, loss);
}

static void learn_help(FILE *f) {
  fprintf(f,
          "usage: tissuetool learn [--db PATH] [--tissue stomach-patch] [--samples N]\n"
          "                        [--model method|rich|spread|spread2|spread2r]\n"
          "                        [--qs-refine-edge auto|METRES] [--patch-resolution N]\n"
          "\n"
          "Trains the learned shortcut of the quasi-static solve for a tissue and stores\n"
          "it: N training presses (default 8, 1..1000) of a tool into the tissue, each\n"
          "4 intervals of 1 mm, solved quasi-statically in a 15 mm region; theta by\n"
          "gradient descent (checked against the closed form); RMS and maximum error\n"
          "on 3 held-out presses. Prints one JSON object:\n"
          "  {\"id\",\"tissue\",\"material\",\"kind\",\"version\",\"theta\",\"loss\",\"samples\",\n"
          "   \"iterations\",\"rel_change\",\"closed_form_rel_diff\",\"heldout_rmse\",\n"
          "   \"heldout_max\",\"heldout_rel_rmse\",\"solve\",\"refine_edge\"} (metres; loss\n"
          "   in m^2; solve \"plain\" or \"refined\" with its refine_edge).\n"
          "--qs-refine-edge: as the daemon's, each press solved on its region copied and\n"
          "refined to edges of at most this length (auto, the default: the tissue's mean\n"
          "outer-surface edge; 0: on the tissue's own mesh; at most 0.1 m). Train with\n"
          "the setting of the daemon that will load the model: the samples and the\n"
          "held-out error are of that solve, the model records it, and a daemon whose\n"
          "sessions run another solve does not use it.\n"
          "--patch-resolution: the built-in patch's nodes along an edge of each sheet,\n"
          "as the daemon's option (default %d, the daemon's default; 3..512). The\n"
          "model's material identity depends on it: give the daemon's setting.\n"
          "Progress goes to stderr. Exit status: 0 stored, 1 failed, 2 usage error.\n",
          TS_DEFAULT_PATCH_RESOLUTION);
}

int ts_cmd_learn(int argc, char **argv, FILE *out, FILE *err) {
  const char *db = TS_TOOL_DEFAULT_DB, *tissue = LEARN_TISSUE, *samples = "8", *model = "method",
             *refine = "auto", *pres = NULL;
  const ts_tool_opt opts[] = {{"db", &db},
                              {"tissue", &tissue},
                              {"samples", &samples},
                              {"model", &model},
                              {"qs-refine-edge", &refine},
                              {"patch-resolution", &pres}};
  int npos = 0;
  int rc = ts_tool_parse(argc, argv, opts, 6, NULL, 0, &npos, err);
  if (rc == 1) {
    learn_help(out);
    return 0;
  }
  if (rc) return rc;
  uint32_t res = TS_DEFAULT_PATCH_RESOLUTION;
  if (pres && parse_resolution("learn", pres, &res, err)) return 2;
  char *end = NULL;
  long n = strtol(samples, &end, 10);
  if (!end || *end || n < 1 || n > 1000) {
    fprintf(err, "tissuetool learn: --samples must be a whole number from 1 to 1000\n");
    return 2;
  }
  ts_learn_kind kind;
  if (ts_learn_kind_parse(model, &kind)) {
    fprintf(err, "tissuetool learn: --model must be method, rich, spread, spread2 or spread2r\n");
    return 2;
  }
  double edge = -1; /* auto */
  if (strcmp(refine, "auto")) {
    end = NULL;
    edge = strtod(refine, &end);
    if (!end || end == refine || *end || !isfinite(edge) || edge < 0 || edge > 0.1) {
      fprintf(err, "tissuetool learn: --qs-refine-edge must be auto or a length in metres "
                   "from 0 to 0.1\n");
      return 2;
    }
  }
  learn_ctx c;
  if (ctx_open("learn", tissue, res, NULL, &c, err)) return 1; /* presses suit the patch only */
  ts_storage *st = NULL;
  ts_learner *l = NULL;
  double(*x)[3] = malloc(sizeof *x * c.t->n_nodes);
  int status = 1;
  uint32_t per_press = LEARN_STEPS * c.t->n_nodes;
  if (!x || ts_learner_create(c.q, LEARN_RANGE, per_press * (uint32_t)n, &l)) {
    fprintf(err, "tissuetool learn: out of memory\n");
    goto done;
  }
  l->f_ext = (const double(*)[3])c.t->f_ext; /* the tissue's loads, as the daemon's session */
  if (edge < 0) edge = ts_qsrefine_mean_edge(c.q, c.t); /* 0 without an outer surface */
  if (edge > 0 && (rc = ts_learner_set_refine(l, c.t, edge))) {
    fprintf(err, "tissuetool learn: refined solve: %s\n", ts_err_name(rc));
    goto done;
  }
  if (ts_tool_open_db("learn", db, 0, &st, err)) goto done;
  int64_t tid = tissue_id("learn", st, tissue, err);
  if (tid <= 0) goto done;
  for (long i = 0; i < n; i++) {
    double px, pz;
    press_point((uint32_t)i, (uint32_t)n, 0, &px, &pz);
    rc = press(l, c.t, x, px, pz, NULL);
    if (rc) {
      fprintf(err, "tissuetool learn: quasi-static solve: %s\n", ts_err_name(rc));
      goto done;
    }
    fprintf(err, "recording: press %ld/%ld, %u samples\n", i + 1, n, l->set->n);
  }
  ts_learn_train_opts o = ts_learn_train_defaults();
  o.progress = progress;
  o.progress_ud = err;
  ts_learn_model m, cf;
  rc = ts_learn_train_gd(l->set, kind, &o, &m);
  if (!rc) rc = ts_learn_train_closed(l->set, kind, &cf);
  if (rc) {
    fprintf(err, "tissuetool learn: training: %s\n", ts_err_name(rc));
    goto done;
  }
  double cfdiff = 0;
  for (uint32_t a = 0; a < m.n_params; a++)
    cfdiff = fmax(cfdiff, fabs(m.theta[a] - cf.theta[a]) / fmax(fabs(cf.theta[a]), 1e-300));
  ts_learner_set_model(l, &m);
  ts_learn_error e;
  memset(&e, 0, sizeof e);
  for (uint32_t i = 0; i < LEARN_HELD; i++) {
    double px, pz;
    press_point(i, LEARN_HELD, 0.5, &px, &pz);
    rc = press(l, c.t, x, px, pz, &e);
    if (rc) {
      fprintf(err, "tissuetool learn: held-out press: %s\n", ts_err_name(rc));
      goto done;
    }
  }
  double rmse = e.n ? sqrt(e.sum_err2 / e.n) : 0, drms = e.n ? sqrt(e.sum_disp2 / e.n) : 0;
  uint8_t blob[8 * TS_LEARN_MAX_PARAMS];
  size_t nb = ts_learn_theta_encode(&m, blob, sizeof blob);
  ts_model_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.tissue = tid;
  rec.material = c.material;
  rec.kind = ts_learn_kind_name(kind);
  rec.theta = blob;
  rec.theta_bytes = nb;
  rec.loss = m.loss;
  rec.samples = (int64_t)m.samples;
  rec.heldout_rmse = rmse;
  rec.heldout_max = e.max_err;
  ts_learn_solve sv = ts_learner_solve(l); /* the solve its samples came from */
  rec.solve = ts_learn_solve_name(sv.kind);
  rec.refine_edge = sv.kind == TS_LEARN_SOLVE_REFINED ? sv.refine_edge : 0;
  int64_t version = 0;
  int64_t id = ts_storage_put_model(st, &rec, &version);
  if (id <= 0) {
    fprintf(err, "tissuetool learn: storing the model: %s\n", ts_storage_errmsg(st));
    goto done;
  }
  fprintf(out, "{\"id\":%lld,\"tissue\":", (long long)id);
  ts_tool_json_string(out, tissue);
  fputs(",\"material\":", out);
  ts_tool_json_string(out, c.material);
  fprintf(out, ",\"kind\":\"%s\",\"version\":%lld,\"theta\":[", rec.kind, (long long)version);
  for (uint32_t a = 0; a < m.n_params; a++) {
    if (a) fputc(',', out);
    ts_tool_json_number(out, m.theta[a]);
  }
  fputs("],\"loss\":", out);
  ts_tool_json_number(out, m.loss);
  fprintf(out, ",\"samples\":%llu,\"iterations\":%llu,\"rel_change\":",
          (unsigned long long)m.samples, (unsigned long long)m.iterations);
  ts_tool_json_number(out, m.rel_change);
  fputs(",\"closed_form_rel_diff\":", out);
  ts_tool_json_number(out, cfdiff);
  fputs(",\"heldout_rmse\":", out);
  ts_tool_json_number(out, rmse);
  fputs(",\"heldout_max\":", out);
  ts_tool_json_number(out, e.max_err);
  fputs(",\"heldout_rel_rmse\":", out);
  ts_tool_json_number(out, drms > 0 ? rmse / drms : 0);
  fprintf(out, ",\"solve\":\"%s\",\"refine_edge\":", rec.solve);
  ts_tool_json_number(out, rec.refine_edge);
  fputs("}\n", out);
  status = 0;
done:
  ts_storage_close(st);
  ts_learner_destroy(l);
  free(x);
  ctx_close(&c);
  return status;
}

/* ---- models -------------------------------------------------------------- */

typedef struct list_ctx {
  ts_storage *st;
  FILE *out;
  int count;
} list_ctx;

static int tissue_name_of(ts_storage *st, int64_t id, char *buf, size_t cap);

static int print_model(void *ud, const ts_model_rec *m) {
  list_ctx *c = ud;
  char name[256];
  if (tissue_name_of(c->st, m->tissue, name, sizeof name)) snprintf(name, sizeof name, "?");
  cJSON *o = ts_model_doc_json(m, name);
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (!s) return TS_ENOMEM;
  fprintf(c->out, "%s%s", c->count++ ? ",\n" : "[\n", s);
  cJSON_free(s);
  return 0;
}

typedef struct name_ctx {
  int64_t id;
  char *buf;
  size_t cap;
  int found;
} name_ctx;

static int find_name(void *ud, const ts_tissue_rec *t) {
  name_ctx *c = ud;
  if (t->id != c->id) return 0;
  snprintf(c->buf, c->cap, "%s", t->name);
  c->found = 1;
  return 1;
}

static int tissue_name_of(ts_storage *st, int64_t id, char *buf, size_t cap) {
  name_ctx c = {id, buf, cap, 0};
  ts_storage_list_tissues(st, find_name, &c);
  return c.found ? 0 : -1;
}

static void models_help(FILE *f) {
  fprintf(f,
          "usage: tissuetool models [--db PATH] [--patch-resolution N]\n"
          "                         [list | export ID | import FILE | delete ID]\n"
          "\n"
          "--db PATH: the database (default %s); list, export and delete need it to\n"
          "exist, import makes it where it does not.\n"
          "\n"
          "  list         the stored learned models as a JSON array, one per line\n"
          "  export ID    model ID as one JSON object on stdout (format\n"
          "               \"" EXPORT_FORMAT "\": tissue, material, kind, version, theta, loss,\n"
          "               samples, heldout_rmse, heldout_max, solve, refine_edge,\n"
          "               created)\n"
          "  import FILE  stores an exported model (FILE '-': standard input) as a\n"
          "               new version; refused unless its tissue is known (the\n"
          "               built-in patch, or a mesh tissue\n"
          "               in the database, built as a daemon session of it is) and\n"
          "               its material is the tissue's own; a model stored already\n"
          "               (same tissue, material, kind, theta and solve) is not\n"
          "               stored again. Prints the stored model's id and version\n"
          "  delete ID    deletes model ID (prints nothing; exit status 1 when there\n"
          "               is no such model)\n"
          "\n"
          "--patch-resolution: the built-in patch import builds, as the daemon's option\n"
          "(default %d, the daemon's default; 3..512): give the daemon's setting.\n"
          "Exit status: 0 done, 1 failed, 2 usage error.\n",
          TS_TOOL_DEFAULT_DB, TS_DEFAULT_PATCH_RESOLUTION);
}

static int parse_id(const char *s, int64_t *id) {
  /* digits only: strtoll skips leading blanks and signs, and clamps a
   * number past its range to LLONG_MAX (ERANGE), which named another model */
  if (!s || !(*s >= '0' && *s <= '9')) return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno == ERANGE || !end || *end || v <= 0) return -1;
  *id = v;
  return 0;
}

/* The whole of path ('-': standard input, as tissuectl's import), at most
 * 16 MiB, NUL-terminated; NULL said on err. */
static char *read_file(const char *path, FILE *err) {
  const int std_in = !strcmp(path, "-");
  FILE *f = std_in ? stdin : fopen(path, "rb");
  if (std_in) path = "standard input";
  if (!f) {
    fprintf(err, "tissuetool models: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  struct stat sb; /* a directory opens, and read as no JSON */
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fprintf(err, "tissuetool models: %s is a directory, not a model file\n", path);
    if (!std_in) fclose(f);
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  errno = 0;
  while (b) {
    size_t r = fread(b + n, 1, cap - n - 1, f);
    n += r;
    if (n + 1 < cap) break;
    if (cap > (16u << 20)) {
      fprintf(err, "tissuetool models: %s is over 16 MiB\n", path);
      free(b);
      b = NULL;
      break;
    }
    char *nb = realloc(b, cap * 2);
    if (!nb) {
      free(b);
      b = NULL;
      break;
    }
    b = nb;
    cap *= 2;
  }
  if (b && ferror(f)) {
    fprintf(err, "tissuetool models: cannot read %s: %s\n", path, strerror(errno ? errno : EIO));
    free(b);
    b = NULL;
  }
  if (!std_in) fclose(f);
  if (b) b[n] = 0;
  return b;
}

static int import_model(ts_storage *st, const char *path, uint32_t res, FILE *out, FILE *err) {
  char *text = read_file(path, err);
  if (!text) return 1;
  ts_model_doc *d = malloc(sizeof *d);
  char why[256];
  int rc = d ? ts_model_doc_parse(text, d, why, sizeof why) : TS_ENOMEM;
  free(text);
  if (rc) {
    fprintf(err, "tissuetool models: %s: %s\n", strcmp(path, "-") ? path : "standard input",
            d ? why : "out of memory");
    free(d);
    return 1;
  }
  int status = 1;
  learn_ctx c;
  int have_ctx = 0;
  if (ctx_open("models", d->tissue, res, st, &c, err)) goto done;
  have_ctx = 1;
  if (strcmp(d->material, c.material) != 0) {
    fprintf(err, "tissuetool models: the model was trained for another material of %s:\n"
                 "  model:  %s\n  tissue: %s\n", d->tissue, d->material, c.material);
    goto done;
  }
  const char *kname = ts_learn_kind_name(d->kind);
  if (d->n_theta != ts_learn_n_params(d->kind, c.q->n_sheets)) {
    fprintf(err, "tissuetool models: a %s model of %s has %u parameters, the file gives %u\n",
            kname, d->tissue, ts_learn_n_params(d->kind, c.q->n_sheets), d->n_theta);
    goto done;
  }
  ts_learn_model m;
  memset(&m, 0, sizeof m);
  m.kind = d->kind;
  m.n_sheets = c.q->n_sheets;
  m.n_params = d->n_theta;
  memcpy(m.theta, d->theta, sizeof m.theta[0] * d->n_theta);
  uint8_t blob[8 * TS_LEARN_MAX_PARAMS];
  ts_model_rec rec;
  memset(&rec, 0, sizeof rec);
  int64_t tid = tissue_id("models", st, d->tissue, err);
  if (tid <= 0) goto done;
  /* a model stored already: nothing stored, its id and version printed
   * (the daemon's ImportModel rule, model_doc.h) */
  int64_t same = ts_model_doc_find_stored(st, tid, d);
  if (same < 0) {
    fprintf(err, "tissuetool models: listing models: %s\n", ts_storage_errmsg(st));
    goto done;
  }
  if (same > 0) {
    ts_model_rec old;
    if (ts_storage_get_model(st, same, &old)) {
      fprintf(err, "tissuetool models: reading model %lld: %s\n", (long long)same,
              ts_storage_errmsg(st));
      goto done;
    }
    fprintf(out, "{\"id\":%lld,\"version\":%lld}\n", (long long)same, (long long)old.version);
    fprintf(err, "tissuetool models: %s is model %lld (version %lld) stored already: nothing "
                 "stored\n", path, (long long)same, (long long)old.version);
    ts_storage_model_free(&old);
    status = 0;
    goto done;
  }
  rec.tissue = tid;
  rec.material = c.material;
  rec.kind = kname;
  rec.theta = blob;
  rec.theta_bytes = ts_learn_theta_encode(&m, blob, sizeof blob);
  rec.loss = d->loss;
  rec.heldout_rmse = d->heldout_rmse;
  rec.heldout_max = d->heldout_max;
  rec.samples = d->samples;
  /* the solve the document says it learned (as the daemon's import): stored
   * as "unknown" it would run on no session */
  rec.solve = ts_learn_solve_name(d->solve.kind);
  rec.refine_edge = d->solve.kind == TS_LEARN_SOLVE_REFINED ? d->solve.refine_edge : 0;
  int64_t version = 0, id = ts_storage_put_model(st, &rec, &version);
  if (id <= 0) {
    fprintf(err, "tissuetool models: storing the model: %s\n", ts_storage_errmsg(st));
    goto done;
  }
  fprintf(out, "{\"id\":%lld,\"version\":%lld}\n", (long long)id, (long long)version);
  status = 0;
done:
  if (have_ctx) ctx_close(&c);
  free(d);
  return status;
}

/* A failed model lookup or delete: "no model" only when storage says so
 * (TS_ENOMODEL); any other failure with storage's own message. */
static void model_error(FILE *err, ts_storage *st, int rc, int64_t id) {
  if (rc == TS_ENOMODEL)
    fprintf(err, "tissuetool models: no model %lld\n", (long long)id);
  else
    fprintf(err, "tissuetool models: model %lld: %s (%s)\n", (long long)id,
            ts_storage_errmsg(st), ts_strerror(rc));
}

int ts_cmd_models(int argc, char **argv, FILE *out, FILE *err) {
  const char *db = TS_TOOL_DEFAULT_DB, *pres = NULL;
  const ts_tool_opt opts[] = {{"db", &db}, {"patch-resolution", &pres}};
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  int rc = ts_tool_parse(argc, argv, opts, 2, pos, 2, &npos, err);
  if (rc == 1) {
    models_help(out);
    return 0;
  }
  if (rc) return rc;
  uint32_t res = TS_DEFAULT_PATCH_RESOLUTION;
  if (pres && parse_resolution("models", pres, &res, err)) return 2;
  const char *verb = npos ? pos[0] : "list";
  int needs_arg = strcmp(verb, "list") != 0;
  if ((strcmp(verb, "list") && strcmp(verb, "export") && strcmp(verb, "import") &&
       strcmp(verb, "delete")) ||
      (needs_arg && npos != 2) || (!needs_arg && npos > 1)) {
    fprintf(err, "tissuetool models: expected list, export ID, import FILE or delete ID "
                 "(see tissuetool models --help)\n");
    return 2;
  }
  int64_t id = 0;
  if ((!strcmp(verb, "export") || !strcmp(verb, "delete")) && parse_id(pos[1], &id)) {
    fprintf(err, "tissuetool models: '%s' is not a model id\n", pos[1]);
    return 2;
  }
  ts_storage *st = NULL;
  if (ts_tool_open_db("models", db, strcmp(verb, "import") != 0, &st, err)) return 1;
  int status = 1;
  if (!strcmp(verb, "list")) {
    list_ctx c = {st, out, 0};
    if (ts_storage_list_models(st, 0, print_model, &c))
      fprintf(err, "tissuetool models: %s\n", ts_storage_errmsg(st));
    else {
      fputs(c.count ? "\n]\n" : "[]\n", out);
      status = 0;
    }
  } else if (!strcmp(verb, "export")) {
    ts_model_rec m;
    int grc = ts_storage_get_model(st, id, &m);
    if (grc) {
      model_error(err, st, grc, id);
    } else {
      char name[256];
      if (tissue_name_of(st, m.tissue, name, sizeof name)) snprintf(name, sizeof name, "?");
      cJSON *o = ts_model_doc_json(&m, name);
      char *s = o ? cJSON_Print(o) : NULL;
      if (s) {
        fprintf(out, "%s\n", s);
        status = 0;
      }
      cJSON_free(s);
      cJSON_Delete(o);
      ts_storage_model_free(&m);
    }
  } else if (!strcmp(verb, "import")) {
    status = import_model(st, pos[1], res, out, err);
  } else {
    int drc = ts_storage_delete_model(st, id);
    if (drc)
      model_error(err, st, drc, id);
    else
      status = 0;
  }
  ts_storage_close(st);
  return status;
}
