/*
 * ts_layer_spec.h: how a stored tissue is rebuilt from its mesh, as kept in
 * the tissue catalog (tissues.layer_spec, ts_storage.h): the scale that takes
 * the stored file's units to metres and the layers the surface was extruded
 * into (name, thickness, material fit, fibre direction). Stored as a small
 * JSON text,
 *   {"scale":0.01,"layers":[{"name":"mucosa","thickness":0.0005,"material":"",
 *                            "fibre":[1,0,0]}]}
 * where "fibre" is written only for a layer that has one (older specs
 * without it read as isotropic layers).
 * written and read here so that the daemon needs no JSON library. Numbers are
 * written with 17 significant digits, so a round trip gives the same doubles.
 */
#ifndef TS_LAYER_SPEC_H
#define TS_LAYER_SPEC_H

#include <stddef.h>
#include <stdint.h>

#define TS_LAYER_SPEC_MAX 8      /* layers (the core's TS_MAX_LAYERS) */
#define TS_LAYER_SPEC_NAME 32    /* bytes with the NUL (the core's TS_NAME_MAX) */
#define TS_LAYER_SPEC_MATERIAL 64

typedef struct ts_layer_spec_layer {
  char name[TS_LAYER_SPEC_NAME];         /* non-empty */
  double thickness;                      /* m, finite, > 0 */
  char material[TS_LAYER_SPEC_MATERIAL]; /* stored fit name; "" = the layer's built-in law */
  double fibre[3];                       /* fibre direction (any length, finite);
                                            zero = none: the layer is isotropic */
} ts_layer_spec_layer;

typedef struct ts_layer_spec {
  double scale;                          /* file units to metres, finite, > 0 */
  uint32_t n_layers;                     /* 1..TS_LAYER_SPEC_MAX */
  ts_layer_spec_layer layers[TS_LAYER_SPEC_MAX];
} ts_layer_spec;

/* Writes ls as JSON text into buf (NUL-terminated). Returns the length, or
 * TS_EINVAL (a value out of the ranges above) or TS_ETOOBIG (cap too small;
 * 2048 bytes always suffice). */
int ts_layer_spec_format(const ts_layer_spec *ls, char *buf, size_t cap);

/* Parses text written by ts_layer_spec_format (any JSON whitespace, keys in
 * any order; unknown keys, missing keys and out-of-range values are refused).
 * Returns 0, or TS_EINVAL with the problem and its byte offset in err. */
int ts_layer_spec_parse(const char *text, ts_layer_spec *out, char *err, size_t errcap);

#endif
