/*
 * fuzz_tlopts.c: fuzz target for tissueload's command line and the daemon
 * ports file it reads (client-c/tl_opts.c, tl_parse_opts and its
 * --ports-file reader): whatever a user or a benchmark script passes to
 * tissueload, and whatever is in the file --ports-file names. tl_opts.c is
 * compiled into the target (it needs libc, libm and cJSON).
 *
 * Input: one byte n, then min(n, what follows) bytes of ports-file content,
 * then the arguments separated by NUL bytes (fuzz_argv.h: at most 64, each
 * its own allocation). An argument "@ports" is replaced by the path of a
 * file holding the content (rewritten for every input). Inputs with an
 * argument "--help" or "-h" are skipped (it prints and exits). Seeds:
 * tests/fuzz/corpus/tlopts/.
 *
 * Checks, besides ASan/UBSan and the leak check: the result is 0 or -1; an
 * accepted command line holds what tissueload's run relies on without
 * checking again: ports 0..65535 (at least one given, a TCP one for TCP
 * clients or a recording, a WebSocket one for WebSocket clients), sessions
 * 1..64, observers 0..4000 (at most 4000 in all), controllers 0..8, known
 * transports, duration 0.1..3600 s, warmup 0..600 s, pose rate 1..10000 Hz,
 * frame rates 0..1000, 1..64 layer counts of 1..8 each, a decode mode 0..2,
 * record times 0..3600 s and frames 0..1e6, substeps 0..1000, a daemon pid
 * 0 or 1..4194304, --record-start only with a controller, --record-switch
 * only with two sessions, and every string the default or one of the
 * arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../client-c/tl_run.h"
#include "fuzz_argv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the ports file: one per process, rewritten for every input */
static char ports_path[64];

static void remove_ports(void) { unlink(ports_path); }

static void write_ports(const uint8_t *p, size_t n) {
  if (!ports_path[0]) {
    snprintf(ports_path, sizeof ports_path, "/tmp/fuzz_tlopts.XXXXXX");
    int fd = mkstemp(ports_path);
    if (fd < 0) abort();
    close(fd);
    atexit(remove_ports); /* libFuzzer and the replay both end through exit() */
  }
  FILE *f = fopen(ports_path, "wb");
  if (!f || (n && fwrite(p, 1, n, f) != n)) abort();
  fclose(f);
}

static void check_str(const fuzz_argv *a, const char *s, const char *dflt) {
  if (!s) return;
  if (dflt && !strcmp(s, dflt)) return;
  if (!fuzz_argv_owns(a, s, 0)) abort();
}

static void check_range(double v, double lo, double hi) {
  if (!(v >= lo && v <= hi)) abort();
}

static void check_ok(const fuzz_argv *a, const opts *o) {
  check_str(a, o->host, "127.0.0.1");
  if (!o->host) abort();
  check_str(a, o->ports_file, NULL);
  check_str(a, o->record, NULL);
  check_str(a, o->key, NULL);
  check_range(o->tcp_port, 0, 65535);
  check_range(o->http_port, 0, 65535);
  if (!o->tcp_port && !o->http_port) abort();
  check_range(o->sessions, 1, TL_MAX_SESSIONS);
  check_range(o->observers, 0, TL_MAX_OBSERVERS);
  check_range(o->controllers, 0, TL_MAX_CONTROLLERS);
  if ((long)o->observers * o->sessions > TL_MAX_OBSERVERS) abort();
  if ((o->obs_transport != TL_TCP && o->obs_transport != TL_WS) ||
      (o->ctl_transport != TL_TCP && o->ctl_transport != TL_WS))
    abort();
  const int need_tcp = (o->observers && o->obs_transport == TL_TCP) ||
                       (o->controllers && o->ctl_transport == TL_TCP) || o->record;
  const int need_ws = (o->observers && o->obs_transport == TL_WS) ||
                      (o->controllers && o->ctl_transport == TL_WS);
  if ((need_tcp && !o->tcp_port) || (need_ws && !o->http_port)) abort();
  check_range(o->duration, 0.1, 3600);
  check_range(o->warmup, 0, 600);
  check_range(o->pose_rate, 1, 10000);
  check_range(o->frame_rate, 0, 1000);
  check_range(o->ctl_frame_rate, 0, 1000);
  check_range(o->n_layers, 1, TL_MAX_SESSIONS);
  for (int i = 0; i < o->n_layers; i++) check_range(o->layers[i], 1, 8);
  check_range(o->decode, 0, 2);
  check_range(o->record_start, 0, 3600);
  check_range(o->record_switch, 0, 3600);
  check_range(o->record_frames, 0, 1e6);
  check_range(o->substeps, 0, 1000);
  if (o->daemon_pid) check_range(o->daemon_pid, 1, 4194304);
  if (o->record_start > 0 && o->controllers < 1) abort();
  if (o->record_switch > 0 && o->sessions < 2) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  static int env_cleared;
  if (!env_cleared) { /* the key's default comes from the environment */
    unsetenv("TISSUED_SERVER_KEY");
    env_cleared = 1;
  }
  size_t nf = data[0];
  if (nf > size - 1) nf = size - 1;
  write_ports(data + 1, nf);
  fuzz_argv a;
  fuzz_argv_make(&a, "tissueload", data + 1 + nf, size - 1 - nf);
  for (int i = 1; i < a.argc; i++) {
    if (!strcmp(a.argv[i], "--help") || !strcmp(a.argv[i], "-h")) {
      fuzz_argv_free(&a);
      return 0;
    }
    if (!strcmp(a.argv[i], "@ports")) {
      free(a.argv[i]);
      a.argv[i] = strdup(ports_path);
      if (!a.argv[i]) abort();
    }
  }
  opts o;
  int rc = tl_parse_opts(a.argc, a.argv, &o);
  if (rc == 0)
    check_ok(&a, &o);
  else if (rc != -1)
    abort();
  fuzz_argv_free(&a);
  return 0;
}
