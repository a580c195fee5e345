/*
 * ts_obb_tree.h: the bounding-volume tree of a rigid object, a tool: a binary
 * tree of oriented boxes in the tool's own frame, built once and moved by the
 * tool's pose each step (Gottschalk, Lin, Manocha 1996, "OBBTree: a
 * hierarchical structure for rapid interference detection", SIGGRAPH).
 *
 * A tool is a triangle mesh (a closed surface, counter-clockwise seen from
 * outside) or a primitive declared when the client joins:
 *   - mesh: one triangle per leaf. Each node's box is fitted to the
 *     covariance of its triangles taken as area-weighted continuous
 *     distributions (Gottschalk et al. section 3: the box axes are the
 *     eigenvectors of that covariance, the extents the vertices'
 *     projections), and its triangles are split by the plane through the mean
 *     of their centroids across the box's longest axis (the next axes, then
 *     the median, when that leaves a side empty), top-down;
 *   - sphere (radius r) centred at the tool frame's origin, the tip;
 *   - capsule: the segment from the tip (origin) to length along local +y
 *     (towards the handle, as in ts_tool.h), radius r;
 *   - grasper jaws as two boxes hinged about local z at (0, length, 0): closed
 *     (jaw 0) they lie side by side along local y from the hinge down to the
 *     tip, jaw 0 on the +x side (x in [0, thickness]) and jaw 1 on the -x
 *     side, each jaw_width deep along z; opening (jaw 0..1) turns jaw s by
 *     +-jaw * jaw_max_angle / 2 about the hinge so that the tips part along x.
 *     Features 0 and 1 are the two jaws; the root box holds both.
 * A primitive's features are its leaves: the sphere and capsule have one
 * (feature 0), the jaws two.
 *
 * A pose is a position and a unit quaternion (w, x, y, z) taking tool-frame
 * points to the world: p_world = R(q) p_tool + position; plus the jaw
 * opening. ts_posed_tool places a tree at a pose and caches the world boxes
 * a query visits (no allocation per step).
 */
#ifndef TS_OBB_TREE_H
#define TS_OBB_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "ts_mesh.h"
#include "ts_sat.h"

enum { TS_SHAPE_MESH = 0, TS_SHAPE_SPHERE = 1, TS_SHAPE_CAPSULE = 2, TS_SHAPE_JAWS = 3 };

typedef struct ts_pose {
  double p[3]; /* position of the tool frame's origin, m */
  double q[4]; /* orientation, unit quaternion w, x, y, z */
  double jaw;  /* jaw opening 0 (closed) .. 1 (open); jaws only */
} ts_pose;

typedef struct ts_tool_shape_def {
  int kind;             /* TS_SHAPE_* */
  double radius;        /* sphere, capsule: m (> 0) */
  double length;        /* capsule: core length (>= 0); jaws: jaw length (> 0), m */
  double jaw_width;     /* jaws: extent along local z, m (> 0) */
  double jaw_thickness; /* jaws: each jaw's extent across the opening, m (> 0) */
  double jaw_max_angle; /* jaws: opening angle between the jaws at jaw 1, rad (0, pi) */
  const ts_mesh *mesh;  /* mesh: the tool surface in the tool frame (copied) */
  double mesh_scale;    /* mesh: factor to metres applied to mesh->v (0 means 1) */
  int thin_pass;        /* mesh: nonzero (the default) pushes the tissue triangles the tool
                           pierces with no tissue vertex inside (ts_contact.h); 0 the
                           vertices only */
  int thin_sweep;       /* mesh: nonzero (the default) sweeps that triangle pass between the
                           tool's last two poses (no tunnelling of a tool faster than its
                           thickness per solver substep); 0 tests the new pose only */
} ts_tool_shape_def;

