/*
 * test_xpbd.c: Check suite for the position-based solver (server/core/
 * ts_xpbd.h): the constraint measures against finite differences and known
 * shapes; a hanging chain whose converged stretch is the analytic static one
 * and does not depend on the iteration count, the time step or the damping
 * (XPBD's claim), and whose per-constraint tensions and anchor force are the
 * weights they carry; a spring with the exponential law against its
 * analytic equilibrium; the bending constraint against an analytic hinge;
 * the compliances as the inverse of the springs' constants; the built-in
 * patch under gravity (the mass-spring step's equilibrium) and under a
 * pressing sphere or capsule, with the tool's reaction equal to what the
 * anchors and the weight say; volume constraints undoing a fold; a moving
 * tool's push; NaN injection and input validation. Each tolerance is stated
 * where it is asserted, with why.
 */
#include "ts_check.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "ts_error.h"
#include "ts_massspring.h"
#include "ts_tissue.h"
#include "ts_tool.h"
#include "ts_xpbd.h"
#include "patch_fixture.h"

/* ---- helpers ---- */

static ts_tissue *default_patch(void) {
  ts_patch_def d = ts_default_patch_def();
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_ptr_nonnull(t);
  return t;
}

/* The default patch at another resolution (13: 6.7 mm between nodes, a
 * node on each centre line and under a third of the nodes, for the
 * variants), with gravity g (m/s^2, down). */
static ts_tissue *patch_at(uint32_t resolution, double g) {
  ts_patch_def d = ts_default_patch_def();
  d.resolution = resolution;
  d.gravity[1] = -g;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_patch_create(&d, &t), 0);
  ck_assert_ptr_nonnull(t);
  return t;
}

static void assert_finite_state(const ts_tissue *t) {
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int k = 0; k < 3; k++) ck_assert(isfinite(t->x[i][k]) && isfinite(t->v[i][k]));
}

/* Prisms whose signed volume has the opposite sign of their rest volume. */
static uint32_t inverted_prisms(const ts_tissue *t) {
  const uint32_t nps = t->nodes_per_sheet;
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->n_tris; i++) {
    const uint32_t *tr = t->tris[i];
    if (tr[0] >= nps || tr[1] >= nps || tr[2] >= nps) continue;
    for (uint32_t l = 0; l + 1 < t->n_sheets; l++) {
      double p[6][3], q[6][3];
      for (int k = 0; k < 3; k++) {
        memcpy(p[k], t->x[l * nps + tr[k]], sizeof p[k]);
        memcpy(p[k + 3], t->x[(l + 1) * nps + tr[k]], sizeof p[k]);
        memcpy(q[k], t->rest[l * nps + tr[k]], sizeof q[k]);
        memcpy(q[k + 3], t->rest[(l + 1) * nps + tr[k]], sizeof q[k]);
      }
      n += ts_xpbd_prism_volume((const double (*)[3])p, NULL) *
               ts_xpbd_prism_volume((const double (*)[3])q, NULL) <=
           0;
    }
  }
  return n;
}

static double max_displacement(const ts_tissue *t) {
  double m = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int k = 0; k < 3; k++) m = fmax(m, fabs(t->x[i][k] - t->rest[i][k]));
  return m;
}

/* ---- constraint measures ---- */

START_TEST(test_dihedral_known_angles_and_gradient) {
  /* hinge along z, one wing along -x; the other wing turned down by phi
   * about the hinge: the angle between the triangles' normals is phi */
  const double phis[] = {0.0, 0.3, -0.7, 1.5, 2.5};
  for (unsigned i = 0; i < sizeof phis / sizeof phis[0]; i++) {
    double phi = phis[i];
    double p[4][3] = {{0, 0, -0.01}, {0, 0, 0.01}, {-0.02, 0, 0},
                      {0.02 * cos(phi), -0.02 * sin(phi), 0}};
    double th = ts_xpbd_dihedral((const double (*)[3])p, NULL);
    ck_assert_msg(fabs(fabs(th) - fabs(phi)) < 1e-12, "phi %.3f: theta %.15f", phi, th);
    if (phi != 0) ck_assert(th * phi > 0 || th * phi < 0); /* signed, nonzero */
  }
  /* the sign follows the direction of the turn */
  double up[4][3] = {{0, 0, -0.01}, {0, 0, 0.01}, {-0.02, 0, 0}, {0.02, 0.001, 0}};
  double down[4][3] = {{0, 0, -0.01}, {0, 0, 0.01}, {-0.02, 0, 0}, {0.02, -0.001, 0}};
  ck_assert(ts_xpbd_dihedral((const double (*)[3])up, NULL) *
                ts_xpbd_dihedral((const double (*)[3])down, NULL) < 0);

  /* gradient against central differences on a skewed configuration: the
   * difference quotient's error is O(eps^2 * third derivative) ~ 1e-9 here,
   * the gradient's entries are O(10..100) 1/m */
  double p[4][3] = {{0, 0, -0.01}, {0.001, 0.0005, 0.012}, {-0.02, 0.003, 0.001},
                    {0.015, -0.004, 0.002}};
  double g[4][3];
  double th = ts_xpbd_dihedral((const double (*)[3])p, g);
  ck_assert(isfinite(th));
  double sum[3] = {0, 0, 0};
  for (int i = 0; i < 4; i++) {
    for (int k = 0; k < 3; k++) {
      double q[4][3];
      const double eps = 1e-7;
      memcpy(q, p, sizeof q);
      q[i][k] += eps;
      double tp = ts_xpbd_dihedral((const double (*)[3])q, NULL);
      q[i][k] -= 2 * eps;
      double tm = ts_xpbd_dihedral((const double (*)[3])q, NULL);
      double fd = (tp - tm) / (2 * eps);
      ck_assert_msg(fabs(fd - g[i][k]) < 1e-6 * (1 + fabs(fd)), "d/dp%d[%d]: %.9g vs %.9g", i, k,
                    g[i][k], fd);
      sum[k] += g[i][k];
    }
  }
  /* a rigid translation does not change the angle */
  for (int k = 0; k < 3; k++) ck_assert(fabs(sum[k]) < 1e-9);
  /* degenerate triangles have no angle */
  double flat[4][3] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {0, 1, 0}};
  ck_assert(isnan(ts_xpbd_dihedral((const double (*)[3])flat, g)));
}
END_TEST

START_TEST(test_prism_volume_known_and_gradient) {
  /* a right prism: triangle of legs 3 cm and 2 cm, height 5 mm */
  double p[6][3] = {{0, 0, 0}, {0.03, 0, 0}, {0, 0, 0.02},
                    {0, -0.005, 0}, {0.03, -0.005, 0}, {0, -0.005, 0.02}};
  double V = ts_xpbd_prism_volume((const double (*)[3])p, NULL);
  ck_assert_double_eq_tol(fabs(V), 0.5 * 0.03 * 0.02 * 0.005, 1e-18);
  /* a sheared, twisted prism against central differences (the volume is a
   * cubic polynomial, so central differences are exact up to rounding) */
  double q[6][3] = {{0, 0, 0}, {1, 0, 0.1}, {0.2, 0.1, 1}, {0, -1, 0}, {1.1, -1, 0}, {0, -1.2, 1}};
  double g[6][3];
  double V0 = ts_xpbd_prism_volume((const double (*)[3])q, g);
  ck_assert(V0 > 0.4 && V0 < 0.7);
  double sum[3] = {0, 0, 0};
  for (int i = 0; i < 6; i++) {
    for (int k = 0; k < 3; k++) {
      double r[6][3];
      const double eps = 1e-6;
      memcpy(r, q, sizeof r);
      r[i][k] += eps;
      double vp = ts_xpbd_prism_volume((const double (*)[3])r, NULL);
      r[i][k] -= 2 * eps;
      double vm = ts_xpbd_prism_volume((const double (*)[3])r, NULL);
      ck_assert_msg(fabs((vp - vm) / (2 * eps) - g[i][k]) < 1e-8, "d/dp%d[%d]", i, k);
      sum[k] += g[i][k];
    }
  }
  for (int k = 0; k < 3; k++) ck_assert(fabs(sum[k]) < 1e-12);
}
END_TEST

