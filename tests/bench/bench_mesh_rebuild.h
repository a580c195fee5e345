/*
 * bench_mesh_rebuild.h: bench_mesh's rebuild lines (bench_mesh_rebuild.c):
 * a refinement's springs rebuilt locally against the whole build.
 */
#ifndef BENCH_MESH_REBUILD_H
#define BENCH_MESH_REBUILD_H

#include "ts_refine.h"
#include "ts_tissue.h"

/* Emits the lines for scenario `name`: tissue t, its refinement source
 * src, the region sel (ns surface triangles), each timing the mean of
 * `reps` runs. 0 or -1. */
int ts_bench_mesh_rebuild(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                          uint32_t ns, int reps);

#endif
