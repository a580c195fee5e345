/*
 * session.c: session creation, the client list, the mailbox, the physics
 * step of one session, and the sharing of frames among its clients (see
 * session.h for who owns what).
 */
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_refine.h"
#include "core/ts_tool_proxy.h"
#include "log.h"
#include "refine.h"
#include "server.h"
#include "session_contact.h"
#include "session_self.h"
#include "shortcut.h"
#include "ts_codec.h"

int ts_session_create(ts_server *s, const char *name, const ts_patch_def *def, double dt,
                      int frame_rate, ts_session **out, char *err, size_t errcap) {
  ts_tissue *t = NULL;
  /* the build's stability bounds stop when the daemon does (ts_tissue.stop) */
  int rc = ts_patch_create_stoppable(def, &s->stopping, &t);
  if (rc == TS_ESHUTDOWN) {
    snprintf(err, errcap, "server is shutting down");
    return rc;
  }
  if (rc) {
    snprintf(err, errcap, "cannot build the tissue: %s", ts_strerror(rc));
    return rc;
  }
  ts_refine_src *src = NULL;
  if (ts_refine_src_patch(def, &src)) src = NULL; /* then not refinable; the session still runs */
  rc = ts_session_create_with_tissue(s, name, TS_BUILTIN_TISSUE, t, dt, frame_rate, out, err,
                                     errcap);
  if (rc)
    ts_refine_src_free(src);
  else
    (*out)->sim.refine_src = src;
  return rc;
}

int ts_session_create_with_tissue(ts_server *s, const char *name, const char *tissue_name,
                                  ts_tissue *t, double dt, int frame_rate, ts_session **out,
                                  char *err, size_t errcap) {
  ts_session *se = calloc(1, sizeof *se);
  if (!se) {
    ts_tissue_destroy(t);
    snprintf(err, errcap, "out of memory");
    return TS_ENOMEM;
  }
  se->sim.tissue = t;
  t->stop = &s->stopping; /* a step under way when the daemon stops is left (ts_tissue.stop) */
  se->topo = ts_topology_from_tissue(se->sim.tissue);
  if (!se->topo || uv_mutex_init(&se->mbox.lock)) {
    ts_topology_free(se->topo);
    ts_tissue_destroy(se->sim.tissue);
    free(se);
    snprintf(err, errcap, "out of memory");
    return TS_ENOMEM;
  }
  se->server = s;
  snprintf(se->name, sizeof se->name, "%s", name);
  snprintf(se->tissue_name, sizeof se->tissue_name, "%s", tissue_name);
  se->sim.dt = dt;
  se->sim.dt_ns = (uint64_t)llround(dt * 1e9);
  se->sim.frame_interval = 1.0 / frame_rate;
  se->sim.next_frame_time = 0;
  se->sim.quantum = TS_DEFAULT_QUANTUM;
  se->sim.max_step = s->cfg.tool_max_speed * dt;
  ts_session_sleep_init(&se->sim.sleep, s->cfg.sleep_speed, se->sim.max_step);
  if (ts_tool_contact_init(&se->sim.tool_contact, TS_MAX_TOOLS, 0)) {
    ts_topology_free(se->topo);
    ts_tissue_destroy(se->sim.tissue);
    uv_mutex_destroy(&se->mbox.lock);
    free(se);
    snprintf(err, errcap, "out of memory");
    return TS_ENOMEM;
  }
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    ts_tool *tool = &se->sim.tools[i];
    se->sim.cmd_quat[i][0] = 1;
    se->sim.cmd_pos[i][1] = 0.05;
    tool->kind = TS_TOOL_SPHERE;
    tool->radius = 0.005;
    tool->quat[0] = 1;
    tool->pos[1] = 0.05; /* parked above the tissue */
    tool->mu_static = se->mbox.tool[i].mu_static = TS_TOOL_MU_STATIC_DEFAULT;
    tool->mu_kinetic = se->mbox.tool[i].mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
    se->mbox.tool[i].quat[0] = 1;
    se->mbox.tool[i].pos[1] = 0.05;
    ts_force_filter_init(&se->sim.force_filter[i], TS_FORCE_FILTER_DEFAULT_HZ, 0);
  }
  *out = se;
  return 0;
}

