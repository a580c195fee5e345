/*
 * ts_material.c: the exponential law, the link-element constant, fibre
 * weights, layer validation and the default stomach-wall materials (see
 * ts_material.h for the model and its references).
 *
 * Default materials. Layer thicknesses are the nominal human gastric wall of
 * the project's scenarios (mucosa 1.0 mm, submucosa 1.5 mm, muscularis
 * 2.0 mm; 4.5 mm in all). Stomach-wall layers are nonlinear, layer-dependent
 * and, except for the mucosa, anisotropic, with peak stresses from about 15
 * to 200 kPa depending on region and direction (porcine stomach,
 * layer-separated biaxial tests: M. Bauer et al., "Biomechanical and
 * microstructural characterisation of the porcine stomach wall: location- and
 * layer-dependent investigations", Acta Biomaterialia 102:83-99, 2020; they
 * found the mucosa isotropic and the muscle of corpus and antrum almost
 * exclusively circumferential). The (a, b) below are not a fit to any one
 * data set: they put sigma = a e^(b eps) in the upper half of that range at
 * 30 % strain (50-135 kPa), with moderate exponents b = 4-5 and small-strain
 * moduli a b of 60-150 kPa. The submucosa (the collagen layer) is the
 * stiffest and is taken as isotropic (its crossed collagen plies); the
 * muscularis is anisotropic with its fibre along the patch's x axis (the
 * circumferential muscle), about twice as stiff along it as across. Softer
 * values from the same range (a b of 10-20 kPa) make the default patch, an
 * 80 mm span of 4.5 mm wall, sag over 1 cm and snap through its dome under
 * its own weight; with these it sags about 1.2 mm at every resolution.
 * Densities are those of soft tissue and smooth muscle (about 1040-1060
 * kg/m^3). The per-spring dampers are light (5 % of critical): they quench
 * the fast through-thickness ringing. The strain range of strain limiting
 * (-0.5, 0.4) is beyond what the tests above reach before damage. Fitted
 * tables (storage/defaults/) replace these values per session.
 */
#include "ts_material.h"

#include <math.h>

#include "ts_error.h"

double ts_law_stress(ts_law law, double eps) { return law.a * exp(law.b * eps); }

double ts_law_tangent(ts_law law, double eps) {
  return law.a * law.b * exp(law.b * (eps > 0 ? eps : 0.0));
}

double ts_link_stiffness(double young, double area, double length) {
  return young * area / length;
}

double ts_law_spring_constant(ts_law law, double area, double length, double eps) {
  return ts_link_stiffness(ts_law_tangent(law, eps), area, length);
}

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

void ts_fibre_weights(const double dir[3], const double fibre[3], const double normal[3],
                      double *w_axial, double *w_radial) {
  double f[3] = {fibre[0], fibre[1], fibre[2]};
  double f2 = dot3(f, f);
  if (!(f2 > 0)) { /* isotropic */
    *w_axial = 1.0;
    *w_radial = 0.0;
    return;
  }
  if (normal) {
    double n2 = dot3(normal, normal);
    if (n2 > 0) {
      double s = dot3(f, normal) / n2;
      for (int i = 0; i < 3; i++) f[i] -= s * normal[i];
    }
  }
  double fp2 = dot3(f, f), d2 = dot3(dir, dir);
  if (!(fp2 > 1e-24 * f2) || !(d2 > 0)) { /* fibre along the normal: all across */
    *w_axial = 0.0;
    *w_radial = 1.0;
    return;
  }
  double c = fabs(dot3(f, dir)) / sqrt(fp2 * d2);
  if (c > 1) c = 1;
  *w_axial = c;
  *w_radial = sqrt(1.0 - c * c);
}

static int law_ok(ts_law l) {
  return isfinite(l.a) && isfinite(l.b) && l.a > 0 && l.b > 0 && l.b <= 100 && l.a * l.b <= 1e9;
}

int ts_layer_set_law(ts_layer *layer, int dir, double a, double b) {
  ts_law l = {a, b};
  if (!layer || !law_ok(l)) return TS_EINVAL;
  if (dir == TS_DIR_AXIAL) {
    layer->axial = l;
    layer->young = a * b;
  } else if (dir == TS_DIR_RADIAL) {
    layer->radial = l;
  } else {
    return TS_EINVAL;
  }
  return 0;
}

int ts_layer_validate(const ts_layer *L) {
  if (!L) return TS_EINVAL;
  if (!memchr(L->name, 0, TS_NAME_MAX) || L->name[0] == 0) return TS_EINVAL;
  if (!isfinite(L->thickness) || !(L->thickness > 0)) return TS_EINVAL;
  if (!isfinite(L->density) || !(L->density > 0)) return TS_EINVAL;
  if (!isfinite(L->damping_ratio) || L->damping_ratio < 0 || L->damping_ratio > 10)
    return TS_EINVAL;
  if (!law_ok(L->axial) || !law_ok(L->radial)) return TS_EINVAL;
  for (int i = 0; i < 3; i++)
    if (!isfinite(L->fibre[i]) || fabs(L->fibre[i]) > 1e6) return TS_EINVAL;
  if (!isfinite(L->strain_min) || !isfinite(L->strain_max)) return TS_EINVAL;
  if (!(L->strain_min > -1 && L->strain_min < 0 && L->strain_max > 0 && L->strain_max <= 10))
    return TS_EINVAL;
  return 0;
}

/* name, thickness, density, axial (a, b), radial (a, b), fibre */
static const struct {
  const char *name;
  double thickness, density;
  double aa, ba, ar, br;
  double fibre[3];
} ts__defaults[3] = {
    {"mucosa", 1.0e-3, 1040.0, 20e3, 4.0, 20e3, 4.0, {0, 0, 0}},
    {"submucosa", 1.5e-3, 1050.0, 30e3, 5.0, 30e3, 5.0, {0, 0, 0}},
    {"muscularis", 2.0e-3, 1060.0, 25e3, 5.0, 15e3, 4.0, {1, 0, 0}},
};

uint32_t ts_material_default_layers(ts_layer out[3]) {
  for (int i = 0; i < 3; i++) {
    ts_layer *L = &out[i];
    memset(L, 0, sizeof *L);
    strncpy(L->name, ts__defaults[i].name, TS_NAME_MAX - 1);
    L->thickness = ts__defaults[i].thickness;
    L->density = ts__defaults[i].density;
    L->damping_ratio = 0.05;
    L->axial = (ts_law){ts__defaults[i].aa, ts__defaults[i].ba};
    L->radial = (ts_law){ts__defaults[i].ar, ts__defaults[i].br};
    L->young = L->axial.a * L->axial.b;
    memcpy(L->fibre, ts__defaults[i].fibre, sizeof L->fibre);
    L->strain_min = -0.5;
    L->strain_max = 0.4;
  }
  return 3;
}
