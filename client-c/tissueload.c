/*
 * tissueload.c: the load generator of issue 7. It opens N sessions of the
 * built-in patch on a running tissued, joins M observers and K controllers
 * to each over TCP (libtissueclient) or WebSocket (tl_link.h), drives every
 * controller's sphere tool along the standard path (DESIGN.md: approach,
 * press 8 mm, drag 20 mm, lift; one 10 s cycle of simulated time, repeated),
 * runs for a bounded time and prints one JSON object:
 *
 *   pose-to-frame latency  for every frame any client receives, for every
 *                          tool whose echoed pose (ToolState.
 *                          last_client_time_us) is new to that client:
 *                          receive time minus the pose's client time. Both
 *                          are CLOCK_MONOTONIC of this process, so the
 *                          figure needs no clock sync (loopback only);
 *   pose-to-force latency  at a controller, for its own tool: receive time
 *                          of the first ToolForce message (sent every
 *                          physics step, apart from frames) that echoes a
 *                          pose, minus that pose's client time;
 *   frame lag              per frame, its receive time at each client minus
 *                          its first receive time at any client of this run
 *                          (how unevenly one frame reaches many watchers);
 *   frames per second, bytes per frame, keyframes after the first
 *   (resynchronisations), clients dropped by the server, errors.
 *
 * With --daemon-pid it also reports the CPU the daemon (per thread: its
 * main thread is the network loop) and tissueload itself used over the
 * measured time, since both share the machine. Clients wait in one epoll
 * set, and WebSocket observers that do not decode read a frame's header
 * fields in place (scan_frame), so that the generator's own CPU per frame
 * stays small beside the daemon's.
 *
 * Statistics restart after --warmup seconds; at the end each session's
 * first controller ends it. With --record FILE one more
 * TCP observer writes the Frame Envelopes of session 1, exactly as
 * received, each after a 4-byte big-endian length (the TCP framing), and
 * with --record-switch it moves to session 2 midway (a topology change when
 * the sessions' layer counts differ): how tests/fixtures/ streams are made.
 *
 * Loopback only; every loop is bounded in count and time.
 */
#define _GNU_SOURCE /* epoll_pwait2: sub-millisecond waits between poses */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../server/core/ts_error.h"
#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "tl_hist.h"
#include "tl_link.h"
#include "ts_codec.h"
#include "ts_codec_frame.h"

typedef Tissued__V1__Envelope Envelope;

#define TL_MAX_SESSIONS 64
#define TL_MAX_OBSERVERS 4000
#define TL_MAX_CONTROLLERS 8
#define TL_MAX_TOOLS 9          /* tool ids 1..8 */
#define TL_LAG_RING 256
#define TL_SETUP_TIMEOUT_MS 10000
#define TL_PATH_PERIOD 10.0     /* s of simulated time */
#define TL_RADIUS 0.005         /* m, the protocol's default sphere */

/* ---- options ------------------------------------------------------------------- */

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

static void usage(FILE *f) {
  fprintf(f,
          "usage: tissueload [options]\n"
          "\n"
          "Loads a running tissued on this machine (loopback addresses only) with N\n"
          "sessions of the built-in patch, each watched by M observers and driven by\n"
          "K controllers whose tools follow the standard path, for a bounded time, and\n"
          "prints one JSON object: pose-to-frame and pose-to-force latency (p50, p99,\n"
          "max, ms), frame lag across clients, frames per second received, bytes per\n"
          "frame, keyframes after the first (resynchronised clients), frames flagged\n"
          "as physics behind real time, and clients the server dropped. At the end\n"
          "each session's first controller ends it.\n"
          "\n"
          "  --host ADDR              daemon address, loopback only (127.0.0.1)\n"
          "  --tcp-port N             daemon TCP port (for TCP clients)\n"
          "  --http-port N            daemon HTTP port (for WebSocket clients at /ws)\n"
          "  --ports-file FILE        read both ports from tissued's --ports-file\n"
          "  --key K                  the server key (default $TISSUED_SERVER_KEY): every\n"
          "                           client of the run says it in Hello\n"
          "  --sessions N             sessions to create (1, at most %d)\n"
          "  --observers M            observers per session (0, at most %d in all)\n"
          "  --controllers K          controllers per session (1, at most %d)\n"
          "  --transport tcp|ws       transport of every client (tcp)\n"
          "  --observer-transport T   transport of the observers only\n"
          "  --controller-transport T transport of the controllers only\n"
          "  --duration S             measured seconds after the warm-up (10, at most 3600)\n"
          "  --warmup S               seconds before statistics start (1)\n"
          "  --pose-rate HZ           poses per second per controller (1000, at most 10000)\n"
          "  --frame-rate HZ          frame rate observers ask for (0 = server default)\n"
          "  --controller-frame-rate HZ  frame rate controllers ask for (0 = default)\n"
          "  --layers L[,L...]        tissue layers of each session, cycled (3)\n"
          "  --substeps N             CreateSession.substeps of every session (0 = the\n"
          "                           daemon's choice; at most 1000). A daemon that refuses\n"
          "                           it: one JSON object {\"refused\":..} and status 3\n"
          "  --decode none|first|all  WebSocket clients that decode payloads: none, the\n"
          "                           first observer of each session (default), all\n"
          "                           (TCP clients always decode: libtissueclient); the\n"
          "                           others read only each frame's header fields\n"
          "  --daemon-pid PID         also report the CPU time of that process (the daemon\n"
          "                           on this machine), per thread, over the measured time\n"
          "  --record FILE            record session 1's frames as received (TCP framing)\n"
          "  --record-start S         join the recorder once session 1 has simulated S s\n"
          "                           (its first controller's clock; 0 = at once)\n"
          "  --record-switch S        after S s of simulated time the recorder joins\n"
          "                           session 2 (needs --sessions 2 or more)\n"
          "  --record-frames N        end the run once N frames are recorded\n"
          "  --quiet                  no progress on stderr\n"
          "  --help                   this text\n",
          TL_MAX_SESSIONS, TL_MAX_OBSERVERS, TL_MAX_CONTROLLERS);
}

static int parse_transport(const char *s, int *out) {
  if (strcmp(s, "tcp") == 0) *out = TL_TCP;
  else if (strcmp(s, "ws") == 0) *out = TL_WS;
  else return -1;
  return 0;
}

static int parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int read_ports_file(const char *path, int *tcp, int *http) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  if (!j) return -1;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "tcp");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "http");
  int ok = cJSON_IsNumber(t) && cJSON_IsNumber(h);
  if (ok) {
    *tcp = t->valueint;
    *http = h->valueint;
  }
  cJSON_Delete(j);
  return ok ? 0 : -1;
}