/* ---- hanging chain ---- */

/* N nodes of mass m in a vertical chain, the top one anchored, linked by
 * hand-made linear springs k (distance constraints of compliance 1/k).
 * Spring i (from the top, i = 1..N-1) carries the weight of the N - i nodes
 * below it, so the chain's static stretch is m g N (N - 1) / (2 k). */
#define CHAIN_N 10
static const double chain_m = 0.01, chain_L0 = 0.01, chain_g = 9.81;

static ts_tissue *make_chain(double k, double c) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(CHAIN_N, CHAIN_N - 1, 0, &t), 0);
  for (uint32_t i = 0; i < CHAIN_N; i++) {
    t->rest[i][1] = -(double)i * chain_L0;
    t->inv_mass[i] = i == 0 ? 0.0 : 1.0 / chain_m;
  }
  memcpy(t->x, t->rest, sizeof *t->x * CHAIN_N);
  for (uint32_t i = 0; i + 1 < CHAIN_N; i++)
    t->springs[i] = (ts_spring){.a = i, .b = i + 1, .rest = chain_L0, .k = k, .c = c};
  t->gravity[1] = -chain_g;
  return t;
}

typedef struct chain_run {
  double stretch;            /* m */
  double max_speed;          /* m/s, at the end */
  double tension[CHAIN_N];   /* N */
  double anchor_force[3];    /* constraint force on the anchored node, N */
} chain_run;

/* Runs the chain for `seconds` from rest and reports its state. */
static chain_run run_chain(double k, uint32_t iterations, uint32_t substeps, double dt,
                           double seconds, double damping, double beta, double c) {
  ts_tissue *t = make_chain(k, c);
  ts_xpbd_def d = ts_xpbd_default_def();
  d.iterations = iterations;
  d.substeps = substeps;
  d.damping = damping;
  d.stiffness_damping = beta;
  d.spring_dampers = c > 0;
  ts_xpbd *s = NULL;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), 0);
  ts_xpbd_stats st;
  long n = lround(seconds / dt);
  for (long i = 0; i < n; i++) TU_OK_AT(ts_xpbd_step(s, t, dt, NULL, 0, &st), i);
  ck_assert_uint_eq(st.substeps, substeps);
  ck_assert_uint_eq(st.iterations, iterations);
  chain_run r;
  memset(&r, 0, sizeof r);
  r.stretch = t->rest[CHAIN_N - 1][1] - t->x[CHAIN_N - 1][1];
  r.max_speed = st.max_speed;
  memcpy(r.tension, ts_xpbd_tensions(s), sizeof(double) * (CHAIN_N - 1));
  double f[CHAIN_N][3];
  ck_assert_int_eq(ts_xpbd_node_forces(s, t, f), 0);
  memcpy(r.anchor_force, f[0], sizeof r.anchor_force);
  /* the chain stays on its axis */
  for (uint32_t i = 0; i < CHAIN_N; i++) {
    ck_assert(fabs(t->x[i][0]) < 1e-15 && fabs(t->x[i][2]) < 1e-15);
  }
  ck_assert_double_eq_tol(t->time, n * dt, 1e-9);
  ck_assert_int_eq((long)t->steps, n);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
  return r;
}

static double chain_static_stretch(double k) {
  return chain_m * chain_g * CHAIN_N * (CHAIN_N - 1) / (2 * k);
}

/* k = 1000 N/m with m = 0.01 kg: h^2 k / m = 0.1 at 1 ms, a moderately
 * stiff chain (4.4 % stretch). After 3 s with a 20/s damping the slowest
 * mode (about 50 rad/s) has decayed by e^-30, so "converged" is the static
 * state up to Gauss-Seidel's fixed-point error. The brief's bound between
 * iteration counts and time steps is 1 %; against the analytic stretch 0.1 %
 * is allowed (measured: under 1e-5 %), leaving room for rounding and the
 * remaining decay. */
START_TEST(test_chain_iterations_and_time_step) {
  const double k = 1000.0, want = chain_static_stretch(k);
  chain_run it5 = run_chain(k, 5, 1, 1e-3, 3.0, 20.0, 0.0, 0.0);
  chain_run it50 = run_chain(k, 50, 1, 1e-3, 3.0, 20.0, 0.0, 0.0);
  chain_run half = run_chain(k, 5, 1, 0.5e-3, 3.0, 20.0, 0.0, 0.0);
  ck_assert_msg(fabs(it5.stretch / it50.stretch - 1) < 0.01, "5 it %.9g m, 50 it %.9g m",
                it5.stretch, it50.stretch);
  ck_assert_msg(fabs(it5.stretch / half.stretch - 1) < 0.01, "1 ms %.9g m, 0.5 ms %.9g m",
                it5.stretch, half.stretch);
  const chain_run *runs[3] = {&it5, &it50, &half};
  for (int i = 0; i < 3; i++) {
    ck_assert_msg(fabs(runs[i]->stretch / want - 1) < 1e-3, "run %d: %.9g m, analytic %.9g m", i,
                  runs[i]->stretch, want);
    ck_assert(runs[i]->max_speed < 1e-6);
  }
  ck_assert_double_eq_tol(want, 4.4145e-3, 1e-9);
}
END_TEST

/* A stiff chain, k = 1e5 N/m (h^2 k / m = 10 at 1 ms, a 0.04 % stretch):
 * one Gauss-Seidel pass per millisecond cannot converge it (XPBD then acts
 * softer than the material), but substeps can (Macklin et al. 2019): with 8
 * and 16 substeps of 5 iterations each the stretch is the analytic one
 * within 0.1 % (measured: 1e-4 %) and the two agree within 1 %. */
START_TEST(test_chain_stiff_substeps) {
  const double k = 1e5, want = chain_static_stretch(k);
  chain_run s8 = run_chain(k, 5, 8, 1e-3, 2.0, 20.0, 0.0, 0.0);
  chain_run s16 = run_chain(k, 5, 16, 1e-3, 2.0, 20.0, 0.0, 0.0);
  ck_assert_msg(fabs(s8.stretch / s16.stretch - 1) < 0.01, "%.9g vs %.9g", s8.stretch,
                s16.stretch);
  ck_assert_msg(fabs(s8.stretch / want - 1) < 1e-3, "8 substeps: %.9g m, analytic %.9g m",
                s8.stretch, want);
  ck_assert_msg(fabs(s16.stretch / want - 1) < 1e-3, "16 substeps: %.9g m, analytic %.9g m",
                s16.stretch, want);
}
END_TEST

