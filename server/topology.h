/*
 * topology.h: the render topology of a session as clients get it in
 * keyframes (triangles grouped by layer, layer names). Copied out of the
 * tissue when the session is created, so the loop thread never reads the
 * physics thread's tissue; replaced as a whole when refinement changes it.
 */
#ifndef TS_TOPOLOGY_H
#define TS_TOPOLOGY_H

#include <stdint.h>

#include "core/ts_tissue.h"

struct ts_topology {
  uint32_t vertex_count;
  uint32_t n_tris;
  uint32_t *tris;   /* 3 * n_tris */
  uint32_t n_groups;
  uint32_t group_tri_count[TS_MAX_LAYERS + 1];
  char group_name[TS_MAX_LAYERS + 1][TS_NAME_MAX];
};

typedef struct ts_topology ts_topology;

ts_topology *ts_topology_from_tissue(const ts_tissue *t);
void ts_topology_free(ts_topology *t);

#endif
