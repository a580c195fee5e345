/*
 * ts_fit.c: least-squares fit of sigma = a * e^(b * strain) (ts_fit.h).
 *
 * Why not the usual linearisation. Taking logarithms turns the law into a
 * straight line, ln(sigma) = ln(a) + b * strain, which linear regression
 * solves in closed form. But that minimises sum (ln sigma_i - ln a - b e_i)^2,
 * i.e. relative errors: small stresses get large weights and additive
 * measurement noise biases a and b. Its answer is reported (a_loglinear,
 * b_loglinear) and is not the optimum of the problem we are asked to solve,
 *     minimise S(a, b) = sum_i (sigma_i - a * e^(b * e_i))^2.
 *
 * How the true optimum is found (variable projection, G. H. Golub and
 * V. Pereyra, "The differentiation of pseudo-inverses and nonlinear least
 * squares problems whose variables separate", SIAM J. Numer. Anal. 10(2),
 * 1973):
 *  1. For fixed b, S is a convex quadratic in a, minimised exactly by
 *     a(b) = sum sigma_i E_i / sum E_i^2 with E_i = e^(b e_i). Hence
 *     min over (a, b) of S = min over b of the profile P(b) = S(a(b), b):
 *     a one-dimensional problem with nothing lost.
 *  2. P is smooth, bounded by sum sigma_i^2, and has known limits as
 *     b -> +-infinity (the model then fits only the samples at the largest,
 *     resp. smallest, strain). Its derivative follows from the envelope
 *     theorem without differentiating a(b):
 *         P'(b) = dS/db at a = a(b) = -2 a sum r_i E_i e_i,
 *     computed from the residuals r_i directly (no cancellation).
 *  3. Scan. In normalised variables (u = (e - e_min)/(e_max - e_min) in
 *     [0, 1], y = sigma / max sigma, B = b * (e_max - e_min), the log of the
 *     model's stress ratio across the data) the scan evaluates P' on a grid of
 *     B: every 0.25 on [-64, 64], then geometrically (x1.1) to +-2048. Every
 *     change of sign from - to + brackets a local minimum. A minimum narrower
 *     than one grid step (its basin would have to change the model's stress
 *     ratio by less than 28 %) is the one case the scan could miss.
 *  4. Refine. Each bracket is solved for P'(B) = 0 with Brent's root finder
 *     (R. P. Brent, "Algorithms for Minimization without Derivatives",
 *     1973, ch. 4: bisection safeguarding secant and inverse quadratic
 *     steps) to machine precision. The local minimum with the smallest P is
 *     the global optimum. Where P is still falling at an end of the grid,
 *     B is doubled until P' changes sign (a minimum far out arises when
 *     samples crowd the extreme strain). With positive stresses P tends to
 *     its limits at +-infinity from below, so a finite minimiser always
 *     exists; the code still compares against the limits and refuses
 *     (TS_ERANGE) rather than report a non-optimum.
 *  5. Check. At the result the residual vector must be orthogonal to the
 *     tangent plane of the model (both partial derivatives of S zero); the
 *     size of its projection relative to the residual is reported as
 *     `optimality` and must be below 1e-6 (or the fit exact to rounding, or
 *     the projection below the rounding of the residuals themselves).
 *
 * The shifted exponent E_i = e^(B (u_i - c)) with c = 1 for B >= 0 and c = 0
 * otherwise keeps every E_i in (0, 1]: no overflow for any B on the grid, and
 * sum E_i^2 >= 1 (some sample sits at u = c), so a(b) is always defined.
 */
#include "ts_fit.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "ts_error.h"

#define TS__FIT_GRID_STEP 0.25
#define TS__FIT_GRID_LINEAR 256 /* grid steps on each side up to |B| = 64 */
#define TS__FIT_GRID_GROWTH 1.1
#define TS__FIT_GRID_MAX_B 2048.0
#define TS__FIT_OPTIMALITY 1e-6

