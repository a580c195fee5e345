/*
 * ts_storage_records.c: the record functions of ts_storage.h (tissues,
 * material fits, learned models). Inputs are validated before SQLite sees
 * them, every write runs in one IMMEDIATE transaction, and queries use bound
 * parameters only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_storage_int.h"

#define TISSUE_COLS "id, name, kind, mesh_hash, layer_spec, created"
#define FIT_COLS "id, tissue, layer, direction, name, a, b, rmse, r2, samples, created"
#define MODEL_COLS                                                                     \
  "id, tissue, material, kind, version, theta, loss, samples, heldout_rmse, heldout_max, " \
  "created, solve, refine_edge"

const char *const ts__stmt_sql[TS__ST_COUNT] = {
    [TS__ST_TISSUE_UPSERT] =
        "INSERT INTO tissues (name, kind, mesh_hash, layer_spec) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, "
        "mesh_hash = excluded.mesh_hash, layer_spec = excluded.layer_spec",
    [TS__ST_TISSUE_ID] = "SELECT id FROM tissues WHERE name = ?1",
    [TS__ST_TISSUE_GET] = "SELECT " TISSUE_COLS " FROM tissues WHERE name = ?1",
    [TS__ST_TISSUE_EXISTS] = "SELECT 1 FROM tissues WHERE id = ?1",
    [TS__ST_FIT_UPSERT] =
        "INSERT INTO material_fits (tissue, layer, direction, name, a, b, rmse, r2, samples) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
        "ON CONFLICT (tissue, layer, direction, name) DO UPDATE SET a = excluded.a, "
        "b = excluded.b, rmse = excluded.rmse, r2 = excluded.r2, samples = excluded.samples",
    [TS__ST_FIT_ID] = "SELECT id FROM material_fits WHERE tissue = ?1 AND layer = ?2 AND "
                      "direction = ?3 AND name = ?4",
    [TS__ST_MODEL_NEXT_VERSION] =
        "SELECT COALESCE(MAX(version), 0) + 1 FROM learned_models "
        "WHERE tissue = ?1 AND material = ?2 AND kind = ?3",
    [TS__ST_MODEL_INSERT] =
        "INSERT INTO learned_models (tissue, material, kind, version, theta, loss, samples, "
        "heldout_rmse, heldout_max, solve, refine_edge) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [TS__ST_MODEL_GET] = "SELECT " MODEL_COLS " FROM learned_models WHERE id = ?1",
    [TS__ST_MODEL_LATEST] = "SELECT " MODEL_COLS " FROM learned_models WHERE tissue = ?1 "
                            "AND material = ?2 AND kind = ?3 ORDER BY version DESC LIMIT 1",
    [TS__ST_MODEL_DELETE] = "DELETE FROM learned_models WHERE id = ?1",
    /* the newest of a kind that may run on a solve: of that solve (refined:
     * the same edge within 1e-9 relative) or of an unknown one */
    [TS__ST_MODEL_LATEST_SOLVE] =
        "SELECT " MODEL_COLS " FROM learned_models WHERE tissue = ?1 AND material = ?2 "
        "AND kind = ?3 AND solve = ?4 AND (?4 = 'plain' OR "
        "abs(refine_edge - ?5) <= 1e-9 * max(refine_edge, ?5)) "
        "ORDER BY version DESC LIMIT 1",
};

/* ---- validation and copying ---------------------------------------------- */

static int need_text(ts_storage *s, const char *what, const char *v) {
  if (!v || !*v) return ts__fail(s, TS_EINVAL, "%s must not be empty", what);
  return 0;
}

static int need_finite(ts_storage *s, const char *what, double v) {
  if (!isfinite(v)) return ts__fail(s, TS_ENAN, "%s is NaN or infinite", what);
  return 0;
}

static const char *col_text(sqlite3_stmt *st, int i) {
  const char *t = (const char *)sqlite3_column_text(st, i);
  return t ? t : "";
}

/* One piece of a record to copy into its owned block. */
typedef struct span {
  const void *src;
  size_t len;
  const void **dst;
  int text; /* add a terminating NUL */
} span;

/* Copies the spans into one allocation held in *mem and points the record's
 * fields at the copies. */