static int parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->key = getenv("TISSUED_SERVER_KEY");
  o->sessions = 1;
  o->controllers = 1;
  o->obs_transport = o->ctl_transport = TL_TCP;
  o->duration = 10;
  o->warmup = 1;
  o->pose_rate = 1000;
  o->layers[0] = 3;
  o->n_layers = 1;
  o->decode = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(a, "--quiet") == 0) {
      o->quiet = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "tissueload: %s needs a value (see --help)\n", a);
      return -1;
    }
    const char *v = argv[++i];
    double d;
    int bad = 0;
    if (strcmp(a, "--host") == 0) o->host = v;
    else if (strcmp(a, "--tcp-port") == 0) bad = parse_num(v, 1, 65535, &d) || !(o->tcp_port = (int)d);
    else if (strcmp(a, "--http-port") == 0) bad = parse_num(v, 1, 65535, &d) || !(o->http_port = (int)d);
    else if (strcmp(a, "--ports-file") == 0) o->ports_file = v;
    else if (strcmp(a, "--key") == 0) o->key = v;
    else if (strcmp(a, "--sessions") == 0) bad = parse_num(v, 1, TL_MAX_SESSIONS, &d) || !(o->sessions = (int)d);
    else if (strcmp(a, "--observers") == 0) { bad = parse_num(v, 0, TL_MAX_OBSERVERS, &d); o->observers = (int)d; }
    else if (strcmp(a, "--controllers") == 0) { bad = parse_num(v, 0, TL_MAX_CONTROLLERS, &d); o->controllers = (int)d; }
    else if (strcmp(a, "--transport") == 0) { bad = parse_transport(v, &o->obs_transport); o->ctl_transport = o->obs_transport; }
    else if (strcmp(a, "--observer-transport") == 0) bad = parse_transport(v, &o->obs_transport);
    else if (strcmp(a, "--controller-transport") == 0) bad = parse_transport(v, &o->ctl_transport);
    else if (strcmp(a, "--duration") == 0) bad = parse_num(v, 0.1, 3600, &o->duration);
    else if (strcmp(a, "--warmup") == 0) bad = parse_num(v, 0, 600, &o->warmup);
    else if (strcmp(a, "--pose-rate") == 0) bad = parse_num(v, 1, 10000, &o->pose_rate);
    else if (strcmp(a, "--frame-rate") == 0) { bad = parse_num(v, 0, 1000, &d); o->frame_rate = (int)d; }
    else if (strcmp(a, "--controller-frame-rate") == 0) { bad = parse_num(v, 0, 1000, &d); o->ctl_frame_rate = (int)d; }
    else if (strcmp(a, "--daemon-pid") == 0) bad = parse_num(v, 1, 4194304, &d) || !(o->daemon_pid = (int)d);
    else if (strcmp(a, "--substeps") == 0) { bad = parse_num(v, 0, 1000, &d) || d != floor(d); o->substeps = (uint32_t)d; }
    else if (strcmp(a, "--layers") == 0) {
      o->n_layers = 0;
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t && !bad; t = strtok(NULL, ",")) {
        if (o->n_layers == TL_MAX_SESSIONS || parse_num(t, 1, 8, &d)) bad = 1;
        else o->layers[o->n_layers++] = (int)d;
      }
      if (!o->n_layers) bad = 1;
    } else if (strcmp(a, "--decode") == 0) {
      if (strcmp(v, "none") == 0) o->decode = 0;
      else if (strcmp(v, "first") == 0) o->decode = 1;
      else if (strcmp(v, "all") == 0) o->decode = 2;
      else bad = 1;
    } else if (strcmp(a, "--record") == 0) o->record = v;
    else if (strcmp(a, "--record-switch") == 0) bad = parse_num(v, 0, 3600, &o->record_switch);
    else if (strcmp(a, "--record-start") == 0) bad = parse_num(v, 0, 3600, &o->record_start);
    else if (strcmp(a, "--record-frames") == 0) { bad = parse_num(v, 1, 1e6, &d); o->record_frames = (int)d; }
    else {
      fprintf(stderr, "tissueload: unknown option %s (see --help)\n", a);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "tissueload: bad value '%s' for %s (see --help)\n", v, a);
      return -1;
    }
  }
  if (o->ports_file && read_ports_file(o->ports_file, &o->tcp_port, &o->http_port)) {
    fprintf(stderr, "tissueload: cannot read ports from %s\n", o->ports_file);
    return -1;
  }
  int need_tcp = (o->observers && o->obs_transport == TL_TCP) ||
                 (o->controllers && o->ctl_transport == TL_TCP) || o->record;
  int need_ws = (o->observers && o->obs_transport == TL_WS) ||
                (o->controllers && o->ctl_transport == TL_WS);
  if (need_tcp && !o->tcp_port) {
    fprintf(stderr, "tissueload: TCP clients need --tcp-port or --ports-file\n");
    return -1;
  }
  if (need_ws && !o->http_port) {
    fprintf(stderr, "tissueload: WebSocket clients need --http-port or --ports-file\n");
    return -1;
  }
  if (!o->tcp_port && !o->http_port) {
    fprintf(stderr, "tissueload: give --tcp-port, --http-port or --ports-file\n");
    return -1;
  }
  if (o->daemon_pid) { /* a wrong pid would otherwise only leave the figures out */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", o->daemon_pid);
    DIR *d = opendir(path);
    if (!d) {
      fprintf(stderr, "tissueload: --daemon-pid %d: cannot read %s: %s\n", o->daemon_pid, path,
              strerror(errno));
      return -1;
    }
    closedir(d);
  }
  if ((long)o->observers * o->sessions > TL_MAX_OBSERVERS) {
    fprintf(stderr, "tissueload: at most %d observers in all\n", TL_MAX_OBSERVERS);
    return -1;
  }
  if (o->record_start > 0 && o->controllers < 1) {
    fprintf(stderr, "tissueload: --record-start needs a controller (its session clock)\n");
    return -1;
  }
  if (o->record_switch > 0 && o->sessions < 2) {
    fprintf(stderr, "tissueload: --record-switch needs --sessions 2 or more\n");
    return -1;
  }
  return 0;
}

/* ---- clocks and the tool path --------------------------------------------------- */

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double smoothstep(double u) {
  u = u < 0 ? 0 : u > 1 ? 1 : u;
  return u * u * (3 - 2 * u);
}

/* The standard path over the patch's top centre (y = 0, outward normal +y),
 * dragged along +x and offset along z per controller: the tip's height and
 * x at time t of the 10 s cycle, then the sphere centre one radius above. */
static void path_pose(double t, double z, double pos[3]) {
  const double clear = 0.005, press = 0.008, drag = 0.020;
  t = fmod(t, TL_PATH_PERIOD);
  if (t < 0) t += TL_PATH_PERIOD;
  double y, x = -drag / 2;
  if (t < 1) {
    y = clear - clear * smoothstep(t);
  } else if (t < 3) {
    y = -press * smoothstep((t - 1) / 2);
  } else if (t < 8) {
    y = -press;
    x = -drag / 2 + drag * smoothstep((t - 3) / 5);
  } else {
    y = -press + (press + clear) * smoothstep((t - 8) / 2);
    x = drag / 2;
  }
  pos[0] = x;
  pos[1] = y + TL_RADIUS;
  pos[2] = z;
}

