/*
 * bench_mesh_smooth.h: bench_mesh's smoothing line (bench_mesh_smooth.c):
 * the crossing check's share of a live refinement with Loop's smoothing
 * rules (ts_refine_opts.smooth_rest).
 */
#ifndef BENCH_MESH_SMOOTH_H
#define BENCH_MESH_SMOOTH_H

#include "ts_refine.h"
#include "ts_tissue.h"

/* Emits the line for scenario `name`: tissue t, its refinement source src,
 * the region sel (ns surface triangles), each timing the mean of `reps`
 * runs. 0 or -1. */
int ts_bench_mesh_smooth(const char *name, const ts_tissue *t, const ts_refine_src *src, const uint32_t *sel,
                         uint32_t ns, int reps);

#endif