static int own(ts_storage *s, void **mem, span *sp, int n) {
  size_t total = 1;
  for (int i = 0; i < n; i++) total += sp[i].len + (sp[i].text ? 1 : 0);
  char *m = malloc(total);
  if (!m) return ts__fail(s, TS_ENOMEM, "out of memory copying a record");
  size_t o = 0;
  for (int i = 0; i < n; i++) {
    if (sp[i].len) memcpy(m + o, sp[i].src, sp[i].len);
    *sp[i].dst = m + o;
    o += sp[i].len;
    if (sp[i].text) m[o++] = '\0';
  }
  *mem = m;
  return 0;
}

static span text_span(sqlite3_stmt *st, int col, const char **dst) {
  span sp = {col_text(st, col), (size_t)sqlite3_column_bytes(st, col), (const void **)dst, 1};
  return sp;
}

/* Does tissue id exist? 1, 0, or a negative ts_errno. */
static int tissue_exists(ts_storage *s, int64_t id) {
  sqlite3_stmt *st = ts__stmt(s, TS__ST_TISSUE_EXISTS);
  if (!st) return TS_ESTORAGE;
  sqlite3_bind_int64(st, 1, id);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 1;
  if (rc == SQLITE_DONE) return 0;
  return ts__sqlfail(s, "looking up a tissue");
}

/* Steps a write; maps constraint failures to TS_EINVAL with a message. */
static int step_write(ts_storage *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return 0;
  int ext = sqlite3_extended_errcode(s->db);
  if (ext == SQLITE_CONSTRAINT_FOREIGNKEY)
    return ts__fail(s, TS_ENOTISSUE, "%s: the tissue does not exist", what);
  if ((ext & 0xff) == SQLITE_CONSTRAINT)
    return ts__fail(s, TS_EINVAL, "%s: %s", what, sqlite3_errmsg(s->db));
  return ts__sqlfail(s, what);
}

/* Reads the single integer of a one-row query. */
static int step_int64(ts_storage *s, sqlite3_stmt *st, const char *what, int64_t *out) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    return 0;
  }
  if (rc == SQLITE_DONE) return ts__fail(s, TS_EINTERNAL, "%s: no row", what);
  return ts__sqlfail(s, what);
}

/* ---- tissues -------------------------------------------------------------- */

static int valid_tissue(ts_storage *s, const ts_tissue_rec *t) {
  if (!t) return ts__fail(s, TS_EINVAL, "no tissue given");
  int rc = need_text(s, "tissue name", t->name);
  if (rc) return rc;
  if (!t->kind || (strcmp(t->kind, "builtin") != 0 && strcmp(t->kind, "mesh") != 0))
    return ts__fail(s, TS_EINVAL, "tissue kind must be \"builtin\" or \"mesh\", not \"%s\"",
                    t->kind ? t->kind : "(null)");
  return 0;
}

int64_t ts_storage_put_tissue(ts_storage *s, const ts_tissue_rec *t) {
  int rc = valid_tissue(s, t);
  if (rc) return rc;
  if ((rc = ts__begin(s))) return rc;
  sqlite3_stmt *st = ts__stmt(s, TS__ST_TISSUE_UPSERT);
  int64_t id = 0;
  if (!st) {
    rc = TS_ESTORAGE;
  } else {
    sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, t->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, t->mesh_hash ? t->mesh_hash : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, t->layer_spec ? t->layer_spec : "", -1, SQLITE_STATIC);
    rc = step_write(s, st, "storing a tissue");
    sqlite3_reset(st);
  }
  if (!rc) {
    st = ts__stmt(s, TS__ST_TISSUE_ID);
    if (!st) {
      rc = TS_ESTORAGE;
    } else {
      sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
      rc = step_int64(s, st, "reading a tissue id", &id);
      sqlite3_reset(st);
    }
  }
  if (rc || (rc = ts__commit(s))) {
    ts__rollback(s);
    return rc;
  }
  s->err[0] = '\0';
  return id;
}

static void tissue_from_row(sqlite3_stmt *st, ts_tissue_rec *t) {
  t->id = sqlite3_column_int64(st, 0);
  t->name = col_text(st, 1);
  t->kind = col_text(st, 2);
  t->mesh_hash = col_text(st, 3);
  t->layer_spec = col_text(st, 4);
  t->created = sqlite3_column_int64(st, 5);
  t->mem_ = NULL;
}

