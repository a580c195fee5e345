/*
 * fuzz_modeldoc.c: fuzz target for the reader of an exported learned model,
 * the JSON document `tissuetool models import FILE` reads
 * (server/tool/model_doc.c, with cJSON). Seeds: tests/fuzz/corpus/modeldoc/.
 *
 * Besides "no crash, no leak, no UB" (ASan + UBSan), every input checks:
 *   - a refusal is TS_EINVAL with a one-line message;
 *   - an accepted document has a non-empty NUL-terminated tissue name, a
 *     NUL-terminated material, a known kind, 1..TS_LEARN_MAX_PARAMS finite
 *     theta values, finite non-negative loss/heldout figures and a sample
 *     count in 0..2^53;
 *   - an accepted document written back as `models export` writes it
 *     (numbers through ts_model_doc_number, 17 significant digits) reads
 *     back to the same fields and equal values (==, so -0 equals 0).
 *     Finding kept as a seed (regress_theta_15_digits.json): cJSON's own
 *     number writer gave 0.99986298962488 for 0.9998629896248798. And
 *     regress_kind_newline.json: the message echoed a kind holding a
 *     newline, which broke the one-line message.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_doc.h"
#include "ts_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_valid(const ts_model_doc *d) {
  if (!memchr(d->tissue, 0, sizeof d->tissue) || !d->tissue[0]) abort();
  if (!memchr(d->material, 0, sizeof d->material)) abort();
  if (!ts_learn_kind_name(d->kind)) abort();
  if (d->n_theta < 1 || d->n_theta > TS_LEARN_MAX_PARAMS) abort();
  for (uint32_t i = 0; i < d->n_theta; i++)
    if (!isfinite(d->theta[i])) abort();
  const double v[3] = {d->loss, d->heldout_rmse, d->heldout_max};
  for (int i = 0; i < 3; i++)
    if (!(isfinite(v[i]) && v[i] >= 0)) abort();
  if (d->samples < 0 || d->samples > (INT64_C(1) << 53)) abort();
}

static char *write_back(const ts_model_doc *d) {
  cJSON *o = cJSON_CreateObject();
  if (!o) abort();
  cJSON_AddStringToObject(o, "format", TS_MODEL_DOC_FORMAT);
  cJSON_AddStringToObject(o, "tissue", d->tissue);
  cJSON_AddStringToObject(o, "material", d->material);
  cJSON_AddStringToObject(o, "kind", ts_learn_kind_name(d->kind));
  cJSON *th = cJSON_AddArrayToObject(o, "theta");
  for (uint32_t i = 0; i < d->n_theta; i++) cJSON_AddItemToArray(th, ts_model_doc_number(d->theta[i]));
  cJSON_AddItemToObject(o, "loss", ts_model_doc_number(d->loss));
  cJSON_AddNumberToObject(o, "samples", (double)d->samples);
  cJSON_AddItemToObject(o, "heldout_rmse", ts_model_doc_number(d->heldout_rmse));
  cJSON_AddItemToObject(o, "heldout_max", ts_model_doc_number(d->heldout_max));
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!s) abort();
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  ts_model_doc *d = malloc(sizeof *d), *back = malloc(sizeof *back);
  if (!text || !d || !back) abort();
  memcpy(text, data, size);
  text[size] = 0; /* files are read whole and NUL-terminated */
  char err[256] = "";
  int rc = ts_model_doc_parse(text, d, err, sizeof err);
  free(text);
  if (rc) {
    if (rc != TS_EINVAL || !err[0] || strchr(err, '\n')) abort();
  } else {
    check_valid(d);
    char *s = write_back(d);
    if (ts_model_doc_parse(s, back, err, sizeof err)) abort();
    cJSON_free(s);
    if (strcmp(back->tissue, d->tissue) || strcmp(back->material, d->material) ||
        back->kind != d->kind || back->n_theta != d->n_theta || back->samples != d->samples ||
        back->loss != d->loss || back->heldout_rmse != d->heldout_rmse ||
        back->heldout_max != d->heldout_max)
      abort();
    for (uint32_t i = 0; i < d->n_theta; i++)
      if (back->theta[i] != d->theta[i]) abort();
  }
  free(d);
  free(back);
  return 0;
}
