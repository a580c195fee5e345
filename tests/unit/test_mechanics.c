/*
 * test_mechanics.c: Check suite for the tissue mechanics of issue 3 (server/
 * core: ts_material, ts_tissue_build, ts_massspring): the link-element
 * constant against Hooke's law on a loaded chain, the exponential law's
 * spring constant and the static elongation it gives, anisotropy along and
 * across the fibre, second-order convergence of the Verlet and Beeman
 * branches and of a run that switches between them, the apparent Young's
 * modulus of extruded blocks in uniaxial tension (a table over meshes),
 * bounded energy over 1e5 undamped steps, and strain limiting. Each test
 * states its tolerance and why.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_error.h"
#include "ts_extrude.h"
#include "ts_massspring.h"
#include "ts_material.h"
#include "ts_tissue.h"

/* ---- helpers ---- */

/* A flat nx x nz grid over [0, lx] x [0, lz] (union-jack triangles,
 * counter-clockwise seen from +y) extruded along -y into n_layers slabs of
 * the given thicknesses; every field of ts_extrusion filled (the render
 * surface is the top sheet only, in group 0). */
static ts_extrusion *flat_block(uint32_t nx, uint32_t nz, double lx, double lz, uint32_t L,
                                const double *th) {
  ts_extrusion *e = calloc(1, sizeof *e);
  uint32_t nv = nx * nz, T = 2 * (nx - 1) * (nz - 1);
  e->n_layers = L;
  e->n_sheets = L + 1;
  e->nv = nv;
  e->n_surface_tris = T;
  e->x = calloc((size_t)(L + 1) * nv, sizeof *e->x);
  e->surface_tris = calloc(T, sizeof *e->surface_tris);
  e->boundary = calloc(nv, 1);
  e->tris = calloc(T, sizeof *e->tris);
  for (uint32_t z = 0; z < nz; z++)
    for (uint32_t x = 0; x < nx; x++) {
      double d = 0;
      for (uint32_t s = 0; s <= L; s++) {
        double *p = e->x[s * nv + z * nx + x];
        p[0] = lx * x / (nx - 1);
        p[1] = -d;
        p[2] = lz * z / (nz - 1);
        if (s < L) d += th[s];
      }
      e->boundary[z * nx + x] = x == 0 || z == 0 || x == nx - 1 || z == nz - 1;
    }
  uint32_t k = 0;
  for (uint32_t z = 0; z + 1 < nz; z++)
    for (uint32_t x = 0; x + 1 < nx; x++) {
      uint32_t a = z * nx + x, b = a + 1, c = a + nx + 1, d = a + nx;
      uint32_t(*t)[3] = e->surface_tris;
      if ((x + z) % 2 == 0) {
        t[k][0] = a, t[k][1] = d, t[k][2] = c, k++;
        t[k][0] = a, t[k][1] = c, t[k][2] = b, k++;
      } else {
        t[k][0] = a, t[k][1] = d, t[k][2] = b, k++;
        t[k][0] = b, t[k][1] = d, t[k][2] = c, k++;
      }
    }
  memcpy(e->tris, e->surface_tris, sizeof *e->tris * T);
  e->n_tris = T;
  e->n_groups = L;
  e->group_tri_count[0] = T;
  return e;
}

static void free_block(ts_extrusion *e) {
  free(e->x);
  free(e->surface_tris);
  free(e->boundary);
  free(e->tris);
  free(e);
}

/* A layer of one isotropic exponential material. */
static ts_layer iso_layer(double thickness, double a, double b) {
  ts_layer ly[3];
  ts_material_default_layers(ly);
  ts_layer l = ly[0];
  l.thickness = thickness;
  l.axial = l.radial = (ts_law){a, b};
  l.young = a * b;
  memset(l.fibre, 0, sizeof l.fibre);
  return l;
}

