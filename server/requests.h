/*
 * requests.h: the protocol requests that need SQLite or slow set-up and so
 * run as jobs on the background worker (worker.h): creating a session (its
 * materials resolved from the stored fits, its tissue built), listing and
 * fitting materials. The reply goes to the requesting connection if it is
 * still there when the job is done.
 */
#ifndef TS_REQUESTS_H
#define TS_REQUESTS_H

#include <stdint.h>

#include "conn.h"
#include "core/ts_tissue.h"
#include "tissue.pb-c.h"

/* solver: Tissued__V1__Solver (mass-spring or XPBD). def's layers name the layers; material[i] names the fit of layer i ("" =
 * "default"). The session is registered and SessionCreated sent when built. */
void ts_request_create_session(ts_conn *c, uint64_t rid, const char *name,
                               const ts_patch_def *def, char material[][64], double dt,
                               int solver);

void ts_request_list_materials(ts_conn *c, uint64_t rid, const char *tissue);

void ts_request_fit_material(ts_conn *c, uint64_t rid, const Tissued__V1__FitMaterial *m);

#endif
