/*
 * ts_tissue.c: the tissue object: allocation, destruction, reset, bounds
 * and the (sheet, column) -> node map (see ts_tissue.h for the node
 * layout). The builders live in
 * ts_tissue_build.c (from an extrusion) and ts_patch.c (the built-in patch);
 * the step's private data (t->ms) is one block made by ts_massspring.c,
 * with the thin pass's surface tree (ts_ms_contact.c; ts__ms_free frees both).
 */
#include "ts_tissue.h"

#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover.h"
#include "ts_ms_internal.h"

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
  dst->guard_tools_only = src->guard_tools_only;
  dst->local_mass_scaling = src->local_mass_scaling;
  memcpy(dst->lms_ref, src->lms_ref, sizeof dst->lms_ref);
  dst->lms_ref_sheet = src->lms_ref_sheet;
  dst->time = src->time;
  dst->steps = src->steps;
  dst->stop = src->stop;
}

uint32_t ts_tissue_columns(const ts_tissue *t) {
  if (!t || t->n_sheets == 0) return 0;
  if (t->column_node)
    return t->n_columns > 0 && (uint64_t)t->n_sheets * t->n_columns == t->n_nodes ? t->n_columns : 0;
  return t->nodes_per_sheet > 0 && (uint64_t)t->n_sheets * t->nodes_per_sheet == t->n_nodes
             ? t->nodes_per_sheet
             : 0;
}

int ts_tissue_set_columns(ts_tissue *t, uint32_t n_columns, const uint32_t *map) {
  if (!t || n_columns == 0 || (uint64_t)t->n_sheets * n_columns != t->n_nodes) return TS_EINVAL;
  const size_t n = t->n_nodes;
  uint32_t *m = malloc(sizeof *m * n);
  uint8_t *seen = map ? calloc(n, 1) : NULL;
  if (!m || (map && !seen)) {
    free(m);
    free(seen);
    return TS_ENOMEM;
  }
  for (size_t k = 0; k < n; k++) {
    uint32_t i = map ? map[k] : (uint32_t)k;
    if (map && (i >= n || seen[i]++)) { /* out of range, or a node twice */
      free(m);
      free(seen);
      return TS_EINVAL;
    }
    m[k] = i;
  }
  free(seen);
  free(t->column_node);
  t->column_node = m;
  t->n_columns = n_columns;
  return 0;
}

int ts_tissue_copy_columns(ts_tissue *dst, const ts_tissue *src, const uint32_t *loc) {
  free(dst->column_node);
  dst->column_node = NULL;
  dst->n_columns = 0;
  dst->nodes_per_sheet = 0;
  const uint32_t nc = ts_tissue_columns(src);
  if (nc == 0 || dst->n_nodes != src->n_nodes || dst->n_sheets != src->n_sheets) return 0;
  uint32_t *m = malloc(sizeof *m * src->n_nodes);
  if (!m) return TS_ENOMEM;
  for (uint32_t s = 0, k = 0; s < src->n_sheets; s++)
    for (uint32_t j = 0; j < nc; j++, k++) {
      uint32_t i = ts_tissue_sheet_node(src, s, j);
      m[k] = loc ? loc[i] : i;
      if (m[k] >= dst->n_nodes) { /* not in dst */
        free(m);
        return 0;
      }
    }
  dst->column_node = m;
  dst->n_columns = nc;
  return 0;
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
  free(t->contact_tris);
  free(t->column_node);
  ts__ms_free(t->ms);
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
