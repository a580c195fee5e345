/*
 * ts_framing.c: reassembly of length-prefixed messages (see ts_framing.h).
 * Whole messages found in the input are delivered straight from the caller's
 * buffer; only a message split across reads is copied.
 */
#include "ts_framing.h"

#include <stdlib.h>
#include <string.h>

#include "../server/core/ts_error.h"

void ts_framer_init(ts_framer *f, size_t max_msg) {
  memset(f, 0, sizeof *f);
  f->max_msg = max_msg;
}

void ts_framer_free(ts_framer *f) {
  free(f->buf);
  memset(f, 0, sizeof *f);
}

static uint32_t read_be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int hold(ts_framer *f, const uint8_t *data, size_t n) {
  if (f->len + n > f->cap) {
    size_t cap = f->cap ? f->cap : 256;
    while (cap < f->len + n) cap *= 2;
    uint8_t *b = realloc(f->buf, cap);
    if (!b) return TS_ENOMEM;
    f->buf = b;
    f->cap = cap;
  }
  memcpy(f->buf + f->len, data, n);
  f->len += n;
  return 0;
}

int ts_framer_feed(ts_framer *f, const uint8_t *data, size_t n, ts_framer_cb cb, void *ud) {
  while (n > 0) {
    if (f->len > 0) {
      /* complete the held header first, then the held body */
      if (f->len < 4) {
        size_t take = 4 - f->len < n ? 4 - f->len : n;
        int rc = hold(f, data, take);
        if (rc) return rc;
        data += take;
        n -= take;
        if (f->len < 4) return 0;
      }
      uint32_t body = read_be32(f->buf);
      if (body > f->max_msg) return TS_ETOOBIG;
      size_t want = 4 + (size_t)body - f->len;
      size_t take = want < n ? want : n;
      int rc = hold(f, data, take);
      if (rc) return rc;
      data += take;
      n -= take;
      if (f->len < 4 + (size_t)body) return 0;
      f->len = 0;
      rc = cb(ud, f->buf + 4, body);
      if (rc) return rc;
      continue;
    }
    if (n < 4) return hold(f, data, n);
    uint32_t body = read_be32(data);
    if (body > f->max_msg) return TS_ETOOBIG;
    if (n - 4 < body) return hold(f, data, n);
    int rc = cb(ud, data + 4, body);
    if (rc) return rc;
    data += 4 + (size_t)body;
    n -= 4 + (size_t)body;
  }
  return 0;
}