/* A hand-made chain: node 0 anchored at the origin, nodes along +x. */
static ts_tissue *chain(uint32_t n_springs, const double *len, double mass) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(n_springs + 1, n_springs, 0, &t), 0);
  double x = 0;
  for (uint32_t i = 0; i <= n_springs; i++) {
    t->rest[i][0] = x;
    t->inv_mass[i] = i == 0 ? 0.0 : 1.0 / mass;
    if (i < n_springs) x += len[i];
  }
  memcpy(t->x, t->rest, sizeof *t->x * (n_springs + 1));
  memcpy(t->x_prev, t->rest, sizeof *t->x * (n_springs + 1));
  return t;
}

/* Steps until the fastest node is slower than vtol (at most max_steps). */
static void settle(ts_tissue *t, double dt, int max_steps, double vtol) {
  ts_step_stats st;
  for (int s = 0; s < max_steps; s++) {
    TU_OK_AT(ts_massspring_step(t, dt, NULL, 0, &st), s);
    if (s > 20 && st.max_speed < vtol) return;
  }
}

/* Solves F = k e^(b eps) eps L0 for eps > 0 by Newton's method (the static
 * elongation of one exponential spring under a tensile force F). */
static double exp_spring_strain(double F, double k, double b, double L0) {
  double eps = F / (k * L0);
  for (int it = 0; it < 100; it++) {
    double g = k * L0 * exp(b * eps) * eps - F;
    double dg = k * L0 * exp(b * eps) * (1 + b * eps);
    double step = g / dg;
    eps -= step;
    if (fabs(step) < 1e-16 * eps) break;
  }
  return eps;
}

/* ---- link element: Hooke's law on a chain ---- */

/* Five springs of different lengths, all of one bar (E, A): k_i = E A / L_i
 * (ts_link_stiffness). Under an end load F the chain must stretch by
 * F L / (E A) in all, and each spring by F L_i / (E A). The issue asks 0.1 %;
 * once settled the residual is that of the static balance (the dampers and
 * drag only remove kinetic energy), far below it. */
START_TEST(test_chain_hooke) {
  const double E = 50e3, A = 4e-6, F = 0.02;
  const double len[5] = {0.004, 0.006, 0.005, 0.003, 0.007};
  ts_tissue *t = chain(5, len, 1e-4);
  double Ltot = 0;
  for (int i = 0; i < 5; i++) {
    double k = ts_link_stiffness(E, A, len[i]);
    ck_assert_double_eq_tol(k, E * A / len[i], 1e-12 * k);
    t->springs[i] = (ts_spring){.a = i, .b = i + 1, .rest = len[i], .k = k,
                                .c = 2 * 0.5 * sqrt(k * 1e-4)};
    Ltot += len[i];
  }
  t->f_ext[5][0] = F;
  t->drag = 50;
  settle(t, 1e-3, 20000, 1e-12);
  double want = F * Ltot / (E * A);
  double got = t->x[5][0] - t->rest[5][0];
  ck_assert_msg(fabs(got - want) <= 1e-3 * want, "chain: %.9g m, Hooke %.9g m", got, want);
  for (int i = 0; i < 5; i++) {
    double dl = (t->x[i + 1][0] - t->x[i][0]) - len[i], wi = F * len[i] / (E * A);
    ck_assert_msg(fabs(dl - wi) <= 1e-3 * wi, "spring %d: %.9g m, Hooke %.9g m", i, dl, wi);
  }
  ts_tissue_destroy(t);
}
END_TEST

/* ---- exponential law ---- */

/* k'(eps) = A E(eps) / L with E(eps) = a b e^(b eps): the material
 * functions against the formula evaluated with libm's exp (1e-12 relative:
 * a few roundings), linear in compression; the step's exponential
 * (ts_exp_pos) against exp over [0, 700] (4e-16 relative: the polynomial's
 * truncation is below 2e-16, plus rounding). */
