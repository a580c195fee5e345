/*
 * ts_refine_springs.c: the springs of a refined tissue, rebuilt locally
 * (ts_refine.h), equal to the whole build's (ts_tissue_build on the refined
 * extrusion, renumbered) to the bit and in its order.
 *
 * A spring's constants (ts_tissue_build.c) read its two ends' rest
 * positions, extrusion directions and masses, and the volume shares of the
 * prisms on its edge (EDGE, SHEAR) or around its vertex (INTERLAYER). A
 * surface vertex of the refined extrusion is "changed" when it is new, when
 * its rest position moved (Loop's smoothing), or when it is a corner of a
 * changed triangle: one that is not one of the old extrusion's triangles
 * with the same vertices in the same order (so its prisms' shares could
 * differ), or one with a moved vertex; the corners of an old triangle that
 * the refinement removed are changed too (their masses and sums lose it).
 * A spring with both ends unchanged sees the same prisms, in the same
 * order, as before (checked: the unchanged triangles keep their relative
 * order), so the whole build gives it the constants it had: it is copied
 * from the old tissue through the node map (old nodes keep their indices).
 * A spring with a changed end is computed anew, by the builder's own code
 * (ts_tissue_build_internal.h), from the shares of the "ring": every prism
 * with a changed corner, which holds every prism on a changed vertex's
 * edges and around it (a changed vertex's INTERLAYER sum runs over all its
 * triangles, in the builder's order). Taking only the changed prisms (one
 * prism too narrow) leaves those sums short (the tests check that this
 * differs).
 *
 * The layout stays a whole pass: the refined surface's edges are sorted as
 * the builder sorts them, and the springs are emitted in the builder's
 * order (sheet by sheet: EDGE by edge, INTERLAYER by vertex, SHEAR by
 * edge), the copied ones found by one forward walk over the old springs
 * (they come in the same relative order). The order matters: XPBD's
 * Gauss-Seidel sweeps and the mass-spring step's sorted rows follow it.
 */
#include "ts_refine_springs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_tissue_build_internal.h"

#define TS__NONE UINT32_MAX

static uint64_t edge_key(uint32_t p, uint32_t q) {
  return p < q ? (uint64_t)p << 32 | q : (uint64_t)q << 32 | p;
}

/* old_of[f]: e's triangle with e2's triangle f's vertices in the same
 * order, or TS__NONE; kept[g]: e's triangle g is one of e2's. Returns 0,
 * 1 (the kept triangles out of their old relative order, or one matched
 * twice) or TS_ENOMEM. e's triangles are looked up by their smallest
 * vertex (a CSR list), so the pass is linear. */
static int match_tris(const ts_extrusion *e, const ts_extrusion *e2, uint32_t *old_of, uint8_t *kept) {
  const uint32_t nv = e->nv, nt = e->n_surface_tris, nt2 = e2->n_surface_tris;
  uint32_t *start = calloc((size_t)nv + 2, sizeof *start);
  uint32_t *idx = malloc(sizeof *idx * (nt ? nt : 1));
  if (!start || !idx) {
    free(start);
    free(idx);
    return TS_ENOMEM;
  }
  for (uint32_t g = 0; g < nt; g++) {
    const uint32_t *tr = e->surface_tris[g];
    uint32_t a = tr[0] < tr[1] ? tr[0] : tr[1];
    a = a < tr[2] ? a : tr[2];
    start[a + 2]++;
  }
  for (uint32_t j = 0; j < nv; j++) start[j + 2] += start[j + 1];
  for (uint32_t g = 0; g < nt; g++) { /* start[a + 1] runs ahead while filling */
    const uint32_t *tr = e->surface_tris[g];
    uint32_t a = tr[0] < tr[1] ? tr[0] : tr[1];
    a = a < tr[2] ? a : tr[2];
    idx[start[a + 1]++] = g;
  }
  memset(kept, 0, nt ? nt : 1);
  int rc = 0;
  uint32_t last = TS__NONE;
  for (uint32_t f = 0; f < nt2 && !rc; f++) {
    const uint32_t *tr = e2->surface_tris[f];
    old_of[f] = TS__NONE;
    if (tr[0] >= nv || tr[1] >= nv || tr[2] >= nv) continue;
    uint32_t a = tr[0] < tr[1] ? tr[0] : tr[1];
    a = a < tr[2] ? a : tr[2];
    for (uint32_t k = start[a]; k < start[a + 1]; k++) {
      const uint32_t *o = e->surface_tris[idx[k]];
      if (o[0] == tr[0] && o[1] == tr[1] && o[2] == tr[2]) {
        old_of[f] = idx[k];
        break;
      }
    }
    if (old_of[f] == TS__NONE) continue;
    if (kept[old_of[f]] || (last != TS__NONE && old_of[f] < last)) rc = 1;
    kept[old_of[f]] = 1;
    last = old_of[f];
  }
  free(start);
  free(idx);
  return rc;
}

