/*
 * ts_collide.h: collision queries between tools and tissue, the detection
 * half of the hybrid bounding-volume method (issue 5): tissue (non-rigid)
 * has an AABB tree (ts_aabb_tree.h), refitted each step; a tool (rigid) an
 * OBB tree (ts_obb_tree.h), built once and placed at its pose. A query tests
 * the root boxes and, where they overlap, descends both trees together
 * (always splitting the larger box; OBB against OBB by the 15-axis
 * separating-axis test, ts_sat.h; OBB against AABB by the OBB's axis-aligned
 * bounds above the leaves, and at a pair of leaves by those bounds and the
 * 15 axes against the tissue triangle's own box), and at pairs of leaves
 * tests the features exactly (ts_tritri.h), giving a contact per touching
 * pair (Gottschalk, Lin, Manocha 1996, "OBBTree", section 5).
 *
 *   - tool x tissue: contacts {tool feature, tissue triangle, point, normal
 *     (from the tool into the tissue), depth};
 *   - tool x tool (OBB x OBB) and tissue x tissue (AABB x AABB, also one
 *     tissue against itself for self-contact);
 *   - a sweep of a tool between its last two poses, in substeps short enough
 *     against the tool's thinnest part that it cannot pass through a sheet
 *     of tissue unseen (the first substep with contacts is the time of
 *     impact);
 *   - a brute-force all-pairs reference for tool x tissue (tests, benchmarks).
 *
 * Contacts go into a caller-owned buffer: nothing is allocated per step (the
 * brute-force reference excepted). The caller refits the tissue tree for
 * positions x before querying with the same x. Response (moving tissue out,
 * friction, grasping) is not done here.
 */
#ifndef TS_COLLIDE_H
#define TS_COLLIDE_H

#include <stdint.h>

#include "ts_aabb_tree.h"
#include "ts_obb_tree.h"
#include "ts_tritri.h"

typedef struct ts_contact {
  uint32_t a;       /* feature of the first object: the tool's triangle or primitive
                       feature (tool x tissue, tool x tool), the first tissue's triangle */
  uint32_t b;       /* feature of the second: the tissue's triangle, the second tool's
                       feature, the second tissue's triangle */
  double point[3];  /* m */
  double normal[3]; /* unit, from the first object into the second: the direction
                       that separates the second from the first */
  double depth;     /* m, >= 0 */
  double toi;       /* fraction of the swept step at which found; 1 for plain queries */
} ts_contact;

/* A caller-owned contact buffer. */
typedef struct ts_contacts {
  ts_contact *c;
  uint32_t n;     /* stored */
  uint32_t cap;   /* room */
  uint32_t total; /* found, may exceed cap (then the first cap are stored) */
} ts_contacts;

/* Allocates room for cap contacts. Returns 0, TS_EINVAL (cap 0) or TS_ENOMEM. */
int ts_contacts_init(ts_contacts *buf, uint32_t cap);
void ts_contacts_free(ts_contacts *buf);

/* Work done by the last query (for benchmarks and tests). */
typedef struct ts_collide_stats {
  uint64_t box_tests;  /* bounding-volume pair tests */
  uint64_t leaf_tests; /* exact feature tests */
} ts_collide_stats;

/* Contacts of a placed tool with a tissue whose tree was refitted for x. The
 * buffer is cleared first. stats may be NULL. Returns 0, TS_EFULL when more
 * contacts were found than fit (buf->total counts them all), TS_EINVAL
 * (NULL arguments, x NULL for a non-empty tree). The descent's stack is a
 * fixed one for every tree the builders make; a tree deeper than that
 * (over about 250 levels) walks on a heap stack sized by the trees' depth
 * fields (TS_ENOMEM when it cannot be had; TS_EINTERNAL for a tree deeper
 * than its depth field says). The same holds for every pair walk below. */
int ts_collide_tool_tissue(ts_posed_tool *tool, const ts_aabb_tree *tissue, const double (*x)[3],
                           ts_contacts *buf, ts_collide_stats *stats);

