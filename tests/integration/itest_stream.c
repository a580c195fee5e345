/*
 * itest_stream.c: streaming under a slow reader (issue 7). One session of
 * the built-in patch (resolution 17: 1,156 vertices) on a real daemon with a
 * small soft output limit; a controller (libtissueclient) keeps pressing the
 * tissue so that every frame carries a real delta; a normal observer
 * (libtissueclient) reads everything; a slow reader (a raw TCP client
 * written here, so that it can shrink its socket buffers before it
 * connects) stops reading for two seconds, three times.
 *
 * A client over the soft limit is skipped; once it has stayed over it for
 * the grace period (--soft-output-grace, 0.5 s) its baseline is dropped and
 * its next frame is a keyframe, while a shorter hiccup resumes with a delta
 * against the baseline it still holds.
 *
 * Asserted: the slow reader is resynchronised (after each stall its next
 * frames start with a keyframe, and every frame it gets applies to the one
 * before it, decoded with proto/ts_codec.h whatever Frame.codec says) and is
 * not dropped; the daemon counts the skipped frames (/metrics); the normal
 * observer keeps getting frames during the stalls as fast as the other
 * normal client, with no keyframe and no gap in its chain; and the daemon's
 * memory (VmRSS from /proc) does not grow from one stall to the next by
 * more than 2 MiB (a backlog kept for the slow reader would grow by every
 * frame it missed).
 *
 * Kernel buffers: on loopback a connection's send buffer grows to megabytes
 * (measured: 2.4 MB, 970 kB of it queued, with BBR's congestion window at
 * 350 segments), so a daemon that counts only its own output queue against
 * the soft limit does not see a stalled reader until the kernel's queue is
 * full, and the reader then gets seconds of stale frames: the backlog the
 * issue rules out. The daemon must count the kernel's send queue (SIOCOUTQ)
 * in its pending output; this test fails when it does not. The slow reader
 * also shrinks its own receive buffer and MSS before it connects, so that
 * its side of the connection holds only a few kilobytes.
 */
#include <arpa/inet.h>
#include "ts_check.h"
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "tissue.pb-c.h"
#include "tissueclient.h"
#include "ts_codec.h"
#include "ts_codec_frame.h"
#include "ts_framing.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the normal clients (libtissueclient) ------------------------------------- */

typedef struct watch {
  uint64_t frames, keyframes, gaps;
  uint64_t long_deltas; /* deltas against a frame more than 8 frames older */
  uint64_t last_seq;
  double sim_time;
} watch;

static void on_frame(void *ud, const tc_frame *f) {
  watch *w = ud;
  w->frames++;
  if (f->keyframe) w->keyframes++;
  else if (f->baseline_seq != w->last_seq) w->gaps++;
  if (!f->keyframe && f->seq > f->baseline_seq + 8) w->long_deltas++;
  w->last_seq = f->seq;
  w->sim_time = f->sim_time;
}

static void on_error(void *ud, int code, const char *name, const char *message, uint64_t rid) {
  (void)ud;
  (void)rid;
  ck_abort_msg("a normal client got an error: %s (%d): %s", name, code, message);
}

/* ---- the slow reader ------------------------------------------------------------ */

typedef struct slow {
  int fd;
  ts_framer framer;
  ts_codec_ctx *cx;
  int32_t (*q)[3];
  uint32_t n;
  uint64_t last_seq;
  uint64_t frames, keyframes, bad_chain;
  int got_reply;                 /* a non-frame message arrived */
  Tissued__V1__Envelope__BodyCase reply_case;
  uint32_t session_id;
} slow;

