/*
 * ts_tool_contact.c: tool against tool in a session (see ts_tool_contact.h):
 * each tool's OBB tree built when its shape changes, every pair of active
 * tools tested by ts_collide_tool_tool at the step's poses, and one penalty
 * force per touching pair, summed per tool for the caller to add to the
 * tissue's reaction.
 */
#include "ts_tool_contact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_tool_tree.h"

int ts_tool_contact_stiffness_check(double k) {
  if (k == 0) return 0;
  return k >= TS_TOOL_CONTACT_STIFFNESS_MIN && k <= TS_TOOL_CONTACT_STIFFNESS_MAX ? 0 : TS_ERANGE;
}

int ts_tool_contact_init(ts_tool_contact *tc, uint32_t n_tools, double k) {
  if (!tc) return TS_EINVAL;
  memset(tc, 0, sizeof *tc);
  if (!n_tools || !(k >= 0) || !isfinite(k)) return TS_EINVAL;
  tc->stiffness = k > 0 ? k : TS_TOOL_CONTACT_STIFFNESS_DEFAULT;
  tc->slot = calloc(n_tools, sizeof *tc->slot);
  if (!tc->slot) return TS_ENOMEM;
  tc->n_slots = n_tools;
  tc->parked = calloc((size_t)n_tools * n_tools, 1);
  int rc = tc->parked ? ts_contacts_init(&tc->buf, TS_TOOL_CONTACT_CAP) : TS_ENOMEM;
  if (rc) {
    free(tc->slot);
    free(tc->parked);
    memset(tc, 0, sizeof *tc);
  }
  return rc;
}

static void free_slot(ts_tool_contact_slot *s) {
  if (!s->tree) return;
  ts_posed_tool_free(&s->pt);
  if (s->owns_tree) ts_obb_tree_destroy(s->tree);
  memset(s, 0, sizeof *s);
}

void ts_tool_contact_free(ts_tool_contact *tc) {
  if (!tc) return;
  for (uint32_t i = 0; i < tc->n_slots; i++) free_slot(&tc->slot[i]);
  free(tc->slot);
  free(tc->parked);
  ts_contacts_free(&tc->buf);
  memset(tc, 0, sizeof *tc);
}

void ts_tool_contact_park(ts_tool_contact *tc, uint32_t i) {
  if (!tc || !tc->parked || i >= tc->n_slots) return;
  for (uint32_t j = 0; j < tc->n_slots; j++)
    tc->parked[i * tc->n_slots + j] = tc->parked[j * tc->n_slots + i] = 1;
}

/* The tree of t's shape (ts_tool_tree.h, as the session's tissue contact
 * builds it) and its placed copy. */
static int build_slot(ts_tool_contact_slot *s, const ts_tool *t) {
  free_slot(s);
  int rc = ts_tool_tree_make(t, &s->tree, &s->owns_tree);
  if (rc) return rc;
  rc = ts_posed_tool_init(&s->pt, s->tree);
  if (rc) {
    if (s->owns_tree) ts_obb_tree_destroy(s->tree);
    memset(s, 0, sizeof *s);
    return rc;
  }
  s->kind = t->kind;
  s->radius = t->radius;
  s->length = t->length;
  s->shape = t->shape;
  return 0;
}

static int finite3(const double v[3]) {
  return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]);
}

static void cross(const double a[3], const double b[3], double out[3]) {
  out[0] = a[1] * b[2] - a[2] * b[1];
  out[1] = a[2] * b[0] - a[0] * b[2];
  out[2] = a[0] * b[1] - a[1] * b[0];
}

