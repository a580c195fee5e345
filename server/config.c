/*
 * config.c: embedded defaults, the INI file reader (inih) and the flag parser
 * for tissued. One table lists every setting with its type, range and help
 * text, so --help, the file and the flags can never disagree.
 */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "auth.h"
#include "core/ts_tool_contact.h"
#include "session_sleep.h"
#include "session_self.h"
#include "log.h"

#ifndef TS_DEFAULT_WEB_ROOT
#define TS_DEFAULT_WEB_ROOT "client-web"
#endif
#ifndef TS_DEFAULT_PROTO_FILE
#define TS_DEFAULT_PROTO_FILE "proto/tissue.proto"
#endif
#ifndef TS_VERSION
#define TS_VERSION "0"
#endif

/* T_DBL_AUTO: a number in [lo, hi], or "auto" (stored as -1) */
enum { T_STR, T_INT, T_DBL, T_SIZE, T_LOG, T_DBL_AUTO };

typedef struct setting {
  const char *name;
  int type;
  size_t off;
  size_t size; /* strings: buffer size */
  double lo, hi;
  const char *help;
} setting;

#define OFF(f) offsetof(ts_config, f)
static const setting settings[] = {
    {"host", T_STR, OFF(host), sizeof(((ts_config *)0)->host), 0, 0,
     "address to listen on (TCP and HTTP)"},
    {"tcp-port", T_INT, OFF(tcp_port), 0, 0, 65535, "TCP protocol port; 0 picks a free one"},
    {"http-port", T_INT, OFF(http_port), 0, 0, 65535,
     "HTTP port (web client, /healthz, /ws); 0 picks a free one"},
    {"data-dir", T_STR, OFF(data_dir), sizeof(((ts_config *)0)->data_dir), 0, 0,
     "directory for the SQLite database (created if missing)"},
    {"web-root", T_STR, OFF(web_root), sizeof(((ts_config *)0)->web_root), 0, 0,
     "directory of the web client to serve (without its index.html: a warning, no page)"},
    {"proto-file", T_STR, OFF(proto_file), sizeof(((ts_config *)0)->proto_file), 0, 0,
     "tissue.proto served to the web client"},
    {"ports-file", T_STR, OFF(ports_file), sizeof(((ts_config *)0)->ports_file), 0, 0,
     "write {\"tcp\":N,\"http\":M} here once listening"},
    {"physics-threads", T_INT, OFF(physics_threads), 0, 0, 256,
     "physics threads; 0 = one per core"},
    {"dt", T_DBL, OFF(dt), 0, 1e-5, 0.01, "physics time step in seconds"},
    {"frame-rate", T_INT, OFF(frame_rate), 0, 1, 1000, "frames per second per session"},
    {"patch-resolution", T_INT, OFF(patch_resolution), 0, 3, 512,
     "built-in patch: nodes along an edge of each sheet"},
    {"max-message", T_SIZE, OFF(max_message), 0, 1024, 1 << 30,
     "largest message accepted, bytes"},
    {"soft-output-limit", T_SIZE, OFF(soft_output_limit), 0, 1024, 1 << 30,
     "per-client queued bytes above which frames are skipped"},
    {"soft-output-grace", T_DBL, OFF(soft_output_grace), 0, 0, 60,
     "seconds a client may stay over the soft limit before it is resynchronised"},
    {"hard-output-limit", T_SIZE, OFF(hard_output_limit), 0, 4096, 1u << 31,
     "per-client queued bytes above which the client is dropped"},
    {"max-sessions", T_INT, OFF(max_sessions), 0, 1, 100000, "sessions per server"},
    {"max-clients-per-session", T_INT, OFF(max_clients_per_session), 0, 1, 100000,
     "clients per session"},
    {"max-tools", T_INT, OFF(max_tools), 0, 1, 8, "tools per session"},
    {"session-idle-timeout", T_DBL, OFF(session_idle_timeout), 0, 1, 1e7,
     "seconds a session lives with no client"},
    {"max-mesh-bytes", T_SIZE, OFF(max_mesh_bytes), 0, 84, 1u << 30,
     "largest mesh file a client may upload, bytes (an upload is also one message: "
     "see max-message)"},
    {"max-mesh-triangles", T_INT, OFF(max_mesh_triangles), 0, 1, 4000000,
     "largest uploaded mesh, triangles after triangulation"},
    {"max-mesh-vertices", T_INT, OFF(max_mesh_vertices), 0, 3, 4000000,
     "largest uploaded mesh, vertices (STL: after welding duplicates)"},
    {"tool-mesh", T_STR, OFF(tool_mesh), sizeof(((ts_config *)0)->tool_mesh), 0, 0,
     "rigid tool meshes controllers may join with, NAME=FILE[@SCALE] comma-separated "
     "(OBJ, STL or PLY; SCALE: metres per file unit, default 1), e.g. "
     "probe=/srv/tools/probe.obj@0.001; read at start"},
    {"server-key", T_STR, OFF(server_key), sizeof(((ts_config *)0)->server_key), 0, 0,
     "key(s) that may create sessions, comma-separated, at least 16 characters each; "
     "default: $TISSUED_SERVER_KEY, else <data-dir>/server.key (generated and printed once)"},
    {"allowed-origins", T_STR, OFF(allowed_origins), sizeof(((ts_config *)0)->allowed_origins),
     0, 0,
     "WebSocket page origins allowed besides the daemon's own, comma-separated, each "
     "scheme://host[:port] as browsers send it (e.g. https://sim.example.org, no path); * "
     "allows any"},
    {"max-sessions-per-key", T_INT, OFF(max_sessions_per_key), 0, 1, 100000,
     "live sessions one server key may have created"},
    {"max-pose-rate", T_INT, OFF(max_pose_rate), 0, 1, 1000000,
     "tool poses per second accepted from one controller; more are dropped"},
    {"handshake-timeout", T_DBL, OFF(handshake_timeout), 0, 0.05, 3600,
     "seconds a new connection has to send its Hello (WebSocket: also the HTTP upgrade); "
     "then it is closed"},
    {"ws-ping-interval", T_DBL, OFF(ws_ping_interval), 0, 0.05, 3600,
     "seconds between pings the server sends to each WebSocket client"},
    {"client-timeout", T_DBL, OFF(client_timeout), 0, 0.1, 86400,
     "seconds a WebSocket client may stay silent (no message, no pong) before it is closed; "
     "also how long any client may leave sent data unacknowledged (TCP_USER_TIMEOUT)"},
    {"tcp-keepalive", T_INT, OFF(tcp_keepalive), 0, 1, 7200,
     "seconds of silence on a connection before TCP keepalive probes start (then 3 probes, "
     "10 s apart, before a dead peer is dropped)"},
    {"shutdown-timeout", T_DBL, OFF(shutdown_timeout), 0, 0.1, 3600,
     "seconds SIGTERM/SIGINT may take to finish (clients told, writes done, a session build "
     "under way stopped at its next stage or pass, a step under way at its next substep); "
     "after that the daemon exits with status 3"},
    {"stall-threshold", T_DBL, OFF(stall_threshold), 0, 1e-6, 60,
     "seconds: a physics step that takes longer is a stall (logged once per episode, counted "
     "in /metrics, flagged in frames)"},
    {"tool-max-speed", T_DBL, OFF(tool_max_speed), 0, 0, 1000,
     "m/s: the fastest a tool follows its controller's poses (a farther pose is approached at "
     "this speed, so that no pose can throw the tissue); 0: every pose taken at once"},
    {"builder-nice", T_INT, OFF(builder_nice), 0, 0, 19,
     "niceness added to the thread that builds new sessions' tissues (seconds of a core for "
     "a large upload), so that the sessions already running keep their steps while it "
     "builds; 0: the physics threads' priority (builds faster on a busy machine, the running "
     "sessions fall behind meanwhile)"},
    {"slow-lane-load", T_DBL, OFF(slow_lane_load), 0, 0, 1000,
     "a session whose steps take more CPU time than this many times the time they simulate "
     "(1: it cannot keep real time on a whole core; a large upload, a tiny dt) moves to a "
     "physics thread of its own kind (tissued-slow0, ..., one per real-time thread), so that "
     "it does not hold back the sessions sharing its thread; it comes back under half of "
     "this. 0: no slow threads (such a session stays on a real-time thread)"},
    {"slow-lane-nice", T_INT, OFF(slow_lane_nice), 0, 0, 19,
     "niceness added to the slow physics threads (--slow-lane-load), so that the real-time sessions "
     "keep their steps; 0: their priority"},
    {"session-trial", T_INT, OFF(session_trial), 0, 0, 1,
     "1: a new mass-spring or XPBD session takes a few steps from rest on the builder before "
     "it starts (20 ms of CPU time, or one step of a tissue whose step takes longer), which "
     "measure what it costs: over --slow-lane-load it starts on a slow physics thread, and its "
     "client hears the figure (SessionCreated.step_load) and, when it will run in slow "
     "motion, a warning; 0: no trial (the sessions' steps are measured once they run)"},
    {"max-step-load", T_DBL, OFF(max_step_load), 0, 0, 1e6,
     "a new session whose trial steps (--session-trial) take more CPU time than this many "
     "times the time they simulate is refused (TS_ETOOBIG, saying its load), so that nobody "
     "starts a tissue that would run at a thousandth of real time and hold a core for it; "
     "0: no limit"},
    {"rebalance", T_INT, OFF(rebalance), 0, 0, 1,
     "1: once a second, a session moves from the busiest real-time physics thread (over 0.8 "
     "of a core, by the sessions' measured loads) to the least busy one when that evens them "
     "out; 0: every session stays on the thread it was placed on"},
    {"sleep-speed", T_DBL, OFF(sleep_speed), 0, 0, 0.01,
     "m/s: a mass-spring or XPBD session's tissue whose every node stays slower than this "
     "for half a second of simulated time, with no tool touching or near it, sleeps: its "
     "steps cost next to nothing until a tool comes near, a reset or a refinement; 0: never; "
     "at most 0.01 (1 cm/s: a tissue still visibly moving)"},
    {"tool-stiffness", T_DBL, OFF(tool_stiffness), 0, TS_TOOL_CONTACT_STIFFNESS_MIN,
     TS_TOOL_CONTACT_STIFFNESS_MAX,
     "N/m: the wall two tools of a session feel (penalty per metre of overlap; 1000 = 1 N/mm) "
     "in sessions that do not choose one (CreateSession.tool_stiffness); 100..20000, which "
     "desk haptic devices can render"},
    {"qs-interval", T_DBL, OFF(qs_interval), 0, 1e-4, 1,
     "quasi-static sessions: seconds of simulated time per interval (one press per moving tool)"},
    {"train-after-samples", T_INT, OFF(train_after_samples), 0, 0, 100000000,
     "quasi-static sessions train their shortcut by themselves after this many samples; 0 never"},
    {"max-training-samples", T_INT, OFF(max_training_samples), 0, 1, 100000000,
     "samples one quasi-static session records at most (488 bytes each, allocated as they "
     "arrive)"},
    {"qs-refine-edge", T_DBL_AUTO, OFF(qs_refine_edge), 0, 0, 0.1,
     "quasi-static sessions: each press is solved on its region copied and refined by "
     "longest-edge bisection to edges of at most this many metres (samples stay on the "
     "tissue's nodes); auto: the tissue's mean outer-surface edge (splits every longer edge "
     "in range once); 0: solved on the tissue's own mesh"},
    {"local-mass-scaling", T_INT, OFF(local_mass_scaling), 0, 0, 1,
     "mass-spring sessions: 1 (default) adds inertia to a live refinement's region, only to "
     "the nodes the refinement made faster than the unrefined tissue, so the substeps per step "
     "stay about the unrefined count (statics unchanged, that region's motion slower); 0: "
     "physical masses (a refinement then about doubles the substeps)"},
    {"self-contact", T_INT, OFF(self_contact), 0, 0, 1,
     "1: every mass-spring and XPBD session keeps its tissue from passing through itself "
     "(tissue self-contact, as CreateSession.self_contact asks for one session); 0 "
     "(default): only sessions that ask; a tissue over --self-contact-max-nodes then runs "
     "without it (logged, SessionInfo.self_contact false)"},
    {"self-contact-max-nodes", T_INT, OFF(self_contact_max_nodes), 0, 0, 10000000,
     "surface nodes of a tissue that self-contact runs on at most: its detection's cost per "
     "step grows with them and its physics thread steps other sessions too; a CreateSession "
     "asking for self-contact on a larger tissue is refused (TS_ETOOBIG)"},
    {"log-level", T_LOG, OFF(log_level), 0, 0, 0, "error, warn, info or debug"},
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])

