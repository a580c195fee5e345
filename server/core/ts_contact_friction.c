/*
 * ts_contact_friction.c: the Coulomb friction of the contact projection
 * (ts_contact.h), with sticking anchors held across (sub)steps.
 *
 * Position-level friction in the manner of M. Mueller et al., "Detailed
 * Rigid Body Simulation with Extended Position Based Dynamics", SCA 2020,
 * section 3.5, and M. Macklin et al., "Unified Particle Physics for
 * Real-Time Applications", SIGGRAPH 2014, section 6.1 (eq. 24): the
 * tangential offset of a vertex from the tool's material point it touches
 * is removed entirely while that correction stays inside the static cone
 * mu_s * lambda_n, lambda_n the vertex's normal correction accumulated over
 * the projections since ts_contact_begin; beyond the cone it is limited to
 * mu_k * lambda_n (kinetic). Two departures, both measured on
 * test_friction's stick test (a cube pressed into the default patch,
 * dragged 10 um and held, XPBD at 4 substeps and 4 sweeps):
 *  - Anchors. Both papers measure the offset over one substep only, from
 *    the contact points' positions at its start, so a vertex keeps whatever
 *    it slid in a substep where its cone was momentarily small, and a
 *    contact under a steady tangential load creeps (the pressed nodes slid
 *    back under the resting tool at 0.0074 mm/s). A sticking vertex keeps
 *    its anchor instead: the tool's material point (in the tool's frame) it
 *    was at when its contact started or when it last slid, and each
 *    projection pulls it back to that point's place at the end pose (the
 *    remedy of PhysX's "strong friction", which remembers the friction
 *    error between steps so that a box at rest on a slope does not glide:
 *    PxMaterialFlag::eDISABLE_STRONG_FRICTION's documentation). The anchor
 *    carries into the next ts_contact_begin when the vertex had a normal
 *    correction and stuck in its last projection; a vertex that slid, or
 *    had no normal correction (its contact ended), is anchored afresh
 *    where it stands at the start of its next contact, which is the
 *    papers' single-substep offset, so sliding is the kinetic friction it
 *    was.
 *  - The cone bounds the sum of the friction's corrections since
 *    ts_contact_begin as a vector, each projection revising it (the clamp
 *    of the accumulated impulse, E. Catto, "Iterative Dynamics with
 *    Temporal Coherence", GDC 2005), not the sum of their lengths: the
 *    first Gauss-Seidel sweep of a substep, whose distance constraints
 *    start from lambda = 0, throws a pressed vertex 3-5 um sideways with a
 *    normal correction of 1-5 um, and the later sweeps take most of it
 *    back; counting each sweep's length let that overshoot use up the
 *    cone, and the vertex slid in every substep.
 * Together: creep 0.0009 mm/s (was 0.0074) and 30 of the 57 pressed nodes
 * held at the tool's 10 um within 5 % (was 14), T/N 0.190 against the
 * mass-spring step's 0.189; the slip's T/N stays mu_k within 1.5 %.
 */
#include "ts_contact_friction.h"

#include <math.h>
#include <string.h>

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

void ts__friction_carry(ts_contact_ws *ws) {
  uint32_t as = ws->anc_now + 1;
  if (as == 0) { /* wrapped: no stale stamp may match */
    memset(ws->anc_stamp, 0, sizeof *ws->anc_stamp * ws->n_points);
    as = 1;
  }
  for (uint32_t j = 0; j < ws->n; j++)
    if (ws->v[j].keep) ws->anc_stamp[ws->v[j].node] = as;
  ws->anc_now = as;
}

void ts__friction_take(const ts_contact_ws *ws, ts_contact_vertex *v) {
  v->anchored = ws->anc_stamp[v->node] == ws->anc_now;
  v->keep = v->anchored; /* a second begin before any projection keeps it */
}

void ts_contact_forget(ts_contact_ws *ws) {
  if (!ws || !ws->v) return;
  for (uint32_t j = 0; j < ws->n; j++) ws->v[j].keep = 0;
}

double ts__friction(ts_contact_ws *ws, ts_contact_vertex *v, double y[3], const double y0[3]) {
  if (!(ws->def.mu_static > 0)) {
    v->keep = 0;
    return 0;
  }
  if (!(v->lam_n > 0)) { /* no normal correction: the contact ends, and its anchor */
    v->keep = 0;
    return 0;
  }
  double *a = ws->anchor[v->node];
  if (!v->anchored) {
    /* the tool's material point at y0 at the start pose, in the tool's frame */
    double w[3];
    for (int k = 0; k < 3; k++) w[k] = y0[k] - ws->from.p[k];
    for (int k = 0; k < 3; k++) a[k] = ws->Rf[0][k] * w[0] + ws->Rf[1][k] * w[1] + ws->Rf[2][k] * w[2];
    v->anchored = 1;
  }
  /* the offset from that point at the end pose, its tangential part */
  double d[3];
  for (int k = 0; k < 3; k++) d[k] = y[k] - (ws->to.p[k] + dot3(ws->Rt[k], a));
  const double dn = dot3(d, v->n);
  double dt[3];
  for (int k = 0; k < 3; k++) dt[k] = d[k] - dn * v->n[k];
  const double len = sqrt(dot3(dt, dt));
  if (!(len > 0)) {
    v->keep = 1;
    return 0;
  }
  /* the friction's summed correction since begin, were it to reach the
   * anchor now, clamped to the cone (Catto's accumulated clamp, above) */
  double f[3];
  for (int k = 0; k < 3; k++) f[k] = v->ft[k] - dt[k];
  const double fl = sqrt(dot3(f, f));
  double corr[3];
  if (fl <= ws->def.mu_static * v->lam_n) {
    for (int k = 0; k < 3; k++) corr[k] = -dt[k];
    v->keep = 1;
  } else {
    v->keep = 0; /* sliding: re-anchored at its next contact */
    const double s = ws->def.mu_kinetic * v->lam_n / fl;
    for (int k = 0; k < 3; k++) corr[k] = s * f[k] - v->ft[k];
  }
  for (int k = 0; k < 3; k++) {
    y[k] += corr[k];
    v->ft[k] += corr[k];
  }
  return sqrt(dot3(corr, corr));
}
