/*
 * bench_mechanics.c: the mechanics benchmark of issue 3 ("Benchmark"):
 * steps per second and spring evaluations per second per core of the full
 * tissue model (ts_massspring_step with the standard tool path), single
 * thread, on the standard scenarios, beside two references measured in the
 * same run on the same nodes and springs:
 *   - "bullet": Bullet's btSoftBody at comparable settings (bench_bullet.h);
 *   - "linear-loop": a plain linear spring loop (bench_linear.h);
 * and, for patch-S, the fraction of one core that running it at 1 kHz takes
 * (CPU seconds per simulated second at the session dt of 1 ms): the whole
 * step, the tool's contact (with the daemon's default Coulomb friction of
 * a steel instrument on wet tissue, ts_tool.h, as sessions run it) and the
 * mechanics.
 *
 *   bench_mechanics [--quick | --full] [SCENARIO ...]   (default: all)
 *
 * Prints one JSON line per figure (bench_report.h) on stdout, progress on
 * stderr. Exit status 0, 1 when a scenario failed (its model diverged, a
 * mesh did not load, ...), 2 for bad arguments.
 *
 * Method. Spring evaluations are n_springs x spring passes, the passes of a
 * step being ts_step_stats.substeps; a btSoftBody link evaluation is one
 * link in one position-solver iteration. Times are the thread's CPU time
 * (so "per core" holds, and other processes on the machine disturb less).
 * The engines run interleaved in rounds (the model a chunk of steps, then
 * Bullet, then the linear loop), each chunk about the same CPU time, so that
 * drifts of the machine hit a figure and its reference alike; each figure
 * is an engine's total work over its total CPU time.
 *   - default: the tissue first settles under gravity for 0.25 s without
 *     the tool, and the path is placed on its settled surface
 *     (ts_bench_scenario_settle); then a warm-up replays the path from 0 to
 *     4 s at 8 times its speed (0.5 s of simulated time; the tool then
 *     moves at up to 50 mm/s); neither is timed. The model is then measured
 *     along the path from 4 s on, in the drag with the tool pressed 8 mm
 *     in: the phase with the most contact and strain;
 *   - --quick: a smoke test that finishes within a minute: no settling, no
 *     warm-up, a few short chunks from the start of the path (the approach:
 *     the tissue sagging under gravity, no contact yet), so its figures are
 *     those of an unloaded tissue;
 *   - --full: settling as above, then the whole 10 s path, every step timed
 *     (slow on the large scenarios).
 * Haptic rate (issue 3's 1 kHz on patch-S): the same scenario again with
 * the substeps capped (t->max_substeps, inertia scaling, ts_ms_bounds.c)
 * at 1, 2 and 4 substeps per step (--quick: 1 only), from the same start (settled with physical masses, then the warm-up with
 * the cap), over the same timed window of steps as the physical run: its
 * steps per second and core fraction at 1 kHz beside the physical run's,
 * its mean and largest inertia scale, and the tool force of each step
 * against the physical run's at the same path time: the RMS and the
 * largest difference (vector norm, N) beside the physical force's RMS and
 * largest value, so that each line's ratio is the relative difference (how
 * faithful the haptic force stays; in --quick the window has no contact
 * and these are null).
 * The references need no warm-up (no tool acts on them); they start from
 * rest and run under gravity, their substep h being 1 ms over the model's
 * mean passes per step before them (its warm-up or first chunk). Bullet's
 * steps per second are counted at the model's mean passes per step over
 * the measured chunks, so that a step is the same work for both.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_bullet.h"
#include "bench_linear.h"
#include "bench_path.h"
#include "bench_report.h"
#include "bench_scenario.h"
#include "ts_error.h"
#include "ts_massspring.h"

#define TS__MAX_ROUNDS 16

/* Targets from issue 3, reported beside the figures (never asserted). */
#define TS__TARGET_EVALS_PATCH_L 150e6 /* spring evaluations/s/core on patch-L */
#define TS__TARGET_CORE_FRACTION 0.40  /* of one core for patch-S at 1 kHz */
#define TS__TARGET_BULLET_RATIO 5.0    /* throughput per step over btSoftBody */