/* The same contacts by testing every (tool feature, tissue triangle) pair
 * whose bounding boxes (grown by 1e-7 m) overlap, without the trees (the
 * tissue tree only lends its triangle list). Allocates scratch: a reference,
 * not for the step. Returns as ts_collide_tool_tissue, or TS_ENOMEM. */
int ts_collide_tool_tissue_brute(ts_posed_tool *tool, const ts_aabb_tree *tissue,
                                 const double (*x)[3], ts_contacts *buf);

/* The live contact's candidates (ts_collide_cand.c): the tissue triangles
 * the tool may touch, by the descent of ts_collide_tool_tissue (root boxes,
 * OBB x AABB down to pairs of leaves, at the leaves the 15 axes against the
 * triangle's own box at x, or its fat leaf box for x NULL) with every tool
 * box grown by grow (m, >= 0) on every side, each triangle once; the exact
 * tests are the response's (ts_contact.c, ts_ms_contact.c). Writes up to
 * cap into out and returns how many there are (more than cap: some were
 * left out). stats may be NULL. 0 for bad arguments. Reads the trees only;
 * no allocation but for a tree over 512 levels deep, which no builder here
 * makes (its walk then takes a heap stack; see ts_collide_cand.c).
 *   - ts_collide_tissue_tris: a placed tool (any kind, its cached boxes),
 *     the triangles in the order ts_aabb_tree_query_box lists them (so a
 *     response that moves shared corners triangle after triangle does so
 *     in the order it did with the root box's query);
 *   - _frame: a mesh, sphere or capsule tree standing at rotation R (tool
 *     frame to world) and origin o (m), its boxes placed on the fly;
 *   - _box: a tool that is one world box (a primitive's bound);
 *     these two in ascending triangle order (a scan's). */
uint32_t ts_collide_tissue_tris(ts_posed_tool *tool, const ts_aabb_tree *tissue,
                                const double (*x)[3], double grow, uint32_t *out, uint32_t cap,
                                ts_collide_stats *stats);
uint32_t ts_collide_tissue_tris_frame(const ts_obb_tree *tool, const double R[3][3],
                                      const double o[3], const ts_aabb_tree *tissue,
                                      const double (*x)[3], double grow, uint32_t *out,
                                      uint32_t cap, ts_collide_stats *stats);
uint32_t ts_collide_tissue_tris_box(const ts_obb *box, const ts_aabb_tree *tissue,
                                    const double (*x)[3], double grow, uint32_t *out,
                                    uint32_t cap, ts_collide_stats *stats);

/* The same descent once for several queries (a solver's substeps), by the
 * fat leaf boxes (x NULL):
 *   - ts_collide_tissue_tris_wide: a superset, in ts_collide_tissue_tris's
 *     order, for tools whose every grown box lies inside the placed tool's
 *     box grown by `grow` (m), against tissue leaf boxes that may each grow
 *     by up to tis_grow (m) on every side: every tissue box is taken grown
 *     by it. Returns the count (may exceed cap), 0 for bad arguments, or
 *     UINT32_MAX when the walk could not be made in order (a tree deeper
 *     than its depth says): the caller then queries each time;
 *   - ts_collide_tissue_tris_among: the exact candidates of
 *     ts_collide_tissue_tris(tool, tissue, NULL, grow, ...) when the n_among
 *     triangles in `among` (in that function's order) hold them: those of
 *     `among` that the walk would give, in the same order, the count in
 *     *n_out (may exceed cap). A tree's boxes must be as at the walk it
 *     replaces, and its structure as at the superset's (no rebuild between).
 *     Returns 0, TS_EINVAL, or TS_ERANGE for a tree over the fixed stacks
 *     (512 levels; the caller then walks). */
uint32_t ts_collide_tissue_tris_wide(ts_posed_tool *tool, const ts_aabb_tree *tissue, double grow,
                                     double tis_grow, uint32_t *out, uint32_t cap);
