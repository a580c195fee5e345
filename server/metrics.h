/*
 * metrics.h: the daemon's statistics in the Prometheus text exposition
 * format, served at /metrics. Loop thread only: physics figures come from
 * each session's newest frame, never from physics state.
 */
#ifndef TS_METRICS_H
#define TS_METRICS_H

#include <stddef.h>

typedef struct ts_server ts_server;

/* malloc'd text (caller frees) and its length, or NULL on out of memory. */
char *ts_metrics_text(ts_server *s, size_t *len);

#endif