static int fit_fail(char *err, size_t cap, int code, const char *fmt, ...) {
  if (err && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* "line 12" or "sample 3" for messages. */
static void where(char *buf, size_t cap, const uint32_t *line, uint32_t i) {
  if (line)
    snprintf(buf, cap, "line %u", line[i]);
  else
    snprintf(buf, cap, "sample %u", i + 1);
}

/* The normalised problem: samples mapped to u in [0, 1] and y in (0, 1]. */
typedef struct fitctx {
  const double *e, *s;
  uint32_t n;
  double e_min, span, s_max;
} fitctx;

static double u_of(const fitctx *c, uint32_t i) { return (c->e[i] - c->e_min) / c->span; }
static double y_of(const fitctx *c, uint32_t i) { return c->s[i] / c->s_max; }

/* The profile at B: optimal amplitude A (of the shifted model), P(B) and
 * P'(B). */
typedef struct prof {
  double B, A, P, g;
} prof;

static prof profile(const fitctx *c, double B) {
  double shift = B >= 0.0 ? 1.0 : 0.0;
  double sye = 0.0, see = 0.0;
  for (uint32_t i = 0; i < c->n; i++) {
    double E = exp(B * (u_of(c, i) - shift));
    sye += y_of(c, i) * E;
    see += E * E;
  }
  prof p = {B, sye / see, 0.0, 0.0};
  double P = 0.0, G = 0.0;
  for (uint32_t i = 0; i < c->n; i++) {
    double du = u_of(c, i) - shift;
    double E = exp(B * du);
    double r = y_of(c, i) - p.A * E;
    P += r * r;
    G += r * E * du;
  }
  p.P = P;
  p.g = -2.0 * p.A * G;
  return p;
}

/* lim P(B) for B -> +infinity (top = 1) or -infinity (top = 0): the samples
 * at u == top are fitted by their mean, the others by zero. */
static double profile_limit(const fitctx *c, int top) {
  double sum = 0.0, cnt = 0.0;
  for (uint32_t i = 0; i < c->n; i++)
    if (u_of(c, i) == (double)top) sum += y_of(c, i), cnt += 1.0;
  double mean = sum / cnt, P = 0.0;
  for (uint32_t i = 0; i < c->n; i++) {
    double y = y_of(c, i), r = u_of(c, i) == (double)top ? y - mean : y;
    P += r * r;
  }
  return P;
}

static double grid_B(int k) {
  int m = k < 0 ? -k : k;
  double v = m <= TS__FIT_GRID_LINEAR ? m * TS__FIT_GRID_STEP
                                      : TS__FIT_GRID_LINEAR * TS__FIT_GRID_STEP *
                                            pow(TS__FIT_GRID_GROWTH, m - TS__FIT_GRID_LINEAR);
  return k < 0 ? -v : v;
}

static int grid_K(void) {
  int k = TS__FIT_GRID_LINEAR;
  while (grid_B(k) < TS__FIT_GRID_MAX_B) k++;
  return k;
}

/* Brent's zeroin for P'(B) = 0 on [lo, hi] with P'(lo) < 0 < P'(hi). */
static prof solve_bracket(const fitctx *c, prof lo, prof hi) {
  prof a = lo, b = hi, cc = lo;
  double d = b.B - a.B, e = d;
  for (int it = 0; it < 300; it++) {
    if ((b.g > 0.0) == (cc.g > 0.0)) {
      cc = a;
      d = e = b.B - a.B;
    }
    if (fabs(cc.g) < fabs(b.g)) {
      a = b;
      b = cc;
      cc = a;
    }
    double tol = 2.0 * DBL_EPSILON * fabs(b.B) + 0.5e-15;
    double m = 0.5 * (cc.B - b.B);
    if (fabs(m) <= tol || b.g == 0.0) break;
    if (fabs(e) >= tol && fabs(a.g) > fabs(b.g)) {
      double s = b.g / a.g, p, q;
      if (a.B == cc.B) {
        p = 2.0 * m * s;
        q = 1.0 - s;
      } else {
        double qq = a.g / cc.g, r = b.g / cc.g;
        p = s * (2.0 * m * qq * (qq - r) - (b.B - a.B) * (r - 1.0));
        q = (qq - 1.0) * (r - 1.0) * (s - 1.0);
      }
      if (p > 0.0)
        q = -q;
      else
        p = -p;
      if (2.0 * p < 3.0 * m * q - fabs(tol * q) && p < fabs(0.5 * e * q)) {
        e = d;
        d = p / q;
      } else {
        d = e = m;
      }
    } else {
      d = e = m;
    }
    a = b;
    double nb = b.B + (fabs(d) > tol ? d : (m > 0.0 ? tol : -tol));
    b = profile(c, nb);
  }
  return b;
}

/* Size of the residual's projection on span{J1, J2} relative to |r|, with
 * J1 = dmodel/dA and J2 = dmodel/dB at the result. */
static double optimality(const fitctx *c, const prof *p, double *rnorm) {
  double shift = p->B >= 0.0 ? 1.0 : 0.0;
  double q1 = 0, q2 = 0, g11 = 0, g12 = 0, g22 = 0, rr = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    double du = u_of(c, i) - shift;
    double E = exp(p->B * du);
    double r = y_of(c, i) - p->A * E;
    double j1 = E, j2 = p->A * E * du;
    q1 += j1 * r;
    q2 += j2 * r;
    g11 += j1 * j1;
    g12 += j1 * j2;
    g22 += j2 * j2;
    rr += r * r;
  }
  *rnorm = sqrt(rr);
  if (rr == 0.0) return 0.0;
  double det = g11 * g22 - g12 * g12, proj2;
  if (det > 1e-300 && det > 1e-14 * g11 * g22)
    proj2 = (g22 * q1 * q1 - 2.0 * g12 * q1 * q2 + g11 * q2 * q2) / det;
  else
    proj2 = q1 * q1 / g11; /* tangent plane degenerate: J2 ~ parallel to J1 */
  if (proj2 < 0.0) proj2 = 0.0;
  return sqrt(proj2 / rr);
}

static int check_input(const double *e, const double *s, const uint32_t *line, uint32_t n,
                       char *err, size_t cap) {
  char at[32];
  for (uint32_t i = 0; i < n; i++) {
    where(at, sizeof at, line, i);
    if (!isfinite(e[i])) return fit_fail(err, cap, TS_ENAN, "%s: strain is not finite", at);
    if (!isfinite(s[i])) return fit_fail(err, cap, TS_ENAN, "%s: stress is not finite", at);
    if (e[i] <= -1.0)
      return fit_fail(err, cap, TS_ERANGE,
                      "%s: strain %g is <= -1 (the specimen would have zero length)", at, e[i]);
    if (e[i] > TS_FIT_MAX_STRAIN)
      return fit_fail(err, cap, TS_ERANGE,
                      "%s: strain %g is over %g (%g %%): give strain as a fraction, not in percent",
                      at, e[i], TS_FIT_MAX_STRAIN, TS_FIT_MAX_STRAIN * 100.0);
    if (s[i] <= 0.0)
      return fit_fail(err, cap, TS_EINVAL,
                      "%s: stress %g is not positive; sigma = a*e^(b*strain) is positive for "
                      "every strain, so unloaded points (such as 0,0) cannot be fitted: drop them",
                      at, s[i]);
    if (s[i] > TS_FIT_MAX_STRESS)
      return fit_fail(err, cap, TS_ERANGE, "%s: stress %g is over %g Pa", at, s[i],
                      TS_FIT_MAX_STRESS);
  }
  return 0;
}

double ts_fit_exp_sse(const double *strain, const double *stress, uint32_t n, double a, double b) {
  if (!strain || !stress) return NAN;
  double S = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    double r = stress[i] - a * exp(b * strain[i]);
    S += r * r;
  }
  return S;
}