void ts_config_defaults(ts_config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "%s", "127.0.0.1");
  c->tcp_port = 7070;
  c->http_port = 8080;
  snprintf(c->data_dir, sizeof c->data_dir, "%s", "data");
  snprintf(c->web_root, sizeof c->web_root, "%s", TS_DEFAULT_WEB_ROOT);
  snprintf(c->proto_file, sizeof c->proto_file, "%s", TS_DEFAULT_PROTO_FILE);
  c->physics_threads = 0;
  c->dt = 0.001;
  c->frame_rate = 60;
  c->patch_resolution = TS_DEFAULT_PATCH_RESOLUTION;
  c->max_message = 16u << 20;
  c->soft_output_limit = 1u << 20;
  c->hard_output_limit = 8u << 20;
  c->soft_output_grace = 0.5;
  c->max_sessions = 64;
  c->max_clients_per_session = 256;
  c->max_tools = 4;
  c->session_idle_timeout = 600;
  c->max_mesh_bytes = 12u << 20;
  c->max_mesh_triangles = 200000;
  c->max_mesh_vertices = 100000;
  c->max_sessions_per_key = 16;
  c->max_pose_rate = 2000;
  c->handshake_timeout = 10;
  c->ws_ping_interval = 15;
  c->client_timeout = 45;
  c->tcp_keepalive = 30;
  c->shutdown_timeout = 5;
  c->stall_threshold = 0.1;
  c->tool_max_speed = 1.0;
  c->sleep_speed = TS_SLEEP_SPEED_DEFAULT;
  c->builder_nice = 10;
  c->slow_lane_load = 1.0;
  c->slow_lane_nice = 10;
  c->rebalance = 1;
  c->session_trial = 1;
  c->tool_stiffness = TS_TOOL_CONTACT_STIFFNESS_DEFAULT;
  c->qs_interval = 0.005;
  c->train_after_samples = 20000;
  c->max_training_samples = 100000;
  c->qs_refine_edge = -1; /* auto */
  c->local_mass_scaling = 1;
  c->self_contact_max_nodes = TS_SELF_CONTACT_MAX_NODES_DEFAULT;
  c->log_level = TS_LOG_INFO;
}

