/*
 * session_sleep.c: a session's tissue at rest is not stepped
 * (session_sleep.h says when it falls asleep and what wakes it).
 */
#include "session_sleep.h"

#include <string.h>

#include "core/ts_obb_tree.h"

void ts_session_sleep_init(ts_session_sleep *s, double speed, double max_step) {
  memset(s, 0, sizeof *s);
  s->speed = speed > 0 ? speed : 0;
  s->margin = TS_SLEEP_MARGIN + 2 * (max_step > 0 ? max_step : 0);
}

void ts_session_sleep_wake(ts_session_sleep *s) {
  if (s->asleep) s->woke = 1;
  s->asleep = 0;
  s->still = 0;
  s->count = 0;
}

/* 1 when an active tool's world box (its tree's root, at this step's pose)
 * meets [lo, hi], or when an active tool is not placed (its tree could not
 * be built: where it is is not known, so it counts as near). */
static int tool_near(const double lo[3], const double hi[3], ts_tool_contact *tc,
                     const ts_tool *tools, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (!tools[i].active) continue;
    if (i >= tc->n_slots || !tc->slot[i].placed) return 1;
    const double *ext = NULL;
    const ts_obb *b = ts_posed_tool_box_ext(&tc->slot[i].pt, 0, &ext);
    if (!b || !ext) return 1;
    int apart = 0;
    for (int a = 0; a < 3; a++)
      if (b->c[a] + ext[a] < lo[a] || b->c[a] - ext[a] > hi[a]) apart = 1;
    if (!apart) return 1;
  }
  return 0;
}

int ts_session_sleep_check(ts_session_sleep *s, const ts_tissue *t, ts_tool_contact *tc,
                           const ts_tool *tools, uint32_t n) {
  if (!s->asleep) {
    const int woke = s->woke; /* by ts_session_sleep_wake since the last step */
    s->woke = 0;
    return woke ? TS_SLEEP_WOKE : TS_SLEEP_AWAKE;
  }
  if (t == s->tissue && t->n_nodes == s->n_nodes && !t->hand && s->speed > 0 &&
      !tool_near(s->lo, s->hi, tc, tools, n))
    return TS_SLEEP_ASLEEP;
  ts_session_sleep_wake(s);
  s->woke = 0; /* told now */
  return TS_SLEEP_WOKE;
}

void ts_session_sleep_skip_step(ts_session_sleep *s, ts_tissue *t, ts_tool *tools, uint32_t n,
                                double dt) {
  t->time += dt;
  for (uint32_t i = 0; i < n; i++) {
    memset(tools[i].force, 0, sizeof tools[i].force);
    memset(tools[i].torque, 0, sizeof tools[i].torque);
    tools[i].contacts = 0;
  }
  s->slept_steps++;
}

void ts_session_sleep_after(ts_session_sleep *s, const ts_tissue *t, ts_tool_contact *tc,
                            const ts_tool *tools, uint32_t n, uint32_t contacts, double dt) {
  if (s->speed <= 0 || s->asleep) return;
  if (contacts || t->hand) {
    s->still = 0, s->count = 0;
    return;
  }
  if (++s->count < TS_SLEEP_EVERY) return;
  const uint32_t steps = s->count;
  s->count = 0;
  const double v2 = s->speed * s->speed;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const double *v = t->v[i];
    if (!(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] < v2)) { /* NaN counts as moving */
      s->still = 0;
      return;
    }
  }
  double lo[3], hi[3];
  ts_tissue_bounds(t, lo, hi);
  for (int a = 0; a < 3; a++) lo[a] -= s->margin, hi[a] += s->margin;
  if (tool_near(lo, hi, tc, tools, n)) {
    s->still = 0;
    return;
  }
  s->still += steps * dt;
  if (s->still + 0.5 * dt < TS_SLEEP_TIME) return;
  s->asleep = 1;
  s->sleeps++;
  s->tissue = t;
  s->n_nodes = t->n_nodes;
  memcpy(s->lo, lo, sizeof lo);
  memcpy(s->hi, hi, sizeof hi);
}
