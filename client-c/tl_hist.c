/*
 * tl_hist.c: the log-linear latency histogram (see tl_hist.h).
 */
#include "tl_hist.h"

#include <string.h>

void tl_hist_reset(tl_hist *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

/* Bucket of v: exact below TL_HIST_LINEAR; above, octave k (2^(k+7) ..
 * 2^(k+8)) split into TL_HIST_SUB equal parts. */
static unsigned bucket_of(uint64_t v) {
  if (v < TL_HIST_LINEAR) return (unsigned)v;
  unsigned top = 63u - (unsigned)__builtin_clzll(v); /* >= 7 */
  unsigned k = top - 7;
  if (k >= TL_HIST_OCTAVES) return TL_HIST_BUCKETS - 1;
  uint64_t sub = (v - (1ull << top)) >> (top - 6); /* 0..63 */
  return TL_HIST_LINEAR + k * TL_HIST_SUB + (unsigned)sub;
}

/* Upper edge (exclusive) of bucket b. */
static double bucket_top(unsigned b) {
  if (b < TL_HIST_LINEAR) return (double)b + 1;
  unsigned k = (b - TL_HIST_LINEAR) / TL_HIST_SUB, sub = (b - TL_HIST_LINEAR) % TL_HIST_SUB;
  double base = (double)(1ull << (k + 7));
  return base + (double)(sub + 1) * base / TL_HIST_SUB;
}

void tl_hist_add(tl_hist *h, uint64_t us) {
  h->bucket[bucket_of(us)]++;
  h->count++;
  h->sum += (double)us;
  if (us > h->max) h->max = us;
  if (us < h->min) h->min = us;
}

void tl_hist_merge(tl_hist *dst, const tl_hist *src) {
  for (unsigned i = 0; i < TL_HIST_BUCKETS; i++) dst->bucket[i] += src->bucket[i];
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->max > dst->max) dst->max = src->max;
  if (src->min < dst->min) dst->min = src->min;
}

double tl_hist_quantile(const tl_hist *h, double p) {
  if (!h->count) return 0;
  if (p <= 0) return (double)h->min;
  uint64_t rank = (uint64_t)(p * (double)h->count + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > h->count) rank = h->count;
  uint64_t seen = 0;
  for (unsigned b = 0; b < TL_HIST_BUCKETS; b++) {
    seen += h->bucket[b];
    if (seen >= rank) {
      double top = b < TL_HIST_LINEAR ? (double)b : bucket_top(b);
      return top < (double)h->max ? top : (double)h->max;
    }
  }
  return (double)h->max;
}

double tl_hist_mean(const tl_hist *h) { return h->count ? h->sum / (double)h->count : 0; }
