/*
 * ts_ms_scratch.c: one growing block of scratch memory that the passes of a
 * mass-spring preparation borrow one after another (the bounds' spring
 * records, the power iterations'), so that a preparation touches fresh
 * pages for it once instead of once per pass. See ts__scratch in
 * ts_ms_internal.h.
 */
#include <stdlib.h>

#include "ts_ms_internal.h"

void *ts__scratch_get(ts__scratch *s, size_t bytes) {
  if (!bytes) bytes = 1;
  if (s->cap >= bytes) return s->p;
  free(s->p); /* its contents are not kept: no copy */
  s->p = malloc(bytes);
  s->cap = s->p ? bytes : 0;
  return s->p;
}

void ts__scratch_free(ts__scratch *s) {
  free(s->p);
  s->p = NULL;
  s->cap = 0;
}
