/*
 * ts_framing.h: the TCP framing of Envelopes: a 4-byte big-endian length, then
 * that many bytes of message. A framer reassembles messages from a byte stream
 * and refuses a declared length over its limit before buffering any of it.
 * Used by the daemon's TCP transport and by libtissueclient.
 */
#ifndef TS_FRAMING_H
#define TS_FRAMING_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_framer {
  uint8_t *buf;    /* partial message (header included) */
  size_t len;      /* bytes held */
  size_t cap;      /* bytes allocated */
  size_t max_msg;  /* largest accepted message body */
} ts_framer;

/* Called for every complete message; a non-zero return stops the feed and is
 * returned from ts_framer_feed. */
typedef int (*ts_framer_cb)(void *ud, const uint8_t *msg, size_t len);

void ts_framer_init(ts_framer *f, size_t max_msg);
void ts_framer_free(ts_framer *f);

/* Feeds n bytes. Returns 0, the callback's non-zero value, TS_ETOOBIG when a
 * header declares more than max_msg, or TS_ENOMEM. After an error the framer
 * must not be fed again. */
int ts_framer_feed(ts_framer *f, const uint8_t *data, size_t n, ts_framer_cb cb, void *ud);

/* Bytes of a partial message held (a peer that disconnects mid-message). */
static inline size_t ts_framer_pending(const ts_framer *f) { return f->len; }

static inline void ts_frame_header(uint8_t out[4], uint32_t len) {
  out[0] = (uint8_t)(len >> 24);
  out[1] = (uint8_t)(len >> 16);
  out[2] = (uint8_t)(len >> 8);
  out[3] = (uint8_t)len;
}

#endif
