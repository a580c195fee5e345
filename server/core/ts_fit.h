/*
 * ts_fit.h: least-squares fit of the exponential soft-tissue law
 * sigma = a * e^(b * strain) to measured (strain, stress) samples.
 *
 * The law is the one the mass-spring model of issue 3 uses per layer and
 * direction (tangent modulus E(strain) = a * b * e^(b * strain)); the fits
 * are stored per tissue/layer/direction by server/materials.c and made by
 * `tissuetool fit` or the protocol's FitMaterial. The result is the true
 * minimiser of S(a, b) = sum_i (stress_i - a * e^(b * strain_i))^2, not the
 * log-linear approximation; ts_fit.c explains how and why.
 *
 * Units: strain is dimensionless engineering strain (0.1 = 10 %), stress any
 * unit (Pa throughout tissued); a comes out in the stress unit, b per unit
 * strain.
 *
 * Cost: about 1,300 passes over the samples, each an exponential per sample
 * (some 25 ms per 1,000 samples on the project's 2-core machines; the sample
 * reader caps a file at 20,000 samples).
 *
 * No allocation, no global state: reentrant.
 */
#ifndef TS_FIT_H
#define TS_FIT_H

#include <stddef.h>
#include <stdint.h>

/* Input checks (each refusal names the sample, see ts_fit_exp). */
#define TS_FIT_MIN_SAMPLES 3
#define TS_FIT_MAX_STRAIN 10.0 /* 1000 %: larger values are percent, not strain */
#define TS_FIT_MAX_STRESS 1e15 /* Pa; beyond any material */

typedef struct ts_expfit {
  double a;           /* stress unit (Pa): the law's value at zero strain */
  double b;           /* per unit strain */
  double rmse;        /* sqrt(ss_res / n), stress unit */
  double r2;          /* 1 - ss_res / ss_tot (1 when all stresses are equal
                         and fitted exactly) */
  double ss_res;      /* S(a, b) at the optimum, stress unit squared */
  uint32_t n;         /* samples used */
  double a_loglinear; /* the classical fit of ln(stress) = ln(a) + b*strain, */
  double b_loglinear; /*   reported for comparison (it minimises relative,
                         not absolute, errors) */
  double optimality;  /* |residual projected on the model's tangent plane| /
                         |residual|: 0 where both partial derivatives of S
                         vanish; at most 1e-6 on success, and 0 when the
                         fit is exact to rounding or the projection is below
                         the rounding of the residuals */
  uint32_t minima;    /* local minima of the profile S(a(b), b) found (>= 1) */
} ts_expfit;

/* Fits the law to n samples (any order; repeated strains are fine).
 * line may be NULL; when given, line[i] is the sample's line in its file and
 * messages say "line L" instead of "sample i" (1-based).
 *
 * Returns 0 with *out filled, or (message in err when errcap > 0):
 *   TS_EINVAL  NULL arrays, n < 3, all strains equal (b is undetermined),
 *              a stress <= 0 (the law is positive for every strain: drop
 *              unloaded points, e.g. the (0, 0) origin)
 *   TS_ENAN    a strain or stress is NaN or infinite
 *   TS_ERANGE  a strain <= -1 (zero length) or above TS_FIT_MAX_STRAIN, a
 *              stress above TS_FIT_MAX_STRESS, or no finite optimum exists
 *              (the data rise or fall faster than any exponential, so S only
 *              decreases as b -> +-infinity), or a/b not representable
 *   TS_EINTERNAL  the optimum failed its final gradient check (a bug)
 * On failure *out is left unchanged. */
int ts_fit_exp(const double *strain, const double *stress, const uint32_t *line, uint32_t n,
               ts_expfit *out, char *err, size_t errcap);

/* S(a, b) = sum_i (stress_i - a * e^(b * strain_i))^2 evaluated directly
 * (for comparisons and tests). Returns NaN for NULL arrays. */
double ts_fit_exp_sse(const double *strain, const double *stress, uint32_t n, double a, double b);

#endif
