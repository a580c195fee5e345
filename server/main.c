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
  printf("tissued: open http://%s:%d/ in a browser (TCP protocol on port %d)\n",
         cfg.host[0] && cfg.host[0] != '0' ? cfg.host : "127.0.0.1", server.http_port,
         server.tcp_port);
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  ts_server_finish(&server);
  uv_loop_close(loop);
  ts_log_info("stopped");
  return server.exit_code;
}
