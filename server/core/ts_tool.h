/*
 * ts_tool.h: rigid tools as the core sees them in the skeleton: a sphere or a
 * capsule at a pose. Issue 5 replaces the narrow phase with OBB/AABB trees;
 * this interface (pose in, reaction force out) stays.
 */
#ifndef TS_TOOL_H
#define TS_TOOL_H

#include <stdint.h>

/* Jaws (a grasper: ts_obb_tree.h's TS_SHAPE_JAWS, `length` the jaw length)
 * and meshes (TS_SHAPE_MESH, `shape` the tree) need the tree-based contact
 * path (ts_xpbd_step_posed) for jaws; the mass-spring step projects nodes
 * out of meshes by the tree's signed distance (ts_ms_contact.c) and takes
 * no jaws. */
enum { TS_TOOL_SPHERE = 0, TS_TOOL_CAPSULE = 1, TS_TOOL_JAWS = 2, TS_TOOL_MESH = 3 };

struct ts_obb_tree;

typedef struct ts_tool {
  int kind;            /* TS_TOOL_* */
  int active;          /* 0: ignored by the step */
  double radius;       /* m */
  double length;       /* capsule: segment length along the axis, m */
  double pos[3];       /* tip (sphere centre / capsule's lower end centre), m */
  double quat[4];      /* w, x, y, z: orientation; the axis is local +y from the tip */
  double jaw;          /* jaws: opening 0 (closed) .. 1 (open) */
  const struct ts_obb_tree *shape; /* TS_TOOL_MESH: its tree (not owned) */
  double force[3];     /* out: the reaction force of the tissue on the tool, N */
  double torque[3];    /* out: its moment about the tip (pos), N m */
  uint32_t contacts;   /* out: nodes in contact this step (most in a substep) */
} ts_tool;

/* Signed distance of p from the tool's surface (negative inside), measured
 * from the closest point on the tool's core (sphere centre or capsule
 * segment). normal_out (may be NULL) gets the outward unit normal there, the
 * direction that moves p out of the tool fastest. */
double ts_tool_distance(const ts_tool *tool, const double p[3], double normal_out[3]);

/* The tool's core segment: a = pos, b = pos + length * axis for a capsule,
 * b = a for a sphere. A zero quaternion counts as the identity; others are
 * normalised here, so callers need not. */
void ts_tool_segment(const ts_tool *tool, double a[3], double b[3]);

#endif
