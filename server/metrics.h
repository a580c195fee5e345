/*
 * metrics.h: the daemon's statistics in the Prometheus text exposition
 * format, served at /metrics. Loop thread only: physics figures come from
 * each session's newest frame, never from physics state.
 */
#ifndef TS_METRICS_H
#define TS_METRICS_H

#include <stddef.h>

typedef struct ts_server ts_server;

/* Why a client connection was closed, counted in /metrics as
 * tissued_connections_closed_total{reason="..."}. */
enum ts_close_reason {
  TS_CLOSE_PEER = 0,          /* the peer closed or the socket failed (EOF, reset) */
  TS_CLOSE_SERVER,            /* the server closed it: bad messages, output limit, protocol */
  TS_CLOSE_HANDSHAKE_TIMEOUT, /* no Hello (or HTTP upgrade) within handshake-timeout */
  TS_CLOSE_CLIENT_TIMEOUT,    /* WebSocket: silent (no pong) for client-timeout */
  TS_CLOSE_SHUTDOWN,          /* the daemon is shutting down */
  TS_CLOSE_N
};

/* Counts one closed connection (loop thread). s may be NULL (a listener
 * without a daemon, in unit tests): then nothing is counted. */
void ts_metrics_count_close(ts_server *s, int reason);

/* malloc'd text (caller frees) and its length, or NULL on out of memory. */
char *ts_metrics_text(ts_server *s, size_t *len);

#endif
