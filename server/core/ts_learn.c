/*
 * ts_learn.c: samples, the linear models, training by batch gradient descent
 * and by the normal equations, prediction and theta's byte layout
 * (ts_learn.h states the method and this project's reading of it).
 */
#include "ts_learn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

_Static_assert(1 + TS_LEARN_HOPS <= TS_LEARN_MAX_PARAMS, "the spread model fits theta");
_Static_assert(1 + TS_LEARN_HOPS2 <= TS_LEARN_MAX_PARAMS, "the spread2 model fits theta");
_Static_assert(1 + TS_LEARN_HOPS2R <= TS_LEARN_MAX_PARAMS, "the spread2r model fits theta");
_Static_assert(TS_LEARN_HOPS <= 16 && TS_LEARN_HOPS2 <= 16 && TS_LEARN_HOPS2R <= 16,
               "the spread models' sweeps stay few");

const char *ts_learn_kind_name(ts_learn_kind k) {
  switch (k) {
  case TS_LEARN_METHOD:
    return "method";
  case TS_LEARN_RICH:
    return "rich";
  case TS_LEARN_SPREAD:
    return "spread";
  case TS_LEARN_SPREAD2:
    return "spread2";
  case TS_LEARN_SPREAD2R:
    return "spread2r";
  }
  return NULL;
}

int ts_learn_kind_parse(const char *name, ts_learn_kind *out) {
  if (!name || !out) return TS_EINVAL;
  if (strcmp(name, "method") == 0)
    *out = TS_LEARN_METHOD;
  else if (strcmp(name, "rich") == 0)
    *out = TS_LEARN_RICH;
  else if (strcmp(name, "spread") == 0)
    *out = TS_LEARN_SPREAD;
  else if (strcmp(name, "spread2") == 0)
    *out = TS_LEARN_SPREAD2;
  else if (strcmp(name, "spread2r") == 0)
    *out = TS_LEARN_SPREAD2R;
  else
    return TS_EINVAL;
  return 0;
}

uint32_t ts_learn_n_params(ts_learn_kind k, uint32_t n_sheets) {
  if (n_sheets == 0 || n_sheets > TS_MAX_LAYERS + 1) return 0;
  switch (k) {
  case TS_LEARN_METHOD:
    return 3;
  case TS_LEARN_RICH:
    return 4 * n_sheets;
  case TS_LEARN_SPREAD:
    return 1 + TS_LEARN_HOPS;
  case TS_LEARN_SPREAD2:
    return 1 + TS_LEARN_HOPS2;
  case TS_LEARN_SPREAD2R:
    return 1 + TS_LEARN_HOPS2R;
  }
  return 0;
}

int ts_learn_set_create(uint32_t cap, uint32_t n_sheets, ts_learn_set **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (cap == 0 || n_sheets == 0 || n_sheets > TS_MAX_LAYERS + 1) return TS_EINVAL;
  ts_learn_set *s = calloc(1, sizeof *s);
  if (!s) return TS_ENOMEM;
  s->cap = cap;
  s->n_sheets = n_sheets;
  if (ts_learn_set_reserve(s, cap < TS_LEARN_SET_FIRST_ROOM ? cap : TS_LEARN_SET_FIRST_ROOM)) {
    free(s);
    return TS_ENOMEM;
  }
  *out = s;
  return 0;
}

int ts_learn_set_reserve(ts_learn_set *s, uint32_t n) {
  if (!s) return TS_EINVAL;
  if (n > s->cap) return TS_EFULL;
  if (n <= s->room && s->s) return 0;
  uint64_t room = (uint64_t)s->room * 2;
  if (room < n) room = n;
  if (room > s->cap) room = s->cap;
  if (room == 0) room = 1;
  if (room > SIZE_MAX / sizeof *s->s) return TS_ENOMEM;
  ts_learn_sample *p = realloc(s->s, sizeof *s->s * (size_t)room);
  if (!p) return TS_ENOMEM;
  s->s = p;
  s->room = (uint32_t)room;
  return 0;
}

