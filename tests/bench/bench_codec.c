/*
 * bench_codec.c: the frame codec benchmark of issue 7 ("Benchmark"): on the
 * standard scripted scenario, the mean bytes per frame of the "q2" codec
 * (proto/ts_codec.h) beside, in the same run on the same frames:
 *   - raw float32 positions (12 n bytes a frame; target: q2 under 5 %);
 *   - zstd (level 3) of the raw quantized frame (the int32 positions);
 *   - q1 (the varints without an entropy stage);
 *   - meshoptimizer's vertex codec (libmeshoptimizer), the entropy stage q2
 *     was chosen against: keyframes as the int32 positions in 12-byte
 *     vertices, deltas as zigzagged residuals in 12-byte vertices plus the
 *     index gaps as a 4-byte stream;
 * and the encode time per frame (q2 against q1) and the decode speed in
 * bytes of output per second (target: 1 GB/s or more; q2 against
 * meshoptimizer). "Output" is the decoded state a client holds after the
 * frame: 12 n bytes of int32 positions whatever the frame changed; the
 * keyframe figure decodes whole keyframes only.
 *
 *   bench_codec [--quick | --full] [SCENARIO ...]   (default: patch-S)
 *
 * Frames: the scenario's tissue settles for 0.25 s, then follows the
 * standard path (bench_path.h) with the 5 mm sphere at the session dt of
 * 1 ms; every 1/60 s of simulated time its positions are quantized to the
 * 10 um grid, as the daemon does, and the first frame is a keyframe, the
 * others deltas against the frame before. Default: the whole 10 s path (600
 * frames); --quick: 0.4 s of it from 1.6 s (the press; 25 frames) after a
 * 0.05 s settle; --full: also patch-L. Besides the scenarios, the recorded
 * daemon stream tests/fixtures/stream_patch.frames.zst (150 frames, a
 * topology change) is measured as scenario "recorded".
 *
 * Every frame is decoded by every codec and checked against the quantized
 * positions (a mismatch is an error: exit status 1). Times are the thread's
 * CPU time: other processes on the machine disturb them less.
 */
#include <math.h>
#include <meshoptimizer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "bench_path.h"
#include "bench_report.h"
#include "bench_scenario.h"
#include "tissue.pb-c.h"
#include "ts_codec.h"
#include "ts_codec_frame.h"
#include "ts_error.h"
#include "ts_framing.h"
#include "ts_massspring.h"

#define FRAME_DT (1.0 / 60.0)
#define KEY_EVERY 10   /* every 10th frame is also timed as a keyframe */
#define KEY_REPS 5     /* keyframe decodes per sample */

/* ---- the accumulated figures ------------------------------------------------- */

typedef struct acc {
  const char *scenario;
  uint32_t max_n;
  uint64_t frames;
  double raw, q1, q2, zraw, mo;      /* bytes */
  double enc_q1, enc_q2;             /* CPU s */
  double dec_q2, dec_mo, out_bytes;  /* CPU s, bytes of output */
  double key_dec_q2, key_out, key_q2_bytes;
  uint64_t keys;
  int errors;
  /* the previous frame (baseline) */
  int32_t (*prev)[3];
  uint32_t prev_n;
  /* scratch */
  ts_codec_ctx *cx;
  uint8_t *buf, *buf2;
  size_t cap;
  int32_t (*st)[3];                  /* decoder state */
  uint32_t *tmp;                     /* meshopt residuals and gaps */
  size_t tmp_cap;
} acc;

static int reserve(acc *a, uint32_t n) {
  size_t need = ts_codec_payload_bound(TS_CODEC_Q2, n);
  size_t mo = meshopt_encodeVertexBufferBound(n, 12) + meshopt_encodeVertexBufferBound(n, 4);
  size_t zb = ZSTD_compressBound((size_t)n * 12);
  if (mo > need) need = mo;
  if (zb > need) need = zb;
  if (need > a->cap) {
    free(a->buf);
    free(a->buf2);
    a->buf = malloc(need);
    a->buf2 = malloc(need);
    a->cap = need;
  }
  if ((size_t)n * 4 > a->tmp_cap) {
    free(a->tmp);
    free(a->st);
    a->tmp = malloc((size_t)n * 4 * sizeof *a->tmp);
    a->st = malloc((size_t)n * sizeof *a->st);
    a->tmp_cap = (size_t)n * 4;
  }
  return a->buf && a->buf2 && a->tmp && a->st ? 0 : -1;
}