/* The walk over the old springs: appends the old spring(s) between tissue
 * nodes a and b of the kind to the sink. 0, or 1 when they are not found
 * ahead of *ptr. */
static int carry(const ts_tissue *t, uint32_t *ptr, uint32_t a, uint32_t b, uint8_t kind, ts__spring_sink *sk,
                 uint32_t *carried) {
  const uint32_t lo = a < b ? a : b, hi = a < b ? b : a, ns = t->n_springs;
  const ts_spring *sp = t->springs;
  uint32_t i = *ptr;
  while (i < ns && !(sp[i].a == lo && sp[i].b == hi && sp[i].kind == kind)) i++;
  if (i == ns) return 1;
  do {
    if (sk->n >= sk->cap) return 1;
    sk->s[sk->n++] = sp[i++];
    ++*carried;
  } while (i < ns && sp[i].a == lo && sp[i].b == hi && sp[i].kind == kind);
  *ptr = i;
  return 0;
}

/* Emits the spring(s) of extrusion nodes a, b from their shares and
 * renumbers them to tissue nodes. */
static int fresh(ts__spring_sink *sk, const uint32_t *map2, uint32_t a, uint32_t b, const ts__contrib *cb,
                 int ncb, uint8_t kind) {
  const uint32_t n0 = sk->n;
  if (ts__build_emit(sk, a, b, cb, ncb, kind)) return TS_EMESH;
  for (uint32_t i = n0; i < sk->n; i++) {
    uint32_t x = map2[sk->s[i].a], y = map2[sk->s[i].b];
    sk->s[i].a = x < y ? x : y;
    sk->s[i].b = x < y ? y : x;
  }
  return 0;
}

