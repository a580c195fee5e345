/*
 * bench_mesh_blend.h: bench_mesh's blend lines (bench_mesh_blend.c): the
 * mass-spring step through a live refinement's hand-over blend beside the
 * unrefined tissue's in the same state.
 */
#ifndef BENCH_MESH_BLEND_H
#define BENCH_MESH_BLEND_H

#include "ts_refine.h"
#include "ts_tissue.h"

/* Emits the lines for scenario `name`: tissue t (left at rest), its
 * refinement source src, the region sel (ns surface triangles, picked by a
 * ray down at the tissue's top node `top`), `steps` steps of the blend
 * timed (0: the whole blend), sub_rest the unrefined tissue's substeps at
 * rest. 0 or -1. */
int ts_bench_mesh_blend(const char *name, ts_tissue *t, const ts_refine_src *src, const uint32_t *sel, uint32_t ns,
                        uint32_t top, int steps, uint32_t sub_rest);

#endif
