/*
 * bench_bullet.h: the peer reference of the mechanics benchmark: the same
 * nodes and links stepped by Bullet's btSoftBody (Debian's libbullet-dev),
 * behind a C interface so that the benchmark itself stays C.
 *
 * Settings, chosen to match one substep of the tissue's model:
 *   - nodes at the tissue's positions with its masses (anchored nodes get
 *     mass 0, which btSoftBody treats as fixed), one link per spring;
 *   - one position-solver iteration per btSoftBody step (piterations = 1,
 *     no velocity or drift solver), stepped at the model's substep h, so
 *     that a 1 ms step is as many btSoftBody steps as the model makes spring
 *     passes;
 *   - stiffness: btSoftBody's links are position constraints whose material
 *     kLST (0..1] is the fraction of the violation removed per iteration. An
 *     explicit spring of constant k between ends of inverse masses wa, wb
 *     removes k (wa + wb) h^2 of it per step of h, so each link gets its own
 *     material with kLST = min(1, k (wa + wb) h^2): the same stiffness per
 *     step as the spring it stands for;
 *   - gravity as the tissue's, global damping kDP = drag * h (btSoftBody has
 *     no per-link dampers);
 *   - no collision: no world, no collision objects; a step is
 *     predictMotion + solveConstraints + integrateMotion, what
 *     btSoftRigidDynamicsWorld does per soft body without the collision
 *     handlers.
 */
#ifndef TS_BENCH_BULLET_H
#define TS_BENCH_BULLET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ts_bench_bullet ts_bench_bullet;

typedef struct ts_bench_bullet_def {
  uint32_t n_nodes;
  const double (*x)[3];    /* positions, m */
  const double *inv_mass;  /* 1/kg; 0 = anchored */
  uint32_t n_links;
  const uint32_t *a, *b;   /* link ends */
  const double *klst;      /* per link, (0, 1] */
  double gravity[3];       /* m/s^2 */
  double kdp;              /* [0, 1) */
} ts_bench_bullet_def;

/* Builds the soft body. NULL with a message in err on bad input or when
 * out of memory. */
ts_bench_bullet *ts_bench_bullet_create(const ts_bench_bullet_def *def, char *err, size_t errcap);

/* `steps` btSoftBody steps of h seconds each. */
void ts_bench_bullet_run(ts_bench_bullet *b, double h, uint32_t steps);

/* 1 when every node position is finite. */
int ts_bench_bullet_finite(const ts_bench_bullet *b);

/* Largest distance of a node from where it started, m. */
double ts_bench_bullet_max_displacement(const ts_bench_bullet *b);

/* "float32" or "float64": the btScalar the library was built with. */
const char *ts_bench_bullet_precision(void);

/* Bullet's version, e.g. 324. */
int ts_bench_bullet_version(void);

void ts_bench_bullet_destroy(ts_bench_bullet *b);

#ifdef __cplusplus
}
#endif

#endif