static uint32_t zz(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static int32_t unzz(uint32_t u) { return (int32_t)((u >> 1) ^ (0u - (u & 1u))); }

/* meshoptimizer's vertex codec on one frame: returns the bytes, and checks
 * that its decode gives q back (timing the decode into *dec_s). */
static size_t meshopt_frame(acc *a, const int32_t (*base)[3], const int32_t (*q)[3], uint32_t n,
                            double *dec_s) {
  uint32_t *res = a->tmp, *gap = a->tmp + 3 * (size_t)n;
  uint32_t m = 0;
  size_t len;
  if (!base) {
    len = meshopt_encodeVertexBuffer(a->buf, a->cap, q, n, 12);
  } else {
    int64_t prev = -1;
    for (uint32_t i = 0; i < n; i++) {
      if (!memcmp(q[i], base[i], sizeof q[i])) continue;
      for (int k = 0; k < 3; k++) res[3 * (size_t)m + (size_t)k] = zz(q[i][k] - base[i][k]);
      gap[m++] = (uint32_t)((int64_t)i - prev - 1);
      prev = i;
    }
    size_t lr = meshopt_encodeVertexBuffer(a->buf, a->cap, res, m, 12);
    size_t lg = meshopt_encodeVertexBuffer(a->buf + lr, a->cap - lr, gap, m, 4);
    len = lr + lg + 4; /* + the count m, which the stream would carry */
    /* decode: the two streams, then apply */
    memcpy(a->st, base, sizeof *a->st * n);
    double t0 = ts_bench_cpu_s();
    int e = meshopt_decodeVertexBuffer(res, m, 12, a->buf, lr);
    e |= meshopt_decodeVertexBuffer(gap, m, 4, a->buf + lr, lg);
    int64_t idx = -1;
    for (uint32_t j = 0; j < m && !e; j++) {
      idx += 1 + gap[j];
      for (int k = 0; k < 3; k++) a->st[idx][k] += unzz(res[3 * (size_t)j + (size_t)k]);
    }
    *dec_s += ts_bench_cpu_s() - t0;
    if (e || memcmp(a->st, q, sizeof *q * n)) a->errors++;
    return len;
  }
  double t0 = ts_bench_cpu_s();
  int e = meshopt_decodeVertexBuffer(a->st, n, 12, a->buf, len);
  *dec_s += ts_bench_cpu_s() - t0;
  if (e || memcmp(a->st, q, sizeof *q * n)) a->errors++;
  return len;
}

/* One frame through every codec. keyframe: a keyframe whatever the
 * baseline (the first frame, a topology change). */
static void add_frame(acc *a, const int32_t (*q)[3], uint32_t n, int keyframe) {
  if (reserve(a, n)) {
    a->errors++;
    return;
  }
  const int32_t (*base)[3] = keyframe || !a->prev || a->prev_n != n ? NULL
                                                                     : (const int32_t (*)[3])a->prev;
  size_t len;
  a->frames++;
  if (n > a->max_n) a->max_n = n;
  a->raw += 12.0 * n;
  a->zraw += (double)ZSTD_compress(a->buf, a->cap, q, (size_t)n * 12, 3);

  double t0 = ts_bench_cpu_s();
  int rc = ts_codec_encode(a->cx, TS_CODEC_Q1, base, q, n, a->buf, a->cap, &len, NULL);
  a->enc_q1 += ts_bench_cpu_s() - t0;
  if (rc) a->errors++;
  a->q1 += (double)len;

  t0 = ts_bench_cpu_s();
  rc = ts_codec_encode(a->cx, TS_CODEC_Q2, base, q, n, a->buf, a->cap, &len, NULL);
  a->enc_q2 += ts_bench_cpu_s() - t0;
  if (rc) a->errors++;
  a->q2 += (double)len;
  if (base) memcpy(a->st, base, sizeof *a->st * n);
  t0 = ts_bench_cpu_s();
  rc = ts_codec_decode(a->cx, TS_CODEC_Q2, base == NULL, a->buf, len, n, a->st, NULL);
  a->dec_q2 += ts_bench_cpu_s() - t0;
  a->out_bytes += 12.0 * n;
  if (rc || memcmp(a->st, q, sizeof *q * n)) a->errors++;

  a->mo += (double)meshopt_frame(a, base, q, n, &a->dec_mo);

  if (a->frames % KEY_EVERY == 1) { /* whole keyframes, timed apart */
    rc = ts_codec_encode(a->cx, TS_CODEC_Q2, NULL, q, n, a->buf2, a->cap, &len, NULL);
    if (rc) a->errors++;
    t0 = ts_bench_cpu_s();
    for (int r = 0; r < KEY_REPS; r++)
      rc |= ts_codec_decode(a->cx, TS_CODEC_Q2, 1, a->buf2, len, n, a->st, NULL);
    a->key_dec_q2 += ts_bench_cpu_s() - t0;
    if (rc || memcmp(a->st, q, sizeof *q * n)) a->errors++;
    a->key_out += 12.0 * n * KEY_REPS;
    a->key_q2_bytes += (double)len;
    a->keys++;
  }
  if (a->prev_n != n) {
    free(a->prev);
    a->prev = malloc(sizeof *a->prev * n);
    a->prev_n = n;
  }
  memcpy(a->prev, q, sizeof *q * n);
}

static void acc_free(acc *a) {
  ts_codec_ctx_free(a->cx);
  free(a->prev);
  free(a->buf);
  free(a->buf2);
  free(a->st);
  free(a->tmp);
}

static void emit(const acc *a, const char *plan) {
  double f = (double)(a->frames ? a->frames : 1);
  cJSON *l;
  l = ts_bench_line("codec", a->scenario, "bytes_per_frame", a->q2 / f, "B");
  ts_bench_line_ref(l, "raw_float32", a->raw / f);
  ts_bench_line_num(l, "target_ratio", 0.05);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_num(l, "frames", (double)a->frames);
  ts_bench_line_num(l, "vertices", a->max_n);
  ts_bench_line_str(l, "plan", plan);
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "bytes_per_frame", a->q2 / f, "B");
  ts_bench_line_ref(l, "zstd_raw_quantized", a->zraw / f);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "bytes_per_frame", a->q2 / f, "B");
  ts_bench_line_ref(l, "meshopt_vertex_codec", a->mo / f);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "bytes_per_frame", a->q2 / f, "B");
  ts_bench_line_ref(l, "q1", a->q1 / f);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "keyframe_bytes", a->key_q2_bytes / (double)a->keys, "B");
  ts_bench_line_ref(l, "raw_float32", 12.0 * a->max_n);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "encode_us_per_frame", a->enc_q2 / f * 1e6, "us");
  ts_bench_line_ref(l, "q1", a->enc_q1 / f * 1e6);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_num(l, "zstd_level", TS_CODEC_Q2_LEVEL);
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "decode_output_bytes_per_s",
                    a->dec_q2 > 0 ? a->out_bytes / a->dec_q2 : 0, "B/s");
  ts_bench_line_ref(l, "meshopt_vertex_codec", a->dec_mo > 0 ? a->out_bytes / a->dec_mo : 0);
  ts_bench_line_num(l, "target", 1e9);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_str(l, "output", "12 n bytes of positions per frame");
  ts_bench_line_emit(l);
  l = ts_bench_line("codec", a->scenario, "keyframe_decode_output_bytes_per_s",
                    a->key_dec_q2 > 0 ? a->key_out / a->key_dec_q2 : 0, "B/s");
  ts_bench_line_num(l, "target", 1e9);
  ts_bench_line_str(l, "codec", "q2");
  ts_bench_line_emit(l);
}