int ts_storage_get_tissue(ts_storage *s, const char *name, ts_tissue_rec *out) {
  memset(out, 0, sizeof *out);
  int rc = need_text(s, "tissue name", name);
  if (rc) return rc;
  sqlite3_stmt *st = ts__stmt(s, TS__ST_TISSUE_GET);
  if (!st) return TS_ESTORAGE;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    ts_tissue_rec t;
    tissue_from_row(st, &t);
    *out = t;
    span sp[] = {text_span(st, 1, &out->name), text_span(st, 2, &out->kind),
                 text_span(st, 3, &out->mesh_hash), text_span(st, 4, &out->layer_spec)};
    rc = own(s, &out->mem_, sp, 4);
    if (rc) memset(out, 0, sizeof *out);
  } else if (step == SQLITE_DONE) {
    rc = ts__fail(s, TS_ENOTISSUE, "no tissue named \"%s\"", name);
  } else {
    rc = ts__sqlfail(s, "reading a tissue");
  }
  sqlite3_reset(st);
  if (!rc) s->err[0] = '\0';
  return rc;
}

void ts_storage_tissue_free(ts_tissue_rec *t) {
  if (!t) return;
  free(t->mem_);
  memset(t, 0, sizeof *t);
}

/* Runs a list query: prepares sql, binds ?1 = key (when has_key), and calls
 * row() for every row until it returns non-zero. */
typedef void (*any_fn)(void);
typedef int (*row_fn)(sqlite3_stmt *st, any_fn cb, void *ud);

static int list_query(ts_storage *s, const char *sql, int has_key, int64_t key, row_fn row,
                      any_fn cb, void *ud, const char *what) {
  if (!cb) return ts__fail(s, TS_EINVAL, "%s: no callback given", what);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return ts__sqlfail(s, what);
  if (has_key) sqlite3_bind_int64(st, 1, key);
  int rc = 0, step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = row(st, cb, ud))) break;
  }
  if (!rc && step != SQLITE_DONE) rc = ts__sqlfail(s, what);
  sqlite3_finalize(st);
  if (!rc) s->err[0] = '\0';
  return rc;
}

static int tissue_row(sqlite3_stmt *st, any_fn cb, void *ud) {
  ts_tissue_rec t;
  tissue_from_row(st, &t);
  return ((ts_storage_tissue_cb)cb)(ud, &t);
}

int ts_storage_list_tissues(ts_storage *s, ts_storage_tissue_cb cb, void *ud) {
  return list_query(s, "SELECT " TISSUE_COLS " FROM tissues ORDER BY id", 0, 0, tissue_row,
                    (any_fn)cb, ud, "listing tissues");
}

/* ---- material fits -------------------------------------------------------- */

static int valid_fit(ts_storage *s, const ts_fit_rec *f) {
  if (!f) return ts__fail(s, TS_EINVAL, "no fit given");
  int rc;
  if ((rc = need_text(s, "fit layer", f->layer)) ||
      (rc = need_text(s, "fit direction", f->direction)) ||
      (rc = need_text(s, "fit name", f->name)) || (rc = need_finite(s, "fit a", f->a)) ||
      (rc = need_finite(s, "fit b", f->b)) || (rc = need_finite(s, "fit rmse", f->rmse)) ||
      (rc = need_finite(s, "fit r2", f->r2)))
    return rc;
  if (f->samples < 0) return ts__fail(s, TS_EINVAL, "fit samples must be >= 0");
  if (f->tissue <= 0) return ts__fail(s, TS_ENOTISSUE, "fit tissue id %lld does not exist",
                                      (long long)f->tissue);
  return 0;
}

