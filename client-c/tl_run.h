/*
 * tl_run.h: tissueload's own header, shared by its files (tissueload.c: the
 * run and its report; tl_opts.c: options; tl_path.c: the clock and the tool
 * path; tl_cpu.c: CPU time; tl_frames.c: what clients do with frames;
 * tl_client.c: opening clients, requests and poses; tl_scan.c: frame
 * headers read in place): the options, the clients and the run's counters.
 */
#ifndef TL_RUN_H
#define TL_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "tl_hist.h"
#include "tl_link.h"
#include "tl_scan.h"
#include "ts_codec.h"

typedef Tissued__V1__Envelope Envelope;

#define TL_MAX_SESSIONS 64
#define TL_MAX_OBSERVERS 4000
#define TL_MAX_CONTROLLERS 8
#define TL_LAG_RING 256
#define TL_SETUP_TIMEOUT_MS 10000
#define TL_PATH_PERIOD 10.0     /* s of simulated time */
#define TL_RADIUS 0.005         /* m, the protocol's default sphere */

typedef struct opts {
  const char *host;
  int tcp_port, http_port;
  const char *ports_file;
  int sessions, observers, controllers;
  int obs_transport, ctl_transport;   /* TL_TCP / TL_WS */
  double duration, warmup;            /* s */
  double pose_rate;                   /* Hz per controller */
  int frame_rate, ctl_frame_rate;     /* asked for; 0 = server default */
  int layers[TL_MAX_SESSIONS];        /* per session, cycled */
  int n_layers;
  int decode;                         /* 0 none, 1 first observer per session, 2 all */
  const char *record;
  double record_start;                /* s of simulated time before joining */
  double record_switch;               /* s of simulated time; 0 = never */
  int record_frames;                  /* stop after this many; 0 = run's end */
  int quiet;
  const char *key;                    /* the server key (Hello.credentials) */
  uint32_t substeps;                  /* CreateSession.substeps; 0 = the daemon's choice */
  int daemon_pid;                     /* report this local process's CPU per thread; 0 = no */
} opts;

#define TL_MAX_THREADS 64

/* CPU seconds (user + system) of this process, and per thread of the
 * daemon (Linux /proc/PID/task/TID/stat, fields 14 and 15, in clock ticks):
 * taken when the measurement starts and when it ends, so that the report
 * says how many cores each side used for the load it measured. */
typedef struct cpu_snap {
  double self_s;
  int n;
  int tid[TL_MAX_THREADS];
  double s[TL_MAX_THREADS];
} cpu_snap;

typedef struct run run;

typedef struct client {
  run *r;
  int transport;
  int role;                  /* TC_ROLE_* */
  int sidx;                  /* session index */
  int recorder;
  tc_client *tc;             /* TCP through libtissueclient */
  tl_link *ln;               /* WebSocket, or the recorder's raw TCP */
  uint32_t tool_id;
  double path_z;
  int alive;
  int ep_events;             /* what the event loop's epoll watches on its socket; 0 none */
  /* the frame chain (WebSocket and recorder) */
  int decode;
  int have;
  uint64_t last_seq;
  uint32_t n;
  size_t cap;
  int32_t (*q)[3];
  ts_codec_ctx *cx;
  /* latency bookkeeping */
  uint64_t seen_pose_us[TL_MAX_TOOLS];
  uint64_t seen_force_pose_us;  /* controllers: last pose echoed by a force message */
  double sim_time;           /* of the last frame */
  uint64_t sim_at_us;        /* when it arrived */
  uint64_t next_pose_us;
  uint64_t pose_seq;
  /* statistics since the warm-up */
  uint64_t frames, keyframes, bytes;
  uint64_t frames_total;     /* whole run */
  /* blocking request over tl_link */
  uint64_t wait_rid;
  Envelope *reply;
  uint64_t next_rid;
  int refused_code;          /* the daemon's Error.code of the last refused request; 0 none */
} client;

typedef struct lag_slot {
  uint64_t seq;
  uint64_t first_us;
} lag_slot;

typedef struct session_run {
  uint32_t id;
  uint32_t vertex_count;
  int layers;
  int ended;                 /* this run's EndSession of it was acknowledged */
  lag_slot lag[TL_LAG_RING];
} session_run;

struct run {
  opts o;
  session_run s[TL_MAX_SESSIONS];
  client *c;
  int nc;
  client *rec;
  FILE *rec_file;
  int rec_frames;
  int rec_joined;
  int rec_switched;
  double rec_sim0;
  int rec_done;
  int measuring;
  tl_hist pose_frame, pose_force, lag;
  uint64_t resyncs, dropped, errors, decode_errors, poses_sent, send_failures;
  uint64_t frames_behind;      /* frames flagged "physics behind real time" */
  uint64_t codec_seen[4];
  char first_error[256];
  cpu_snap cpu_start, cpu_end;  /* at the measurement's start and end */
};

/* tl_opts.c: the options, defaults filled in and checked. 0, or -1 after a
 * message on stderr; --help (or -h) prints the usage and exits 0. */
int tl_parse_opts(int argc, char **argv, opts *o);

/* tl_path.c: CLOCK_MONOTONIC in us (the clock of every latency figure), and
 * the sphere centre on the standard path at time t of its cycle, offset z. */
uint64_t tl_now_us(void);
void tl_path_pose(double t, double z, double pos[3]);

/* tl_cpu.c: CPU seconds of this process and per thread of process pid (0:
 * this one only), and their use per second between two snapshots. */
void tl_cpu_take(int pid, cpu_snap *c);
void tl_cpu_report(cJSON *j, int pid, const cpu_snap *a, const cpu_snap *b, double secs);

/* tl_frames.c: an error of the run (counted; the first one kept), the
 * libtissueclient callbacks of TCP clients and the message handler of
 * tl_link clients (frames, forces, Errors, request replies). */
void tl_note_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tl_on_tc_force(void *ud, const tc_force *f);
void tl_on_tc_frame(void *ud, const tc_frame *f);
void tl_on_tc_error(void *ud, int code, const char *name, const char *message,
                    uint64_t request_id);
int tl_on_link_msg(void *ud, const uint8_t *msg, size_t len);

/* tl_client.c: a tl_link client's sends and bounded requests, the set-up of
 * a client of either transport, the sessions, and one pose on the path. */
int tl_send_env(client *c, Envelope *e);
int tl_request(client *c, Envelope *e, int expect, Envelope **reply, char *err, size_t errcap);
int tl_hello(client *c, const char *key, char *err, size_t errcap);
int tl_join(client *c, uint32_t session_id, int role, uint32_t frame_rate, char *err,
            size_t errcap);
int tl_create_session(client *admin, int layers, uint32_t substeps, session_run *s, char *err,
                      size_t errcap);
int tl_send_pose(client *c, uint64_t t);
int tl_open_client(run *r, client *c, int transport, int role, int sidx, int decode, char *err,
                   size_t errcap);
void tl_close_client(client *c);

#endif
