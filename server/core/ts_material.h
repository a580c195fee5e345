/*
 * ts_material.h: the tissue's material law and how a spring carries it.
 *
 * Link-element equivalence. A spring of rest length L standing for a bar of
 * cross-section A of a material with modulus E elongates like the bar under
 * the same force when k = E A / L (the FEM link element). The builders derive
 * A for every spring from the volume of material attributed to it (A = V/L,
 * ts_tissue_build.c).
 *
 * Exponential law. Soft tissue follows sigma = a e^(b eps) (Fung, "Elasticity
 * of soft tissues in simple elongation", Am J Physiol 213(6):1532-1544, 1967).
 * Its tangent modulus E(eps) = d sigma / d eps = a b e^(b eps) gives each
 * spring the strain-dependent constant k'(eps) = A E(eps) / L, evaluated from
 * the spring's current strain every step, and the spring's tension is
 * k'(eps) (L - L0). In compression (eps < 0) the law is not used: tissue
 * buckles rather than stiffening or softening exponentially, and e^(b eps)
 * would soften a compressed spring towards zero stiffness and let it
 * collapse; there E keeps its small-strain value a b, so k'(eps) =
 * A a b e^(b max(eps, 0)) / L.
 *
 * Anisotropy. Each layer has an axial (along its fibre direction) and a
 * radial (across) law, each giving its own k_alpha, k_beta from the same A
 * and L; a spring at angle theta to the fibre has F = F_alpha cos(theta) +
 * F_beta sin(theta). The fibre direction is projected onto the tangent plane
 * of the surface at the spring. A layer without a fibre direction is
 * isotropic: the axial law holds along every spring.
 *
 * Default materials (ts_material_default_layers): the stomach wall of the
 * project's scenarios, see ts_material.c for the sources and values.
 */
#ifndef TS_MATERIAL_H
#define TS_MATERIAL_H

#include <stdint.h>
#include <string.h>

#include "ts_tissue.h"

enum { TS_DIR_AXIAL = 0, TS_DIR_RADIAL = 1 };

/* sigma(eps) = a e^(b eps), Pa. */
double ts_law_stress(ts_law law, double eps);

/* Tangent modulus E(eps) = a b e^(b max(eps, 0)), Pa (the small-strain value
 * a b in compression, see above). */
double ts_law_tangent(ts_law law, double eps);

/* k = E A / L, N/m (E in Pa, A in m^2, L in m). */
double ts_link_stiffness(double young, double area, double length);

/* k'(eps) = A E(eps) / L of a spring made of `law`, N/m. */
double ts_law_spring_constant(ts_law law, double area, double length, double eps);

/* Fibre weights of a spring: w_axial = cos(theta), w_radial = sin(theta),
 * theta in [0, pi/2] the angle between the spring direction `dir` and the
 * fibre `fibre` projected onto the plane normal to `normal` (normal may be
 * NULL: no projection). A zero fibre (or one along the normal) gives the
 * isotropic weights (1, 0) for a zero fibre and (0, 1) for a fibre along the
 * normal. `dir` need not be unit. */
void ts_fibre_weights(const double dir[3], const double fibre[3], const double normal[3],
                      double *w_axial, double *w_radial);

/* Sets a layer's law in one direction (TS_DIR_*); setting the axial law also
 * sets young = a b. Returns 0 or TS_EINVAL (a or b not finite and positive,
 * unknown direction). */
int ts_layer_set_law(ts_layer *layer, int dir, double a, double b);

/* 0 when the layer is usable by the builders: a terminated non-empty name,
 * finite positive thickness, density and laws (a, b > 0, a b <= 1e9 Pa, b <=
 * 100), damping ratio in [0, 10], a finite fibre, -1 < strain_min < 0 <
 * strain_max <= 10 (both finite). TS_EINVAL otherwise. `young` is not
 * checked: it is derived. */
int ts_layer_validate(const ts_layer *layer);

/* The default stomach wall, outside in: mucosa, submucosa, muscularis. Fills
 * out[0..2] and returns 3. */
uint32_t ts_material_default_layers(ts_layer out[3]);

/* e^x for 0 <= x <= 700 (ts_exp_pos clamps larger x to 700; ts_exp_unclamped
 * requires the range; negative x is not supported), to within 2 ulp of
 * exp(). The step evaluates one or two per
 * spring per substep; this form has no branch, no call and no conversion
 * to integer, so the compiler vectorises it across springs. Range reduction
 * x = n ln2 + r, |r| <= ln2/2, with n found by the 1.5 * 2^52 rounding
 * trick (whose low mantissa bits then hold n) and Cody and Waite's two-part
 * ln2; then the degree-12 Taylor polynomial of e^r (truncation below 2e-16
 * relative) and n added to the result's exponent bits. */