/* The haptic outputs at rest: spring i (i = 1..N-1 from the top) holds the
 * weight of N - i nodes, and the anchor holds the whole hanging weight
 * (N - 1) m g: the constraint force on the anchored node pulls it down by
 * that much. The multipliers are those of the static state; 0.1 % covers
 * what is left of the motion. Each kind of damping alone settles the chain
 * and leaves its static state where it is: the mass-proportional one
 * (20/s), the stiffness-proportional one (beta = 5 ms: 13 % of critical for
 * the slowest mode, about 52 rad/s, which then decays at 7/s) and the
 * springs' own dampers (c = 5 N s/m, the same damper). */
START_TEST(test_chain_tensions_and_damping) {
  const double k = 1000.0, want = chain_static_stretch(k);
  const double drag[3] = {20.0, 0.0, 0.0}, beta[3] = {0.0, 5e-3, 0.0}, c[3] = {0.0, 0.0, 5.0};
  for (int b = 0; b < 3; b++) {
    chain_run r = run_chain(k, 10, 2, 1e-3, 3.0, drag[b], beta[b], c[b]);
    for (uint32_t i = 1; i < CHAIN_N; i++) {
      double w = chain_m * chain_g * (CHAIN_N - i);
      ck_assert_msg(fabs(r.tension[i - 1] / w - 1) < 1e-3, "run %d, spring %u: %.9g N vs %.9g N",
                    b, i, r.tension[i - 1], w);
    }
    double W = chain_m * chain_g * (CHAIN_N - 1);
    ck_assert_msg(fabs(-r.anchor_force[1] / W - 1) < 1e-3, "anchor %.9g N, weight %.9g N",
                  r.anchor_force[1], W);
    ck_assert(fabs(r.anchor_force[0]) < 1e-12 && fabs(r.anchor_force[2]) < 1e-12);
    ck_assert_msg(fabs(r.stretch / want - 1) < 1e-3, "run %d: %.9g m vs %.9g m", b, r.stretch,
                  want);
    ck_assert_msg(r.max_speed < 1e-5, "run %d still moving at %.3g m/s", b, r.max_speed);
  }
}
END_TEST

/* One mass hanging from an anchor by a spring with the exponential law of
 * ts_material.h, tension T = (k1 e^(b1 s) + k2 e^(b2 s)) (L - L0), s the
 * strain. At rest T = m g, an equation solved here by Newton's method; the
 * solver must land on it within 1e-4 (measured: 1e-13), with the law
 * followed (nonlinear) and, with it off, on the linear m g / (k1 + k2). The
 * law matters here (b1 s about 1.2, e^(b1 s) about 3.4). */
START_TEST(test_exponential_law) {
  const double m = 0.01, g = 9.81, L0 = 0.01, k1 = 60, b1 = 30, k2 = 40, b2 = 0;
  for (int nl = 0; nl < 2; nl++) {
    ts_tissue *t = NULL;
    ck_assert_int_eq(ts_tissue_alloc(2, 1, 0, &t), 0);
    t->rest[1][1] = -L0;
    memcpy(t->x, t->rest, sizeof *t->x * 2);
    t->inv_mass[1] = 1 / m;
    t->gravity[1] = -g;
    t->springs[0] = (ts_spring){.a = 0, .b = 1, .rest = L0, .k = k1 + k2, .k1 = k1, .b1 = b1,
                                .k2 = k2, .b2 = b2};
    ts_xpbd_def d = ts_xpbd_default_def();
    d.nonlinear = nl;
    d.damping = 50;
    ts_xpbd *s = NULL;
    ck_assert_int_eq(ts_xpbd_build(t, &d, &s), 0);
    ck_assert_double_eq_tol(ts_xpbd_compliance(s)[0], 1 / (k1 + k2), 1e-15);
    ts_xpbd_stats st;
    for (int i = 0; i < 1500; i++) TU_OK_AT(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), i);
    ck_assert(st.max_speed < 1e-9);
    double e = m * g / ((k1 + k2) * L0); /* linear strain, the start for Newton */
    if (nl)
      for (int i = 0; i < 100; i++) {
        double f = (k1 * exp(b1 * e) + k2 * exp(b2 * e)) * e * L0 - m * g;
        double fp = (k1 * exp(b1 * e) * (1 + b1 * e) + k2 * exp(b2 * e) * (1 + b2 * e)) * L0;
        e -= f / fp;
      }
    double got = (t->rest[1][1] - t->x[1][1]) / L0;
    ck_assert_msg(fabs(got / e - 1) < 1e-4, "nonlinear %d: strain %.9g, analytic %.9g", nl, got,
                  e);
    ck_assert_msg(fabs(ts_xpbd_tensions(s)[0] / (m * g) - 1) < 1e-4, "tension %.9g N",
                  ts_xpbd_tensions(s)[0]);
    if (nl) ck_assert(b1 * e > 1); /* the law matters: e^(b1 s) > 2.7 */
    ts_xpbd_destroy(s);
    ts_tissue_destroy(t);
  }
}
END_TEST

/* ---- bending ---- */

/* A hinge: the edge p0-p1 (2a long, along z) and the wing p2 are anchored,
 * the wing p3 (mass m, a distance d from the hinge) is free and held by
 * rigid links (compliance 0). Gravity turns it down by phi until the bending
 * constraint's torque k_b phi equals gravity's m g d cos(phi), where the
 * documented mapping gives k_b = 3 D |e|^2 / A_e = 3 D (2a)^2 / (2 a d),
 * D = E t^3 / (12 (1 - nu^2)) for a single sheet of thickness t. The
 * measured angle must solve that equation within 1e-4 (measured: 2e-5, the
 * rest of Gauss-Seidel's error). */