START_TEST(test_exponential_law_constant) {
  const ts_law law = {1500.0, 8.0};
  const double A = 2e-6, L = 3e-3;
  const double eps[6] = {0.0, 1e-4, 0.05, 0.2, 0.4, 1.0};
  for (int i = 0; i < 6; i++) {
    double want = A * law.a * law.b * exp(law.b * eps[i]) / L;
    ck_assert_double_eq_tol(ts_law_spring_constant(law, A, L, eps[i]), want, 1e-12 * want);
    ck_assert_double_eq_tol(ts_law_tangent(law, eps[i]), law.a * law.b * exp(law.b * eps[i]),
                            1e-12 * law.a * law.b * exp(law.b * eps[i]));
    ck_assert_double_eq_tol(ts_law_stress(law, eps[i]), law.a * exp(law.b * eps[i]),
                            1e-12 * law.a * exp(law.b * eps[i]));
  }
  /* compression: the small-strain constant */
  ck_assert_double_eq_tol(ts_law_spring_constant(law, A, L, -0.2), A * law.a * law.b / L,
                          1e-15 * A * law.a * law.b / L);
  double worst = 0;
  for (int i = 0; i <= 70000; i++) {
    double x = i * 0.01;
    double r = fabs(ts_exp_pos(x) / exp(x) - 1);
    if (r > worst) worst = r;
  }
  ck_assert_msg(worst <= 4e-16, "ts_exp_pos: relative error %.3g", worst);
  ck_assert_double_eq(ts_exp_pos(0.0), 1.0);
  ck_assert_double_eq(ts_exp_pos(1e9), ts_exp_pos(700.0)); /* clamped */
}
END_TEST

/* One exponential spring (k1 = A a b / L0, b1 = b) under end loads: the
 * static elongation must solve F = k'(eps) (L - L0) = k1 e^(b eps) eps L0,
 * solved here by Newton's method, to 1e-6 relative (the residual of the
 * settled dynamics); a compressive load gives the linear F / k1. */
START_TEST(test_exponential_spring_static) {
  const ts_law law = {2000.0, 6.0};
  const double A = 1e-6, L0 = 0.01, k1 = A * law.a * law.b / L0;
  const double loads[4] = {0.001, 0.005, 0.02, -0.003};
  for (int i = 0; i < 4; i++) {
    ts_tissue *t = chain(1, &L0, 1e-4);
    t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = L0, .k1 = k1, .b1 = law.b,
                                .c = 2 * 0.5 * sqrt(k1 * 1e-4)};
    t->springs[0].k = k1;
    t->f_ext[1][0] = loads[i];
    t->drag = 100;
    settle(t, 1e-3, 20000, 1e-13);
    double eps = (t->x[1][0] - t->x[0][0]) / L0 - 1;
    double want = loads[i] > 0 ? exp_spring_strain(loads[i], k1, law.b, L0) : loads[i] / (k1 * L0);
    ck_assert_msg(fabs(eps - want) <= 1e-6 * fabs(want), "load %g N: strain %.10g, law %.10g",
                  loads[i], eps, want);
    /* and it is the law's constant: k'(eps) = A E(eps) / L0 */
    double kp = ts_law_spring_constant(law, A, L0, eps);
    ck_assert_double_eq_tol(kp * (t->x[1][0] - t->x[0][0] - L0), loads[i],
                            1e-6 * fabs(loads[i]));
    ts_tissue_destroy(t);
  }
}
END_TEST

/* ---- anisotropy ---- */

/* A flat grid of one anisotropic layer, fibre along x: among its in-sheet
 * springs of equal geometry (interior edges of one length, the same volume
 * share by symmetry), one along the fibre gets only the axial term,
 * k = k_alpha = V a_a b_a / L^2, one across only the radial term k_beta; their
 * ratio is a_a b_a / (a_r b_r) (exact up to rounding: 1e-12), and a 45-degree
 * diagonal gets cos 45 k_alpha' + sin 45 k_beta' of its own geometry. Then the
 * two springs stretched by the same end load (the ends' dynamics settled)
 * elongate as the law implies in each direction (1e-6). */
