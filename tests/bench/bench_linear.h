/*
 * bench_linear.h: the plainest possible mass-spring step, as a reference
 * for the mechanics benchmark ("ref":"linear-loop"): the same nodes and
 * springs as a tissue, linear springs f = k (|d| - L0) along d with the
 * tissue's small-strain constants, no dampers, no nonlinearity, no
 * anisotropy, no contacts, no checks, then symplectic Euler with gravity.
 * It shows what the memory traffic and arithmetic of one spring pass cost
 * on this machine, so that the full model's overhead above it can be read
 * off. It runs on its own copy of the tissue's arrays (compact: indices,
 * rest length and constant per spring), so that it does not disturb the
 * tissue the real model steps.
 */
#ifndef TS_BENCH_LINEAR_H
#define TS_BENCH_LINEAR_H

#include <stdint.h>

#include "ts_tissue.h"

typedef struct ts_bench_linear ts_bench_linear;

/* Copies the tissue's nodes (rest positions, inverse masses), springs and
 * gravity. NULL when out of memory. */
ts_bench_linear *ts_bench_linear_create(const ts_tissue *t);

/* Largest step (s) at which this loop is surely stable: 2 / w_max with w_max^2
 * bounded by Gershgorin's row sums of M^-1/2 K M^-1/2 (K the springs'
 * constants, M the diagonal node masses). The model's own substep can be
 * larger (its selective mass scaling slows the through-thickness modes
 * that bound this loop), so the benchmark runs the loop at the smaller of
 * the two: the cost of a pass does not depend on h, and the numbers stay
 * finite. */
double ts_bench_linear_stable_h(const ts_bench_linear *l);

/* `passes` spring passes, each followed by an integration of h seconds. */
void ts_bench_linear_run(ts_bench_linear *l, double h, uint32_t passes);

/* 1 when every position is finite. */
int ts_bench_linear_finite(const ts_bench_linear *l);

uint32_t ts_bench_linear_springs(const ts_bench_linear *l);

void ts_bench_linear_destroy(ts_bench_linear *l);

#endif
