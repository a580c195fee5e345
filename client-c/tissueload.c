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
 * fields in place (tl_scan_frame), so that the generator's own CPU per frame
 * stays small beside the daemon's.
 *
 * Statistics restart after --warmup seconds; at the end each session's
 * first live controller ends it, and the connection that created it ends
 * what none could: every session the run made ends, also when the set-up
 * fails. With --record FILE (opened before anything connects) one more
 * TCP observer writes the Frame Envelopes of session 1, exactly as
 * received, each after a 4-byte big-endian length (the TCP framing), and
 * with --record-switch it moves to session 2 midway (a topology change when
 * the sessions' layer counts differ): how tests/fixtures/ streams are made.
 *
 * Loopback only; every loop is bounded in count and time.
 *
 * This file holds the run (its event loop), the report and main(); the
 * other parts are listed in tl_run.h.
 */
#define _GNU_SOURCE /* epoll_pwait2: sub-millisecond waits between poses */
#include "tl_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../server/core/ts_error.h"

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
      tl_note_error(r, "session %u: the server closed a %s: %s", r->s[c->sidx].id,
                 c->role == TC_ROLE_CONTROLLER ? "controller" : "observer",
                 tc_last_error(c->tc));
    }
    return;
  }
  if (revents & POLLOUT) tl_link_flush(c->ln);
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    int k = tl_link_read(c->ln, 256 * 1024, tl_on_link_msg, c);
    if (k < 0) {
      c->alive = 0;
      if (!c->recorder) r->dropped++;
      tl_note_error(r, "session %u: connection of a %s ended: %s", r->s[c->sidx].id,
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
    tl_note_error(r, "epoll_ctl: %s", strerror(errno));
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
    tl_note_error(r, "epoll_create1: %s", strerror(errno));
    return;
  }
  for (int i = 0; i < total; i++) watch(r, ep, i < r->nc ? &r->c[i] : r->rec);
  int fine_wait = 1;
  uint64_t period = (uint64_t)(1e6 / o->pose_rate);
  if (period < 1) period = 1;
  uint64_t t = tl_now_us();
  for (int i = 0; i < r->nc; i++)
    if (r->c[i].role == TC_ROLE_CONTROLLER) r->c[i].next_pose_us = t + (uint64_t)i % period;
  while (!g_stop) {
    t = tl_now_us();
    if (t >= t_end || (r->rec && r->rec_done)) break;
    if (r->rec && !r->rec_joined && r->c[0].sim_time >= o->record_start) {
      char err[256];
      if (tl_join(r->rec, r->s[0].id, TC_ROLE_OBSERVER, (uint32_t)o->frame_rate, err,
                    sizeof err)) {
        tl_note_error(r, "recorder: %s", err);
        break;
      }
      r->rec_joined = 1;
      watch(r, ep, r->rec);
    }
    if (!r->measuring && t >= t_measure) {
      r->measuring = 1;
      tl_cpu_take(o->daemon_pid, &r->cpu_start);
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
        tl_send_pose(c, t);
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
      tl_note_error(r, "epoll_pwait2: %s", strerror(errno));
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
  tl_cpu_take(o->daemon_pid, &r->cpu_end);
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
  if (r->measuring) tl_cpu_report(j, o->daemon_pid, &r->cpu_start, &r->cpu_end, measured_s);
  char *s = cJSON_PrintUnformatted(j);
  if (s) printf("%s\n", s);
  fflush(stdout);
  free(s);
  cJSON_Delete(j);
}

/* EndSession of session sidx on tl_link client c (joined to it as a
 * controller); marks it ended when the daemon acknowledges. */
static int end_on_link(run *r, client *c, int sidx, char *err, size_t errcap) {
  Tissued__V1__EndSession m = TISSUED__V1__END_SESSION__INIT;
  m.session_id = r->s[sidx].id;
  Envelope e = TISSUED__V1__ENVELOPE__INIT;
  e.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
  e.end_session = &m;
  Envelope *rep = NULL;
  int rc = tl_request(c, &e, TISSUED__V1__ENVELOPE__BODY_ACK, &rep, err, errcap);
  if (rc) return rc;
  tissued__v1__envelope__free_unpacked(rep, NULL);
  r->s[sidx].ended = 1;
  return 0;
}

/* Ends the sessions this run made, each through its first live controller
 * (only a controller may), so that they stop simulating on the daemon. */
static void end_sessions(run *r) {
  for (int i = 0; i < r->nc; i++) {
    client *c = &r->c[i];
    if (c->role != TC_ROLE_CONTROLLER || !c->alive || r->s[c->sidx].ended) continue;
    if (c->tc) {
      if (tc_end_session(c->tc, r->s[c->sidx].id) == 0) r->s[c->sidx].ended = 1;
    } else {
      char err[128];
      end_on_link(r, c, c->sidx, err, sizeof err);
    }
  }
}

/* Ends, on the connection that created them, the first n_created sessions
 * that no controller of the run ended (none joined yet when the set-up
 * failed, or none left alive): it joins each as a controller, which the
 * server key it said in Hello allows, and ends it. What it cannot end is
 * named on stderr. */
static void end_left_sessions(run *r, client *admin, int n_created) {
  for (int s = 0; s < n_created; s++) {
    if (r->s[s].ended) continue;
    char err[256] = "the connection is closed";
    admin->sidx = s;
    if (!admin->ln || tl_join(admin, r->s[s].id, TC_ROLE_CONTROLLER, 0, err, sizeof err) ||
        end_on_link(r, admin, s, err, sizeof err))
      fprintf(stderr, "tissueload: could not end session %u: %s\n", r->s[s].id, err);
  }
}

/* --record FILE, opened before anything connects, so that a path that
 * cannot be written is refused before a session exists; created says
 * whether the file is new (removed again when nothing is recorded). Its old
 * content stays until the recording starts (start_record). */
static int open_record(const char *path, int *created) {
  struct stat st;
  *created = stat(path, &st) != 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "tissueload: --record %s: %s\n", path, strerror(errno));
    return -1;
  }
  return fd;
}

