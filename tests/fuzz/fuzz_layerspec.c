/*
 * fuzz_layerspec.c: fuzz target for the reader of a stored tissue's layer
 * spec (storage/ts_layer_spec.c), the JSON text the daemon reads back from
 * the tissue catalog to rebuild a tissue from its stored mesh. Seeds:
 * tests/fuzz/corpus/layerspec/.
 *
 * Besides "no crash, no out-of-bounds access, no leak" (ASan + UBSan), every
 * input checks invariants that would expose wrong results:
 *   - a refusal is TS_EINVAL with a message;
 *   - an accepted spec has a finite positive scale, 1..8 layers, each with
 *     a non-empty NUL-terminated name, a finite positive thickness and a
 *     NUL-terminated material;
 *   - an accepted spec is written back by ts_layer_spec_format, and reading
 *     that text gives the same spec, bit for bit (17 significant digits
 *     round-trip every double).
 *
 * The reader has no dependencies, and the fuzz targets link only ts_proto
 * (tests/fuzz/CMakeLists.txt), so its source is compiled in directly.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../storage/ts_layer_spec.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_valid(const ts_layer_spec *ls) {
  if (!(isfinite(ls->scale) && ls->scale > 0)) abort();
  if (ls->n_layers < 1 || ls->n_layers > TS_LAYER_SPEC_MAX) abort();
  for (uint32_t i = 0; i < ls->n_layers; i++) {
    const ts_layer_spec_layer *l = &ls->layers[i];
    if (!memchr(l->name, 0, sizeof l->name) || !l->name[0]) abort();
    if (!memchr(l->material, 0, sizeof l->material)) abort();
    if (!(isfinite(l->thickness) && l->thickness > 0)) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0; /* the catalog holds NUL-terminated text */
  ts_layer_spec ls;
  char err[256] = "";
  int rc = ts_layer_spec_parse(text, &ls, err, sizeof err);
  free(text);
  if (rc) {
    if (rc != TS_EINVAL || !err[0]) abort();
    return 0;
  }
  check_valid(&ls);
  char buf[2048];
  int n = ts_layer_spec_format(&ls, buf, sizeof buf);
  if (n < 0) abort(); /* whatever the reader accepts, the writer can write */
  ts_layer_spec back;
  if (ts_layer_spec_parse(buf, &back, err, sizeof err)) abort();
  if (back.n_layers != ls.n_layers || memcmp(&back.scale, &ls.scale, sizeof ls.scale)) abort();
  for (uint32_t i = 0; i < ls.n_layers; i++) {
    if (strcmp(back.layers[i].name, ls.layers[i].name) ||
        strcmp(back.layers[i].material, ls.layers[i].material) ||
        memcmp(&back.layers[i].thickness, &ls.layers[i].thickness, sizeof(double)))
      abort();
  }
  return 0;
}