int ts_learn_set_copy(const ts_learn_set *src, ts_learn_set **out) {
  if (!src || !out) return TS_EINVAL;
  int rc = ts_learn_set_create(src->n ? src->n : 1, src->n_sheets, out);
  if (!rc && (rc = ts_learn_set_reserve(*out, (*out)->cap))) {
    ts_learn_set_free(*out);
    *out = NULL;
  }
  if (rc) return rc;
  memcpy((*out)->s, src->s, sizeof *src->s * src->n);
  (*out)->n = src->n;
  (*out)->intervals = src->intervals;
  (*out)->unconverged = src->unconverged;
  (*out)->worst_residual = src->worst_residual;
  return 0;
}

void ts_learn_set_free(ts_learn_set *s) {
  if (!s) return;
  free(s->s);
  free(s);
}

/* The feature row of sample s for axis c; returns its length. */
static uint32_t feature_row(ts_learn_kind k, uint32_t n_sheets, const ts_learn_sample *s, int c,
                            double *phi) {
  uint32_t p = ts_learn_n_params(k, n_sheets);
  if (k == TS_LEARN_METHOD) {
    phi[0] = s->x0[c];
    phi[1] = s->f[c];
    phi[2] = s->g[c];
    return p;
  }
  if (k == TS_LEARN_RICH) {
    memset(phi, 0, sizeof *phi * p);
    uint32_t o = 4 * (s->sheet < n_sheets ? s->sheet : n_sheets - 1);
    phi[o + 0] = s->x0[c];
    phi[o + 1] = s->f[c];
    phi[o + 2] = s->g[c];
    phi[o + 3] = s->f1[c];
    return p;
  }
  phi[0] = s->x0[c]; /* the spread models: one theta for every sheet */
  if (k == TS_LEARN_SPREAD2) {
    for (uint32_t j = 0; j < TS_LEARN_HOPS2; j++) phi[1 + j] = s->u2[j][c];
    return p;
  }
  if (k == TS_LEARN_SPREAD2R) {
    for (uint32_t j = 0; j < TS_LEARN_HOPS2R; j++) phi[1 + j] = s->u2r[j][c];
    return p;
  }
  for (uint32_t j = 0; j < TS_LEARN_HOPS; j++) phi[1 + j] = s->u[j][c];
  return p;
}

void ts_learn_predict_sample(const ts_learn_model *m, const ts_learn_sample *s, double x1[3]) {
  double phi[TS_LEARN_MAX_PARAMS];
  for (int c = 0; c < 3; c++) {
    uint32_t p = feature_row(m->kind, m->n_sheets, s, c, phi);
    double y = 0;
    for (uint32_t j = 0; j < p; j++) y += phi[j] * m->theta[j];
    x1[c] = y;
  }
}

double ts_learn_loss(const ts_learn_model *m, const ts_learn_set *set) {
  if (!m || !set || set->n == 0 || m->n_sheets != set->n_sheets) return NAN;
  double sum = 0;
  for (uint32_t i = 0; i < set->n; i++) {
    double y[3];
    ts_learn_predict_sample(m, &set->s[i], y);
    for (int c = 0; c < 3; c++) {
      double e = y[c] - set->s[i].x1[c];
      sum += e * e;
    }
  }
  return sum / (2.0 * 3.0 * set->n);
}

/* The scaled normal moments of a set: A~ (p x p, row-major), c~, the
 * scales D and the mean square target. */
typedef struct moments {
  uint32_t p;
  double A[TS_LEARN_MAX_PARAMS * TS_LEARN_MAX_PARAMS];
  double c[TS_LEARN_MAX_PARAMS];
  double D[TS_LEARN_MAX_PARAMS];
  double yy;
  double L[TS_LEARN_MAX_PARAMS * TS_LEARN_MAX_PARAMS]; /* Cholesky scratch */
} moments;

