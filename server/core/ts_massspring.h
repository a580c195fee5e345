/*
 * ts_massspring.h: the skeleton's explicit mass-spring step.
 *
 * Forces: linear springs (k = E*A/L) with a Kelvin damper in parallel, gravity,
 * a mass-proportional drag (ts_tissue.drag).
 * Integration: symplectic Euler in substeps small enough for stability (the
 * substep count comes from a Gershgorin bound on the largest eigenfrequency).
 * Tools: nodes that end a substep inside a tool are projected to its surface
 * and take no velocity into it; the reaction force on the tool is the sum of
 * the non-contact forces on those nodes. Issue 3 replaces this with the
 * Verlet/Beeman integrator and the nonlinear anisotropic law.
 */
#ifndef TS_MASSSPRING_H
#define TS_MASSSPRING_H

#include "ts_tissue.h"
#include "ts_tool.h"

typedef struct ts_step_stats {
  uint32_t substeps;       /* substeps taken this step */
  uint32_t contacts;       /* nodes in contact with any tool */
  double max_speed;        /* m/s */
  double kinetic_energy;   /* J */
  int diverged;            /* NaN/Inf or runaway speed seen: state reset needed */
} ts_step_stats;

/* Largest stable substep for the tissue (s): t->stable_dt when set, else a
 * sharpened Gershgorin bound computed now (allocates scratch; the builders
 * store it in t->stable_dt). Returns 0 for a malformed tissue or when out of
 * memory. */
double ts_massspring_stable_dt(const ts_tissue *t);

/* Advances the tissue by dt seconds with the given tools. Returns 0, or
 * TS_EDIVERGED when the state became non-finite or a node ran away (faster
 * than 100 m/s; the state is then reset to rest so that no NaN ever leaves
 * the core). Bad arguments change nothing and give TS_EINVAL (dt <= 0 or
 * over 1 s, tool radius <= 0, malformed springs, ...), TS_ENAN (a NaN or
 * infinite dt or tool coordinate) or TS_ERANGE (dt needing over a million
 * substeps). Tools: up to 64; inactive ones are ignored, the force and
 * contacts of every one are overwritten. After the step t->f holds the
 * spring and damper forces of the last substep. No allocation. */
int ts_massspring_step(ts_tissue *t, double dt, ts_tool *tools, int n_tools,
                       ts_step_stats *stats);

#endif
