/*
 * lane.c: the slow-lane meter (see lane.h).
 */
#include "lane.h"

void ts_lane_meter_init(ts_lane_meter *m) {
  m->cpu_ns = 0;
  m->sim_ns = 0;
  m->load = -1;
  m->run = 0;
  m->settle = 0;
}

void ts_lane_meter_moved(ts_lane_meter *m) {
  m->cpu_ns = 0;
  m->sim_ns = 0;
  m->run = 0;
  m->settle = TS_LANE_SETTLE;
}

int ts_lane_meter_add(ts_lane_meter *m, uint64_t cpu_ns, uint64_t sim_ns, int slow_now,
                      double threshold) {
  m->cpu_ns += cpu_ns;
  m->sim_ns += sim_ns;
  if (m->cpu_ns < TS_LANE_WINDOW_NS && m->sim_ns < TS_LANE_WINDOW_NS) return slow_now;
  m->load = m->sim_ns ? (double)m->cpu_ns / (double)m->sim_ns : 0;
  m->cpu_ns = 0;
  m->sim_ns = 0;
  if (!(threshold > 0)) { /* no slow lane: a session on it (none) comes back */
    m->run = 0;
    return 0;
  }
  if (m->settle > 0) {
    m->settle--;
    return slow_now;
  }
  const int other = slow_now ? m->load < TS_LANE_BACK * threshold : m->load > threshold;
  m->run = other ? m->run + 1 : 0;
  if (m->run < TS_LANE_WINDOWS) return slow_now;
  m->run = 0;
  return !slow_now;
}
