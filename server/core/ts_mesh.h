/*
 * ts_mesh.h: a triangle surface mesh (vertex positions in metres, triangles
 * as vertex index triples, counter-clockwise seen from outside). The common
 * currency of the mesh readers (ts_mesh_io.h), validation and repair,
 * extrusion into layers (ts_extrude.h), subdivision and refinement, and the
 * tissue builders.
 */
#ifndef TS_MESH_H
#define TS_MESH_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_mesh {
  uint32_t n_verts;
  uint32_t n_tris;
  double (*v)[3];    /* positions, m */
  uint32_t (*t)[3];  /* triangles */
} ts_mesh;

/* Allocates a mesh with room for exactly nv vertices and nt triangles
 * (contents zeroed). Returns 0, TS_EINVAL or TS_ENOMEM. */
int ts_mesh_alloc(uint32_t nv, uint32_t nt, ts_mesh **out);
void ts_mesh_free(ts_mesh *m);
/* Deep copy. */
int ts_mesh_clone(const ts_mesh *m, ts_mesh **out);

#endif