int ts_session_use_xpbd(ts_session *se, const ts_solver_opts *sv, char *err, size_t errcap) {
  ts_xpbd_def def = ts_xpbd_default_def();
  def.damping = se->sim.tissue->drag;
  if (sv->substeps) def.substeps = sv->substeps;
  if (sv->iterations) def.iterations = sv->iterations;
  se->sim.xpbd_def = def;
  int rc = ts_xpbd_build(se->sim.tissue, &def, &se->sim.xpbd);
  if (rc) {
    snprintf(err, errcap, "cannot set up the XPBD solver: %s", ts_strerror(rc));
    return rc;
  }
  se->sim.contact = calloc(1, sizeof *se->sim.contact);
  rc = se->sim.contact ? ts_session_contact_init(se->sim.contact, se->sim.tissue) : TS_ENOMEM;
  if (rc) snprintf(err, errcap, "cannot build the tissue's collision tree: %s", ts_strerror(rc));
  return rc;
}

int ts_session_use_shortcut(ts_session *se, double interval, uint32_t sample_cap,
                            uint32_t train_after, char *err, size_t errcap) {
  se->sim.max_step = 0; /* quasi-static: each press is solved to rest, poses are taken at once */
  int rc = ts_shortcut_create(se->sim.tissue, interval, sample_cap, &se->sim.shortcut);
  if (rc) {
    snprintf(err, errcap, "cannot set up the quasi-static solve: %s", ts_strerror(rc));
    return rc;
  }
  se->sim.train_after = train_after;
  se->mbox.use_learned = -1;
  snprintf(se->material, sizeof se->material, "%s", se->sim.shortcut->material);
  return 0;
}

void ts_session_free(ts_session *se) {
  if (!se) return;
  ts_shortcut_destroy(se->sim.shortcut);
  ts_learn_set_free(se->sim.samples_out);
  ts_xpbd_destroy(se->sim.xpbd);
  ts_refine_src_free(se->sim.refine_src);
  ts_refine_req_free(se->mbox.refine);
  ts_session_contact_free(se->sim.contact);
  free(se->sim.contact);
  ts_session_self_destroy(se->sim.self);
  ts_tool_contact_free(&se->sim.tool_contact);
  if (se->latest) ts_frame_release(se->latest);
  ts_topology_free(se->topo);
  ts_tissue_destroy(se->sim.tissue);
  uv_mutex_destroy(&se->mbox.lock);
  free(se);
}

/* A client's baseline is the last frame written to it, held by reference
 * so that a delta can be made against it however old it is (a 60 Hz client
 * beside a 1 kHz one, or a client that briefly fell behind). */
static void set_baseline(ts_conn *c, ts_frame_ref *f) {
  if (f) ts_frame_retain(f);
  if (c->baseline) ts_frame_release(c->baseline);
  c->baseline = f;
}

static void post_frames_wanted(ts_session *se);

void ts_session_attach(ts_session *se, ts_conn *c) {
  c->session = se;
  c->prev_in_session = NULL;
  c->next_in_session = se->clients;
  if (se->clients) se->clients->prev_in_session = c;
  se->clients = c;
  se->n_clients++;
  se->idle_since_ms = 0;
  set_baseline(c, NULL);
  c->over_soft_since_ms = 0;
  c->frame_due_us = 0;
  post_frames_wanted(se); /* due at once */
}

void ts_session_detach(ts_session *se, ts_conn *c) {
  if (c->session != se) return;
  if (c->prev_in_session)
    c->prev_in_session->next_in_session = c->next_in_session;
  else
    se->clients = c->next_in_session;
  if (c->next_in_session) c->next_in_session->prev_in_session = c->prev_in_session;
  c->next_in_session = c->prev_in_session = NULL;
  se->n_clients--;
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    if (se->tool_owner[i] == c) {
      se->tool_owner[i] = NULL;
      ts_session_set_tool(se, (uint32_t)i + 1, 0, TS_TOOL_SPHERE, 0, 0);
    }
  }
  set_baseline(c, NULL);
  c->over_soft_since_ms = 0;
  c->session = NULL;
  if (se->n_clients == 0) se->idle_since_ms = ts_now_ms(se->server);
  post_frames_wanted(se);
}