static inline double ts_exp_unclamped(double x) {
  const double shift = 6755399441055744.0; /* 1.5 * 2^52 */
  double y = x * 1.4426950408889634 + shift;
  double kf = y - shift;
  double r = (x - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10;
  double p = 2.08767569878680989792e-09; /* 1/12! */
  p = p * r + 2.50521083854417187751e-08;
  p = p * r + 2.75573192239858906526e-07;
  p = p * r + 2.75573192239858906526e-06;
  p = p * r + 2.48015873015873015873e-05;
  p = p * r + 1.98412698412698412698e-04;
  p = p * r + 1.38888888888888888889e-03;
  p = p * r + 8.33333333333333333333e-03;
  p = p * r + 4.16666666666666666667e-02;
  p = p * r + 1.66666666666666666667e-01;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  uint64_t yb, pb;
  memcpy(&yb, &y, sizeof yb);
  memcpy(&pb, &p, sizeof pb);
  pb += yb << 52; /* y's low bits are n (n < 2^51): shifted, 2^52 n */
  memcpy(&p, &pb, sizeof p);
  return p;
}

static inline double ts_exp_pos(double x) { return ts_exp_unclamped(x < 700.0 ? x : 700.0); }

/* e^x for 0 <= x <= 700 (the range is required, as for ts_exp_unclamped)
 * to within 2e-14 relative: the mass-spring force loop's exponential
 * (ts_ms_forces.c), two per spring per substep. The same range reduction as
 * ts_exp_unclamped, then instead of the degree-12 Taylor polynomial the
 * degree-9 polynomial of least maximum relative error to e^r on |r| <=
 * ln2/2 (Remez exchange in 50-digit arithmetic, coefficients rounded to
 * double): its own error is 1.34e-14, 1.37e-14 with the rounding of its
 * evaluation (measured against 50-digit e^x at 2e5 points over [0, 700],
 * tests/unit/test_ms_forces.c checks 2e-14 against exp and expl). The
 * polynomial is evaluated by Estrin's scheme rather than Horner's: two more
 * multiplications, but a dependency chain of 6 operations instead of 18,
 * which the force loop waits on (the loop alone 8 % faster on patch-S,
 * ts_ms_forces.c); 1.38e-14 against expl at 7e6 points over [0, 700]
 * (Horner's 1.37e-14 there). That is ~60 ulp of
 * the stiffness k'(eps), far below anything the step resolves: the
 * material constants are known to a few per cent and one substep's own
 * truncation error is ~h^2 relative. Where the reduction's n changes, the
 * result may step by up to 3e-14 relative (the error's spread), the only
 * departure from a smooth law. Three fewer multiply-adds than the degree-12
 * form. */
static inline double ts_exp_spring(double x) {
  const double shift = 6755399441055744.0; /* 1.5 * 2^52 */
  double y = x * 1.4426950408889634 + shift;
  double kf = y - shift;
  double r = (x - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10;
  const double c9 = 2.74821890754232712e-06, c8 = 2.48840100297089640e-05,
               c7 = 1.98415963915238308e-04, c6 = 1.38888028288016623e-03,
               c5 = 8.33333300282730269e-03, c4 = 4.16666670324633975e-02,
               c3 = 1.66666666678269404e-01, c2 = 4.99999999994579725e-01,
               c1 = 9.99999999999892752e-01, c0 = 1.00000000000001266e+00;
  /* Estrin's scheme: pairs, then pairs of pairs by r^2, then by r^4 */
  const double r2 = r * r, r4 = r2 * r2;
  const double q01 = c0 + c1 * r, q23 = c2 + c3 * r, q45 = c4 + c5 * r;
  const double q67 = c6 + c7 * r, q89 = c8 + c9 * r;
  const double q03 = q01 + q23 * r2, q47 = q45 + q67 * r2;
  double p = q03 + (q47 + q89 * r4) * r4;
  uint64_t yb, pb;
  memcpy(&yb, &y, sizeof yb);
  memcpy(&pb, &p, sizeof pb);
  pb += yb << 52; /* as in ts_exp_unclamped */
  memcpy(&p, &pb, sizeof p);
  return p;
}

/* e^x for 0 <= x <= 1/8 (the range is required) to within 1e-14 relative:
 * the force loop's exponential for a block of springs whose b eps are all
 * that small (ts_ms_forces.c; most blocks of a pressed patch, nearly all of
 * a resting one). No range reduction: e^x = e^(1/16) e^u with u = x - 1/16,
 * |u| <= 1/16, e^u by its Taylor polynomial of degree 7 (Estrin's scheme),
 * whose truncation error is at most (1/16)^8 / 8! e^(1/16) = 6.2e-15;
 * 6.5e-15 against expl at 2e6 points over [0, 1/8], the worst at x = 0
 * (tests/unit/test_ms_forces.c checks 1e-14). 16 operations against
 * ts_exp_spring's 28. Between the two a spring's stiffness may step by up
 * to 1.9e-14 relative (measured there) when its block changes from one to
 * the other, as ts_exp_spring's own reduction steps it. */
static inline double ts_exp_spring_small(double x) {
  const double u = x - 0.0625;
  const double c7 = 1.0 / 5040.0, c6 = 1.0 / 720.0, c5 = 1.0 / 120.0, c4 = 1.0 / 24.0,
               c3 = 1.0 / 6.0, c2 = 0.5;
  const double u2 = u * u, u4 = u2 * u2;
  const double q01 = 1.0 + u, q23 = c2 + c3 * u, q45 = c4 + c5 * u, q67 = c6 + c7 * u;
  const double q03 = q01 + q23 * u2, q47 = q45 + q67 * u2;
  return 1.0644944589178593 * (q03 + q47 * u4); /* e^(1/16) */
}

#endif