START_TEST(test_anisotropy_ratio) {
  const double th[1] = {2e-3};
  ts_extrusion *e = flat_block(7, 7, 0.03, 0.03, 1, th);
  ts_layer ly = iso_layer(2e-3, 30e3, 5.0);
  ly.radial = (ts_law){12e3, 4.0};
  ly.fibre[0] = 3.0; /* any length */
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_build(e, &ly, NULL, NULL, &t), 0);
  const double ratio = (30e3 * 5.0) / (12e3 * 4.0);
  const ts_spring *sx = NULL, *sz = NULL, *sd = NULL;
  uint32_t nv = e->nv;
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *s = &t->springs[i];
    if (s->kind != TS_SPRING_EDGE || s->a >= nv) continue;
    uint32_t ax = s->a % 7, az = s->a / 7, bx = s->b % 7, bz = s->b / 7;
    if (ax != 3 || az != 3) continue; /* edges from the centre node */
    if (bz == az && bx == 4) sx = s;
    if (bx == ax && bz == 4) sz = s;
    if (bx == 4 && bz == 4) sd = s;
  }
  ck_assert_ptr_nonnull(sx);
  ck_assert_ptr_nonnull(sz);
  ck_assert_ptr_nonnull(sd);
  /* along: the axial term alone; across: the radial term alone */
  ck_assert_double_eq(sx->b1, 5.0);
  ck_assert_double_eq(sx->k2, 0.0);
  ck_assert_double_eq(sz->b1, 4.0);
  ck_assert_double_eq(sz->k2, 0.0);
  ck_assert_double_eq_tol(sx->k1 / sz->k1, ratio, 1e-12 * ratio);
  /* the diagonal: V / L^2 from sx's share scaled by the geometry is not
   * known here, but its two terms must stand in the ratio cos : sin of 45
   * degrees times a_a b_a : a_r b_r */
  ck_assert_double_eq_tol(sd->k1 / sd->k2, ratio, 1e-9 * ratio);

  /* stretched by the same small load (strain about 1e-3) along each spring */
  const double F = 1e-3 * sx->k1 * sx->rest;
  double strain[2];
  const ts_spring *sp[2] = {sx, sz};
  for (int d = 0; d < 2; d++) {
    double L0 = sp[d]->rest;
    ts_tissue *c = chain(1, &L0, 1e-4);
    c->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = L0, .k = sp[d]->k, .k1 = sp[d]->k1,
                                .b1 = sp[d]->b1, .c = 2 * 0.5 * sqrt(sp[d]->k * 1e-4)};
    c->f_ext[1][0] = F;
    c->drag = 100;
    settle(c, 1e-3, 20000, 1e-13);
    strain[d] = (c->x[1][0] - L0) / L0;
    double want = exp_spring_strain(F, sp[d]->k1, sp[d]->b1, L0);
    ck_assert_msg(fabs(strain[d] - want) <= 1e-6 * want, "%s: %.9g, law %.9g",
                  d ? "across" : "along", strain[d], want);
    ts_tissue_destroy(c);
  }
  /* under a small load the elongations stand in the inverse ratio (within
   * 2 %: e^(b eps) differs by b eps between the two at these strains) */
  ck_assert_msg(fabs(strain[1] / strain[0] / ratio - 1) < 0.02,
                "across/along strain %.4g, k ratio %.4g", strain[1] / strain[0], ratio);
  ts_tissue_destroy(t);
  free_block(e);
}
END_TEST

/* ---- integrator convergence ---- */

/* A harmonic oscillator (m = 1 kg, k = 4 pi^2 N/m: period 1 s) released from
 * x0 = 1 cm, run for 2.3 s in steps of h (one substep each, h w <= 0.063):
 * the largest position error over the run against x0 cos(w t). mu selects the
 * branch; in the switching run it scales with h (the force change per step
 * is proportional to h) so that the nodes switch at the same phases for
 * every h. Accepted band for second order: error ratio 3.6..4.4 when h
 * halves (the next term is (h w)^2 ~ 0.4 % of it here; the switching run
 * changes branch at slightly different phases for each h). */
static double oscillator_error(double h, double mu, double *beeman_frac) {
  const double m = 1.0, k = 4 * M_PI * M_PI, x0 = 0.01, T = 2.3;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(2, 1, 0, &t), 0);
  t->rest[1][0] = 0.1;
  t->inv_mass[1] = 1 / m;
  memcpy(t->x, t->rest, sizeof *t->x * 2);
  t->x[1][0] += x0;
  t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = 0.1, .k = k};
  t->beeman_threshold = mu;
  int n = (int)lround(T / h);
  ts_step_stats st;
  double bsum = 0, err = 0;
  for (int s = 0; s < n; s++) {
    TU_OK_AT(ts_massspring_step(t, h, NULL, 0, &st), s);
    if (st.substeps != 1) ck_abort_msg("step %d: %u substeps, not 1", s, st.substeps);
    bsum += st.beeman_fraction;
    double want = x0 * cos(sqrt(k / m) * (s + 1) * h);
    err = fmax(err, fabs(t->x[1][0] - t->rest[1][0] - want));
  }
  if (beeman_frac) *beeman_frac = bsum / n;
  ts_tissue_destroy(t);
  return err;
}