START_TEST(test_bending_hinge) {
  const double a = 0.01, d = 0.01, m = 1e-3, g = 9.81, E = 4e5, th = 1e-3, nu = 0.45;
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(4, 5, 2, &t), 0);
  const double P[4][3] = {{0, 0, -a}, {0, 0, a}, {-d, 0, 0}, {d, 0, 0}};
  memcpy(t->rest, P, sizeof P);
  memcpy(t->x, P, sizeof P);
  t->inv_mass[3] = 1.0 / m;
  const uint32_t sp[5][2] = {{0, 1}, {1, 2}, {0, 2}, {0, 3}, {1, 3}};
  double alpha[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 5; i++) {
    double r2 = 0;
    for (int k = 0; k < 3; k++) r2 += pow(P[sp[i][1]][k] - P[sp[i][0]][k], 2);
    t->springs[i] = (ts_spring){.a = sp[i][0], .b = sp[i][1], .rest = sqrt(r2)};
  }
  const uint32_t tris[2][3] = {{0, 1, 2}, {1, 0, 3}};
  memcpy(t->tris, tris, sizeof tris);
  t->n_sheets = 1;
  t->nodes_per_sheet = 4;
  t->n_layers = 1;
  t->layers[0].thickness = th;
  t->layers[0].young = E;
  t->layers[0].density = 1000;
  t->gravity[1] = -g;

  ts_xpbd_def def = ts_xpbd_default_def();
  def.bending = 1;
  def.poisson = nu;
  def.iterations = 10;
  def.substeps = 4; /* rigid links and bending: the automatic rule sees no spring */
  def.compliance = alpha;
  ts_xpbd *s = NULL;
  ck_assert_int_eq(ts_xpbd_build(t, &def, &s), 0);
  uint32_t nd, nb, nv;
  ts_xpbd_counts(s, &nd, &nb, &nv);
  ck_assert_uint_eq(nd, 5);
  ck_assert_uint_eq(nb, 1); /* one interior edge */
  ck_assert_uint_eq(nv, 0); /* a single sheet has no prisms */
  ts_xpbd_stats st;
  for (int i = 0; i < 3000; i++) TU_OK_AT(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), i);
  ck_assert(st.max_speed < 1e-9);

  const double D = E * th * th * th / (12 * (1 - nu * nu));
  const double kb = 3 * D * (2 * a) * (2 * a) / (2 * a * d);
  double phi = 0.3;
  for (int i = 0; i < 50; i++)
    phi -= (kb * phi - m * g * d * cos(phi)) / (kb + m * g * d * sin(phi));
  ck_assert(phi > 0.2 && phi < 0.5); /* a real bend, far from the small-angle regime */
  double got = atan2(-t->x[3][1], t->x[3][0]);
  ck_assert_msg(fabs(got / phi - 1) < 1e-4, "angle %.9f rad, analytic %.9f rad", got, phi);
  ck_assert_double_eq_tol(hypot(t->x[3][0], t->x[3][1]), d, 1e-9); /* rigid links */
  /* the constraints hold the free node's weight */
  double f[4][3];
  ck_assert_int_eq(ts_xpbd_node_forces(s, t, f), 0);
  ck_assert_msg(fabs(f[3][1] / (m * g) - 1) < 1e-3, "%.9g N", f[3][1]);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- compliance from the material ---- */

/* Every distance constraint's compliance is the inverse of its spring's
 * small-strain constant, k1 + k2 = E A / L from the builder (ts_tissue_build.c
 * maps the layers' E onto them), or k for a hand-made linear spring, to
 * rounding; given compliances replace them as they are. */
START_TEST(test_compliance_is_inverse_stiffness) {
  ts_tissue *t = default_patch();
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  const double *alpha = ts_xpbd_compliance(s);
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *sp = &t->springs[i];
    double k = sp->k1 + sp->k2 > 0 ? sp->k1 + sp->k2 : sp->k;
    ck_assert(k > 0);
    ck_assert_msg(fabs(alpha[i] * k - 1) < 1e-12, "spring %u: alpha %.6g m/N, k %.6g N/m", i,
                  alpha[i], k);
  }
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);

  t = make_chain(250.0, 0.0);
  s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  for (uint32_t i = 0; i + 1 < CHAIN_N; i++)
    ck_assert_double_eq_tol(ts_xpbd_compliance(s)[i], 1.0 / 250.0, 1e-18);
  ts_xpbd_destroy(s);
  double given[CHAIN_N - 1] = {0, 1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3, 8e-3};
  ts_xpbd_def d = ts_xpbd_default_def();
  d.compliance = given;
  s = ts_xpbd_create(t, &d);
  ck_assert_ptr_nonnull(s);
  for (uint32_t i = 0; i + 1 < CHAIN_N; i++) ck_assert(ts_xpbd_compliance(s)[i] == given[i]);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- the built-in patch ---- */

/* Under gravity the default patch sags, stays finite and settles. Its sag
 * does not depend on the iteration count: the defaults (4 iterations,
 * automatic substeps) and twice the iterations agree within 1 % (measured:
 * 0.04 %). And it is the mass-spring step's equilibrium, the same springs
 * with the same law, within 1 % (measured: 0.03 %; converged XPBD runs agree
 * to 1e-6). The sag itself is only checked to be visible and far below the
 * patch's half-width (the materials are the mechanics' to tune). The
 * anchors stay where they are. */
START_TEST(test_patch_gravity) {
  double sag[3];
  for (int run = 0; run < 3; run++) {
#ifdef TS_TEST_SANITIZED
    /* a sanitizer build (memory and undefined behaviour, not the figures)
     * leaves out the run with twice the iterations: run 0's code, twice
     * as long (about 40 % of the case's 59 s under ASan), for a figure */
    if (run == 1) continue;
#endif
    ts_tissue *t = default_patch();
    const uint32_t c = fx_top_centre(t);
    ts_xpbd_def d = ts_xpbd_default_def();
    d.iterations *= (uint32_t)(run == 1 ? 2 : 1);
    ts_xpbd *s = ts_xpbd_create(t, &d);
    ck_assert_ptr_nonnull(s);
    ts_xpbd_stats st;
    ts_step_stats ms;
    for (int i = 0; i < 450; i++) {
      if (run < 2) {
        ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), 0);
      } else {
        ck_assert_int_eq(ts_massspring_step(t, 1e-3, NULL, 0, &ms), 0);
        st.max_speed = ms.max_speed;
        st.kinetic_energy = ms.kinetic_energy;
        st.contacts = ms.contacts;
      }
    }
    assert_finite_state(t);
    ck_assert_msg(st.max_speed < 1e-5, "run %d still moving at %.3g m/s", run, st.max_speed);
    ck_assert(st.kinetic_energy >= 0 && st.kinetic_energy < 1e-12);
    ck_assert_uint_eq(st.contacts, 0);
    sag[run] = t->rest[c][1] - t->x[c][1];
    ck_assert_msg(sag[run] > 1e-4 && sag[run] < 0.04, "sag %.4g m", sag[run]);
    if (run < 2) ck_assert_uint_eq(inverted_prisms(t), 0);
    for (uint32_t i = 0; i < t->n_nodes; i++)
      if (t->inv_mass[i] == 0)
        for (int k = 0; k < 3; k++) ck_assert(t->x[i][k] == t->rest[i][k]);
    ts_xpbd_destroy(s);
    ts_tissue_destroy(t);
  }
#ifndef TS_TEST_SANITIZED
  ck_assert_msg(fabs(sag[0] / sag[1] - 1) < 0.01, "sag %.6g m vs %.6g m", sag[0], sag[1]);
#endif
  ck_assert_msg(fabs(sag[0] / sag[2] - 1) < 0.01, "XPBD sag %.6g m, mass-spring %.6g m", sag[0],
                sag[2]);
}
END_TEST

/* The patch settled under gravity (or without it), then a sphere pressed
 * below the settled top over 150 ms and held for 250 ms (on the default
 * patch a 5 mm sphere 4 mm deep; on the coarse one a 10 mm sphere 3 mm
 * deep: its neighbours sag away from the centre node, which carries it
 * alone). At rest the tissue's forces balance: the reaction on the tool
 * equals the anchors' reaction on the tissue plus its weight, F_tool = R +
 * M g (without gravity, F_tool = R: the tool's upward reaction is what the
 * anchors hold). The tool's force is exact (its contacts' multipliers); the
 * node forces are each constraint's multiplier along its final gradient,
 * while the sweeps applied it along slightly different ones (the few
 * sweeps do not converge fully), and at the anchors that error is a small
 * part of large in-plane tensions. `tol` of the vertical force is allowed:
 * 1 % for the springs alone (measured: 0.4 % with gravity, 0.01 % without),
 * 2 % with bending and volume constraints, which converge more slowly
 * (measured: 0.8 %). */
