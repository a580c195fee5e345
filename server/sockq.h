/*
 * sockq.h: how many bytes a connected socket still holds in the kernel's
 * send queue (Linux SIOCOUTQ). On loopback the send buffer grows to
 * megabytes, so a reader that stopped reading is only seen as slow when this
 * queue is counted with the daemon's own output queue.
 *
 * The ioctl costs a system call per frame per client: measured last on the
 * 500-observer fan-out, about 14 % of the network loop's time per client
 * frame. A reader that keeps up leaves the kernel queue empty when its next
 * frame is due, so ts_sockq_unsent reads it again at once only while it last
 * held something (a reader falling behind is then followed frame by frame),
 * and after an empty reading waits TS_SOCKQ_QUIET_MS of loop time before the
 * next: a reader that stops is noticed at most that much later, against the
 * soft limit's grace of 0.5 s by default (--soft-output-grace, config.c).
 */
#ifndef TS_SOCKQ_H
#define TS_SOCKQ_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* loop-time ms between readings while the kernel queue was last empty */
#define TS_SOCKQ_QUIET_MS 50

/* One connection's last reading. Zero-initialised: read at first use. */
typedef struct ts_sockq {
  uint64_t read_ms; /* loop time of the last reading */
  size_t unsent;    /* what it gave */
  int valid;        /* a reading was taken */
} ts_sockq;

/* Unsent bytes in the kernel for this stream's socket; 0 when unknown. */
size_t ts_socket_unsent(const uv_stream_t *stream);

/* Whether a connection whose last reading is q must read again at loop time
 * now_ms: never read, last reading not empty, or quiet for
 * TS_SOCKQ_QUIET_MS (a clock that went back counts as due). */
int ts_sockq_due(const ts_sockq *q, uint64_t now_ms);

/* The kernel's unsent bytes for this stream, read again when ts_sockq_due
 * says so (at the stream's loop time), else q's last reading. */
size_t ts_sockq_unsent(ts_sockq *q, const uv_stream_t *stream);

#endif