START_TEST(test_convergence_verlet_beeman) {
  const double hs[3] = {0.01, 0.005, 0.0025};
  const char *name[3] = {"Verlet", "Beeman", "switching"};
  for (int mode = 0; mode < 3; mode++) {
    double err[3], frac[3];
    for (int i = 0; i < 3; i++) {
      /* |dF| peaks near m w^3 x0 h: mu = 1e30 never, 0 always, 0.5 of the
       * peak about half the time */
      double mu = mode == 0 ? 1e30 : mode == 1 ? 0.0 : 0.5 * pow(2 * M_PI, 3) * 0.01 * hs[i];
      err[i] = oscillator_error(hs[i], mu, &frac[i]);
    }
    for (int i = 0; i < 2; i++) {
      double r = err[i] / err[i + 1];
      printf("  %-9s h %.3f s: error %.4g m, ratio %.3f, Beeman %.0f %%\n", name[mode], hs[i],
             err[i], r, 100 * frac[i]);
      ck_assert_msg(r > 3.6 && r < 4.4, "%s: error ratio %.3f at h = %g s", name[mode], r, hs[i]);
    }
    if (mode == 0) ck_assert(frac[0] == 0 && frac[2] == 0);
    if (mode == 1) ck_assert(frac[0] > 0.99 && frac[2] > 0.99);
    if (mode == 2)
      for (int i = 0; i < 3; i++)
        ck_assert_msg(frac[i] > 0.2 && frac[i] < 0.8, "switching run: Beeman %.2f", frac[i]);
  }
}
END_TEST

/* ---- uniaxial tension of extruded blocks ---- */

/* A block (grid nx x nz over lx x lz, n_layers of the given thicknesses)
 * clamped at both x ends, the far end moved by 1e-4 of the length, settled:
 * the apparent modulus is the end force over the cross-section, over the
 * strain between the sections at lx/4 and 3 lx/4 (away from the clamps'
 * restraint of the lateral contraction). */
static double uniaxial_modulus(uint32_t nx, uint32_t nz, double lx, double lz, uint32_t L,
                               const double *th, double E, double *aspect) {
  ts_extrusion *e = flat_block(nx, nz, lx, lz, L, th);
  ts_layer ly[TS_MAX_LAYERS];
  double T = 0;
  for (uint32_t l = 0; l < L; l++) {
    ly[l] = iso_layer(th[l], E / 5.0, 5.0);
    ly[l].damping_ratio = 0.5;
    T += th[l];
  }
  uint32_t n = (L + 1) * nx * nz;
  uint8_t *anch = calloc(n, 1);
  for (uint32_t i = 0; i < n; i++) {
    double x = e->x[i][0];
    anch[i] = x < 1e-12 || x > lx - 1e-12;
  }
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_build(e, ly, anch, NULL, &t), 0);
  const double delta = 1e-4 * lx;
  for (uint32_t i = 0; i < n; i++)
    if (anch[i] && t->rest[i][0] > lx / 2) t->x[i][0] += delta, t->x_prev[i][0] += delta;
  /* about critical damping for the first axial mode */
  t->drag = 4 * M_PI * sqrt(E / ly[0].density) / lx;
  settle(t, 1e-3, 2000, 1e-9);
  double F = 0, u1 = 0, u3 = 0;
  int n1 = 0, n3 = 0;
  double hx = lx / (nx - 1);
  for (uint32_t i = 0; i < n; i++) {
    double x = t->rest[i][0], u = t->x[i][0] - x;
    if (anch[i] && x > lx / 2) F -= t->f[i][0];
    if (fabs(x - 0.25 * lx) < 0.5 * hx) u1 += u, n1++;
    if (fabs(x - 0.75 * lx) < 0.5 * hx) u3 += u, n3++;
  }
  double eps = (u3 / n3 - u1 / n1) / (0.5 * lx);
  double hz = lz / (nz - 1);
  *aspect = sqrt(hx * hz) / (T / L);
  ts_tissue_destroy(t);
  free(anch);
  free_block(e);
  return F / (lz * T) / eps;
}