/* Per-client frame rate: a virtual schedule with one frame of credit (the
 * generic cell rate algorithm, ITU-T I.371, with its tolerance equal to the
 * interval T; the same as a token bucket of depth 2 filled at 1/T).
 * frame_due_us is the theoretical time of the client's next frame. A frame
 * is due when it comes no earlier than one interval before that; sending
 * one moves the schedule one interval on from the later of the schedule and
 * now. In any wall-clock window of W a client gets at most W / T + 2 frames
 * (two back to back at worst, never three).
 *
 * Why not "at least T since the last frame sent": sessions publish frames
 * on their simulated clock (one each 1/frame-rate s of simulated time,
 * physics.c), which reaches the loop irregularly in wall time: a step that
 * does not divide the frame interval (20, 20, 10 ms at dt 10 ms and 60 Hz),
 * jitter, and a physics thread that runs behind real time and catches up
 * with two steps back to back. Such a frame came "too early" and was
 * skipped although the client was below its rate on average (a liver
 * session stepping 44 times a second reached a 60 Hz page at 19 frames a
 * second). Here an early frame uses the credit of a late one, so that a
 * client slower than the session gets its rate. A depth of 1 (no credit)
 * drops the second of every back-to-back pair; more depth allows longer
 * bursts.
 *
 * A client at or above the session's rate (the default: both are
 * --frame-rate) is to get every frame. At equal rates no finite credit does
 * that: each late delivery moves the schedule on for good, the deficits add
 * up and every time they pass the credit a frame is skipped (measured: 9 %
 * of a 60 Hz client's frames on a busy machine). Such a client is paced at
 * twice the session's rate instead (T = min(its interval, half the
 * session's)), so its schedule catches up half an interval per frame:
 * it gets every frame the session publishes, at most two back to back. */
static uint64_t client_interval_us(const ts_session *se, const ts_conn *c) {
  uint64_t session_us = (uint64_t)llround(se->sim.frame_interval * 1e6);
  /* (1 us: both are 1e6 / rate, rounded each its own way) */
  if (c->frame_interval_us > session_us + 1) return c->frame_interval_us; /* slower: its rate */
  return c->frame_interval_us < session_us / 2 ? c->frame_interval_us : session_us / 2;
}

static int frame_due(const ts_conn *c, uint64_t now_us, uint64_t interval_us) {
  return !c->frame_due_us || now_us + interval_us >= c->frame_due_us;
}

static void frame_sent(ts_conn *c, uint64_t now_us, uint64_t interval_us) {
  uint64_t from = c->frame_due_us > now_us ? c->frame_due_us : now_us;
  c->frame_due_us = from + interval_us;
}

/* Posts to the physics thread when the earliest of se's clients is next
 * due a frame (frame_due: from frame_due_us minus its interval). A frame
 * costs the physics thread a quantization of every vertex (5 % of a
 * patch-S step at 1 kHz, perf) and the loop an event; at --frame-rate 1000
 * with 60 Hz clients 16 of every 17 were made for nobody. Closing clients
 * take no more frames; without clients every frame is made as before (the
 * metrics read the newest one). */
static void post_frames_wanted(ts_session *se) {
  uint64_t from = UINT64_MAX;
  if (!se->n_clients) from = 0;
  for (const ts_conn *c = se->clients; c; c = c->next_in_session) {
    if (c->closing) continue;
    uint64_t interval_us = client_interval_us(se, c);
    uint64_t w = c->frame_due_us > interval_us ? c->frame_due_us - interval_us : 0;
    if (w < from) from = w;
  }
  atomic_store_explicit(&se->frames_wanted_us, from, memory_order_relaxed);
}

