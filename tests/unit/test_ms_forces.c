/*
 * test_ms_forces.c: the mass-spring force loop (server/core/ts_ms_forces.c)
 * against the documented law (ts_material.h), evaluated here spring by
 * spring with libm's exp in long double: the tension k'(eps) (L - L0),
 * k'(eps) = k1 e^(b1 eps+) + k2 e^(b2 eps+) (eps+ = max(eps, 0), b eps+
 * capped at 700), or k (L - L0) for a linear spring, plus the damper's
 * c dL/dt, along the spring; and the strain extremes the substep count
 * reads. Also the loop's exponential (ts_exp_spring) against exp and expl.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_ms_internal.h"
#include "ts_tissue.h"
#include "ts_tool.h"

/* A deterministic pseudo-random number in [0, 1) (xorshift64*). */
static double rnd(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* The loop's exponential against libm's over [0, 700]: 2e-14 relative, the
 * bound ts_material.h states (the polynomial's 1.34e-14 plus rounding); the
 * degree-12 form it replaced in the loop stays within 4e-16. */
START_TEST(test_exp_spring_bound) {
  double worst = 0;
  for (int i = 0; i <= 140000; i++) {
    double x = i * 0.005;
    double r = fabs(ts_exp_spring(x) / exp(x) - 1);
    if (r > worst) worst = r;
  }
  uint64_t s = 7;
  for (int i = 0; i < 100000; i++) { /* small arguments, the usual strains */
    double x = 3.0 * rnd(&s);
    double r = fabs(ts_exp_spring(x) / exp(x) - 1);
    if (r > worst) worst = r;
  }
  ck_assert_msg(worst <= 2e-14, "ts_exp_spring: relative error %.3g", worst);
  ck_assert_msg(worst > 1e-16, "ts_exp_spring: %.3g is exp() itself?", worst);
  /* against expl (libm's long double, independent of exp's own rounding),
   * where the reduced argument r is at its ends (|r| = ln2/2, where the
   * polynomial's error and its evaluation's rounding are largest) and in
   * between (|r| = ln2/4) */
  long double wl = 0;
  for (int n = 0; n <= 1009; n++)
    for (int k = -8; k <= 8; k++) {
      double x = (n + 0.5) * 0.69314718055994530942 + k * 1e-13 * (n + 1);
      if (k == 0) x = (n + 0.25) * 0.69314718055994530942;
      if (x < 0 || x > 700) continue;
      long double r = fabsl(ts_exp_spring(x) / expl((long double)x) - 1);
      if (r > wl) wl = r;
    }
  ck_assert_msg(wl <= 2e-14L, "ts_exp_spring: relative error %.3Lg against expl", wl);
  ck_assert_msg(wl > 1e-15L, "ts_exp_spring: %.3Lg against expl: not the degree-9 form?", wl);
}
END_TEST

/* The short exponential of blocks of small strains (ts_material.h) against
 * expl over its range [0, 1/8]: 1e-14 relative (its truncation error is
 * 6.2e-15), and not exp() itself. */
START_TEST(test_exp_spring_small_bound) {
  long double wl = 0;
  for (int i = 0; i <= 200000; i++) {
    const double x = 0.125 * i / 200000.0;
    long double r = fabsl(ts_exp_spring_small(x) / expl((long double)x) - 1);
    if (r > wl) wl = r;
  }
  ck_assert_msg(wl <= 1e-14L, "ts_exp_spring_small: relative error %.3Lg against expl", wl);
  ck_assert_msg(wl > 1e-16L, "ts_exp_spring_small: %.3Lg: exp() itself?", wl);
}
END_TEST

enum { N_PAIRS = 150, N_STAR = 40 };

/* The law's force on node a of spring s (N, long double), and its scale
 * for the tolerance: |tension| and k' L (the force of one rest length,
 * which the rounding of L - L0 is measured against) plus |damper|. */
static void law_force(const ts_tissue *t, const ts_spring *s, long double F[3], double *tens,
                      double *scale, double *eps_out, double *x_out) {
  const double *xa = t->x[s->a], *xb = t->x[s->b], *va = t->v[s->a], *vb = t->v[s->b];
  long double d[3], w[3], L2 = 0, dvd = 0;
  for (int c = 0; c < 3; c++) {
    d[c] = (long double)xb[c] - xa[c];
    w[c] = (long double)vb[c] - va[c];
    L2 += d[c] * d[c];
    dvd += d[c] * w[c];
  }
  long double L = sqrtl(L2), e = L - s->rest, eps = e / s->rest;
  long double ep = eps > 0 ? eps : 0, kp;
  int lin = s->k1 == 0 && s->k2 == 0;
  long double y1 = lin ? 0 : s->b1 * ep, y2 = lin ? 0 : s->b2 * ep;
  if (lin)
    kp = s->k;
  else
    kp = s->k1 * expl(y1 < 700 ? y1 : 700) + s->k2 * expl(y2 < 700 ? y2 : 700);
  long double damp = s->c * dvd / L;
  for (int c = 0; c < 3; c++) F[c] = (kp * e + damp) * d[c] / L;
  *tens = (double)fabsl(kp * e);
  *scale = (double)(kp * L + fabsl(damp));
  *eps_out = (double)eps;
  /* b eps in tension, the larger term's (linear springs: none) */
  *x_out = lin ? -INFINITY : (double)(y1 > y2 ? y1 : y2);
}

/* A random spring of one of the loop's classes, its rest length its current
 * length L times 0.6 to 1.4 (strains -0.29 to 0.67, b up to 100: b eps up to
 * 67, e^67 = 1e29), and now and then one far past the cap (b eps = 100 * 9). */
static ts_spring random_spring(uint64_t *sd, uint32_t a, uint32_t b, double L, int i) {
  ts_spring s = {.a = a < b ? a : b, .b = a < b ? b : a};
  s.rest = L / (0.6 + 0.8 * rnd(sd));
  double k = 10 + 1000 * rnd(sd);
  s.c = rnd(sd) < 0.2 ? 0.0 : 0.05 * rnd(sd);
  switch (i % 5) {
  case 0: s.k = k; break;                                          /* linear */
  case 1: s.k1 = k, s.b1 = 1 + 99 * rnd(sd); break;                 /* one term */
  case 2: s.k1 = k, s.b1 = 1 + 20 * rnd(sd), s.k2 = 0.3 * k, s.b2 = 2 + 30 * rnd(sd); break;
  case 3: s.k1 = k, s.b1 = 0, s.k2 = 2 * k, s.b2 = 5 + 5 * rnd(sd); break; /* linear + exp */
  default: s.k2 = k, s.b2 = 8 * rnd(sd); break;                   /* second term only */
  }
  if (i == 17) s.rest = L / 10, s.k1 = 1e-280, s.b1 = 100, s.k2 = 0, s.b2 = 0; /* capped */
  s.k = s.k > 0 ? s.k : s.k1 + s.k2;
  return s;
}

/* Pairs, a star and a chain of random springs of every class (see
 * test_forces_against_law), prepared, the nodes moving at random. */
static ts_tissue *random_tissue(void) {
  const uint32_t ns = N_PAIRS + 2 * N_STAR, nn = 2 * N_PAIRS + N_STAR + 1;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(nn, ns, 0, &t), 0);
  uint64_t sd = 12345;
  for (uint32_t i = 0; i < nn; i++) {
    for (int c = 0; c < 3; c++) {
      t->rest[i][c] = 0.01 * rnd(&sd) + (c == 0 ? 0.03 * i : 0.0);
      t->x[i][c] = t->x_prev[i][c] = t->rest[i][c];
    }
    t->inv_mass[i] = 1e4;
  }
  for (uint32_t s = 0; s < N_PAIRS; s++) { /* disjoint pairs: nodes 2s, 2s + 1 */
    double L = 0;
    for (int c = 0; c < 3; c++)
      L += (t->x[2 * s + 1][c] - t->x[2 * s][c]) * (t->x[2 * s + 1][c] - t->x[2 * s][c]);
    t->springs[s] = random_spring(&sd, 2 * s + 1, 2 * s, sqrt(L), (int)s);
  }
  const uint32_t hub = 2 * N_PAIRS; /* then a star around hub and a chain */
  for (uint32_t j = 0; j < 2 * N_STAR; j++) {
    uint32_t a = j < N_STAR ? hub : hub + (j - N_STAR), b = j < N_STAR ? hub + 1 + j : a + 1;
    if (b >= nn) b = hub + 1;
    double L = 0;
    for (int c = 0; c < 3; c++) L += (t->x[b][c] - t->x[a][c]) * (t->x[b][c] - t->x[a][c]);
    t->springs[N_PAIRS + j] = random_spring(&sd, a, b, sqrt(L), (int)j + 1000);
  }
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  for (uint32_t i = 0; i < nn; i++)
    for (int c = 0; c < 3; c++) t->v[i][c] = 0.2 * rnd(&sd) - 0.1;
  return t;
}

/* Every spring's force (each spring on its own two nodes, so that a node's
 * force is one spring's), and then springs sharing nodes (a star and a
 * chain: the loop keeps a node's force in registers over its springs), by
 * their sums. Tolerances: 3e-14 of the tension (the exponential's 2e-14
 * plus a few roundings) plus 1e-14 of k' L + |damper| (L - L0 and the
 * velocity term come from differences of positions known to a few ulp of
 * L); the strain extremes to 1e-14 relative (a length and a division). */
/* t->f against the law, spring by spring (see test_forces_against_law for
 * the tolerances); returns the number of springs whose b eps passed 700. */
static int check_law(ts_tissue *t) {
  const uint32_t ns = t->n_springs, nn = t->n_nodes;
  long double (*want)[3] = calloc(nn, sizeof *want);
  double *tol = calloc(nn, sizeof *tol);
  ck_assert_ptr_nonnull(want);
  ck_assert_ptr_nonnull(tol);
  double eps_max = 0, eps_min = 0, x_max = 0;
  int capped = 0;
  for (uint32_t s = 0; s < ns; s++) {
    const ts_spring *sp = &t->springs[s];
    long double F[3];
    double tens, scale, eps, xs;
    law_force(t, sp, F, &tens, &scale, &eps, &xs);
    for (int c = 0; c < 3; c++) want[sp->a][c] += F[c], want[sp->b][c] -= F[c];
    tol[sp->a] += 3e-14 * tens + 1e-14 * scale;
    tol[sp->b] += 3e-14 * tens + 1e-14 * scale;
    eps_max = fmax(eps_max, eps), eps_min = fmin(eps_min, eps), x_max = fmax(x_max, xs);
    capped += xs > 700;
  }
  for (uint32_t i = 0; i < nn; i++)
    for (int c = 0; c < 3; c++)
      ck_assert_msg(fabsl(t->f[i][c] - want[i][c]) <= tol[i],
                    "node %u axis %d: force %.17g N, law %.17Lg N (tolerance %.3g)", i, c,
                    t->f[i][c], want[i][c], tol[i]);
  /* the strains to 1e-14 relative and a few ulp of L / L0 (small strains
   * are a difference of lengths) */
  ck_assert_double_eq_tol(t->ms->eps_max, eps_max, 1e-14 * fabs(eps_max) + 1e-15);
  ck_assert_double_eq_tol(t->ms->eps_min, eps_min, 1e-14 * fabs(eps_min) + 1e-15);
  ck_assert_double_eq_tol(t->ms->x_seen, x_max, 1e-14 * x_max + 1e-15 * t->ms->b_max);
  free(want);
  free(tol);
  return capped;
}

START_TEST(test_forces_against_law) {
  const uint32_t ns = N_PAIRS + 2 * N_STAR, nn = 2 * N_PAIRS + N_STAR + 1;
  ts_tissue *t = random_tissue();
  for (uint32_t i = 0; i < nn; i++) t->f[i][0] = t->f[i][1] = t->f[i][2] = 1e9; /* overwritten */
  ts__ms_spring_forces(t, t->ms);
  int classes[3] = {0, 0, 0};
  for (uint32_t s = 0; s < ns; s++) {
    ts__hs h;
    classes[ts__ms_hot_spring(&t->springs[s], &h)]++;
  }
  ck_assert_int_gt(classes[0], 10);
  ck_assert_int_gt(classes[1], 10);
  ck_assert_int_gt(classes[2], 10);
  ck_assert_int_eq(check_law(t), 1);
  ts_tissue_destroy(t);
}
END_TEST

/* The blocks' exponential (ts_ms_forces.c): a block whose strains at the
 * last pass were small takes the short one (ts_exp_spring_small), and is
 * done again with the full one when a lane turns out past its range.
 * First every block is told its largest b eps was zero, on springs
 * stretched far past that range: the check must send them all back to the
 * full exponential (checked to fail: without it node 4 has 66.8 N against
 * the law's 71.5 N, tolerance 5e-12 N). Then the springs are set to rest lengths
 * that leave every b eps within 0.06, so that the second pass takes the
 * short one: its forces hold to the same tolerances, and differ in the
 * last bits from the first pass's (the other polynomial did run). */
START_TEST(test_forces_short_exponential) {
  ts_tissue *t = random_tissue();
  struct ts__ms *ms = t->ms;
  for (uint32_t k = 0; k < ms->n_blk; k++) ms->blk_x_max[k] = 0;
  ts__ms_spring_forces(t, ms);
  ck_assert_int_eq(check_law(t), 1);
  ts_tissue_destroy(t);

  t = random_tissue();
  uint64_t sd = 99;
  for (uint32_t s = 0; s < t->n_springs; s++) { /* strains within 0.06 / b */
    ts_spring *sp = &t->springs[s];
    double L = 0;
    for (int c = 0; c < 3; c++) {
      const double d = t->x[sp->b][c] - t->x[sp->a][c];
      L += d * d;
    }
    const double b = fmax(fmax(sp->b1, sp->b2), 1.0);
    sp->rest = sqrt(L) / (1.0 + (0.06 * rnd(&sd) - 0.02) / b);
  }
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  const uint32_t nn = t->n_nodes;
  double (*f1)[3] = malloc(sizeof *f1 * nn);
  ck_assert_ptr_nonnull(f1);
  ts__ms_spring_forces(t, t->ms); /* the first pass: no record, the full exponential */
  ck_assert_int_eq(check_law(t), 0);
  memcpy(f1, t->f, sizeof *f1 * nn);
  ck_assert_double_le(t->ms->x_seen, 0.0625);
  ts__ms_spring_forces(t, t->ms); /* the second: the short one */
  ck_assert_int_eq(check_law(t), 0);
  ck_assert_int_ne(memcmp(f1, t->f, sizeof *f1 * nn), 0);
  free(f1);
  ts_tissue_destroy(t);
}
END_TEST

/* The step's forces: the force pass leaves them in its rows (ms->f4) and
 * the integrator copies them to t->f and clears the rows for the next pass
 * (ts_ms_integrate.c). After a capped step (one substep) t->f must be, bit
 * for bit, what the force evaluation alone gives at the state the step
 * started from (a copy, nothing to round), and the rows must be zero: a
 * row left uncleared would be added to the next pass's forces, and a row
 * not copied would leave t->f stale. Both integrators: the scaled mass
 * matrix's and the lumped masses'. Checked to fail: with the clearing left
 * out of either integrator the second step's forces are off by the first
 * step's (the memcmp fails). */
START_TEST(test_step_forces_rows) {
  for (int lumped = 0; lumped < 2; lumped++) {
    ts_patch_def d = ts_default_patch_def();
    d.resolution = 10;
    ts_tissue *t = NULL;
    ck_assert_int_eq(ts_patch_create(&d, &t), 0);
    t->mass_scaling = !lumped;
    t->max_substeps = 1;
    ck_assert_int_eq(ts_massspring_prepare(t), 0); /* with the scaling set */
    const uint32_t n = t->n_nodes;
    double (*x0)[3] = malloc(sizeof *x0 * n), (*v0)[3] = malloc(sizeof *v0 * n);
    double (*fs)[3] = malloc(sizeof *fs * n);
    ck_assert_ptr_nonnull(x0);
    ck_assert_ptr_nonnull(v0);
    ck_assert_ptr_nonnull(fs);
    for (int k = 0; k < 30; k++) { /* moving: sagging under gravity */
      memcpy(x0, t->x, sizeof *x0 * n);
      memcpy(v0, t->v, sizeof *v0 * n);
      ts_step_stats st;
      ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
      ck_assert_int_eq(st.substeps, 1);
      ck_assert_int_eq(t->ms->sms, !lumped);
      for (uint32_t i = 0; i < n; i++)
        for (int c = 0; c < 4; c++) ck_assert_msg(t->ms->f4[i][c] == 0, "row %u left %g", i, t->ms->f4[i][c]);
      if (k % 10 != 9) continue;
      /* the force evaluation alone at the step's start */
      memcpy(fs, t->f, sizeof *fs * n);
      double (*x1)[3] = malloc(sizeof *x1 * n), (*v1)[3] = malloc(sizeof *v1 * n);
      ck_assert_ptr_nonnull(x1);
      ck_assert_ptr_nonnull(v1);
      memcpy(x1, t->x, sizeof *x1 * n);
      memcpy(v1, t->v, sizeof *v1 * n);
      memcpy(t->x, x0, sizeof *x0 * n);
      memcpy(t->v, v0, sizeof *v0 * n);
      ts__ms_spring_forces(t, t->ms);
      ck_assert_msg(memcmp(fs, t->f, sizeof *fs * n) == 0, "step %d (%s): t->f differs", k,
                    lumped ? "lumped" : "scaled");
      double fmax = 0;
      for (uint32_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) fmax = fmax > fabs(fs[i][c]) ? fmax : fabs(fs[i][c]);
      ck_assert_double_gt(fmax, 1e-6); /* not trivially zero */
      memcpy(t->x, x1, sizeof *x1 * n); /* back where the step left it */
      memcpy(t->v, v1, sizeof *v1 * n);
      free(x1);
      free(v1);
    }
    free(x0);
    free(v0);
    free(fs);
    ts_tissue_destroy(t);
  }
}
END_TEST

/* The step keeps the force loop's node rows (ms->xv: x, 0, v, 0) from one
 * substep's pass to the next instead of filling them from t->x and t->v
 * (ms->xv_ok): the integrators write the rows of the nodes they update,
 * strain limiting those it moves, and the pass refreshes the rows of the
 * nodes contact marked (every node it moves). After every step (several
 * substeps, a sphere pressing into the patch with friction, strain limits
 * tight enough that limiting corrects springs) every row but those of
 * the marked nodes must hold the node's x and v bit for bit. Both
 * integrators. Checked to fail: without strain limiting's row writes the
 * rows of the nodes it moved differ; without the integrators' the rows of
 * every moving node do. */
START_TEST(test_step_rows_kept) {
  for (int lumped = 0; lumped < 2; lumped++) {
    ts_patch_def d = ts_default_patch_def();
    d.resolution = 10;
    ts_tissue *t = NULL;
    ck_assert_int_eq(ts_patch_create(&d, &t), 0);
    t->mass_scaling = !lumped;
    for (uint32_t s = 0; s < t->n_springs; s++) /* tight: gravity's sag passes them */
      t->springs[s].strain_min = -2e-3, t->springs[s].strain_max = 2e-3;
    ck_assert_int_eq(ts_massspring_prepare(t), 0);
    const uint32_t n = t->n_nodes;
    uint32_t top = 0; /* the highest node nearest the patch's middle */
    double c[2] = {0, 0}, ymax = -INFINITY; /* up: +y, gravity's -y */
    for (uint32_t i = 0; i < n; i++) c[0] += t->x[i][0] / n, c[1] += t->x[i][2] / n;
    for (uint32_t i = 0; i < n; i++) ymax = fmax(ymax, t->x[i][1]);
    double best = INFINITY;
    for (uint32_t i = 0; i < n; i++) {
      const double dx = t->x[i][0] - c[0], dz = t->x[i][2] - c[1];
      if (t->x[i][1] > ymax - 1e-9 && dx * dx + dz * dz < best) best = dx * dx + dz * dz, top = i;
    }
    ts_tool tool;
    memset(&tool, 0, sizeof tool);
    tool.kind = TS_TOOL_SPHERE, tool.active = 1, tool.radius = 0.005, tool.quat[0] = 1;
    tool.mu_static = TS_TOOL_MU_STATIC_DEFAULT, tool.mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
    uint32_t most = 0, fixes = 0, subs = 0;
    double at[3];
    memcpy(at, t->x[top], sizeof at);
    for (int k = 0; k < 40; k++) {
      tool.pos[0] = at[0], tool.pos[2] = at[2];
      tool.pos[1] = at[1] + tool.radius - 5e-5 * k; /* pressing 2 mm in 40 ms */
      ts_step_stats st;
      ck_assert_int_eq(ts_massspring_step(t, 1e-3, &tool, 1, &st), 0);
      ck_assert_int_eq(st.diverged, 0);
      ck_assert_int_eq(t->ms->sms, !lumped);
      most = st.contacts > most ? st.contacts : most;
      fixes += st.strain_limited, subs = st.substeps > subs ? st.substeps : subs;
      ck_assert(t->ms->xv_ok);
      for (uint32_t i = 0; i < n; i++) {
        if (t->ms->ctool[i]) continue; /* marked: the next pass refreshes it */
        const double *r = t->ms->xv[i];
        const double want[8] = {t->x[i][0], t->x[i][1], t->x[i][2], 0,
                                t->v[i][0], t->v[i][1], t->v[i][2], 0};
        ck_assert_msg(memcmp(r, want, sizeof want) == 0, "%s, step %d: node %u's row is stale",
                      lumped ? "lumped" : "scaled", k, i);
      }
    }
    ck_assert_uint_gt(subs, 1); /* rows kept from one substep to the next */
    ck_assert_uint_gt(most, 0); /* the sphere touched */
    ck_assert_uint_gt(fixes, 0); /* strain limiting moved nodes */
    ts_tissue_destroy(t);
  }
}
END_TEST

/* The force loop's builds (ts_ms_forces.c: AVX-512, AVX2, the baseline;
 * the step runs the best the CPU has) give the same forces and strain
 * extremes bit for bit: each does the same IEEE operations in the same
 * order lane by lane, nothing contracted into FMA. On the random springs of
 * every class above and on a sagging patch (10 steps, all springs in the
 * exponential law's classes). The paths this CPU lacks are skipped (said on
 * stderr). Checked to fail: with the AVX-512 path contracted into FMA
 * (-ffp-contract=fast on the file) its forces differ in the last bits. */
static void paths_agree(ts_tissue *t, const char *what) {
  const uint32_t n = t->n_nodes;
  struct ts__ms *ms = t->ms;
  const uint32_t nb = ms->n_blk;
  double (*f0)[3] = malloc(sizeof *f0 * n), *bx = malloc(sizeof *bx * (nb + 1) * 2);
  ck_assert_ptr_nonnull(f0);
  ck_assert_ptr_nonnull(bx);
  /* each path starts from the same record of the last pass's largest b
   * eps per block, from which the loop chooses each block's exponential */
  double *rec = malloc(sizeof *rec * (nb + 1));
  ck_assert_ptr_nonnull(rec);
  memcpy(rec, ms->blk_x_max, sizeof *rec * nb);
  ts__ms_spring_forces_path(t, ms, TS__MS_PATH_BASE);
  memcpy(f0, t->f, sizeof *f0 * n);
  memcpy(bx, ms->blk_eps_max, sizeof *bx * nb);
  memcpy(bx + nb, ms->blk_eps_min, sizeof *bx * nb);
  const double x0 = ms->x_seen, e0 = ms->eps_max, n0 = ms->eps_min;
  double fmax = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) fmax = fmax > fabs(f0[i][c]) ? fmax : fabs(f0[i][c]);
  ck_assert_double_gt(fmax, 0); /* not trivially zero */
  const int paths[3] = {TS__MS_PATH_AVX2, TS__MS_PATH_AVX512, TS__MS_PATH_BEST};
  const char *names[3] = {"AVX2", "AVX-512", "best"};
  for (int p = 0; p < 3; p++) {
    if (!ts__ms_forces_path_ok(paths[p])) {
      fprintf(stderr, "test_paths_agree: %s: no %s path on this CPU or build\n", what, names[p]);
      continue;
    }
    for (uint32_t i = 0; i < n; i++) t->f[i][0] = t->f[i][1] = t->f[i][2] = 1e9; /* overwritten */
    memcpy(ms->blk_x_max, rec, sizeof *rec * nb);
    ts__ms_spring_forces_path(t, ms, paths[p]);
    for (uint32_t i = 0; i < n; i++)
      for (int c = 0; c < 3; c++)
        ck_assert_msg(memcmp(&t->f[i][c], &f0[i][c], sizeof(double)) == 0,
                      "%s: %s path: node %u axis %d: %.17g N, baseline %.17g N", what, names[p],
                      i, c, t->f[i][c], f0[i][c]);
    ck_assert_msg(memcmp(bx, ms->blk_eps_max, sizeof *bx * nb) == 0 &&
                      memcmp(bx + nb, ms->blk_eps_min, sizeof *bx * nb) == 0,
                  "%s: %s path: block strain extremes differ", what, names[p]);
    ck_assert_msg(ms->x_seen == x0 && ms->eps_max == e0 && ms->eps_min == n0,
                  "%s: %s path: strain extremes differ", what, names[p]);
  }
  free(f0);
  free(bx);
  free(rec);
}

START_TEST(test_paths_agree) {
  ts_tissue *t = random_tissue();
  paths_agree(t, "random springs");
  ts_tissue_destroy(t);
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 10;
  t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_int_eq(ts_massspring_prepare(t), 0);
  for (int k = 0; k < 10; k++) { /* moving: sagging under gravity */
    ts_step_stats st;
    ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &st), 0);
  }
  ck_assert_int_gt(t->ms->n_one + t->ms->n_two, 0);
  paths_agree(t, "sagging patch");
  ts_tissue_destroy(t);
}
END_TEST

static Suite *ms_forces_suite(void) {
  Suite *s = suite_create("ms_forces");
  TCase *tc = tcase_create("law");
  tcase_add_test(tc, test_exp_spring_bound);
  tcase_add_test(tc, test_exp_spring_small_bound);
  tcase_add_test(tc, test_forces_against_law);
  tcase_add_test(tc, test_forces_short_exponential);
  tcase_add_test(tc, test_step_forces_rows);
  tcase_add_test(tc, test_step_rows_kept);
  tcase_add_test(tc, test_paths_agree);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ms_forces_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