/* The FEM equivalence of ts_tissue_build: the apparent Young's modulus at
 * small strain within 15 % of the input E (the bound) on blocks of
 * several resolutions and layer counts, i.e. in-plane spacing from 5 to 0.6
 * times the layer thickness. The table is printed. */
START_TEST(test_uniaxial_modulus_table) {
  const double E = 20e3;
  const double th3[3] = {1e-3, 1.5e-3, 2e-3}, th1[1] = {1e-3};
  const struct {
    uint32_t nx, nz, L;
  } m[] = {{9, 3, 1}, {17, 5, 1}, {9, 3, 3}, {17, 5, 3}, {33, 9, 3}};
  printf("  uniaxial tension, 40 x 10 mm block, E = %.0f Pa\n", E);
  printf("  %-8s %-6s %-14s %-8s\n", "grid", "layers", "spacing/layer", "E_app/E");
  /* a sanitizer build (memory and undefined behaviour, not the figures)
   * leaves out the 33 x 9 block: the same build and step as the 17 x 5
   * one, with 3.5 times its nodes (most of the case's 62 s under ASan) */
  const size_t n = TU_ITERS(sizeof m / sizeof m[0], sizeof m / sizeof m[0] - 1);
  for (size_t i = 0; i < n; i++) {
    double aspect;
    double Ea = uniaxial_modulus(m[i].nx, m[i].nz, 0.04, 0.01, m[i].L, m[i].L == 1 ? th1 : th3,
                                 E, &aspect);
    printf("  %2ux%-5u %-6u %-14.2f %-8.4f\n", m[i].nx, m[i].nz, m[i].L, aspect, Ea / E);
    ck_assert_msg(fabs(Ea / E - 1) <= 0.15, "grid %ux%u, %u layers: E_app/E = %.4f", m[i].nx,
                  m[i].nz, m[i].L, Ea / E);
  }
}
END_TEST

/* ---- energy ---- */

/* Without dampers, drag or gravity, a built tissue (a 9 x 9 patch of two
 * exponential layers, anchored rim, mass scaling on) set vibrating by an
 * initial bulge keeps its energy over 1e5 steps of 1 ms. The energy is
 * taken at the positions the velocities belong to (Verlet's v is the
 * central difference at x_prev). Bounds: the shadow energy of Verlet
 * oscillates by O((h w)^2) of the energy in the fastest modes, so every
 * sample stays within 5 % of the start, and no drift: the mean over the
 * last 1e4 steps within 0.5 % of the mean over the first 1e4. */
START_TEST(test_energy_bounded) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = 9;
  d.n_layers = 2;
  d.curvature_radius = 0;
  for (int l = 0; l < 2; l++) d.layers[l].damping_ratio = 0;
  d.gravity[1] = 0;
  d.drag = 0;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  t->beeman_threshold = 1e30; /* Verlet throughout: the symplectic branch */
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (!(t->inv_mass[i] > 0)) continue;
    double x = t->rest[i][0] / 0.04, z = t->rest[i][2] / 0.04;
    double bump = 2e-4 * cos(M_PI_2 * x) * cos(M_PI_2 * z);
    t->x[i][1] += bump;
    t->x_prev[i][1] += bump;
  }
  /* a sanitizer build (memory and undefined behaviour, not the figures)
   * runs a fifth of the steps, its windows a tenth of them as here: the
   * same code every step */
  const int N = TU_ITERS(100000, 20000), W = N / 10;
  double e0 = 0, first = 0, last = 0, worst = 0;
  ts_step_stats st;
  for (int s = 0; s < N; s++) {
    TU_OK_AT(ts_massspring_step(t, 1e-3, NULL, 0, &st), s);
    double (*x)[3] = t->x;
    t->x = t->x_prev; /* the energy at the time of the velocities */
    double ke, pe;
    TU_OK_AT(ts_massspring_energy(t, &ke, &pe), s);
    t->x = x;
    double e = ke + pe;
    if (s == 0) e0 = e;
    if (s < W) first += e / W;
    if (s >= N - W) last += e / W;
    double dev = fabs(e / e0 - 1);
    if (dev > worst) worst = dev;
  }
  printf("  energy over %d steps: E0 %.4g J, worst deviation %.3g, drift %.3g\n", N, e0, worst,
         last / first - 1);
  ck_assert(e0 > 0);
  ck_assert_msg(worst < 0.05, "energy deviated by %.3g", worst);
  ck_assert_msg(fabs(last / first - 1) < 0.005, "energy drifted by %.3g", last / first - 1);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- strain limiting ---- */