static int slow_msg(void *ud, const uint8_t *msg, size_t len) {
  slow *s = ud;
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, len, msg);
  ck_assert_msg(e != NULL, "undecodable message of %zu bytes", len);
  if (e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME) {
    s->got_reply = 1;
    s->reply_case = e->body_case;
    tissued__v1__envelope__free_unpacked(e, NULL);
    return 0;
  }
  const Tissued__V1__Frame *f = e->frame;
  uint32_t codec = ts_frame_codec(f);
  s->frames++;
  if (f->keyframe) {
    s->keyframes++;
    ck_assert_int_eq(ts_codec_check_keyframe(codec, f->payload.data, f->payload.len,
                                             f->vertex_count), 0);
    free(s->q);
    s->q = malloc(sizeof *s->q * (f->vertex_count ? f->vertex_count : 1));
    ck_assert_ptr_nonnull(s->q);
    s->n = f->vertex_count;
  } else if (f->baseline_seq != s->last_seq || f->vertex_count != s->n) {
    s->bad_chain++;
    tissued__v1__envelope__free_unpacked(e, NULL);
    return 0;
  }
  int rc = ts_codec_decode(s->cx, codec, f->keyframe, f->payload.data, f->payload.len, s->n,
                           s->q, NULL);
  ck_assert_msg(rc == 0, "frame %llu (%s) does not decode: %s", (unsigned long long)f->seq,
                ts_codec_name(codec) ? ts_codec_name(codec) : "?", ts_strerror(rc));
  s->last_seq = f->seq;
  tissued__v1__envelope__free_unpacked(e, NULL);
  return 0;
}

static void slow_send(slow *s, Tissued__V1__Envelope *e) {
  size_t n = tissued__v1__envelope__get_packed_size(e);
  uint8_t buf[512];
  ck_assert_uint_le(n + 4, sizeof buf);
  ts_frame_header(buf, (uint32_t)n);
  tissued__v1__envelope__pack(e, buf + 4);
  ck_assert_int_eq(send(s->fd, buf, n + 4, MSG_NOSIGNAL), (ssize_t)(n + 4));
}

/* Reads for up to ms milliseconds (or until a reply when want_reply). */
static void slow_read(slow *s, int ms, int want_reply) {
  long long end = now_ms() + ms;
  uint8_t buf[16384];
  while (now_ms() < end && !(want_reply && s->got_reply)) {
    struct pollfd pf = {.fd = s->fd, .events = POLLIN};
    if (poll(&pf, 1, 5) <= 0) continue;
    ssize_t r = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    ck_assert_msg(r > 0, "the daemon closed the slow reader's connection");
    ck_assert_int_eq(ts_framer_feed(&s->framer, buf, (size_t)r, slow_msg, s), 0);
  }
}

static void slow_open(slow *s, int port, uint32_t session_id) {
  memset(s, 0, sizeof *s);
  ts_framer_init(&s->framer, 64u << 20);
  s->cx = ts_codec_ctx_new();
  ck_assert_ptr_nonnull(s->cx);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(s->fd, 0);
  /* small buffers and a small MSS, set before connecting so that the SYN
   * carries them: the kernel then holds little for this client */
  int rcv = 2048, mss = 536;
  ck_assert_int_eq(setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv), 0);
  ck_assert_int_eq(setsockopt(s->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss), 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ck_assert_int_eq(connect(s->fd, (struct sockaddr *)&a, sizeof a), 0);

  Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
  h.protocol_version = 1;
  h.client_name = "itest-slow-reader";
  h.credentials = TS_DPROC_KEY;
  Tissued__V1__Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.request_id = 1;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
  e.hello = &h;
  slow_send(s, &e);
  slow_read(s, 5000, 1);
  ck_assert_int_eq(s->reply_case, TISSUED__V1__ENVELOPE__BODY_HELLO_REPLY);

  Tissued__V1__JoinSession j = TISSUED__V1__JOIN_SESSION__INIT;
  j.session_id = session_id;
  j.role = TISSUED__V1__ROLE__ROLE_OBSERVER;
  Tissued__V1__Envelope e2 = TISSUED__V1__ENVELOPE__INIT;
  e2.request_id = 2;
  e2.body_case = TISSUED__V1__ENVELOPE__BODY_JOIN_SESSION;
  e2.join_session = &j;
  s->got_reply = 0;
  slow_send(s, &e2);
  slow_read(s, 5000, 1);
  ck_assert_int_eq(s->reply_case, TISSUED__V1__ENVELOPE__BODY_JOINED);
  s->session_id = session_id;
}

static void slow_close(slow *s) {
  close(s->fd);
  ts_framer_free(&s->framer);
  ts_codec_ctx_free(s->cx);
  free(s->q);
}

/* ---- the daemon ------------------------------------------------------------------ */

static long vm_rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot read %s", path);
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
  fclose(f);
  ck_assert_int_gt(kib, 0);
  return kib;
}


/* ---- the test -------------------------------------------------------------------- */

typedef struct rig {
  tc_client *ctl, *obs;
  watch wc, wo;
  uint32_t tool;
  slow sr;
} rig;

