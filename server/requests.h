/*
 * requests.h: the protocol requests that need SQLite or slow set-up and so
 * run as jobs on the background worker (worker.h): creating a session (its
 * materials resolved from the stored fits, its tissue built: the built-in
 * patch, an uploaded mesh stored by hash, or a stored mesh tissue), listing and
 * fitting materials. The reply goes to the requesting connection if it is
 * still there when the job is done.
 */
#ifndef TS_REQUESTS_H
#define TS_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "core/ts_tissue.h"
#include "session.h"
#include "tissue.pb-c.h"

/* sv: the solver (Tissued__V1__Solver) and its XPBD settings, checked. def's layers name the layers; material[i] names the fit of layer i ("" =
 * "default"). The session is registered and SessionCreated sent when built. */
void ts_request_create_session(ts_conn *c, uint64_t rid, const char *name,
                               const ts_patch_def *def, char material[][64], double dt,
                               const ts_solver_opts *sv);

/* Mesh upload (CreateSession.mesh), already checked by the caller against
 * the configured limits: format is TS_MESH_OBJ/STL/PLY (ts_mesh_io.h), scale
 * > 0 takes file units to metres. On the worker: SHA-256 of the bytes,
 * import (parse, repair what is safe, refuse the rest), recentre, extrude
 * into def's layers, build the tissue and anchor it (requests.c says how),
 * store the bytes once by hash and the tissue under tissue_name ("" = "mesh-"
 * and the first 12 hex digits of the hash), then create the session. Every
 * failure is an Error with a code from ts_error.h and nothing is stored. */
void ts_request_create_mesh_session(ts_conn *c, uint64_t rid, const char *name,
                                    const char *tissue_name, int format, const uint8_t *data,
                                    size_t len, double scale, const ts_patch_def *def,
                                    char material[][64], double dt,
                                    const ts_solver_opts *sv);

/* CreateSession.builtin naming a stored mesh tissue: rebuilt from its stored
 * bytes and layer spec. An unknown name is TS_ENOTISSUE with the known names
 * in the message. */
void ts_request_create_stored_session(ts_conn *c, uint64_t rid, const char *name,
                                      const char *tissue_name, double dt,
                                      const ts_solver_opts *sv);

void ts_request_list_materials(ts_conn *c, uint64_t rid, const char *tissue);

void ts_request_fit_material(ts_conn *c, uint64_t rid, const Tissued__V1__FitMaterial *m);

#endif
