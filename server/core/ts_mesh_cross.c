/*
 * ts_mesh_cross.c: a surface's own crossings (ts_mesh_cross.h): an AABB
 * tree over its triangles (no margin: it is queried once) and the self
 * descent of ts_collide_tissue_self in its visiting form, which leaves out
 * the pairs that share a vertex (neighbours meet along their common edge
 * or corner by construction) and stops past the cap.
 */
#include "ts_mesh_cross.h"

#include <string.h>

#include "ts_aabb_tree.h"
#include "ts_collide.h"
#include "ts_error.h"

static int take_pair(void *ctx, uint32_t ka, uint32_t kb, const ts_hit *h) {
  ts_mesh_cross *c = ctx;
  if (c->n == 0) {
    c->tri[0] = ka, c->tri[1] = kb;
    memcpy(c->point, h->point, sizeof c->point);
  }
  return ++c->n > c->cap;
}

int ts_mesh_self_crossings(const ts_mesh *m, uint32_t cap, ts_mesh_cross *out) {
  if (!m || !out || (m->n_tris && (!m->v || !m->t))) return TS_EINVAL;
  memset(out, 0, sizeof *out);
  out->cap = cap ? cap : TS_MESH_CROSS_CAP;
  if (m->n_tris == 0) return 0;
  ts_aabb_tree_def def = ts_default_aabb_tree_def();
  def.margin = 0;
  ts_aabb_tree *tree = NULL;
  int rc = ts_aabb_tree_create(&def, m->n_verts, (const double(*)[3])m->v, m->n_tris,
                               (const uint32_t(*)[3])m->t, &tree);
  if (rc) return rc;
  rc = ts_collide_tissue_self_visit(tree, (const double(*)[3])m->v, NULL, take_pair, out, NULL);
  ts_aabb_tree_destroy(tree);
  return rc;
}
