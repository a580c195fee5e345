/*
 * ts_force_filter.c: the critically damped second-order low-pass of a
 * tool's reaction (ts_force_filter.h): two first-order stages in cascade,
 * each discretised exactly for an input held over the step.
 */
#include "ts_force_filter.h"

#include <math.h>
#include <stddef.h>

#include "ts_error.h"

#define TS__PI 3.14159265358979323846

int ts_force_filter_init(ts_force_filter *f, double cutoff_hz, int start_at_input) {
  if (!f || !(cutoff_hz > 0) || !isfinite(cutoff_hz)) return TS_EINVAL;
  f->cutoff_hz = cutoff_hz;
  for (int i = 0; i < TS_FORCE_FILTER_N; i++) f->y1[i] = f->y2[i] = 0;
  f->started = !start_at_input;
  return 0;
}

double ts_force_filter_gain(const ts_force_filter *f, double dt) {
  if (!f || !(dt > 0)) return 0;
  return -expm1(-2.0 * TS__PI * f->cutoff_hz * dt);
}

int ts_force_filter_step(ts_force_filter *f, double dt, const double in[TS_FORCE_FILTER_N],
                         double out[TS_FORCE_FILTER_N]) {
  if (!f || !in || !out) return TS_EINVAL;
  if (!isfinite(dt)) return TS_ENAN;
  if (!(dt > 0)) return TS_EINVAL;
  for (int i = 0; i < TS_FORCE_FILTER_N; i++)
    if (!isfinite(in[i])) return TS_ENAN;
  if (!f->started) {
    for (int i = 0; i < TS_FORCE_FILTER_N; i++) f->y1[i] = f->y2[i] = in[i];
    f->started = 1;
  } else {
    const double a = ts_force_filter_gain(f, dt);
    for (int i = 0; i < TS_FORCE_FILTER_N; i++) {
      f->y1[i] += a * (in[i] - f->y1[i]);
      f->y2[i] += a * (f->y1[i] - f->y2[i]);
    }
  }
  for (int i = 0; i < TS_FORCE_FILTER_N; i++) out[i] = f->y2[i];
  return 0;
}
