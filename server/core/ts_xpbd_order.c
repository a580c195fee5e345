/*
 * ts_xpbd_order.c: the order in which the position-based solver's
 * Gauss-Seidel sweeps take its constraints: a greedy colouring of their
 * node graph, then by colour and first node (why: below).
 */
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd_internal.h"

/* Sweep order. Gauss-Seidel projects one constraint after another; when
 * consecutive constraints share a node, each waits for the previous one's
 * write (a chain of square roots and divisions). Sorting the constraints by
 * a greedy colouring of their node graph (no two of a colour share a node)
 * makes runs of independent constraints the processor can overlap; within a
 * colour they go by first node, for locality. The result is still a
 * Gauss-Seidel sweep, in another order. perm gets the constraint indices in
 * sweep order; nodes holds k node indices per constraint. */
typedef struct ts__colour_key {
  uint32_t colour, first, index;
} ts__colour_key;

static int cmp_colour(const void *pa, const void *pb) {
  const ts__colour_key *a = pa, *b = pb;
  if (a->colour != b->colour) return a->colour < b->colour ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static int colour_order(uint32_t n, int k, const uint32_t *nodes, uint32_t n_nodes,
                        uint32_t *perm) {
  uint64_t *used = calloc(n_nodes, sizeof *used); /* colours 0..63 taken at each node */
  ts__colour_key *key = malloc(sizeof *key * (n ? n : 1));
  if (!used || !key) {
    free(used);
    free(key);
    return TS_ENOMEM;
  }
  for (uint32_t j = 0; j < n; j++) {
    const uint32_t *p = nodes + (size_t)j * k;
    uint64_t taken = 0;
    uint32_t first = p[0];
    for (int i = 0; i < k; i++) {
      taken |= used[p[i]];
      if (p[i] < first) first = p[i];
    }
    uint32_t c = 64; /* all 64 taken: a last, mixed group */
    if (~taken) {
      c = 0;
      while (taken >> c & 1) c++;
      for (int i = 0; i < k; i++) used[p[i]] |= (uint64_t)1 << c;
    }
    key[j] = (ts__colour_key){c, first, j};
  }
  qsort(key, n, sizeof *key, cmp_colour);
  for (uint32_t j = 0; j < n; j++) perm[j] = key[j].index;
  free(used);
  free(key);
  return 0;
}

/* Puts n constraints of `size` bytes, each starting with k uint32_t node
 * indices, into colour order (see colour_order). */
int ts__xpbd_reorder(void *items, uint32_t n, size_t size, int k, uint32_t n_nodes) {
  if (n < 2) return 0;
  uint32_t *nodes = calloc((size_t)n * k, sizeof *nodes);
  uint32_t *perm = malloc(sizeof *perm * n);
  unsigned char *copy = malloc(size * n);
  int rc = TS_ENOMEM;
  if (nodes && perm && copy) {
    memcpy(copy, items, size * n);
    for (uint32_t j = 0; j < n; j++) memcpy(nodes + (size_t)j * k, copy + size * j, sizeof *nodes * k);
    rc = colour_order(n, k, nodes, n_nodes, perm);
    if (!rc)
      for (uint32_t j = 0; j < n; j++) memcpy((unsigned char *)items + size * j, copy + size * perm[j], size);
  }
  free(nodes);
  free(perm);
  free(copy);
  return rc;
}

/* The distance constraints into colour order, remembering their springs. */
int ts__xpbd_reorder_distance(ts_xpbd *s) {
  for (uint32_t j = 0; j < s->n_springs; j++) s->spring_of[j] = j;
  if (s->n_springs < 2) return 0;
  uint32_t *nodes = malloc(sizeof *nodes * 2 * (size_t)s->n_springs);
  uint32_t *perm = malloc(sizeof *perm * s->n_springs);
  ts__dist *copy = malloc(sizeof *copy * s->n_springs);
  int rc = TS_ENOMEM;
  if (nodes && perm && copy) {
    memcpy(copy, s->dist, sizeof *copy * s->n_springs);
    for (uint32_t j = 0; j < s->n_springs; j++) {
      nodes[2 * j] = copy[j].a;
      nodes[2 * j + 1] = copy[j].b;
    }
    rc = colour_order(s->n_springs, 2, nodes, s->n_nodes, perm);
    if (!rc) {
      for (uint32_t j = 0; j < s->n_springs; j++) {
        s->dist[j] = copy[perm[j]];
        s->spring_of[j] = perm[j];
      }
    }
  }
  free(nodes);
  free(perm);
  free(copy);
  return rc;
}