int64_t ts_storage_put_fit(ts_storage *s, const ts_fit_rec *f) {
  int rc = valid_fit(s, f);
  if (rc) return rc;
  if ((rc = ts__begin(s))) return rc;
  int64_t id = 0;
  int ex = tissue_exists(s, f->tissue);
  if (ex < 0) {
    rc = ex;
  } else if (ex == 0) {
    rc = ts__fail(s, TS_ENOTISSUE, "fit tissue id %lld does not exist", (long long)f->tissue);
  } else {
    sqlite3_stmt *st = ts__stmt(s, TS__ST_FIT_UPSERT);
    if (!st) {
      rc = TS_ESTORAGE;
    } else {
      sqlite3_bind_int64(st, 1, f->tissue);
      sqlite3_bind_text(st, 2, f->layer, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 3, f->direction, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 4, f->name, -1, SQLITE_STATIC);
      sqlite3_bind_double(st, 5, f->a);
      sqlite3_bind_double(st, 6, f->b);
      sqlite3_bind_double(st, 7, f->rmse);
      sqlite3_bind_double(st, 8, f->r2);
      sqlite3_bind_int64(st, 9, f->samples);
      rc = step_write(s, st, "storing a material fit");
      sqlite3_reset(st);
    }
    if (!rc) {
      st = ts__stmt(s, TS__ST_FIT_ID);
      if (!st) {
        rc = TS_ESTORAGE;
      } else {
        sqlite3_bind_int64(st, 1, f->tissue);
        sqlite3_bind_text(st, 2, f->layer, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, f->direction, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, f->name, -1, SQLITE_STATIC);
        rc = step_int64(s, st, "reading a fit id", &id);
        sqlite3_reset(st);
      }
    }
  }
  if (rc || (rc = ts__commit(s))) {
    ts__rollback(s);
    return rc;
  }
  s->err[0] = '\0';
  return id;
}

static int fit_row(sqlite3_stmt *st, any_fn cb, void *ud) {
  ts_fit_rec f;
  f.id = sqlite3_column_int64(st, 0);
  f.tissue = sqlite3_column_int64(st, 1);
  f.layer = col_text(st, 2);
  f.direction = col_text(st, 3);
  f.name = col_text(st, 4);
  f.a = sqlite3_column_double(st, 5);
  f.b = sqlite3_column_double(st, 6);
  f.rmse = sqlite3_column_double(st, 7);
  f.r2 = sqlite3_column_double(st, 8);
  f.samples = sqlite3_column_int64(st, 9);
  f.created = sqlite3_column_int64(st, 10);
  f.mem_ = NULL;
  return ((ts_storage_fit_cb)cb)(ud, &f);
}

int ts_storage_list_fits(ts_storage *s, int64_t tissue, ts_storage_fit_cb cb, void *ud) {
  if (tissue < 0) return ts__fail(s, TS_EINVAL, "tissue id must be >= 0");
  return list_query(s,
                    "SELECT " FIT_COLS " FROM material_fits WHERE ?1 = 0 OR tissue = ?1 "
                    "ORDER BY id",
                    1, tissue, fit_row, (any_fn)cb, ud, "listing material fits");
}

/* ---- learned models -------------------------------------------------------- */

/* "unknown" (or NULL) and "plain" with edge 0, "refined" with a finite
 * edge > 0 (the schema's CHECK says the same). */
static int valid_solve(ts_storage *s, const char *solve, double edge) {
  const char *v = solve ? solve : "unknown";
  if (strcmp(v, "refined") == 0) {
    if (!(edge > 0) || !isfinite(edge))
      return ts__fail(s, TS_EINVAL, "a refined solve needs a finite refine edge > 0");
    return 0;
  }
  if (strcmp(v, "plain") != 0 && strcmp(v, "unknown") != 0)
    return ts__fail(s, TS_EINVAL, "model solve must be \"plain\", \"refined\" or \"unknown\"");
  if (edge != 0) return ts__fail(s, TS_EINVAL, "a %s solve has no refine edge", v);
  return 0;
}

static int valid_model(ts_storage *s, const ts_model_rec *m) {
  if (!m) return ts__fail(s, TS_EINVAL, "no model given");
  int rc;
  if ((rc = need_text(s, "model kind", m->kind)) ||
      (rc = need_finite(s, "model loss", m->loss)) ||
      (rc = need_finite(s, "model heldout_rmse", m->heldout_rmse)) ||
      (rc = need_finite(s, "model heldout_max", m->heldout_max)))
    return rc;
  if (!m->material) return ts__fail(s, TS_EINVAL, "model material must not be NULL");
  if (!m->theta || m->theta_bytes == 0)
    return ts__fail(s, TS_EINVAL, "model theta must not be empty");
  if (m->theta_bytes > (size_t)1 << 30)
    return ts__fail(s, TS_ETOOBIG, "model theta of %zu bytes is over the 1 GiB limit",
                    m->theta_bytes);
  if (m->samples < 0) return ts__fail(s, TS_EINVAL, "model samples must be >= 0");
  if (m->version < 0) return ts__fail(s, TS_EINVAL, "model version must be >= 0");
  if (m->tissue <= 0) return ts__fail(s, TS_ENOTISSUE, "model tissue id %lld does not exist",
                                      (long long)m->tissue);
  return valid_solve(s, m->solve, m->refine_edge);
}

