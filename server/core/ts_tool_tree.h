/*
 * ts_tool_tree.h: the OBB tree of a session tool's shape and the pose it
 * stands at, from its ts_tool (kind, radius, length, mesh tree; pos, quat,
 * jaw). One mapping for every place that places a tool: the XPBD session's
 * tissue contact (server/session_contact.c), tool against tool
 * (ts_tool_contact.c) and a refinement's hand-over (ts_handover_tools.c),
 * which built it each their own way before and must agree (a tool's jaws
 * or capsule are the same shape to the tissue and to another tool).
 */
#ifndef TS_TOOL_TREE_H
#define TS_TOOL_TREE_H

#include "ts_obb_tree.h"
#include "ts_tool.h"

/* The tree of t's shape: a sphere or capsule of t's radius (and length),
 * the jaws (length 0: the default jaw length), or a mesh tool's own tree
 * (t->shape, not copied: *owns 0; never written, ts_posed_tool only reads
 * it). A primitive's tree is built here (*owns 1: the caller destroys it).
 * Returns 0, TS_EINVAL (NULL, a mesh tool without its tree) or an error of
 * ts_obb_tree_create (*tree then NULL). */
int ts_tool_tree_make(const ts_tool *t, ts_obb_tree **tree, int *owns);

/* The pose t stands at: pos, quat (all zero taken as the identity, as
 * ts_tool.h allows), jaw. */
ts_pose ts_tool_pose(const ts_tool *t);

#endif
