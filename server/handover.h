/*
 * handover.h: an instructor hands a tool from one participant to another
 * (issue 9, HandOverTool in proto/tissue.proto).
 */
#ifndef TS_HANDOVER_H
#define TS_HANDOVER_H

#include <stdint.h>

#include "conn.h"
#include "tissue.pb-c.h"

/* HandOverTool from c (loop thread). Needs the server key (TS_EAUTH). The
 * session (TS_ENOSESSION) and the tool, 1..max-tools (TS_ETOOL), must
 * exist. The tool's controller token is replaced by a fresh 128-bit one, so
 * the old token no longer opens the tool; the client driving the tool, if
 * any, becomes an observer of the session (its poses are then refused with
 * TS_EROLE), the tool is released and parked, and that client gets a
 * ToolHandedOver without a token. c gets ToolHandedOver with the new token
 * (request id echoed). No randomness from the kernel: TS_EIO, nothing
 * changed. */
void ts_handover_tool(ts_conn *c, uint64_t rid, const Tissued__V1__HandOverTool *m);

#endif
