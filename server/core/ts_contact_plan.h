/*
 * ts_contact_plan.h: what ts_contact.c takes from its plan file
 * (ts_contact_plan.c; not a public interface): the sweep's travel bound,
 * shared by both, and a begin's candidate triangles from the plan.
 */
#ifndef TS_CONTACT_PLAN_H
#define TS_CONTACT_PLAN_H

#include "ts_contact.h"

/* Bound of the distance any tool point moves from pose a to b (m). */
double ts__contact_travel(const ts_obb_tree *tr, const ts_pose *a, const ts_pose *b);

/* For a begin whose tool stands at its mid pose with its boxes grown by
 * grow (m), against tree: when the plan holds it, its candidate triangles
 * (those the walk gives, in its order) into ws->tri_buf, their count
 * (may exceed tri_cap) in *nt, and 1; else 0 (the caller walks). */
int ts__contact_planned(ts_contact_ws *ws, ts_posed_tool *tool, const ts_aabb_tree *tree,
                        double grow, uint32_t *nt);

#endif
