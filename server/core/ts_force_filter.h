/*
 * ts_force_filter.h: smoothing of a tool's reaction (force and torque) for
 * haptics, so that a tissue vertex entering or leaving contact, which
 * changes the raw per-step sum by its whole share at once, does not reach
 * the hand as a spike.
 *
 * Method: a critically damped second-order low-pass, realised as two equal
 * first-order stages in cascade (the product of two real poles at -w is the
 * critically damped pair: no overshoot, so a step in the raw force is
 * followed monotonically). Each stage is the exact discretisation of
 * y' = w (u - y) for an input held over the step:
 *   y += a (u - y),  a = 1 - exp(-w dt),  w = 2 pi f_c.
 * Both stages are convex combinations, so the output stays within the range
 * of the inputs seen, and the step-to-step change of the output is
 *   |out_k - out_(k-1)| = a |y1_k - out_(k-1)| <= a * (range of the raw input),
 * the bound the tests assert: with f_c = 30 Hz at 1 ms steps, a = 0.17.
 * At a constant input the output converges to it (static forces exact).
 */
#ifndef TS_FORCE_FILTER_H
#define TS_FORCE_FILTER_H

#define TS_FORCE_FILTER_N 6 /* force x, y, z (N) and torque x, y, z (N m) */

typedef struct ts_force_filter {
  double cutoff_hz; /* f_c, Hz (> 0) */
  double y1[TS_FORCE_FILTER_N]; /* first stage */
  double y2[TS_FORCE_FILTER_N]; /* second stage: the output */
  int started;                  /* 0: the next input initialises both stages */
} ts_force_filter;

/* Default cut-off: 30 Hz, under the 1 kHz haptic rate by a factor that
 * keeps a vertex's jump to a sixth per step, above the few Hz of hand
 * motion. */
#define TS_FORCE_FILTER_DEFAULT_HZ 30.0

/* Sets up a filter at rest with output 0 that will start from its first
 * input when start_at_input is nonzero (from 0 otherwise). Returns 0, or
 * TS_EINVAL (NULL, cut-off not positive and finite). */
int ts_force_filter_init(ts_force_filter *f, double cutoff_hz, int start_at_input);

/* The factor a of one step of length dt (s): 1 - exp(-2 pi f_c dt). */
double ts_force_filter_gain(const ts_force_filter *f, double dt);

/* Feeds the raw force and torque of one step of length dt (s) and writes
 * the filtered values to out (may alias in). Returns 0, TS_EINVAL (NULL,
 * dt not positive) or TS_ENAN (a non-finite input or dt; the filter is
 * then unchanged). */
int ts_force_filter_step(ts_force_filter *f, double dt, const double in[TS_FORCE_FILTER_N],
                         double out[TS_FORCE_FILTER_N]);

#endif
