/*
 * ws.h: the WebSocket opening handshake (RFC 6455 section 4.2) as pure
 * functions: validating an upgrade request and computing
 * Sec-WebSocket-Accept. The transport that follows a successful handshake
 * (wslay framing over libuv, exposed as a ts_conn) lives in ws.c and is
 * reached through net_internal.h.
 */
#ifndef TS_WS_H
#define TS_WS_H

#include <stddef.h>

#define TS_WS_ACCEPT_LEN 28 /* base64 of a 20-byte SHA-1 */

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64(SHA-1(key +
 * "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")). out gets 28 characters and a NUL.
 * Returns 0 or TS_EINVAL (no key) / TS_EINTERNAL (libcrypto failed). */
int ts_ws_accept_key(const char *key, char out[TS_WS_ACCEPT_LEN + 1]);

/* 1 when key is the base64 encoding of exactly 16 bytes, else 0. */
int ts_ws_key_valid(const char *key);

/* 1 when the comma-separated header value list contains token (compared
 * without case, surrounding spaces ignored), else 0. NULL list: 0. */
int ts_ws_list_has_token(const char *list, const char *token);

/* Checks an upgrade request. The strings are the header values (NULL when
 * absent; repeated headers joined by ", "). Returns NULL when the request is
 * a valid WebSocket upgrade, else a short reason for a 400 response. */
const char *ts_ws_check_upgrade(int is_get, int http_1_1_or_later,
                                const char *upgrade, const char *connection,
                                const char *version, const char *key);

#endif
