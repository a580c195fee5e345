/*
 * ts_xpbd.c: the position-based solver (see ts_xpbd.h), extended
 * position-based dynamics after M. Macklin, M. Mueller, N. Chentanez, "XPBD:
 * Position-Based Simulation of Compliant Constrained Dynamics", MIG 2016,
 * substepped as in M. Macklin et al., "Small Steps in Physics Simulation",
 * SCA 2019. This file: the method (below), the solver's creation (its
 * constraints, their sweep order, the automatic substep's omega, the
 * buffers) and its queries; the other parts, one concept a file, are
 * listed in ts_xpbd_internal.h.
 *
 * Substep (length h, inverse masses w):
 *   v += h g;  x_prev = x;  x += h v                 (free nodes)
 *   the distance constraints linearised at x_prev (the material law,
 *   below); tool contacts gathered at the predicted positions;
 *   lambda = 0; then `iterations` Gauss-Seidel sweeps over the distance,
 *   bending, volume and contact constraints in that order, each one doing
 *     dlambda = (-C - alpha~ lambda - gamma grad C . (x - x_prev))
 *               / ((1 + gamma) sum_i w_i |grad_i C|^2 + alpha~)      (eq. 26)
 *     x_i += w_i grad_i C dlambda;  lambda += dlambda
 *   with alpha~ = alpha / h^2 and gamma = alpha c / h for a damper c in
 *   parallel with the constraint (the paper's alpha~ beta~ / h with beta~ =
 *   h^2 c); a stiffness-proportional damper c = beta k gives gamma = beta / h;
 *   v = (x - x_prev) / h;  v /= 1 + d h              (d: def.damping)
 * The force a constraint exerts on its nodes is grad C lambda / h^2 (eq. 9
 * and 13 of the paper: M (x - x~) = grad C^T lambda). Contacts come last in
 * each sweep, so no node ends a substep inside a tool.
 *
 * Material to compliance. A constraint with energy C^2 / (2 alpha) is a
 * spring of stiffness 1/alpha on C, so each compliance is the inverse of a
 * stiffness that follows from the layers' moduli, never from h or the
 * iteration count:
 *   distance  C = |x_a - x_b| - L, alpha = 1 / k = L / (E A): the inverse of
 *             the spring's link-element constant k = E A / L, A = V / L, V
 *             the volume of material the builder attributed to the spring
 *             (ts_tissue_build.c: Van Gelder's equivalence, extended to
 *             prisms; with a fibre, E is the fibre-weighted mix of the axial
 *             and radial moduli, ts_material.h). Taking the builder's
 *             constants (ts_spring k1 + k2, or k for a hand-made linear
 *             spring) keeps the two solvers on one material: the same
 *             static equilibrium. The exponential law (ts_material.h),
 *             tension (k1 e^(b1 s) + k2 e^(b2 s)) (L - L0) at strain s > 0,
 *             is followed by replacing it with its tangent at the length at
 *             the start of each substep: a constraint of compliance 1 / k_t
 *             and a shifted rest length (ts_xpbd_compliance.c, def.nonlinear);
 *             at rest and in compression the compliance is 1 / (k1 + k2);
 *   bending   C = theta - theta0, theta the signed dihedral angle at an
 *             interior sheet edge, alpha = 1 / k_b with the discrete-shells
 *             stiffness k_b = 3 D |e|^2 / A_e (E. Grinspun et al., "Discrete
 *             Shells", SCA 2003; A_e the two triangles' area) and the plate
 *             modulus D = sum_l E_l (t_l / 2)^3 / (12 (1 - nu^2)) over the
 *             sheet's share of each slab beside it (a lone sheet: its whole
 *             layer t): the sheet's own bending, which a layer of springs
 *             lacks (a stack of sheets already resists bending through their
 *             separation, so this matters most for a single sheet);
 *   volume    C = V - V0 of each prism, alpha = V0 / K with the bulk modulus
 *             K = E / (3 (1 - 2 nu)) (energy K (dV)^2 / (2 V0)), on top of
 *             the volume stiffness the springs already give;
 *   contact   C = (distance from the tool's core) - r >= 0, alpha = 0,
 *             lambda >= 0 (a rigid, frictionless tool);
 *   guard     C = V / V0 - 1/4 >= 0 of a corner tetrahedron of a prism
 *             found inside out where a tool has been, alpha = 1 / (E |V0|)
 *             (ts_xpbd_guard.c, def.fold_guard), swept after the volume
 *             constraints.
 * E here is the layer's small-strain modulus (ts_layer.young).
 *
 * Substep count (def.substeps = 0). Gauss-Seidel converges in a few sweeps
 * only while h^2 k w is of order 1 or less for the typical constraint (k
 * its stiffness, w = w_a + w_b); stiffer, XPBD acts softer than the
 * material. The automatic count makes h omega <= 0.8, omega the mean over
 * the compliant distance constraints of sqrt(k w), fixed at creation: on
 * the default patch 4 substeps at 1 ms (sag within 0.002 % of converged
 * with 4 iterations), at twice its resolution 7 (within 0.3 %), where 4
 * would be 10 % too soft.
 *
 * After a live refinement the tissue's hand-over (ts_handover.h) blends the
 * distance constraints' rest lengths from its own to the springs' and adds
 * its residual node forces in the prediction; nodes get its contact
 * allowance against the sphere/capsule tools.
 *
 * Tools given as placed OBB trees (ts_xpbd_step_posed) are handled by
 * ts_contact.c and ts_grasp.c instead of the node-wise push
 * (ts_xpbd_contact.c): the tissue's AABB tree is refitted at the predicted
 * positions of every substep, each tool's candidates are taken from it, and
 * the held and the contact vertices are projected after the other
 * constraints in every sweep (the contact swept between the substep's two
 * poses in the first sweep, a mesh tool's triangle pass in every sweep:
 * ts_contact.h); the reaction is their sum(m dx) / h^2 like the multipliers
 * here.
 *
 * Tools move linearly between their previous and current poses over the
 * substeps, so that a tool's motion does not reach the tissue as one jump
 * in the first substep. Contact candidates (free nodes within a margin of a
 * tool) are gathered once per substep into a buffer of 2 entries per node.
 *
 * No allocation in the step: all buffers are sized at creation.
 */
