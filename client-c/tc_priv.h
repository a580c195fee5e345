/*
 * tc_priv.h: libtissueclient's own header, shared by its files and by no one
 * else: the client's state (struct tc_client) and the helpers its parts call
 * in one another (tissueclient.c: sending, receiving, requests; tc_frames.c:
 * the decoded tissue; tc_connect.c; tc_sessions.c; tc_models.c).
 */
#ifndef TC_PRIV_H
#define TC_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "ts_codec.h"
#include "ts_framing.h"

typedef Tissued__V1__Envelope Envelope;

#define TC_MAX_MESSAGE (64u << 20)  /* largest message accepted from a server */
#define TC_READ_CHUNK 65536
#define TC_MAX_READS_PER_POLL 64    /* bounds one tc_poll under a flood */
#define TC_DEFAULT_TIMEOUT_MS 10000

struct tc_client {
  int fd;
  char tool_meshes[TC_MAX_TOOL_MESHES][32]; /* HelloReply.tool_meshes */
  uint32_t n_tool_meshes;
  ts_framer framer;
  int broken;                 /* closed by the peer or unusable */
  int in_dispatch;            /* inside a callback: no re-entry */
  int timeout_ms;
  uint64_t next_rid;
  uint64_t pose_seq;
  uint64_t client_id;
  char err[512];
  char said[512];             /* an Error the server sent unasked (request id 0) as its
                                 last message: named when the connection then closes */
  tc_tokens tokens;           /* of the last session created */
  int have_tokens;
  tc_mesh_adjust adjust;      /* of the last session created (have_tokens) */
  double step_load;           /* and its SessionCreated.step_load */

  tc_force_cb force_cb;
  void *force_ud;
  tc_force force;             /* the newest force message */
  int have_force;
  tc_frame_cb frame_cb;
  void *frame_ud;
  tc_error_cb error_cb;
  void *error_ud;
  tc_progress_cb progress_cb;
  void *progress_ud;
  tc_create_progress_cb create_cb;
  void *create_ud;
  int64_t wait_deadline_ms;   /* the waiting request's deadline (a CreateProgress renews it) */
  uint64_t train_rid;         /* the last acknowledged TrainShortcut's id, 0 = none */
  int train_waiting;          /* a TrainShortcut waits for its reply */
  int train_acked;            /* and it was acknowledged: its reports follow */

  uint64_t wait_rid;          /* request awaiting its reply, 0 = none */
  Envelope *reply;            /* its reply once arrived */
  int pending_err;            /* decode/protocol problem seen while dispatching */

  /* the decoded tissue */
  int have_state;
  int desync;                 /* a frame could not be applied; wait for a keyframe */
  uint64_t last_seq;
  uint32_t n;
  size_t cap;                 /* vertices allocated */
  int32_t (*q)[3];
  int32_t (*scratch)[3];      /* keyframes decode here, then swap */
  double (*pos)[3];
  double quantum;
  uint32_t topo_vertices;     /* vertex count the topology is for */
  uint32_t *tris;
  uint32_t n_tris;
  uint32_t *layer_counts;
  uint32_t n_layers;
  char **layer_names;
  tc_tool *tools;
  uint32_t tools_cap;
  tc_frame frame;
  ts_codec_ctx *codec;        /* decoding scratch and zstd context, made on first use */
};

/* Writes the message into c->err and returns code. */
int tc__fail(tc_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Reports a problem in the server's data to the error callback and keeps it
 * for tc_poll's return value. */
void tc__report(tc_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t tc__now_ms(void);
/* Sends one Envelope (length-prefixed), waiting up to the client's timeout
 * for room in the socket. */
int tc__send_env(tc_client *c, const Envelope *env);
/* Sends env as a request and waits for the Envelope with its request_id.
 * Returns 0 with *reply (caller frees) of the expected case, the negated code
 * of an Error reply, or a transport error. */
int tc__request(tc_client *c, Envelope *env, int expect, Envelope **reply);

/* tc_frames.c: applies a Frame to the client's copy of the tissue and calls
 * the frame callback; problems go to tc__report. */
void tc__handle_frame(tc_client *c, const Tissued__V1__Frame *f, size_t bytes);
/* Frees the topology arrays (tc_close). */
void tc__free_topology(tc_client *c);

#endif
