/*
 * balance_fixture.h: the force balance a resting tissue under a tool must
 * satisfy, shared by the contact, friction and robustness suites: the free
 * nodes' weight is carried by the anchors and the tool, so at rest the force
 * on the tool equals M g minus the spring forces on the anchored nodes.
 * Header-only, static inline.
 */
#ifndef TS_TEST_BALANCE_FIXTURE_H
#define TS_TEST_BALANCE_FIXTURE_H

#include <stdint.h>

#include "ts_tissue.h"

/* want = M g - sum of the forces on the anchored nodes (N): what the tools
 * hold in all, from t's last step (t->f). */
static inline void fx_tool_balance(const ts_tissue *t, double want[3]) {
  double M = 0, fa[3] = {0, 0, 0};
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (t->inv_mass[i] > 0)
      M += 1 / t->inv_mass[i];
    else
      for (int k = 0; k < 3; k++) fa[k] += t->f[i][k];
  }
  for (int k = 0; k < 3; k++) want[k] = M * t->gravity[k] - fa[k];
}

#endif
