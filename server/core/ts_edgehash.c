/*
 * ts_edgehash.c: edge -> triangles hash map (ts_edgehash.h). Fibonacci
 * hashing of the 64-bit vertex-pair key, linear probing, load kept at or
 * below one half, backward-shift deletion.
 */
#include "ts_edgehash.h"

#include <stdlib.h>

#include "ts_error.h"

#define TS__EMPTY UINT64_MAX

static uint64_t ts__key(uint32_t a, uint32_t b) {
  return a < b ? ((uint64_t)a << 32) | b : ((uint64_t)b << 32) | a;
}

static uint32_t ts__home(const ts_edgehash *h, uint64_t key) {
  return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & h->mask;
}

static int ts__alloc(ts_edgehash *h, uint32_t cap) {
  h->slots = malloc(sizeof *h->slots * cap);
  if (!h->slots) return TS_ENOMEM;
  for (uint32_t i = 0; i < cap; i++) {
    h->slots[i].key = TS__EMPTY;
    h->slots[i].tri[0] = h->slots[i].tri[1] = TS_EDGEHASH_NONE;
  }
  h->mask = cap - 1;
  h->count = 0;
  return 0;
}

int ts_edgehash_init(ts_edgehash *h, uint32_t n) {
  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)n && cap < (1u << 31)) cap <<= 1;
  return ts__alloc(h, cap);
}

void ts_edgehash_destroy(ts_edgehash *h) {
  free(h->slots);
  h->slots = NULL;
  h->count = h->mask = 0;
}

static uint32_t ts__probe(const ts_edgehash *h, uint64_t key) {
  uint32_t i = ts__home(h, key);
  while (h->slots[i].key != TS__EMPTY && h->slots[i].key != key) i = (i + 1) & h->mask;
  return i;
}

ts_edgehash_slot *ts_edgehash_get(ts_edgehash *h, uint32_t a, uint32_t b) {
  uint32_t i = ts__probe(h, ts__key(a, b));
  return h->slots[i].key == TS__EMPTY ? NULL : &h->slots[i];
}

static int ts__grow(ts_edgehash *h) {
  uint32_t old_cap = h->mask + 1;
  if (old_cap >= (1u << 31)) return TS_ENOMEM;
  ts_edgehash_slot *old = h->slots;
  uint32_t count = h->count;
  if (ts__alloc(h, old_cap * 2)) {
    h->slots = old;
    h->mask = old_cap - 1;
    return TS_ENOMEM;
  }
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].key != TS__EMPTY) h->slots[ts__probe(h, old[i].key)] = old[i];
  h->count = count;
  free(old);
  return 0;
}

int ts_edgehash_add(ts_edgehash *h, uint32_t a, uint32_t b, uint32_t tri) {
  if (2 * ((uint64_t)h->count + 1) > (uint64_t)h->mask + 1 && ts__grow(h)) return TS_ENOMEM;
  uint64_t key = ts__key(a, b);
  ts_edgehash_slot *s = &h->slots[ts__probe(h, key)];
  if (s->key == TS__EMPTY) {
    s->key = key;
    s->tri[0] = tri;
    s->tri[1] = TS_EDGEHASH_NONE;
    h->count++;
    return 0;
  }
  if (s->tri[1] != TS_EDGEHASH_NONE) return TS_EFULL;
  if (s->tri[0] == TS_EDGEHASH_NONE)
    s->tri[0] = tri;
  else
    s->tri[1] = tri;
  return 0;
}

int ts_edgehash_replace(ts_edgehash *h, uint32_t a, uint32_t b, uint32_t from, uint32_t to) {
  ts_edgehash_slot *s = ts_edgehash_get(h, a, b);
  if (!s) return TS_EINVAL;
  for (int i = 0; i < 2; i++)
    if (s->tri[i] == from) {
      s->tri[i] = to;
      return 0;
    }
  return TS_EINVAL;
}

int ts_edgehash_remove(ts_edgehash *h, uint32_t a, uint32_t b) {
  uint32_t i = ts__probe(h, ts__key(a, b));
  if (h->slots[i].key == TS__EMPTY) return TS_EINVAL;
  /* backward shift: pull later entries of the probe run into the hole
   * unless their home lies cyclically in (hole, j] */
  uint32_t j = i;
  for (;;) {
    j = (j + 1) & h->mask;
    if (h->slots[j].key == TS__EMPTY) break;
    uint32_t k = ts__home(h, h->slots[j].key);
    int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    h->slots[i] = h->slots[j];
    i = j;
  }
  h->slots[i].key = TS__EMPTY;
  h->slots[i].tri[0] = h->slots[i].tri[1] = TS_EDGEHASH_NONE;
  h->count--;
  return 0;
}
