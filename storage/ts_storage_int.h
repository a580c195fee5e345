/*
 * ts_storage_int.h: internals shared by the storage sources (the handle,
 * statement cache, error and transaction helpers). Not part of the API; the
 * API is ts_storage.h.
 */
#ifndef TS_STORAGE_INT_H
#define TS_STORAGE_INT_H

#include <sqlite3.h>

#include "ts_storage.h"

/* Cached prepared statements, one per put/get query (lists prepare their own
 * so that a callback may use the handle). */
enum {
  TS__ST_TISSUE_UPSERT,
  TS__ST_TISSUE_ID,
  TS__ST_TISSUE_GET,
  TS__ST_TISSUE_EXISTS,
  TS__ST_FIT_UPSERT,
  TS__ST_FIT_ID,
  TS__ST_MODEL_NEXT_VERSION,
  TS__ST_MODEL_INSERT,
  TS__ST_MODEL_GET,
  TS__ST_MODEL_LATEST,
  TS__ST_MODEL_DELETE,
  TS__ST_MODEL_LATEST_SOLVE,
  TS__ST_COUNT
};

struct ts_storage {
  sqlite3 *db;
  char err[512];                   /* message of the last failure, "" after success */
  sqlite3_stmt *st[TS__ST_COUNT];  /* prepared on first use */
};

/* SQL of each cached statement (ts_storage_records.c). */
extern const char *const ts__stmt_sql[TS__ST_COUNT];

/* The migrations, in order: ts__migrations[i] takes version i to i+1. */
extern const char *const ts__migrations[];
extern const int ts__migration_count;

/* Sets the message and returns code. */
int ts__fail(ts_storage *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* TS_ESTORAGE with SQLite's message for what failed. */
int ts__sqlfail(ts_storage *s, const char *what);
/* The cached statement idx, reset and with its bindings cleared, or NULL (and
 * the error set). */
sqlite3_stmt *ts__stmt(ts_storage *s, int idx);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK; begin and commit return 0 or
 * TS_ESTORAGE. */
int ts__begin(ts_storage *s);
int ts__commit(ts_storage *s);
void ts__rollback(ts_storage *s);
/* Runs SQL with no result rows. */
int ts__exec(ts_storage *s, const char *sql, const char *what);

#endif
