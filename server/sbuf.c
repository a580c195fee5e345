/*
 * sbuf.c: reference-counted shared byte buffers (see sbuf.h).
 */
#include "sbuf.h"

#include <stdlib.h>

ts_sbuf *ts_sbuf_new(size_t len) {
  ts_sbuf *b = malloc(sizeof *b + (len ? len : 1));
  if (!b) return NULL;
  b->refs = 1;
  b->len = len;
  return b;
}

void ts_sbuf_retain(ts_sbuf *b) { b->refs++; }

void ts_sbuf_release(ts_sbuf *b) {
  if (b && --b->refs == 0) free(b);
}