int ts_collide_tissue_tris_among(ts_posed_tool *tool, const ts_aabb_tree *tissue,
                                 const uint32_t *among, uint32_t n_among, double grow,
                                 uint32_t *out, uint32_t cap, uint32_t *n_out);

/* Contacts between two placed tools (OBB tree x OBB tree); a is the first
 * object. Feature pairs: a face of a mesh tool is handled as in tool x tissue
 * (the other tool's triangle against it); two spheres/capsules by the
 * closest points of their cores; a jaw box against a sphere/capsule or
 * another box by the smallest overlap over the separating axes when the
 * cores meet, else by the closest points. Returns as ts_collide_tool_tissue. */
int ts_collide_tool_tool(ts_posed_tool *a, ts_posed_tool *b, ts_contacts *buf,
                         ts_collide_stats *stats);

/* Contacts between two tissues (AABB tree x AABB tree), each with its own
 * positions: pairs of intersecting triangles, normal = the outward normal of
 * a's triangle, depth = how far b's triangle reaches behind it (as
 * ts_contact_face_triangle). With a == b (one tissue against itself: pass the
 * same tree and positions) every pair is reported once with a < b, and pairs
 * of triangles that share a point are skipped. Returns as
 * ts_collide_tool_tissue. */
int ts_collide_tissue_tissue(const ts_aabb_tree *a, const double (*xa)[3], const ts_aabb_tree *b,
                             const double (*xb)[3], ts_contacts *buf, ts_collide_stats *stats);

/* Decides whether the pair of triangles ka < kb of a self query is left out
 * (non-zero) or tested (0); ctx is the caller's. */
typedef int (*ts_collide_skip_fn)(void *ctx, uint32_t ka, uint32_t kb);

/* One tissue against itself (ts_collide_tissue_tissue with a == b), leaving
 * out, besides the pairs that share a point, every pair skip (may be NULL)
 * says to: the extrusion's crossing check (ts_extrude_cross.c) skips
 * triangles of one column, which meet by construction. Returns as
 * ts_collide_tissue_tissue. */
int ts_collide_tissue_self(const ts_aabb_tree *a, const double (*x)[3], ts_collide_skip_fn skip,
                           void *ctx, ts_contacts *buf, ts_collide_stats *stats);

/* Takes one intersecting pair ka < kb of a self query (hit as a contact's
 * point, normal, depth); returns non-zero to stop the descent there. ctx is
 * the caller's (the same as skip's). */
typedef int (*ts_collide_visit_fn)(void *ctx, uint32_t ka, uint32_t kb, const ts_hit *hit);

/* ts_collide_tissue_self's descent with each pair handed to visit (in the
 * same order, with the same pairs left out) instead of stored, stopping
 * when visit says so: the extrusion's crossing check stops past its cap of
 * pairs (ts_extrude_cross.c), which bounds the work on a surface of many
 * overlapping parts whose pairs grow with the square of the overlap.
 * Returns 0, TS_EINVAL (NULL tree or visit, x NULL for a non-empty tree),
 * TS_ENOMEM or TS_EINTERNAL (a deep tree's stack, as ts_collide_tool_tissue). */
int ts_collide_tissue_self_visit(const ts_aabb_tree *a, const double (*x)[3],
                                 ts_collide_skip_fn skip, ts_collide_visit_fn visit, void *ctx,
                                 ts_collide_stats *stats);

/* How far a triangle-mesh tool reaches through one tissue triangle T, both
 * in the tool's frame (the caller moves T there): of the tool triangles that
 * meet T (a descent of the tool's tree with T's box), the one whose part over
 * T (inside the prism T sweeps along its normal) lies deepest behind T's
 * plane (ts_contact_face_triangle with T as the face). This is the
 * vertex-triangle and edge-triangle contact of a tool feature that pierced T
 * from its outer side: a tool thinner than the tissue's triangles can do so
 * with no tissue vertex inside it. hit: point = where that tool triangle
 * crosses T (the midpoint of their intersection segment), normal = T's
 * inward unit normal (from the tool into the tissue: the way T must move),
 * depth = that part's depth behind T's plane (m, >= 0; T moved by it along
 * the normal clears the tool). A deepest reach over max_depth (m) counts as
 * no contact: the tool is through T, or came from its inner side. Returns 1
 * with *hit filled, 0 for none (also for a tool that is not a mesh, NULL).
 * Reads the tree only; no allocation. */
