/*
 * ts_handover_region.c: the part of the tissues that the hand-over's fit to
 * XPBD (ts_handover_fit.c) steps in its trials: the region of rings of
 * springs around the new nodes, and the sub-tissue on it with its springs
 * in the order XPBD sweeps them in the whole tissue.
 */
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_handover_internal.h"

#define FIT_LOCAL_MAX 0.75 /* a region over this share of the nodes: the whole tissue */

/* The trials' region: role[i] for each node of nt, 1 stepped (within
 * `ring` springs of a new node, the springs of old and nt both counted),
 * 2 held where it is (the next ring: the region's frame), 0 left out.
 * Returns the stepped count; 0 for the whole tissue (no new node, or a
 * region over FIT_LOCAL_MAX of it: every role 1). -1: out of memory. */
int64_t ts__handover_fit_region(const ts_tissue *old, const ts_tissue *nt, uint8_t *role, uint32_t ring) {
  const uint32_t n0 = old->n_nodes, n = nt->n_nodes;
  const size_t m = (size_t)old->n_springs + nt->n_springs;
  uint32_t *off = calloc((size_t)n + 1, sizeof *off), *adj = malloc(sizeof *adj * (2 * m + 1));
  uint32_t *depth = malloc(sizeof *depth * n), *queue = malloc(sizeof *queue * n);
  int64_t moving = 0;
  if (!off || !adj || !depth || !queue) {
    moving = -1;
    goto out;
  }
  for (int w = 0; w < 2; w++) {
    const ts_tissue *t = w ? nt : old;
    for (uint32_t j = 0; j < t->n_springs; j++) off[t->springs[j].a + 1]++, off[t->springs[j].b + 1]++;
  }
  for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
  for (uint32_t i = 0; i < n; i++) depth[i] = off[i]; /* fill cursors */
  for (int w = 0; w < 2; w++) {
    const ts_tissue *t = w ? nt : old;
    for (uint32_t j = 0; j < t->n_springs; j++) {
      adj[depth[t->springs[j].a]++] = t->springs[j].b;
      adj[depth[t->springs[j].b]++] = t->springs[j].a;
    }
  }
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++) {
    depth[i] = UINT32_MAX;
    if (i >= n0) depth[i] = 0, queue[tail++] = i;
  }
  while (head < tail) {
    uint32_t i = queue[head++];
    if (depth[i] > ring) continue;
    for (uint32_t a = off[i]; a < off[i + 1]; a++)
      if (depth[adj[a]] == UINT32_MAX) depth[adj[a]] = depth[i] + 1, queue[tail++] = adj[a];
  }
  for (uint32_t i = 0; i < n; i++) {
    role[i] = depth[i] <= ring ? 1 : depth[i] == ring + 1 ? 2 : 0;
    moving += role[i] == 1;
  }
  if (n == n0 || moving > FIT_LOCAL_MAX * n) {
    memset(role, 1, n);
    moving = 0;
  }
out:
  free(off);
  free(adj);
  free(depth);
  free(queue);
  return moving;
}

typedef struct colour_key {
  uint32_t colour, first, index;
} colour_key;

static int cmp_colour(const void *pa, const void *pb) {
  const colour_key *a = pa, *b = pb;
  if (a->colour != b->colour) return a->colour < b->colour ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

/* t's springs in the order XPBD sweeps their constraints (ts_xpbd_order.c: a
 * greedy colouring in spring order, at most 64 colours and a mixed group
 * after them, then by colour, lowest node, index), into ord (n_springs).
 * A part of t handed over in this order keeps it in its interior (the
 * greedy colouring of the colour-sorted springs gives each spring whose
 * neighbours are all there its colour again), which matters: under a
 * tool, XPBD's unconverged sweeps end where their order takes them (4 um
 * apart on the default patch, measured). Returns 0 or TS_ENOMEM. */
static int sweep_order(const ts_tissue *t, uint32_t *ord) {
  uint64_t *used = calloc(t->n_nodes, sizeof *used);
  colour_key *key = malloc(sizeof *key * (t->n_springs + 1));
  if (!used || !key) {
    free(used);
    free(key);
    return TS_ENOMEM;
  }
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const uint32_t a = t->springs[j].a, b = t->springs[j].b;
    uint64_t taken = used[a] | used[b];
    uint32_t c = 64;
    if (~taken) {
      c = 0;
      while (taken >> c & 1) c++;
      used[a] |= (uint64_t)1 << c;
      used[b] |= (uint64_t)1 << c;
    }
    key[j] = (colour_key){c, a < b ? a : b, j};
  }
  qsort(key, t->n_springs, sizeof *key, cmp_colour);
  for (uint32_t j = 0; j < t->n_springs; j++) ord[j] = key[j].index;
  free(used);
  free(key);
  return 0;
}

static int sub_tissue_in(const ts_tissue *t, const uint8_t *role, const uint32_t *ord, ts_tissue **out,
                         uint32_t **node_of, uint32_t **spring_of, uint32_t *loc);

/* The part of t on the region role (indices of t; nodes with role 0 left
 * out, role 2 anchored where they are): its nodes in t's order (so a
 * spring's a < b holds), the springs with both ends in it and one stepped
 * (in XPBD's sweep order of the whole t, sweep_order: ord_made, or made
 * here when NULL),
 * the render triangles with every corner in it, and t's hand-over on them.
 * node_of / spring_of (malloc'd) map its nodes and springs to t's; loc
 * (t->n_nodes) gets t's node -> its node or UINT32_MAX. Returns 0 or
 * TS_ENOMEM (*out NULL). */
