/*
 * model_doc.h: the JSON document of one learned model as `tissuetool models
 * export` writes it and `tissuetool models import` reads it back
 * (format "tissued-learned-model"). Reading it is a pure function so that
 * it can be tested and fuzzed without a database or a tissue
 * (tests/fuzz/fuzz_modeldoc.c); what the document must match in the
 * database (its tissue, the tissue's material, the parameter count for the
 * tissue's sheets) is checked by the import itself (cmd_learn.c for the
 * tool, server/models.c for the daemon's ImportModel). Both imports store
 * nothing for a document that repeats a stored model, by the one rule of
 * ts_model_doc_find_stored.
 */
#ifndef TS_TOOL_MODEL_DOC_H
#define TS_TOOL_MODEL_DOC_H

#include <stddef.h>
#include <stdint.h>

#include "ts_learn.h"
#include "ts_storage.h"

#define TS_MODEL_DOC_FORMAT "tissued-learned-model"
#define TS_MODEL_DOC_NAME_MAX 1024 /* tissue and material, with the NUL */

typedef struct ts_model_doc {
  char tissue[TS_MODEL_DOC_NAME_MAX];   /* tissue name, non-empty */
  char material[TS_MODEL_DOC_NAME_MAX]; /* material identity */
  ts_learn_kind kind;
  uint32_t n_theta;                     /* 1..TS_LEARN_MAX_PARAMS */
  double theta[TS_LEARN_MAX_PARAMS];    /* finite */
  double loss, heldout_rmse, heldout_max; /* finite, >= 0; 0 when absent */
  int64_t samples;                      /* 0..2^53; 0 when absent */
  ts_learn_solve solve;                 /* "solve" and "refine_edge" (m); unknown when
                                           absent (documents exported before) */
} ts_model_doc;

/* Parses one exported model from NUL-terminated JSON text into *out.
 * Returns 0, or TS_EINVAL with a one-line reason in err (cap bytes, always
 * NUL-terminated when cap > 0): not JSON, wrong "format", a missing or
 * non-string tissue/material/kind, an unknown kind, a name too long, theta
 * not an array of 1..TS_LEARN_MAX_PARAMS finite numbers, or loss,
 * heldout_rmse, heldout_max, samples present but not a finite non-negative
 * number (samples at most 2^53). */
int ts_model_doc_parse(const char *text, ts_model_doc *out, char *err, size_t cap);

/* A JSON number that reads back as exactly v: 17 significant digits (cJSON's
 * own writer stops at 15 when that is within a relative DBL_EPSILON, which
 * loses the last bits of theta between export and import). Non-finite v
 * gives null. NULL when out of memory. The item belongs to the caller (or
 * to the object it is added to). */
struct cJSON *ts_model_doc_number(double v);

/* The document of a stored model m whose tissue is called tissue_name, as a
 * cJSON object (format, id, tissue, material, kind, version, theta, loss,
 * samples, heldout_rmse, heldout_max, created): what `tissuetool models
 * export` prints and the daemon's ExportModel returns. NULL when out of
 * memory. The caller deletes it (cJSON_Delete). */
struct cJSON *ts_model_doc_json(const ts_model_rec *m, const char *tissue_name);

/* Does doc's theta have a parameter count a model of its kind can have
 * (ts_learn_n_params for some sheet count 1..TS_MAX_LAYERS + 1)? 1 or 0.
 * Whether it fits a particular tissue is decided when a session installs it
 * (ts_learn_theta_decode with the tissue's sheet count). */
int ts_model_doc_count_ok(const ts_model_doc *doc);

/* The theta of doc as the bytes storage keeps (ts_learn_theta_encode: 8
 * little-endian bytes per value). Returns the byte count, or 0 when cap is
 * too small. */
size_t ts_model_doc_theta_bytes(const ts_model_doc *doc, uint8_t *buf, size_t cap);

/* The stored model of tissue id `tissue` that doc repeats: the same
 * material, kind, theta bit for bit, solve and refine edge (the same theta
 * learned of another solve is another model). An import of such a document
 * stores nothing and answers with that model, so importing one document
 * twice gives one row (the daemon's ImportModel and `tissuetool models
 * import` alike). Returns its id (> 0), 0 when no stored model matches, or
 * storage's negative error code (ts_storage_errmsg says why). */
int64_t ts_model_doc_find_stored(ts_storage *st, int64_t tissue, const ts_model_doc *doc);

#endif
