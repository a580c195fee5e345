/*
 * session_trial.c: a new session's trial steps (session_trial.h).
 */
#include "session_trial.h"

#include <stdio.h>
#include <string.h>

#include "session_contact.h"
#include "thread_self.h"

void ts_session_trial(ts_session *se, ts_trial *out) {
  ts_session_sim *sim = &se->sim;
  out->load = -1;
  out->steps = 0;
  out->cpu_s = 0;
  if (sim->shortcut || !sim->tissue || !(sim->dt > 0)) return;
  ts_tissue *t = sim->tissue;
  const double time0 = t->time;
  const uint64_t steps0 = t->steps;
  uint64_t first_ns = 0, timed_ns = 0;
  uint32_t timed = 0;
  int rc = 0;
  for (;;) {
    ts_step_stats st; /* no tool is active yet */
    ts_xpbd_stats xs;
    memset(&st, 0, sizeof st);
    memset(&xs, 0, sizeof xs);
    const uint64_t c0 = ts_thread_self_cpu_ns();
    rc = ts_session_solver_step(sim, &st, &xs);
    const uint64_t ns = ts_thread_self_cpu_ns() - c0;
    if (rc) break;
    if (out->steps++ == 0) {
      first_ns = ns;
      if (first_ns >= TS_TRIAL_HEAVY_NS) break;
      continue;
    }
    timed_ns += ns;
    if (++timed >= TS_TRIAL_STEPS || timed_ns >= TS_TRIAL_CPU_NS) break;
  }
  /* back at rest, as built (session.c's to_rest after a divergence) */
  ts_tissue_reset(t);
  t->time = time0;
  t->steps = steps0;
  if (sim->contact) ts_session_contact_reset(sim->contact);
  out->cpu_s = (double)(first_ns + timed_ns) * 1e-9;
  if (rc) return;
  /* the first step (a Taylor step, and the solver's preparation) stands
   * for the others only when it was the only one */
  const double sim_ns = (double)sim->dt * 1e9;
  out->load = timed ? (double)timed_ns / ((double)timed * sim_ns) : (double)first_ns / sim_ns;
}

void ts_session_trial_warning(const ts_trial *tr, double over, char *buf, size_t cap) {
  if (cap) buf[0] = '\0';
  if (!(tr->load > over) || !(over > 0)) return;
  snprintf(buf, cap,
           "on this server each step of this tissue takes about %.3g times the time it simulates "
           "(measured at creation, with no tool touching it): it runs in slow motion; a coarser "
           "mesh or fewer layers steps faster",
           tr->load);
}