#include "ts_xpbd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_xpbd_internal.h"

static int def_ok(const ts_xpbd_def *d) {
  if (d->iterations < 1 || d->iterations > TS__MAX_ITER) return 0;
  if (d->substeps > TS__MAX_SUB) return 0; /* 0: automatic */
  if (!isfinite(d->damping) || d->damping < 0 || d->damping > 1e6) return 0;
  if (!isfinite(d->stiffness_damping) || d->stiffness_damping < 0 || d->stiffness_damping > 1e3)
    return 0;
  if (!isfinite(d->poisson) || d->poisson < 0 || d->poisson >= 0.5) return 0;
  if (!(d->tree_slack >= 0) || !(d->tree_slack <= 1.0)) return 0;
  return 1;
}

ts_xpbd_def ts_xpbd_default_def(void) {
  ts_xpbd_def d;
  memset(&d, 0, sizeof d);
  d.iterations = 4;
  d.substeps = 0;
  d.damping = 150.0;
  d.stiffness_damping = 0.0;
  d.spring_dampers = 0;
  d.nonlinear = 1;
  d.bending = 0;
  d.volume = 0;
  d.poisson = 0.45;
  d.compliance = NULL;
  d.tree_slack = TS_XPBD_TREE_SLACK_DEFAULT;
  d.fold_guard = 1;
  return d;
}

void ts_xpbd_destroy(ts_xpbd *s) {
  if (!s) return;
  free(s->dist);
  free(s->spring_of);
  free(s->lam_d);
  free(s->sum_d);
  free(s->inv_den);
  free(s->at);
  free(s->rest_now);
  free(s->gamma);
  free(s->bend);
  free(s->lam_b);
  free(s->sum_b);
  free(s->vol);
  free(s->lam_v);
  free(s->sum_v);
  free(s->compliance);
  free(s->tension);
  free(s->x_prev);
  free(s->contacts);
  free(s->contact_out);
  ts__xpbd_guard_free(s);
  free(s);
}

