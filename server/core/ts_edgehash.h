/*
 * ts_edgehash.h: a map from an undirected mesh edge (vertex pair) to the (at
 * most two) triangles on it, for meshes whose topology changes edge by edge
 * (longest-edge bisection, ts_leb.c). Open addressing with linear probing and
 * backward-shift deletion (D. E. Knuth, The Art of Computer Programming,
 * vol. 3, 6.4, Algorithm R), so removals leave no tombstones.
 */
#ifndef TS_EDGEHASH_H
#define TS_EDGEHASH_H

#include <stdint.h>

#define TS_EDGEHASH_NONE UINT32_MAX

typedef struct ts_edgehash_slot {
  uint64_t key;      /* min << 32 | max; UINT64_MAX = empty */
  uint32_t tri[2];   /* TS_EDGEHASH_NONE where absent */
} ts_edgehash_slot;

typedef struct ts_edgehash {
  uint32_t count;
  uint32_t mask;     /* capacity - 1, capacity a power of two */
  ts_edgehash_slot *slots;
} ts_edgehash;

/* Initialises h with room for about n edges. Returns 0 or TS_ENOMEM. */
int ts_edgehash_init(ts_edgehash *h, uint32_t n);
/* Frees h's slots (h itself is the caller's). */
void ts_edgehash_destroy(ts_edgehash *h);

/* The slot of edge (a, b), or NULL when absent. The pointer is valid until
 * the next insertion or removal. */
ts_edgehash_slot *ts_edgehash_get(ts_edgehash *h, uint32_t a, uint32_t b);

/* Adds triangle tri to edge (a, b), creating the edge. Returns 0, TS_EFULL
 * (the edge already has two triangles) or TS_ENOMEM. */
int ts_edgehash_add(ts_edgehash *h, uint32_t a, uint32_t b, uint32_t tri);

/* On edge (a, b) replaces triangle from by to. Returns 0 or TS_EINVAL (no
 * such edge or triangle). */
int ts_edgehash_replace(ts_edgehash *h, uint32_t a, uint32_t b, uint32_t from, uint32_t to);

/* Removes edge (a, b). Returns 0 or TS_EINVAL when absent. */
int ts_edgehash_remove(ts_edgehash *h, uint32_t a, uint32_t b);

#endif