static void press_and_check(uint32_t resolution, double radius, double depth_max,
                            uint32_t min_contacts, double gravity, int bending, int volume,
                            double tol) {
  ts_tissue *t = patch_at(resolution, gravity);
  const uint32_t c = fx_top_centre(t);
  ts_xpbd_def d = ts_xpbd_default_def();
  d.bending = bending;
  d.volume = volume;
  ts_xpbd *s = ts_xpbd_create(t, &d);
  ck_assert_ptr_nonnull(s);
  ts_tool tool = {.kind = TS_TOOL_SPHERE, .active = 1, .radius = radius, .quat = {1, 0, 0, 0}};
  ts_xpbd_stats st;
  for (int i = 0; gravity > 0 && i < 450; i++)
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), 0);
  const double y0 = t->x[c][1];
  for (int i = 0; i < 400; i++) {
    double depth = i < 150 ? depth_max * (i + 1) / 150 : depth_max;
    tool.pos[1] = y0 + tool.radius - depth;
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  }
  assert_finite_state(t);
  ck_assert_msg(st.max_speed < 1e-5, "still moving at %.3g m/s", st.max_speed);
  double disp = y0 - t->x[c][1];
  ck_assert_msg(disp >= 0.5 * depth_max && disp <= depth_max + 1e-4, "centre moved %.4g m", disp);
  ck_assert_uint_eq(inverted_prisms(t), 0);
  /* measured 0.0642-0.0653 N over this file's three presses (2026-12-04):
   * a change of the constraints or the contact by a quarter shows here */
  ck_assert_msg(tool.force[1] > 0.049 && tool.force[1] < 0.081, "Fy %.6g N", tool.force[1]);
  /* the patch is symmetric about the press, but the constraints' sweep
   * order is not: the sideways force measured 0.03-0.41 % of Fy; 2 % */
  ck_assert_msg(fabs(tool.force[0]) < 0.02 * tool.force[1], "Fx %.3g N", tool.force[0]);
  ck_assert_msg(fabs(tool.force[2]) < 0.02 * tool.force[1], "Fz %.3g N", tool.force[2]);
  ck_assert_uint_ge(tool.contacts, min_contacts);
  ck_assert_uint_eq(st.contacts, tool.contacts);
  ck_assert_uint_eq(st.contacts_dropped, 0);
  /* no node is left inside the tool (contacts come last in every sweep) */
  for (uint32_t i = 0; i < t->n_nodes; i++)
    ck_assert(ts_tool_distance(&tool, t->x[i], NULL) > -1e-12);
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] == 0)
      for (int k = 0; k < 3; k++) ck_assert(t->x[i][k] == t->rest[i][k]);

  /* global balance */
  double (*f)[3] = malloc(sizeof *f * t->n_nodes);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(ts_xpbd_node_forces(s, t, f), 0);
  double M = 0, R[3] = {0, 0, 0};
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (t->inv_mass[i] > 0)
      M += 1.0 / t->inv_mass[i];
    else
      for (int k = 0; k < 3; k++) R[k] -= f[i][k];
  }
  free(f);
  for (int k = 0; k < 3; k++) {
    double want = R[k] + M * t->gravity[k];
    ck_assert_msg(fabs(tool.force[k] - want) <= tol * tool.force[1],
                  "axis %d: tool %.6g N, anchors and weight %.6g N", k, tool.force[k], want);
  }
  ck_assert(R[1] > 0); /* the anchors hold the tissue up */

  /* the per-contact forces of the last substep add up to the tool's force
   * (at rest every substep is the same, so 0.1 %) */
  uint32_t nc = 0;
  const ts_xpbd_contact *cs = ts_xpbd_contacts(s, &nc);
  ck_assert_uint_eq(nc, tool.contacts);
  double sum[3] = {0, 0, 0};
  for (uint32_t i = 0; i < nc; i++) {
    ck_assert_uint_eq(cs[i].tool, 0);
    ck_assert_uint_lt(cs[i].node, t->n_nodes);
    for (int k = 0; k < 3; k++) sum[k] += cs[i].force[k];
  }
  for (int k = 0; k < 3; k++)
    ck_assert_msg(fabs(sum[k] - tool.force[k]) <= 1e-3 * tool.force[1], "axis %d", k);

  /* lifting the tool releases it */
  tool.pos[1] = 0.05;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  ck_assert_uint_eq(tool.contacts, 0);
  ck_assert_double_eq(tool.force[1], 0.0);
  ts_xpbd_contacts(s, &nc);
  ck_assert_uint_eq(nc, 0);
  /* an inactive tool is ignored and its outputs cleared */
  tool.pos[1] = 0.001;
  tool.active = 0;
  tool.force[1] = 5;
  tool.contacts = 7;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  ck_assert_double_eq(tool.force[1], 0.0);
  ck_assert_uint_eq(tool.contacts, 0);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}

START_TEST(test_patch_sphere_press) { press_and_check(24, 0.005, 0.004, 4, 9.81, 0, 0, 0.01); }
END_TEST

START_TEST(test_patch_sphere_press_no_gravity) { press_and_check(13, 0.01, 0.003, 1, 0.0, 0, 0, 0.01); }
END_TEST

/* Bending and volume constraints move no net force: the balance holds with
 * them too. */
START_TEST(test_patch_sphere_press_bending_volume) {
  press_and_check(13, 0.01, 0.003, 1, 9.81, 1, 1, 0.02);
}
END_TEST

/* Where volume constraints help: the centre node of the top sheet pushed
 * 1 mm through the mucosa (below its partner in the next sheet). The spring
 * network alone has a second equilibrium there and stays folded (measured:
 * 2 mm from rest after 0.4 s); with the prism volumes it unfolds back to
 * rest (measured: 2e-16 m; 1e-7 m allowed, the motion left). The inversion
 * guard (ts_xpbd_guard.c, on by default) undoes folds only where a tool has
 * been (test_robust's presses): this fold, made by hand with no tool near,
 * it leaves as the tissue's shape (as much as neither: the same 2 mm).
 * Index 0: neither, 1: volume constraints, 2: the guard alone. */
START_TEST(test_patch_volume_unfolds) {
  double moved[3];
  for (int vol = 0; vol < 3; vol++) {
    ts_tissue *t = patch_at(13, 0.0);
    ts_xpbd_def d = ts_xpbd_default_def();
    d.volume = vol == 1;
    d.fold_guard = vol == 2;
    ts_xpbd *s = ts_xpbd_create(t, &d);
    ck_assert_ptr_nonnull(s);
    const uint32_t c = fx_top_centre(t), nps = t->nodes_per_sheet;
    t->x[c][1] = t->x[c + nps][1] - 0.001;
    ts_xpbd_stats st;
    for (int i = 0; i < 400; i++) TU_OK_AT(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), i);
    assert_finite_state(t);
    ck_assert(st.max_speed < 1e-5);
    moved[vol] = max_displacement(t);
    ts_xpbd_destroy(s);
    ts_tissue_destroy(t);
  }
  printf("top centre pushed through the mucosa, 0.4 s later: %.3g m from rest alone, %.3g with "
         "volume constraints, %.3g with the inversion guard\n", moved[0], moved[1], moved[2]);
  ck_assert_msg(moved[0] > 1e-4, "with neither: %.3g m from rest", moved[0]);
  ck_assert_msg(moved[1] < 1e-7, "with volume constraints: %.3g m from rest", moved[1]);
  ck_assert_msg(moved[2] == moved[0], "with the inversion guard: %.3g m from rest, %.3g without",
                moved[2], moved[0]);
}
END_TEST

