/*
 * model_doc.c: reads the JSON document of one exported learned model with
 * cJSON (see model_doc.h).
 */
#include "model_doc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ts_error.h"

static int fail(char *err, size_t cap, const char *fmt, ...) {
  if (cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return TS_EINVAL;
}

static int copy_name(char *dst, const char *src) {
  size_t n = strlen(src);
  if (n >= TS_MODEL_DOC_NAME_MAX) return -1;
  memcpy(dst, src, n + 1);
  return 0;
}

static int parse(const cJSON *o, ts_model_doc *out, char *err, size_t cap) {
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
  const cJSON *tis = cJSON_GetObjectItemCaseSensitive(o, "tissue");
  const cJSON *mat = cJSON_GetObjectItemCaseSensitive(o, "material");
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
  const cJSON *th = cJSON_GetObjectItemCaseSensitive(o, "theta");
  if (!cJSON_IsObject(o) || !cJSON_IsString(fmt) ||
      strcmp(fmt->valuestring, TS_MODEL_DOC_FORMAT) != 0 || !cJSON_IsString(tis) ||
      !cJSON_IsString(mat) || !cJSON_IsString(kind) || !cJSON_IsArray(th))
    return fail(err, cap, "not an exported model (format \"%s\" with tissue, material, kind "
                "and theta)", TS_MODEL_DOC_FORMAT);
  if (!tis->valuestring[0] || copy_name(out->tissue, tis->valuestring))
    return fail(err, cap, "the tissue name is empty or longer than %d bytes",
                TS_MODEL_DOC_NAME_MAX - 1);
  if (copy_name(out->material, mat->valuestring))
    return fail(err, cap, "the material is longer than %d bytes", TS_MODEL_DOC_NAME_MAX - 1);
  if (ts_learn_kind_parse(kind->valuestring, &out->kind)) {
    char shown[65]; /* the kind as given, control characters as '?': one line */
    size_t n = 0;
    for (const char *p = kind->valuestring; *p && n < sizeof shown - 1; p++)
      shown[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
    shown[n] = '\0';
    return fail(err, cap, "unknown model kind '%s' (method, rich, spread, spread2, spread2r)",
                shown);
  }
  int np = cJSON_GetArraySize(th);
  if (np < 1 || np > TS_LEARN_MAX_PARAMS)
    return fail(err, cap, "theta has %d values, a model has 1 to %d", np, TS_LEARN_MAX_PARAMS);
  uint32_t a = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, th) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
      return fail(err, cap, "theta[%u] is not a finite number", a);
    out->theta[a++] = v->valuedouble;
  }
  out->n_theta = a;
  const char *nums[] = {"loss", "heldout_rmse", "heldout_max", "samples"};
  double val[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, nums[i]);
    if (x && (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0))
      return fail(err, cap, "%s must be a non-negative number", nums[i]);
    if (x) val[i] = x->valuedouble;
  }
  if (val[3] > 9007199254740992.0) /* 2^53: larger counts do not survive a double */
    return fail(err, cap, "samples must be at most 2^53");
  out->loss = val[0];
  out->heldout_rmse = val[1];
  out->heldout_max = val[2];
  out->samples = (int64_t)val[3];
  const cJSON *sv = cJSON_GetObjectItemCaseSensitive(o, "solve");
  const cJSON *se = cJSON_GetObjectItemCaseSensitive(o, "refine_edge");
  if (sv && !cJSON_IsString(sv))
    return fail(err, cap, "solve must be \"plain\", \"refined\" or \"unknown\"");
  if (se && (!cJSON_IsNumber(se) || !isfinite(se->valuedouble)))
    return fail(err, cap, "refine_edge must be a finite number (m)");
  if (ts_learn_solve_parse(sv ? sv->valuestring : "unknown", se ? se->valuedouble : 0,
                           &out->solve))
    return fail(err, cap,
                "solve must be \"plain\" or \"unknown\" with refine_edge 0 (or absent), or "
                "\"refined\" with refine_edge > 0 (m)");
  return 0;
}

cJSON *ts_model_doc_number(double v) {
  if (!isfinite(v)) return cJSON_CreateNull();
  char buf[32];
  snprintf(buf, sizeof buf, "%.17g", v);
  return cJSON_CreateRaw(buf);
}