typedef struct bench_plan {
  const char *name;  /* "quick", "default", "full" */
  double settle_s;   /* simulated seconds settling under gravity, no tool */
  double warmup_s;   /* simulated seconds replaying [0, path_from) */
  double path_from;  /* path time the timed window starts at, s */
  int rounds;
  double chunk_cpu;  /* target CPU seconds per chunk */
  uint32_t chunk_steps; /* > 0: the model's chunks are this many steps instead */
} bench_plan;

static bench_plan plan_for(ts_bench_mode m) {
  bench_plan p;
  memset(&p, 0, sizeof p);
  switch (m) {
  case TS_BENCH_QUICK:
    p = (bench_plan){"quick", 0.0, 0.0, 0.0, 3, 0.25, 0};
    break;
  case TS_BENCH_DEFAULT:
    p = (bench_plan){"default", 0.25, 0.5, 4.0, 5, 1.5, 0};
    break;
  case TS_BENCH_FULL:
    p = (bench_plan){"full", 0.25, 0.0, 0.0, 10, 1.5, 1000};
    break;
  }
  return p;
}

/* One engine's chunks. */
typedef struct series {
  int n;
  double cpu[TS__MAX_ROUNDS];    /* s */
  double steps[TS__MAX_ROUNDS];  /* 1 ms steps */
  double evals[TS__MAX_ROUNDS];  /* spring or link evaluations */
} series;

/* total num over total CPU time */
static double total_rate(const series *s, const double *num) {
  double n = 0, cpu = 0;
  for (int i = 0; i < s->n; i++) {
    n += num[i];
    cpu += s->cpu[i];
  }
  return cpu > 0 ? n / cpu : NAN;
}

static uint32_t steps_for(double target_cpu, double cpu_per_step) {
  if (!(cpu_per_step > 0)) return 1;
  double n = ceil(target_cpu / cpu_per_step);
  return n < 1 ? 1 : n > 1e6 ? 1000000u : (uint32_t)n;
}

/* The model side of a scenario. */
typedef struct model_run {
  ts_bench_scenario *sc;
  ts_tool tool;
  double path_t;        /* path time of the next step, s */
  uint64_t steps, passes;
  uint32_t max_contacts;
  double max_force;     /* N */
  int rc;               /* first error */
  double (*fh)[3];      /* recording (NULL: none): the tool force of each step, N */
  uint32_t fh_n, fh_cap;
  double scale_sum, scale_max; /* inertia scale over the steps */
} model_run;

/* Advances the model `n` steps with the tool at path times path_t,
 * path_t + dt_path, ...; returns 0 or the step's error. */
static int model_steps(model_run *m, uint32_t n, double dt_path) {
  ts_bench_scenario *sc = m->sc;
  for (uint32_t i = 0; i < n; i++) {
    ts_bench_path_sphere(&sc->path, m->path_t, TS_BENCH_SPHERE_RADIUS, &m->tool);
    m->tool.mu_static = TS_TOOL_MU_STATIC_DEFAULT; /* as the daemon's sessions */
    m->tool.mu_kinetic = TS_TOOL_MU_KINETIC_DEFAULT;
    ts_step_stats st;
    int rc = ts_massspring_step(sc->tissue, sc->dt, &m->tool, 1, &st);
    if (rc) {
      m->rc = rc;
      return rc;
    }
    m->path_t += dt_path;
    m->steps++;
    m->passes += st.substeps;
    m->scale_sum += st.inertia_scale;
    if (st.inertia_scale > m->scale_max) m->scale_max = st.inertia_scale;
    if (m->fh && m->fh_n < m->fh_cap) memcpy(m->fh[m->fh_n++], m->tool.force, sizeof m->tool.force);
    if (m->tool.contacts > m->max_contacts) m->max_contacts = m->tool.contacts;
    double f = sqrt(m->tool.force[0] * m->tool.force[0] + m->tool.force[1] * m->tool.force[1] +
                    m->tool.force[2] * m->tool.force[2]);
    if (f > m->max_force) m->max_force = f;
  }
  return 0;
}