/* A capsule (radius 3 mm, 20 mm long) lying across the 13 x 13 patch (its
 * axis along x) pressed 3 mm into it without gravity: it rests on at least
 * the three nodes along its axis, balanced like the sphere (1 %), symmetric
 * in z within 10 % of the vertical force. */
START_TEST(test_patch_capsule_press) {
  ts_tissue *t = patch_at(13, 0.0);
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  /* -90 degrees about z takes the local +y axis to +x */
  const double h = sqrt(0.5);
  ts_tool tool = {.kind = TS_TOOL_CAPSULE, .active = 1, .radius = 0.003, .length = 0.02,
                  .pos = {-0.01, 0, 0}, .quat = {h, 0, 0, -h}};
  ts_xpbd_stats st;
  for (int i = 0; i < 350; i++) {
    double depth = i < 150 ? 0.003 * (i + 1) / 150 : 0.003;
    tool.pos[1] = tool.radius - depth;
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  }
  ck_assert(st.max_speed < 1e-5);
  ck_assert_uint_ge(tool.contacts, 3);
  ck_assert(tool.force[1] > 1e-3);
  ck_assert(fabs(tool.force[2]) < 0.1 * tool.force[1]);
  for (uint32_t i = 0; i < t->n_nodes; i++)
    ck_assert(ts_tool_distance(&tool, t->x[i], NULL) > -1e-12);
  double (*f)[3] = malloc(sizeof *f * t->n_nodes);
  ck_assert_int_eq(ts_xpbd_node_forces(s, t, f), 0);
  double R[3] = {0, 0, 0};
  for (uint32_t i = 0; i < t->n_nodes; i++)
    if (t->inv_mass[i] == 0)
      for (int k = 0; k < 3; k++) R[k] -= f[i][k];
  free(f);
  for (int k = 0; k < 3; k++)
    ck_assert_msg(fabs(tool.force[k] - R[k]) <= 0.01 * tool.force[1], "axis %d: %.6g vs %.6g", k,
                  tool.force[k], R[k]);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- a moving tool ---- */

/* A free particle (no gravity, no constraints) in front of a sphere that
 * moves 1 mm towards it during one 1 ms step: a frictionless head-on push
 * leaves the particle with the sphere's speed, 1 m/s, because the pose is
 * interpolated over the substeps (without that the whole 1 mm would arrive
 * in the first 0.25 ms substep and the particle would fly off at 4 m/s). */
START_TEST(test_moving_tool_push) {
  ts_tissue *t = NULL;
  ck_assert_int_eq(ts_tissue_alloc(1, 0, 0, &t), 0);
  t->inv_mass[0] = 1.0 / 0.001;
  ts_xpbd_def d = ts_xpbd_default_def();
  d.compliance = (const double[1]){0};
  d.damping = 0;
  d.substeps = 4;
  ts_xpbd *s = NULL;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), 0);
  ts_tool tool = {.kind = TS_TOOL_SPHERE, .active = 1, .radius = 0.005, .quat = {1, 0, 0, 0}};
  tool.pos[1] = 0.005; /* touching the particle at the origin from above */
  ts_xpbd_stats st;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  ck_assert_double_eq_tol(t->x[0][1], 0.0, 1e-15);
  tool.pos[1] = 0.004;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  ck_assert_double_eq_tol(t->x[0][1], -0.001, 1e-12);
  ck_assert_double_eq_tol(t->v[0][1], -1.0, 1e-9);
  ck_assert_double_eq_tol(t->v[0][0], 0.0, 1e-12);
  /* the push took m * dv / dt = 1 N over the step's last substep; the step's
   * mean reaction on the tool is +y (the particle resists) */
  ck_assert(tool.force[1] > 0);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* A solver that replaces another between two steps (a live refinement's
 * install, server/refine.c) and takes its tools' previous poses
 * (ts_xpbd_carry_tools) steps as the replaced one would have. The particle
 * of test_moving_tool_push, the sphere moving 1 mm onto it in the step:
 * with the carry the new solver pushes it out at the sphere's 1 m/s, bit
 * for bit as the old solver's own step does; without it (a solver with no
 * previous pose: the sphere at its new pose from the first of 4 substeps,
 * the whole 1 mm in 0.25 ms) the particle leaves at 4 m/s, which is checked
 * too, so the test fails when the carry does nothing. Carrying from NULL
 * forgets the poses: 4 m/s again. */
START_TEST(test_carry_tools) {
  double x_own = 0, v_own = 0;
  for (int variant = 0; variant < 4; variant++) { /* own step, carried, not carried, from NULL */
    ts_tissue *t = NULL;
    ck_assert_int_eq(ts_tissue_alloc(1, 0, 0, &t), 0);
    t->inv_mass[0] = 1.0 / 0.001;
    ts_xpbd_def d = ts_xpbd_default_def();
    d.compliance = (const double[1]){0};
    d.damping = 0;
    d.substeps = 4;
    ts_xpbd *s = NULL, *n = NULL;
    ck_assert_int_eq(ts_xpbd_build(t, &d, &s), 0);
    ts_tool tool = {.kind = TS_TOOL_SPHERE, .active = 1, .radius = 0.005, .quat = {1, 0, 0, 0}};
    tool.pos[1] = 0.005;
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, NULL), 0);
    if (variant > 0) { /* replaced */
      ck_assert_int_eq(ts_xpbd_build(t, &d, &n), 0);
      if (variant == 1) ts_xpbd_carry_tools(n, s);
      if (variant == 3) {
        ts_xpbd_carry_tools(n, s);
        ts_xpbd_carry_tools(n, NULL);
      }
      ts_xpbd_destroy(s);
      s = n;
    }
    tool.pos[1] = 0.004;
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, NULL), 0);
    if (variant == 0) {
      x_own = t->x[0][1];
      v_own = t->v[0][1];
      ck_assert_double_eq_tol(v_own, -1.0, 1e-9);
    } else if (variant == 1) {
      ck_assert(t->x[0][1] == x_own && t->v[0][1] == v_own);
    } else { /* 1 mm in the first 0.25 ms substep, then free flight */
      ck_assert_double_eq_tol(t->v[0][1], -4.0, 1e-9);
      ck_assert_double_eq_tol(t->x[0][1], -0.004, 1e-12);
    }
    ts_xpbd_destroy(s);
    ts_tissue_destroy(t);
  }
}
END_TEST

/* ---- automatic substeps ---- */

/* def.substeps = 0: h omega <= 0.8, omega the mean of sqrt(k (w_a + w_b))
 * over the distance constraints, computed here from the springs; at 1 ms
 * the default patch needs a few. A tissue that would need more than 10000
 * for the step is refused with TS_ERANGE, changing nothing. */