void ts_session_on_frame(ts_session *se, ts_frame_ref *f, uint64_t now_ms) {
  uint64_t now_us = uv_hrtime() / 1000;
  if (se->latest) ts_frame_release(se->latest);
  se->latest = f; /* takes the event's reference */
  if (f->self_state >= 0) {
    se->self_state = f->self_state;
    se->self_surface_nodes = f->self_surface_nodes;
    se->self_steps_over_limit = f->self_steps_over_limit;
    se->self_failures = f->self_failures;
  }
  ts_server *s = se->server;
  ts_conn *next;
  for (ts_conn *c = se->clients; c; c = next) {
    next = c->next_in_session;
    if (c->closing) continue;
    uint64_t interval_us = client_interval_us(se, c);
    if (!frame_due(c, now_us, interval_us)) continue;
    if (c->ops->pending(c) > s->cfg.soft_output_limit) {
      /* Over the soft limit: skip frames (never queue a backlog). A short
       * hiccup keeps its baseline and resumes with a delta against it; a
       * client over the limit for longer than the grace period is
       * resynchronised: its next frame is a keyframe of the newest state. */
      se->frames_skipped++;
      if (!c->over_soft_since_ms) {
        c->over_soft_since_ms = now_ms ? now_ms : 1;
      } else if (c->baseline &&
                 (double)(now_ms - c->over_soft_since_ms) >= s->cfg.soft_output_grace * 1e3) {
        set_baseline(c, NULL);
        se->clients_resynced++;
      }
      continue;
    }
    c->over_soft_since_ms = 0;
    ts_frame_ref *base = c->baseline;
    if (base && base->n != f->n) base = NULL; /* the topology changed: keyframe */
    const ts_encoded *e = ts_frame_encode(f, base, se->topo, s->codec);
    if (!e) {
      ts_log_error("session %u: out of memory encoding a frame", se->id);
      break;
    }
    /* the same bytes for every client on this baseline, never copied */
    int rc = c->ops->send_shared ? c->ops->send_shared(c, e->buf)
                                 : c->ops->send(c, e->bytes, e->len);
    if (rc == TS_EFULL) {
      ts_conn_drop_full(c); /* counted in se->clients_dropped too */
      continue;
    }
    if (rc) continue;
    set_baseline(c, f);
    frame_sent(c, now_us, interval_us);
    se->frames_sent++;
    s->frames_out++;
    s->bytes_out += e->len;
  }
  post_frames_wanted(se);
}

void ts_session_set_tool(ts_session *se, uint32_t tool_id, int active, int kind, double radius,
                         double length) {
  ts_session_set_tool_shape(se, tool_id, active, kind, radius, length, NULL);
}

void ts_session_set_tool_shape(ts_session *se, uint32_t tool_id, int active, int kind,
                               double radius, double length, const struct ts_obb_tree *shape) {
  if (tool_id < 1 || tool_id > TS_MAX_TOOLS) return;
  uv_mutex_lock(&se->mbox.lock);
  ts_mailbox_tool *m = &se->mbox.tool[tool_id - 1];
  m->active = active;
  if (!active) m->force_every = 0;
  m->kind = kind;
  m->shape = shape;
  if (radius > 0) m->radius = radius;
  m->length = length;
  /* a tool that is taken or released is parked away from the tissue until
   * its controller's first pose */
  m->pos[0] = m->pos[2] = 0;
  m->pos[1] = 0.05;
  m->quat[0] = 1;
  m->quat[1] = m->quat[2] = m->quat[3] = 0;
  m->seq = 0;
  m->client_time_us = 0;
  m->parked = 1;
  m->dirty = 1;
  uv_mutex_unlock(&se->mbox.lock);
}

void ts_session_set_tool_friction(ts_session *se, uint32_t tool_id, double mu_static,
                                  double mu_kinetic) {
  if (tool_id < 1 || tool_id > TS_MAX_TOOLS || ts_tool_friction_valid(mu_static, mu_kinetic))
    return;
  uv_mutex_lock(&se->mbox.lock);
  ts_mailbox_tool *m = &se->mbox.tool[tool_id - 1];
  m->mu_static = mu_static;
  m->mu_kinetic = mu_kinetic;
  m->dirty = 1;
  uv_mutex_unlock(&se->mbox.lock);
}

void ts_session_post_pose(ts_session *se, uint32_t tool_id, const double pos[3],
                          const double quat[4], double jaw, uint64_t seq, uint64_t client_time_us) {
  if (tool_id < 1 || tool_id > TS_MAX_TOOLS) return;
  uv_mutex_lock(&se->mbox.lock);
  ts_mailbox_tool *m = &se->mbox.tool[tool_id - 1];
  memcpy(m->pos, pos, sizeof m->pos);
  memcpy(m->quat, quat, sizeof m->quat);
  m->jaw = jaw;
  m->seq = seq;
  m->client_time_us = client_time_us;
  m->dirty = 1;
  uv_mutex_unlock(&se->mbox.lock);
}

void ts_session_set_force_every(ts_session *se, uint32_t tool_id, uint32_t every) {
  if (tool_id < 1 || tool_id > TS_MAX_TOOLS) return;
  uv_mutex_lock(&se->mbox.lock);
  se->mbox.tool[tool_id - 1].force_every = every;
  uv_mutex_unlock(&se->mbox.lock);
}

