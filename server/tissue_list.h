/*
 * tissue_list.h: the ListTissues request: the tissues a session can be
 * created of (the built-in patch and the stored uploads), read from SQLite
 * on the storage worker (worker.h); the reply goes to the requesting
 * connection if it is still there when the job is done.
 */
#ifndef TS_TISSUE_LIST_H
#define TS_TISSUE_LIST_H

#include <stdint.h>

#include "conn.h"

void ts_request_list_tissues(ts_conn *c, uint64_t rid);

#endif