START_TEST(test_automatic_substeps) {
  ts_tissue *t = default_patch();
  double sum = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *sp = &t->springs[i];
    double k = sp->k1 + sp->k2 > 0 ? sp->k1 + sp->k2 : sp->k;
    double w = t->inv_mass[sp->a] + t->inv_mass[sp->b];
    if (w > 0) sum += sqrt(k * w), n++;
  }
  const double omega = sum / n;
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  ts_xpbd_stats st;
  const double dts[3] = {1e-3, 0.5e-3, 4e-3};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ts_xpbd_step(s, t, dts[i], NULL, 0, &st), 0);
    ck_assert_uint_eq(st.substeps, (uint32_t)ceil(dts[i] * omega / 0.8));
    ck_assert_uint_eq(st.iterations, 4);
  }
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), 0);
  ck_assert(st.substeps >= 2 && st.substeps <= 16);
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);

  /* a very stiff chain: omega = (sqrt(1e9 * 100) + 8 sqrt(1e9 * 200)) / 9
   * = 4.3e5 1/s (the top spring has one anchored end), so a 1 s step would
   * need 5.4e5 substeps */
  t = make_chain(1e9, 0.0);
  const double omega_chain = (sqrt(1e9 * 100.0) + 8 * sqrt(1e9 * 200.0)) / 9;
  s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1.0, NULL, 0, &st), TS_ERANGE);
  ck_assert_uint_eq(t->steps, 0);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), 0);
  ck_assert_uint_eq(st.substeps, (uint32_t)ceil(1e-3 * omega_chain / 0.8));
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

/* ---- divergence and validation ---- */

START_TEST(test_nan_injection_diverges_and_resets) {
  ts_tissue *t = default_patch();
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  ts_xpbd_stats st;
  for (int i = 0; i < 5; i++) TU_OK_AT(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), i);
  const uint32_t c = fx_top_centre(t) + t->nodes_per_sheet; /* an inner node */
  const int which[3] = {0, 1, 2};
  for (int w = 0; w < 3; w++) {
    if (which[w] == 0) t->x[c][1] = NAN;
    if (which[w] == 1) t->v[c][0] = INFINITY;
    if (which[w] == 2) t->v[c][2] = 1e3; /* a runaway speed */
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), TS_EDIVERGED);
    ck_assert_int_eq(st.diverged, 1);
    /* the reason: the test that fired, the node, the substep. A NaN
     * position gives the node a non-finite velocity in the first substep
     * (and the sweeps may carry it to a neighbour of lower index first);
     * the runaway speed is the node's, or a spring neighbour's the first
     * substep's constraints shared it with (found first in index order:
     * the top-layer node above it, here) */
    char why[256];
    ck_assert_int_gt(ts_xpbd_diverged_text(&st, why, sizeof why), 0);
    ck_assert_uint_lt(st.diverged_node, t->n_nodes);
    ck_assert_uint_eq(st.diverged_substep, 1);
    ck_assert_msg(strstr(why, "in substep 1 of ") != NULL, "%s", why);
    if (which[w] == 2) {
      ck_assert_int_eq(st.diverged_why, TS_DIVERGED_SPEED);
      int near = st.diverged_node == c;
      for (uint32_t j = 0; j < t->n_springs && !near; j++) {
        const ts_spring *sp = &t->springs[j];
        near = (sp->a == c && sp->b == st.diverged_node) || (sp->b == c && sp->a == st.diverged_node);
      }
      ck_assert_msg(near, "node %u is not node %u nor a neighbour", st.diverged_node, c);
      ck_assert_double_gt(st.diverged_value, 100.0);
      char node[64];
      snprintf(node, sizeof node, "node %u moved at ", st.diverged_node);
      ck_assert_msg(strstr(why, node) != NULL, "%s", why);
    } else {
      ck_assert_msg(st.diverged_why == TS_DIVERGED_POSITION || st.diverged_why == TS_DIVERGED_VELOCITY,
                    "why %d", st.diverged_why);
      ck_assert_msg(strstr(why, "non-finite") != NULL, "%s", why);
    }
    /* reset to rest: no NaN leaves the core */
    for (uint32_t i = 0; i < t->n_nodes; i++)
      for (int k = 0; k < 3; k++) {
        ck_assert(t->x[i][k] == t->rest[i][k]);
        ck_assert(t->v[i][k] == 0.0);
      }
    const double *T = ts_xpbd_tensions(s);
    for (uint32_t j = 0; j < t->n_springs; j++) ck_assert(T[j] == 0.0);
    /* and the solver carries on */
    ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), 0);
    ck_assert_int_eq(st.diverged, 0);
    assert_finite_state(t);
  }
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_step_validation) {
  ts_tissue *t = default_patch();
  ts_xpbd *s = ts_xpbd_create(t, NULL);
  ck_assert_ptr_nonnull(s);
  ts_xpbd_stats st;
  ts_tool tool = {.kind = TS_TOOL_SPHERE, .active = 1, .radius = 0.005, .pos = {0, 0.1, 0},
                  .quat = {1, 0, 0, 0}};
  ck_assert_int_eq(ts_xpbd_step(NULL, t, 1e-3, NULL, 0, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, NULL, 1e-3, NULL, 0, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, 0, NULL, 0, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, -1e-3, NULL, 0, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, 2.0, NULL, 0, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, NAN, NULL, 0, &st), TS_ENAN);
  ck_assert_int_eq(ts_xpbd_step(s, t, INFINITY, NULL, 0, &st), TS_ENAN);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 1, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, -1, &st), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 65, &st), TS_EINVAL);
  ts_tool bad = tool;
  bad.pos[0] = NAN;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_ENAN);
  bad = tool;
  bad.quat[2] = INFINITY;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_ENAN);
  bad = tool;
  bad.radius = 0;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_EINVAL);
  bad = tool;
  bad.radius = 2;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_EINVAL);
  bad = tool;
  bad.kind = 7;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_EINVAL);
  bad = tool;
  bad.kind = TS_TOOL_CAPSULE;
  bad.length = -1;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &bad, 1, &st), TS_EINVAL);
  t->gravity[1] = NAN;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), TS_ENAN);
  t->gravity[1] = -9.81;
  double keep = t->inv_mass[100];
  t->inv_mass[100] = -1;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), TS_EINVAL);
  t->inv_mass[100] = NAN;
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, NULL, 0, &st), TS_EINVAL);
  t->inv_mass[100] = keep;
  /* none of the refusals moved anything or advanced time */
  for (uint32_t i = 0; i < t->n_nodes; i++)
    for (int k = 0; k < 3; k++) ck_assert(t->x[i][k] == t->rest[i][k]);
  ck_assert_uint_eq(t->steps, 0);
  ck_assert_double_eq(t->time, 0.0);
  /* a tissue the solver was not built for */
  ts_patch_def pd = ts_default_patch_def();
  pd.resolution = 10;
  ts_tissue *other = NULL;
  ck_assert_int_eq(ts_patch_create(&pd, &other), 0);
  ck_assert_int_eq(ts_xpbd_step(s, other, 1e-3, NULL, 0, &st), TS_EINVAL);
  double (*f)[3] = malloc(sizeof *f * other->n_nodes);
  ck_assert_int_eq(ts_xpbd_node_forces(s, other, f), TS_EINVAL);
  free(f);
  ts_tissue_destroy(other);
  /* a good step with all outputs */
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, &st), 0);
  ck_assert_uint_eq(t->steps, 1);
  ck_assert_int_eq(ts_xpbd_step(s, t, 1e-3, &tool, 1, NULL), 0);
  ts_xpbd_destroy(s);
  ts_xpbd_destroy(NULL);
  ts_tissue_destroy(t);
}
END_TEST

