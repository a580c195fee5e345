/*
 * tl_link.h: one non-blocking connection of the load generator (tissueload)
 * to the daemon, carrying whole Envelopes either over TCP with the 4-byte
 * length prefix (proto/ts_framing.h) or over WebSocket at /ws on the HTTP
 * port, with a minimal RFC 6455 client: the HTTP Upgrade handshake (the
 * Sec-WebSocket-Accept answer is checked), masked binary frames out, binary
 * messages in (fragments reassembled, pings answered, close noted).
 *
 * tissueload's TCP load goes through libtissueclient; tl_link is for the
 * WebSocket clients and for the raw TCP connections that need the exact
 * bytes of each message (session set-up with layers, the stream recorder).
 * Loopback only: tl_link_open refuses any address outside 127.0.0.0/8 and
 * ::1. All calls are on one thread; nothing is global.
 */
#ifndef TL_LINK_H
#define TL_LINK_H

#include <stddef.h>
#include <stdint.h>

enum { TL_TCP = 1, TL_WS = 2 };

typedef struct tl_link tl_link;

/* Called for every whole message received; a non-zero return stops reading
 * and is returned by tl_link_read. */
typedef int (*tl_msg_cb)(void *ud, const uint8_t *msg, size_t len);

/* Connects (and for TL_WS does the handshake) within timeout_ms, then
 * switches the socket to non-blocking. NULL with a message in err. */
tl_link *tl_link_open(int transport, const char *host, int port, int timeout_ms, char *err,
                      size_t errcap);
void tl_link_close(tl_link *l);

int tl_link_fd(const tl_link *l);
int tl_link_transport(const tl_link *l);

/* Queues one Envelope (framed for the transport) and writes what the socket
 * takes now. Returns 0, or TS_EIO when the connection is gone, TS_EFULL when
 * more than 4 MiB are already queued. */
int tl_link_send(tl_link *l, const uint8_t *msg, size_t len);
/* Writes queued bytes; 0 or TS_EIO. */
int tl_link_flush(tl_link *l);
/* Bytes queued and not yet written. */
size_t tl_link_pending(const tl_link *l);

/* Reads what has arrived (at most max_bytes, 0 = 1 MiB) without blocking
 * and calls cb for every whole message. Returns the number of messages,
 * TS_EIO when the peer closed or the stream broke (a WebSocket close frame
 * counts), TS_EPROTOCOL/TS_ETOOBIG for bad framing, or cb's return value. */
int tl_link_read(tl_link *l, size_t max_bytes, tl_msg_cb cb, void *ud);

/* Bytes received in total (framing included). */
uint64_t tl_link_bytes_in(const tl_link *l);

#endif