/* ---- the scenarios -------------------------------------------------------------- */

static int run_scenario(const char *name, int quick, acc *a) {
  ts_bench_scenario sc;
  char err[256];
  if (ts_bench_scenario_create(name, &sc, err, sizeof err)) {
    fprintf(stderr, "codec: %s\n", err);
    return -1;
  }
  double settle = quick ? 0.05 : 0.25, t_start = quick ? 1.6 : 0.0, t_end = quick ? 2.0 : 10.0;
  int rc = ts_bench_scenario_settle(&sc, settle);
  ts_tissue *t = sc.tissue;
  uint32_t n = t->n_nodes;
  int32_t (*q)[3] = malloc(sizeof *q * n);
  ts_tool tool;
  double path_t = t_start, next_frame = t_start;
  double w0 = ts_bench_wall_s();
  while (!rc && path_t <= t_end + 1e-9) {
    ts_bench_path_sphere(&sc.path, path_t, TS_BENCH_SPHERE_RADIUS, &tool);
    ts_step_stats st;
    rc = ts_massspring_step(t, sc.dt, &tool, 1, &st);
    path_t += sc.dt;
    if (!rc && path_t + 1e-9 >= next_frame) {
      next_frame += FRAME_DT;
      rc = ts_quantize((const double (*)[3])t->x, n, TS_DEFAULT_QUANTUM, q);
      if (!rc) add_frame(a, (const int32_t (*)[3])q, n, a->frames == 0);
    }
  }
  if (rc)
    fprintf(stderr, "codec: %s: the simulation failed at path time %.3f s: %s\n", name, path_t,
            ts_strerror(rc));
  else
    fprintf(stderr, "codec: %s: %llu frames of %u vertices in %.1f s\n", name,
            (unsigned long long)a->frames, n, ts_bench_wall_s() - w0);
  free(q);
  ts_bench_scenario_destroy(&sc);
  return rc ? -1 : 0;
}

