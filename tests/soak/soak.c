/*
 * soak.c: the bounded soak of issue 8: one tissued runs for a set time while
 * sessions are created and destroyed continuously with clients on both
 * transports, and its resident memory must stay flat.
 *
 * Each cycle: two TCP and two WebSocket clients connect and say Hello; two
 * sessions of the built-in patch are created; a controller presses and
 * drags its tool on each while observers read frames for about a second;
 * the sessions are ended (EndSession) and the clients leave, one of them in
 * the middle of a message. RSS (/proc/PID/status VmRSS) is sampled every
 * 5 s and printed as JSON lines. Warm-up is the first fifth of the run (at
 * most 120 s): allocator pools, SQLite's page cache and the physics scratch
 * reach their working size there. Pass: RSS at the end is at most
 * the warm-up's largest sample + 5% + 4 MiB, and so is every sample after
 * warm-up, and the daemon exits 0 on SIGTERM.
 *
 * It only runs with TS_SOAK=1 (exit 77, "skipped", otherwise), for
 * TS_SOAK_SECONDS (default 600) or the first argument. Needs $TISSUED_BIN.
 * A normal (not sanitizer) build: ASan's quarantine grows RSS by design.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "rawclient.h"

#define TIMEOUT_MS 20000

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drain(rc_conn *c, long *frames) {
  Tissued__V1__Envelope *e;
  while ((e = rc_recv(c, 0))) {
    if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) (*frames)++;
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
}

/* One cycle; 0 or -1 (message printed). */
static int cycle(const ts_dproc *d, int k, long *frames, long *sessions) {
  rc_conn c[4];
  int n = 0, rc = -1;
  for (; n < 4; n++) {
    int ok = (n % 2) ? rc_ws(&c[n], d->http_port) : rc_tcp(&c[n], d->tcp_port);
    if (ok || rc_hello(&c[n], TIMEOUT_MS)) {
      fprintf(stderr, "soak: cycle %d: client %d could not connect\n", k, n);
      n++;
      goto out;
    }
  }
  uint32_t sid[2], tool[2];
  for (int s = 0; s < 2; s++) {
    rc_conn *ctl = &c[2 * s];
    if (rc_create(ctl, 0, 0, &sid[s], TIMEOUT_MS) ||
        rc_join(ctl, sid[s], 1, 0.005, 0, &tool[s], TIMEOUT_MS) ||
        rc_join(&c[2 * s + 1], sid[s], 0, 0, 0, NULL, TIMEOUT_MS)) {
      fprintf(stderr, "soak: cycle %d: session %d could not be set up\n", k, s);
      goto out;
    }
    (*sessions)++;
  }
  long long end = now_ms() + 1000;
  for (int i = 0; now_ms() < end && i < 2000; i++) {
    double t = (double)i / 100.0;
    double y = 0.004 - 0.006 * fmin(t, 1.0); /* press in 6 mm, then drag */
    double x = -0.01 + 0.02 * fmin(fmax(t - 1.0, 0.0), 1.0);
    for (int s = 0; s < 2; s++) rc_pose(&c[2 * s], tool[s], x, y, 0);
    for (int j = 0; j < 4; j++) drain(&c[j], frames);
    usleep(5000);
  }
  for (int s = 0; s < 2; s++) {
    if (rc_end(&c[2 * s], sid[s], TIMEOUT_MS)) {
      fprintf(stderr, "soak: cycle %d: EndSession failed\n", k);
      goto out;
    }
  }
  /* the last client leaves in the middle of a message */
  {
    Tissued__V1__Ping p = TISSUED__V1__PING__INIT;
    Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_PING;
    env.ping = &p;
    size_t len;
    uint8_t *b = rc_encode(&c[3], &env, &len);
    if (b) rc_send_raw(&c[3], b, len - 1);
    free(b);
  }
  rc = 0;
out:
  for (int j = 0; j < n; j++) rc_close(&c[j]);
  return rc;
}

int main(int argc, char **argv) {
  const char *on = getenv("TS_SOAK");
  if (!on || strcmp(on, "1") != 0) {
    printf("soak: skipped (set TS_SOAK=1 to run it)\n");
    return 77;
  }
  double secs = 600;
  const char *e = getenv("TS_SOAK_SECONDS");
  if (argc > 1) e = argv[1];
  if (e) secs = atof(e);
  if (!(secs >= 10 && secs <= 86400)) {
    fprintf(stderr, "soak: duration must be 10..86400 s\n");
    return 2;
  }
  double warm = fmin(secs / 5, 120);
  ts_dproc_scratch_begin();
  ts_dproc d;
  char err[256];
  /* sessions end 1 s after their last client at the latest */
  const char *args[] = {"--session-idle-timeout", "1", "--log-level", "warn", NULL};
  if (ts_dproc_start(&d, args, err, sizeof err)) {
    fprintf(stderr, "soak: %s\n", err);
    ts_dproc_scratch_end();
    return 1;
  }
  long long t0 = now_ms(), next_sample = t0;
  long warm_max = 0, worst_after = 0, last = 0, frames = 0, sessions = 0;
  int cycles = 0, failures = 0;
  while (now_ms() - t0 < (long long)(secs * 1000)) {
    if (cycle(&d, cycles, &frames, &sessions)) failures++;
    cycles++;
    if (!ts_dproc_alive(&d)) {
      fprintf(stderr, "soak: the daemon died\n");
      ts_dproc_dump_log(&d);
      ts_dproc_scratch_end();
      return 1;
    }
    if (now_ms() >= next_sample) {
      double t = (double)(now_ms() - t0) / 1000.0;
      last = rc_rss_kib(d.pid);
      if (t <= warm) {
        if (last > warm_max) warm_max = last;
      } else if (last > worst_after) {
        worst_after = last;
      }
      printf("{\"t_s\":%.1f,\"rss_kib\":%ld,\"cycles\":%d,\"sessions\":%ld,\"frames\":%ld,"
             "\"warmup\":%s}\n",
             t, last, cycles, sessions, frames, t <= warm ? "true" : "false");
      fflush(stdout);
      next_sample += 5000;
    }
  }
  last = rc_rss_kib(d.pid);
  if (last > worst_after) worst_after = last;
  long bound = warm_max + warm_max / 20 + 4096;
  char why[256];
  int st = ts_dproc_stop(&d, 20000, why, sizeof why);
  ts_dproc_scratch_end();
  printf("{\"result\":{\"seconds\":%.0f,\"cycles\":%d,\"failed_cycles\":%d,\"sessions\":%ld,"
         "\"frames\":%ld,\"warmup_max_rss_kib\":%ld,\"after_warmup_max_rss_kib\":%ld,"
         "\"final_rss_kib\":%ld,\"bound_kib\":%ld,\"exit_status\":%d}}\n",
         secs, cycles, failures, sessions, frames, warm_max, worst_after, last, bound, st);
  int ok = 1;
  if (worst_after > bound) {
    fprintf(stderr, "soak: RSS grew to %ld KiB after warm-up (bound %ld KiB)\n", worst_after,
            bound);
    ok = 0;
  }
  if (failures) {
    fprintf(stderr, "soak: %d of %d cycles failed\n", failures, cycles);
    ok = 0;
  }
  if (st != 0) {
    fprintf(stderr, "soak: daemon exit status %d %s\n", st, why);
    ok = 0;
  }
  if (frames == 0 || warm_max <= 0) {
    fprintf(stderr, "soak: no frames or no RSS samples\n");
    ok = 0;
  }
  return ok ? 0 : 1;
}
