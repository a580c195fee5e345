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

typedef struct ts_session_self {
  ts_self_contact sc;
  ts_aabb_tree *tree;        /* over `tissue`'s contact surface */
  const ts_tissue *tissue;   /* the tissue the tree was built for */
  uint32_t n_nodes;          /* and its node count then */
  uint32_t contacts;         /* pairs in the last step (XPBD: its last substep) */
  uint64_t steps_touching;   /* steps with any pair */
} ts_session_self;

/* Allocates the workspace (defaults of ts_self_contact.h) and the tree for
 * t. Returns 0 or a negative ts_errno (*out NULL then). */
int ts_session_self_create(const ts_tissue *t, ts_session_self **out);
void ts_session_self_destroy(ts_session_self *ss);

/* Before a step on tissue t: the tree rebuilt when t is not the tissue it
 * was made for (a refinement's install; the only allocation), and XPBD's
 * solver x (may be NULL) pointed at it. Returns 0 or a negative ts_errno
 * (the pass is then skipped this step; the session goes on). */
int ts_session_self_prepare(ts_session_self *ss, ts_tissue *t, struct ts_xpbd *x);

/* After a successful step: mass-spring (xpbd_pairs < 0) detects and
 * settles here; XPBD passes its stats' self_contacts. */
void ts_session_self_after(ts_session_self *ss, ts_tissue *t, int xpbd_pairs);

#endif