/* Polls the controller and the observer for ms milliseconds, pressing the
 * tool up and down over the patch centre on the session's clock (a 0.2 s
 * cycle between 1 and 7 mm below the top surface, so that the tissue keeps
 * moving); the slow reader reads only when `slow_reads`. */
static void run_ms(rig *g, int ms, int slow_reads) {
  const double quat[4] = {1, 0, 0, 0};
  long long end = now_ms() + ms;
  while (now_ms() < end) {
    double depth = 0.004 + 0.003 * sin(2 * 3.14159265358979 * g->wc.sim_time / 0.2);
    double pos[3] = {0, 0.005 - depth, 0};
    ck_assert_int_eq(tc_send_pose(g->ctl, g->tool, pos, quat, 1), 0);
    ck_assert_int_ge(tc_poll(g->ctl, 2), 0);
    ck_assert_int_ge(tc_poll(g->obs, 0), 0);
    if (slow_reads) slow_read(&g->sr, 1, 0);
  }
}

START_TEST(test_slow_reader_is_resynchronised) {
  ts_dproc d;
  char err[256];
  /* 240 frames per second of simulated time: enough bytes in a 2 s stall
   * to fill what the kernel holds for a fresh connection even when the
   * physics runs slower than real time on a busy machine */
  const char *args[] = {"--patch-resolution", "17", "--frame-rate", "240",
                        "--soft-output-limit", "4096", NULL};
#if defined(__SANITIZE_ADDRESS__)
  /* an ASan daemon keeps freed memory in a quarantine (256 MB by default)
   * that VmRSS would show as growth: the daemon started here keeps none */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[512];
  snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "",
           asan && asan[0] ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
#endif
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  rig g;
  memset(&g, 0, sizeof g);
  g.ctl = tc_connect_key("127.0.0.1", d.tcp_port, "itest-stream-ctl", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(g.ctl != NULL, "%s", err);
  g.obs = tc_connect_key("127.0.0.1", d.tcp_port, "itest-stream-obs", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(g.obs != NULL, "%s", err);
  tc_set_frame_cb(g.ctl, on_frame, &g.wc);
  tc_set_frame_cb(g.obs, on_frame, &g.wo);
  tc_set_error_cb(g.ctl, on_error, NULL);
  tc_set_error_cb(g.obs, on_error, NULL);
  uint32_t sid, n;
  ck_assert_int_eq(tc_create_session(g.ctl, "stomach-patch", &sid, &n, NULL), 0);
  ck_assert_uint_eq(n, 4 * 17 * 17);
  ck_assert_int_eq(tc_join(g.ctl, sid, TC_ROLE_CONTROLLER, 0, 0.005, &g.tool), 0);
  ck_assert_int_eq(tc_join(g.obs, sid, TC_ROLE_OBSERVER, 0, 0, NULL), 0);
  run_ms(&g, 1000, 0); /* into a steady stream */
  ck_assert_msg(g.wo.frames >= 5, "only %llu frames in 1 s", (unsigned long long)g.wo.frames);

  char skipped_name[96];
  snprintf(skipped_name, sizeof skipped_name,
           "tissued_session_frames_skipped_total{session=\"%u\"}", sid);
  char resynced_name[96];
  snprintf(resynced_name, sizeof resynced_name,
           "tissued_session_clients_resynced_total{session=\"%u\"}", sid);
  long rss[4];
  slow_open(&g.sr, d.tcp_port, sid);
  rss[0] = vm_rss_kib(d.pid);
  for (int stall = 1; stall <= 3; stall++) {
    uint64_t f0 = g.wo.frames;
    run_ms(&g, 1500, 1);
    uint64_t before = g.wo.frames - f0;
    ck_assert_uint_eq(g.sr.bad_chain, 0);
    uint64_t sk0 = g.sr.keyframes;
    uint64_t k0 = g.wo.keyframes, gaps0 = g.wo.gaps;
    double skipped0 = ts_dproc_metric(d.http_port, skipped_name);
    double resynced0 = ts_dproc_metric(d.http_port, resynced_name);

    /* the stall: the slow reader reads nothing for 2 s */
    f0 = g.wo.frames;
    uint64_t c0 = g.wc.frames;
    run_ms(&g, 2000, 0);
    uint64_t during = g.wo.frames - f0, ctl_during = g.wc.frames - c0;
    /* The observer gets what the other normal client, the controller, gets
     * in the same two seconds (within 20 %: they read in turns), so the
     * slow reader costs it nothing; and the stream did not stop: at least
     * 5 frames and a tenth of its rate before the stall (the physics' pace
     * on a shared 2-core machine with tests running in parallel varies by
     * a factor of five from one second to the next, while a daemon held up
     * by the slow reader would deliver nothing). */
    ck_assert_msg(during * 10 >= ctl_during * 8,
                  "stall %d: the observer got %llu frames during the stall, the controller %llu",
                  stall, (unsigned long long)during, (unsigned long long)ctl_during);
    ck_assert_msg(during >= 5 && during * 15 >= before,
                  "stall %d: the observer got %llu frames in the 2 s stall, %llu in 1.5 s before",
                  stall, (unsigned long long)during, (unsigned long long)before);
    ck_assert_uint_eq(g.wo.keyframes, k0);
    ck_assert_uint_eq(g.wo.gaps, gaps0);

    /* reading again: a keyframe puts the reader back on the newest frame */
    run_ms(&g, 1500, 1);
    ck_assert_msg(g.sr.keyframes > sk0,
                  "stall %d: no keyframe after the stall (%llu frames; %g skipped by the daemon)",
                  stall, (unsigned long long)g.sr.frames,
                  ts_dproc_metric(d.http_port, skipped_name) - skipped0);
    ck_assert_uint_eq(g.sr.bad_chain, 0);
    /* the daemon skipped frames for it (at 240 Hz, a 2 s stall is hundreds),
     * and resynchronised it once it had been over the soft limit for longer
     * than the grace period (0.5 s by default) */
    ck_assert_double_ge(ts_dproc_metric(d.http_port, skipped_name) - skipped0, 8);
    ck_assert_double_ge(ts_dproc_metric(d.http_port, resynced_name) - resynced0, 1);
    rss[stall] = vm_rss_kib(d.pid);
  }
  slow_close(&g.sr);
  /* memory: a stall costs at most what the limits hold and is given back;
   * it must not accumulate (2 MiB: allocator slack, a few frames and their
   * encodings) */
  ck_assert_msg(rss[3] - rss[1] <= 2048, "VmRSS grew from %ld to %ld KiB over stalls 2 and 3",
                rss[1], rss[3]);
  ck_assert_msg(rss[1] - rss[0] <= 8192, "VmRSS grew from %ld to %ld KiB in the first stall",
                rss[0], rss[1]);
  char name[96];
  snprintf(name, sizeof name, "tissued_session_clients_dropped_total{session=\"%u\"}", sid);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, name), 0);
  fprintf(stderr, "itest_stream: observer %llu frames, VmRSS %ld -> %ld -> %ld -> %ld KiB\n",
          (unsigned long long)g.wo.frames, rss[0], rss[1], rss[2], rss[3]);

  tc_close(g.ctl);
  tc_close(g.obs);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

/* Clients at different frame rates on one session: a 20 Hz observer beside
 * the session's 1 kHz stream gets deltas against the last frame written to
 * it, however many frames the session published in between (its baseline is
 * held by reference, not looked up in a ring of recent frames). A small
 * patch (resolution 9) keeps the physics near real time on a busy machine,
 * so that dozens of frames pass between two of the observer's. Asserted:
 * one keyframe only and an unbroken chain for both clients; deltas that
 * span more than 8 frames (what a ring of recent frames would have held);
 * and the observer's rate at most 30 frames a second (its 20 Hz applied,
 * with slack for jitter). */
START_TEST(test_mixed_rates_share_the_chain) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "9", "--frame-rate", "1000", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  rig g;
  memset(&g, 0, sizeof g);
  g.ctl = tc_connect_key("127.0.0.1", d.tcp_port, "itest-rates-ctl", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(g.ctl != NULL, "%s", err);
  g.obs = tc_connect_key("127.0.0.1", d.tcp_port, "itest-rates-obs20", TS_DPROC_KEY, 0, err, sizeof err);
  ck_assert_msg(g.obs != NULL, "%s", err);
  tc_set_frame_cb(g.ctl, on_frame, &g.wc);
  tc_set_frame_cb(g.obs, on_frame, &g.wo);
  tc_set_error_cb(g.ctl, on_error, NULL);
  tc_set_error_cb(g.obs, on_error, NULL);
  uint32_t sid, n;
  ck_assert_int_eq(tc_create_session(g.ctl, "stomach-patch", &sid, &n, NULL), 0);
  ck_assert_int_eq(tc_join(g.ctl, sid, TC_ROLE_CONTROLLER, 0, 0.005, &g.tool), 0);
  tc_join_params jp = {.session_id = sid, .role = TC_ROLE_OBSERVER, .frame_rate = 20};
  tc_joined jd;
  ck_assert_int_eq(tc_join_ex(g.obs, &jp, &jd), 0);
  ck_assert_uint_eq(jd.frame_rate, 20);
  long long t0 = now_ms();
  run_ms(&g, 2000, 0);
  double secs = (double)(now_ms() - t0) / 1e3;
  fprintf(stderr, "itest_stream: 1 kHz controller %llu frames (%llu keyframes), "
                  "20 Hz observer %llu frames (%llu keyframes, %llu spanning > 8 frames) "
                  "in %.1f s\n",
          (unsigned long long)g.wc.frames, (unsigned long long)g.wc.keyframes,
          (unsigned long long)g.wo.frames, (unsigned long long)g.wo.keyframes,
          (unsigned long long)g.wo.long_deltas, secs);
  ck_assert_uint_eq(g.wo.keyframes, 1);
  ck_assert_uint_eq(g.wo.gaps, 0);
  ck_assert_uint_eq(g.wc.keyframes, 1);
  ck_assert_uint_eq(g.wc.gaps, 0);
  ck_assert_msg(g.wo.frames >= 5 && g.wo.frames <= 30 * secs,
                "the 20 Hz observer got %llu frames in %.1f s",
                (unsigned long long)g.wo.frames, secs);
  ck_assert_msg(g.wo.long_deltas >= 3, "only %llu of the observer's deltas spanned > 8 frames",
                (unsigned long long)g.wo.long_deltas);
  tc_close(g.ctl);
  tc_close(g.obs);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

/* ---- per-client frame rates ------------------------------------------------------ */

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* What one client received while counting: its frames, the session's
 * sequence numbers of its first and last (the session numbers every frame
 * it publishes, so last - first + 1 frames were published in between), and
 * when they arrived. */
typedef struct rate_watch {
  int counting;
  uint64_t frames, first_seq, last_seq;
  long long first_us, last_us;
} rate_watch;

static void on_rate_frame(void *ud, const tc_frame *f) {
  rate_watch *w = ud;
  if (!w->counting) return;
  long long t = now_us();
  if (!w->frames) {
    w->first_seq = f->seq;
    w->first_us = t;
  }
  w->frames++;
  w->last_seq = f->seq;
  w->last_us = t;
}

/* Reads every client as frames arrive, for ms milliseconds. */
static void poll_all(tc_client **c, int n, int ms) {
  long long end = now_ms() + ms;
  while (now_ms() < end) {
    struct pollfd pf[4];
    for (int i = 0; i < n; i++) pf[i] = (struct pollfd){.fd = tc_fd(c[i]), .events = POLLIN};
    if (poll(pf, (nfds_t)n, 5) <= 0) continue;
    for (int i = 0; i < n; i++)
      if (pf[i].revents) ck_assert_int_ge(tc_poll(c[i], 0), 0);
  }
}

/* Clients get min(their frame rate, the session's) on average. The session
 * (a 5 x 5 patch, so that its physics keeps up with real time even under
 * TSan) steps 10 ms and publishes 60 frames per simulated second, so its
 * frames come 20, 20 and 10 ms apart: a limiter that wants a whole
 * interval (16.7 ms, less 2 ms of slack) since the last frame sent gives a
 * 60 Hz client two frames of three (40 a second). Three observers: 1000 Hz (no
 * limit below the session's rate), 60 Hz (the session's) and 20 Hz (a
 * third of it), read for 2 s. Per client, with W the time between its
 * first and last frame, T its interval and P the frames the session
 * published meanwhile (sequence numbers): received >= 90 % of min(P,
 * W / T + 1), and received <= (W + 50 ms) / T + 2 (the schedule allows two
 * back to back, never more; 50 ms for the difference of two deliveries'
 * delays on a busy machine). 10 %: what skips a catch-up burst of three or
 * more frames costs when the physics runs behind on a busy machine (the
 * limiter caps bursts at two; measured 0-1 % with the physics at real time,
 * 10-13 % with a 9 x 9 patch under TSan at 0.8 times real time); the old
 * limiter is 30 % short (measured). The lower bound is to hold in one of
 * ATTEMPTS windows in a row (the ASan build beside other tests in CI once
 * gave the 1000 Hz client 87.5 % of a window; the old limiter is short in
 * every window); the upper bound in every window. The 20 Hz client's upper
 * bound fails without a limit (the session publishes three times its rate). */
#define ATTEMPTS 3

/* One client's window (attempt: its number, for the log): asserts the upper
 * bound; returns -1 when it got under 90 % of what it should, 0 otherwise. */
static int window_check(const rate_watch *w, uint32_t rate, int attempt) {
  ck_assert_uint_ge(w->frames, 2);
  double win = (double)(w->last_us - w->first_us) * 1e-6, T = 1.0 / rate;
  double published = (double)(w->last_seq - w->first_seq + 1);
  double by_rate = win / T + 1, want = fmin(published, by_rate);
  fprintf(stderr,
          "itest_stream: window %d: %4u Hz client: %llu frames in %.2f s, session published %.0f "
          "(%.1f/s): %.1f%% of min(published, rate)\n",
          attempt, rate, (unsigned long long)w->frames, win, published, published / win,
          100.0 * (double)w->frames / want);
  ck_assert_msg((double)w->frames <= (win + 0.05) / T + 2,
                "%u Hz client: %llu frames in %.2f s, over its rate", rate,
                (unsigned long long)w->frames, win);
  return (double)w->frames >= 0.9 * want ? 0 : -1;
}

START_TEST(test_rates_follow_the_session) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "5", "--dt", "0.01", "--frame-rate", "60", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  tc_client *ctl = tc_connect_key("127.0.0.1", d.tcp_port, "itest-rates", TS_DPROC_KEY, 0, err,
                                  sizeof err);
  ck_assert_msg(ctl != NULL, "%s", err);
  uint32_t sid, n;
  ck_assert_int_eq(tc_create_session(ctl, "stomach-patch", &sid, &n, NULL), 0);
  enum { N = 3 };
  const uint32_t rate[N] = {1000, 60, 20};
  tc_client *c[N];
  rate_watch w[N];
  memset(w, 0, sizeof w);
  for (int i = 0; i < N; i++) {
    c[i] = tc_connect_key("127.0.0.1", d.tcp_port, "itest-rates-obs", TS_DPROC_KEY, 0, err,
                          sizeof err);
    ck_assert_msg(c[i] != NULL, "%s", err);
    tc_set_frame_cb(c[i], on_rate_frame, &w[i]);
    tc_set_error_cb(c[i], on_error, NULL);
    tc_join_params jp = {.session_id = sid, .role = TC_ROLE_OBSERVER, .frame_rate = rate[i]};
    tc_joined jd;
    ck_assert_int_eq(tc_join_ex(c[i], &jp, &jd), 0);
    ck_assert_uint_eq(jd.frame_rate, rate[i]);
  }
  poll_all(c, N, 200); /* past the keyframes */
  int short_of = 1;
  for (int attempt = 1; attempt <= ATTEMPTS && short_of; attempt++) {
    short_of = 0;
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) w[i].counting = 1;
    poll_all(c, N, 2000);
    for (int i = 0; i < N; i++) short_of |= window_check(&w[i], rate[i], attempt) < 0;
  }
  ck_assert_msg(!short_of, "a client was short of its frames in %d windows in a row", ATTEMPTS);
  for (int i = 0; i < N; i++) tc_close(c[i]);
  tc_close(ctl);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

/* Frames are made for the clients that are due one, not for the session's
 * clock alone: a session at --frame-rate 1000 (dt 1 ms: a frame due every
 * step on its clock) watched only by a 20 Hz observer quantizes a frame
 * when the observer is next due (session.c, post_frames_wanted), not every
 * step; a 1000 Hz observer that joins later gets every step's frame again.
 * The frames the session made over a window are the difference of the
 * sequence numbers the observer saw (the session numbers every frame it
 * makes), its steps the difference of the simulated times over dt, so the
 * ratio does not depend on how fast the physics runs on a busy machine.
 * Asserted, over 1.5 s each: with the 20 Hz observer alone at most half as
 * many frames as steps (measured 0.10-0.22 on a machine at load 15: a step's
 * head start, and a loop slower than the physics to take the schedule's
 * update, make a few frames the observer is not due; the daemon without the
 * test makes exactly one per step, ratio 1) and the observer still gets 90 %
 * of its rate and no more than it (the bounds of
 * test_rates_follow_the_session); with the 1000 Hz observer beside it at
 * least 90 % as many frames as steps. */
typedef struct due_watch {
  rate_watch r;
  double first_sim, last_sim;
} due_watch;

static void on_due_frame(void *ud, const tc_frame *f) {
  due_watch *w = ud;
  if (!w->r.counting) return;
  if (!w->r.frames) w->first_sim = f->sim_time;
  w->last_sim = f->sim_time;
  on_rate_frame(&w->r, f);
}

START_TEST(test_frames_only_when_due) {
  ts_dproc d;
  char err[256];
  const char *args[] = {"--patch-resolution", "9", "--frame-rate", "1000", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  tc_client *ctl = tc_connect_key("127.0.0.1", d.tcp_port, "itest-due", TS_DPROC_KEY, 0, err,
                                  sizeof err);
  ck_assert_msg(ctl != NULL, "%s", err);
  uint32_t sid, n;
  ck_assert_int_eq(tc_create_session(ctl, "stomach-patch", &sid, &n, NULL), 0);
  const uint32_t rate[2] = {20, 1000};
  tc_client *c[2];
  due_watch w[2];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 2; i++) {
    c[i] = tc_connect_key("127.0.0.1", d.tcp_port, "itest-due-obs", TS_DPROC_KEY, 0, err,
                          sizeof err);
    ck_assert_msg(c[i] != NULL, "%s", err);
    tc_set_frame_cb(c[i], on_due_frame, &w[i]);
    tc_set_error_cb(c[i], on_error, NULL);
    tc_join_params jp = {.session_id = sid, .role = TC_ROLE_OBSERVER, .frame_rate = rate[i]};
    tc_joined jd;
    ck_assert_int_eq(tc_join_ex(c[i], &jp, &jd), 0);
    ck_assert_uint_eq(jd.frame_rate, rate[i]);
    poll_all(c, i + 1, 300); /* past the keyframe */
    memset(&w[i], 0, sizeof w[i]);
    w[i].r.counting = 1;
    poll_all(c, i + 1, 1500);
    w[i].r.counting = 0;
    ck_assert_msg(w[i].r.frames >= 10, "%u Hz observer: %llu frames in 1.5 s", rate[i],
                  (unsigned long long)w[i].r.frames);
    double win = (double)(w[i].r.last_us - w[i].r.first_us) * 1e-6, T = 1.0 / rate[i];
    double made = (double)(w[i].r.last_seq - w[i].r.first_seq);
    double steps = (w[i].last_sim - w[i].first_sim) / 1e-3;
    fprintf(stderr,
            "itest_stream: %4u Hz observer%s: %llu frames in %.2f s; the session made %.0f "
            "frames in %.0f steps (%.2f a step)\n",
            rate[i], i ? " beside the 20 Hz one" : " alone", (unsigned long long)w[i].r.frames,
            win, made, steps, made / steps);
    ck_assert(steps >= 10);
    if (i == 0) {
      ck_assert_msg(made <= 0.5 * steps, "20 Hz observer alone: %.0f frames made in %.0f steps",
                    made, steps);
      ck_assert_msg((double)w[i].r.frames >= 0.9 * (win / T + 1) &&
                        (double)w[i].r.frames <= (win + 0.05) / T + 2,
                    "20 Hz observer: %llu frames in %.2f s", (unsigned long long)w[i].r.frames,
                    win);
    } else {
      ck_assert_msg(made >= 0.9 * steps, "1000 Hz observer: %.0f frames made in %.0f steps",
                    made, steps);
    }
  }
  for (int i = 0; i < 2; i++) tc_close(c[i]);
  tc_close(ctl);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stream");
  TCase *tc = tcase_create("slow_reader");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_slow_reader_is_resynchronised);
  suite_add_tcase(s, tc);
  TCase *tr = tcase_create("mixed_rates");
  tcase_set_timeout(tr, 120);
  tcase_add_test(tr, test_mixed_rates_share_the_chain);
  suite_add_tcase(s, tr);
  TCase *tf = tcase_create("rates");
  tcase_set_timeout(tf, 120);
  tcase_add_test(tf, test_rates_follow_the_session);
  tcase_add_test(tf, test_frames_only_when_due);
  suite_add_tcase(s, tf);
  return ts_dproc_run_suite(s);
}