cJSON *ts_model_doc_json(const ts_model_rec *m, const char *tissue_name) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "format", TS_MODEL_DOC_FORMAT);
  cJSON_AddNumberToObject(o, "id", (double)m->id);
  cJSON_AddStringToObject(o, "tissue", tissue_name);
  cJSON_AddStringToObject(o, "material", m->material);
  cJSON_AddStringToObject(o, "kind", m->kind);
  cJSON_AddNumberToObject(o, "version", (double)m->version);
  cJSON *th = cJSON_AddArrayToObject(o, "theta");
  for (size_t a = 0; th && a + 8 <= m->theta_bytes; a += 8) {
    uint64_t u = 0;
    double v;
    for (int k = 0; k < 8; k++) u |= (uint64_t)m->theta[a + k] << (8 * k);
    memcpy(&v, &u, 8);
    cJSON_AddItemToArray(th, ts_model_doc_number(v));
  }
  cJSON_AddItemToObject(o, "loss", ts_model_doc_number(m->loss));
  cJSON_AddNumberToObject(o, "samples", (double)m->samples);
  cJSON_AddItemToObject(o, "heldout_rmse", ts_model_doc_number(m->heldout_rmse));
  cJSON_AddItemToObject(o, "heldout_max", ts_model_doc_number(m->heldout_max));
  cJSON_AddStringToObject(o, "solve", m->solve ? m->solve : "unknown");
  cJSON_AddItemToObject(o, "refine_edge", ts_model_doc_number(m->refine_edge));
  cJSON_AddNumberToObject(o, "created", (double)m->created);
  /* a member that could not be added (out of memory) leaves a document that
   * would not read back: none at all is the honest answer */
  if (!th || cJSON_GetArraySize(th) != (int)(m->theta_bytes / 8) ||
      !cJSON_GetObjectItemCaseSensitive(o, "created")) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

int ts_model_doc_count_ok(const ts_model_doc *doc) {
  for (uint32_t ns = 1; ns <= TS_MAX_LAYERS + 1; ns++)
    if (ts_learn_n_params(doc->kind, ns) == doc->n_theta) return 1;
  return 0;
}

size_t ts_model_doc_theta_bytes(const ts_model_doc *doc, uint8_t *buf, size_t cap) {
  ts_learn_model m;
  memset(&m, 0, sizeof m);
  m.kind = doc->kind;
  m.n_params = doc->n_theta;
  memcpy(m.theta, doc->theta, sizeof m.theta[0] * doc->n_theta);
  return ts_learn_theta_encode(&m, buf, cap);
}

typedef struct same_find {
  const char *material, *kind, *solve;
  const uint8_t *theta;
  size_t bytes;
  double refine_edge;
  int64_t id;
} same_find;

static int find_same(void *ud, const ts_model_rec *m) {
  same_find *f = ud;
  if (strcmp(m->material, f->material) || strcmp(m->kind, f->kind) || m->theta_bytes != f->bytes ||
      memcmp(m->theta, f->theta, f->bytes) || strcmp(m->solve ? m->solve : "unknown", f->solve) ||
      m->refine_edge != f->refine_edge)
    return 0;
  f->id = m->id;
  return 1;
}

int64_t ts_model_doc_find_stored(ts_storage *st, int64_t tissue, const ts_model_doc *doc) {
  uint8_t blob[8 * TS_LEARN_MAX_PARAMS];
  size_t nb = ts_model_doc_theta_bytes(doc, blob, sizeof blob);
  if (nb == 0) return TS_EINVAL;
  same_find f = {doc->material, ts_learn_kind_name(doc->kind), ts_learn_solve_name(doc->solve.kind),
                 blob, nb, doc->solve.kind == TS_LEARN_SOLVE_REFINED ? doc->solve.refine_edge : 0,
                 0};
  int rc = ts_storage_list_models(st, tissue, find_same, &f);
  return rc < 0 ? rc : f.id;
}

int ts_model_doc_parse(const char *text, ts_model_doc *out, char *err, size_t cap) {
  if (cap > 0) err[0] = '\0';
  if (!text || !out) return fail(err, cap, "no document");
  memset(out, 0, sizeof *out);
  cJSON *o = cJSON_Parse(text);
  if (!o) return fail(err, cap, "not JSON");
  int rc = parse(o, out, err, cap);
  cJSON_Delete(o);
  return rc;
}
