/*
 * ts_learn_internal.h: what ts_learn_apply.c (the learner's intervals) calls
 * in ts_learn_refined.c (the spread2r features on the refined copy). Not
 * part of the core's interface.
 */
#ifndef TS_LEARN_INTERNAL_H
#define TS_LEARN_INTERNAL_H

#include <stdint.h>

#include "ts_learn.h"

/* spread2r's increments u2r of the nf free tissue nodes fr (l->feat[k]) from
 * sweeps on l->rq's copy, which ts_qsrefine_build has just built for this
 * interval (ts_learn.h). Returns 0, TS_EINVAL (no copy) or TS_ENOMEM. */
int ts__learn_spread2r_features(ts_learner *l, uint32_t nf, const uint32_t *fr);

#endif
