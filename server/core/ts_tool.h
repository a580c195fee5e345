/*
 * ts_tool.h: rigid tools as the core sees them in the skeleton: a sphere or a
 * capsule at a pose. Issue 5 replaces the narrow phase with OBB/AABB trees;
 * this interface (pose in, reaction force out) stays. A tool carries its
 * Coulomb friction on the tissue (static and kinetic coefficient), used by
 * both solvers' contact.
 */
#ifndef TS_TOOL_H
#define TS_TOOL_H

#include <stdint.h>

/* Jaws (a grasper: ts_obb_tree.h's TS_SHAPE_JAWS, `length` the jaw length,
 * 0 for the default) and meshes (TS_SHAPE_MESH, `shape` the tree): the XPBD
 * solver takes both on its tree-based contact path (ts_xpbd_step_posed);
 * the mass-spring step projects nodes out of meshes and jaws by their
 * signed distance (ts_ms_contact.c) and lets the jaws grasp
 * (ts_ms_grasp.c). */
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
  double mu_static;    /* Coulomb friction of the tool on tissue: static */
  double mu_kinetic;   /* and kinetic coefficient; 0 <= mu_kinetic <= mu_static
                          <= TS_TOOL_MU_MAX (0, 0: frictionless) */
  int thin_off;        /* sphere or capsule in a mass-spring step: nonzero skips its
                          triangle pass (ts_ms_contact.c; 0, on, is the default: the
                          tests compare with it off) */
} ts_tool;

/* Largest friction coefficient a tool may have (above any measured for
 * tissue; rubber on dry glass is about 1 to 2). */
#define TS_TOOL_MU_MAX 2.0

/* The daemon's default for a steel instrument on wet tissue: kinetic 0.05,
 * the top of the range measured for a stainless steel sled sliding on the
 * small bowel's lumen (COF 0.007 to 0.054: "Preliminary friction force
 * measurements on small bowel lumen when eliminating sled
 * edge effects", Tribology Letters 51(3):377-383, 2013), static twice that
 * (a still instrument holds the mucosa before it slides). */
#define TS_TOOL_MU_STATIC_DEFAULT 0.1
#define TS_TOOL_MU_KINETIC_DEFAULT 0.05

/* 0 when (mu_static, mu_kinetic) is a valid pair (finite, 0 <= mu_kinetic
 * <= mu_static <= TS_TOOL_MU_MAX), TS_EINVAL otherwise. */
int ts_tool_friction_valid(double mu_static, double mu_kinetic);

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