static const setting *find_setting(const char *key) {
  char norm[64];
  size_t n = strlen(key);
  if (n >= sizeof norm) return NULL;
  for (size_t i = 0; i <= n; i++) norm[i] = key[i] == '_' ? '-' : key[i];
  for (size_t i = 0; i < N_SETTINGS; i++)
    if (strcmp(settings[i].name, norm) == 0) return &settings[i];
  return NULL;
}

int ts_config_set(ts_config *c, const char *key, const char *value, char *err, size_t errcap) {
  const setting *s = find_setting(key);
  if (!s) {
    snprintf(err, errcap, "unknown setting '%s' (see --help)", key);
    return -1;
  }
  char *base = (char *)c + s->off;
  char *end = NULL;
  errno = 0;
  switch (s->type) {
  case T_STR:
    if (strlen(value) >= s->size) {
      snprintf(err, errcap, "%s: value longer than %zu characters", s->name, s->size - 1);
      return -1;
    }
    if (strcmp(s->name, "allowed-origins") == 0 && ts_auth_origins_check(value, err, errcap))
      return -1;
    memcpy(base, value, strlen(value) + 1);
    return 0;
  case T_INT: {
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < s->lo || v > s->hi) {
      snprintf(err, errcap, "%s: '%s' is not a whole number in [%.0f, %.0f]", s->name, value, s->lo,
               s->hi);
      return -1;
    }
    *(int *)base = (int)v;
    return 0;
  }
  case T_DBL_AUTO:
    if (strcmp(value, "auto") == 0) {
      *(double *)base = -1;
      return 0;
    }
    /* fall through */
  case T_DBL: {
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v) || v < s->lo || v > s->hi) {
      snprintf(err, errcap, "%s: '%s' is not a number in [%g, %g]%s", s->name, value, s->lo, s->hi,
               s->type == T_DBL_AUTO ? " or auto" : "");
      return -1;
    }
    *(double *)base = v;
    return 0;
  }
  case T_SIZE: {
    unsigned long long v = strtoull(value, &end, 10);
    /* no '-' anywhere: strtoull skips leading blanks and negates modulo
     * 2^64, so " -18446744073709550592" would read as 1024 */
    if (errno || end == value || *end || strchr(value, '-') || (double)v < s->lo ||
        (double)v > s->hi) {
      snprintf(err, errcap, "%s: '%s' is not a size in [%.0f, %.0f] bytes", s->name, value, s->lo,
               s->hi);
      return -1;
    }
    *(size_t *)base = (size_t)v;
    return 0;
  }
  case T_LOG: {
    int lv = ts_log_parse_level(value);
    if (lv < 0) {
      snprintf(err, errcap, "%s: '%s' is not one of error, warn, info, debug", s->name, value);
      return -1;
    }
    *(int *)base = lv;
    return 0;
  }
  }
  return -1;
}

