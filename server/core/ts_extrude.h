/*
 * ts_extrude.h: multi-layer extrusion of a surface mesh (the third method's
 * layered tissue). From a surface of nv vertices, N layers of given
 * thicknesses give N+1 sheets of nv nodes each: sheet 0 is the surface
 * itself, sheet s+1 is sheet s offset by layer s's thickness along the inward
 * vertex normal (or along one given direction, the method's "translate
 * downward" for a flat patch). Every surface triangle swept from sheet s to
 * s+1 is a prism of layer s.
 *
 * The result also carries the render surface, grouped by layer: group 0 is
 * the outer sheet (surface winding) plus layer 0's side walls, group i layer
 * i's side walls, and the last group also the innermost sheet with reversed
 * winding; side walls close every open boundary edge, so each group renders
 * from the correct side. ts_tissue_build (ts_tissue.h) turns an extrusion
 * into a simulated tissue.
 */
#ifndef TS_EXTRUDE_H
#define TS_EXTRUDE_H

#include <stdint.h>

#include "ts_mesh.h"
#include "ts_tissue.h"

enum { TS_EXTRUDE_NORMAL = 0, TS_EXTRUDE_DIRECTION = 1 };

typedef struct ts_extrude_def {
  uint32_t n_layers;                 /* 1..TS_MAX_LAYERS */
  double thickness[TS_MAX_LAYERS];   /* m, > 0 */
  int mode;                          /* TS_EXTRUDE_* */
  double direction[3];               /* TS_EXTRUDE_DIRECTION: unit offset direction */
} ts_extrude_def;

typedef struct ts_extrusion {
  uint32_t n_layers;
  uint32_t n_sheets;       /* n_layers + 1 */
  uint32_t nv;             /* nodes per sheet = surface vertices */
  double (*x)[3];          /* n_sheets * nv; node (s, j) at s*nv + j */
  uint32_t n_surface_tris; /* the surface's triangles, as in the input mesh */
  uint32_t (*surface_tris)[3];
  uint8_t *boundary;       /* nv flags: vertex on an open boundary edge */
  uint32_t n_tris;         /* render surface, grouped by layer */
  uint32_t (*tris)[3];
  uint32_t n_groups;       /* n_layers */
  uint32_t group_tri_count[TS_MAX_LAYERS + 1];
  uint32_t n_inverted;     /* prisms whose offset turned them inside out */
} ts_extrusion;

/* Extrudes `surface`. A prism turned inside out by offsetting a concave
 * region too far is counted in n_inverted and, when any exist, the call
 * returns TS_EMESH with the first one named in err (the extrusion is still
 * returned so a tool can show it). Returns 0, TS_EINVAL, TS_EMESH, TS_ENOMEM. */
int ts_extrude(const ts_mesh *surface, const ts_extrude_def *def, ts_extrusion **out, char *err,
               size_t errcap);

void ts_extrusion_free(ts_extrusion *e);

#endif
