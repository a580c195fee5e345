/*
 * force.c: force feedback samples from the physics thread to controllers
 * (see force.h).
 */
#include "force.h"

#include <math.h>

#include "log.h"
#include "server.h"
#include "session.h"
#include "tissue.pb-c.h"

uint32_t ts_force_every(uint32_t rate, double dt) {
  if (rate == 0 || !(dt > 0)) return 1;
  double k = floor(1.0 / ((double)rate * dt) + 0.5);
  return k < 1 ? 1 : k > 1e6 ? 1000000u : (uint32_t)k;
}

uint32_t ts_force_collect(ts_session *se, ts_force_batch *b) {
  ts_session_sim *sim = &se->sim;
  b->n = 0;
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    uint32_t every = sim->force_every[i];
    const ts_tool *t = &sim->tools[i];
    if (!every || !t->active || sim->steps % every != 0) continue;
    ts_force_sample *s = &b->s[b->n++];
    s->tool_id = (uint32_t)i + 1;
    s->contacts = t->contacts;
    const ts_tool_contact *tc = &sim->tool_contact;
    s->tool_contacts = (uint32_t)i < tc->n_slots ? tc->slot[i].touching : 0;
    s->step = sim->steps;
    s->sim_time = sim->tissue->time;
    for (int a = 0; a < 3; a++) {
      s->force[a] = sim->force_out[i][a];
      s->torque[a] = sim->torque_out[i][a];
    }
    s->last_pose_seq = sim->last_pose_seq[i];
    s->last_client_time_us = sim->last_client_time_us[i];
  }
  return b->n;
}

void ts_force_deliver(ts_session *se, const ts_force_batch *b) {
  ts_server *srv = se->server;
  for (uint32_t k = 0; k < b->n; k++) {
    const ts_force_sample *s = &b->s[k];
    if (s->tool_id < 1 || s->tool_id > TS_MAX_TOOLS) continue;
    ts_conn *c = se->tool_owner[s->tool_id - 1];
    if (!c || c->closing || c->session != se) continue;
    if (c->ops->pending(c) > srv->cfg.soft_output_limit) {
      se->forces_skipped++;
      continue;
    }
    Tissued__V1__Vec3 f = TISSUED__V1__VEC3__INIT, tq = TISSUED__V1__VEC3__INIT;
    f.x = (float)s->force[0];
    f.y = (float)s->force[1];
    f.z = (float)s->force[2];
    tq.x = (float)s->torque[0];
    tq.y = (float)s->torque[1];
    tq.z = (float)s->torque[2];
    Tissued__V1__ToolForce m = TISSUED__V1__TOOL_FORCE__INIT;
    m.session_id = se->id;
    m.tool_id = s->tool_id;
    m.step = s->step;
    m.sim_time = s->sim_time;
    m.force = &f;
    m.torque = &tq;
    m.last_pose_seq = s->last_pose_seq;
    m.last_client_time_us = s->last_client_time_us;
    m.contacts = s->contacts;
    m.tool_contacts = s->tool_contacts;
    Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_TOOL_FORCE;
    env.tool_force = &m;
    uint8_t buf[160]; /* a ToolForce Envelope packs to under 100 bytes */
    size_t len = tissued__v1__envelope__get_packed_size(&env);
    if (len > sizeof buf) {
      ts_log_error("session %u: a force message of %zu bytes", se->id, len);
      continue;
    }
    tissued__v1__envelope__pack(&env, buf);
    if (ts_conn_send(c, buf, len) == 0) se->forces_sent++;
  }
}
