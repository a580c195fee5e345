/*
 * ts_storage.c: opening a storage database (WAL, busy timeout, foreign keys),
 * bringing its schema up to date with the migrations of ts_storage_schema.c,
 * and the error/transaction/statement helpers the record functions use
 * (ts_storage_records.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"
#include "ts_storage_int.h"

/* How long a writer waits for another connection's lock before failing. */
#define TS__BUSY_TIMEOUT_MS 5000

int ts__fail(ts_storage *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
  return code;
}

int ts__sqlfail(ts_storage *s, const char *what) {
  int rc = TS_ESTORAGE;
  if (sqlite3_errcode(s->db) == SQLITE_NOMEM) rc = TS_ENOMEM;
  return ts__fail(s, rc, "%s: %s (SQLite code %d)", what, sqlite3_errmsg(s->db),
                  sqlite3_extended_errcode(s->db));
}

sqlite3_stmt *ts__stmt(ts_storage *s, int idx) {
  if (!s->st[idx]) {
    if (sqlite3_prepare_v3(s->db, ts__stmt_sql[idx], -1, SQLITE_PREPARE_PERSISTENT,
                           &s->st[idx], NULL) != SQLITE_OK) {
      ts__sqlfail(s, "preparing a statement");
      return NULL;
    }
  }
  sqlite3_reset(s->st[idx]);
  sqlite3_clear_bindings(s->st[idx]);
  return s->st[idx];
}

int ts__exec(ts_storage *s, const char *sql, const char *what) {
  char *msg = NULL;
  if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    int rc = ts__fail(s, TS_ESTORAGE, "%s: %s", what, msg ? msg : sqlite3_errmsg(s->db));
    sqlite3_free(msg);
    return rc;
  }
  return 0;
}

int ts__begin(ts_storage *s) { return ts__exec(s, "BEGIN IMMEDIATE", "starting a transaction"); }

int ts__commit(ts_storage *s) {
  int rc = ts__exec(s, "COMMIT", "committing");
  if (rc) ts__rollback(s);
  return rc;
}

void ts__rollback(ts_storage *s) {
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int ts_storage_code_version(void) { return ts__migration_count; }

/* PRAGMA user_version, or a negative ts_errno. */
static int read_version(ts_storage *s) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return ts__sqlfail(s, "reading the schema version");
  int v;
  if (sqlite3_step(st) == SQLITE_ROW) {
    v = sqlite3_column_int(st, 0);
  } else {
    v = ts__sqlfail(s, "reading the schema version");
  }
  sqlite3_finalize(st);
  return v;
}

static int check_not_newer(ts_storage *s, int v) {
  if (v > ts__migration_count)
    return ts__fail(s, TS_ESTORAGE,
                    "database schema version %d is newer than this program supports (%d); "
                    "use a newer tissued or another data directory",
                    v, ts__migration_count);
  if (v < 0) return ts__fail(s, TS_ESTORAGE, "database schema version %d is invalid", v);
  return 0;
}

/* Applies the pending migrations, each in one transaction. The version is
 * read again inside the transaction so that two processes opening a fresh
 * file at once do not both run the same script. */
static int migrate(ts_storage *s) {
  for (;;) {
    int v = read_version(s);
    if (v < 0) return v;
    int rc = check_not_newer(s, v);
    if (rc) return rc;
    if (v == ts__migration_count) return 0;
    if ((rc = ts__begin(s))) return rc;
    v = read_version(s);
    if (v < 0 || (rc = check_not_newer(s, v))) {
      ts__rollback(s);
      return v < 0 ? v : rc;
    }
    if (v == ts__migration_count) {
      ts__rollback(s);
      return 0;
    }
    char what[64], pragma[64];
    snprintf(what, sizeof what, "migration to schema version %d", v + 1);
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
    if ((rc = ts__exec(s, ts__migrations[v], what)) || (rc = ts__exec(s, pragma, what))) {
      ts__rollback(s);
      return rc;
    }
    if ((rc = ts__commit(s))) return rc;
  }
}

/* journal_mode=WAL; the first statement that reads the file, so a file that
 * is not a database fails here. In-memory databases report "memory". */
static int set_wal(ts_storage *s, const char *path) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK)
    return ts__sqlfail(s, "reading the database");
  int rc = 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    if (!mode || (strcmp(mode, "wal") != 0 && !(strcmp(mode, "memory") == 0 &&
                                                 strcmp(path, ":memory:") == 0)))
      rc = ts__fail(s, TS_ESTORAGE, "WAL mode refused (journal mode is %s)",
                    mode ? mode : "unknown");
  } else {
    rc = ts__sqlfail(s, "reading the database");
  }
  sqlite3_finalize(st);
  return rc;
}

int ts_storage_open(const char *path, ts_storage **out, char *errbuf, size_t errcap) {
  if (errcap) errbuf[0] = '\0';
  *out = NULL;
  if (!path || !*path) {
    if (errcap) snprintf(errbuf, errcap, "no database path given");
    return TS_ESTORAGE;
  }
  ts_storage *s = calloc(1, sizeof *s);
  if (!s) {
    if (errcap) snprintf(errbuf, errcap, "%s: out of memory", path);
    return TS_ENOMEM;
  }
  int rc = 0;
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
      SQLITE_OK) {
    rc = s->db ? ts__sqlfail(s, "opening") : ts__fail(s, TS_ENOMEM, "opening: out of memory");
  } else {
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, TS__BUSY_TIMEOUT_MS);
    if (!(rc = ts__exec(s, "PRAGMA foreign_keys = ON", "enabling foreign keys")) &&
        !(rc = set_wal(s, path)))
      rc = migrate(s);
  }
  if (rc) {
    if (errcap) snprintf(errbuf, errcap, "%s: %s", path, s->err);
    if (rc != TS_ENOMEM) rc = TS_ESTORAGE;
    ts_storage_close(s);
    return rc;
  }
  s->err[0] = '\0';
  *out = s;
  return 0;
}

void ts_storage_close(ts_storage *s) {
  if (!s) return;
  for (int i = 0; i < TS__ST_COUNT; i++) sqlite3_finalize(s->st[i]);
  sqlite3_close(s->db);
  free(s);
}

int ts_storage_schema_version(ts_storage *s) {
  int v = read_version(s);
  if (v >= 0) s->err[0] = '\0';
  return v;
}

const char *ts_storage_errmsg(const ts_storage *s) { return s ? s->err : "no storage handle"; }
