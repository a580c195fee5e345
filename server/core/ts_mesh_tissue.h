/*
 * ts_mesh_tissue.h: a surface mesh (the bytes of an OBJ, STL or PLY file)
 * made into a tissue the way the daemon makes every uploaded and
 * catalogued tissue, in one place so that the daemon (server/requests.c),
 * the offline tool (tissuetool models import, server/tool/cmd_learn.c) and
 * the integration test that checks the daemon's extrusion
 * (tests/integration/itest_mesh.c) build the same tissue. An uploaded
 * surface becomes a tissue the way the built-in patch does (ts_patch.c),
 * with these choices:
 *   - placement: the mesh is moved (not rotated) so that its bounding box is
 *     centred on the origin in x and z and its highest point is at y = 0,
 *     the built-in patch's frame, so clients and tools see every tissue in
 *     the same place (the tool rests above y = 0);
 *   - layers: each surface vertex is offset along its inward vertex normal
 *     once per layer (ts_extrude.h); where an offset would fold (deeper than
 *     the local radius of a bulge, or a pleat with no inward direction),
 *     pleat vertices are first moved by at most 1 mm and the layers thinned
 *     there down to a tenth of their depth (reported: the daemon tells the
 *     client in its SessionCreated); only what still folds is refused, with
 *     the first folded prism named and thinner layers asked for;
 *   - size: the mesh must be at most 2 m across and at least four times its
 *     layers' total thickness (else a units mistake is likely: the message
 *     says to check the scale);
 *   - anchors: an open surface is held by its boundary (every sheet's nodes
 *     under a boundary vertex, as the patch); a closed one rests on a
 *     support: every sheet's nodes under a surface vertex in the lowest 10 %
 *     of the surface's height (y) are anchored;
 *   - gravity and drag as the patch (ts_default_patch_def).
 */
#ifndef TS_MESH_TISSUE_H
#define TS_MESH_TISSUE_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_mesh_io.h"
#include "ts_tissue.h"

#define TS_MESH_TISSUE_SUPPORT_FRACTION 0.10 /* a closed surface rests on its lowest tenth */
#define TS_MESH_TISSUE_MIN_EXTENT_LAYERS 4.0 /* across: at least this many total thicknesses */
#define TS_MESH_TISSUE_MAX_EXTENT 2.0        /* m: the largest organ a tissue may be */
#define TS_MESH_TISSUE_MAX_RELAX 1e-3        /* m: the most a pleat vertex is moved */
#define TS_MESH_TISSUE_MIN_DEPTH 0.1         /* the least share of its depth a layer keeps */

/* The stages of a build, as told to ts_mesh_import_opts.on_stage: the
 * import (parse, repair), the extrusion into layers (with its fold and
 * crossing checks), the tissue's springs and masses, and the step's
 * preparation with its stability bounds (ts_massspring_prepare: the longest
 * part of a large tissue's build) */
enum {
  TS_MESH_STAGE_READING = 1,
  TS_MESH_STAGE_LAYERS = 2,
  TS_MESH_STAGE_SPRINGS = 3,
  TS_MESH_STAGE_BOUNDS = 4
};

/* A built mesh tissue and what it was built from. */
typedef struct ts_mesh_tissue {
  ts_tissue *t;          /* the tissue (owned; set to NULL to take it) */
  ts_extrusion *e;       /* its extrusion (owned): n_relaxed, n_thinned... */
  uint8_t *anchors;      /* per node (e->n_sheets * e->nv) 1 = anchored (owned) */
  uint32_t n_verts;      /* the imported surface's vertices and triangles */
  uint32_t n_tris;
  char warning[400];     /* what the extrusion changed so as not to fold ("" none) */
} ts_mesh_tissue;

/* Imports the file (o: its format's limits and scale; NULL = defaults),
 * checks its size against the layers' total thickness, places it and
 * extrudes n_layers layers of the given thicknesses (m) as above. *out is
 * the extrusion (free with ts_extrusion_free); nv, nt (may be NULL) get the
 * imported surface's counts and warning (may be NULL) what the extrusion
 * changed ("" when nothing). Returns 0, or a ts_errno with the reason in
 * err (the mesh refused, TS_ERANGE for its size, TS_EMESH for layers that
 * fold, ..., the code o's on_stage returned to stop the build, or
 * TS_ESHUTDOWN when o->stop turned nonzero during the extrusion). */
int ts_mesh_tissue_extrude(const uint8_t *data, size_t len, int format,
                           const ts_mesh_import_opts *o, const double *thickness,
                           uint32_t n_layers, ts_extrusion **out, uint32_t *nv, uint32_t *nt,
                           char *warning, size_t wcap, char *err, size_t errcap);

/* ts_mesh_tissue_extrude with the layers' thicknesses, then the anchors and
 * the tissue of those layers (their laws, fibres and names), with the
 * patch's gravity and drag and its stable step. On success *out holds all
 * three (free with ts_mesh_tissue_free); on failure it is empty. Returns 0
 * or a ts_errno with the reason in err (TS_EMESH naming the first inverted
 * prism when the builder refuses one; the code o's on_stage returned to
 * stop the build). */
int ts_mesh_tissue_build(const uint8_t *data, size_t len, int format,
                         const ts_mesh_import_opts *o, const ts_layer *layers, uint32_t n_layers,
                         ts_mesh_tissue *out, char *err, size_t errcap);

void ts_mesh_tissue_free(ts_mesh_tissue *m);

/* Moves m so that its bounding box is centred on the origin in x and z and
 * its top is at y = 0 (the placement above). */
void ts_mesh_tissue_place(ts_mesh *m);

#endif