int ts_fit_exp(const double *strain, const double *stress, const uint32_t *line, uint32_t n,
               ts_expfit *out, char *err, size_t errcap) {
  if (!strain || !stress || !out) return fit_fail(err, errcap, TS_EINVAL, "no samples given");
  if (n < TS_FIT_MIN_SAMPLES)
    return fit_fail(err, errcap, TS_EINVAL, "%u sample%s: at least %d are needed to fit a and b", n,
                    n == 1 ? "" : "s", TS_FIT_MIN_SAMPLES);
  int rc = check_input(strain, stress, line, n, err, errcap);
  if (rc) return rc;

  fitctx c = {strain, stress, n, strain[0], 0.0, stress[0]};
  double e_max = strain[0];
  for (uint32_t i = 1; i < n; i++) {
    if (strain[i] < c.e_min) c.e_min = strain[i];
    if (strain[i] > e_max) e_max = strain[i];
    if (stress[i] > c.s_max) c.s_max = stress[i];
  }
  c.span = e_max - c.e_min;
  if (!(c.span > 0.0))
    return fit_fail(err, errcap, TS_EINVAL,
                    "all %u strains are equal (%g): b cannot be determined from one strain", n,
                    c.e_min);

  /* the log-linear fit, for the report: ln y = ln A0 + B0 u */
  double mu = 0.0, ml = 0.0;
  for (uint32_t i = 0; i < n; i++) mu += u_of(&c, i), ml += log(y_of(&c, i));
  mu /= n;
  ml /= n;
  double suu = 0.0, sul = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    double du = u_of(&c, i) - mu;
    suu += du * du;
    sul += du * (log(y_of(&c, i)) - ml);
  }
  ts_expfit res = {0};
  double B0 = sul / suu;
  res.b_loglinear = B0 / c.span;
  res.a_loglinear = exp(log(c.s_max) + ml - B0 * mu - res.b_loglinear * c.e_min);

  /* scan for every local minimum of the profile and refine each */
  int K = grid_K();
  prof prev = profile(&c, grid_B(-K)), best = {0, 0, INFINITY, 0};
  prof leftmost = prev;
  uint32_t minima = 0;
  for (int k = -K + 1; k <= K; k++) {
    prof cur = profile(&c, grid_B(k));
    if (prev.g < 0.0 && cur.g >= 0.0) {
      prof m = cur.g == 0.0 ? cur : solve_bracket(&c, prev, cur);
      minima++;
      if (m.P < best.P) best = m;
    }
    prev = cur;
  }
  /* P still falling at an end of the grid: its minimum lies further out
   * (samples crowding the largest or smallest strain); follow it by
   * doubling B until P' changes sign or the exponentials underflow. */
  for (int side = 0; side < 2; side++) {
    prof edge = side ? prev : leftmost;
    double dir = side ? 1.0 : -1.0;
    if (!(dir * edge.g < 0.0)) continue;
    while (fabs(edge.B) < 1e300) {
      prof cur = profile(&c, edge.B * 2.0);
      if (dir * cur.g >= 0.0) {
        prof m = cur.g == 0.0 ? cur
                 : side       ? solve_bracket(&c, edge, cur)
                              : solve_bracket(&c, cur, edge);
        minima++;
        if (m.P < best.P) best = m;
        break;
      }
      edge = cur;
    }
  }
  /* With positive stresses P approaches its limits at +-infinity from below
   * (the sample nearest the extreme strain gains from a non-zero model
   * value), so a finite minimiser exists; this guards the claim. */
  double p_plus = profile_limit(&c, 1), p_minus = profile_limit(&c, 0);
  double p_inf = p_plus < p_minus ? p_plus : p_minus;
  if (minima == 0 || best.P > p_inf + 1e-13 * (1.0 + p_inf)) {
    int up = p_plus <= p_minus;
    return fit_fail(err, errcap, TS_ERANGE,
                    "no finite least-squares optimum: S(a,b) keeps decreasing as b -> %sinfinity "
                    "(the samples at the %s strain dominate)",
                    up ? "+" : "-", up ? "largest" : "smallest");
  }

  double shift = best.B >= 0.0 ? 1.0 : 0.0;
  double b = best.B / c.span;
  double la = log(c.s_max * best.A) - best.B * shift - b * c.e_min;
  if (!isfinite(b) || !(la < 709.0 && la > -708.0))
    return fit_fail(err, errcap, TS_ERANGE,
                    "the optimum (b = %g) needs a = e^%g, outside the range of a double "
                    "(samples crowd the %s strain)",
                    b, la, best.B >= 0.0 ? "largest" : "smallest");
  /* users evaluate the law as a * exp(b * strain): both factors and the
   * product must stay finite at every sample strain */
  for (uint32_t i = 0; i < n; i++) {
    double be = b * strain[i];
    if (!(be < 709.0 && la + be < 709.0))
      return fit_fail(err, errcap, TS_ERANGE,
                      "the optimum (b = %g) makes e^(b * strain) overflow at strain %g: one "
                      "sample dominates the fit; check the data",
                      b, strain[i]);
  }

  double rnorm;
  double opt = optimality(&c, &best, &rnorm);
  double ynorm = 0.0, ymean = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    double y = y_of(&c, i);
    ynorm += y * y;
    ymean += y;
  }
  ynorm = sqrt(ynorm);
  ymean /= n;
  /* Each residual carries a rounding error of about eps * |y_i|, so the
   * projection (sums of E_i * r_i) cannot be told from zero below about
   * n * eps * |y|: a residual that small (samples at one strain that differ
   * in their last digits, say) is at the optimum to rounding, whatever
   * the ratio to |r| says. */
  int exact = rnorm <= 1e-12 * ynorm || opt * rnorm <= 16.0 * n * DBL_EPSILON * ynorm;
  if (!(opt <= TS__FIT_OPTIMALITY) && !exact)
    return fit_fail(err, errcap, TS_EINTERNAL,
                    "the fit failed its optimality check (residual %.3g of the way into the "
                    "tangent plane)",
                    opt);

  double tot = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    double d = y_of(&c, i) - ymean;
    tot += d * d;
  }
  res.a = exp(la);
  res.b = b;
  res.n = n;
  res.ss_res = c.s_max * c.s_max * best.P;
  /* Where the samples follow the law exactly, the log-linear estimate can
   * be the exact solution while the profile's minimiser lies a few ulps
   * from it, with residuals of rounding size. Both are compared in the
   * original variables and the smaller sum of squares is the answer. */
  double S_opt = ts_fit_exp_sse(strain, stress, n, res.a, res.b);
  double S_ll = ts_fit_exp_sse(strain, stress, n, res.a_loglinear, res.b_loglinear);
  double P = best.P;
  if (isfinite(S_ll) && S_ll < S_opt && res.a_loglinear > 0 && isfinite(res.a_loglinear) &&
      isfinite(res.b_loglinear)) {
    res.a = res.a_loglinear;
    res.b = res.b_loglinear;
    res.ss_res = S_ll;
    P = S_ll / (c.s_max * c.s_max);
  }
  res.rmse = c.s_max * sqrt(P / n);
  res.r2 = tot > 0.0 ? 1.0 - P / tot : (P == 0.0 ? 1.0 : 0.0);
  res.optimality = exact ? 0.0 : opt;
  res.minima = minima;
  *out = res;
  if (err && errcap) err[0] = '\0';
  return 0;
}
