/*
 * fuzz_framing.c: fuzz target for the TCP length-prefix framer
 * (proto/ts_framing.c). The input is fed in chunks whose sizes come from the
 * input itself; every delivered message must lie inside what was fed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ts_framing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct ctx {
  size_t total;
} ctx;

static int on_msg(void *ud, const uint8_t *msg, size_t len) {
  ctx *c = ud;
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < len; i++) sink ^= msg[i]; /* touch every byte (ASan checks) */
  (void)sink;
  c->total += len + 4;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t chunk = (size_t)data[0] % 17 + 1;
  data++;
  size--;
  ts_framer f;
  ts_framer_init(&f, 4096);
  ctx c = {0};
  size_t off = 0;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    if (ts_framer_feed(&f, data + off, n, on_msg, &c) != 0) break;
    off += n;
  }
  if (c.total > size) abort();
  ts_framer_free(&f);
  return 0;
}
