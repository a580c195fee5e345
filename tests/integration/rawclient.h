/*
 * rawclient.h: a deliberately small protocol client for the fault tests
 * (itest_faults.c, itest_shutdown.c, tests/soak/): plain blocking sockets,
 * TCP with 4-byte length prefixes or a WebSocket it upgrades itself (masked
 * frames, RFC 6455), so that a test can also misbehave on purpose: send half
 * a message, stay silent, ignore pings. Every Hello carries the test server
 * key (RC_SERVER_KEY), which daemon_proc starts every daemon with.
 * Every wait is bounded by a timeout in milliseconds.
 */
#ifndef TS_RAWCLIENT_H
#define TS_RAWCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon_proc.h"
#include "tissue.pb-c.h"

#define RC_SERVER_KEY TS_DPROC_KEY

typedef struct rc_conn {
  int fd;           /* -1 when not connected */
  int ws;           /* 1: WebSocket framing, 0: TCP length prefixes */
  int auto_pong;    /* WebSocket: answer pings (default 1) */
  int eof;          /* the server closed the socket (EOF or reset) */
  int close_code;   /* WebSocket close code received, 0 = none */
  int pings;        /* WebSocket pings received */
  uint8_t *in;      /* bytes read; those from in_off on are not yet consumed */
  size_t in_off, in_len, in_cap;
  uint64_t next_rid;
} rc_conn;

/* Connects to 127.0.0.1:port (TCP protocol port), or upgrades /ws on the
 * HTTP port. 0 or -1. */
int rc_tcp(rc_conn *c, int port);
int rc_ws(rc_conn *c, int port);
void rc_close(rc_conn *c);

/* Writes bytes as they are (no framing). 0 or -1. */
int rc_send_raw(rc_conn *c, const void *p, size_t n);
/* One Envelope in the connection's framing (TCP: length prefix + body;
 * WebSocket: one masked binary frame), malloc'd, its size in *len; NULL on
 * out of memory. A test may send only part of it. */
uint8_t *rc_encode(rc_conn *c, Tissued__V1__Envelope *env, size_t *len);
/* Sends one whole Envelope. 0 or -1. */
int rc_send(rc_conn *c, Tissued__V1__Envelope *env);

/* The next Envelope (free with tissued__v1__envelope__free_unpacked), or
 * NULL after timeout_ms or when the connection ended (c->eof / c->close_code
 * tell which). WebSocket control frames are handled on the way. */
Tissued__V1__Envelope *rc_recv(rc_conn *c, int timeout_ms);

/* Reads and discards until the connection ends; 1 if it did within
 * timeout_ms, else 0. Counts Error envelopes with code `code` into *seen
 * (may be NULL). */
int rc_wait_closed(rc_conn *c, int timeout_ms, int code, int *seen);

/* Request helpers: send, then wait up to timeout_ms for the reply with the
 * same request id (other envelopes are skipped). Return 0, a negative
 * ts_errno from an Error reply, or -1000 on timeout / closed. */
int rc_hello(rc_conn *c, int timeout_ms);
/* CreateSession of the built-in patch; dt 0 = server default. */
int rc_create(rc_conn *c, int solver, double dt, uint32_t *session_id, int timeout_ms);
/* Sends a CreateSession of an uploaded OBJ (the daemon's default layers)
 * with request id rid and does not wait: the caller reads the reply, or
 * closes. name may be NULL (the daemon names it); self_contact asks for
 * tissue self-contact. 0 or -1. */
int rc_send_obj_upload(rc_conn *c, uint64_t rid, const char *name, const uint8_t *obj, size_t len,
                       float scale, int solver, int self_contact);
/* JoinSession; controllers get a sphere of `radius` m, *tool_id its id
 * (may be NULL); frame_rate 0 = default. */
int rc_join(rc_conn *c, uint32_t session_id, int controller, double radius,
            uint32_t frame_rate, uint32_t *tool_id, int timeout_ms);
/* EndSession (joined controller or server key); waits for the Ack. */
int rc_end(rc_conn *c, uint32_t session_id, int timeout_ms);
/* ToolPose (no reply). 0 or -1. */
int rc_pose(rc_conn *c, uint32_t tool_id, double x, double y, double z);

/* Resident set size of a process in KiB (/proc/PID/status VmRSS), or -1. */
long rc_rss_kib(int pid);

#endif
