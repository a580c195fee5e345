/*
 * session_self.h: a session's tissue self-contact (core/ts_self_contact.h),
 * where CreateSession.self_contact enabled it: its workspace and its own
 * AABB tree over the contact surface, kept for the session's current
 * tissue (a refinement's built on the refinement thread and handed over at
 * its install, or the pass turned off for it), and the pass around each
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

/* Whether the pass runs for the session's current tissue (SessionInfo's
 * self_contact and self_contact_off). */
typedef enum ts_self_state {
  TS_SELF_ON = 0,         /* it runs */
  TS_SELF_OVER_LIMIT = 1, /* the tissue (a refinement's) has more than max_nodes surface nodes */
  TS_SELF_FAILED = 2,     /* it could not be set up for the tissue (out of memory) */
} ts_self_state;

typedef struct ts_session_self {
  ts_self_contact sc;
  ts_aabb_tree *tree;        /* over `tissue`'s contact surface; NULL while off */
  const ts_tissue *tissue;   /* the tissue the pass was set up (or turned off) for */
  uint32_t n_nodes;          /* and its node count then */
  uint32_t max_nodes;        /* the daemon's --self-contact-max-nodes */
  uint32_t surface_nodes;    /* the contact surface's nodes of `tissue` */
  ts_self_state state;       /* for `tissue` */
  uint32_t contacts;         /* pairs in the last step (XPBD: its last substep) */
  uint64_t steps_touching;   /* steps with any pair */
  uint64_t steps_over_limit; /* steps the pass was skipped for TS_SELF_OVER_LIMIT */
  uint64_t failures;         /* tissues it could not be set up for (TS_SELF_FAILED) */
} ts_session_self;

/* The contact surface's node count of t (the nodes some contact triangle
 * uses), the size the limit compares, into *n (0 when t has none). 0 or
 * TS_ENOMEM (its mark array). */
int ts_session_self_surface_nodes(const ts_tissue *t, uint32_t *n);

/* Allocates the workspace (defaults of ts_self_contact.h) and the tree for
 * t. The detection's cost grows with the contact surface's nodes (the tree
 * walk, ts_aabb_self.h), and the physics thread it runs on hosts other
 * sessions too: a tissue with more than max_nodes surface nodes is refused
 * with TS_ETOOBIG (*surface_nodes says how many it has; may be NULL).
 * Returns 0 or a negative ts_errno (*out NULL then). */
int ts_session_self_create(const ts_tissue *t, uint32_t max_nodes, ts_session_self **out,
                           uint32_t *surface_nodes);
void ts_session_self_destroy(ts_session_self *ss);

/* A refinement's part, on the refinement thread (which builds the new
 * tissue t anyway; refine.c): t's surface nodes counted into *surface_nodes
 * and, within max_nodes, its tree built into *tree (NULL over the limit).
 * 0 or a negative ts_errno (the refinement then fails: nothing was
 * installed, the session goes on with its tissue). */
int ts_session_self_build(const ts_tissue *t, uint32_t max_nodes, ts_aabb_tree **tree,
                          uint32_t *surface_nodes);

/* Physics thread, at a refinement's install: the pass moves to the new
 * tissue t with what ts_session_self_build made (takes tree; NULL: over the
 * limit). Over the limit, or when the workspace cannot take the tree (out
 * of memory), the pass is off for t (logged once, `failures` counts the
 * latter); a later tissue within the limit turns it on again (logged). No
 * allocation but the workspace's growth. XPBD's solver x (may be NULL) is
 * detached from the old tree. */
void ts_session_self_install(ts_session_self *ss, const ts_tissue *t, ts_aabb_tree *tree,
                             uint32_t surface_nodes, struct ts_xpbd *x);

/* Before a step on tissue t: XPBD's solver x (may be NULL) pointed at the
 * tree. Returns 0, or TS_ETOOBIG (steps_over_limit counts the step) or
 * TS_ENOMEM while the pass is off for t (then skipped, x detached; the
 * session goes on). A tissue the pass was not installed for (never: a
 * refinement installs it) turns it off as TS_SELF_FAILED. */
int ts_session_self_prepare(ts_session_self *ss, ts_tissue *t, struct ts_xpbd *x);

/* After a successful step: mass-spring (xpbd_pairs < 0) detects and
 * settles here; XPBD passes its stats' self_contacts. */
void ts_session_self_after(ts_session_self *ss, ts_tissue *t, int xpbd_pairs);

#endif
