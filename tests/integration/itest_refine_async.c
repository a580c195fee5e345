/*
 * itest_refine_async.c: a live refinement runs off the physics thread
 * (server/refine.c: snapshot on the physics thread, refinement on the
 * refinement thread, install on the physics thread), and what may happen
 * while it runs. In an XPBD session with a controller's sphere pressed
 * 2 mm in (so the hand-over's fit takes its trial steps on the
 * refinement thread):
 *   - two RefineRegion back to back: the second is refused at once with
 *     TS_EFULL (one refinement per session at a time), the first answers
 *     Refined; frames of the old vertex count keep coming while it runs,
 *     then frames of the new count;
 *   - a RefineRegion and, once a frame has shown that the physics thread
 *     stepped after it (the snapshot is taken), a ResetSession: the
 *     refinement is answered (TS_EMISMATCH when the result was made for the
 *     state before the reset, which is then dropped; Refined if it was
 *     installed first) and the frames' vertex count agrees with the answer;
 *   - a RefineRegion while the controller keeps moving the sphere (a pose
 *     a frame): XPBD's fit chases the moving tissue (fresh snapshots, fits
 *     again on the refinement thread) and the answer is Refined;
 *   - a RefineRegion and, a frame later, EndSession: the requester gets an
 *     answer (TS_ENOSESSION: the result is dropped; or Refined), the daemon
 *     keeps serving, and at the end exits cleanly (under ASan: no leak, no
 *     use after free of the session the refinement thread's result was
 *     for).
 * The frames, the answers and the session's end meet on the loop thread,
 * the physics thread and the refinement thread: deploy/test.sh runs this
 * suite under ThreadSanitizer too. Every wait is bounded (60 s: the
 * refinement of the default patch takes 0.1-0.3 s on a loaded machine,
 * several times that under the sanitizers).
 */
#include "ts_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "rawclient.h"

#define WAIT_MS 60000

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A RefineRegion (Loop, ray pick down onto the sphere) with request id
 * rid, encoded for the connection (the caller frees it). */
static uint8_t *refine_bytes(rc_conn *c, uint32_t sid, uint64_t rid, size_t *len) {
  Tissued__V1__Vec3 o = TISSUED__V1__VEC3__INIT, d = TISSUED__V1__VEC3__INIT;
  o.x = 0.0021, o.y = 0.05, o.z = -0.0013;
  d.y = -1;
  Tissued__V1__RefineRegion m = TISSUED__V1__REFINE_REGION__INIT;
  m.session_id = sid;
  m.method = TISSUED__V1__REFINE_REGION__METHOD__LOOP;
  m.ray_origin = &o;
  m.ray_direction = &d;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_REFINE_REGION;
  env.refine_region = &m;
  uint8_t *b = rc_encode(c, &env, len);
  ck_assert_ptr_nonnull(b);
  return b;
}

/* Sends a RefineRegion with request id rid, without waiting. */
static void send_refine(rc_conn *c, uint32_t sid, uint64_t rid) {
  size_t n;
  uint8_t *b = refine_bytes(c, sid, rid, &n);
  ck_assert_int_eq(rc_send_raw(c, b, n), 0);
  free(b);
}

/* Two RefineRegions in one write, so that the daemon reads them together
 * and takes the second while the first runs whatever the machine's load:
 * sent one after the other, the loop thread could read the first alone and
 * (descheduled on a loaded machine) see the refinement answered before it
 * read the second, which would then be taken, not refused. */
static void send_two_refines(rc_conn *c, uint32_t sid, uint64_t rid1, uint64_t rid2) {
  size_t n1, n2;
  uint8_t *b1 = refine_bytes(c, sid, rid1, &n1), *b2 = refine_bytes(c, sid, rid2, &n2);
  uint8_t *b = malloc(n1 + n2);
  ck_assert_ptr_nonnull(b);
  memcpy(b, b1, n1);
  memcpy(b + n1, b2, n2);
  ck_assert_int_eq(rc_send_raw(c, b, n1 + n2), 0);
  free(b);
  free(b1);
  free(b2);
}

