/*
 * main.c: tissued's entry point: settings from defaults, file and flags, then
 * the server on the default libuv loop until a signal ends it.
 *
 * The shutdown bound: when an orderly shutdown begins (SIGTERM/SIGINT), a
 * watchdog thread starts; if the process is still running shutdown-timeout
 * seconds later (a database write or a physics step that does not finish),
 * it logs that and ends the process with status 3. A clean shutdown exits 0
 * before then.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "server.h"

#define TS_EXIT_SHUTDOWN_TIMEOUT 3

static uv_thread_t watchdog_thread;
static uint64_t watchdog_ns; /* written before the thread starts */

static void watchdog_main(void *arg) {
  (void)arg;
  /* sleep in slices: uv_sleep takes milliseconds in an unsigned int */
  uint64_t end = uv_hrtime() + watchdog_ns;
  for (uint64_t now = uv_hrtime(); now < end; now = uv_hrtime()) {
    uint64_t left_ms = (end - now) / 1000000u + 1;
    uv_sleep(left_ms > 100 ? 100 : (unsigned)left_ms);
  }
  ts_log_error("shutdown did not finish within shutdown-timeout (%.3g s); exiting with status %d",
               (double)watchdog_ns * 1e-9, TS_EXIT_SHUTDOWN_TIMEOUT);
  fflush(NULL);
  _exit(TS_EXIT_SHUTDOWN_TIMEOUT);
}

static void on_shutdown_begin(ts_server *s) {
  watchdog_ns = (uint64_t)(s->cfg.shutdown_timeout * 1e9);
  if (uv_thread_create(&watchdog_thread, watchdog_main, NULL))
    ts_log_warn("cannot start the shutdown watchdog; shutdown is not time-bounded");
}

/* Whether the page can be served: the web root holds index.html and the
 * protocol file can be read (the page fetches it to decode messages). A
 * daemon without them still serves the protocol, /healthz and /metrics, so
 * it warns and goes on rather than refusing to start; it no longer prints
 * "open ... in a browser" for a page that answers 404. */
static int page_ready(const ts_config *cfg) {
  char index[sizeof cfg->web_root + 16];
  snprintf(index, sizeof index, "%s/index.html", cfg->web_root);
  int ok = 1;
  if (access(index, R_OK) != 0) {
    fprintf(stderr,
            "tissued: warning: no web client in --web-root %s (%s: %s); the page answers 404 "
            "until it is built there (deploy/build.sh) or --web-root names it\n",
            cfg->web_root, index, strerror(errno));
    ok = 0;
  }
  if (access(cfg->proto_file, R_OK) != 0) {
    fprintf(stderr,
            "tissued: warning: --proto-file %s cannot be read (%s); the page cannot decode "
            "messages without it\n",
            cfg->proto_file, strerror(errno));
    ok = 0;
  }
  return ok;
}

int main(int argc, char **argv) {
  ts_config cfg;
  ts_config_defaults(&cfg);
  char err[512];
  int rc = ts_config_parse_args(&cfg, argc, argv, err, sizeof err);
  if (rc == 1) return 0;
  if (rc < 0) {
    fprintf(stderr, "tissued: %s\n", err);
    return 2;
  }
  ts_log_set_level(cfg.log_level);
  signal(SIGPIPE, SIG_IGN);

  uv_loop_t *loop = uv_default_loop();
  static ts_server server; /* large; lives for the whole process */
  if (ts_server_start(&server, loop, &cfg)) {
    ts_log_error("tissued could not start");
    return 1;
  }
  const char *host = cfg.host[0] && cfg.host[0] != '0' ? cfg.host : "127.0.0.1";
  const int page = page_ready(&cfg);
  if (server.key_generated) {
    /* the only time the key is ever printed: it was just generated */
    printf("tissued: new server key %s (printed once; kept in %s)\n", server.keys.key[0],
           server.key_source);
    if (page)
      printf("tissued: open http://%s:%d/#key=%s in a browser (TCP protocol on port %d)\n",
             host, server.http_port, server.keys.key[0], server.tcp_port);
  } else if (page) {
    printf("tissued: open http://%s:%d/ in a browser (TCP protocol on port %d); the page "
           "asks for the server key (from %s) to create sessions\n",
           host, server.http_port, server.tcp_port, server.key_source);
  }
  if (!page) /* the protocol still runs: say where */
    printf("tissued: listening: TCP protocol on port %d, WebSocket at ws://%s:%d/ws, /healthz "
           "and /metrics; no page (see the warning above)\n",
           server.tcp_port, host, server.http_port);
  server.on_shutdown_begin = on_shutdown_begin;
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  ts_server_finish(&server);
  uv_loop_close(loop);
  ts_log_info("stopped");
  return server.exit_code;
}
