/*
 * tl_hist.h: a latency histogram for the load generator (tissueload): fixed
 * memory, O(1) recording, percentiles within 1 % (log-linear buckets in the
 * manner of HdrHistogram: 1 us resolution below 128 us, then 64 buckets per
 * power of two). Values are microseconds.
 */
#ifndef TL_HIST_H
#define TL_HIST_H

#include <stdint.h>

#define TL_HIST_SUB 64                  /* buckets per octave above the linear part */
#define TL_HIST_LINEAR 128              /* values below this are exact */
#define TL_HIST_OCTAVES 32
#define TL_HIST_BUCKETS (TL_HIST_LINEAR + TL_HIST_OCTAVES * TL_HIST_SUB)

typedef struct tl_hist {
  uint64_t count;
  uint64_t max;
  uint64_t min;
  double sum;
  uint64_t bucket[TL_HIST_BUCKETS];
} tl_hist;

void tl_hist_reset(tl_hist *h);
void tl_hist_add(tl_hist *h, uint64_t us);
/* Adds every sample of src into dst. */
void tl_hist_merge(tl_hist *dst, const tl_hist *src);
/* The p-quantile (0..1) in us: the upper edge of the bucket holding it, never
 * above the largest sample; 0 for an empty histogram. */
double tl_hist_quantile(const tl_hist *h, double p);
double tl_hist_mean(const tl_hist *h);

#endif