static void send_reset(rc_conn *c, uint32_t sid, uint64_t rid) {
  Tissued__V1__ResetSession m = TISSUED__V1__RESET_SESSION__INIT;
  m.session_id = sid;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_RESET_SESSION;
  env.reset_session = &m;
  ck_assert_int_eq(rc_send(c, &env), 0);
}

static void send_end(rc_conn *c, uint32_t sid, uint64_t rid) {
  Tissued__V1__EndSession m = TISSUED__V1__END_SESSION__INIT;
  m.session_id = sid;
  Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
  env.request_id = rid;
  env.body_case = TISSUED__V1__ENVELOPE__BODY_END_SESSION;
  env.end_session = &m;
  ck_assert_int_eq(rc_send(c, &env), 0);
}

/* What came in while waiting. */
typedef struct seen {
  int frames;            /* frames received */
  uint32_t last_count;   /* the newest frame's vertex count */
  uint64_t last_seq;
} seen;

/* Answers that came while a wait was for something else: a refinement can
 * be answered before the physics thread's next frame (a loaded machine
 * descheduled the physics thread for 200 ms while the refinement thread
 * finished), and the answer, dropped, was then waited for in vain. */
#define STASH_MAX 8
static Tissued__V1__Envelope *stash[STASH_MAX];

/* A kept answer to request rid (any, with rid 0), taken out; NULL if none. */
static Tissued__V1__Envelope *take_kept(uint64_t rid) {
  for (int i = 0; i < STASH_MAX; i++) {
    Tissued__V1__Envelope *e = stash[i];
    if (e && (!rid || e->request_id == rid)) {
      stash[i] = NULL;
      return e;
    }
  }
  return NULL;
}

/* The next envelope: a kept answer first, then the connection's; NULL when
 * the connection ended or nothing came within timeout_ms. */
static Tissued__V1__Envelope *next_env(rc_conn *c, int timeout_ms) {
  Tissued__V1__Envelope *e = take_kept(0);
  return e ? e : rc_recv(c, timeout_ms);
}

/* Reads envelopes until one with request id rid (returned; the caller
 * frees it) or, with rid 0, until the next frame (NULL returned). Answers
 * to other requests are kept for the waits that ask for them. Frames are
 * counted into *s. */
static Tissued__V1__Envelope *wait_for(rc_conn *c, uint64_t rid, seen *s) {
  Tissued__V1__Envelope *e = rid ? take_kept(rid) : NULL;
  if (e) return e;
  long long end = now_ms() + WAIT_MS;
  for (;;) {
    long long left = end - now_ms();
    ck_assert_msg(left > 0, "no %s within %d ms", rid ? "answer" : "frame", WAIT_MS);
    e = rc_recv(c, (int)left);
    ck_assert_msg(e != NULL, "connection ended or timed out waiting for %s", rid ? "an answer" : "a frame");
    if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
      s->frames++;
      s->last_count = e->frame->vertex_count;
      s->last_seq = e->frame->seq;
      tissued__v1__envelope__free_unpacked(e, NULL);
      if (!rid) return NULL;
      continue;
    }
    if (rid && e->request_id == rid) return e;
    if (!e->request_id) { /* an answer to no request (a session's error) */
      tissued__v1__envelope__free_unpacked(e, NULL);
      continue;
    }
    if (!rid)
      printf("the answer to request %llu came before the frame waited for\n",
             (unsigned long long)e->request_id);
    int i = 0;
    while (i < STASH_MAX && stash[i]) i++;
    ck_assert_msg(i < STASH_MAX, "more than %d answers waiting", STASH_MAX);
    stash[i] = e;
  }
}

/* An XPBD session with the controller's 5 mm sphere pressed 2 mm in over
 * five frames and held for three (the proxy follows at the tool speed
 * limit, so the tissue is still moving at the refinement; by the install it
 * has settled to within a few um of the snapshot, measured, and the fit's
 * corrections are carried; the moving tool's case below chases). */