/* The text inih reads, a line at a time, counted as inih counts them (one
 * per reader call, a whole line since longer ones are refused before:
 * ts_config_load_text), so that a setting's failure and a syntax error can
 * be told apart by their line: inih returns only the first line with an
 * error of either kind. */
typedef struct ini_src {
  const char *p;
  int line; /* of the piece last read */
} ini_src;

static char *ini_read(char *str, int num, void *stream) {
  ini_src *s = stream;
  if (num < 2 || !*s->p) return NULL;
  int n = 0;
  while (n < num - 1 && s->p[n]) {
    str[n] = s->p[n];
    if (s->p[n++] == '\n') break;
  }
  str[n] = '\0';
  s->p += n;
  s->line++;
  return str;
}

typedef struct ini_ctx {
  ts_config *c;
  char *err;
  size_t errcap;
  int failed;
  int fail_line; /* the line of the first failure (ini_src's count) */
  const ini_src *src;
} ini_ctx;

static int config_ini_line(void *user, const char *section, const char *name, const char *value) {
  ini_ctx *x = user;
  if (x->failed) return 0;
  if (!section[0]) {
    snprintf(x->err, x->errcap, "%s: a setting before the [server] section", name);
    x->failed = 1;
  } else if (strcmp(section, "server") != 0) {
    snprintf(x->err, x->errcap, "unknown section [%s] (only [server])", section);
    x->failed = 1;
  } else if (ts_config_set(x->c, name, value, x->err, x->errcap)) {
    x->failed = 1;
  }
  if (x->failed) x->fail_line = x->src->line;
  return !x->failed;
}

