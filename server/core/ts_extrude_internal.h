/*
 * ts_extrude_internal.h: the two halves of building a ts_extrusion
 * (ts_extrude.h), shared inside the core by the extrusion itself and by the
 * refinements that rebuild an extrusion's sheets after changing its surface
 * topology (Loop subdivision in ts_loop.c, longest-edge bisection in
 * ts_leb.c). Not a public API.
 */
#ifndef TS_EXTRUDE_INTERNAL_H
#define TS_EXTRUDE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"

/* Allocates an extrusion of n_layers layers over a surface of nv vertices and
 * nt triangles: x (n_sheets * nv nodes), surface_tris and boundary, all
 * zeroed; the render surface is left empty. Returns 0, TS_EINVAL (a count out
 * of range) or TS_ENOMEM. */
int ts__extrusion_new(uint32_t n_layers, uint32_t nv, uint32_t nt, ts_extrusion **out);

/* Given e's sheets (x) and surface triangles, (re)builds its boundary flags,
 * its render surface grouped by layer and its count of inverted prisms.
 * Returns 0; TS_EMESH when the surface is not a consistently wound manifold
 * (nothing built) or when prisms are inverted (everything built, the first
 * inverted prism named in err); TS_ENOMEM. */
int ts__extrusion_assemble(ts_extrusion *e, char *err, size_t errcap);

#endif
