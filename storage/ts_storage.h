/*
 * ts_storage.h: what tissued keeps across restarts, in one SQLite file.
 *
 * Four tables (schema in ts_storage_schema.c, applied by versioned
 * migrations): the tissue catalog, material fits per tissue layer and
 * direction, learned shortcut models (theta as an opaque blob), and the
 * uploaded mesh files that tissues of kind "mesh" are built from. The
 * daemon keeps its database in its data directory; the offline tool opens the
 * same file directly.
 *
 * The file is opened in WAL mode with a busy timeout and foreign keys on.
 * Every write is one transaction, so a crash at any instant leaves either the
 * old or the new state. A database written by a newer version of the code
 * (higher schema version) is refused rather than guessed at.
 *
 * Threads: a handle is NOT thread-safe. One thread owns it (in the daemon, the
 * storage thread); other threads hand it work. Several processes may open the
 * same file at once (WAL + busy timeout).
 *
 * Errors: every function returns 0 (or an id > 0) or a negative ts_errno from
 * server/core/ts_error.h; ts_storage_errmsg() then says what went wrong:
 *   TS_EINVAL     bad argument (empty name, unknown kind, no such model id)
 *   TS_ENAN       a number is NaN or infinite (SQLite would store it as NULL)
 *   TS_ENOTISSUE  the tissue id or name does not exist
 *   TS_ESTORAGE   SQLite failed (I/O, corrupt file, locked past the timeout)
 *   TS_ENOMEM     out of memory
 *
 * Records returned by the get functions own their strings and blob; release
 * them with the matching *_free function. Records passed to list callbacks are
 * only valid during the callback.
 */
#ifndef TS_STORAGE_H
#define TS_STORAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_storage ts_storage;

/* Schema version this code writes (the number of migrations). */
int ts_storage_code_version(void);

/* Opens or creates the database at path (its directory must exist) and brings
 * its schema up to date. Returns 0 with *out set, or TS_ESTORAGE (or
 * TS_ENOMEM) with a message in errbuf: a file that is not an SQLite database,
 * a database newer than this code, a failed migration. */
int ts_storage_open(const char *path, ts_storage **out, char *errbuf, size_t errcap);

/* Closes the handle (NULL is fine). */
void ts_storage_close(ts_storage *s);

/* The schema version of the open database (PRAGMA user_version). */
int ts_storage_schema_version(ts_storage *s);

/* Message for the last failed call on this handle ("" after success). */
const char *ts_storage_errmsg(const ts_storage *s);

/* ---- tissues ------------------------------------------------------------ */

typedef struct ts_tissue_rec {
  int64_t id;
  const char *name;        /* unique, non-empty */
  const char *kind;        /* "builtin" or "mesh" */
  const char *mesh_hash;   /* hex digest of the source mesh, "" for builtins */
  const char *layer_spec;  /* layer description (JSON text), may be "" */
  int64_t created;         /* unix seconds, set by the database */
  void *mem_;              /* owned storage of get results; do not touch */
} ts_tissue_rec;

/* Inserts a tissue or updates the one with the same name (kind, mesh_hash and
 * layer_spec; id and created stay). Returns its id (> 0) or an error. NULL
 * mesh_hash/layer_spec mean "". */
int64_t ts_storage_put_tissue(ts_storage *s, const ts_tissue_rec *t);

/* Looks a tissue up by name: 0 and *out filled, or TS_ENOTISSUE. */
int ts_storage_get_tissue(ts_storage *s, const char *name, ts_tissue_rec *out);
void ts_storage_tissue_free(ts_tissue_rec *t);

/* Calls cb for every tissue in id order; a non-zero return from cb stops and
 * is returned. */
typedef int (*ts_storage_tissue_cb)(void *ud, const ts_tissue_rec *t);
int ts_storage_list_tissues(ts_storage *s, ts_storage_tissue_cb cb, void *ud);

/* ---- material fits ------------------------------------------------------- */

/* One fitted exponential law for a layer and a loading direction. */
typedef struct ts_fit_rec {
  int64_t id;
  int64_t tissue;          /* tissues.id */
  const char *layer;       /* "mucosa", ... */
  const char *direction;   /* "fibre", "cross", ... (free text, non-empty) */
  const char *name;        /* fit name (a material), non-empty */
  double a, b;             /* law parameters */
  double rmse, r2;         /* fit quality */
  int64_t samples;         /* measurements used, >= 0 */
  int64_t created;
  void *mem_;
} ts_fit_rec;

/* Inserts a fit, or replaces the values of the one with the same (tissue,
 * layer, direction, name), keeping its id. Returns the id or an error
 * (TS_ENOTISSUE when the tissue does not exist). */
int64_t ts_storage_put_fit(ts_storage *s, const ts_fit_rec *f);

/* Fits of one tissue (tissue > 0) or of all (tissue == 0), in id order. */
typedef int (*ts_storage_fit_cb)(void *ud, const ts_fit_rec *f);
int ts_storage_list_fits(ts_storage *s, int64_t tissue, ts_storage_fit_cb cb, void *ud);

/* ---- learned models ------------------------------------------------------ */

