/*
 * session_self.h: a session's tissue self-contact (core/ts_self_contact.h),
 * where CreateSession.self_contact enabled it: its workspace and its own
 * AABB tree over the contact surface, kept for the session's current
 * tissue (rebuilt when a refinement replaced it), and the pass around each
 * physics step: XPBD projects the contacts in its sweeps
 * (ts_xpbd_set_self_contact), mass-spring after the step with velocities
 * kept consistent (ts_self_contact_settle). Quasi-static sessions (a solve
 * of a press, not a motion) do not run it.
 */
#ifndef TS_SESSION_SELF_H
#define TS_SESSION_SELF_H

#include <stdint.h>

#include "core/ts_aabb_tree.h"
#include "core/ts_self_contact.h"
#include "core/ts_tissue.h"

struct ts_xpbd; /* core/ts_xpbd.h */

/* The daemon's --self-contact-max-nodes default. The rule: the detection
 * (the tree walk) of a tissue without a fold may take about a quarter of a
 * 1 kHz session's 1 ms step on one core, so that a physics thread hosting
 * several sessions keeps its rate when one of them asks for self-contact.
 * Measured (tests/bench/run --quick self, load 11-12 on 2 cores, CPU time,
 * the standard path's dented states): 45-55 ns a surface node on the
 * patches (patch-S 5,392 nodes 0.24 ms, patch-L 40,882 2.2 ms), so about
 * 5,500 nodes; 6000 admits patch-S and the liver (4,388 nodes, 0.81 ms: its
 * larger triangles cost more per node) and refuses patch-L. Folded, the
 * walk prunes little (patch-S 9.9 ms, patch-L 150 ms a step). */
#define TS_SELF_CONTACT_MAX_NODES_DEFAULT 6000

typedef struct ts_session_self {
  ts_self_contact sc;
  ts_aabb_tree *tree;        /* over `tissue`'s contact surface; NULL while over the limit */
  const ts_tissue *tissue;   /* the tissue the tree was built for */
  uint32_t n_nodes;          /* and its node count then */
  uint32_t max_nodes;        /* the daemon's --self-contact-max-nodes */
  uint32_t surface_nodes;    /* the contact surface's nodes of `tissue` */
  int over_limit;            /* `tissue` (a refinement's) has more than max_nodes */
  uint32_t contacts;         /* pairs in the last step (XPBD: its last substep) */
  uint64_t steps_touching;   /* steps with any pair */
  uint64_t steps_over_limit; /* steps the pass was skipped for over_limit */
} ts_session_self;

/* The contact surface's node count of t (the nodes some contact triangle
 * uses): the size the limit compares. Returns 0 when t has none (or on
 * out of memory: then the tree's build fails as well). */
uint32_t ts_session_self_surface_nodes(const ts_tissue *t);

/* Allocates the workspace (defaults of ts_self_contact.h) and the tree for
 * t. The detection's cost grows with the contact surface's nodes (the tree
 * walk, ts_aabb_self.h), and the physics thread it runs on hosts other
 * sessions too: a tissue with more than max_nodes surface nodes is refused
 * with TS_ETOOBIG (*surface_nodes says how many it has; may be NULL).
 * Returns 0 or a negative ts_errno (*out NULL then). */
int ts_session_self_create(const ts_tissue *t, uint32_t max_nodes, ts_session_self **out,
                           uint32_t *surface_nodes);
void ts_session_self_destroy(ts_session_self *ss);

/* Before a step on tissue t: the tree rebuilt when t is not the tissue it
 * was made for (a refinement's install; the only allocation), and XPBD's
 * solver x (may be NULL) pointed at it. A refinement that takes the
 * surface past max_nodes turns the pass off for that tissue (logged once,
 * steps_over_limit counts the steps; a later tissue within the limit turns
 * it on again): TS_ETOOBIG then. Returns 0 or a negative ts_errno (the
 * pass is then skipped this step; the session goes on). */
int ts_session_self_prepare(ts_session_self *ss, ts_tissue *t, struct ts_xpbd *x);

/* After a successful step: mass-spring (xpbd_pairs < 0) detects and
 * settles here; XPBD passes its stats' self_contacts. */
void ts_session_self_after(ts_session_self *ss, ts_tissue *t, int xpbd_pairs);

#endif