int64_t ts_storage_put_model(ts_storage *s, const ts_model_rec *m, int64_t *version_out) {
  int rc = valid_model(s, m);
  if (rc) return rc;
  if ((rc = ts__begin(s))) return rc;
  int64_t version = m->version;
  int ex = tissue_exists(s, m->tissue);
  if (ex < 0) {
    rc = ex;
  } else if (ex == 0) {
    rc = ts__fail(s, TS_ENOTISSUE, "model tissue id %lld does not exist", (long long)m->tissue);
  } else if (version == 0) {
    sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_NEXT_VERSION);
    if (!st) {
      rc = TS_ESTORAGE;
    } else {
      sqlite3_bind_int64(st, 1, m->tissue);
      sqlite3_bind_text(st, 2, m->material, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 3, m->kind, -1, SQLITE_STATIC);
      rc = step_int64(s, st, "choosing a model version", &version);
      sqlite3_reset(st);
    }
  }
  if (!rc) {
    sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_INSERT);
    if (!st) {
      rc = TS_ESTORAGE;
    } else {
      sqlite3_bind_int64(st, 1, m->tissue);
      sqlite3_bind_text(st, 2, m->material, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 3, m->kind, -1, SQLITE_STATIC);
      sqlite3_bind_int64(st, 4, version);
      sqlite3_bind_blob64(st, 5, m->theta, (sqlite3_uint64)m->theta_bytes, SQLITE_STATIC);
      sqlite3_bind_double(st, 6, m->loss);
      sqlite3_bind_int64(st, 7, m->samples);
      sqlite3_bind_double(st, 8, m->heldout_rmse);
      sqlite3_bind_double(st, 9, m->heldout_max);
      sqlite3_bind_text(st, 10, m->solve ? m->solve : "unknown", -1, SQLITE_STATIC);
      sqlite3_bind_double(st, 11, m->refine_edge);
      rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
      if (rc) {
        int ext = sqlite3_extended_errcode(s->db);
        if (ext == SQLITE_CONSTRAINT_UNIQUE)
          rc = ts__fail(s, TS_EINVAL,
                        "model version %lld of (tissue %lld, \"%s\", \"%s\") exists already",
                        (long long)version, (long long)m->tissue, m->material, m->kind);
        else if (ext == SQLITE_CONSTRAINT_FOREIGNKEY)
          rc = ts__fail(s, TS_ENOTISSUE, "storing a model: the tissue does not exist");
        else if ((ext & 0xff) == SQLITE_CONSTRAINT)
          rc = ts__fail(s, TS_EINVAL, "storing a model: %s", sqlite3_errmsg(s->db));
        else
          rc = ts__sqlfail(s, "storing a model");
      }
      sqlite3_reset(st);
    }
  }
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (rc || (rc = ts__commit(s))) {
    ts__rollback(s);
    return rc;
  }
  if (version_out) *version_out = version;
  s->err[0] = '\0';
  return id;
}

static void model_from_row(sqlite3_stmt *st, ts_model_rec *m) {
  m->id = sqlite3_column_int64(st, 0);
  m->tissue = sqlite3_column_int64(st, 1);
  m->material = col_text(st, 2);
  m->kind = col_text(st, 3);
  m->version = sqlite3_column_int64(st, 4);
  m->theta = sqlite3_column_blob(st, 5);
  m->theta_bytes = (size_t)sqlite3_column_bytes(st, 5);
  m->loss = sqlite3_column_double(st, 6);
  m->samples = sqlite3_column_int64(st, 7);
  m->heldout_rmse = sqlite3_column_double(st, 8);
  m->heldout_max = sqlite3_column_double(st, 9);
  m->created = sqlite3_column_int64(st, 10);
  m->solve = col_text(st, 11);
  m->refine_edge = sqlite3_column_double(st, 12);
  m->mem_ = NULL;
}

