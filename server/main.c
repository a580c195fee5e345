/*
 * main.c: tissued's entry point: settings from defaults, file and flags, then
 * the server on the default libuv loop until a signal ends it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "server.h"

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
  if (server.key_generated) {
    /* the only time the key is ever printed: it was just generated */
    printf("tissued: new server key %s (printed once; kept in %s)\n", server.keys.key[0],
           server.key_source);
    printf("tissued: open http://%s:%d/#key=%s in a browser (TCP protocol on port %d)\n", host,
           server.http_port, server.keys.key[0], server.tcp_port);
  } else {
    printf("tissued: open http://%s:%d/ in a browser (TCP protocol on port %d); the page "
           "asks for the server key (from %s) to create sessions\n",
           host, server.http_port, server.tcp_port, server.key_source);
  }
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  ts_server_finish(&server);
  uv_loop_close(loop);
  ts_log_info("stopped");
  return server.exit_code;
}