int ts_xpbd_build(const ts_tissue *t, const ts_xpbd_def *def, ts_xpbd **out) {
  if (!out) return TS_EINVAL;
  *out = NULL;
  if (!t || !def || t->n_nodes == 0 || !t->x || !t->v || !t->inv_mass || !t->rest)
    return TS_EINVAL;
  if (t->n_springs > 0 && !t->springs) return TS_EINVAL;
  if (!def_ok(def)) return TS_EINVAL;
  if (t->n_nodes > UINT32_MAX / 2) return TS_ETOOBIG;

  ts_xpbd *s = calloc(1, sizeof *s);
  if (!s) return TS_ENOMEM;
  s->def = *def;
  s->def.compliance = NULL;
  s->n_nodes = t->n_nodes;
  s->n_springs = t->n_springs;
  size_t ns = t->n_springs ? t->n_springs : 1, nn = t->n_nodes;
  s->cap_contacts = 2 * t->n_nodes;
  if (s->cap_contacts < 16) s->cap_contacts = 16;
  s->dist = malloc(sizeof *s->dist * ns);
  s->spring_of = malloc(sizeof *s->spring_of * ns);
  s->lam_d = calloc(ns, sizeof *s->lam_d);
  s->sum_d = calloc(ns, sizeof *s->sum_d);
  s->inv_den = calloc(ns, sizeof *s->inv_den);
  s->at = calloc(ns, sizeof *s->at);
  s->rest_now = calloc(ns, sizeof *s->rest_now);
  s->gamma = calloc(ns, sizeof *s->gamma);
  s->compliance = calloc(ns, sizeof *s->compliance);
  s->tension = calloc(ns, sizeof *s->tension);
  s->x_prev = calloc(nn, sizeof *s->x_prev);
  s->contacts = malloc(sizeof *s->contacts * s->cap_contacts);
  s->contact_out = malloc(sizeof *s->contact_out * s->cap_contacts);
  int rc = 0;
  ts__sheets sh;
  memset(&sh, 0, sizeof sh);
  if (!s->dist || !s->spring_of || !s->lam_d || !s->sum_d || !s->inv_den || !s->at || !s->rest_now || !s->gamma || !s->compliance || !s->tension || !s->x_prev ||
      !s->contacts || !s->contact_out) {
    rc = TS_ENOMEM;
    goto fail;
  }

  int need_sheets = def->bending || def->volume;
  if (need_sheets) {
    rc = ts__xpbd_sheets_build(t, &sh);
    if (rc) goto fail;
  }

  /* the distance constraints, in tissue order (reordered below) */
  for (uint32_t i = 0; i < t->n_springs; i++) {
    const ts_spring *sp = &t->springs[i];
    ts__dist *d = &s->dist[i];
    rc = ts__xpbd_make_distance(sp, t->n_nodes, def, def->compliance ? def->compliance[i] : 0.0, d);
    if (rc) goto fail;
    s->compliance[i] = d->alpha0;
  }
  rc = ts__xpbd_reorder_distance(s);
  if (rc) goto fail;
  double osum = 0;
  uint32_t on = 0;
  for (uint32_t j = 0; j < s->n_springs; j++) {
    const ts__dist *d = &s->dist[j];
    double w = t->inv_mass[d->a] + t->inv_mass[d->b];
    if (!(d->alpha0 > 0) || !(w > 0) || !isfinite(w)) continue;
    osum += sqrt(w / d->alpha0);
    on++;
  }
  s->omega = on ? osum / on : 0.0;

  if (def->bending) {
    rc = ts__xpbd_add_bending(s, t, &sh);
    if (!rc) rc = ts__xpbd_reorder(s->bend, s->n_bend, sizeof *s->bend, 4, t->n_nodes);
    if (rc) goto fail;
    s->lam_b = calloc(s->n_bend ? s->n_bend : 1, sizeof *s->lam_b);
    s->sum_b = calloc(s->n_bend ? s->n_bend : 1, sizeof *s->sum_b);
    if (!s->lam_b || !s->sum_b) {
      rc = TS_ENOMEM;
      goto fail;
    }
  }
  if (def->volume) {
    rc = ts__xpbd_add_volume(s, t, &sh);
    if (!rc) rc = ts__xpbd_reorder(s->vol, s->n_vol, sizeof *s->vol, 6, t->n_nodes);
    if (rc) goto fail;
    s->lam_v = calloc(s->n_vol ? s->n_vol : 1, sizeof *s->lam_v);
    s->sum_v = calloc(s->n_vol ? s->n_vol : 1, sizeof *s->sum_v);
    if (!s->lam_v || !s->sum_v) {
      rc = TS_ENOMEM;
      goto fail;
    }
  }
  if (def->fold_guard) {
    rc = ts__xpbd_guard_make(s, t);
    if (rc) goto fail;
  }
  ts__xpbd_sheets_free(&sh);
  *out = s;
  return 0;

fail:
  ts__xpbd_sheets_free(&sh);
  ts_xpbd_destroy(s);
  return rc;
}

ts_xpbd *ts_xpbd_create(const ts_tissue *t, const ts_xpbd_def *def) {
  ts_xpbd_def d = def ? *def : ts_xpbd_default_def();
  ts_xpbd *s = NULL;
  return ts_xpbd_build(t, &d, &s) ? NULL : s;
}

/* ---- queries ---- */

void ts_xpbd_counts(const ts_xpbd *s, uint32_t *distance, uint32_t *bending, uint32_t *volume) {
  if (distance) *distance = s ? s->n_springs : 0;
  if (bending) *bending = s ? s->n_bend : 0;
  if (volume) *volume = s ? s->n_vol : 0;
}

const double *ts_xpbd_compliance(const ts_xpbd *s) { return s ? s->compliance : NULL; }

const double *ts_xpbd_tensions(const ts_xpbd *s) { return s ? s->tension : NULL; }

const ts_xpbd_contact *ts_xpbd_contacts(const ts_xpbd *s, uint32_t *n) {
  if (n) *n = s ? s->n_contact_out : 0;
  return s ? s->contact_out : NULL;
}

int ts_xpbd_set_self_contact(ts_xpbd *s, ts_self_contact *sc, ts_aabb_tree *tree) {
  if (!s || (sc && !tree)) return TS_EINVAL;
  s->self = sc;
  s->self_tree = sc ? tree : NULL;
  return 0;
}
