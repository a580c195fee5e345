/*
 * ts_handover_internal.h: what the files of a live refinement's hand-over
 * share (not a public interface; ts_handover.h is): the map of the two
 * networks' topologies, a tool placed as a tree, and the functions each
 * file gives the others. The hand-over is split by concept:
 *   ts_handover.c          its terms made (the carried accelerations, the
 *                          node forces, the rest lengths, the allowances),
 *                          renewed at an install, copied, faded;
 *   ts_handover_law.c      the spring law it reads (tension, its inverse);
 *   ts_handover_map.c      the map of the unrefined -> refined topologies;
 *   ts_handover_tools.c    the tools: placed trees, depth inside them;
 *   ts_handover_fit.c      the fit of the rest lengths to XPBD's step;
 *   ts_handover_region.c   the region and the sub-tissue the fit steps;
 *   ts_handover_install.c  the plan at an XPBD session's install.
 */
#ifndef TS_HANDOVER_INTERNAL_H
#define TS_HANDOVER_INTERNAL_H

#include <stdint.h>

#include "ts_handover.h"
#include "ts_obb_tree.h"
#include "ts_tissue.h"
#include "ts_tool.h"

/* What ts_handover_create finds of the two networks' topologies (see
 * ts_handover.h, "Local"): the state-free part of a hand-over, kept for
 * ts_handover_renew. */
struct ts_handover_map {
  uint32_t n0, n, ns0, ns; /* old's and nt's nodes and springs */
  uint32_t *from;          /* per spring of nt: old's spring whose tension it
                              takes (itself, or its parent edge), or UINT32_MAX */
  uint8_t *same;           /* per spring of nt: 1 when it is old's spring
                              from[j] unchanged (ends, constants, rest length) */
  uint8_t *touched;        /* per node of nt: 1 when the refinement touched it */
  uint32_t *nodes;         /* the touched nodes, ascending */
  uint32_t n_nodes, n_old_nodes; /* how many; how many of them are old's (a prefix) */
  uint32_t *old_springs, n_old_springs; /* old's springs with a touched end, ascending */
  uint32_t *new_springs, n_new_springs; /* nt's springs with a touched end, ascending */
  /* XPBD's fit (ts_handover_fit_xpbd), made by the first fit that uses the
     map and reused by the next ones (a chase's rounds, a fit at the
     install: same networks, another state): the sweep orders of old's and
     nt's springs (sweep_order; most of a fit's setup, 20 ms of its 28 on
     the liver, measured) and the trials' region for FIT_RING and for
     FIT_QUICK_RING (ts__handover_fit_region: role per node of nt and the stepped count;
     NULL until made) */
  uint32_t *ord_old, *ord_new;
  uint8_t *role[2];
  int64_t moving[2];
  /* create_mapped's scratch (ts_handover.c: three rows a node of nt, read
     and written at the touched nodes only), made with the map and its
     touched rows written once there, so that a renewal at an install does
     not meet them first on the physics thread (NULL: none could be had;
     create_mapped then allocates its own) */
  double (*scratch)[3];
};

/* A tool placed at its pose as a tree (ts_obb_tree.h): the signed
 * distance of the kinds with no closed form here (meshes, jaws) and the
 * trial steps' tree-based contact. The tree is the mesh tool's own or one
 * built here from the tool's sizes (as server/session_contact.c builds
 * it). */
typedef struct ts__placed_tool {
  ts_obb_tree *own; /* built here; NULL for a mesh tool's */
  ts_posed_tool pt;
  int ok;           /* placed */
} ts__placed_tool;

/* ---- the spring law (ts_handover_law.c) ---- */

/* The elastic tension of spring sp at length l with rest length L0 (the law
 * of ts_ms_forces.c without the damper), N. */
double ts__handover_tension(const ts_spring *sp, double l, double L0);

/* The rest length that gives spring sp the tension T at length l. */
double ts__handover_rest_for(const ts_spring *sp, double l, double T);

