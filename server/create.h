/*
 * create.h: creating a session (CreateSession): its materials resolved from
 * the stored fits, its tissue built (the built-in patch, an uploaded mesh
 * stored by hash, or a stored mesh tissue), its solver set up, then
 * registered with the physics and announced by SessionCreated to the
 * connection that asked, if it is still there (create.c says on which
 * threads). With `progress` set (CreateSession.progress) that connection
 * also gets CreateProgress reports while it lasts (create_progress.h).
 */
#ifndef TS_CREATE_H
#define TS_CREATE_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "core/ts_tissue.h"
#include "session.h"

/* sv: the solver (Tissued__V1__Solver) and its settings, checked. def's
 * layers name the layers; material[i] names the fit of layer i ("" =
 * "default"). */
void ts_request_create_session(ts_conn *c, uint64_t rid, const char *name,
                               const ts_patch_def *def, char material[][64], double dt,
                               const ts_solver_opts *sv, int progress);

/* Mesh upload (CreateSession.mesh), already checked by the caller against
 * the configured limits: format is TS_MESH_OBJ/STL/PLY (ts_mesh_io.h), scale
 * > 0 takes file units to metres. SHA-256 of the bytes, import (parse,
 * repair what is safe, refuse the rest), recentre, extrude into def's
 * layers, build the tissue and anchor it (core/ts_mesh_tissue.h), store the
 * bytes once by hash and the tissue under tissue_name ("" = "mesh-" and the
 * first 12 hex digits of the hash), then start the session. Every failure
 * is an Error with a code from ts_error.h and nothing is stored. */
void ts_request_create_mesh_session(ts_conn *c, uint64_t rid, const char *name,
                                    const char *tissue_name, int format, const uint8_t *data,
                                    size_t len, double scale, const ts_patch_def *def,
                                    char material[][64], double dt,
                                    const ts_solver_opts *sv, int progress);

/* CreateSession.builtin naming a stored mesh tissue: rebuilt from its stored
 * bytes and layer spec. An unknown name is TS_ENOTISSUE with the known names
 * in the message. */
void ts_request_create_stored_session(ts_conn *c, uint64_t rid, const char *name,
                                      const char *tissue_name, double dt,
                                      const ts_solver_opts *sv, int progress);

#endif