/* ---- CPU time ---------------------------------------------------------------------- */

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

static double self_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru)) return 0;
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

static void cpu_take(int pid, cpu_snap *c) {
  c->self_s = self_cpu_s();
  c->n = 0;
  if (pid <= 0) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return;
  long tick = sysconf(_SC_CLK_TCK);
  struct dirent *de;
  while ((de = readdir(d)) && c->n < TL_MAX_THREADS) {
    int tid = atoi(de->d_name);
    if (tid <= 0) continue;
    char sp[96], buf[1024];
    snprintf(sp, sizeof sp, "/proc/%d/task/%d/stat", pid, tid);
    FILE *f = fopen(sp, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* fields after the command name, which is in parentheses and may hold spaces */
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
      continue;
    c->tid[c->n] = tid;
    c->s[c->n++] = (double)(ut + st) / (double)(tick > 0 ? tick : 100);
  }
  closedir(d);
}

/* Adds {"load_cpu_cores":.., "daemon_cpu_cores":{"total":..,"loop":..,"threads":[..]}}:
 * cores used between the two snapshots (the daemon's main thread is its
 * network loop; the others, busiest first, its physics threads and worker). */
static void cpu_report(cJSON *j, int pid, const cpu_snap *a, const cpu_snap *b, double secs) {
  if (!(secs > 0)) return;
  cJSON_AddNumberToObject(j, "load_cpu_cores", (b->self_s - a->self_s) / secs);
  if (pid <= 0) return;
  if (!a->n || !b->n) { /* checked at the start: the process went away meanwhile */
    cJSON_AddStringToObject(j, "daemon_cpu_error", "the --daemon-pid process could not be read");
    return;
  }
  double use[TL_MAX_THREADS], total = 0, loop = 0;
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    double was = 0;
    for (int k = 0; k < a->n; k++)
      if (a->tid[k] == b->tid[i]) was = a->s[k];
    double u = (b->s[i] - was) / secs;
    total += u;
    if (b->tid[i] == pid) loop = u;
    else use[n++] = u;
  }
  for (int i = 1; i < n; i++) /* busiest first */
    for (int k = i; k > 0 && use[k] > use[k - 1]; k--) {
      double t = use[k];
      use[k] = use[k - 1];
      use[k - 1] = t;
    }
  cJSON *d = cJSON_AddObjectToObject(j, "daemon_cpu_cores");
  cJSON_AddNumberToObject(d, "total", total);
  cJSON_AddNumberToObject(d, "loop", loop);
  cJSON *t = cJSON_AddArrayToObject(d, "threads");
  for (int i = 0; i < n; i++)
    if (use[i] >= 0.005) cJSON_AddItemToArray(t, cJSON_CreateNumber(use[i]));
}

/* ---- clients --------------------------------------------------------------------- */

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