static int build_moments(const ts_learn_set *set, ts_learn_kind kind, moments *mo) {
  if (!set || set->n == 0) return TS_EINVAL;
  uint32_t p = ts_learn_n_params(kind, set->n_sheets);
  if (p == 0) return TS_EINVAL;
  memset(mo, 0, sizeof *mo);
  mo->p = p;
  double phi[TS_LEARN_MAX_PARAMS];
  for (uint32_t i = 0; i < set->n; i++)
    for (int c = 0; c < 3; c++) {
      feature_row(kind, set->n_sheets, &set->s[i], c, phi);
      double y = set->s[i].x1[c];
      for (uint32_t a = 0; a < p; a++) {
        if (phi[a] == 0) continue;
        for (uint32_t b = 0; b < p; b++) mo->A[a * p + b] += phi[a] * phi[b];
        mo->c[a] += phi[a] * y;
      }
      mo->yy += y * y;
    }
  double N = 3.0 * set->n;
  for (uint32_t a = 0; a < p * p; a++) mo->A[a] /= N;
  for (uint32_t a = 0; a < p; a++) mo->c[a] /= N;
  mo->yy /= N;
  for (uint32_t a = 0; a < p; a++) {
    if (!(mo->A[a * p + a] > 0) || !isfinite(mo->A[a * p + a])) return TS_ERANGE;
    mo->D[a] = sqrt(mo->A[a * p + a]);
  }
  for (uint32_t a = 0; a < p; a++) {
    for (uint32_t b = 0; b < p; b++) mo->A[a * p + b] /= mo->D[a] * mo->D[b];
    mo->c[a] /= mo->D[a];
  }
  return 0;
}

/* J on the scaled problem: (theta^T A theta - 2 c^T theta + yy) / 2. */
static double scaled_loss(const moments *mo, const double *th) {
  uint32_t p = mo->p;
  double q = 0, l = 0;
  for (uint32_t a = 0; a < p; a++) {
    double r = 0;
    for (uint32_t b = 0; b < p; b++) r += mo->A[a * p + b] * th[b];
    q += th[a] * r;
    l += mo->c[a] * th[a];
  }
  return fmax(0.0, 0.5 * (q - 2 * l + mo->yy));
}

/* Cholesky solve of A x = c (A~ is SPD when the columns are independent). */
static int cholesky_solve(moments *mo, double *x) {
  uint32_t p = mo->p;
  double *L = mo->L;
  memset(L, 0, sizeof mo->L);
  for (uint32_t i = 0; i < p; i++)
    for (uint32_t j = 0; j <= i; j++) {
      double s = mo->A[i * p + j];
      for (uint32_t k = 0; k < j; k++) s -= L[i * p + k] * L[j * p + k];
      if (i == j) {
        if (!(s > 1e-14)) return TS_ERANGE; /* unit diagonal: relative pivot */
        L[i * p + i] = sqrt(s);
      } else {
        L[i * p + j] = s / L[j * p + j];
      }
    }
  double y[TS_LEARN_MAX_PARAMS];
  for (uint32_t i = 0; i < p; i++) {
    double s = mo->c[i];
    for (uint32_t k = 0; k < i; k++) s -= L[i * p + k] * y[k];
    y[i] = s / L[i * p + i];
  }
  for (uint32_t i = p; i-- > 0;) {
    double s = y[i];
    for (uint32_t k = i + 1; k < p; k++) s -= L[k * p + i] * x[k];
    x[i] = s / L[i * p + i];
  }
  return 0;
}

static void finish_model(const ts_learn_set *set, ts_learn_kind kind, const moments *mo,
                         const double *th, ts_learn_model *out) {
  out->kind = kind;
  out->n_sheets = set->n_sheets;
  out->n_params = mo->p;
  memset(out->theta, 0, sizeof out->theta);
  for (uint32_t a = 0; a < mo->p; a++) out->theta[a] = th[a] / mo->D[a];
  out->loss = scaled_loss(mo, th);
  out->samples = set->n;
}

ts_learn_train_opts ts_learn_train_defaults(void) {
  ts_learn_train_opts o;
  memset(&o, 0, sizeof o);
  o.beta = 0;
  o.rel_tol = 1e-15;
  o.max_iter = 50000000;
  return o;
}

