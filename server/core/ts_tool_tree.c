/*
 * ts_tool_tree.c: a session tool's OBB tree and pose from its ts_tool (see
 * ts_tool_tree.h).
 */
#include "ts_tool_tree.h"

#include <string.h>

#include "ts_error.h"

int ts_tool_tree_make(const ts_tool *t, ts_obb_tree **tree, int *owns) {
  if (!tree || !owns) return TS_EINVAL;
  *tree = NULL;
  *owns = 0;
  if (!t) return TS_EINVAL;
  if (t->kind == TS_TOOL_MESH) {
    if (!t->shape) return TS_EINVAL;
    *tree = (ts_obb_tree *)t->shape; /* placed by ts_posed_tool, never written */
    return 0;
  }
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.radius = t->radius;
  switch (t->kind) {
  case TS_TOOL_CAPSULE:
    d.kind = TS_SHAPE_CAPSULE;
    d.length = t->length;
    break;
  case TS_TOOL_JAWS:
    d.kind = TS_SHAPE_JAWS;
    if (t->length > 0) d.length = t->length; /* else the default jaw length */
    break;
  default: d.kind = TS_SHAPE_SPHERE; break;
  }
  int rc = ts_obb_tree_create(&d, tree);
  if (rc) {
    *tree = NULL;
    return rc;
  }
  *owns = 1;
  return 0;
}

ts_pose ts_tool_pose(const ts_tool *t) {
  ts_pose p;
  memcpy(p.p, t->pos, sizeof p.p);
  memcpy(p.q, t->quat, sizeof p.q);
  if (p.q[0] == 0 && p.q[1] == 0 && p.q[2] == 0 && p.q[3] == 0) p.q[0] = 1;
  p.jaw = t->jaw;
  return p;
}