/* Steps a one-model query and copies the row into *out. */
static int model_out(ts_storage *s, sqlite3_stmt *st, ts_model_rec *out, const char *missing) {
  int step = sqlite3_step(st);
  int rc;
  if (step == SQLITE_ROW) {
    model_from_row(st, out);
    span sp[] = {text_span(st, 2, &out->material), text_span(st, 3, &out->kind),
                 {out->theta, out->theta_bytes, (const void **)&out->theta, 0},
                 text_span(st, 11, &out->solve)};
    rc = own(s, &out->mem_, sp, 4);
    if (rc) memset(out, 0, sizeof *out);
  } else if (step == SQLITE_DONE) {
    rc = ts__fail(s, TS_ENOMODEL, "%s", missing);
  } else {
    rc = ts__sqlfail(s, "reading a model");
  }
  sqlite3_reset(st);
  if (!rc) s->err[0] = '\0';
  return rc;
}

int ts_storage_get_model(ts_storage *s, int64_t id, ts_model_rec *out) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_GET);
  if (!st) return TS_ESTORAGE;
  sqlite3_bind_int64(st, 1, id);
  char missing[64];
  snprintf(missing, sizeof missing, "no model with id %lld", (long long)id);
  return model_out(s, st, out, missing);
}

int ts_storage_get_latest_model(ts_storage *s, int64_t tissue, const char *material,
                                const char *kind, ts_model_rec *out) {
  memset(out, 0, sizeof *out);
  if (!material) return ts__fail(s, TS_EINVAL, "model material must not be NULL");
  int rc = need_text(s, "model kind", kind);
  if (rc) return rc;
  sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_LATEST);
  if (!st) return TS_ESTORAGE;
  sqlite3_bind_int64(st, 1, tissue);
  sqlite3_bind_text(st, 2, material, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
  return model_out(s, st, out, "no model for that tissue, material and kind");
}

int ts_storage_get_latest_model_solve(ts_storage *s, int64_t tissue, const char *material,
                                      const char *kind, const char *solve, double refine_edge,
                                      ts_model_rec *out) {
  memset(out, 0, sizeof *out);
  if (!material) return ts__fail(s, TS_EINVAL, "model material must not be NULL");
  int rc = need_text(s, "model kind", kind);
  if (!rc) rc = valid_solve(s, solve, refine_edge);
  if (rc) return rc;
  if (strcmp(solve ? solve : "unknown", "unknown") == 0)
    return ts_storage_get_latest_model(s, tissue, material, kind, out);
  sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_LATEST_SOLVE);
  if (!st) return TS_ESTORAGE;
  sqlite3_bind_int64(st, 1, tissue);
  sqlite3_bind_text(st, 2, material, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, solve, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 5, refine_edge);
  return model_out(s, st, out, "no model for that tissue, material, kind and solve");
}

void ts_storage_model_free(ts_model_rec *m) {
  if (!m) return;
  free(m->mem_);
  memset(m, 0, sizeof *m);
}

static int model_row(sqlite3_stmt *st, any_fn cb, void *ud) {
  ts_model_rec m;
  model_from_row(st, &m);
  return ((ts_storage_model_cb)cb)(ud, &m);
}

int ts_storage_list_models(ts_storage *s, int64_t tissue, ts_storage_model_cb cb, void *ud) {
  if (tissue < 0) return ts__fail(s, TS_EINVAL, "tissue id must be >= 0");
  return list_query(s,
                    "SELECT " MODEL_COLS " FROM learned_models WHERE ?1 = 0 OR tissue = ?1 "
                    "ORDER BY id",
                    1, tissue, model_row, (any_fn)cb, ud, "listing models");
}

int ts_storage_delete_model(ts_storage *s, int64_t id) {
  int rc = ts__begin(s);
  if (rc) return rc;
  sqlite3_stmt *st = ts__stmt(s, TS__ST_MODEL_DELETE);
  if (!st) {
    rc = TS_ESTORAGE;
  } else {
    sqlite3_bind_int64(st, 1, id);
    rc = step_write(s, st, "deleting a model");
    sqlite3_reset(st);
    if (!rc && sqlite3_changes(s->db) == 0)
      rc = ts__fail(s, TS_ENOMODEL, "no model with id %lld", (long long)id);
  }
  if (rc || (rc = ts__commit(s))) {
    ts__rollback(s);
    return rc;
  }
  s->err[0] = '\0';
  return 0;
}
