/*
 * session_contact.h: the tree-based tool contact of a position-based (XPBD)
 * session (issue 5): the tissue's AABB tree, and per tool an OBB tree of its
 * shape (sphere, capsule or grasper jaws; a mesh tool uses the server's
 * tree of its mesh, tool_meshes.h), its placed copy, its contact
 * workspace and, for jaws, its grasp. The physics thread that owns the
 * session owns this too; trees are built when a tool's shape changes (a
 * join), never in a plain step.
 */
#ifndef TS_SESSION_CONTACT_H
#define TS_SESSION_CONTACT_H

#include "core/ts_aabb_tree.h"
#include "core/ts_contact.h"
#include "core/ts_grasp.h"
#include "core/ts_obb_tree.h"
#include "core/ts_tissue.h"
#include "core/ts_tool.h"
#include "core/ts_xpbd.h"
#include "frame.h"

typedef struct ts_session_ptool {
  ts_obb_tree *otree;        /* NULL: not built yet */
  int owns_tree;             /* built here (primitives); a mesh tool's tree is the server's */
  const ts_obb_tree *shape;  /* the mesh tool's tree it was set up for */
  int kind;                  /* TS_TOOL_* the tree was built for */
  double radius, length;
  ts_posed_tool pt;
  ts_contact_ws ws;
  ts_grasp grasp;
  int has_grasp;             /* jaws */
  ts_pose last;              /* pose at the end of the last step */
  int have_last;
} ts_session_ptool;

typedef struct ts_session_contact {
  ts_aabb_tree *tree;
  ts_session_ptool tool[TS_MAX_TOOLS];
} ts_session_contact;

/* Builds the tissue's tree. 0, TS_ENOMEM or TS_EINVAL. */
int ts_session_contact_init(ts_session_contact *sc, const ts_tissue *t);
void ts_session_contact_free(ts_session_contact *sc);

/* The tissue went back to rest: grasps let go, tools start afresh. */
void ts_session_contact_reset(ts_session_contact *sc);

/* Gives sc, made for a refined tissue (server/refine.c's install), the
 * last poses of the tools of from, the contact it replaces (NULL: none), so
 * that its first step moves each tool from there as from's would; its
 * trees, workspaces and grasps are built at that step as for any new
 * contact. */
void ts_session_contact_carry(ts_session_contact *sc, const ts_session_contact *from);

/* One XPBD step of t with the active tools on the tree path: each tool moves
 * from its last pose to its current one (ts_tool pos, quat, jaw) and gets
 * its reaction (force, torque about the tip, contacts) written back into
 * tools[]; a tool's friction (mu_static, mu_kinetic) is its contact's.
 * 0, TS_EINVAL (a friction pair ts_tool_friction_valid refuses), or a
 * ts_errno of ts_xpbd_step_posed / of building a tool. */
int ts_session_contact_step(ts_session_contact *sc, ts_xpbd *x, ts_tissue *t, double dt,
                            ts_tool tools[TS_MAX_TOOLS], ts_xpbd_stats *stats);

#endif