static void note_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_error(run *r, const char *fmt, ...) {
  r->errors++;
  if (r->first_error[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->first_error, sizeof r->first_error, fmt, ap);
  va_end(ap);
}

/* What every client does with a frame, whatever its transport. */
typedef struct tool_echo {
  uint32_t tool_id;
  uint64_t client_time_us;
} tool_echo;

static void on_frame_common(client *c, uint64_t seq, int keyframe, double sim_time,
                            uint32_t flags, const tool_echo *tools, size_t n_tools,
                            size_t bytes) {
  run *r = c->r;
  uint64_t t = now_us();
  c->frames_total++;
  c->sim_time = sim_time;
  c->sim_at_us = t;
  if (keyframe && c->frames_total > 1 && r->measuring) r->resyncs++;
  if (!r->measuring) {
    for (size_t i = 0; i < n_tools; i++)
      if (tools[i].tool_id < TL_MAX_TOOLS) c->seen_pose_us[tools[i].tool_id] = tools[i].client_time_us;
    return;
  }
  c->frames++;
  c->bytes += bytes;
  if (keyframe) c->keyframes++;
  if (flags & 1u) r->frames_behind++;
  session_run *s = &r->s[c->sidx];
  lag_slot *ls = &s->lag[seq % TL_LAG_RING];
  if (ls->seq != seq) {
    ls->seq = seq;
    ls->first_us = t;
  }
  tl_hist_add(&r->lag, t - ls->first_us);
  for (size_t i = 0; i < n_tools; i++) {
    uint32_t id = tools[i].tool_id;
    uint64_t ct = tools[i].client_time_us;
    if (id >= TL_MAX_TOOLS || ct == 0 || ct == c->seen_pose_us[id] || ct > t) continue;
    c->seen_pose_us[id] = ct;
    tl_hist_add(&r->pose_frame, t - ct);
  }
}

/* A ToolForce message at a controller (TCP or WebSocket): the first one
 * that echoes a pose gives that pose's pose-to-force latency. */
static void on_force_common(client *c, uint32_t tool_id, uint64_t ct) {
  run *r = c->r;
  uint64_t t = now_us();
  if (tool_id != c->tool_id || ct == 0 || ct == c->seen_force_pose_us || ct > t) return;
  c->seen_force_pose_us = ct;
  if (r->measuring) tl_hist_add(&r->pose_force, t - ct);
}

static void on_tc_force(void *ud, const tc_force *f) {
  on_force_common(ud, f->tool_id, f->last_client_time_us);
}

/* libtissueclient's callback (TCP clients). */
static void on_tc_frame(void *ud, const tc_frame *f) {
  client *c = ud;
  tool_echo te[TL_MAX_TOOLS];
  size_t nt = 0;
  for (uint32_t i = 0; i < f->n_tools && nt < TL_MAX_TOOLS; i++)
    te[nt++] = (tool_echo){f->tools[i].tool_id, f->tools[i].last_client_time_us};
  on_frame_common(c, f->seq, f->keyframe, f->sim_time, f->flags, te, nt, f->bytes);
}

static void on_tc_error(void *ud, int code, const char *name, const char *message,
                        uint64_t request_id) {
  client *c = ud;
  (void)request_id;
  note_error(c->r, "client of session %u: %s (%d): %s", c->r->s[c->sidx].id, name, code,
             message);
}

/* The frame chain of a WebSocket or recorder client: deltas must apply to
 * the frame held; payloads are decoded when this client decodes. */
static void apply_frame(client *c, const Tissued__V1__Frame *f) {
  run *r = c->r;
  uint32_t codec = ts_frame_codec(f);
  if (codec < 4) r->codec_seen[codec]++;
  uint32_t n = f->vertex_count;
  if (!f->keyframe && (!c->have || f->baseline_seq != c->last_seq || n != c->n)) {
    note_error(r, "session %u: delta %llu against %llu, the client holds %llu", f->session_id,
               (unsigned long long)f->seq, (unsigned long long)f->baseline_seq,
               (unsigned long long)c->last_seq);
    c->have = 0;
    return;
  }
  if (c->decode) {
    if (f->keyframe) {
      if (ts_codec_check_keyframe(codec, f->payload.data, f->payload.len, n)) {
        r->decode_errors++;
        c->have = 0;
        return;
      }
      if (n > c->cap) {
        int32_t (*q)[3] = realloc(c->q, (size_t)n * sizeof *q);
        if (!q) {
          note_error(r, "out of memory for %u vertices", n);
          return;
        }
        c->q = q;
        c->cap = n;
      }
    }
    if (!c->cx && !(c->cx = ts_codec_ctx_new())) {
      note_error(r, "out of memory for a codec context");
      return;
    }
    int rc = ts_codec_decode(c->cx, codec, f->keyframe, f->payload.data, f->payload.len, n,
                             c->q, NULL);
    if (rc) {
      r->decode_errors++;
      note_error(r, "session %u frame %llu (%s) does not decode: %s", f->session_id,
                 (unsigned long long)f->seq, ts_codec_name(codec) ? ts_codec_name(codec) : "?",
                 ts_strerror(rc));
      c->have = 0;
      return;
    }
  }
  c->have = 1;
  c->n = n;
  c->last_seq = f->seq;
}

static void record_frame(run *r, const uint8_t *msg, size_t len) {
  if (!r->rec_file || r->rec_done) return;
  uint8_t h[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
  if (fwrite(h, 1, 4, r->rec_file) != 4 || fwrite(msg, 1, len, r->rec_file) != len) {
    note_error(r, "writing %s: %s", r->o.record, strerror(errno));
    r->rec_done = 1;
    return;
  }
  r->rec_frames++;
  if (r->o.record_frames && r->rec_frames >= r->o.record_frames) r->rec_done = 1;
}

static int send_env_link(client *c, Envelope *e);

static void recorder_maybe_switch(run *r, client *c, const Tissued__V1__Frame *f) {
  if (r->rec_switched || r->o.record_switch <= 0) return;
  if (r->rec_frames == 1) r->rec_sim0 = f->sim_time;
  if (f->sim_time - r->rec_sim0 < r->o.record_switch) return;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = r->s[1].id;
  j.role = TISSUED__V1__ROLE__ROLE_OBSERVER;
  j.frame_rate = (uint32_t)r->o.frame_rate;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  e.join_session = &j;
  if (send_env_link(c, &e) == 0) {
    r->rec_switched = 1;
    c->sidx = 1;
  }
}

/* ---- frames of observers that do not decode ------------------------------------------
 * An observer that does not decode payloads needs a frame's header fields
 * only (seq, keyframe, baseline, flags, the tools' echoed pose times): they
 * are read from the protobuf wire format in place (Protocol Buffers
 * encoding: varints, 64/32-bit fixed fields, length-delimited fields),
 * walking every field so that a malformed message is still noticed, instead
 * of unpacking the whole Envelope with a copy of its payload. The frame was
 * received whole before this runs (tl_link hands over complete messages),
 * so the lag it measures is that of the whole frame. */

typedef struct frame_head {
  uint32_t session_id, vertex_count, flags, codec;
  uint64_t seq, baseline_seq;
  int keyframe;
  double sim_time;
  size_t n_tools;
  tool_echo tools[TL_MAX_TOOLS];
} frame_head;

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int sh = 0; sh < 64 && *p < end; sh += 7) {
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7F) << sh;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

/* The next field's number, wire type and, for varints and fixed64, value;
 * for length-delimited ones *sub and *sublen. 0, 1 at the end, -1 malformed. */
static int pb_field(const uint8_t **p, const uint8_t *end, uint32_t *num, uint64_t *v,
                    const uint8_t **sub, size_t *sublen) {
  if (*p >= end) return 1;
  uint64_t key;
  if (pb_varint(p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) return -1;
  *num = (uint32_t)(key >> 3);
  *sub = NULL;
  *sublen = 0;
  *v = 0;
  switch (key & 7) {
  case 0: return pb_varint(p, end, v);
  case 1:
    if (end - *p < 8) return -1;
    memcpy(v, *p, 8); /* little-endian on the machines this runs on (x86-64, arm64) */
    *p += 8;
    return 0;
  case 2:
    if (pb_varint(p, end, v) || *v > (uint64_t)(end - *p)) return -1;
    *sub = *p;
    *sublen = (size_t)*v;
    *p += *v;
    return 0;
  case 5:
    if (end - *p < 4) return -1;
    *p += 4;
    return 0;
  }
  return -1;
}

/* Envelope.frame's header fields (tissue.proto: Envelope.frame = 18; Frame
 * and ToolState field numbers as there). 1 when msg is a Frame, 0 when it
 * is another message, -1 when malformed. */
static int scan_frame(const uint8_t *msg, size_t len, frame_head *h) {
  const uint8_t *p = msg, *end = msg + len, *fr = NULL, *sub;
  size_t frlen = 0, sublen;
  uint32_t num;
  uint64_t v;
  int rc;
  while ((rc = pb_field(&p, end, &num, &v, &sub, &sublen)) == 0)
    if (num == 18 && sub) {
      fr = sub;
      frlen = sublen;
    } else if (num >= 10) {
      return 0; /* another body */
    }
  if (rc < 0) return -1;
  if (!fr) return 0;
  memset(h, 0, sizeof *h);
  p = fr;
  end = fr + frlen;
  while ((rc = pb_field(&p, end, &num, &v, &sub, &sublen)) == 0) {
    switch (num) {
    case 1: h->session_id = (uint32_t)v; break;
    case 2: h->seq = v; break;
    case 3: memcpy(&h->sim_time, &v, sizeof h->sim_time); break;
    case 4: h->keyframe = v != 0; break;
    case 5: h->baseline_seq = v; break;
    case 7: h->vertex_count = (uint32_t)v; break;
    case 11: h->flags = (uint32_t)v; break;
    case 12: h->codec = (uint32_t)v; break;
    case 10: {
      if (!sub) return -1;
      tool_echo te = {0, 0};
      const uint8_t *tp = sub, *tend = sub + sublen, *ts;
      size_t tl;
      uint32_t tn;
      uint64_t tv;
      int trc;
      while ((trc = pb_field(&tp, tend, &tn, &tv, &ts, &tl)) == 0) {
        if (tn == 1) te.tool_id = (uint32_t)tv;
        else if (tn == 7) te.client_time_us = tv;
      }
      if (trc < 0) return -1;
      if (h->n_tools < TL_MAX_TOOLS) h->tools[h->n_tools++] = te;
      break;
    }
    default: break;
    }
  }
  if (rc < 0) return -1;
  if (!h->codec) h->codec = TS_CODEC_Q1; /* as ts_frame_codec: 0 means q1 */
  return 1;
}

/* The frame chain of an observer that does not decode (see above). */
static void on_frame_head(client *c, const frame_head *h, size_t len) {
  run *r = c->r;
  if (h->codec < 4) r->codec_seen[h->codec]++;
  if (!h->keyframe && (!c->have || h->baseline_seq != c->last_seq || h->vertex_count != c->n)) {
    note_error(r, "session %u: delta %llu against %llu, the client holds %llu", h->session_id,
               (unsigned long long)h->seq, (unsigned long long)h->baseline_seq,
               (unsigned long long)c->last_seq);
    c->have = 0;
  } else {
    c->have = 1;
    c->n = h->vertex_count;
    c->last_seq = h->seq;
  }
  on_frame_common(c, h->seq, h->keyframe, h->sim_time, h->flags, h->tools, h->n_tools, len);
}

/* Every whole message on a tl_link. */
static int on_link_msg(void *ud, const uint8_t *msg, size_t len) {
  client *c = ud;
  run *r = c->r;
  if (!c->decode && !c->recorder && !c->wait_rid) {
    frame_head h;
    int k = scan_frame(msg, len, &h);
    if (k < 0) {
      note_error(r, "a message of %zu bytes does not decode", len);
      return 0;
    }
    if (k == 1) {
      on_frame_head(c, &h, len);
      return 0;
    }
  }
  Envelope *e = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!e) {
    note_error(r, "a message of %zu bytes does not decode", len);
    return 0;
  }
  if (c->wait_rid && e->request_id == c->wait_rid && !c->reply &&
      e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME) {
    c->reply = e;
    return 0;
  }
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
    const Tissued__V1__Frame *f = e->frame;
    if (c->recorder) {
      record_frame(r, msg, len);
      recorder_maybe_switch(r, c, f);
    }
    apply_frame(c, f);
    tool_echo te[TL_MAX_TOOLS];
    size_t nt = 0;
    for (size_t i = 0; i < f->n_tools && nt < TL_MAX_TOOLS; i++)
      te[nt++] = (tool_echo){f->tools[i]->tool_id, f->tools[i]->last_client_time_us};
    if (!c->recorder)
      on_frame_common(c, f->seq, f->keyframe, f->sim_time, f->flags, te, nt, len);
  } else if (e->body_case == TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE) {
    on_force_common(c, e->tool_force->tool_id, e->tool_force->last_client_time_us);
  } else if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    note_error(r, "session %u: server error %s: %s", r->s[c->sidx].id,
               e->error->name ? e->error->name : "?", e->error->message ? e->error->message : "");
  }
  tissued__v1__envelope__free_unpacked(e, NULL);
  return 0;
}