int ts_learn_train_closed(const ts_learn_set *set, ts_learn_kind kind, ts_learn_model *out) {
  if (!out) return TS_EINVAL;
  moments *mo = malloc(sizeof *mo);
  if (!mo) return TS_ENOMEM;
  int rc = build_moments(set, kind, mo);
  double th[TS_LEARN_MAX_PARAMS];
  if (!rc) rc = cholesky_solve(mo, th);
  if (!rc) {
    memset(out, 0, sizeof *out);
    finish_model(set, kind, mo, th, out);
    out->converged = 1;
  }
  free(mo);
  return rc;
}

/* lambda_max of A~ by power iteration (A~ is symmetric positive definite). */
static double lambda_max(const moments *mo) {
  uint32_t p = mo->p;
  double v[TS_LEARN_MAX_PARAMS], w[TS_LEARN_MAX_PARAMS], lam = 0;
  for (uint32_t a = 0; a < p; a++) v[a] = 1.0 / sqrt((double)p) * (1.0 + 0.01 * a);
  for (int it = 0; it < 500; it++) {
    double n2 = 0;
    for (uint32_t a = 0; a < p; a++) {
      w[a] = 0;
      for (uint32_t b = 0; b < p; b++) w[a] += mo->A[a * p + b] * v[b];
      n2 += w[a] * w[a];
    }
    double nrm = sqrt(n2);
    if (!(nrm > 0)) break;
    double prev = lam;
    lam = nrm;
    for (uint32_t a = 0; a < p; a++) v[a] = w[a] / nrm;
    if (it > 10 && fabs(lam - prev) < 1e-12 * lam) break;
  }
  return lam;
}

int ts_learn_train_gd(const ts_learn_set *set, ts_learn_kind kind, const ts_learn_train_opts *opts,
                      ts_learn_model *out) {
  if (!out || !opts || !(opts->rel_tol > 0) || opts->max_iter < 1 || !(opts->beta >= 0) ||
      !isfinite(opts->beta))
    return TS_EINVAL;
  moments *mo = malloc(sizeof *mo);
  if (!mo) return TS_ENOMEM;
  int rc = build_moments(set, kind, mo);
  if (rc) {
    free(mo);
    return rc;
  }
  uint32_t p = mo->p;
  double beta = opts->beta > 0 ? opts->beta : 1.0 / lambda_max(mo);
  double th[TS_LEARN_MAX_PARAMS] = {0}, g[TS_LEARN_MAX_PARAMS];
  uint64_t it = 0, every = opts->max_iter / 64 ? opts->max_iter / 64 : 1;
  if (every > 100000) every = 100000;
  double rel = INFINITY;
  int converged = 0;
  while (it < opts->max_iter) {
    double d2 = 0, t2 = 0;
    for (uint32_t a = 0; a < p; a++) {
      double r = -mo->c[a];
      for (uint32_t b = 0; b < p; b++) r += mo->A[a * p + b] * th[b];
      g[a] = r;
    }
    for (uint32_t a = 0; a < p; a++) {
      double step = beta * g[a];
      th[a] -= step;
      d2 += step * step;
      t2 += th[a] * th[a];
    }
    it++;
    rel = t2 > 0 ? sqrt(d2 / t2) : INFINITY;
    if (!isfinite(rel) && t2 > 0) break; /* diverged: beta too large */
    if (rel <= opts->rel_tol) {
      converged = 1;
      break;
    }
    if (opts->progress && it % every == 0) {
      double fi = (double)it / (double)opts->max_iter;
      double fr = rel < 1 ? log(rel) / log(opts->rel_tol) : 0;
      opts->progress(opts->progress_ud, fmin(1.0, fmax(fi, fr)), scaled_loss(mo, th));
    }
  }
  for (uint32_t a = 0; a < p; a++)
    if (!isfinite(th[a])) {
      free(mo);
      return TS_ERANGE;
    }
  memset(out, 0, sizeof *out);
  finish_model(set, kind, mo, th, out);
  out->iterations = it;
  out->rel_change = rel;
  out->converged = converged;
  if (opts->progress) opts->progress(opts->progress_ud, 1.0, out->loss);
  free(mo);
  return 0;
}

