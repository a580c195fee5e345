/*
 * bench_bullet.cpp: the btSoftBody reference of the mechanics benchmark
 * (see bench_bullet.h for the settings and why).
 */
#include "bench_bullet.h"

#include <BulletSoftBody/btSoftBody.h>
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <LinearMath/btScalar.h>

#include <cmath>
#include <cstdio>
#include <new>
#include <vector>

struct ts_bench_bullet {
  btSoftBodyWorldInfo info;
  btSoftBody *body = nullptr;
  std::vector<btVector3> start;
};

static void set_err(char *err, size_t cap, const char *msg) {
  if (err && cap) std::snprintf(err, cap, "%s", msg);
}

extern "C" ts_bench_bullet *ts_bench_bullet_create(const ts_bench_bullet_def *d, char *err,
                                                   size_t cap) {
  if (!d || !d->x || !d->inv_mass || (d->n_links && (!d->a || !d->b || !d->klst)) ||
      d->n_nodes == 0 || d->n_nodes > 0x7fffffffu || d->n_links > 0x7fffffffu ||
      !(d->kdp >= 0 && d->kdp < 1)) {
    set_err(err, cap, "bullet: bad definition");
    return nullptr;
  }
  for (uint32_t i = 0; i < d->n_links; i++) {
    if (d->a[i] >= d->n_nodes || d->b[i] >= d->n_nodes || !(d->klst[i] > 0 && d->klst[i] <= 1)) {
      set_err(err, cap, "bullet: bad link");
      return nullptr;
    }
  }
  ts_bench_bullet *b = nullptr;
  try {
    b = new ts_bench_bullet();
    b->info.m_gravity = btVector3(btScalar(d->gravity[0]), btScalar(d->gravity[1]),
                                  btScalar(d->gravity[2]));
    b->info.air_density = 0;
    std::vector<btScalar> mass(d->n_nodes);
    b->start.resize(d->n_nodes);
    for (uint32_t i = 0; i < d->n_nodes; i++) {
      b->start[i] = btVector3(btScalar(d->x[i][0]), btScalar(d->x[i][1]), btScalar(d->x[i][2]));
      mass[i] = d->inv_mass[i] > 0 ? btScalar(1.0 / d->inv_mass[i]) : btScalar(0);
    }
    b->body = new btSoftBody(&b->info, int(d->n_nodes), b->start.data(), mass.data());
    btSoftBody::Config &cfg = b->body->m_cfg;
    cfg.piterations = 1;
    cfg.viterations = 0;
    cfg.diterations = 0;
    cfg.kDP = btScalar(d->kdp);
    cfg.collisions = 0;
    b->body->m_links.reserve(int(d->n_links));
    b->body->m_materials.reserve(int(d->n_links) + 1);
    for (uint32_t i = 0; i < d->n_links; i++) {
      btSoftBody::Material *m = b->body->appendMaterial();
      m->m_kLST = btScalar(d->klst[i]);
      b->body->appendLink(int(d->a[i]), int(d->b[i]), m, false);
    }
  } catch (const std::bad_alloc &) {
    ts_bench_bullet_destroy(b);
    set_err(err, cap, "bullet: out of memory");
    return nullptr;
  }
  return b;
}

extern "C" void ts_bench_bullet_run(ts_bench_bullet *b, double h, uint32_t steps) {
  btSoftBody *sb = b->body;
  for (uint32_t s = 0; s < steps; s++) {
    sb->predictMotion(btScalar(h));
    sb->solveConstraints();
    sb->integrateMotion();
  }
}

extern "C" int ts_bench_bullet_finite(const ts_bench_bullet *b) {
  const btSoftBody::tNodeArray &n = b->body->m_nodes;
  for (int i = 0; i < n.size(); i++) {
    const btVector3 &x = n[i].m_x;
    if (!std::isfinite(double(x.x()) + double(x.y()) + double(x.z()))) return 0;
  }
  return 1;
}

extern "C" double ts_bench_bullet_max_displacement(const ts_bench_bullet *b) {
  const btSoftBody::tNodeArray &n = b->body->m_nodes;
  double m = 0;
  for (int i = 0; i < n.size(); i++) {
    double d = double((n[i].m_x - b->start[size_t(i)]).length());
    if (d > m) m = d;
  }
  return m;
}

extern "C" const char *ts_bench_bullet_precision(void) {
  return sizeof(btScalar) == sizeof(double) ? "float64" : "float32";
}

extern "C" int ts_bench_bullet_version(void) { return btGetVersion(); }

extern "C" void ts_bench_bullet_destroy(ts_bench_bullet *b) {
  if (!b) return;
  delete b->body;
  delete b;
}