static int send_env_link(client *c, Envelope *e) {
  size_t n = tissued__v1__envelope__get_packed_size(e);
  uint8_t stackbuf[512];
  uint8_t *b = n <= sizeof stackbuf ? stackbuf : malloc(n);
  if (!b) return TS_ENOMEM;
  tissued__v1__envelope__pack(e, b);
  int rc = tl_link_send(c->ln, b, n);
  if (b != stackbuf) free(b);
  return rc;
}

/* Sends a request on a tl_link and waits (bounded) for its reply; frames
 * arriving meanwhile go through the normal path. The reply is the caller's
 * to free. */
static int link_request(client *c, Envelope *e, int expect, Envelope **reply, char *err,
                        size_t errcap) {
  *reply = NULL;
  e->request_id = ++c->next_rid;
  int rc = send_env_link(c, e);
  if (rc) {
    snprintf(err, errcap, "sending: %s", ts_strerror(rc));
    return rc;
  }
  c->wait_rid = e->request_id;
  c->reply = NULL;
  uint64_t deadline = now_us() + (uint64_t)TL_SETUP_TIMEOUT_MS * 1000;
  while (!c->reply) {
    uint64_t t = now_us();
    if (t >= deadline) {
      snprintf(err, errcap, "no reply within %d ms", TL_SETUP_TIMEOUT_MS);
      rc = TS_EIO;
      break;
    }
    struct pollfd pf = {.fd = tl_link_fd(c->ln), .events = POLLIN};
    if (tl_link_pending(c->ln)) pf.events |= POLLOUT;
    int left = (int)((deadline - t) / 1000) + 1;
    if (poll(&pf, 1, left > 100 ? 100 : left) <= 0) continue;
    if (pf.revents & POLLOUT) tl_link_flush(c->ln);
    int k = tl_link_read(c->ln, 0, on_link_msg, c);
    if (k < 0) {
      snprintf(err, errcap, "connection: %s", ts_strerror(k));
      rc = k;
      break;
    }
  }
  c->wait_rid = 0;
  Envelope *rep = c->reply;
  c->reply = NULL;
  if (!rep) return rc ? rc : TS_EIO;
  if (rep->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    snprintf(err, errcap, "%s: %s", rep->error->name ? rep->error->name : "error",
             rep->error->message ? rep->error->message : "");
    rc = rep->error->code > 0 ? -rep->error->code : TS_EPROTOCOL;
    c->refused_code = rep->error->code > 0 ? rep->error->code : 0;
    tissued__v1__envelope__free_unpacked(rep, NULL);
    return rc;
  }
  if ((int)rep->body_case != expect) {
    snprintf(err, errcap, "unexpected reply (body %d)", (int)rep->body_case);
    tissued__v1__envelope__free_unpacked(rep, NULL);
    return TS_EPROTOCOL;
  }
  *reply = rep;
  return 0;
}

static int link_hello(client *c, const char *key, char *err, size_t errcap) {
  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = TC_PROTOCOL_VERSION;
  h.client_name = "tissueload";
  h.credentials = (char *)(key ? key : "");
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  e.hello = &h;
  Envelope *rep;
  int rc = link_request(c, &e, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY, &rep, err, errcap);
  if (!rc) tissued__v1__envelope__free_unpacked(rep, NULL);
  return rc;
}

static int link_join(client *c, uint32_t session_id, int role, uint32_t frame_rate, char *err,
                     size_t errcap) {
  Tissued__V1__ToolShape shape = TISSUED__V1__TOOL_SHAPE__INIT;
  shape.radius = (float)TL_RADIUS;
  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = session_id;
  j.role = role == TC_ROLE_CONTROLLER ? TISSUED__V1__ROLE__ROLE_CONTROLLER
                                      : TISSUED__V1__ROLE__ROLE_OBSERVER;
  j.tool = role == TC_ROLE_CONTROLLER ? &shape : NULL;
  j.frame_rate = frame_rate;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  e.join_session = &j;
  Envelope *rep;
  int rc = link_request(c, &e, TISSUED__V1__ENVELOPE__BODY_JOINED, &rep, err, errcap);
  if (!rc) {
    c->tool_id = rep->joined->tool_id;
    tissued__v1__envelope__free_unpacked(rep, NULL);
  }
  return rc;
}

/* CreateSession of the built-in patch with `layers` layers (3 = its default;
 * otherwise the daemon's default layers, repeated or cut) and `substeps`
 * (CreateSession.substeps; 0: the daemon's choice). */
