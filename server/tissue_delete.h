/*
 * tissue_delete.h: the DeleteTissue request: a stored upload deleted by
 * name (storage: ts_storage_delete_mesh_tissue) on the storage worker
 * (worker.h), refused on the loop while a session of it runs; the Ack or
 * Error goes to the requesting connection if it is still there when the
 * job is done.
 */
#ifndef TS_TISSUE_DELETE_H
#define TS_TISSUE_DELETE_H

#include <stdint.h>

#include "conn.h"

struct Tissued__V1__DeleteTissue;
void ts_request_delete_tissue(ts_conn *c, uint64_t rid, const struct Tissued__V1__DeleteTissue *m);

#endif