/* inih's result as the daemon's message: rc is ini_parse's (-1 cannot open,
 * -2 out of memory, N > 0 the first bad line), inner the handler's reason. */
static int ini_result(int rc, const char *name, const char *inner, char *err, size_t errcap) {
  if (rc == -1) {
    snprintf(err, errcap, "%s: cannot open: %s", name, strerror(errno));
    return -1;
  }
  if (rc == -2) {
    snprintf(err, errcap, "%s: out of memory", name);
    return -1;
  }
  if (rc > 0) {
    snprintf(err, errcap, "%s:%d: %s", name, rc, inner[0] ? inner : "syntax error");
    return -1;
  }
  return 0;
}

/* What is wrong with line `line` of text (ini_src's count), which inih
 * found no setting in: a section header not closed, or a line that is
 * neither a setting, a [section] nor a comment. */
static void ini_syntax(const char *text, int line, char *why, size_t cap) {
  char buf[INI_MAX_LINE];
  ini_src s = {text, 0};
  const char *got = NULL;
  while (s.line < line && (got = ini_read(buf, sizeof buf, &s)) != NULL) {
  }
  while (got && (*got == ' ' || *got == '\t')) got++;
  if (got && *got == '[')
    snprintf(why, cap, "a section header without its closing ']'");
  else
    snprintf(why, cap, "not a setting (name = value), a [section] or a comment");
}