/* Spring sp's length in t. */
double ts__handover_spring_length(const ts_tissue *t, const ts_spring *sp);

/* The rest length spring j of t has in the steps at weight w: its own, or
 * the hand-over's blended towards it (XPBD's view, ts_xpbd_step.c). */
double ts__handover_rest_at(const ts_tissue *t, uint32_t j, const double *hrest, double w);

/* The elastic spring forces plus gravity on t's nodes nodes[0..nn) (mark[i]
 * set for exactly those) at their current positions, from t's springs
 * springs[0..ns) (every spring of t with a marked end, ascending: each
 * marked node sums its springs in the order of a pass over all of them),
 * their rest lengths blended with hrest at weight w (NULL: their own), plus
 * w times the node forces hf (NULL: none). f (t->n_nodes) is written at the
 * marked nodes only. */
void ts__handover_node_forces(const ts_tissue *t, const uint32_t *nodes, uint32_t nn, const uint8_t *mark,
                              const uint32_t *springs, uint32_t ns, const double *hrest, const double (*hf)[3],
                              double w, double (*f)[3]);

/* ---- the map (ts_handover_map.c) ---- */

/* The map of old -> nt (ts_handover_create's checks done). Returns 0 and
 * *out, or TS_ENOMEM. */
int ts__handover_map_build(const ts_tissue *old, const ts_tissue *nt, const uint32_t (*parents)[2],
                           ts_handover_map **out);
void ts__handover_map_free(ts_handover_map *m);

/* 1 when m was made for networks of old's and nt's sizes. */
int ts__handover_map_fits(const ts_handover_map *m, const ts_tissue *old, const ts_tissue *nt);

/* ---- the tools (ts_handover_tools.c) ---- */

/* Places tool tl. Returns 0, TS_EINVAL (a mesh tool without its tree), or
 * an error of the tree's builders (p then unset). */
int ts__handover_placed_make(const ts_tool *tl, ts__placed_tool *p);
void ts__handover_placed_free(ts__placed_tool *p);

/* The active tools of a hand-over: the meshes and jaws placed (placed[k]
 * for tool k; primitives need none). Returns 0 or a placing error (every
 * placed one freed). */
int ts__handover_place_all(const ts_tool *tools, int n_tools, ts__placed_tool *placed);

/* How deep x is inside the active tools (the deepest), m (negative:
 * outside); n (may be NULL) gets that tool's outward normal at x, band
 * (may be NULL) its contact band (m). */
double ts__handover_tool_depth(const ts_tool *tools, int n_tools, const ts__placed_tool *placed, const double x[3],
                               double n[3], double *band);

/* ---- the fit's region (ts_handover_region.c) ---- */

/* The trials' region: role[i] for each node of nt (1 stepped, 2 held, 0
 * left out); returns the stepped count, 0 for the whole tissue, -1 for out
 * of memory. */
int64_t ts__handover_fit_region(const ts_tissue *old, const ts_tissue *nt, uint8_t *role, uint32_t ring);

/* The part of t on the region role, its springs in XPBD's sweep order of
 * the whole t (ord_made, or made when NULL). Returns 0 or TS_ENOMEM. */
int ts__handover_sub_tissue(const ts_tissue *t, const uint8_t *role, const uint32_t *ord_made, ts_tissue **out,
                            uint32_t **node_of, uint32_t **spring_of, uint32_t *loc);

/* t's sweep order kept in *slot, made on first use; NULL for out of
 * memory. */
const uint32_t *ts__handover_kept_order(const ts_tissue *t, uint32_t **slot);

/* ---- ts_handover.c ---- */

/* A copy of a hand-over (its arrays too), or NULL for h NULL or out of
 * memory (*rc TS_ENOMEM then). */
ts_handover *ts__handover_copy(const ts_handover *h, uint32_t n, uint32_t ns, int *rc);

#endif