int ts__handover_sub_tissue(const ts_tissue *t, const uint8_t *role, const uint32_t *ord_made, ts_tissue **out,
                            uint32_t **node_of, uint32_t **spring_of, uint32_t *loc) {
  if (ord_made) return sub_tissue_in(t, role, ord_made, out, node_of, spring_of, loc);
  uint32_t *ord = malloc(sizeof *ord * (t->n_springs + 1));
  int rc = ord ? sweep_order(t, ord) : TS_ENOMEM;
  if (!rc) rc = sub_tissue_in(t, role, ord, out, node_of, spring_of, loc);
  free(ord);
  return rc;
}

/* t's sweep order (sweep_order) kept in *slot, made on first use; NULL
 * for out of memory (the caller then makes its own). */
const uint32_t *ts__handover_kept_order(const ts_tissue *t, uint32_t **slot) {
  if (!*slot) {
    uint32_t *ord = malloc(sizeof *ord * (t->n_springs + 1));
    if (ord && sweep_order(t, ord)) {
      free(ord);
      ord = NULL;
    }
    *slot = ord;
  }
  return *slot;
}

static int sub_tissue_in(const ts_tissue *t, const uint8_t *role, const uint32_t *ord, ts_tissue **out,
                         uint32_t **node_of, uint32_t **spring_of, uint32_t *loc) {
  *out = NULL;
  *node_of = *spring_of = NULL;
  uint32_t nn = 0, ns = 0, ntr = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++) loc[i] = role[i] ? nn++ : UINT32_MAX;
  for (uint32_t j = 0; j < t->n_springs; j++) {
    const ts_spring *sp = &t->springs[j];
    ns += role[sp->a] && role[sp->b] && (role[sp->a] == 1 || role[sp->b] == 1);
  }
  for (uint32_t f = 0; f < t->n_tris; f++)
    ntr += role[t->tris[f][0]] && role[t->tris[f][1]] && role[t->tris[f][2]];
  ts_tissue *s = NULL;
  int rc = nn ? ts_tissue_alloc(nn, ns, ntr, &s) : TS_EINVAL;
  if (rc) return rc;
  *node_of = malloc(sizeof **node_of * nn);
  *spring_of = malloc(sizeof **spring_of * (ns + 1));
  int hrc = 0;
  if (t->hand) {
    s->hand = calloc(1, sizeof *s->hand);
    if (s->hand) {
      *s->hand = *t->hand;
      s->hand->map = NULL;
      s->hand->f = malloc(sizeof *s->hand->f * nn);
      s->hand->f_res = malloc(sizeof *s->hand->f_res * nn);
      s->hand->rest = malloc(sizeof *s->hand->rest * (ns + 1));
      s->hand->depth = malloc(sizeof *s->hand->depth * nn);
    }
    hrc = !s->hand || !s->hand->f || !s->hand->f_res || !s->hand->rest || !s->hand->depth;
  }
  if (!*node_of || !*spring_of || hrc) {
    ts_tissue_destroy(s);
    free(*node_of);
    free(*spring_of);
    *node_of = *spring_of = NULL;
    return TS_ENOMEM;
  }
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const uint32_t l = loc[i];
    if (l == UINT32_MAX) continue;
    (*node_of)[l] = i;
    memcpy(s->x[l], t->x[i], sizeof s->x[l]);
    memcpy(s->v[l], t->v[i], sizeof s->v[l]);
    memcpy(s->x_prev[l], t->x_prev[i], sizeof s->x_prev[l]);
    memcpy(s->rest[l], t->rest[i], sizeof s->rest[l]);
    s->inv_mass[l] = role[i] == 1 ? t->inv_mass[i] : 0.0;
    if (s->hand) {
      memcpy(s->hand->f[l], t->hand->f[i], sizeof s->hand->f[l]);
      memcpy(s->hand->f_res[l], t->hand->f_res[i], sizeof s->hand->f_res[l]);
      s->hand->depth[l] = t->hand->depth[i];
    }
  }
  ns = 0;
  for (uint32_t q = 0; q < t->n_springs; q++) {
    const uint32_t j = ord[q];
    const ts_spring *sp = &t->springs[j];
    if (!(role[sp->a] && role[sp->b] && (role[sp->a] == 1 || role[sp->b] == 1))) continue;
    s->springs[ns] = *sp;
    s->springs[ns].a = loc[sp->a];
    s->springs[ns].b = loc[sp->b];
    if (s->hand) s->hand->rest[ns] = t->hand->rest[j];
    (*spring_of)[ns++] = j;
  }
  ntr = 0;
  for (uint32_t f = 0; f < t->n_tris; f++) {
    const uint32_t *tr = t->tris[f];
    if (!(role[tr[0]] && role[tr[1]] && role[tr[2]])) continue;
    for (int k = 0; k < 3; k++) s->tris[ntr][k] = loc[tr[k]];
    ntr++;
  }
  if (ts_tissue_copy_contact(s, t, loc)) { /* the fit's contact tests these */
    ts_tissue_destroy(s);
    free(*node_of);
    free(*spring_of);
    *node_of = *spring_of = NULL;
    return TS_ENOMEM;
  }
  s->n_layers = t->n_layers;
  memcpy(s->layers, t->layers, sizeof s->layers);
  s->n_sheets = t->n_sheets;
  /* the column map when the copy is the whole tissue (bending and volume
   * constraints need it), else no columns (none of either) */
  if (ts_tissue_copy_columns(s, t, loc)) {
    ts_tissue_destroy(s);
    free(*node_of);
    free(*spring_of);
    *node_of = *spring_of = NULL;
    return TS_ENOMEM;
  }
  ts_tissue_copy_settings(s, t);
  *out = s;
  return 0;
}
