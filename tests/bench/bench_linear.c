/*
 * bench_linear.c: the plain linear spring loop reference (see
 * bench_linear.h).
 */
#include "bench_linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct ts__lspring {
  uint32_t a, b;
  double rest; /* m */
  double k;    /* N/m */
} ts__lspring;

struct ts_bench_linear {
  uint32_t n_nodes, n_springs;
  double (*x)[3], (*v)[3], (*f)[3];
  double *inv_mass;
  ts__lspring *s;
  double g[3];
};

void ts_bench_linear_destroy(ts_bench_linear *l) {
  if (!l) return;
  free(l->x);
  free(l->v);
  free(l->f);
  free(l->inv_mass);
  free(l->s);
  free(l);
}

ts_bench_linear *ts_bench_linear_create(const ts_tissue *t) {
  ts_bench_linear *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->n_nodes = t->n_nodes;
  l->n_springs = t->n_springs;
  l->x = malloc(sizeof *l->x * t->n_nodes);
  l->v = calloc(t->n_nodes, sizeof *l->v);
  l->f = calloc(t->n_nodes, sizeof *l->f);
  l->inv_mass = malloc(sizeof *l->inv_mass * t->n_nodes);
  l->s = malloc(sizeof *l->s * (t->n_springs ? t->n_springs : 1));
  if (!l->x || !l->v || !l->f || !l->inv_mass || !l->s) {
    ts_bench_linear_destroy(l);
    return NULL;
  }
  memcpy(l->x, t->rest, sizeof *l->x * t->n_nodes);
  memcpy(l->inv_mass, t->inv_mass, sizeof *l->inv_mass * t->n_nodes);
  for (uint32_t i = 0; i < t->n_springs; i++) {
    l->s[i].a = t->springs[i].a;
    l->s[i].b = t->springs[i].b;
    l->s[i].rest = t->springs[i].rest;
    l->s[i].k = t->springs[i].k;
  }
  for (int k = 0; k < 3; k++) l->g[k] = t->gravity[k];
  return l;
}

double ts_bench_linear_stable_h(const ts_bench_linear *l) {
  double *row = calloc(l->n_nodes, sizeof *row);
  if (!row) return 0;
  for (uint32_t i = 0; i < l->n_springs; i++) {
    const ts__lspring *s = &l->s[i];
    double wa = l->inv_mass[s->a], wb = l->inv_mass[s->b], c = sqrt(wa * wb);
    row[s->a] += fabs(s->k) * (wa + c);
    row[s->b] += fabs(s->k) * (wb + c);
  }
  double w2 = 0;
  for (uint32_t i = 0; i < l->n_nodes; i++)
    if (row[i] > w2) w2 = row[i];
  free(row);
  return w2 > 0 ? 2.0 / sqrt(w2) : INFINITY;
}

static void spring_pass(ts_bench_linear *l) {
  const double (*restrict x)[3] = (const double (*)[3])l->x;
  double (*restrict f)[3] = l->f;
  const ts__lspring *restrict s = l->s;
  memset(f, 0, sizeof *f * l->n_nodes);
  for (uint32_t i = 0, n = l->n_springs; i < n; i++) {
    const uint32_t a = s[i].a, b = s[i].b;
    const double dx = x[b][0] - x[a][0], dy = x[b][1] - x[a][1], dz = x[b][2] - x[a][2];
    const double len = sqrt(dx * dx + dy * dy + dz * dz);
    const double fs = s[i].k * (len - s[i].rest) / len;
    f[a][0] += fs * dx;
    f[a][1] += fs * dy;
    f[a][2] += fs * dz;
    f[b][0] -= fs * dx;
    f[b][1] -= fs * dy;
    f[b][2] -= fs * dz;
  }
}

static void integrate(ts_bench_linear *l, double h) {
  double (*restrict x)[3] = l->x, (*restrict v)[3] = l->v;
  const double (*restrict f)[3] = (const double (*)[3])l->f;
  const double *restrict im = l->inv_mass;
  for (uint32_t i = 0, n = l->n_nodes; i < n; i++) {
    const double w = im[i];
    if (w == 0) continue;
    for (int k = 0; k < 3; k++) {
      v[i][k] += h * (w * f[i][k] + l->g[k]);
      x[i][k] += h * v[i][k];
    }
  }
}

void ts_bench_linear_run(ts_bench_linear *l, double h, uint32_t passes) {
  for (uint32_t p = 0; p < passes; p++) {
    spring_pass(l);
    integrate(l, h);
  }
}

int ts_bench_linear_finite(const ts_bench_linear *l) {
  for (uint32_t i = 0; i < l->n_nodes; i++)
    if (!isfinite(l->x[i][0] + l->x[i][1] + l->x[i][2])) return 0;
  return 1;
}

uint32_t ts_bench_linear_springs(const ts_bench_linear *l) { return l->n_springs; }
