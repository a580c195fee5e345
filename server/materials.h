/*
 * materials.h: material fits between the core, storage and their users.
 *
 * A material is one fitted exponential law sigma = a * e^(b * strain)
 * (server/core/ts_fit.h) for a tissue, one of its layers and a direction
 * ("axial": along the layer's fibre direction, "radial": across it in the
 * wall plane), stored under a name in SQLite (storage/ts_storage.h, table
 * material_fits). This module is the glue the daemon and the offline tool
 * share:
 *   - the default table (storage/defaults/stomach-wall-materials.csv, with
 *     its published sources) goes into a database on first start, row by row
 *     only where the key is absent, so loading is idempotent and never
 *     overwrites a fit someone stored;
 *   - fitting: samples (CSV text or a file) -> ts_fit_exp -> stored fit;
 *   - resolving the fits a session needs by tissue, layer, direction and
 *     name; listing fits with their tissue names.
 *
 * Threads: like the storage handle it takes, not thread-safe; call it where
 * the handle is owned (the daemon's storage thread, the tool's main).
 *
 * Errors: 0 (or a count >= 0) or a negative ts_errno (server/core/ts_error.h)
 * with a one-line message in err (when errcap > 0):
 *   TS_EINVAL     bad key (unknown direction, layer not in the tissue's layer
 *                 list, malformed name), no such fit, malformed table, or a
 *                 sample set the fit refuses (see ts_fit.h, ts_csv.h)
 *   TS_ENOTISSUE  the tissue is not in the catalog
 *   TS_ENAN, TS_ERANGE, TS_ETOOBIG, TS_EIO  from the reader and the fit
 *   TS_ESTORAGE, TS_ENOMEM  from storage
 */
#ifndef TS_MATERIALS_H
#define TS_MATERIALS_H

#include <stddef.h>
#include <stdint.h>

#include "ts_csv.h"
#include "ts_fit.h"

typedef struct ts_storage ts_storage;

/* The name of the shipped fits, and the one used when none is asked for. */
#define TS_MATERIALS_DEFAULT_NAME "default"
/* Longest tissue, layer or fit name this module writes (bytes, without NUL). */
#define TS_MATERIAL_TEXT_MAX 63

/* One stored fit, with its tissue by name. */
typedef struct ts_material {
  int64_t id;                               /* material_fits.id */
  char tissue[TS_MATERIAL_TEXT_MAX + 1];    /* "stomach" */
  char layer[TS_MATERIAL_TEXT_MAX + 1];     /* "mucosa" */
  char direction[TS_MATERIAL_TEXT_MAX + 1]; /* "axial" or "radial" */
  char name[TS_MATERIAL_TEXT_MAX + 1];      /* "default" */
  double a;                                 /* Pa */
  double b;                                 /* per unit strain */
  double rmse;                              /* Pa */
  double r2;
  int64_t samples; /* samples fitted; 0 for a row derived from published
                      values (the default table), whose rmse and r2 are 0
                      and do not apply */
  int64_t created; /* unix seconds */
} ts_material;

/* Path of the shipped default table (set at build time; a path relative to
 * the working directory when the build did not set one). */
const char *ts_materials_default_table(void);

/* Loads a material table file (path NULL = ts_materials_default_table())
 * into the database: every row whose (tissue, layer, direction, name) is not
 * stored yet is inserted; a tissue the table names and the catalog lacks is
 * created (kind "builtin", layer_spec listing the table's layers for it).
 * The whole table is checked before anything is written. Returns the number
 * of rows inserted (0 when all were present) or a negative error. */
int ts_materials_load_defaults(ts_storage *st, const char *path, char *err, size_t errcap);

/* The same from a buffer holding the table text: '#' comments, then the
 * header "tissue,layer,direction,name,a,b,rmse,r2,samples", then rows. */
int ts_materials_load_table(ts_storage *st, const char *buf, size_t len, char *err, size_t errcap);

/* Fits samples and stores the fit under (tissue, layer, direction, name),
 * replacing the values of an existing fit with that key (its id stays).
 * A fit needs its name: NULL or "" is refused (TS_EINVAL), since it meant
 * TS_MATERIALS_DEFAULT_NAME and an unnamed fit silently replaced the
 * shipped values; replacing them takes the name "default" itself.
 * The tissue must exist; the layer must be one of its layers when its
 * layer_spec lists them; direction is "axial" or "radial"; names are 1..63
 * characters of [A-Za-z0-9_.-] starting with a letter or digit. On success
 * *out holds the stored fit (with its id) and, when fit is not NULL, *fit
 * the fit's details. */
int ts_materials_fit_samples(ts_storage *st, const char *tissue, const char *layer,
                             const char *direction, const char *name, const ts_samples *s,
                             ts_material *out, ts_expfit *fit, char *err, size_t errcap);

/* The same from "strain,stress" CSV text (ts_csv.h; default limits), e.g. the
 * bytes of the protocol's FitMaterial.csv. Reader errors name the line. */
int ts_materials_fit_csv(ts_storage *st, const char *tissue, const char *layer,
                         const char *direction, const char *name, const char *csv, size_t len,
                         ts_material *out, ts_expfit *fit, char *err, size_t errcap);

/* The fit stored under exactly this key (name NULL or "" = "default"):
 * 0 and *out, TS_ENOTISSUE, or TS_EINVAL when there is no such fit (the
 * message lists the names that exist for that layer and direction). */
int ts_materials_resolve(ts_storage *st, const char *tissue, const char *layer,
                         const char *direction, const char *name, ts_material *out, char *err,
                         size_t errcap);

/* What a session needs: for each of n_layers layer names, the axial and the
 * radial fit called `name` (NULL or "" = "default"), falling back to the
 * "default" fit of that layer and direction where the named one does not
 * exist (out[i].name says which was used). TS_EINVAL when a named set exists
 * for none of the layers (a misspelt name) or a layer has neither fit. */
int ts_materials_resolve_layers(ts_storage *st, const char *tissue, const char *name,
                                const char *const *layers, uint32_t n_layers, ts_material *axial,
                                ts_material *radial, char *err, size_t errcap);

/* Calls cb for every fit of one tissue (tissue NULL or "" = all tissues), in
 * id order; a non-zero return from cb stops the listing and is returned. */
typedef int (*ts_materials_cb)(void *ud, const ts_material *m);
int ts_materials_list(ts_storage *st, const char *tissue, ts_materials_cb cb, void *ud, char *err,
                      size_t errcap);

#endif