int ts_collide_mesh_pierce(const ts_obb_tree *tool, const double T[3][3], double max_depth,
                           ts_hit *hit);

/* Barycentric coordinates bc of p in triangle T (p projected onto T's
 * plane), clamped into T: where a crossing point (ts_collide_mesh_pierce's
 * hit.point) shares a push among T's corners. Returns 1, or 0 for a
 * degenerate T (bc then 1/3 each). */
int ts_collide_barycentric(const double T[3][3], const double p[3], double bc[3]);

/* The triangle passes' pierce of a world triangle X (m) by a mesh tool
 * standing at rotation R (tool frame to world) and origin o (m): X is taken
 * into the tool's frame (R^T (x - o)) for ts_collide_mesh_pierce (max_depth
 * as there); on a pierce, hit->normal is turned back into world
 * coordinates (hit->point and hit->depth stay as the tool's frame has
 * them) and bc gets the crossing point's clamped barycentric coordinates
 * in X (ts_collide_barycentric). Returns 0 for no pierce, 1 for a pierce,
 * 2 for a pierce of a degenerate X (bc then 1/3 each). Reads the tree
 * only; no allocation. */
int ts_collide_mesh_pierce_posed(const ts_obb_tree *tool, const double R[3][3], const double o[3],
                                 const double X[3][3], double max_depth, ts_hit *hit,
                                 double bc[3]);

typedef struct ts_sweep_def {
  uint32_t max_substeps;  /* upper bound of the substeps (>= 1) */
  double travel_fraction; /* no tool point moves more than this fraction of the tool's
                             thickness per substep, (0, 1] */
} ts_sweep_def;

/* Defaults: at most 64 substeps, half the tool's thickness per substep. */
ts_sweep_def ts_default_sweep_def(void);

typedef struct ts_sweep_info {
  double toi;          /* fraction of the step of the returned contacts (1: none) */
  uint32_t substeps;   /* substeps the step was divided into */
  uint32_t tested;     /* substeps queried before contacts were found */
  double travel;       /* bound of the distance any tool point moved, m */
  uint32_t candidates; /* leaf pairs found by the one descent over the whole step
                          (0 when the step needed a single substep) */
} ts_sweep_info;

/* Continuous detection between two poses: the step from `from` to `to` is cut
 * into n substeps (ts_pose_lerp) with n the smallest count for which no tool
 * point moves more than travel_fraction * tool->tree->thickness per substep
 * (the travel bound is |dp| + rotation angle * reach, plus the jaws' own
 * motion), clamped to [1, max_substeps] (max_substeps when the thickness is
 * unknown). A tool thicker than the per-substep travel cannot pass through a
 * tissue sheet between two substeps, so a tool at 0.5 m/s with a 1 ms step
 * is caught. The trees are descended once, at the mid pose with every tool
 * box grown by half the travel bound; the leaf pairs found there are the
 * only ones tested exactly at the substeps (when they do not fit in buf,
 * each substep descends the trees instead: same result, more work).
 * Returns the contacts of the first substep s = k/n (k = 1..n)
 * that has any, with toi = s in every contact and in info; none when the
 * whole step is free (toi 1). The tool is left at the pose of the returned
 * substep (at `to` when nothing was found). def NULL means defaults.
 * Returns 0, TS_EFULL, TS_EINVAL, TS_ENAN or TS_EQUAT (bad poses). */
int ts_collide_sweep(ts_posed_tool *tool, const ts_pose *from, const ts_pose *to,
                     const ts_aabb_tree *tissue, const double (*x)[3], const ts_sweep_def *def,
                     ts_contacts *buf, ts_sweep_info *info);

#endif