/* Largest configuration file read (bytes): a few dozen settings take a few
 * kilobytes; anything past this is not one (a device, a log given by mistake). */
#define CONFIG_FILE_MAX (1u << 20)

int ts_config_load_file(ts_config *c, const char *path, char *err, size_t errcap) {
  /* read whole and checked first: ini_parse would take a directory as an
   * empty file (the defaults, silently), read a device such as /dev/zero
   * for ever, and stop at a NUL byte as at the end of the file */
  FILE *f = fopen(path, "rb");
  if (!f) return ini_result(-1, path, "", err, errcap);
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    snprintf(err, errcap, "%s: not a regular file", path);
    return -1;
  }
  if (sb.st_size > (off_t)CONFIG_FILE_MAX) {
    fclose(f);
    snprintf(err, errcap, "%s: %lld bytes, over the %u a configuration file may have", path,
             (long long)sb.st_size, CONFIG_FILE_MAX);
    return -1;
  }
  char *text = malloc((size_t)sb.st_size + 1);
  if (!text) {
    fclose(f);
    return ini_result(-2, path, "", err, errcap);
  }
  const size_t n = fread(text, 1, (size_t)sb.st_size, f);
  const int bad_read = ferror(f);
  fclose(f);
  if (bad_read) {
    free(text);
    snprintf(err, errcap, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  text[n] = '\0';
  const char *nul = memchr(text, '\0', n);
  if (nul) {
    int line = 1;
    for (const char *p = text; p < nul; p++) line += *p == '\n';
    free(text);
    snprintf(err, errcap, "%s:%d: a NUL byte (not a text file)", path, line);
    return -1;
  }
  const int rc = ts_config_load_text(c, text, path, err, errcap);
  free(text);
  return rc;
}

int ts_config_load_text(ts_config *c, const char *text, const char *name, char *err,
                        size_t errcap) {
  /* inih reads a line in pieces of INI_MAX_LINE - 1 bytes and takes the
   * rest of a longer one for a line of its own (a long comment's tail then
   * fails as a setting, a line number later than it is) */
  int line = 1;
  for (const char *p = text, *start = text;; p++) {
    if (*p == '\n' || !*p) {
      if (p - start > INI_MAX_LINE - 2) {
        snprintf(err, errcap, "%s:%d: %ld characters, over the %d a line may have", name, line,
                 (long)(p - start), INI_MAX_LINE - 2);
        return -1;
      }
      if (!*p) break;
      line++;
      start = p + 1;
    }
  }
  char inner[256] = "";
  ini_src src = {text, 0};
  ini_ctx x = {c, inner, sizeof inner, 0, 0, &src};
  const int rc = ini_parse_stream(ini_read, &src, config_ini_line, &x);
  /* the first error is a line inih could not read, before any setting
   * failed or after one on an earlier line */
  if (rc > 0 && !(x.failed && x.fail_line == rc)) ini_syntax(text, rc, inner, sizeof inner);
  return ini_result(rc, name, inner, err, errcap);
}

void ts_config_print_help(const char *argv0) {
  ts_config d;
  ts_config_defaults(&d);
  printf("usage: %s [--config FILE] [--SETTING VALUE | --SETTING=VALUE ...]\n\n"
         "tissued hosts live soft-tissue simulation sessions. Clients connect over TCP\n"
         "(length-prefixed protobuf Envelopes) or WebSocket (/ws on the HTTP port); the\n"
         "HTTP port also serves the web client. With no options it runs on embedded\n"
         "defaults: database in ./data, web client at http://127.0.0.1:8080/.\n\n"
         "options:\n"
         "  --config FILE              read settings from an INI file ([server] section,\n"
         "                             keys as below); flags given later override it\n"
         "  -h, --help                 print this help and exit\n"
         "  --version                  print the version and exit\n",
         argv0);
  for (size_t i = 0; i < N_SETTINGS; i++) {
    const setting *s = &settings[i];
    char def[600];
    const char *base = (const char *)&d + s->off;
    switch (s->type) {
    case T_STR: snprintf(def, sizeof def, "\"%s\"", base); break;
    case T_INT: snprintf(def, sizeof def, "%d", *(const int *)base); break;
    case T_DBL: snprintf(def, sizeof def, "%g", *(const double *)base); break;
    case T_DBL_AUTO:
      if (*(const double *)base < 0)
        snprintf(def, sizeof def, "auto");
      else
        snprintf(def, sizeof def, "%g", *(const double *)base);
      break;
    case T_SIZE: snprintf(def, sizeof def, "%zu", *(const size_t *)base); break;
    default: snprintf(def, sizeof def, "info"); break;
    }
    printf("  --%-24s %s (default %s)\n", s->name, s->help, def);
  }
  printf("\nSignals: SIGINT or SIGTERM shut down cleanly: listeners close, every client is\n"
         "told (Error TS_ESHUTDOWN; WebSocket close 1001), queued database writes finish,\n"
         "a session build under way stops at its next stage or pass and queued ones do not\n"
         "start, a step under way at its next substep, exit 0; after shutdown-timeout\n"
         "seconds it gives up and exits 3.\n"
         "Exit status: 0 stopped cleanly, 1 could not start (a setting the start refuses,\n"
         "a port in use, the database), 2 a bad command line or configuration file,\n"
         "3 the shutdown timed out.\n");
}

int ts_config_parse_args(ts_config *c, int argc, char **argv, char *err, size_t errcap) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      ts_config_print_help(argv[0]);
      return 1;
    }
    if (strcmp(a, "--version") == 0) {
      printf("tissued %s\n", TS_VERSION);
      return 1;
    }
    if (strncmp(a, "--", 2) != 0) {
      snprintf(err, errcap, "unexpected argument '%s' (see --help)", a);
      return -1;
    }
    const char *key = a + 2;
    const char *eq = strchr(key, '=');
    char keybuf[64];
    const char *value;
    if (eq) {
      size_t kl = (size_t)(eq - key);
      if (kl >= sizeof keybuf) {
        snprintf(err, errcap, "unknown option '%s'", a);
        return -1;
      }
      memcpy(keybuf, key, kl);
      keybuf[kl] = 0;
      key = keybuf;
      value = eq + 1;
    } else {
      if (i + 1 >= argc) {
        snprintf(err, errcap, "option '%s' needs a value", a);
        return -1;
      }
      value = argv[++i];
    }
    if (strcmp(key, "config") == 0) {
      if (ts_config_load_file(c, value, err, errcap)) return -1;
      continue;
    }
    if (ts_config_set(c, key, value, err, errcap)) return -1;
  }
  if (c->client_timeout <= c->ws_ping_interval) {
    snprintf(err, errcap, "client-timeout must be longer than ws-ping-interval");
    return -1;
  }
  if (c->soft_output_limit > c->hard_output_limit) {
    snprintf(err, errcap, "soft-output-limit must not exceed hard-output-limit");
    return -1;
  }
  if (c->max_step_load > 0 && !c->session_trial) {
    snprintf(err, errcap, "max-step-load needs session-trial 1 (the trial steps measure the load)");
    return -1;
  }
  return 0;
}
