/*
 * ts_storage_mesh.c: uploaded mesh files, stored once by content (the
 * SHA-256 of their bytes, content-addressed storage), and the tissues of
 * kind "mesh" built from them, and their deletion (see ts_storage.h). Writes run in one IMMEDIATE
 * transaction with bound parameters only; these calls are rare (one per
 * upload or rebuild), so their statements are prepared per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_storage_int.h"

static int valid_hash(const char *h) {
  if (!h || strlen(h) != 64) return 0;
  for (int i = 0; i < 64; i++)
    if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return 0;
  return 1;
}

static int valid_mesh(ts_storage *s, const ts_mesh_rec *m) {
  if (!m) return ts__fail(s, TS_EINVAL, "no mesh given");
  if (!valid_hash(m->hash))
    return ts__fail(s, TS_EINVAL, "mesh hash must be 64 lowercase hex digits (SHA-256)");
  if (!m->format || (strcmp(m->format, "obj") && strcmp(m->format, "stl") &&
                     strcmp(m->format, "ply")))
    return ts__fail(s, TS_EINVAL, "mesh format must be obj, stl or ply, not \"%s\"",
                    m->format ? m->format : "(null)");
  if (!m->bytes || !m->n_bytes) return ts__fail(s, TS_EINVAL, "mesh has no bytes");
  if (m->n_bytes > 0x7fffffff) return ts__fail(s, TS_ETOOBIG, "mesh over 2 GiB");
  if (m->vertex_count < 0 || m->triangle_count < 0)
    return ts__fail(s, TS_EINVAL, "mesh counts must be >= 0");
  return 0;
}

static int prepare(ts_storage *s, const char *sql, sqlite3_stmt **st, const char *what) {
  if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) {
    *st = NULL;
    return ts__sqlfail(s, what);
  }
  return 0;
}

/* The insert itself, inside the caller's transaction: 1 inserted, 0 present. */
static int insert_mesh(ts_storage *s, const ts_mesh_rec *m) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO meshes (hash, format, bytes, vertex_count, triangle_count) "
                   "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (hash) DO NOTHING",
                   &st, "storing a mesh");
  if (rc) return rc;
  sqlite3_bind_text(st, 1, m->hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, m->format, -1, SQLITE_STATIC);
  sqlite3_bind_blob(st, 3, m->bytes, (int)m->n_bytes, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, m->vertex_count);
  sqlite3_bind_int64(st, 5, m->triangle_count);
  int step = sqlite3_step(st);
  rc = step == SQLITE_DONE ? (sqlite3_changes(s->db) > 0) : ts__sqlfail(s, "storing a mesh");
  sqlite3_finalize(st);
  return rc;
}

int ts_storage_put_mesh(ts_storage *s, const ts_mesh_rec *m) {
  int rc = valid_mesh(s, m);
  if (rc) return rc;
  if ((rc = ts__begin(s))) return rc;
  int ins = insert_mesh(s, m);
  if (ins < 0 || (rc = ts__commit(s))) {
    ts__rollback(s);
    return ins < 0 ? ins : rc;
  }
  s->err[0] = '\0';
  return ins;
}

int ts_storage_get_mesh(ts_storage *s, const char *hash, ts_mesh_rec *out) {
  memset(out, 0, sizeof *out);
  if (!valid_hash(hash))
    return ts__fail(s, TS_EINVAL, "mesh hash must be 64 lowercase hex digits (SHA-256)");
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "SELECT hash, format, bytes, vertex_count, triangle_count, created "
                   "FROM meshes WHERE hash = ?1",
                   &st, "reading a mesh");
  if (rc) return rc;
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    const char *fmt = (const char *)sqlite3_column_text(st, 1);
    size_t fl = fmt ? strlen(fmt) : 0;
    const void *blob = sqlite3_column_blob(st, 2);
    size_t n = (size_t)sqlite3_column_bytes(st, 2);
    /* one block: hash, NUL, format, NUL, bytes */
    char *mem = malloc(65 + fl + 1 + n);
    if (!mem) {
      rc = ts__fail(s, TS_ENOMEM, "out of memory reading a mesh of %zu bytes", n);
    } else {
      memcpy(mem, hash, 65);
      memcpy(mem + 65, fmt ? fmt : "", fl + 1);
      if (n) memcpy(mem + 66 + fl, blob, n);
      out->hash = mem;
      out->format = mem + 65;
      out->bytes = (const uint8_t *)(mem + 66 + fl);
      out->n_bytes = n;
      out->vertex_count = sqlite3_column_int64(st, 3);
      out->triangle_count = sqlite3_column_int64(st, 4);
      out->created = sqlite3_column_int64(st, 5);
      out->mem_ = mem;
    }
  } else if (step == SQLITE_DONE) {
    rc = ts__fail(s, TS_ENOTISSUE, "no stored mesh with hash %.16s...", hash);
  } else {
    rc = ts__sqlfail(s, "reading a mesh");
  }
  sqlite3_finalize(st);
  if (!rc) s->err[0] = '\0';
  return rc;
}