/* A spring allowed strains in [-0.2, 0.1] and pulled far beyond by its end
 * load: after every step its strain is within the range (1e-9: the
 * Gauss-Seidel pass ends exactly on the bound for a single spring), the
 * corrections are counted, and Verlet's velocity is the central difference
 * of the corrected positions (it settles at rest on the bound). */
START_TEST(test_strain_limiting) {
  const double L0 = 0.01;
  ts_tissue *t = chain(1, &L0, 1e-3);
  t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = L0, .k = 10.0, .c = 0.05,
                              .strain_min = -0.2, .strain_max = 0.1};
  t->f_ext[1][0] = 1.0; /* wants strain 10 */
  t->drag = 20;
  ts_step_stats st;
  uint32_t fixes = 0;
  for (int s = 0; s < 500; s++) {
    TU_OK_AT(ts_massspring_step(t, 1e-3, NULL, 0, &st), s);
    fixes += st.strain_limited;
    double eps = (t->x[1][0] - t->x[0][0]) / L0 - 1;
    if (!(eps <= 0.1 + 1e-9 && eps >= -0.2 - 1e-9)) ck_abort_msg("step %d: strain %.12g", s, eps);
  }
  ck_assert_uint_gt(fixes, 0);
  ck_assert_double_eq_tol(t->x[1][0] - t->x[0][0], 1.1 * L0, 1e-12);
  ck_assert(fabs(t->v[1][0]) < 1e-9);
  ck_assert(st.max_strain <= 0.1 + 1e-9);
  /* pushed the other way: the lower bound */
  t->f_ext[1][0] = -1.0;
  for (int s = 0; s < 500; s++) TU_OK_AT(ts_massspring_step(t, 1e-3, NULL, 0, &st), s);
  ck_assert_double_eq_tol(t->x[1][0] - t->x[0][0], 0.8 * L0, 1e-12);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- statistics and the Taylor start ---- */

/* The first substep after a start or reset is Taylor's, x1 = x0 + h v0 +
 * a0 h^2 / 2 exactly; the stats report it, then the other branches. */
START_TEST(test_taylor_start_and_stats) {
  const double L0 = 0.01, k = 5.0, m = 2e-3;
  ts_tissue *t = chain(1, &L0, m);
  t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = L0, .k = k};
  t->x[1][0] += 1e-3;
  t->v[1][1] = 0.01;
  t->gravity[1] = -9.81;
  double x0 = t->x[1][0], y0 = t->x[1][1];
  ts_step_stats st;
  double h = 1e-4; /* one substep */
  ck_assert_int_eq(ts_massspring_step(t, h, NULL, 0, &st), 0);
  ck_assert_uint_eq(st.substeps, 1);
  ck_assert_double_eq(st.taylor_fraction, 1.0);
  double ax = -k * 1e-3 / m, ay = -9.81;
  ck_assert_double_eq_tol(t->x[1][0], x0 + 0.5 * ax * h * h, 1e-18);
  ck_assert_double_eq_tol(t->x[1][1], y0 + 0.01 * h + 0.5 * ay * h * h, 1e-18);
  ck_assert_double_eq_tol(t->v[1][1], 0.01 + ay * h, 1e-15);
  ck_assert_int_eq(ts_massspring_step(t, h, NULL, 0, &st), 0);
  ck_assert_double_eq(st.taylor_fraction, 0.0);
  ck_assert_double_eq_tol(st.verlet_fraction + st.beeman_fraction, 1.0, 1e-15);
  ts_tissue_reset(t);
  ck_assert_int_eq(ts_massspring_step(t, h, NULL, 0, &st), 0);
  ck_assert_double_eq(st.taylor_fraction, 1.0);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- builder validation ---- */

