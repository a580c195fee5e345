/*
 * ts_leb.h: longest-edge bisection of a triangle mesh under a density
 * condition (M.-C. Rivara, "Mesh refinement processes based on the
 * generalized bisection of simplices", SIAM J. Numer. Anal. 21(3):604-613,
 * 1984; "New longest-edge algorithms for the refinement and/or improvement of
 * unstructured triangulations", Int. J. Numer. Meth. Engng 40:3313-3324,
 * 1997), the local refinement of the second method.
 *
 * The density condition: an edge fails when it is longer than the bound at
 * its midpoint (one length for the whole mesh, or a caller's function of
 * position, e.g. fine near a contact and unbounded elsewhere). Failing edges
 * go into a set sorted by length (a max-heap); the longest is taken and
 * bisected at its midpoint, both triangles on it split in two, and the new
 * edges that fail are inserted in order, until the set is empty. To bisect
 * every triangle across its own longest edge (which keeps the smallest angle
 * at least half the initial one: I. G. Rosenberg and F. Stenger, Math. Comp.
 * 29:390-395, 1975), an edge whose neighbour triangle has a
 * longer edge waits until that longer edge is bisected first (Rivara's
 * longest-edge propagation path); such propagated bisections of edges that
 * pass the condition are counted as forced. Splitting both triangles of an
 * edge at once keeps the mesh conforming at every step.
 *
 * New vertices are plain midpoints, so the refined surface is the old one
 * exactly, and any per-vertex quantity (each sheet of an extrusion, node
 * velocities) carries over through the parents table in creation order.
 */
#ifndef TS_LEB_H
#define TS_LEB_H

#include <stddef.h>
#include <stdint.h>

#include "ts_extrude.h"
#include "ts_mesh.h"

/* The largest edge length allowed at point p (m); INFINITY = no bound. */
typedef double (*ts_leb_size_fn)(const double p[3], void *ud);

#define TS_LEB_DEFAULT_MAX_VERTS (1u << 22)

typedef struct ts_leb_def {
  double max_edge;        /* m, > 0: the bound everywhere (unless size_at is set) */
  ts_leb_size_fn size_at; /* optional: the bound at an edge's midpoint; replaces max_edge */
  void *size_ud;
  uint32_t max_verts;     /* refuse with TS_EFULL rather than grow past this many
                             vertices; 0 = TS_LEB_DEFAULT_MAX_VERTS */
  const uint8_t *frozen;  /* optional, one flag per input vertex: an edge joining
                             two flagged vertices is never bisected (a rim that
                             must stay as it is), and a triangle with such an
                             edge is neither refined for the density condition
                             nor on a propagation path: it is split only when a
                             neighbour's edge is bisected (ts_leb.c says why).
                             NULL: none */
} ts_leb_def;

typedef struct ts_leb_result {
  ts_mesh *mesh;          /* the refined mesh */
  uint32_t n_old_verts;   /* the input's vertices keep their indices */
  uint32_t n_new;         /* new vertices n_old_verts .. n_old_verts + n_new - 1 */
  uint32_t (*parents)[2]; /* new vertex n_old_verts + i is the midpoint of
                             parents[i] (both created before it) */
  uint32_t *tri_parent;   /* per triangle of mesh: the input triangle it lies in */
  uint32_t n_forced;      /* bisections of edges that met the condition (propagation) */
} ts_leb_result;

/* Refines m until no edge fails the density condition. m must be an
 * edge-manifold (no edge on more than two triangles). Returns 0, TS_EINVAL
 * (bad definition, or the size function gave a bound that is not positive),
 * TS_EMESH (not manifold, index out of range), TS_EFULL (max_verts reached;
 * err says so), TS_ENOMEM. */
int ts_leb_refine(const ts_mesh *m, const ts_leb_def *def, ts_leb_result **out, char *err,
                  size_t errcap);
/* Frees r with its mesh and tables; NULL is ignored. */
void ts_leb_result_free(ts_leb_result *r);

/* Refines an extrusion's surface (density condition on sheet 0) and rebuilds
 * every sheet with the same bisections (node (s, new) = midpoint of its
 * parents on sheet s), the render surface and the inverted-prism count as
 * ts_extrude does. *res_out, when not NULL, receives the surface result (for
 * carrying per-node state over). Returns as ts_leb_refine; TS_EMESH also when
 * prisms are inverted (the extrusion is still returned). */
int ts_leb_extrusion(const ts_extrusion *e, const ts_leb_def *def, ts_extrusion **out,
                     ts_leb_result **res_out, char *err, size_t errcap);

#endif