void ts_storage_mesh_free(ts_mesh_rec *m) {
  if (!m) return;
  free(m->mem_);
  memset(m, 0, sizeof *m);
}

int64_t ts_storage_count_meshes(ts_storage *s) {
  sqlite3_stmt *st;
  int rc = prepare(s, "SELECT count(*) FROM meshes", &st, "counting meshes");
  if (rc) return rc;
  int64_t n = 0;
  if (sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  else
    n = ts__sqlfail(s, "counting meshes");
  sqlite3_finalize(st);
  if (n >= 0) s->err[0] = '\0';
  return n;
}

/* The kind of the tissue called name: 1 "mesh", 2 another kind, 0 none, or
 * an error. */
static int tissue_kind(ts_storage *s, const char *name) {
  sqlite3_stmt *st;
  int rc = prepare(s, "SELECT kind FROM tissues WHERE name = ?1", &st, "looking up a tissue");
  if (rc) return rc;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(st, 0);
    rc = k && strcmp(k, "mesh") == 0 ? 1 : 2;
  } else if (step == SQLITE_DONE) {
    rc = 0;
  } else {
    rc = ts__sqlfail(s, "looking up a tissue");
  }
  sqlite3_finalize(st);
  return rc;
}

static int64_t upsert_mesh_tissue(ts_storage *s, const char *name, const char *hash,
                                  const char *spec) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO tissues (name, kind, mesh_hash, layer_spec) "
                   "VALUES (?1, 'mesh', ?2, ?3) ON CONFLICT (name) DO UPDATE SET "
                   "mesh_hash = excluded.mesh_hash, layer_spec = excluded.layer_spec "
                   "WHERE kind = 'mesh' RETURNING id",
                   &st, "storing a tissue");
  if (rc) return rc;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, spec, -1, SQLITE_STATIC);
  int64_t id;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    id = sqlite3_column_int64(st, 0);
    step = sqlite3_step(st);
  } else {
    id = ts__fail(s, TS_EINTERNAL, "storing a tissue: no id returned");
  }
  if (id > 0 && step != SQLITE_DONE) id = ts__sqlfail(s, "storing a tissue");
  sqlite3_finalize(st);
  return id;
}

int64_t ts_storage_put_mesh_tissue(ts_storage *s, const ts_mesh_rec *m, const char *name,
                                   const char *layer_spec, int *mesh_inserted) {
  int rc = valid_mesh(s, m);
  if (rc) return rc;
  if (!name || !*name) return ts__fail(s, TS_EINVAL, "tissue name must not be empty");
  if ((rc = ts__begin(s))) return rc;
  int64_t id = 0;
  int ins = 0;
  int kind = tissue_kind(s, name);
  if (kind < 0) {
    id = kind;
  } else if (kind == 2) {
    id = ts__fail(s, TS_EINVAL, "the name \"%s\" belongs to a built-in tissue; choose another",
                  name);
  } else if ((ins = insert_mesh(s, m)) < 0) {
    id = ins;
  } else {
    id = upsert_mesh_tissue(s, name, m->hash, layer_spec ? layer_spec : "");
  }
  if (id < 0 || (rc = ts__commit(s))) {
    ts__rollback(s);
    return id < 0 ? id : rc;
  }
  if (mesh_inserted) *mesh_inserted = ins;
  s->err[0] = '\0';
  return id;
}