int ts__refine_springs(const ts__refine_springs_in *in, ts__refine_springs_out *o) {
  memset(o, 0, sizeof *o);
  const ts_extrusion *e = in->e, *e2 = in->e2;
  const uint32_t nv = e->nv, nv2 = e2->nv, L = e2->n_layers, S = e2->n_sheets;
  const uint32_t NT = e->n_surface_tris, NT2 = e2->n_surface_tris;
  const uint32_t N2 = S * nv2;
  if (nv2 < nv || S != e->n_sheets || L != e->n_layers) return 1;
  const double (*x)[3] = (const double (*)[3])e2->x;

  int rc = 0;
  uint32_t *old_of = malloc(sizeof *old_of * (NT2 ? NT2 : 1));
  uint8_t *kept = malloc(NT ? NT : 1);
  uint8_t *moved = calloc(nv2, 1), *dirty = calloc(nv2, 1), *has_tri = calloc(nv2, 1);
  uint8_t *ring = malloc(NT2 ? NT2 : 1);
  uint64_t *keys = malloc(sizeof *keys * 3 * ((size_t)NT2 ? NT2 : 1));
  uint32_t(*te)[3] = malloc(sizeof *te * (NT2 ? NT2 : 1));
  double(*normal)[3] = calloc(nv2, sizeof *normal);
  uint8_t *free_node = malloc(N2);
  double *face = NULL, *diag = NULL, *vert = NULL;
  ts_spring *springs = NULL;
  if (!old_of || !kept || !moved || !dirty || !has_tri || !ring || !keys || !te || !normal || !free_node) {
    rc = TS_ENOMEM;
    goto done;
  }
  rc = match_tris(e, e2, old_of, kept);
  if (rc) goto done;

  /* changed vertices: new, moved, corners of a changed or a removed triangle */
  for (uint32_t j = nv; j < nv2; j++) moved[j] = 1;
  for (uint32_t j = 0; j < nv; j++)
    for (uint32_t sh = 0; sh < S && !moved[j]; sh++)
      moved[j] = memcmp(x[(size_t)sh * nv2 + j], e->x[(size_t)sh * nv + j], sizeof x[0]) != 0;
  memcpy(dirty, moved, nv2);
  for (uint32_t f = 0; f < NT2; f++) {
    const uint32_t *tr = e2->surface_tris[f];
    int changed = old_of[f] == TS__NONE || moved[tr[0]] || moved[tr[1]] || moved[tr[2]];
    for (int k = 0; k < 3; k++) {
      if (changed) dirty[tr[k]] = 1;
      has_tri[tr[k]] = 1;
    }
    ring[f] = (uint8_t)changed; /* the narrow ring: the changed prisms only */
  }
  for (uint32_t g = 0; g < NT; g++)
    if (!kept[g])
      for (int k = 0; k < 3; k++) dirty[e->surface_tris[g][k]] = 1;
  if (in->ring)
    for (uint32_t f = 0; f < NT2; f++) {
      const uint32_t *tr = e2->surface_tris[f];
      ring[f] = dirty[tr[0]] || dirty[tr[1]] || dirty[tr[2]];
    }

  /* the refined surface's edges, sorted as the builder sorts them */
  for (uint32_t f = 0; f < NT2; f++)
    for (int k = 0; k < 3; k++)
      keys[3 * (size_t)f + k] = edge_key(e2->surface_tris[f][k], e2->surface_tris[f][(k + 1) % 3]);
  qsort(keys, 3 * (size_t)NT2, sizeof *keys, ts__cmp_u64);
  uint32_t E = 0;
  for (size_t i = 0; i < 3 * (size_t)NT2; i++)
    if (i == 0 || keys[i] != keys[E - 1]) keys[E++] = keys[i];

  /* the ring's shares, summed in the builder's order (layer, then triangle) */
  face = calloc((size_t)L * E * 2, sizeof *face);
  diag = calloc((size_t)L * E * 2, sizeof *diag);
  vert = calloc((size_t)L * nv2, sizeof *vert);
  if (!face || !diag || !vert) {
    rc = TS_ENOMEM;
    goto done;
  }
  for (uint32_t f = 0; f < NT2; f++) {
    if (!ring[f]) continue;
    for (int k = 0; k < 3; k++) {
      uint64_t key = edge_key(e2->surface_tris[f][k], e2->surface_tris[f][(k + 1) % 3]);
      const uint64_t *hit = bsearch(&key, keys, E, sizeof *keys, ts__cmp_u64);
      te[f][k] = (uint32_t)(hit - keys);
    }
  }
  for (uint32_t l = 0; l < L; l++)
    for (uint32_t f = 0; f < NT2; f++) {
      if (!ring[f]) continue;
      const uint32_t *tr = e2->surface_tris[f];
      double P[3][3], Q[3][3];
      for (int k = 0; k < 3; k++) {
        memcpy(P[k], x[(size_t)l * nv2 + tr[k]], sizeof P[k]);
        memcpy(Q[k], x[(size_t)(l + 1) * nv2 + tr[k]], sizeof Q[k]);
      }
      ts__prism_share ps;
      if (ts__prism_shares((const double (*)[3])P, (const double (*)[3])Q, &ps)) {
        rc = TS_EMESH;
        goto done;
      }
      ts__build_add_prism(tr, te[f], &ps, face + 2 * (size_t)l * E, diag + 2 * (size_t)l * E,
                          vert + (size_t)l * nv2);
      o->prisms++;
    }

  /* what the constants read besides the shares (the builder's rules) */
  for (uint32_t j = 0; j < nv2; j++) {
    double d[3];
    for (int c = 0; c < 3; c++) d[c] = x[nv2 + j][c] - x[j][c];
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (l > 0)
      for (int c = 0; c < 3; c++) normal[j][c] = d[c] / l;
  }
  for (uint32_t i = 0; i < N2; i++) free_node[i] = in->mass[i] > 0 && !(in->anchored && in->anchored[i]);

  uint32_t cap = 0;
  rc = ts__spring_sink_alloc(L, nv2, E, &springs, &cap);
  if (rc) goto done;
  ts__spring_sink sk = {springs, 0, cap, x, (const double (*)[3])normal, nv2,
                        in->layers, in->mass, free_node};
  const uint32_t *m2 = in->map2;
  uint32_t ptr = 0, carried = 0;
  for (uint32_t s = 0; s < S && !rc; s++) {
    for (uint32_t ei = 0; ei < E && !rc; ei++) {
      uint32_t p = (uint32_t)(keys[ei] >> 32), q = (uint32_t)keys[ei];
      if (!dirty[p] && !dirty[q]) {
        rc = carry(in->t, &ptr, m2[s * nv2 + p], m2[s * nv2 + q], TS_SPRING_EDGE, &sk, &carried);
        continue;
      }
      ts__contrib cb[2];
      int n = 0;
      if (s > 0 && face[2 * ((size_t)(s - 1) * E + ei) + 1] > 0)
        cb[n++] = (ts__contrib){s - 1, face[2 * ((size_t)(s - 1) * E + ei) + 1]};
      if (s < L && face[2 * ((size_t)s * E + ei) + 0] > 0)
        cb[n++] = (ts__contrib){s, face[2 * ((size_t)s * E + ei) + 0]};
      if (n) rc = fresh(&sk, m2, s * nv2 + p, s * nv2 + q, cb, n, TS_SPRING_EDGE);
    }
    if (s == L || rc) break;
    for (uint32_t j = 0; j < nv2 && !rc; j++) {
      if (!dirty[j]) {
        if (has_tri[j]) rc = carry(in->t, &ptr, m2[s * nv2 + j], m2[(s + 1) * nv2 + j], TS_SPRING_INTERLAYER, &sk,
                                &carried);
        continue;
      }
      double V = vert[(size_t)s * nv2 + j];
      if (!(V > 0)) continue; /* a vertex of no triangle */
      ts__contrib cb = {s, V};
      rc = fresh(&sk, m2, s * nv2 + j, (s + 1) * nv2 + j, &cb, 1, TS_SPRING_INTERLAYER);
    }
    for (uint32_t ei = 0; ei < E && !rc; ei++) {
      uint32_t p = (uint32_t)(keys[ei] >> 32), q = (uint32_t)keys[ei];
      int clean = !dirty[p] && !dirty[q];
      for (int fl = 0; fl < 2 && !rc; fl++) {
        uint32_t a = s * nv2 + (fl ? q : p), b = (s + 1) * nv2 + (fl ? p : q);
        if (clean) {
          rc = carry(in->t, &ptr, m2[a], m2[b], TS_SPRING_SHEAR, &sk, &carried);
          continue;
        }
        double V = diag[2 * ((size_t)s * E + ei) + fl];
        if (!(V > 0)) continue;
        ts__contrib cb = {s, V};
        rc = fresh(&sk, m2, a, b, &cb, 1, TS_SPRING_SHEAR);
      }
    }
  }
  if (rc) goto done;
  o->n = sk.n;
  o->computed = sk.n - carried;
  o->springs = springs;
  springs = NULL;

done:
  free(old_of);
  free(kept);
  free(moved);
  free(dirty);
  free(has_tri);
  free(ring);
  free(keys);
  free(te);
  free(normal);
  free(free_node);
  free(face);
  free(diag);
  free(vert);
  free(springs);
  return rc;
}