START_TEST(test_build_validation) {
  const double th[2] = {1e-3, 2e-3};
  ts_extrusion *e = flat_block(4, 4, 0.01, 0.01, 2, th);
  ts_layer ly[2] = {iso_layer(1e-3, 1e3, 5), iso_layer(2e-3, 2e3, 4)};
  ts_tissue *t = (ts_tissue *)(uintptr_t)1;
  ck_assert_int_eq(ts_tissue_build(NULL, ly, NULL, NULL, &t), TS_EINVAL);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(ts_tissue_build(e, NULL, NULL, NULL, &t), TS_EINVAL);
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, NULL), TS_EINVAL);
  ts_layer bad = ly[1];
  bad.axial.b = -1;
  ts_layer lb[2] = {ly[0], bad};
  ck_assert_int_eq(ts_tissue_build(e, lb, NULL, NULL, &t), TS_EINVAL);
  double g[3] = {0, NAN, 0};
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, g, &t), TS_EINVAL);
  uint32_t keep = e->surface_tris[3][1];
  e->surface_tris[3][1] = 999;
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EMESH);
  e->surface_tris[3][1] = e->surface_tris[3][0]; /* degenerate */
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EMESH);
  e->surface_tris[3][1] = keep;
  double y = e->x[e->nv + 5][1];
  e->x[e->nv + 5][1] = 0.01; /* sheet 1 above sheet 0: inverted prisms */
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EMESH);
  e->x[e->nv + 5][1] = NAN;
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EMESH);
  e->x[e->nv + 5][1] = y;
  e->n_inverted = 1;
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EMESH);
  e->n_inverted = 0;
  e->group_tri_count[0] += 1;
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), TS_EINVAL);
  e->group_tri_count[0] -= 1;
  /* and then it builds: two layers of their own laws, the interface edges
   * with both (exponents 5 and 4: two terms, one spring) */
  ck_assert_int_eq(ts_tissue_build(e, ly, NULL, NULL, &t), 0);
  ck_assert_uint_eq(t->n_layers, 2);
  ck_assert_double_eq(t->layers[1].young, 2e3 * 4);
  int both = 0;
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *s = &t->springs[i];
    if (s->kind == TS_SPRING_EDGE && s->a / e->nv == 1) {
      ck_assert(s->k2 > 0 && ((s->b1 == 5 && s->b2 == 4) || (s->b1 == 4 && s->b2 == 5)));
      both++;
    }
  }
  ck_assert_int_gt(both, 0);
  ts_tissue_destroy(t);
  free_block(e);
}
END_TEST

static Suite *mechanics_suite(void) {
  Suite *s = suite_create("mechanics");
  TCase *law = tcase_create("material");
  tcase_add_test(law, test_chain_hooke);
  tcase_add_test(law, test_exponential_law_constant);
  tcase_add_test(law, test_exponential_spring_static);
  tcase_add_test(law, test_anisotropy_ratio);
  tcase_add_test(law, test_build_validation);
  suite_add_tcase(s, law);
  TCase *in = tcase_create("integrator");
  tcase_set_timeout(in, 300);
  tcase_add_test(in, test_convergence_verlet_beeman);
  tcase_add_test(in, test_taylor_start_and_stats);
  tcase_add_test(in, test_strain_limiting);
  tcase_add_test(in, test_energy_bounded);
  suite_add_tcase(s, in);
  TCase *fem = tcase_create("fem");
  tcase_set_timeout(fem, 300);
  tcase_add_test(fem, test_uniaxial_modulus_table);
  suite_add_tcase(s, fem);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(mechanics_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
