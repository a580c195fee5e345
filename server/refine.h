/*
 * refine.h: RefineRegion in a running session (issue 4): the request's
 * checks on the loop thread; a snapshot on the physics thread between two
 * steps, refined on the server's refinement thread while the session steps
 * on, and installed on the physics thread between two later steps with the
 * tissue's state of then (core/ts_refine.h carries the state over); the new
 * topology and the Refined reply back on the loop thread, before the first
 * frame of the refined tissue, so every client's next frame is a keyframe of
 * the new topology.
 */
#ifndef TS_REFINE_SERVER_H
#define TS_REFINE_SERVER_H

#include <stdint.h>

#include "session.h"
#include "tissue.pb-c.h"

/* Loop thread: a client's RefineRegion. Answers errors at once; otherwise
 * hands the request to the session's physics thread (the reply follows as
 * Refined or Error). */
void ts_refine_request(ts_conn *c, uint64_t rid, const Tissued__V1__RefineRegion *m);

/* Physics thread, between two steps: takes the snapshot of a new request
 * and hands it to the refinement thread, or installs a refined one (then
 * posts the TS_EV_REFINED event; a failure is posted as one too). */
void ts_refine_physics(ts_session *se);

/* Loop thread: the TS_EV_REFINED event (payload from ts_refine_physics):
 * installs the new topology, resets the clients' delta bases, replies.
 * Frees the payload. */
void ts_refine_on_event(ts_server *s, ts_session *se, void *payload);

/* Loop thread, when the physics thread has given a session up: answers a
 * RefineRegion still in its mailbox (not yet taken, or refined and not yet
 * installed) with TS_ENOSESSION and frees it. One on the refinement thread
 * is answered when it comes back. */
void ts_refine_session_ended(ts_server *s, ts_session *se);

/* Frees a request left in a session's mailbox. */
struct ts_refine_req;
void ts_refine_req_free(struct ts_refine_req *q);

/* Frees an undelivered TS_EV_REFINED payload (shutdown). */
void ts_refine_event_free(void *payload);

#endif