typedef struct ts_obb_node {
  ts_obb box;       /* in the tool frame (jaws: see ts_posed_tool) */
  int32_t child[2]; /* -1 for leaves */
  int32_t feature;  /* leaves: triangle index or primitive feature; -1 internal */
  uint32_t count;   /* triangles (features) under the node */
} ts_obb_node;

typedef struct ts_obb_tree {
  int kind; /* TS_SHAPE_* */
  int thin_pass; /* mesh: as the def's */
  int thin_sweep; /* mesh: as the def's */
  uint32_t n_nodes;
  ts_obb_node *nodes; /* root at index 0, every child after its parent */
  uint32_t depth;     /* levels: 1 for a single leaf */
  /* mesh, in metres in the tool frame */
  uint32_t n_verts, n_tris;
  double (*v)[3];
  uint32_t (*t)[3];
  /* primitives (copied from the def) */
  double radius, length, jaw_width, jaw_thickness, jaw_max_angle;
  /* for the swept query (ts_collide.h) */
  double thickness; /* thinnest part, m: 2 r for spheres and capsules, the jaw
                           thickness for jaws; for meshes the shortest distance from a
                           vertex inwards along its normal to the opposite surface
                           (0 when no such ray hits: open meshes) */
  /* mesh: angle-weighted pseudonormals for the signed distance (ts_obb_sdf.c),
   * in the tool frame: per triangle its unit normal and its edges' (edge k
   * from corner k to k + 1), per vertex its own; zero on the rim of an open
   * mesh */
  double (*fnorm)[3];
  double (*enorm)[3][3];
  double (*vnorm)[3];
  double reach;     /* largest distance of a tool point from the frame origin, m
                           (jaws: an upper bound over every opening) */
  int sdf_outside_root; /* mesh: nonzero when the signed distance is positive everywhere
                           outside the root box (but beyond sdf_open_plane), which
                           ts_obb_tree_mesh_sdf_within prunes by (ts_obb_sdf_cert.c): a
                           closed, manifold, consistently oriented mesh, or an open one
                           whose rim is one flat convex loop with the rest of the mesh on
                           one side of its plane (a handle cut off flat at its end); 0
                           otherwise, and then _within is the full query */
  double sdf_open_plane[4]; /* mesh: that rim's plane, unit normal n (away from the mesh)
                               and offset d (n . x = d on it); all 0 for a closed mesh.
                               Beyond it (n . p > d, less a margin) _within is the full
                               query too */
} ts_obb_tree;

/* Defaults: a sphere of radius 5 mm; capsule length 20 mm; jaws 10 mm long,
 * 4 mm wide, 1.5 mm thick, opening to 60 degrees; mesh_scale 1; thin_pass
 * and thin_sweep on. */
ts_tool_shape_def ts_default_tool_shape_def(void);

/* Builds the tree for a shape. Returns 0, TS_EINVAL (bad kind or sizes, no
 * mesh, an index out of range, an empty mesh), TS_ENAN (a non-finite size or
 * vertex) or TS_ENOMEM. */
int ts_obb_tree_create(const ts_tool_shape_def *def, ts_obb_tree **out);

void ts_obb_tree_destroy(ts_obb_tree *tree);

/* Signed distance (m, negative inside) of p (tool frame) from a mesh tool's
 * surface, with the outward unit direction in n (may be NULL): the closest
 * point by the tree, the sign by the angle-weighted pseudonormal of its
 * feature (exact for a closed oriented mesh; near the rim of an open mesh a
 * point counts as outside). NAN for a tree that is not a mesh. Reads the
 * tree only: threads may share it. */
double ts_obb_tree_mesh_sdf(const ts_obb_tree *tree, const double p[3], double n[3]);

/* The same signed distance bounded by limit (m), for a caller that only needs
 * the points below it: for p outside the root box of a tree with
 * sdf_outside_root, the descent prunes every box farther than limit (a far
 * point ends at the root) and returns INFINITY (n not written) when no
 * surface point is within limit; otherwise (a nearer surface, p in the root
 * box, or no sdf_outside_root) exactly ts_obb_tree_mesh_sdf's result, bit for
 * bit (the same descent order and winner). So a result <= limit is always
 * the full query's, and INFINITY means the full query's is > limit. A
 * negative limit counts as 0. NAN as the full query, or for a NAN limit. */
