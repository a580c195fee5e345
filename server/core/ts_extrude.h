/*
 * ts_extrude.h: multi-layer extrusion of a surface mesh (the third method's
 * layered tissue). From a surface of nv vertices, N layers of given
 * thicknesses give N+1 sheets of nv nodes each: sheet 0 is the surface
 * itself, sheet s+1 is sheet s offset by layer s's thickness along the inward
 * vertex normal (or along one given direction, the method's "translate
 * downward" for a flat patch). Every surface triangle swept from sheet s to
 * s+1 is a prism of layer s.
 *
 * The result also carries the render surface, grouped by layer: group i is
 * layer i's top sheet (sheet i, in the surface's winding, so facing
 * outwards: the first n_surface_tris triangles of the group, in surface
 * order) and layer i's side walls, and the last group also the innermost
 * sheet with reversed winding; side walls close every open boundary edge.
 * So every group renders from the correct side, and hiding the layers above
 * one shows its outer face. The outer sheet, the walls and the innermost
 * sheet form the closed boundary of the solid; the inner top sheets (groups
 * 1..N-1) lie inside it, each sharing its boundary edges with the walls
 * above and below it. The render surface is (N+1) * n_surface_tris + 2 N
 * (open boundary edges) triangles. ts_tissue_build (ts_tissue.h) turns an
 * extrusion into a simulated tissue.
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
  double min_depth_fraction;         /* 0 (the default): a fold is an error. In
                                        (0, 1): where the full depth would invert
                                        prisms or nearly collapse them (a
                                        triangle shrinking to half its size),
                                        the offset of the vertices there
                                        shrinks (every layer in proportion) down
                                        to no less than this fraction of the full
                                        depth (ts_extrude.c says how); what still
                                        folds at that depth is an error */
  double max_relax;                  /* m; 0 (the default): the surface is used as
                                        given. > 0: vertices of small pleats
                                        (triangles folded back over their
                                        neighbours, where no direction points
                                        inwards) are moved, each by at most this
                                        much, until they have one
                                        (ts_extrude_relax.c); sheet 0 is then
                                        the relaxed surface */
  const atomic_int *stop;            /* NULL (the default): never. Else looked at
                                        between the extrusion's passes (the
                                        relaxation, each thinning round with its
                                        crossing query, the assembly, the
                                        crossing count): when nonzero it fails
                                        with TS_ESHUTDOWN (ts_tissue.stop: a
                                        stopping daemon does not wait out the
                                        layers of a large upload) */
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
  uint32_t n_inverted;     /* prisms ts_prism_check refuses */
  uint32_t n_tilted;       /* vertices offset along the "most normal" direction
                              rather than the angle-weighted normal (creases) */
  uint32_t n_relaxed;      /* surface vertices moved to undo pleats (max_relax) */
  double max_relaxed;      /* m: the largest such move */
  uint32_t n_thinned;      /* vertices whose offset was shrunk (min_depth_fraction) */
  double min_depth_kept;   /* smallest fraction of the full depth kept at a vertex
                              (1 when none was thinned) */
  uint32_t n_crossings;    /* pairs of sheet triangles with no column in common
                              that intersect: sheets passing through each other
                              (ts_extrude_cross.c); ts_extrude fills it */
  uint32_t n_crossings_thinned; /* such pairs the thinning (min_depth_fraction) found
                              and thinned away: the most found in one round */
  uint32_t cross_sheet[2]; /* the first such pair found: the sheet of each (of a
                              side wall: the layer it closes) */
  uint32_t cross_tri[2];   /* and the surface triangle each lies over
                              (UINT32_MAX: a side wall) */
  double cross_point[3];   /* m: a point where they meet */
} ts_extrusion;

/* Extrudes `surface`. A prism turned inside out by offsetting a region too
 * far (ts_prism_check) is counted in n_inverted and, when any exist, the call
 * returns TS_EMESH with the first one named in err (the extrusion is still
 * returned so a tool can show it). When no prism is inverted, sheets that
 * pass through each other elsewhere (a thin part offset deeper than half
 * its thickness, opposite walls of a narrow fold) are counted in
 * n_crossings, the first pair found in cross_*, and the call returns
 * TS_EMESH naming it (extrusion returned as well): a tissue whose layers
 * interpenetrate is physically wrong. The count stops past 20000 pairs
 * (then n_crossings is 20001 and err names the cap), in the final count or
 * in any round of the thinning, which is then refused as well. With def->min_depth_fraction > 0 the
 * offset is first shrunk where it folds; when that was needed the call
 * returns 0 with a warning in err ("warning: ...": how many vertices, the
 * least fraction kept), as when def->max_relax moved vertices. A vertex with no direction pointing inwards from all
 * its triangles is TS_EMESH naming it (no extrusion). Returns 0, TS_EINVAL,
 * TS_EMESH, TS_ETOOBIG, TS_ENOMEM. */
int ts_extrude(const ts_mesh *surface, const ts_extrude_def *def, ts_extrusion **out, char *err,
               size_t errcap);

void ts_extrusion_free(ts_extrusion *e);

/* 1 when render triangle k of e is one of the inner layers' top sheets
 * (all three nodes on one sheet s, 0 < s < n_layers), which lie inside the
 * solid; 0 for the solid's closed boundary (outer sheet, side walls,
 * innermost sheet) and for k out of range. */
int ts_extrusion_tri_inner(const ts_extrusion *e, uint32_t k);

/* The validity test of one prism, shared by the extrusion and the tissue
 * builder (ts_extrude_prism.c says why this one): P is a triangle of a sheet
 * (counter-clockwise seen from outside), Q the same triangle on the next
 * sheet inwards. Valid when the Jacobian of the linear wedge spanned by them
 * is positive everywhere (with a relative margin of 1e-6). *volume (may be
 * NULL) gets the wedge's volume (m^3, positive when valid) and *min_jacobian
 * (may be NULL) the smallest Jacobian relative to its value for a right
 * prism, as a sine: 1 for a right prism, <= 0 for a folded one. Returns 0
 * (valid), TS_EMESH (degenerate, inverted or not finite) or TS_EINVAL (NULL
 * P or Q). */
int ts_prism_check(const double P[3][3], const double Q[3][3], double *volume, double *min_jacobian);

#endif