/* The recorded daemon stream: every Frame's positions (decoded from the q1
 * the daemon sent) go through the codecs like simulated ones. */
typedef struct rec_state {
  acc *a;
  int32_t (*q)[3];
  uint32_t n;
  int bad;
} rec_state;

static int on_recorded(void *ud, const uint8_t *msg, size_t len) {
  rec_state *r = ud;
  Tissued__V1__Envelope *e = tissued__v1__envelope__unpack(NULL, len, msg);
  if (!e || e->body_case != TISSUED__V1__ENVELOPE__BODY_FRAME) {
    r->bad = 1;
    if (e) tissued__v1__envelope__free_unpacked(e, NULL);
    return 1;
  }
  const Tissued__V1__Frame *f = e->frame;
  if (f->keyframe) {
    free(r->q);
    r->q = malloc(sizeof *r->q * (f->vertex_count ? f->vertex_count : 1));
    r->n = f->vertex_count;
  }
  if (!r->q || ts_codec_decode(NULL, ts_frame_codec(f), f->keyframe, f->payload.data,
                               f->payload.len, r->n, r->q, NULL)) {
    r->bad = 1;
  } else {
    add_frame(r->a, (const int32_t (*)[3])r->q, r->n, f->keyframe);
  }
  tissued__v1__envelope__free_unpacked(e, NULL);
  return r->bad;
}

static int run_recorded(acc *a) {
  const char *path = TS_SOURCE_DIR "/tests/fixtures/stream_patch.frames.zst";
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "codec: cannot open %s\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long zl = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *z = malloc((size_t)zl);
  size_t got = z ? fread(z, 1, (size_t)zl, f) : 0;
  fclose(f);
  unsigned long long cs = got == (size_t)zl ? ZSTD_getFrameContentSize(z, got) : 0;
  if (!z || cs == 0 || cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR ||
      cs > (64u << 20)) {
    free(z);
    fprintf(stderr, "codec: %s is not a zstd file of a recorded stream\n", path);
    return -1;
  }
  uint8_t *b = malloc((size_t)cs);
  size_t bl = b ? ZSTD_decompress(b, (size_t)cs, z, got) : 0;
  free(z);
  rec_state r = {a, NULL, 0, 0};
  ts_framer fr;
  ts_framer_init(&fr, 64u << 20);
  int rc = b && !ZSTD_isError(bl) ? ts_framer_feed(&fr, b, bl, on_recorded, &r) : -1;
  ts_framer_free(&fr);
  free(b);
  free(r.q);
  if (rc || r.bad) {
    fprintf(stderr, "codec: %s does not decode\n", path);
    return -1;
  }
  return 0;
}

static int measure(const char *name, int quick, const char *plan) {
  acc a;
  memset(&a, 0, sizeof a);
  a.scenario = name;
  a.cx = ts_codec_ctx_new();
  if (!a.cx) return -1;
  int rc = strcmp(name, "recorded") == 0 ? run_recorded(&a) : run_scenario(name, quick, &a);
  if (a.errors) {
    fprintf(stderr, "codec: %s: %d frames did not round-trip exactly\n", name, a.errors);
    rc = -1;
  }
  if (!rc && a.frames) emit(&a, plan);
  acc_free(&a);
  return rc;
}

int main(int argc, char **argv) {
  static const char usage[] =
      "usage: bench_codec [--quick | --full] [SCENARIO ...]\n"
      "  frame codec sizes and speeds on the standard path (default: patch-S;\n"
      "  --full adds patch-L) and on the recorded daemon stream\n";
  ts_bench_mode mode;
  const char *names[16];
  int n_names;
  int a = ts_bench_args(argc, argv, usage, &mode, names, 15, &n_names);
  if (a) return a == 1 ? 0 : 2;
  int quick = mode == TS_BENCH_QUICK, full = mode == TS_BENCH_FULL;
  if (!n_names) {
    names[n_names++] = "patch-S";
    if (full) names[n_names++] = "patch-L";
  }
  const char *plan = quick ? "quick" : full ? "full" : "default";
  int status = 0;
  if (measure("recorded", quick, plan)) status = 1;
  for (int i = 0; i < n_names; i++)
    if (measure(names[i], quick, plan)) status = 1;
  return status;
}
