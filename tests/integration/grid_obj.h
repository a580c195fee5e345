/*
 * grid_obj.h: the OBJ text of a flat grid for the tests and benchmarks that
 * upload a large mesh (itest_create.c, tests/bench/bench_build.c; the
 * JavaScript twin is gridObj in daemon_proc.mjs): g x g vertices, 0.1 m
 * across in file units of metres, gently curved (y = 0.4 (x^2 + z^2)), in
 * 2 (g - 1)^2 triangles. g = 130 builds for a few seconds in the default
 * three layers.
 */
#ifndef TS_GRID_OBJ_H
#define TS_GRID_OBJ_H

#include <stdio.h>
#include <stdlib.h>

/* malloc'd text (its length in *len), or NULL when out of memory */
static inline char *ts_grid_obj(int g, size_t *len) {
  size_t cap = (size_t)g * g * 48 + (size_t)(g - 1) * (g - 1) * 2 * 40;
  char *s = malloc(cap);
  if (!s) return NULL;
  size_t n = 0;
  for (int i = 0; i < g; i++)
    for (int j = 0; j < g; j++) {
      double x = 0.1 * i / (g - 1) - 0.05, z = 0.1 * j / (g - 1) - 0.05;
      n += (size_t)snprintf(s + n, cap - n, "v %.6f %.6f %.6f\n", x, 0.4 * (x * x + z * z), z);
    }
  for (int i = 0; i + 1 < g; i++)
    for (int j = 0; j + 1 < g; j++) {
      int a = i * g + j + 1, b = a + 1, c = a + g, d = c + 1;
      n += (size_t)snprintf(s + n, cap - n, "f %d %d %d\nf %d %d %d\n", a, b, d, a, d, c);
    }
  *len = n;
  return s;
}

#endif
