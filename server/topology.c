/*
 * topology.c: copies a tissue's render surface into a session-owned,
 * immutable topology (see topology.h).
 */
#include "topology.h"

#include <stdlib.h>
#include <string.h>

ts_topology *ts_topology_from_tissue(const ts_tissue *t) {
  ts_topology *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->vertex_count = t->n_nodes;
  p->n_tris = t->n_tris;
  p->tris = malloc(sizeof(uint32_t) * 3 * (t->n_tris ? t->n_tris : 1));
  if (!p->tris) {
    free(p);
    return NULL;
  }
  memcpy(p->tris, t->tris, sizeof(uint32_t) * 3 * t->n_tris);
  p->n_groups = t->n_render_groups;
  if (p->n_groups > TS_MAX_LAYERS + 1) p->n_groups = TS_MAX_LAYERS + 1;
  for (uint32_t g = 0; g < p->n_groups; g++) {
    p->group_tri_count[g] = t->layer_tri_count[g];
    memcpy(p->group_name[g], t->render_group_name[g], TS_NAME_MAX);
    p->group_name[g][TS_NAME_MAX - 1] = 0;
  }
  return p;
}

void ts_topology_free(ts_topology *t) {
  if (!t) return;
  free(t->tris);
  free(t);
}