START_TEST(test_build_validation) {
  ts_tissue *t = default_patch();
  ts_xpbd *s = (ts_xpbd *)(uintptr_t)1;
  ts_xpbd_def good = ts_xpbd_default_def();
  ck_assert_uint_eq(good.iterations, 4);
  ck_assert_uint_eq(good.substeps, 0); /* automatic */
  ck_assert_int_eq(ts_xpbd_build(NULL, &good, &s), TS_EINVAL);
  ck_assert_ptr_null(s);
  ck_assert_int_eq(ts_xpbd_build(t, NULL, &s), TS_EINVAL);
  ck_assert_int_eq(ts_xpbd_build(t, &good, NULL), TS_EINVAL);
  ck_assert_ptr_null(ts_xpbd_create(NULL, NULL));
  ts_xpbd_def d;
#define BAD(stmt)                                                                        \
  do {                                                                                   \
    d = good;                                                                            \
    stmt;                                                                                \
    s = (ts_xpbd *)(uintptr_t)1;                                                         \
    ck_assert_int_eq(ts_xpbd_build(t, &d, &s), TS_EINVAL);                               \
    ck_assert_ptr_null(s);                                                               \
    ck_assert_ptr_null(ts_xpbd_create(t, &d));                                           \
  } while (0)
  BAD(d.iterations = 0);
  BAD(d.iterations = 1001);
  BAD(d.substeps = 10001);
  BAD(d.damping = -1);
  BAD(d.damping = NAN);
  BAD(d.stiffness_damping = -1e-3);
  BAD(d.stiffness_damping = INFINITY);
  BAD(d.poisson = 0.5);
  BAD(d.poisson = -0.1);
  BAD(d.poisson = NAN);
#undef BAD
  /* given compliances must be finite and non-negative */
  double *alpha = calloc(t->n_springs, sizeof *alpha);
  ck_assert_ptr_nonnull(alpha);
  d = good;
  d.compliance = alpha;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), 0);
  ck_assert_double_eq(ts_xpbd_compliance(s)[7], 0.0);
  ts_xpbd_destroy(s);
  alpha[7] = -1e-6;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), TS_EINVAL);
  alpha[7] = NAN;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), TS_EINVAL);
  alpha[7] = 0;
  /* bending and volume need the layers' moduli; the springs' constants do
   * not */
  double E0 = t->layers[1].young;
  t->layers[1].young = 0;
  ck_assert_int_eq(ts_xpbd_build(t, &good, &s), 0);
  ts_xpbd_destroy(s);
  d = good;
  d.volume = 1;
  ck_assert_int_eq(ts_xpbd_build(t, &d, &s), TS_EINVAL);
  t->layers[1].young = E0;
  /* malformed springs */
  ts_spring keep = t->springs[0];
#define BADSPRING(stmt)                                                                  \
  do {                                                                                   \
    t->springs[0] = keep;                                                                \
    stmt;                                                                                \
    ck_assert_int_eq(ts_xpbd_build(t, &good, &s), TS_EINVAL);                            \
    ck_assert_ptr_null(s);                                                               \
  } while (0)
  BADSPRING(t->springs[0].b = t->n_nodes);
  BADSPRING(t->springs[0].b = t->springs[0].a);
  BADSPRING(t->springs[0].rest = 0);
  BADSPRING(t->springs[0].rest = NAN);
  BADSPRING(t->springs[0].k1 = -1);
  BADSPRING(t->springs[0].k1 = INFINITY);
  BADSPRING(t->springs[0].b1 = 101);
  BADSPRING(t->springs[0].b2 = NAN);
  BADSPRING(t->springs[0].c = -1);
  BADSPRING(t->springs[0].k = t->springs[0].k1 = t->springs[0].k2 = 0); /* no stiffness */
#undef BADSPRING
  t->springs[0] = keep;
  free(alpha);

  /* a chain has no sheets: no bending or volume constraints can be made */
  ts_tissue *chain = make_chain(100.0, 0.0);
  d = good;
  ck_assert_int_eq(ts_xpbd_build(chain, &d, &s), 0);
  ts_xpbd_destroy(s);
  d.bending = 1;
  ck_assert_int_eq(ts_xpbd_build(chain, &d, &s), TS_EINVAL);
  d.bending = 0;
  d.volume = 1;
  ck_assert_int_eq(ts_xpbd_build(chain, &d, &s), TS_EINVAL);
  ts_tissue_destroy(chain);

  /* the patch's constraint counts: a distance constraint per spring; with
   * bending, one per interior sheet edge of each of the 4 sheets; with
   * volume, one per prism (3 layers of 2 * 23^2 triangles) */
  d = good;
  d.bending = 1;
  d.volume = 1;
  s = ts_xpbd_create(t, &d);
  ck_assert_ptr_nonnull(s);
  uint32_t nd, nb, nv;
  ts_xpbd_counts(s, &nd, &nb, &nv);
  ck_assert_uint_eq(nd, t->n_springs);
  const uint32_t res = 24, edges = 2 * res * (res - 1) + (res - 1) * (res - 1);
  ck_assert_uint_eq(nb, 4 * (edges - 4 * (res - 1)));
  ck_assert_uint_eq(nv, 3 * 2 * (res - 1) * (res - 1));
  ts_xpbd_destroy(s);
  ts_tissue_destroy(t);
}
END_TEST

static Suite *xpbd_suite(void) {
  Suite *s = suite_create("xpbd");
  TCase *geo = tcase_create("measures");
  tcase_add_test(geo, test_dihedral_known_angles_and_gradient);
  tcase_add_test(geo, test_prism_volume_known_and_gradient);
  suite_add_tcase(s, geo);
  TCase *chain = tcase_create("chain");
  tcase_add_test(chain, test_chain_iterations_and_time_step);
  tcase_add_test(chain, test_chain_stiff_substeps);
  tcase_add_test(chain, test_chain_tensions_and_damping);
  tcase_add_test(chain, test_exponential_law);
  tcase_add_test(chain, test_bending_hinge);
  suite_add_tcase(s, chain);
  TCase *patch = tcase_create("patch");
  tcase_set_timeout(patch, 300);
  tcase_add_test(patch, test_compliance_is_inverse_stiffness);
  tcase_add_test(patch, test_patch_gravity);
  tcase_add_test(patch, test_patch_sphere_press);
  tcase_add_test(patch, test_patch_sphere_press_no_gravity);
  tcase_add_test(patch, test_patch_sphere_press_bending_volume);
  tcase_add_test(patch, test_patch_volume_unfolds);
  tcase_add_test(patch, test_patch_capsule_press);
  tcase_add_test(patch, test_moving_tool_push);
  tcase_add_test(patch, test_carry_tools);
  suite_add_tcase(s, patch);
  TCase *val = tcase_create("validation");
  tcase_add_test(val, test_automatic_substeps);
  tcase_add_test(val, test_nan_injection_diverges_and_resets);
  tcase_add_test(val, test_step_validation);
  tcase_add_test(val, test_build_validation);
  suite_add_tcase(s, val);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(xpbd_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