double ts_obb_tree_mesh_sdf_within(const ts_obb_tree *tree, const double p[3], double limit,
                                   double n[3]);

/* Checks the tree: links, one leaf per feature, axes orthonormal and
 * right-handed, and every triangle of a mesh (every corner) inside its leaf's
 * box and every box of its ancestors within tol (m). Returns 0, or
 * TS_EINTERNAL with the first broken rule in err (may be NULL). */
int ts_obb_tree_validate(const ts_obb_tree *tree, double tol, char *err, size_t errcap);

/* A tool placed at a pose, with the pose-dependent boxes (jaws) and a cache of
 * world boxes. Owns memory: ts_posed_tool_init / ts_posed_tool_free. */
typedef struct ts_posed_tool {
  const ts_obb_tree *tree;
  ts_pose pose;        /* normalised quaternion, jaw clamped to [0, 1] */
  double R[3][3];      /* rotation matrix of pose.q: world = R tool + p */
  ts_obb jaw_local[3]; /* jaws: root and the two jaw boxes in the tool frame */
  /* private */
  ts_obb *world;      /* per node: world box, valid when stamp[i] == cur */
  double (*reach)[3]; /* per node: half-extents of the world box's axis-aligned
                         bounds (sum_i e_i |r_i|), valid with world */
  double (*wv)[3];    /* mesh: per vertex, world position, valid when vstamp[i] == cur */
  uint32_t *vstamp;
  uint32_t *stamp;
  uint32_t cur;
} ts_posed_tool;

/* Allocates the cache for tree (which must outlive pt); the pose is the
 * identity with the jaws closed. Returns 0, TS_EINVAL or TS_ENOMEM. */
int ts_posed_tool_init(ts_posed_tool *pt, const ts_obb_tree *tree);
void ts_posed_tool_free(ts_posed_tool *pt);

/* Moves the tool. The quaternion is normalised here; jaw is clamped to
 * [0, 1]. Returns 0, TS_EINVAL (NULL), TS_ENAN (a non-finite number) or
 * TS_EQUAT (a quaternion too short to normalise, |q| < 1e-6); on error the
 * pose is unchanged. No allocation. */
int ts_posed_tool_set_pose(ts_posed_tool *pt, const ts_pose *pose);

/* World box of node i at the current pose (cached until the next set_pose).
 * ext (may be NULL) gets the half-extents of its axis-aligned bounds, a cheap
 * first test against axis-aligned boxes. */
const ts_obb *ts_posed_tool_box(ts_posed_tool *pt, int32_t node);
const ts_obb *ts_posed_tool_box_ext(ts_posed_tool *pt, int32_t node, const double **ext);

/* World geometry of the features at the current pose:
 * a mesh triangle (corners in the tool's winding; world vertices are cached
 * until the next set_pose); the core segment of a
 * sphere (a = b = centre) or capsule; a jaw box (feature 0 or 1). */
void ts_posed_tool_triangle(ts_posed_tool *pt, uint32_t tri, double out[3][3]);
void ts_posed_tool_segment(const ts_posed_tool *pt, double a[3], double b[3]);
void ts_posed_tool_jaw(const ts_posed_tool *pt, int jaw, ts_obb *out);

/* Rotation matrix of a unit quaternion (w, x, y, z). */
void ts_quat_to_mat(const double q[4], double R[3][3]);

/* Pose between a and b at s in [0, 1]: positions and jaw linearly, the
 * orientation by spherical interpolation along the shorter arc. */
void ts_pose_lerp(const ts_pose *a, const ts_pose *b, double s, ts_pose *out);

#endif
