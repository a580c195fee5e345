/*
 * bench_report.c: JSON lines and clocks of the benchmarks (see
 * bench_report.h).
 */
#include "bench_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* four significant digits, so the output does not pretend to precision;
 * whole numbers (counts) stay exact */
static double sig4(double v) {
  if (!isfinite(v) || v == 0) return v;
  if (v == floor(v) && fabs(v) < 1e15) return v;
  char buf[32];
  snprintf(buf, sizeof buf, "%.4g", v);
  return strtod(buf, NULL);
}

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, sig4(v));
  else
    cJSON_AddNullToObject(o, key);
}

cJSON *ts_bench_line(const char *bench, const char *scenario, const char *metric, double value,
                     const char *unit) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "bench", bench);
  cJSON_AddStringToObject(o, "scenario", scenario);
  cJSON_AddStringToObject(o, "metric", metric);
  add_num(o, "value", value);
  cJSON_AddStringToObject(o, "unit", unit);
  return o;
}

void ts_bench_line_ref(cJSON *o, const char *ref, double ref_value) {
  if (!o) return;
  cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "value");
  double value = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  cJSON_AddStringToObject(o, "ref", ref);
  add_num(o, "ref_value", ref_value);
  add_num(o, "ratio", ref_value > 0 ? value / sig4(ref_value) : NAN);
}

void ts_bench_line_num(cJSON *o, const char *key, double value) {
  if (o) add_num(o, key, value);
}

void ts_bench_line_str(cJSON *o, const char *key, const char *value) {
  if (o) cJSON_AddStringToObject(o, key, value);
}

void ts_bench_line_emit(cJSON *o) {
  if (!o) return;
  char *s = cJSON_PrintUnformatted(o);
  if (s) {
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    cJSON_free(s);
  }
  cJSON_Delete(o);
}

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ts_bench_cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

double ts_bench_wall_s(void) { return clock_s(CLOCK_MONOTONIC); }
