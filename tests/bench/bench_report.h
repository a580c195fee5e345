/*
 * bench_report.h: how every benchmark reports: one JSON object per line on
 * stdout, in the form of DESIGN.md ("Standard scenarios"):
 *
 *   {"bench":"mechanics","scenario":"patch-L","metric":"spring_evals_per_s",
 *    "value":1.6e8,"unit":"1/s","ref":"bullet","ref_value":4.1e7,"ratio":3.9}
 *
 * (`ref`, `ref_value` and `ratio` where a reference was measured in the same
 * run; `ratio` is value over ref_value), then any extra fields (targets,
 * settings). Numbers are rounded to four significant digits (run-to-run
 * drift on these machines is larger than that); whole numbers stay exact. Built on cJSON. Also the
 * clocks the benchmarks time with.
 */
#ifndef TS_BENCH_REPORT_H
#define TS_BENCH_REPORT_H

#include <cjson/cJSON.h>

/* A new line with the mandatory fields; NULL when out of memory. */
cJSON *ts_bench_line(const char *bench, const char *scenario, const char *metric, double value,
                     const char *unit);

/* Adds ref, ref_value and ratio = value / ref_value (null when ref_value
 * is not positive). */
void ts_bench_line_ref(cJSON *line, const char *ref, double ref_value);

/* Extra fields. */
void ts_bench_line_num(cJSON *line, const char *key, double value);
void ts_bench_line_str(cJSON *line, const char *key, const char *value);

/* Prints the line to stdout (one line, flushed) and frees it. NULL-safe. */
void ts_bench_line_emit(cJSON *line);

/* Seconds of CPU time used by the calling thread (what "per core" means). */
double ts_bench_cpu_s(void);

/* Seconds on the monotonic clock. */
double ts_bench_wall_s(void);

#endif