typedef struct ts_model_rec {
  int64_t id;
  int64_t tissue;          /* tissues.id */
  const char *material;    /* material identity (fit name or layer set) */
  const char *kind;        /* model family, e.g. "linear-modal" */
  int64_t version;         /* per (tissue, material, kind); put: 0 = next */
  const uint8_t *theta;    /* parameters; layout defined by kind */
  size_t theta_bytes;
  double loss;             /* final training loss */
  int64_t samples;         /* training samples */
  double heldout_rmse;     /* error on held-out samples, metres */
  double heldout_max;
  int64_t created;
  /* the solve the model learned (schema 3): "plain", "refined" (with
   * refine_edge, m, > 0) or "unknown" (models stored before; put: NULL is
   * "unknown"); refine_edge 0 unless refined */
  const char *solve;
  double refine_edge;
  void *mem_;
} ts_model_rec;

/* Stores a model. version 0 takes the next free version for its (tissue,
 * material, kind); an explicit version that exists already is refused
 * (TS_EINVAL): stored models are immutable. Returns the new id. On success the
 * chosen version is written back to *version_out when it is not NULL. */
int64_t ts_storage_put_model(ts_storage *s, const ts_model_rec *m, int64_t *version_out);

/* By id: 0 and *out filled, or TS_ENOMODEL when there is no such model. */
int ts_storage_get_model(ts_storage *s, int64_t id, ts_model_rec *out);

/* The highest version for (tissue, material, kind), or TS_ENOMODEL if none. */
int ts_storage_get_latest_model(ts_storage *s, int64_t tissue, const char *material,
                                const char *kind, ts_model_rec *out);
/* The highest version for (tissue, material, kind) that may run on the
 * given solve: learned on it ("refined": the same refine_edge within 1e-9
 * relative); a model of an unknown solve (stored before schema 3) never
 * may, its solve cannot be verified (ts_learn.h). solve "unknown" (or NULL)
 * takes any, as ts_storage_get_latest_model.
 * TS_ENOMODEL if none, TS_EINVAL for a bad solve. */
int ts_storage_get_latest_model_solve(ts_storage *s, int64_t tissue, const char *material,
                                      const char *kind, const char *solve, double refine_edge,
                                      ts_model_rec *out);
void ts_storage_model_free(ts_model_rec *m);

/* Models of one tissue (tissue > 0) or of all (0), in id order. */
typedef int (*ts_storage_model_cb)(void *ud, const ts_model_rec *m);
int ts_storage_list_models(ts_storage *s, int64_t tissue, ts_storage_model_cb cb, void *ud);

/* Deletes a model: 0, or TS_ENOMODEL when there is no such model. */
int ts_storage_delete_model(ts_storage *s, int64_t id);

/* ---- uploaded meshes (ts_storage_mesh.c) ---------------------------------- */

/* A mesh file as uploaded, stored once per content: its key is the SHA-256
 * of the bytes (computed by the caller, 64 lowercase hex digits). The bytes
 * are kept in the file's own units; the scale to metres belongs to the
 * tissue that uses them (its layer_spec, ts_layer_spec.h). */
typedef struct ts_mesh_rec {
  const char *hash;        /* 64 lowercase hex digits */
  const char *format;      /* "obj", "stl" or "ply" */
  const uint8_t *bytes;    /* the file, n_bytes > 0 */
  size_t n_bytes;
  int64_t vertex_count;    /* after import and repair, >= 0 */
  int64_t triangle_count;
  int64_t created;         /* unix seconds, set by the database */
  void *mem_;
} ts_mesh_rec;

/* Stores a mesh unless one with its hash is stored already (then nothing
 * changes). Returns 1 when inserted, 0 when it was there, or an error
 * (TS_EINVAL for a malformed hash, format or empty bytes). */
int ts_storage_put_mesh(ts_storage *s, const ts_mesh_rec *m);

/* By hash: 0 and *out filled (free with ts_storage_mesh_free), or
 * TS_ENOTISSUE when no mesh has that hash. */
int ts_storage_get_mesh(ts_storage *s, const char *hash, ts_mesh_rec *out);
void ts_storage_mesh_free(ts_mesh_rec *m);

/* Number of stored meshes, or an error. */
int64_t ts_storage_count_meshes(ts_storage *s);

/* In one transaction: stores the mesh (as ts_storage_put_mesh) and the
 * tissue `name` of kind "mesh" pointing at it with layer_spec, inserting it
 * or replacing the mesh tissue of that name. A name taken by a built-in
 * tissue is refused (TS_EINVAL). *mesh_inserted (may be NULL) is 1 when the
 * bytes were new. Returns the tissue id (> 0) or an error. */
int64_t ts_storage_put_mesh_tissue(ts_storage *s, const ts_mesh_rec *m, const char *name,
                                   const char *layer_spec, int *mesh_inserted);

/* What a mesh tissue's deletion took (or, refused, would take) with it. */
typedef struct ts_tissue_deletion {
  int64_t models; /* learned models stored for the tissue */
  int64_t fits;   /* material fits stored under its name */
  int64_t meshes; /* mesh files no tissue named any more (its own, unless
                     another upload has the same bytes; and any left behind
                     when a name was uploaded again with other bytes) */
} ts_tissue_deletion;

/* Deletes the mesh tissue `name` in one transaction: its row, its learned
 * models and material fits, and every stored mesh no tissue names any
 * more. A tissue with models or fits is deleted only when with_records is
 * set; otherwise nothing changes and TS_EBUSY is returned, out holding the
 * counts. TS_ENOTISSUE when no tissue has that name, TS_EINVAL for a
 * built-in tissue or an empty name. out (may be NULL) gets the counts. */
int ts_storage_delete_mesh_tissue(ts_storage *s, const char *name, int with_records,
                                  ts_tissue_deletion *out);

#endif