static int create_session(client *admin, int layers, uint32_t substeps, session_run *s, char *err,
                          size_t errcap) {
  Tissued__V1__LayerSpec ls[8];
  Tissued__V1__LayerSpec *lp[8];
  Tissued__V1__CreateSession m = TISSUED__V1__CREATE_SESSION__INIT;
  m.tissue_case = TISSUED__V1__CREATE_SESSION__TISSUE_BUILTIN;
  m.builtin = "stomach-patch";
  m.substeps = substeps;
  if (layers != 3) {
    for (int i = 0; i < layers; i++) {
      tissued__v1__layer_spec__init(&ls[i]);
      lp[i] = &ls[i];
    }
    m.n_layers = (size_t)layers;
    m.layers = lp;
  }
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_CREATE_SESSION;
  e.create_session = &m;
  Envelope *rep;
  int rc = link_request(admin, &e, TISSUED__V1__ENVELOPE__BODY_SESSION_CREATED, &rep, err, errcap);
  if (rc) return rc;
  s->id = rep->session_created->session_id;
  s->vertex_count = rep->session_created->vertex_count;
  s->layers = layers;
  tissued__v1__envelope__free_unpacked(rep, NULL);
  return 0;
}

static int send_pose(client *c, uint64_t t) {
  run *r = c->r;
  double pt = c->sim_time;
  if (c->sim_at_us) { /* between frames, advance with the wall clock, by at most 50 ms */
    double ahead = (double)(t - c->sim_at_us) * 1e-6;
    pt += ahead < 0.05 ? ahead : 0.05;
  }
  double pos[3];
  path_pose(pt, c->path_z, pos);
  const double quat[4] = {1, 0, 0, 0};
  int rc;
  if (c->tc) {
    rc = tc_send_pose(c->tc, c->tool_id, pos, quat, 1.0);
  } else {
    Tissued__V1__Vec3 p = TISSUED__V1__VEC3__INIT;
    p.x = (float)pos[0];
    p.y = (float)pos[1];
    p.z = (float)pos[2];
    Tissued__V1__Quat q = TISSUED__V1__QUAT__INIT;
    q.w = 1;
    Tissued__V1__ToolPose m = TISSUED__V1__TOOL_POSE__INIT;
    m.tool_id = c->tool_id;
    m.seq = ++c->pose_seq;
    m.client_time_us = now_us();
    m.position = &p;
    m.orientation = &q;
    m.jaw = 1;
    Envelope e = TISSUED__V1__ENVELOPE__INIT;
    e.request_id = ++c->next_rid;
    e.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_POSE;
    e.tool_pose = &m;
    rc = send_env_link(c, &e);
  }
  if (rc == 0) r->poses_sent++;
  else r->send_failures++;
  return rc;
}

/* ---- set-up ------------------------------------------------------------------------ */

static int open_client(run *r, client *c, int transport, int role, int sidx, int decode,
                       char *err, size_t errcap) {
  const opts *o = &r->o;
  c->r = r;
  c->transport = transport;
  c->role = role;
  c->sidx = sidx;
  c->decode = decode;
  c->alive = 1;
  uint32_t rate = (uint32_t)(role == TC_ROLE_CONTROLLER ? o->ctl_frame_rate : o->frame_rate);
  if (transport == TL_TCP) {
    c->tc = tc_connect_key(o->host, o->tcp_port, "tissueload", o->key, TL_SETUP_TIMEOUT_MS, err,
                           errcap);
    if (!c->tc) return -1;
    tc_set_frame_cb(c->tc, on_tc_frame, c);
    tc_set_force_cb(c->tc, on_tc_force, c);
    tc_set_error_cb(c->tc, on_tc_error, c);
    tc_join_params p = {.session_id = r->s[sidx].id, .role = role, .radius = TL_RADIUS,
                        .frame_rate = rate};
    tc_joined j;
    if (tc_join_ex(c->tc, &p, &j)) {
      snprintf(err, errcap, "join: %s", tc_last_error(c->tc));
      return -1;
    }
    c->tool_id = j.tool_id;
    return 0;
  }
  c->ln = tl_link_open(TL_WS, o->host, o->http_port, TL_SETUP_TIMEOUT_MS, err, errcap);
  if (!c->ln) return -1;
  if (link_hello(c, o->key, err, errcap)) return -1;
  return link_join(c, r->s[sidx].id, role, rate, err, errcap) ? -1 : 0;
}

static void close_client(client *c) {
  if (c->tc) tc_close(c->tc);
  if (c->ln) tl_link_close(c->ln);
  if (c->reply) tissued__v1__envelope__free_unpacked(c->reply, NULL);
  ts_codec_ctx_free(c->cx);
  free(c->q);
  c->tc = NULL;
  c->ln = NULL;
}

/* ---- the run ----------------------------------------------------------------------- */

static volatile sig_atomic_t g_stop; /* SIGINT: end early but still report */
static void on_sigint(int sig) {
  (void)sig;
  g_stop = 1;
}

static void pump_client(client *c, short revents) {
  run *r = c->r;
  if (!c->alive) return;
  if (c->tc) {
    int k = tc_poll(c->tc, 0);
    if (k == TS_EIO) {
      c->alive = 0;
      r->dropped++;
      note_error(r, "session %u: the server closed a %s: %s", r->s[c->sidx].id,
                 c->role == TC_ROLE_CONTROLLER ? "controller" : "observer",
                 tc_last_error(c->tc));
    }
    return;
  }
  if (revents & POLLOUT) tl_link_flush(c->ln);
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    int k = tl_link_read(c->ln, 256 * 1024, on_link_msg, c);
    if (k < 0) {
      c->alive = 0;
      if (!c->recorder) r->dropped++;
      note_error(r, "session %u: connection of a %s ended: %s", r->s[c->sidx].id,
                 c->recorder ? "recorder" : c->role == TC_ROLE_CONTROLLER ? "controller"
                                                                           : "observer",
                 ts_strerror(k));
    }
  }
}

static int client_fd(const client *c) { return c->tc ? tc_fd(c->tc) : tl_link_fd(c->ln); }

/* Keeps c's epoll registration in step with it: input while it is alive,
 * output too while its link holds unsent bytes, nothing once it is gone. */
static void watch(run *r, int ep, client *c) {
  int want = 0;
  if (c->alive) want = EPOLLIN | (c->ln && tl_link_pending(c->ln) ? EPOLLOUT : 0);
  if (want == c->ep_events) return;
  struct epoll_event ev = {.events = (uint32_t)want, .data.ptr = c};
  int op = !c->ep_events ? EPOLL_CTL_ADD : !want ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  if (epoll_ctl(ep, op, client_fd(c), &ev) != 0) {
    note_error(r, "epoll_ctl: %s", strerror(errno));
    return;
  }
  c->ep_events = want;
}

/* One epoll set for every client (the kernel keeps the ready list: a wait
 * costs the sockets that have something, not all of them, which matters
 * with hundreds of observers and a wake-up per pose). */
