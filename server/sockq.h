/*
 * sockq.h: how many bytes a connected socket still holds in the kernel's
 * send queue (Linux SIOCOUTQ). On loopback the send buffer grows to
 * megabytes, so a reader that stopped reading is only seen as slow when this
 * queue is counted with the daemon's own output queue.
 */
#ifndef TS_SOCKQ_H
#define TS_SOCKQ_H

#include <stddef.h>
#include <uv.h>

/* Unsent bytes in the kernel for this stream's socket; 0 when unknown. */
size_t ts_socket_unsent(const uv_stream_t *stream);

#endif