/* The recording starts: the file's old content goes (a regular file; a
 * device or pipe is written as it is) and fd becomes r->rec_file. */
static int start_record(run *r, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) ||
      !(r->rec_file = fdopen(fd, "wb"))) {
    fprintf(stderr, "tissueload: cannot write %s: %s\n", r->o.record, strerror(errno));
    return -1;
  }
  return 0;
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
  if (tl_parse_opts(argc, argv, &r->o)) {
    free(r);
    return 2;
  }
  const opts *o = &r->o;
  int rec_fd = -1, rec_created = 0;
  if (o->record && (rec_fd = open_record(o->record, &rec_created)) < 0) {
    free(r);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_sigint);
  prctl(PR_SET_TIMERSLACK, 1000UL); /* 1 us: poses at 1 kHz need precise wake-ups */
  int per = o->observers + o->controllers;
  r->nc = per * o->sessions;
  raise_fd_limit(r->nc + 4);
  r->c = calloc((size_t)(r->nc ? r->nc : 1), sizeof *r->c);
  char err[512];
  int status = 1;
  int n_created = 0; /* sessions this run made: ended before it exits */
  int nc = r->nc;
  r->nc = 0; /* clients set up so far */

  /* the admin connection creates the sessions */
  client admin;
  memset(&admin, 0, sizeof admin);
  admin.r = r;
  admin.alive = 1;
  if (!r->c) {
    fprintf(stderr, "tissueload: out of memory\n");
    goto out;
  }
  int at = o->tcp_port ? TL_TCP : TL_WS;
  admin.ln = tl_link_open(at, o->host, at == TL_TCP ? o->tcp_port : o->http_port,
                          TL_SETUP_TIMEOUT_MS, err, sizeof err);
  if (!admin.ln || tl_hello(&admin, o->key, err, sizeof err)) {
    fprintf(stderr, "tissueload: %s\n", err);
    goto out;
  }
  for (int s = 0; s < o->sessions; s++) {
    admin.refused_code = 0;
    if (tl_create_session(&admin, o->layers[s % o->n_layers], o->substeps, &r->s[s], err,
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
    n_created = s + 1;
  }
  if (!o->quiet)
    fprintf(stderr, "tissueload: %d session(s) of %u vertices; connecting %d clients\n",
            o->sessions, r->s[0].vertex_count, nc);

  for (int s = 0, k = 0; s < o->sessions; s++) {
    for (int i = 0; i < per; i++, k++) {
      client *c = &r->c[k];
      int ctl = i < o->controllers;
      int tr = ctl ? o->ctl_transport : o->obs_transport;
      int dec = o->decode == 2 || (o->decode == 1 && i == o->controllers);
      r->nc = k + 1;
      if (tl_open_client(r, c, tr, ctl ? TC_ROLE_CONTROLLER : TC_ROLE_OBSERVER, s, dec, err,
                      sizeof err)) {
        fprintf(stderr, "tissueload: session %u, %s %d over %s: %s\n", r->s[s].id,
                ctl ? "controller" : "observer", ctl ? i + 1 : i - o->controllers + 1,
                tname(tr), err);
        c->alive = 0; /* not joined: it ends nothing */
        goto out;
      }
      if (ctl) c->path_z = (i - (o->controllers - 1) / 2.0) * 0.025;
    }
  }
  if (o->record) {
    r->rec = calloc(1, sizeof *r->rec);
    if (!r->rec) {
      fprintf(stderr, "tissueload: out of memory\n");
      goto out;
    }
    client *c = r->rec;
    c->r = r;
    c->recorder = 1;
    c->decode = 1;
    c->alive = 1;
    c->ln = tl_link_open(TL_TCP, o->host, o->tcp_port, TL_SETUP_TIMEOUT_MS, err, sizeof err);
    if (!c->ln || tl_hello(c, o->key, err, sizeof err)) {
      fprintf(stderr, "tissueload: recorder: %s\n", err);
      goto out;
    }
    if (start_record(r, rec_fd)) goto out;
    rec_fd = -1; /* r->rec_file's now */
  }
  if (!o->quiet)
    fprintf(stderr, "tissueload: running %.1f s (+%.1f s warm-up)\n", o->duration, o->warmup);

  uint64_t t0 = tl_now_us();
  uint64_t t_measure = t0 + (uint64_t)(o->warmup * 1e6);
  uint64_t t_end = t_measure + (uint64_t)(o->duration * 1e6);
  event_loop(r, t_measure, t_end);
  uint64_t t1 = tl_now_us();
  double measured = t1 > t_measure ? (double)(t1 - t_measure) * 1e-6 : 0;
  report(r, measured);
  status = 0;
  if (o->record && r->o.record_frames && r->rec_frames < r->o.record_frames) {
    fprintf(stderr, "tissueload: recorded only %d of %d frames\n", r->rec_frames,
            r->o.record_frames);
    status = 1;
  }
out:
  /* every session this run made ends, also after a failure: through its
   * controllers, else through the connection that created it */
  end_sessions(r);
  end_left_sessions(r, &admin, n_created);
  for (int i = 0; i < r->nc; i++) tl_close_client(&r->c[i]);
  if (r->rec) {
    tl_close_client(r->rec);
    free(r->rec);
  }
  if (r->rec_file && fclose(r->rec_file) != 0) status = 1;
  if (rec_fd >= 0) { /* the recording never started: the file as it was */
    close(rec_fd);
    if (rec_created) unlink(o->record);
  }
  tl_close_client(&admin);
  free(r->c);
  free(r);
  return status;
}
