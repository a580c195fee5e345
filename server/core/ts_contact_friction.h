/*
 * ts_contact_friction.h: what ts_contact.c takes from its friction file
 * (ts_contact_friction.c; not a public interface): the sticking anchors'
 * hand-over from one ts_contact_begin to the next, and the friction of one
 * vertex in a projection.
 */
#ifndef TS_CONTACT_FRICTION_H
#define TS_CONTACT_FRICTION_H

#include "ts_contact.h"

/* Called by ts_contact_begin before it replaces the candidates: the
 * candidates that still stick (keep) carry their anchors to the new ones. */
void ts__friction_carry(ts_contact_ws *ws);

/* For a new candidate v: whether it still has its anchor. */
void ts__friction_take(const ts_contact_ws *ws, ts_contact_vertex *v);

/* Friction of vertex v at y (already outside the tool), y0 its position at
 * the start of the step: moves y tangentially towards its anchor within the
 * cone and returns the correction made (m). */
double ts__friction(ts_contact_ws *ws, ts_contact_vertex *v, double y[3], const double y0[3]);

#endif