void ts_session_request_reset(ts_session *se) {
  uv_mutex_lock(&se->mbox.lock);
  se->mbox.reset = 1;
  uv_mutex_unlock(&se->mbox.lock);
}

/* Puts tool t at the parking spot, 50 mm above the patch, upright. */
static void park(ts_tool *t) {
  t->pos[0] = t->pos[2] = 0;
  t->pos[1] = 0.05;
  t->quat[0] = 1;
  t->quat[1] = t->quat[2] = t->quat[3] = 0;
}

/* The tissue back at rest and every tool parked above it (a reset, or the
 * recovery from a divergence): each tool then approaches its controller's
 * pose again at tool-max-speed, so that a pose deep in the tissue cannot
 * throw the rest state at once. */
static void to_rest(ts_session_sim *sim) {
  sim->rest_epoch++;
  ts_session_sleep_wake(&sim->sleep);
  ts_tissue_reset(sim->tissue);
  if (sim->shortcut) ts_shortcut_reset(sim->shortcut, sim->tissue);
  if (sim->contact) ts_session_contact_reset(sim->contact);
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    ts_tool *t = &sim->tools[i];
    park(t);
    ts_tool_contact_park(&sim->tool_contact, (uint32_t)i);
    memset(t->force, 0, sizeof t->force);
    memset(t->torque, 0, sizeof t->torque);
    ts_force_filter_init(&sim->force_filter[i], TS_FORCE_FILTER_DEFAULT_HZ, 0);
    memset(sim->force_out[i], 0, sizeof sim->force_out[i]);
    memset(sim->torque_out[i], 0, sizeof sim->torque_out[i]);
  }
  sim->next_frame_time = sim->tissue->time; /* a frame right away */
}

static void drain_mailbox(ts_session *se) {
  ts_session_sim *sim = &se->sim;
  uv_mutex_lock(&se->mbox.lock);
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    ts_mailbox_tool *m = &se->mbox.tool[i];
    sim->force_every[i] = m->force_every;
    if (!m->dirty) continue;
    ts_tool *t = &sim->tools[i];
    if (t->active != m->active) /* taken or released: its force starts from rest */
      ts_force_filter_init(&sim->force_filter[i], TS_FORCE_FILTER_DEFAULT_HZ, 0);
    t->active = m->active;
    t->kind = m->kind;
    if (m->radius > 0) t->radius = m->radius;
    t->length = m->length;
    t->shape = m->shape;
    t->mu_static = m->mu_static;
    t->mu_kinetic = m->mu_kinetic;
    /* the command; the proxy t follows it in the step (ts_tool_proxy.h),
     * except to the parking spot of a tool taken or released */
    memcpy(sim->cmd_pos[i], m->pos, sizeof sim->cmd_pos[i]);
    memcpy(sim->cmd_quat[i], m->quat, sizeof sim->cmd_quat[i]);
    sim->cmd_jaw[i] = m->jaw;
    if (m->parked) { /* (a pose may have followed already: park, then follow it) */
      park(t);
      ts_tool_contact_park(&sim->tool_contact, (uint32_t)i);
      t->jaw = m->jaw;
      m->parked = 0;
    }
    sim->last_pose_seq[i] = m->seq;
    sim->last_client_time_us[i] = m->client_time_us;
    m->dirty = 0;
  }
  int reset = se->mbox.reset;
  se->mbox.reset = 0;
  if (se->mbox.refine) ts_session_sleep_wake(&sim->sleep); /* it is made from a moving tissue */
  int train = 0;
  struct ts_shortcut *sc = sim->shortcut;
  if (sc) {
    if (se->mbox.model_ready && ts_shortcut_install(sc, &se->mbox.model) == 0)
      sc->use_learned = 1;
    se->mbox.model_ready = 0;
    if (se->mbox.use_learned >= 0) sc->use_learned = se->mbox.use_learned;
    se->mbox.use_learned = -1;
    train = se->mbox.train_request;
    se->mbox.train_request = 0;
    se->mbox.samples = ts_shortcut_samples(sc);
    se->mbox.learned = ts_shortcut_learned(sc);
    se->mbox.model_answers = sc->learned_presses;
    se->mbox.model_rejected = sc->fallbacks;
    se->mbox.qs_solves = sc->solves;
    se->mbox.qs_unconverged = sc->unconverged;
    se->mbox.qs_worst_residual = sc->worst_residual;
  }
  uv_mutex_unlock(&se->mbox.lock);
  if (sc) {
    /* training by request, or by itself once enough samples are in */
    int automatic = !train && sim->train_after && !sim->auto_trained && !sc->has_model &&
                    ts_shortcut_samples(sc) >= sim->train_after;
    if ((train || automatic) && !sim->samples_out &&
        ts_learn_set_copy(sc->l->set, &sim->samples_out) == 0) {
      sim->samples_out_auto = automatic;
      if (automatic) sim->auto_trained = 1;
    }
  }
  if (reset) to_rest(sim);
}

