/*
 * sbuf.h: a reference-counted, immutable byte buffer that many connections
 * write without copying: a frame's encoded Envelope is made once and every
 * client on the same baseline is handed the same bytes. A write that cannot
 * finish at once holds a reference until libuv has written it, so the
 * buffer outlives the frame cache entry it came from. Loop thread only (the
 * count is a plain int).
 */
#ifndef TS_SBUF_H
#define TS_SBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_sbuf {
  int refs;
  size_t len;
  uint8_t data[]; /* len bytes */
} ts_sbuf;

/* A buffer of len bytes (contents undefined) with one reference; NULL when
 * out of memory. */
ts_sbuf *ts_sbuf_new(size_t len);
void ts_sbuf_retain(ts_sbuf *b);
/* Drops one reference; the last one frees the buffer. NULL is ignored. */
void ts_sbuf_release(ts_sbuf *b);

#endif