size_t ts_learn_theta_encode(const ts_learn_model *m, uint8_t *buf, size_t cap) {
  if (!m || !buf || m->n_params > TS_LEARN_MAX_PARAMS || cap < 8u * m->n_params) return 0;
  for (uint32_t a = 0; a < m->n_params; a++) {
    uint64_t u;
    memcpy(&u, &m->theta[a], 8);
    for (int k = 0; k < 8; k++) buf[8 * a + k] = (uint8_t)(u >> (8 * k));
  }
  return 8u * m->n_params;
}

int ts_learn_theta_decode(ts_learn_kind kind, uint32_t n_sheets, const uint8_t *buf, size_t bytes,
                          ts_learn_model *out) {
  uint32_t p = ts_learn_n_params(kind, n_sheets);
  if (!out || !buf || p == 0 || bytes != 8u * p) return TS_EINVAL;
  memset(out, 0, sizeof *out);
  for (uint32_t a = 0; a < p; a++) {
    uint64_t u = 0;
    for (int k = 0; k < 8; k++) u |= (uint64_t)buf[8 * a + k] << (8 * k);
    memcpy(&out->theta[a], &u, 8);
    if (!isfinite(out->theta[a])) return TS_ENAN;
  }
  out->kind = kind;
  out->n_sheets = n_sheets;
  out->n_params = p;
  return 0;
}

const char *ts_learn_solve_name(ts_learn_solve_kind k) {
  switch (k) {
  case TS_LEARN_SOLVE_UNKNOWN:
    return "unknown";
  case TS_LEARN_SOLVE_PLAIN:
    return "plain";
  case TS_LEARN_SOLVE_REFINED:
    return "refined";
  }
  return NULL;
}

int ts_learn_solve_parse(const char *name, double refine_edge, ts_learn_solve *out) {
  if (!name || !out) return TS_EINVAL;
  ts_learn_solve s = {TS_LEARN_SOLVE_UNKNOWN, 0};
  if (strcmp(name, "unknown") == 0 || strcmp(name, "plain") == 0) {
    if (refine_edge != 0) return TS_EINVAL;
    s.kind = name[0] == 'p' ? TS_LEARN_SOLVE_PLAIN : TS_LEARN_SOLVE_UNKNOWN;
  } else if (strcmp(name, "refined") == 0) {
    if (!(refine_edge > 0)) return TS_EINVAL; /* also NaN */
    s.kind = TS_LEARN_SOLVE_REFINED;
    s.refine_edge = refine_edge;
  } else {
    return TS_EINVAL;
  }
  *out = s;
  return 0;
}

int ts_learn_solve_matches(ts_learn_solve model, ts_learn_solve session) {
  if (model.kind == TS_LEARN_SOLVE_UNKNOWN || session.kind == TS_LEARN_SOLVE_UNKNOWN) return 0;
  if (model.kind != session.kind) return 0;
  if (model.kind == TS_LEARN_SOLVE_PLAIN) return 1;
  double a = model.refine_edge, b = session.refine_edge;
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= 1e-9 * fmax(a, b);
}

size_t ts_learn_solve_describe(ts_learn_solve s, char *buf, size_t cap) {
  if (!buf || cap == 0) return 0;
  int n;
  if (s.kind == TS_LEARN_SOLVE_REFINED && isfinite(s.refine_edge))
    n = snprintf(buf, cap, "refined (edge %.6g mm)", s.refine_edge * 1e3);
  else if (s.kind == TS_LEARN_SOLVE_REFINED)
    n = snprintf(buf, cap, "refined (copied, not refined)");
  else
    n = snprintf(buf, cap, "%s", ts_learn_solve_name(s.kind) ? ts_learn_solve_name(s.kind) : "?");
  if (n < 0) return 0;
  return (size_t)n < cap ? (size_t)n : cap - 1;
}