static void event_loop(run *r, uint64_t t_measure, uint64_t t_end) {
  const opts *o = &r->o;
  int total = r->nc + (r->rec ? 1 : 0);
  enum { TL_EVENTS = 256 };
  struct epoll_event evs[TL_EVENTS];
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    note_error(r, "epoll_create1: %s", strerror(errno));
    return;
  }
  for (int i = 0; i < total; i++) watch(r, ep, i < r->nc ? &r->c[i] : r->rec);
  int fine_wait = 1;
  uint64_t period = (uint64_t)(1e6 / o->pose_rate);
  if (period < 1) period = 1;
  uint64_t t = now_us();
  for (int i = 0; i < r->nc; i++)
    if (r->c[i].role == TC_ROLE_CONTROLLER) r->c[i].next_pose_us = t + (uint64_t)i % period;
  while (!g_stop) {
    t = now_us();
    if (t >= t_end || (r->rec && r->rec_done)) break;
    if (r->rec && !r->rec_joined && r->c[0].sim_time >= o->record_start) {
      char err[256];
      if (link_join(r->rec, r->s[0].id, TC_ROLE_OBSERVER, (uint32_t)o->frame_rate, err,
                    sizeof err)) {
        note_error(r, "recorder: %s", err);
        break;
      }
      r->rec_joined = 1;
      watch(r, ep, r->rec);
    }
    if (!r->measuring && t >= t_measure) {
      r->measuring = 1;
      cpu_take(o->daemon_pid, &r->cpu_start);
      tl_hist_reset(&r->pose_frame);
      tl_hist_reset(&r->pose_force);
      tl_hist_reset(&r->lag);
      r->resyncs = r->errors = r->decode_errors = r->poses_sent = r->send_failures = 0;
      r->frames_behind = 0;
      r->first_error[0] = '\0';
    }
    /* poses that are due; a controller that fell behind skips, never bursts */
    uint64_t next = t_end;
    for (int i = 0; i < r->nc; i++) {
      client *c = &r->c[i];
      if (c->role != TC_ROLE_CONTROLLER || !c->alive) continue;
      if (c->next_pose_us <= t) {
        send_pose(c, t);
        c->next_pose_us += period;
        if (c->next_pose_us <= t) c->next_pose_us = t + period;
        watch(r, ep, c);
      }
      if (c->next_pose_us < next) next = c->next_pose_us;
    }
    uint64_t wait = next > t ? next - t : 0;
    if (wait > 10000) wait = 10000;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait * 1000};
    int n = fine_wait ? epoll_pwait2(ep, evs, TL_EVENTS, &ts, NULL) : -1;
    if (n < 0 && errno == ENOSYS) fine_wait = 0; /* before Linux 5.11: whole milliseconds */
    if (!fine_wait) n = epoll_wait(ep, evs, TL_EVENTS, (int)((wait + 999) / 1000));
    if (n < 0 && errno != EINTR) {
      note_error(r, "epoll_pwait2: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      client *c = evs[i].data.ptr;
      uint32_t e = evs[i].events;
      pump_client(c, (short)((e & EPOLLIN ? POLLIN : 0) | (e & EPOLLOUT ? POLLOUT : 0) |
                             (e & EPOLLHUP ? POLLHUP : 0) | (e & EPOLLERR ? POLLERR : 0)));
      watch(r, ep, c);
    }
  }
  cpu_take(o->daemon_pid, &r->cpu_end);
  close(ep);
}

/* ---- the report ----------------------------------------------------------------------- */

static void add_hist(cJSON *o, const char *name, const tl_hist *h) {
  cJSON *j = cJSON_AddObjectToObject(o, name);
  cJSON_AddNumberToObject(j, "n", (double)h->count);
  cJSON_AddNumberToObject(j, "p50", tl_hist_quantile(h, 0.5) / 1000.0);
  cJSON_AddNumberToObject(j, "p99", tl_hist_quantile(h, 0.99) / 1000.0);
  cJSON_AddNumberToObject(j, "max", h->count ? (double)h->max / 1000.0 : 0);
  cJSON_AddNumberToObject(j, "mean", tl_hist_mean(h) / 1000.0);
}

static const char *tname(int t) { return t == TL_WS ? "ws" : "tcp"; }

static void report(run *r, double measured_s) {
  const opts *o = &r->o;
  uint64_t frames = 0, bytes = 0, keyframes = 0;
  double min_fps = -1;
  int alive = 0;
  for (int i = 0; i < r->nc; i++) {
    const client *c = &r->c[i];
    frames += c->frames;
    bytes += c->bytes;
    keyframes += c->keyframes;
    alive += c->alive;
    double fps = measured_s > 0 ? (double)c->frames / measured_s : 0;
    if (min_fps < 0 || fps < min_fps) min_fps = fps;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "tool", "tissueload");
  cJSON_AddNumberToObject(j, "sessions", o->sessions);
  cJSON_AddNumberToObject(j, "observers_per_session", o->observers);
  cJSON_AddNumberToObject(j, "controllers_per_session", o->controllers);
  cJSON_AddStringToObject(j, "observer_transport", tname(o->obs_transport));
  cJSON_AddStringToObject(j, "controller_transport", tname(o->ctl_transport));
  cJSON_AddNumberToObject(j, "clients", r->nc);
  cJSON_AddNumberToObject(j, "clients_alive", alive);
  cJSON_AddNumberToObject(j, "measured_s", measured_s);
  cJSON_AddNumberToObject(j, "pose_rate_hz", o->pose_rate);
  cJSON_AddNumberToObject(j, "substeps", o->substeps);
  cJSON *vc = cJSON_AddArrayToObject(j, "vertex_count");
  for (int s = 0; s < o->sessions; s++)
    cJSON_AddItemToArray(vc, cJSON_CreateNumber(r->s[s].vertex_count));
  add_hist(j, "pose_to_frame_ms", &r->pose_frame);
  add_hist(j, "pose_to_force_ms", &r->pose_force);
  add_hist(j, "frame_lag_ms", &r->lag);
  cJSON_AddNumberToObject(j, "frames", (double)frames);
  cJSON_AddNumberToObject(j, "frames_per_s", measured_s > 0 ? (double)frames / measured_s : 0);
  cJSON_AddNumberToObject(j, "frames_per_s_per_client",
                          measured_s > 0 && r->nc ? (double)frames / measured_s / r->nc : 0);
  cJSON_AddNumberToObject(j, "min_client_frames_per_s", min_fps < 0 ? 0 : min_fps);
  cJSON_AddNumberToObject(j, "bytes_per_frame", frames ? (double)bytes / (double)frames : 0);
  cJSON_AddNumberToObject(j, "keyframes", (double)keyframes);
  cJSON_AddNumberToObject(j, "frames_behind_real_time", (double)r->frames_behind);
  cJSON_AddNumberToObject(j, "resyncs", (double)r->resyncs);
  cJSON_AddNumberToObject(j, "dropped", (double)r->dropped);
  cJSON_AddNumberToObject(j, "poses_sent", (double)r->poses_sent);
  cJSON_AddNumberToObject(j, "send_failures", (double)r->send_failures);
  cJSON_AddNumberToObject(j, "decode_errors", (double)r->decode_errors);
  cJSON_AddNumberToObject(j, "errors", (double)r->errors);
  if (r->first_error[0]) cJSON_AddStringToObject(j, "first_error", r->first_error);
  cJSON *cs = cJSON_AddObjectToObject(j, "codecs_seen");
  for (uint32_t k = 1; k < 4; k++)
    if (r->codec_seen[k]) cJSON_AddNumberToObject(cs, ts_codec_name(k), (double)r->codec_seen[k]);
  if (r->rec) cJSON_AddNumberToObject(j, "recorded_frames", r->rec_frames);
  if (r->measuring) cpu_report(j, o->daemon_pid, &r->cpu_start, &r->cpu_end, measured_s);
  char *s = cJSON_PrintUnformatted(j);
  if (s) printf("%s\n", s);
  fflush(stdout);
  free(s);
  cJSON_Delete(j);
}

