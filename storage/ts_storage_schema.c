/*
 * ts_storage_schema.c: the database schema as an ordered list of migrations.
 *
 * ts__migrations[i] takes a database from schema version i to i + 1 (the
 * version lives in PRAGMA user_version). ts_storage.c applies each pending
 * script in its own transaction. Rules: never edit a released script; add a
 * new one at the end. A database whose version is above the count was written
 * by newer code and is refused.
 *
 * A tissue of kind 'mesh' names its source by tissues.mesh_hash = meshes.hash
 * (no foreign key: the tissues table predates meshes, and SQLite cannot add
 * one to an existing table; ts_storage_put_mesh_tissue writes both in one
 * transaction instead).
 */
#include "ts_storage_int.h"

#define TS__NOW "(CAST(strftime('%s','now') AS INTEGER))"

const char *const ts__migrations[] = {
    /* 1: tissue catalog, material fits, learned models */
    "CREATE TABLE tissues ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE CHECK (length(name) > 0),"
    "  kind TEXT NOT NULL CHECK (kind IN ('builtin', 'mesh')),"
    "  mesh_hash TEXT NOT NULL DEFAULT '',"
    "  layer_spec TEXT NOT NULL DEFAULT '',"
    "  created INTEGER NOT NULL DEFAULT " TS__NOW
    ");"
    "CREATE TABLE material_fits ("
    "  id INTEGER PRIMARY KEY,"
    "  tissue INTEGER NOT NULL REFERENCES tissues(id) ON DELETE CASCADE,"
    "  layer TEXT NOT NULL CHECK (length(layer) > 0),"
    "  direction TEXT NOT NULL CHECK (length(direction) > 0),"
    "  a REAL NOT NULL,"
    "  b REAL NOT NULL,"
    "  rmse REAL NOT NULL,"
    "  r2 REAL NOT NULL,"
    "  samples INTEGER NOT NULL CHECK (samples >= 0),"
    "  name TEXT NOT NULL CHECK (length(name) > 0),"
    "  created INTEGER NOT NULL DEFAULT " TS__NOW ","
    "  UNIQUE (tissue, layer, direction, name)"
    ");"
    "CREATE TABLE learned_models ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  tissue INTEGER NOT NULL REFERENCES tissues(id) ON DELETE CASCADE,"
    "  material TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (length(kind) > 0),"
    "  version INTEGER NOT NULL CHECK (version > 0),"
    "  theta BLOB NOT NULL,"
    "  loss REAL NOT NULL,"
    "  samples INTEGER NOT NULL CHECK (samples >= 0),"
    "  heldout_rmse REAL NOT NULL,"
    "  heldout_max REAL NOT NULL,"
    "  created INTEGER NOT NULL DEFAULT " TS__NOW ","
    "  UNIQUE (tissue, material, kind, version)"
    ");",
    /* 2: uploaded meshes, stored once by the SHA-256 of their bytes */
    "CREATE TABLE meshes ("
    "  hash TEXT PRIMARY KEY CHECK (length(hash) = 64),"
    "  format TEXT NOT NULL CHECK (format IN ('obj', 'stl', 'ply')),"
    "  bytes BLOB NOT NULL,"
    "  vertex_count INTEGER NOT NULL CHECK (vertex_count >= 0),"
    "  triangle_count INTEGER NOT NULL CHECK (triangle_count >= 0),"
    "  created INTEGER NOT NULL DEFAULT " TS__NOW
    ");",
    /* 3: the solve a learned model learned: the tissue's own mesh ('plain',
     * --qs-refine-edge 0) or the region's refined copy ('refined', with its
     * longest edge in m); models stored before read as 'unknown' */
    "ALTER TABLE learned_models ADD COLUMN solve TEXT NOT NULL DEFAULT 'unknown' "
    "  CHECK (solve IN ('unknown', 'plain', 'refined'));"
    "ALTER TABLE learned_models ADD COLUMN refine_edge REAL NOT NULL DEFAULT 0 "
    "  CHECK ((solve = 'refined' AND refine_edge > 0) OR "
    "         (solve <> 'refined' AND refine_edge = 0));",
};

const int ts__migration_count = (int)(sizeof ts__migrations / sizeof ts__migrations[0]);