int ts_tool_contact_penalty(const ts_contact *c, uint32_t n, double k, const double tip_a[3],
                            const double tip_b[3], double f_a[3], double t_a[3], double f_b[3],
                            double t_b[3]) {
  for (int a = 0; a < 3; a++) f_a[a] = t_a[a] = f_b[a] = t_b[a] = 0;
  double dmax = -1, wsum = 0, nw[3] = {0, 0, 0}, pw[3] = {0, 0, 0}, nu[3] = {0, 0, 0},
         pu[3] = {0, 0, 0}, ndeep[3] = {0, 1, 0};
  uint32_t used = 0;
  for (uint32_t i = 0; i < n; i++) {
    const ts_contact *ci = &c[i];
    if (!finite3(ci->point) || !finite3(ci->normal) || !isfinite(ci->depth)) continue;
    double d = ci->depth > 0 ? ci->depth : 0;
    if (d > dmax) dmax = d, memcpy(ndeep, ci->normal, sizeof ndeep);
    wsum += d;
    for (int a = 0; a < 3; a++) {
      nw[a] += d * ci->normal[a];
      pw[a] += d * ci->point[a];
      nu[a] += ci->normal[a];
      pu[a] += ci->point[a];
    }
    used++;
  }
  if (!used) return 0;
  /* weights: the depths; all zero (touching only): equal */
  const double *ns = wsum > 0 ? nw : nu, *ps = wsum > 0 ? pw : pu;
  const double pdiv = wsum > 0 ? wsum : (double)used;
  double nl = sqrt(ns[0] * ns[0] + ns[1] * ns[1] + ns[2] * ns[2]), dir[3], p[3];
  /* normals that cancel (a tool through the middle of a mesh from two
   * sides): the deepest contact's own */
  for (int a = 0; a < 3; a++) dir[a] = nl > 1e-9 * (wsum > 0 ? wsum : used) ? ns[a] / nl : ndeep[a];
  double dl = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
  if (!(dl > 0.5)) dir[0] = 0, dir[1] = 1, dir[2] = 0; /* a zero normal from a degenerate case */
  else
    for (int a = 0; a < 3; a++) dir[a] /= dl;
  for (int a = 0; a < 3; a++) {
    p[a] = ps[a] / pdiv;
    f_b[a] = k * dmax * dir[a];
    f_a[a] = -f_b[a];
  }
  double ra[3], rb[3];
  for (int a = 0; a < 3; a++) ra[a] = p[a] - tip_a[a], rb[a] = p[a] - tip_b[a];
  cross(ra, f_a, t_a);
  cross(rb, f_b, t_b);
  if (!finite3(f_a) || !finite3(t_a) || !finite3(t_b)) {
    for (int a = 0; a < 3; a++) f_a[a] = t_a[a] = f_b[a] = t_b[a] = 0;
    return 0;
  }
  return 1;
}

int ts_tool_contact_step(ts_tool_contact *tc, const ts_tool *tools, uint32_t n) {
  if (!tc || !tools || n > tc->n_slots) return TS_EINVAL;
  tc->pairs = tc->contacts = tc->parked_pairs = 0;
  tc->box_tests = 0;
  /* place every active tool; a bad one is left out */
  int rc = 0;
  for (uint32_t i = 0; i < tc->n_slots; i++) {
    ts_tool_contact_slot *s = &tc->slot[i];
    s->placed = 0;
    s->touching = 0;
    memset(s->force, 0, sizeof s->force);
    memset(s->torque, 0, sizeof s->torque);
  }
  for (uint32_t i = 0; i < n; i++) {
    const ts_tool *t = &tools[i];
    ts_tool_contact_slot *s = &tc->slot[i];
    if (!t->active) continue;
    if (!s->tree || s->kind != t->kind || s->radius != t->radius || s->length != t->length ||
        s->shape != t->shape) {
      int b = build_slot(s, t);
      if (b) {
        if (!rc) rc = b;
        continue;
      }
    }
    ts_pose p = ts_tool_pose(t);
    int e = ts_posed_tool_set_pose(&s->pt, &p);
    if (e) {
      if (!rc) rc = e;
      continue;
    }
    s->placed = 1;
  }
  for (uint32_t u = 0; u < n; u++) {
    if (!tc->slot[u].placed) continue;
    for (uint32_t v = u + 1; v < n; v++) {
      if (!tc->slot[v].placed) continue;
      const ts_tool *A = &tools[u], *B = &tools[v];
      ts_tool_contact_slot *sa = &tc->slot[u], *sb = &tc->slot[v];
      ts_collide_stats st = {0, 0};
      int e = ts_collide_tool_tool(&sa->pt, &sb->pt, &tc->buf, &st);
      tc->box_tests += st.box_tests;
      if (e && e != TS_EFULL) {
        if (!rc) rc = e;
        continue;
      }
      uint8_t *park = &tc->parked[u * tc->n_slots + v];
      if (!tc->buf.total) {
        *park = tc->parked[v * tc->n_slots + u] = 0; /* apart: they meet as any pair now */
        continue;
      }
      if (*park) {
        tc->parked_pairs++;
        continue;
      }
      tc->pairs++;
      tc->contacts += tc->buf.total;
      sa->touching++;
      sb->touching++;
      double fa[3], ta[3], fb[3], tb[3];
      if (!ts_tool_contact_penalty(tc->buf.c, tc->buf.n, tc->stiffness, A->pos, B->pos, fa, ta,
                                   fb, tb))
        continue;
      for (int a = 0; a < 3; a++) {
        sa->force[a] += fa[a];
        sa->torque[a] += ta[a];
        sb->force[a] += fb[a];
        sb->torque[a] += tb[a];
      }
    }
  }
  return rc;
}