/* The reaction on each tool, the tissue's plus the other tools' push
 * (core/ts_tool_contact.h), through its haptic filter (force.h). */
static void filter_forces(ts_session_sim *sim) {
  const ts_tool_contact *tc = &sim->tool_contact;
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    const ts_tool *t = &sim->tools[i];
    const ts_tool_contact_slot *push = (uint32_t)i < tc->n_slots ? &tc->slot[i] : NULL;
    double in[TS_FORCE_FILTER_N], out[TS_FORCE_FILTER_N];
    for (int a = 0; a < 3; a++) {
      in[a] = t->active ? t->force[a] + (push ? push->force[a] : 0) : 0;
      in[3 + a] = t->active ? t->torque[a] + (push ? push->torque[a] : 0) : 0;
    }
    if (ts_force_filter_step(&sim->force_filter[i], sim->dt, in, out)) continue;
    for (int a = 0; a < 3; a++) {
      sim->force_out[i][a] = out[a];
      sim->torque_out[i][a] = out[3 + a];
    }
  }
}

int ts_session_solver_step(ts_session_sim *sim, ts_step_stats *st, ts_xpbd_stats *xs) {
  if (sim->xpbd)
    return sim->contact ? ts_session_contact_step(sim->contact, sim->xpbd, sim->tissue, sim->dt,
                                                  sim->tools, xs)
                        : ts_xpbd_step(sim->xpbd, sim->tissue, sim->dt, sim->tools, TS_MAX_TOOLS,
                                       xs);
  return ts_massspring_step(sim->tissue, sim->dt, sim->tools, TS_MAX_TOOLS, st);
}