/* The references, built once the model's passes per step are known. */
typedef struct refs {
  uint32_t passes;  /* per 1 ms step */
  double h;         /* s */
  double h_linear;  /* s: h, or the linear loop's own stable step if smaller */
  ts_bench_bullet *bullet;
  ts_bench_linear *linear;
  double bullet_step_cpu, linear_step_cpu; /* calibration */
} refs;

static int refs_create(refs *r, const ts_tissue *t, double dt, double mean_passes, char *err,
                       size_t cap) {
  memset(r, 0, sizeof *r);
  r->passes = mean_passes < 1 ? 1u : (uint32_t)lround(mean_passes);
  r->h = dt / r->passes;
  uint32_t ns = t->n_springs;
  uint32_t *a = malloc(sizeof *a * (ns ? ns : 1)), *b = malloc(sizeof *b * (ns ? ns : 1));
  double *klst = malloc(sizeof *klst * (ns ? ns : 1));
  int rc = -1;
  if (!a || !b || !klst) {
    snprintf(err, cap, "out of memory");
    goto out;
  }
  for (uint32_t i = 0; i < ns; i++) {
    const ts_spring *s = &t->springs[i];
    a[i] = s->a;
    b[i] = s->b;
    double w = t->inv_mass[s->a] + t->inv_mass[s->b];
    double k = s->k * w * r->h * r->h;
    klst[i] = k > 1 ? 1.0 : k > 1e-9 ? k : 1e-9; /* w == 0: both anchored, never solved */
  }
  double kdp = t->drag * r->h;
  ts_bench_bullet_def d = {
      .n_nodes = t->n_nodes,
      .x = (const double (*)[3])t->rest,
      .inv_mass = t->inv_mass,
      .n_links = ns,
      .a = a,
      .b = b,
      .klst = klst,
      .gravity = {t->gravity[0], t->gravity[1], t->gravity[2]},
      .kdp = kdp < 0.99 ? kdp : 0.99,
  };
  r->bullet = ts_bench_bullet_create(&d, err, cap);
  if (!r->bullet) goto out;
  r->linear = ts_bench_linear_create(t);
  double hl = r->linear ? 0.9 * ts_bench_linear_stable_h(r->linear) : 0;
  if (!r->linear || !(hl > 0)) {
    snprintf(err, cap, "linear loop: out of memory");
    goto out;
  }
  r->h_linear = hl < r->h ? hl : r->h;
  /* one untimed-for-rates step each: first touch of the memory, and the
   * cost per step to size the chunks */
  double c0 = ts_bench_cpu_s();
  ts_bench_bullet_run(r->bullet, r->h, r->passes);
  double c1 = ts_bench_cpu_s();
  ts_bench_linear_run(r->linear, r->h_linear, r->passes);
  double c2 = ts_bench_cpu_s();
  r->bullet_step_cpu = c1 - c0;
  r->linear_step_cpu = c2 - c1;
  rc = 0;
out:
  free(a);
  free(b);
  free(klst);
  return rc;
}

static void refs_destroy(refs *r) {
  ts_bench_bullet_destroy(r->bullet);
  ts_bench_linear_destroy(r->linear);
  memset(r, 0, sizeof *r);
}

static void emit_common(cJSON *o, const bench_plan *p) { ts_bench_line_str(o, "mode", p->name); }

/* The haptic caps measured (--quick: the first only): the cost against
 * the force's fidelity. */
static const uint32_t haptic_caps[] = {1, 2, 4};
#define TS__FORCE_STEPS_MAX 200000u /* recorded tool forces per run */

/* The same scenario with inertia scaling (t->max_substeps = cap), from the
 * same start as the physical run `phys` (settled with physical masses,
 * then warmed up along the path with the cap, as a capped session would
 * be), over the same window of steps as phys recorded (path_from on), each
 * step's tool force compared with the physical run's, then on along the
 * path until the timing has plan->rounds chunks' CPU time. Emits the
 * lines; returns 0 or -1 (the capped run diverged, or another failure). */