static uint32_t pressed_session(rc_conn *c, uint32_t *nv0, seen *s, uint32_t *tool_out) {
  uint32_t sid = 0, tool = 0;
  ck_assert_int_eq(rc_create(c, TISSUED__V1__SOLVER__SOLVER_XPBD, 0, &sid, WAIT_MS), 0);
  ck_assert_int_eq(rc_join(c, sid, 1, 0.005, 0, &tool, WAIT_MS), 0);
  for (int k = 1; k <= 5; k++) {
    ck_assert_int_eq(rc_pose(c, tool, 0.0021, 0.005 - 0.002 * k / 5.0, -0.0013), 0);
    wait_for(c, 0, s);
  }
  for (int k = 0; k < 3; k++) wait_for(c, 0, s);
  *nv0 = s->last_count;
  ck_assert_uint_gt(*nv0, 0);
  if (tool_out) *tool_out = tool;
  return sid;
}

START_TEST(test_refine_async) {
  ts_dproc d;
  char err[512];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);
  rc_conn c;
  ck_assert_int_eq(rc_tcp(&c, d.tcp_port), 0);
  ck_assert_int_eq(rc_hello(&c, WAIT_MS), 0);

  /* two at once: the second refused, the first refined */
  seen s = {0};
  uint32_t nv0 = 0;
  uint32_t sid = pressed_session(&c, &nv0, &s, NULL);
  send_two_refines(&c, sid, 1001, 1002);
  Tissued__V1__Envelope *e = wait_for(&c, 1002, &s);
  ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_ERROR);
  ck_assert_int_eq(-(int)e->error->code, TS_EFULL);
  printf("second RefineRegion while one runs: %s\n", e->error->message);
  tissued__v1__envelope__free_unpacked(e, NULL);
  int before = s.frames;
  e = wait_for(&c, 1001, &s);
  ck_assert_msg(e->body_case == TISSUED__V1__ENVELOPE__BODY_REFINED, "the refinement failed: %s",
                e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR ? e->error->message : "?");
  const uint32_t nv1 = e->refined->vertex_count;
  ck_assert_uint_gt(nv1, nv0);
  printf("refined %u -> %u vertices at step %llu, %.2f ms on the physics thread; %d frames of %u "
         "vertices came while it ran\n",
         nv0, nv1, (unsigned long long)e->refined->step, e->refined->millis, s.frames - before, nv0);
  /* every frame before the answer had the old count (the topology goes out
     before the first frame of the refined tissue) */
  ck_assert_uint_eq(s.last_count, nv0);
  tissued__v1__envelope__free_unpacked(e, NULL);
  wait_for(&c, 0, &s);
  ck_assert_uint_eq(s.last_count, nv1);
  /* the session takes another refinement once the first is answered */
  ck_assert_int_eq(rc_end(&c, sid, WAIT_MS), 0);

  /* a reset while the refinement runs */
  seen s2 = {0};
  uint32_t sid2 = pressed_session(&c, &nv0, &s2, NULL);
  send_refine(&c, sid2, 2001);
  wait_for(&c, 0, &s2); /* stepped since: the snapshot is taken */
  send_reset(&c, sid2, 2002);
  e = wait_for(&c, 2001, &s2);
  uint32_t want = nv0;
  if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
    ck_assert_int_eq(-(int)e->error->code, TS_EMISMATCH);
    printf("reset while refining: %s\n", e->error->message);
  } else {
    ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_REFINED);
    want = e->refined->vertex_count;
    printf("reset while refining: the refinement was installed before the reset (%u vertices)\n", want);
  }
  tissued__v1__envelope__free_unpacked(e, NULL);
  for (int k = 0; k < 3; k++) wait_for(&c, 0, &s2);
  ck_assert_uint_eq(s2.last_count, want);
  ck_assert_int_eq(rc_end(&c, sid2, WAIT_MS), 0);

  /* the session ends while the refinement runs */
  seen s3 = {0};
  uint32_t sid3 = pressed_session(&c, &nv0, &s3, NULL);
  send_refine(&c, sid3, 3001);
  wait_for(&c, 0, &s3);
  send_end(&c, sid3, 3002);
  int answered = 0, ended = 0;
  long long end = now_ms() + WAIT_MS;
  while (!(answered && ended)) {
    ck_assert_msg(now_ms() < end, "no answer to the refinement or the end");
    e = next_env(&c, WAIT_MS);
    ck_assert_ptr_nonnull(e);
    if (e->request_id == 3001) {
      answered = 1;
      if (e->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR) {
        ck_assert_int_eq(-(int)e->error->code, TS_ENOSESSION);
        printf("session ended while refining: %s\n", e->error->message);
      } else {
        ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_REFINED);
        printf("session ended while refining: installed before the end\n");
      }
    } else if (e->request_id == 3002) {
      ended = 1;
      ck_assert_int_eq(e->body_case, TISSUED__V1__ENVELOPE__BODY_ACK);
    }
    tissued__v1__envelope__free_unpacked(e, NULL);
  }
  /* the tool keeps moving while the refinement runs (the sphere going 0.5
     mm up and down again, a pose a frame): XPBD's fit chases the moving
     tissue on the refinement thread (fresh snapshots from the physics
     thread, server/refine.c) until it can be installed; the answer is
     Refined and the frames after it have the new count */
  seen s5 = {0};
  uint32_t tool5 = 0;
  uint32_t sid5 = pressed_session(&c, &nv0, &s5, &tool5);
  send_refine(&c, sid5, 5001);
  Tissued__V1__Envelope *ans = NULL;
  int poses = 0;
  end = now_ms() + WAIT_MS;
  while (!ans) {
    ck_assert_msg(now_ms() < end, "no answer to the refinement under a moving tool");
    e = next_env(&c, WAIT_MS);
    ck_assert_ptr_nonnull(e);
    if (e->body_case == TISSUED__V1__ENVELOPE__BODY_FRAME) {
      s5.frames++;
      s5.last_count = e->frame->vertex_count;
      const double u = 0.5 * (1 - cos(0.3 * ++poses)); /* 0..1..0 */
      ck_assert_int_eq(rc_pose(&c, tool5, 0.0021, 0.005 - 0.002 - 0.0005 * u, -0.0013), 0);
      tissued__v1__envelope__free_unpacked(e, NULL);
    } else if (e->request_id == 5001) {
      ans = e;
    } else {
      tissued__v1__envelope__free_unpacked(e, NULL);
    }
  }
  ck_assert_msg(ans->body_case == TISSUED__V1__ENVELOPE__BODY_REFINED, "the refinement failed: %s",
                ans->body_case == TISSUED__V1__ENVELOPE__BODY_ERROR ? ans->error->message : "?");
  const uint32_t nv5 = ans->refined->vertex_count;
  printf("refined under a moving tool: %u -> %u vertices after %d poses, %.2f ms on the physics thread\n", nv0,
         nv5, poses, ans->refined->millis);
  tissued__v1__envelope__free_unpacked(ans, NULL);
  wait_for(&c, 0, &s5);
  ck_assert_uint_eq(s5.last_count, nv5);
  ck_assert_int_eq(rc_end(&c, sid5, WAIT_MS), 0);

  /* the daemon serves on */
  uint32_t sid4 = 0;
  ck_assert_int_eq(rc_create(&c, TISSUED__V1__SOLVER__SOLVER_MASS_SPRING, 0, &sid4, WAIT_MS), 0);
  ck_assert_int_eq(rc_join(&c, sid4, 1, 0.005, 0, NULL, WAIT_MS), 0);
  seen s4 = {0};
  wait_for(&c, 0, &s4);
  ck_assert_uint_gt(s4.last_count, 0);
  ck_assert_int_eq(rc_end(&c, sid4, WAIT_MS), 0);
  rc_close(&c);
  ck_assert_msg(ts_dproc_stop(&d, WAIT_MS, err, sizeof err) == 0, "stop: %s", err);
}
END_TEST

static Suite *refine_async_suite(void) {
  Suite *s = suite_create("refine_async");
  TCase *tc = tcase_create("async");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_refine_async);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return ts_dproc_run_suite(refine_async_suite()); }