/* Ends the sessions this run made, through their first controller (only a
 * controller may), so that they stop simulating on the daemon. */
static void end_sessions(run *r) {
  for (int i = 0; i < r->nc; i++) {
    client *c = &r->c[i];
    if (c->role != TC_ROLE_CONTROLLER || !c->alive) continue;
    if (i > 0 && r->c[i - 1].sidx == c->sidx && r->c[i - 1].role == TC_ROLE_CONTROLLER) continue;
    if (c->tc) {
      tc_end_session(c->tc, r->s[c->sidx].id);
    } else {
      Tissued__V1__EndSession m = TISSUED__V1__END_SESSION__INIT;
      m.session_id = r->s[c->sidx].id;
      Envelope e = TISSUED__V1__ENVELOPE__INIT;
      e.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
      e.end_session = &m;
      Envelope *rep = NULL;
      char err[128];
      if (link_request(c, &e, TISSUED__V1__ENVELOPE__BODY_ACK, &rep, err, sizeof err) == 0)
        tissued__v1__envelope__free_unpacked(rep, NULL);
    }
  }
}

static void raise_fd_limit(int need) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)need + 64) {
    rl.rlim_cur = rl.rlim_max < (rlim_t)need + 64 ? rl.rlim_max : (rlim_t)need + 64;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  run *r = calloc(1, sizeof *r);
  if (!r) return 1;
  if (parse_opts(argc, argv, &r->o)) {
    free(r);
    return 2;
  }
  const opts *o = &r->o;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_sigint);
  prctl(PR_SET_TIMERSLACK, 1000UL); /* 1 us: poses at 1 kHz need precise wake-ups */
  int per = o->observers + o->controllers;
  r->nc = per * o->sessions;
  raise_fd_limit(r->nc + 4);
  r->c = calloc((size_t)(r->nc ? r->nc : 1), sizeof *r->c);
  if (!r->c) return 1;
  char err[512];
  int status = 1;

  /* the admin connection creates the sessions */
  client admin;
  memset(&admin, 0, sizeof admin);
  admin.r = r;
  admin.alive = 1;
  int at = o->tcp_port ? TL_TCP : TL_WS;
  admin.ln = tl_link_open(at, o->host, at == TL_TCP ? o->tcp_port : o->http_port,
                          TL_SETUP_TIMEOUT_MS, err, sizeof err);
  if (!admin.ln || link_hello(&admin, o->key, err, sizeof err)) {
    fprintf(stderr, "tissueload: %s\n", err);
    goto out;
  }
  for (int s = 0; s < o->sessions; s++) {
    admin.refused_code = 0;
    if (create_session(&admin, o->layers[s % o->n_layers], o->substeps, &r->s[s], err,
                       sizeof err)) {
      fprintf(stderr, "tissueload: creating session %d: %s\n", s + 1, err);
      if (admin.refused_code) { /* the daemon said no: say so as JSON (bench_stream) */
        cJSON *j = cJSON_CreateObject();
        cJSON *f = cJSON_AddObjectToObject(j, "refused");
        cJSON_AddStringToObject(f, "request", "CreateSession");
        cJSON_AddNumberToObject(f, "code", admin.refused_code);
        cJSON_AddStringToObject(f, "message", err);
        cJSON_AddNumberToObject(j, "substeps", o->substeps);
        char *txt = cJSON_PrintUnformatted(j);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
        status = 3;
      }
      goto out;
    }
  }
  if (!o->quiet)
    fprintf(stderr, "tissueload: %d session(s) of %u vertices; connecting %d clients\n",
            o->sessions, r->s[0].vertex_count, r->nc);

  for (int s = 0, k = 0; s < o->sessions; s++) {
    for (int i = 0; i < per; i++, k++) {
      client *c = &r->c[k];
      int ctl = i < o->controllers;
      int tr = ctl ? o->ctl_transport : o->obs_transport;
      int dec = o->decode == 2 || (o->decode == 1 && i == o->controllers);
      if (open_client(r, c, tr, ctl ? TC_ROLE_CONTROLLER : TC_ROLE_OBSERVER, s, dec, err,
                      sizeof err)) {
        fprintf(stderr, "tissueload: session %u, %s %d over %s: %s\n", r->s[s].id,
                ctl ? "controller" : "observer", ctl ? i + 1 : i - o->controllers + 1,
                tname(tr), err);
        r->nc = k + 1;
        goto out;
      }
      if (ctl) c->path_z = (i - (o->controllers - 1) / 2.0) * 0.025;
    }
  }
  if (o->record) {
    r->rec_file = fopen(o->record, "wb");
    if (!r->rec_file) {
      fprintf(stderr, "tissueload: cannot write %s: %s\n", o->record, strerror(errno));
      goto out;
    }
    r->rec = calloc(1, sizeof *r->rec);
    if (!r->rec) goto out;
    client *c = r->rec;
    c->r = r;
    c->recorder = 1;
    c->decode = 1;
    c->alive = 1;
    c->ln = tl_link_open(TL_TCP, o->host, o->tcp_port, TL_SETUP_TIMEOUT_MS, err, sizeof err);
    if (!c->ln || link_hello(c, o->key, err, sizeof err)) {
      fprintf(stderr, "tissueload: recorder: %s\n", err);
      goto out;
    }
  }
  if (!o->quiet)
    fprintf(stderr, "tissueload: running %.1f s (+%.1f s warm-up)\n", o->duration, o->warmup);

  uint64_t t0 = now_us();
  uint64_t t_measure = t0 + (uint64_t)(o->warmup * 1e6);
  uint64_t t_end = t_measure + (uint64_t)(o->duration * 1e6);
  event_loop(r, t_measure, t_end);
  uint64_t t1 = now_us();
  double measured = t1 > t_measure ? (double)(t1 - t_measure) * 1e-6 : 0;
  report(r, measured);
  status = 0;
  end_sessions(r);
  if (o->record && r->o.record_frames && r->rec_frames < r->o.record_frames) {
    fprintf(stderr, "tissueload: recorded only %d of %d frames\n", r->rec_frames,
            r->o.record_frames);
    status = 1;
  }
out:
  for (int i = 0; i < r->nc; i++) close_client(&r->c[i]);
  if (r->rec) {
    close_client(r->rec);
    free(r->rec);
  }
  if (r->rec_file && fclose(r->rec_file) != 0) status = 1;
  close_client(&admin);
  free(r->c);
  free(r);
  return status;
}