static int run_capped(const char *name, const bench_plan *plan, uint32_t cap,
                      const model_run *phys, double phys_steps_per_s, double path_from) {
  char err[1024] = "";
  ts_bench_scenario sc;
  if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
    fprintf(stderr, "mechanics: %s: %s\n", name, err);
    return -1;
  }
  model_run m;
  memset(&m, 0, sizeof m);
  m.sc = &sc;
  int status = 0;
  double (*fh)[3] = malloc(sizeof *fh * (phys->fh_n ? phys->fh_n : 1));
  if (!fh) {
    status = -1;
    goto done;
  }
  if (plan->settle_s > 0 && (m.rc = ts_bench_scenario_settle(&sc, plan->settle_s)) != 0)
    goto failed;
  sc.tissue->max_substeps = cap;
  uint32_t warm = (uint32_t)lround(plan->warmup_s / sc.dt);
  if (warm > 0 && model_steps(&m, warm, plan->path_from / warm)) goto failed;
  /* without a warm-up, the physical run's untimed first step, at path time 0 */
  if (!warm && !plan->chunk_steps && model_steps(&m, 1, sc.dt)) goto failed;
  m.path_t = path_from;
  m.fh = fh;
  m.fh_cap = phys->fh_n;
  m.steps = m.passes = 0;
  m.scale_sum = m.scale_max = 0;
  double cpu = 0, target = plan->rounds * plan->chunk_cpu;
  double t0 = ts_bench_cpu_s();
  if (phys->fh_n && model_steps(&m, phys->fh_n, sc.dt)) goto failed;
  cpu = ts_bench_cpu_s() - t0;
  while (cpu < target && m.steps < 1000000) { /* more steps for the timing alone */
    uint32_t n = steps_for(target - cpu, m.steps ? cpu / m.steps : 1e-3);
    t0 = ts_bench_cpu_s();
    if (model_steps(&m, n, sc.dt)) goto failed;
    cpu += ts_bench_cpu_s() - t0;
  }
  /* the tool force against the physical run's, step by step */
  double d2 = 0, dmax = 0, p2 = 0, pmax = 0;
  for (uint32_t k = 0; k < phys->fh_n; k++) {
    double dd = 0, pp = 0;
    for (int c = 0; c < 3; c++) {
      double e = fh[k][c] - phys->fh[k][c];
      dd += e * e;
      pp += phys->fh[k][c] * phys->fh[k][c];
    }
    d2 += dd;
    p2 += pp;
    dmax = fmax(dmax, sqrt(dd));
    pmax = fmax(pmax, sqrt(pp));
  }
  const uint32_t nw = phys->fh_n;
  const double rms_d = nw ? sqrt(d2 / nw) : 0, rms_p = nw ? sqrt(p2 / nw) : 0;
  const double steps_per_s = m.steps / cpu;
  fprintf(stderr,
          "mechanics: %s: capped at %u substep(s): %.4g steps/s (physical %.4g), inertia scale "
          "%.4g (up to %.4g); tool force over %u steps: RMS %.3g N, difference RMS %.3g N, max "
          "%.3g N against %.3g N\n",
          name, cap, steps_per_s, phys_steps_per_s, m.scale_sum / m.steps, m.scale_max, nw,
          rms_p, rms_d, dmax, pmax);

  cJSON *o = ts_bench_line("mechanics", name, "capped_steps_per_s", steps_per_s, "1/s");
  ts_bench_line_ref(o, "physical", phys_steps_per_s);
  ts_bench_line_num(o, "max_substeps", cap);
  ts_bench_line_num(o, "passes_per_step", (double)m.passes / m.steps);
  ts_bench_line_num(o, "inertia_scale", m.scale_sum / m.steps);
  ts_bench_line_num(o, "inertia_scale_max", m.scale_max);
  ts_bench_line_num(o, "steps", (double)m.steps);
  emit_common(o, plan);
  ts_bench_line_emit(o);

  o = ts_bench_line("mechanics", name, "capped_core_fraction_at_1khz", 1.0 / (steps_per_s * sc.dt),
                    "1");
  ts_bench_line_ref(o, "physical", 1.0 / (phys_steps_per_s * sc.dt));
  ts_bench_line_num(o, "target", TS__TARGET_CORE_FRACTION);
  ts_bench_line_num(o, "max_substeps", cap);
  emit_common(o, plan);
  ts_bench_line_emit(o);

  /* the force fidelity: the difference from the physical run's force (N),
   * beside that force, so that the ratio is the relative difference (null
   * when the window has no contact, as in --quick) */
  o = ts_bench_line("mechanics", name, "capped_tool_force_rms_difference", rms_d, "N");
  ts_bench_line_ref(o, "physical_rms", rms_p);
  ts_bench_line_num(o, "max_substeps", cap);
  ts_bench_line_num(o, "window_steps", nw);
  ts_bench_line_num(o, "path_from_s", path_from);
  ts_bench_line_str(o, "path_phase", ts_bench_path_phase(path_from));
  emit_common(o, plan);
  ts_bench_line_emit(o);

  o = ts_bench_line("mechanics", name, "capped_tool_force_max_difference", dmax, "N");
  ts_bench_line_ref(o, "physical_max", pmax);
  ts_bench_line_num(o, "max_substeps", cap);
  ts_bench_line_num(o, "window_steps", nw);
  emit_common(o, plan);
  ts_bench_line_emit(o);
  goto done;