/* count(*) of a one-parameter query over an integer id, or an error. */
static int64_t count_of(ts_storage *s, const char *sql, int64_t id, const char *what) {
  sqlite3_stmt *st;
  int rc = prepare(s, sql, &st, what);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, id);
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : ts__sqlfail(s, what);
  sqlite3_finalize(st);
  return n;
}

/* Runs a write (with an integer parameter ?1 if it has one); its changes
 * or an error. */
static int64_t write_one(ts_storage *s, const char *sql, int64_t id, const char *what) {
  sqlite3_stmt *st;
  int rc = prepare(s, sql, &st, what);
  if (rc) return rc;
  if (sqlite3_bind_parameter_count(st) > 0) sqlite3_bind_int64(st, 1, id);
  int64_t n = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(s->db) : ts__sqlfail(s, what);
  sqlite3_finalize(st);
  return n;
}

/* The id of the tissue `name` and whether it is a mesh tissue: 0 none. */
static int64_t tissue_id(ts_storage *s, const char *name, int *is_mesh) {
  sqlite3_stmt *st;
  int rc = prepare(s, "SELECT id, kind FROM tissues WHERE name = ?1", &st, "looking up a tissue");
  if (rc) return rc;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int64_t id = 0;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    id = sqlite3_column_int64(st, 0);
    const char *k = (const char *)sqlite3_column_text(st, 1);
    *is_mesh = k && strcmp(k, "mesh") == 0;
  } else if (step != SQLITE_DONE) {
    id = ts__sqlfail(s, "looking up a tissue");
  }
  sqlite3_finalize(st);
  return id;
}

static int delete_in(ts_storage *s, const char *name, int with_records, ts_tissue_deletion *d) {
  int is_mesh = 0;
  const int64_t id = tissue_id(s, name, &is_mesh);
  if (id < 0) return (int)id;
  if (id == 0) return ts__fail(s, TS_ENOTISSUE, "no stored tissue is called \"%s\"", name);
  if (!is_mesh)
    return ts__fail(s, TS_EINVAL, "\"%s\" is a built-in tissue; only uploads can be deleted",
                    name);
  d->models = count_of(s, "SELECT count(*) FROM learned_models WHERE tissue = ?1", id,
                       "counting a tissue's models");
  if (d->models < 0) return (int)d->models;
  d->fits = count_of(s, "SELECT count(*) FROM material_fits WHERE tissue = ?1", id,
                     "counting a tissue's material fits");
  if (d->fits < 0) return (int)d->fits;
  if ((d->models || d->fits) && !with_records)
    return ts__fail(s, TS_EBUSY,
                    "tissue \"%s\" has %lld learned model%s and %lld material fit%s stored with "
                    "it, which its deletion would delete too",
                    name, (long long)d->models, d->models == 1 ? "" : "s", (long long)d->fits,
                    d->fits == 1 ? "" : "s");
  /* the models and fits go with the row (ON DELETE CASCADE) */
  int64_t n = write_one(s, "DELETE FROM tissues WHERE id = ?1", id, "deleting a tissue");
  if (n < 0) return (int)n;
  /* every mesh no tissue names any more: this one's unless another upload
   * has the same bytes, and any left behind when a name was uploaded again
   * with other bytes */
  n = write_one(s,
                "DELETE FROM meshes WHERE hash NOT IN "
                "(SELECT mesh_hash FROM tissues WHERE kind = 'mesh')",
                0, "deleting unused meshes");
  if (n < 0) return (int)n;
  d->meshes = n;
  return 0;
}

int ts_storage_delete_mesh_tissue(ts_storage *s, const char *name, int with_records,
                                  ts_tissue_deletion *out) {
  ts_tissue_deletion d = {0, 0, 0};
  if (out) *out = d;
  if (!name || !*name) return ts__fail(s, TS_EINVAL, "tissue name must not be empty");
  int rc = ts__begin(s);
  if (rc) return rc;
  rc = delete_in(s, name, with_records, &d);
  if (rc || (rc = ts__commit(s))) {
    ts__rollback(s);
    if (out) *out = d; /* the counts found, for TS_EBUSY's caller */
    return rc;
  }
  if (out) *out = d;
  s->err[0] = '\0';
  return 0;
}
