/*
 * requests.h: the material requests, which need SQLite and so run as jobs
 * on the storage worker (worker.h): listing and fitting materials. The
 * reply goes to the requesting connection if it is still there when the
 * job is done. (Creating a session: create.h.)
 */
#ifndef TS_REQUESTS_H
#define TS_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "core/ts_tissue.h"
#include "session.h"
#include "tissue.pb-c.h"

void ts_request_list_materials(ts_conn *c, uint64_t rid, const char *tissue);

void ts_request_fit_material(ts_conn *c, uint64_t rid, const Tissued__V1__FitMaterial *m);

#endif