failed:
  fprintf(stderr, "mechanics: %s: capped at %u: ts_massspring_step failed at path time %.4f s: "
          "%s (%s)\n", name, cap, m.path_t, ts_err_name(m.rc), ts_strerror(m.rc));
  status = -1;
done:
  free(fh);
  ts_bench_scenario_destroy(&sc);
  return status;
}

static int run_scenario(const char *name, const bench_plan *plan) {
  char err[1024] = "";
  ts_bench_scenario sc;
  if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
    fprintf(stderr, "mechanics: %s: %s\n", name, err);
    return -1;
  }
  const ts_tissue *t = sc.tissue;
  fprintf(stderr, "mechanics: %s: %u nodes, %u springs, built in %.2f s\n", name, t->n_nodes,
          t->n_springs, sc.build_s);

  model_run m;
  memset(&m, 0, sizeof m);
  m.sc = &sc;
  int status = 0;
  double phys_steps_per_s = NAN;
  refs r;
  memset(&r, 0, sizeof r);
  series sm = {0}, sb = {0}, sl = {0};

  if (plan->settle_s > 0) {
    int rc = ts_bench_scenario_settle(&sc, plan->settle_s);
    if (rc) {
      m.rc = rc;
      goto model_failed;
    }
    fprintf(stderr, "mechanics: %s: settled for %.2f s: the path's centre sank %.2f mm\n", name,
            plan->settle_s, 1e3 * sc.sag);
  }

  /* warm-up: the path from 0 to plan->path_from replayed in warmup_s */
  uint32_t warm = (uint32_t)lround(plan->warmup_s / sc.dt);
  double c0 = ts_bench_cpu_s();
  if (warm > 0 && model_steps(&m, warm, plan->path_from / warm)) goto model_failed;
  double model_step_cpu = warm ? (ts_bench_cpu_s() - c0) / warm : 0;
  m.path_t = plan->path_from;
  if (warm)
    fprintf(stderr, "mechanics: %s: warm-up %u steps, %.1f passes/step, %u contacts\n", name,
            warm, (double)m.passes / (double)m.steps, m.tool.contacts);

  if (!warm && !plan->chunk_steps) {
    /* one untimed step to size the chunks (and take the model's first-step
     * costs out of the figures) */
    c0 = ts_bench_cpu_s();
    if (model_steps(&m, 1, sc.dt)) goto model_failed;
    model_step_cpu = ts_bench_cpu_s() - c0;
  }
  const double path_from = m.path_t;
  /* the tool force of the timed steps, for the capped run's comparison */
  m.fh = malloc(sizeof *m.fh * TS__FORCE_STEPS_MAX);
  m.fh_cap = m.fh ? TS__FORCE_STEPS_MAX : 0;
  for (int round = 0; round < plan->rounds; round++) {
    /* the model */
    uint32_t n = plan->chunk_steps ? plan->chunk_steps : steps_for(plan->chunk_cpu, model_step_cpu);
    uint64_t p0 = m.passes;
    double t0 = ts_bench_cpu_s();
    if (model_steps(&m, n, sc.dt)) goto model_failed;
    double cpu = ts_bench_cpu_s() - t0;
    sm.cpu[sm.n] = cpu;
    sm.steps[sm.n] = n;
    sm.evals[sm.n] = (double)(m.passes - p0) * t->n_springs;
    sm.n++;
    model_step_cpu = cpu / n;

    /* the references */
    if (!r.bullet) {
      double t1 = ts_bench_wall_s();
      if (refs_create(&r, t, sc.dt, (double)m.passes / (double)m.steps, err, sizeof err)) {
        fprintf(stderr, "mechanics: %s: references: %s\n", name, err);
        status = -1;
        goto done;
      }
      fprintf(stderr,
              "mechanics: %s: references built in %.2f s (%u passes of %.3g s per step, Bullet "
              "%s; linear loop at %.3g s)\n",
              name, ts_bench_wall_s() - t1, r.passes, r.h, ts_bench_bullet_precision(),
              r.h_linear);
    }
    double target = plan->chunk_cpu;
    uint32_t nb = steps_for(target, r.bullet_step_cpu);
    t0 = ts_bench_cpu_s();
    ts_bench_bullet_run(r.bullet, r.h, nb * r.passes);
    cpu = ts_bench_cpu_s() - t0;
    sb.cpu[sb.n] = cpu;
    sb.steps[sb.n] = nb;
    sb.evals[sb.n] = (double)nb * r.passes * t->n_springs;
    sb.n++;
    r.bullet_step_cpu = cpu / nb;

    uint32_t nl = steps_for(target, r.linear_step_cpu);
    t0 = ts_bench_cpu_s();
    ts_bench_linear_run(r.linear, r.h_linear, nl * r.passes);
    cpu = ts_bench_cpu_s() - t0;
    sl.cpu[sl.n] = cpu;
    sl.steps[sl.n] = nl;
    sl.evals[sl.n] = (double)nl * r.passes * t->n_springs;
    sl.n++;
    r.linear_step_cpu = cpu / nl;
  }

  fprintf(stderr,
          "mechanics: %s: path %.3f-%.3f s (%s), %.1f passes/step, up to %u contacts, tool force "
          "up to %.3g N; Bullet moved up to %.3g mm%s; linear loop %s\n",
          name, path_from, m.path_t, ts_bench_path_phase(path_from),
          (double)m.passes / (double)m.steps, m.max_contacts, m.max_force,
          1e3 * ts_bench_bullet_max_displacement(r.bullet),
          ts_bench_bullet_finite(r.bullet) ? "" : " (NOT FINITE)",
          ts_bench_linear_finite(r.linear) ? "finite" : "NOT FINITE");

  {
    const char *prec = ts_bench_bullet_precision();
    double m_steps = total_rate(&sm, sm.steps), m_evals = total_rate(&sm, sm.evals);
    double b_evals = total_rate(&sb, sb.evals), l_evals = total_rate(&sl, sl.evals);
    double measured_steps = 0, measured_evals = 0;
    for (int i = 0; i < sm.n; i++) {
      measured_steps += sm.steps[i];
      measured_evals += sm.evals[i];
    }
    double passes = measured_evals / t->n_springs / measured_steps;
    /* Bullet's steps at the model's mean passes per step (its cost is linear
     * in the passes; the model's count varies with the strains), so that
     * the two steps_per_s compare the same work per step */
    double b_steps = b_evals / ((double)t->n_springs * passes);
    phys_steps_per_s = m_steps;

    cJSON *o = ts_bench_line("mechanics", name, "steps_per_s", m_steps, "1/s");
    ts_bench_line_ref(o, "bullet", b_steps);
    ts_bench_line_num(o, "target_ratio", TS__TARGET_BULLET_RATIO);
    ts_bench_line_num(o, "dt", sc.dt);
    ts_bench_line_num(o, "passes_per_step", passes);
    ts_bench_line_num(o, "nodes", t->n_nodes);
    ts_bench_line_num(o, "springs", t->n_springs);
    ts_bench_line_num(o, "steps", measured_steps);
    ts_bench_line_num(o, "path_from_s", path_from);
    ts_bench_line_num(o, "path_to_s", m.path_t);
    ts_bench_line_str(o, "ref_precision", prec);
    emit_common(o, plan);
    ts_bench_line_emit(o);

    o = ts_bench_line("mechanics", name, "spring_evals_per_s", m_evals, "1/s");
    ts_bench_line_ref(o, "bullet", b_evals);
    if (strcmp(name, "patch-L") == 0) ts_bench_line_num(o, "target", TS__TARGET_EVALS_PATCH_L);
    ts_bench_line_str(o, "ref_precision", prec);
    emit_common(o, plan);
    ts_bench_line_emit(o);

    o = ts_bench_line("mechanics", name, "spring_evals_per_s", m_evals, "1/s");
    ts_bench_line_ref(o, "linear-loop", l_evals);
    emit_common(o, plan);
    ts_bench_line_emit(o);

    if (strcmp(name, "patch-S") == 0) {
      /* CPU seconds per simulated second when stepped at dt = 1 ms */
      o = ts_bench_line("mechanics", name, "core_fraction_at_1khz", 1.0 / (m_steps * sc.dt), "1");
      ts_bench_line_ref(o, "bullet", 1.0 / (b_steps * sc.dt));
      ts_bench_line_num(o, "target", TS__TARGET_CORE_FRACTION);
      ts_bench_line_num(o, "tool_mu_static", TS_TOOL_MU_STATIC_DEFAULT);
      ts_bench_line_num(o, "tool_mu_kinetic", TS_TOOL_MU_KINETIC_DEFAULT);
      ts_bench_line_str(o, "ref_precision", prec);
      emit_common(o, plan);
      ts_bench_line_emit(o);
    }
  }
  /* haptic rate: the same with the substeps capped (inertia scaling); a
   * capped run that diverges is reported on stderr and fails the scenario */
  for (size_t k = 0; k < sizeof haptic_caps / sizeof haptic_caps[0]; k++) {
    if (run_capped(name, plan, haptic_caps[k], &m, phys_steps_per_s, path_from)) status = -1;
    if (strcmp(plan->name, "quick") == 0) break;
  }
  goto done;

model_failed:
  fprintf(stderr, "mechanics: %s: ts_massspring_step failed at path time %.4f s: %s (%s)\n", name,
          m.path_t, ts_err_name(m.rc), ts_strerror(m.rc));
  status = -1;
done:
  free(m.fh);
  refs_destroy(&r);
  ts_bench_scenario_destroy(&sc);
  return status;
}

static const char usage[] =
    "usage: bench_mechanics [--quick | --full] [SCENARIO ...]\n"
    "scenarios: patch-S patch-L liver (default: all)\n";

int main(int argc, char **argv) {
  ts_bench_mode mode;
  const char *names[16];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 16, &n_names);
  if (a) return a == 1 ? 0 : 2;
  if (n_names == 0)
    for (int i = 0; ts_bench_scenario_names[i]; i++) names[n_names++] = ts_bench_scenario_names[i];

  bench_plan plan = plan_for(mode);
  int failed = 0;
  for (int i = 0; i < n_names; i++)
    if (run_scenario(names[i], &plan)) failed++;
  return failed ? 1 : 0;
}
