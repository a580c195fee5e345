/*
 * ts_tissue.c: the tissue object: allocation, destruction, reset and bounds
 * (see ts_tissue.h for the node layout). The builders live in
 * ts_tissue_build.c (from an extrusion) and ts_patch.c (the built-in patch);
 * the step's private data (t->ms) is one block made by ts_massspring.c.
 */
#include "ts_tissue.h"

#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"

int ts_tissue_alloc(uint32_t n_nodes, uint32_t n_springs, uint32_t n_tris, ts_tissue **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (n_nodes == 0) return TS_EINVAL;
  ts_tissue *t = calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->n_nodes = n_nodes;
  t->n_springs = n_springs;
  t->n_tris = n_tris;
  t->x = calloc(n_nodes, sizeof *t->x);
  t->v = calloc(n_nodes, sizeof *t->v);
  t->f = calloc(n_nodes, sizeof *t->f);
  t->f_ext = calloc(n_nodes, sizeof *t->f_ext);
  t->rest = calloc(n_nodes, sizeof *t->rest);
  t->inv_mass = calloc(n_nodes, sizeof *t->inv_mass);
  t->x_prev = calloc(n_nodes, sizeof *t->x_prev);
  t->acc = calloc(n_nodes, sizeof *t->acc);
  t->acc_prev = calloc(n_nodes, sizeof *t->acc_prev);
  t->branch = calloc(n_nodes, sizeof *t->branch);
  t->springs = calloc(n_springs ? n_springs : 1, sizeof *t->springs);
  t->tris = calloc(n_tris ? n_tris : 1, sizeof *t->tris);
  if (!t->x || !t->v || !t->f || !t->f_ext || !t->rest || !t->inv_mass || !t->x_prev ||
      !t->acc || !t->acc_prev || !t->branch || !t->springs || !t->tris) {
    ts_tissue_destroy(t);
    return TS_ENOMEM;
  }
  t->beeman_threshold = TS_DEFAULT_BEEMAN_THRESHOLD;
  t->strain_iterations = TS_DEFAULT_STRAIN_ITERATIONS;
  *out = t;
  return 0;
}

void ts_tissue_copy_settings(ts_tissue *dst, const ts_tissue *src) {
  memcpy(dst->gravity, src->gravity, sizeof dst->gravity);
  dst->drag = src->drag;
  dst->beeman_threshold = src->beeman_threshold;
  dst->strain_iterations = src->strain_iterations;
  dst->mass_scaling = src->mass_scaling;
  dst->max_substeps = src->max_substeps;
  dst->time = src->time;
  dst->steps = src->steps;
}

void ts_tissue_destroy(ts_tissue *t) {
  if (!t) return;
  free(t->x);
  free(t->v);
  free(t->f);
  free(t->f_ext);
  free(t->rest);
  free(t->inv_mass);
  free(t->x_prev);
  free(t->acc);
  free(t->acc_prev);
  free(t->branch);
  free(t->springs);
  free(t->tris);
  free(t->ms);
  ts_handover_free(t->hand);
  free(t);
}

void ts_tissue_reset(ts_tissue *t) {
  if (!t) return;
  size_t n = t->n_nodes;
  memcpy(t->x, t->rest, sizeof *t->x * n);
  memcpy(t->x_prev, t->rest, sizeof *t->x_prev * n);
  memset(t->v, 0, sizeof *t->v * n);
  memset(t->f, 0, sizeof *t->f * n);
  memset(t->acc, 0, sizeof *t->acc * n);
  memset(t->acc_prev, 0, sizeof *t->acc_prev * n);
  memset(t->branch, TS_BRANCH_TAYLOR, n);
  t->h_prev = 0; /* the next substep starts over with Taylor */
  ts_handover_free(t->hand);
  t->hand = NULL;
}

void ts_tissue_bounds(const ts_tissue *t, double lo[3], double hi[3]) {
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = 0.0;
  if (!t || t->n_nodes == 0) return;
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = t->x[0][a];
  for (uint32_t i = 1; i < t->n_nodes; i++) {
    for (int a = 0; a < 3; a++) {
      double c = t->x[i][a];
      if (c < lo[a]) lo[a] = c;
      if (c > hi[a]) hi[a] = c;
    }
  }
}
