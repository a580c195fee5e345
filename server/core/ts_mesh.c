/*
 * ts_mesh.c: allocation and copying of triangle surface meshes (ts_mesh.h).
 */
#include "ts_mesh.h"

#include <stdlib.h>
#include <string.h>

#include "ts_error.h"

int ts_mesh_alloc(uint32_t nv, uint32_t nt, ts_mesh **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  ts_mesh *m = calloc(1, sizeof *m);
  if (!m) return TS_ENOMEM;
  m->n_verts = nv;
  m->n_tris = nt;
  m->v = calloc(nv ? nv : 1, sizeof *m->v);
  m->t = calloc(nt ? nt : 1, sizeof *m->t);
  if (!m->v || !m->t) {
    ts_mesh_free(m);
    return TS_ENOMEM;
  }
  *out = m;
  return 0;
}

void ts_mesh_free(ts_mesh *m) {
  if (!m) return;
  free(m->v);
  free(m->t);
  free(m);
}

int ts_mesh_clone(const ts_mesh *m, ts_mesh **out) {
  int rc = ts_mesh_alloc(m->n_verts, m->n_tris, out);
  if (rc) return rc;
  memcpy((*out)->v, m->v, sizeof *m->v * m->n_verts);
  memcpy((*out)->t, m->t, sizeof *m->t * m->n_tris);
  return 0;
}
