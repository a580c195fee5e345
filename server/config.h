/*
 * config.h: the daemon's settings. Defaults are embedded so that `tissued`
 * runs with no file and no flags; an INI file (--config) and then command-line
 * flags override them, in that order. Every value is range-checked.
 */
#ifndef TS_CONFIG_H
#define TS_CONFIG_H

/* The built-in patch's resolution when none is configured: nodes along an
 * edge of each sheet. tissuetool builds the patch with it too, so that a
 * model it trains or imports has a daemon's material identity (which
 * depends on the mesh: the resolution core's own default, 24, gives
 * another). */
#define TS_DEFAULT_PATCH_RESOLUTION 17

#include <stddef.h>

typedef struct ts_config {
  char host[64];              /* listen address, "127.0.0.1" */
  int tcp_port;               /* 7070; 0 = ephemeral */
  int http_port;              /* 8080; 0 = ephemeral */
  char data_dir[512];         /* "data": holds tissued.sqlite */
  char web_root[512];         /* client-web/ */
  char proto_file[512];       /* proto/tissue.proto */
  char ports_file[512];       /* write {"tcp":N,"http":M} here once bound; "" = no */
  int physics_threads;        /* 0 = number of cores */
  double dt;                  /* physics step, s (0.001) */
  int frame_rate;             /* frames per second published per session (60) */
  int patch_resolution;       /* built-in patch: nodes along an edge per sheet */
  size_t max_message;         /* largest accepted message, bytes */
  size_t soft_output_limit;   /* per client: over this, frames are skipped */
  size_t hard_output_limit;   /* per client: over this, the client is dropped */
  double soft_output_grace;   /* s over the soft limit before a resynchronising keyframe (0.5) */
  int max_sessions;           /* per server */
  int max_clients_per_session;
  int max_tools;              /* tools per session */
  double session_idle_timeout;/* s without clients before a session ends */
  size_t max_mesh_bytes;      /* largest uploaded mesh file, bytes (12 MiB) */
  int max_mesh_triangles;     /* largest uploaded mesh, triangles after triangulation (200000) */
  int max_mesh_vertices;      /* largest uploaded mesh, vertices (STL: after welding) (100000) */
  char tool_mesh[2048];       /* rigid tool meshes, NAME=FILE[@SCALE] comma-separated ("") */
  /* access (issue 8) */
  char server_key[1024];      /* comma-separated keys; "" = $TISSUED_SERVER_KEY or the key file */
  char allowed_origins[1024]; /* WebSocket Origins allowed besides the daemon's own; "*" = any */
  int max_sessions_per_key;   /* live sessions created with one key (16) */
  int max_pose_rate;          /* poses per second per controller (2000); more are dropped */
  double handshake_timeout;   /* s: a connection must finish its HTTP request / WebSocket
                                 upgrade and its Hello within this (10) */
  double ws_ping_interval;    /* s between WebSocket pings to an open client (15) */
  double client_timeout;      /* s: a WebSocket client that sends nothing (not even a pong)
                                 this long is closed; also the TCP user timeout for
                                 unacknowledged output on either port (45) */
  int tcp_keepalive;          /* s of silence before TCP keepalive probes start (30) */
  double shutdown_timeout;    /* s: SIGTERM must finish within this, else exit 3 (5) */
  double stall_threshold;     /* s: a physics step longer than this is a stall (0.1) */
  double tool_max_speed;      /* m/s: a tool follows its commanded pose at most this fast
                                 (core/ts_tool_proxy.h); 0: at once (1) */
  double sleep_speed;         /* m/s: a mass-spring or XPBD tissue whose nodes all stay
                                 under it half a second, with no tool near, sleeps
                                 (session_sleep.h); 0: never (1e-6) */
  int builder_nice;           /* niceness added to the session builder's thread (create.c)
                                 (10); 0: none */
  double slow_lane_load;      /* a session whose steps take more CPU time than this times
                                 the time they simulate moves to a slow thread (lane.h)
                                 (1); 0: no slow threads */
  int slow_lane_nice;         /* niceness of the slow threads (10); 0: none */
  int session_trial;          /* 1: a new session's trial steps (session_trial.h) (1); 0: none */
  double max_step_load;       /* a new session whose trial load is over this is refused (0: no
                                 limit) */
  int rebalance;              /* 1: sessions move between real-time threads to even their
                                 loads (ts_physics_balance) (1); 0: they stay */
  double tool_stiffness;      /* N/m: tool against tool penalty of sessions that do not
                                 choose one (CreateSession.tool_stiffness) (1000) */
  /* quasi-static sessions (issue 6) */
  double qs_interval;         /* s of simulated time per quasi-static interval (0.005) */
  int train_after_samples;    /* samples after which a session trains by itself; 0 never */
  int max_training_samples;   /* samples one session records at most (100000) */
  double qs_refine_edge;      /* m: presses solved on their region copied and refined by
                                 longest-edge bisection to this edge length; -1 auto (the
                                 tissue's mean outer-surface edge, the default); 0 off */
  int local_mass_scaling;     /* 1: a mass-spring session's refinements add inertia to the
                                 refined region so the substeps stay about the unrefined
                                 count (core/ts_ms_local.c; the default); 0 off */
  int self_contact;           /* 1: every mass-spring and XPBD session runs tissue
                                 self-contact (session_self.h); 0 (default): those that ask */
  int self_contact_max_nodes; /* surface nodes of a tissue that self-contact runs on at most
                                 (session_self.h); larger: refused, or off where only
                                 self_contact asked (TS_SELF_CONTACT_MAX_NODES_DEFAULT) */
  int log_level;              /* TS_LOG_* */
} ts_config;

void ts_config_defaults(ts_config *c);

/* Applies an INI file ([server] section keys equal the long flag names with
 * '_' for '-'). Returns 0, or -1 with a message in err. */
int ts_config_load_file(ts_config *c, const char *path, char *err, size_t errcap);
/* The same for INI text in memory (NUL-terminated); name stands for the file
 * in messages. The file reader and this share inih's parser and the handler
 * (tests/fuzz/fuzz_config.c feeds it). */
int ts_config_load_text(ts_config *c, const char *text, const char *name, char *err,
                        size_t errcap);

/* Applies argv. Returns 0 to run, 1 when --help/--version printed (exit 0),
 * -1 on a bad flag (message in err). */
int ts_config_parse_args(ts_config *c, int argc, char **argv, char *err, size_t errcap);

/* Sets one setting by its flag name ("tcp-port" or "tcp_port"). */
int ts_config_set(ts_config *c, const char *key, const char *value, char *err, size_t errcap);

void ts_config_print_help(const char *argv0);

#endif