ts_frame_ref *ts_session_step(ts_session *se, int *diverged) {
  ts_session_sim *sim = &se->sim;
  *diverged = 0;
  drain_mailbox(se);
  ts_refine_physics(se); /* a pending RefineRegion, between two steps */
  /* every active tool's proxy towards its command, at most max_step */
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    ts_tool *t = &sim->tools[i];
    if (t->active)
      ts_tool_proxy_follow(t, sim->cmd_pos[i], sim->cmd_quat[i], sim->cmd_jaw[i], sim->max_step);
  }
  ts_step_stats st;
  memset(&st, 0, sizeof st);
  uint64_t t0 = uv_hrtime();
  int rc;
  /* a tissue at rest sleeps (session_sleep.h): asleep, this step's tool
   * poses say whether it wakes (tool against tool is then placed here,
   * once); woken, its solver forgets the tools' poses from before */
  const int can_sleep = !sim->shortcut && !sim->self;
  int tools_placed = 0, slept = 0;
  if (can_sleep && (sim->sleep.asleep || sim->sleep.woke)) {
    if (sim->sleep.asleep) {
      (void)ts_tool_contact_step(&sim->tool_contact, sim->tools, TS_MAX_TOOLS);
      tools_placed = 1;
    }
    const int sl = ts_session_sleep_check(&sim->sleep, sim->tissue, &sim->tool_contact,
                                          sim->tools, TS_MAX_TOOLS);
    slept = sl == TS_SLEEP_ASLEEP;
    if (sl == TS_SLEEP_WOKE) {
      if (sim->contact) ts_session_contact_reset(sim->contact);
      else if (sim->xpbd) ts_xpbd_carry_tools(sim->xpbd, NULL);
      else (void)ts_massspring_carry_tools(sim->tissue, NULL); /* fails only unprepared:
                                                                 then it has none */
    }
  }
  /* self-contact: its tree for this tissue, XPBD pointed at it (a failure
   * to build it skips the pass this step, not the session) */
  const int self_ok = sim->self && !sim->shortcut &&
                      ts_session_self_prepare(sim->self, sim->tissue, sim->xpbd) == 0;
  int self_pairs = -1; /* XPBD: its last substep's pairs */
  if (slept) {
    ts_session_sleep_skip_step(&sim->sleep, sim->tissue, sim->tools, TS_MAX_TOOLS, sim->dt);
    st.substeps = sim->substeps; /* the last computed step's figures stay */
    st.verlet_fraction = sim->verlet_fraction;
    st.beeman_fraction = sim->beeman_fraction;
    st.inertia_scale = sim->inertia_scale;
    rc = 0;
  } else if (sim->xpbd) {
    ts_xpbd_stats xs;
    memset(&xs, 0, sizeof xs);
    rc = ts_session_solver_step(sim, &st, &xs);
    st.substeps = xs.substeps;
    st.contacts = xs.contacts;
    self_pairs = (int)xs.self_contacts;
    if (rc == TS_EDIVERGED) /* which test, which node, in which substep (core/ts_xpbd_diverge.c) */
      ts_xpbd_diverged_text(&xs, sim->diverged_why, sizeof sim->diverged_why);
    else if (rc && rc != TS_ESHUTDOWN) /* a step left for the shutdown is not a failure */
      snprintf(sim->diverged_why, sizeof sim->diverged_why, "the XPBD step failed (%s)", ts_strerror(rc));
    if (rc && rc != TS_EDIVERGED && rc != TS_ESHUTDOWN)
      rc = TS_EDIVERGED; /* any failure stops the session */
  } else if (sim->shortcut) {
    ts_shortcut_stats ss;
    rc = ts_shortcut_step(sim->shortcut, sim->tissue, sim->tools, TS_MAX_TOOLS, sim->dt, &ss);
    if (rc == TS_EDIVERGED)
      snprintf(sim->diverged_why, sizeof sim->diverged_why,
               "the quasi-static solve reached a non-finite state");
    if (ss.recorded_full) sim->samples_full_out = ss.recorded_full;
    st.substeps = ss.iterations; /* relaxation sweeps stand in for substeps */
    for (int i = 0; i < TS_MAX_TOOLS; i++)
      if (sim->tools[i].active) st.contacts += sim->tools[i].contacts;
  } else {
    rc = ts_session_solver_step(sim, &st, NULL);
    if (rc == TS_EDIVERGED) /* which test, by how much, which node (core/ts_ms_diverge.c) */
      ts_massspring_diverged_text(&st, sim->diverged_why, sizeof sim->diverged_why);
  }
  /* the daemon is stopping and the step was left mid-way (ts_tissue.stop):
   * no frame, no divergence; the session is freed once physics stops */
  if (rc == TS_ESHUTDOWN) return NULL;
  if (rc == 0 && self_ok) ts_session_self_after(sim->self, sim->tissue, self_pairs);
  sim->self_contacts = self_ok && rc == 0 ? sim->self->contacts : 0;
  if (rc == 0) {
    /* tool against tool: each tool feels the others (the penalty joins the
     * tissue's reaction in filter_forces); a tool whose tree cannot be
     * built (out of memory) is left out of this step, not the session */
    if (!tools_placed) (void)ts_tool_contact_step(&sim->tool_contact, sim->tools, TS_MAX_TOOLS);
    sim->tool_contacts = sim->tool_contact.contacts;
    if (sim->tool_contact.pairs) sim->tool_contact_steps++;
    filter_forces(sim);
    if (can_sleep && !slept)
      ts_session_sleep_after(&sim->sleep, sim->tissue, &sim->tool_contact, sim->tools,
                             TS_MAX_TOOLS, st.contacts, sim->dt);
  }
  double ns = (double)(uv_hrtime() - t0);
  sim->step_ns_ewma = sim->steps ? 0.99 * sim->step_ns_ewma + 0.01 * ns : ns;
  sim->steps++;
  sim->substeps = st.substeps;
  sim->contacts = st.contacts;
  sim->verlet_fraction = st.verlet_fraction;
  sim->inertia_scale = st.inertia_scale > 0 ? st.inertia_scale : 1.0;
  sim->beeman_fraction = st.beeman_fraction;
  if (rc == TS_EDIVERGED) {
    /* the core never lets NaN out (it put the tissue at rest); the session
     * recovers and goes on */
    *diverged = 1;
    to_rest(sim);
    return NULL;
  }
  /* due within half a step: the time is a sum of steps, whose rounding
   * grows past any fixed allowance (1e-12 s let a frame of a 1 ms session
   * slip a whole step, off its 10 ms grid, after ~30 s of simulated time) */
  if (sim->tissue->time + 0.5 * sim->dt < sim->next_frame_time) return NULL;
  sim->next_frame_time += sim->frame_interval;
  if (sim->next_frame_time < sim->tissue->time) sim->next_frame_time = sim->tissue->time;
  /* No client is due a frame before the next step ends (the loop's view,
   * post_frames_wanted): none is made; a step's head start, since the frame
   * reaches the loop a step's time after this test. The flags of frames
   * not made (behind, stalled) go with the next one. */
  uint64_t wanted_us = atomic_load_explicit(&se->frames_wanted_us, memory_order_relaxed);
  if (wanted_us && uv_hrtime() / 1000 + sim->dt_ns / 1000 < wanted_us) return NULL;

  ts_tissue *t = sim->tissue;
  ts_frame_ref *f = ts_frame_new(t->n_nodes);
  if (!f) return NULL;
  if (ts_quantize((const double(*)[3])t->x, t->n_nodes, sim->quantum, f->q)) {
    /* off the grid: treat as divergence, never send it */
    snprintf(sim->diverged_why, sizeof sim->diverged_why,
             "a node's position is off the frames' grid (non-finite, or beyond what the %g m quantum "
             "can send)", sim->quantum);
    ts_frame_release(f);
    *diverged = 1;
    to_rest(sim);
    return NULL;
  }
  f->session_id = se->id;
  f->seq = ++sim->frame_seq;
  f->sim_time = t->time;
  f->quantum = sim->quantum;
  f->flags = sim->behind ? 1u : 0u;
  if (sim->shortcut && ts_shortcut_learned(sim->shortcut)) f->flags |= 4u; /* TS_FRAME_LEARNED */
  sim->behind = 0;
  f->step_seconds = sim->step_ns_ewma * 1e-9;
  f->step_load = sim->lane.load;
  f->steps = sim->steps;
  f->late_events = sim->late_events;
  f->substeps = sim->substeps;
  f->contacts = sim->contacts;
  f->tool_contacts = sim->tool_contacts;
  f->self_contacts = sim->self_contacts;
  f->self_state = sim->self ? (int)sim->self->state : -1;
  f->self_surface_nodes = sim->self ? sim->self->surface_nodes : 0;
  f->self_steps_over_limit = sim->self ? sim->self->steps_over_limit : 0;
  f->self_failures = sim->self ? sim->self->failures : 0;
  f->tool_contact_steps = sim->tool_contact_steps;
  f->asleep = sim->sleep.asleep;
  f->slept_steps = sim->sleep.slept_steps;
  f->verlet_fraction = sim->verlet_fraction;
  f->inertia_scale = sim->inertia_scale;
  f->added_mass = sim->added_mass;
  f->beeman_fraction = sim->beeman_fraction;
  f->n_tools = TS_MAX_TOOLS;
  for (int i = 0; i < TS_MAX_TOOLS; i++) {
    const ts_tool *tool = &sim->tools[i];
    ts_tool_state *s = &f->tools[i];
    s->tool_id = (uint32_t)i + 1;
    s->active = tool->active;
    s->last_pose_seq = sim->last_pose_seq[i];
    s->last_client_time_us = sim->last_client_time_us[i];
    for (int a = 0; a < 3; a++) {
      s->force[a] = (float)sim->force_out[i][a];
      s->pos[a] = (float)tool->pos[a];
    }
    for (int a = 0; a < 4; a++) s->quat[a] = (float)tool->quat[a];
    s->radius = (float)tool->radius;
    s->kind = tool->kind;
    s->length = (float)tool->length;
    s->jaw = (float)tool->jaw;
    /* as ToolForce.tool_contacts (force.c) */
    const ts_tool_contact *tc = &sim->tool_contact;
    s->tool_contacts = (uint32_t)i < tc->n_slots ? tc->slot[i].touching : 0;
  }
  return f;
}
