/*
 * http_gzip.c: the listener's cache of gzip-compressed static files (see
 * http_gzip.h). One entry per file path, holding the version it was
 * compressed from; a request for another version starts a new compression
 * and is answered uncompressed meanwhile. The compressions run as libuv
 * work requests: the pool thread reads the file itself, checks that it is
 * still the version asked for, and compresses it with zlib (level 6, the
 * gzip wrapper); the result is taken into the cache on the loop thread,
 * which alone touches the entries.
 */
#include "http_gzip.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "../core/ts_error.h"
#include "../thread_self.h"
#include "net_internal.h"
#include "static_files.h"

enum { E_PENDING, E_READY, E_POOR, E_FAILED };

typedef struct entry {
  char *path;
  ts_file_tag tag;
  uint8_t *gz; /* E_READY */
  size_t len;
  int state;
} entry;

struct ts_http_gz {
  uv_loop_t *loop;
  size_t max_entries, max_bytes;
  entry *e;
  size_t n, bytes;
  unsigned in_flight;
  int released;
};

typedef struct job {
  uv_work_t req;
  ts_http_gz *z;
  char *path;
  ts_file_tag tag;
  uint8_t *gz;
  size_t len;
  int state; /* what the compression came to */
} job;

ts_http_gz *ts_http_gz_new(uv_loop_t *loop, size_t max_entries, size_t max_bytes) {
  ts_http_gz *z = calloc(1, sizeof *z);
  if (!z) return NULL;
  z->e = calloc(max_entries ? max_entries : 1, sizeof *z->e);
  if (!z->e) {
    free(z);
    return NULL;
  }
  z->loop = loop;
  z->max_entries = max_entries;
  z->max_bytes = max_bytes;
  return z;
}

static void free_entries(ts_http_gz *z) {
  for (size_t i = 0; i < z->n; i++) {
    free(z->e[i].path);
    free(z->e[i].gz);
  }
  z->n = 0;
  z->bytes = 0;
}

void ts_http_gz_release(ts_http_gz *z) {
  if (!z) return;
  free_entries(z);
  if (z->in_flight) {
    z->released = 1; /* the last work request's callback frees it */
    return;
  }
  free(z->e);
  free(z);
}

int ts_http_gz_type_ok(const char *ct) {
  if (!ct) return 0;
  return strncasecmp(ct, "text/", 5) == 0 || strncasecmp(ct, "application/json", 16) == 0 ||
         strncasecmp(ct, "application/wasm", 16) == 0 || strncasecmp(ct, "image/svg+xml", 13) == 0;
}

/* ---- on the pool thread -------------------------------------------------- */

static void compress_file(uv_work_t *req) {
  job *j = req->data;
  /* it yields to the physics threads, as the session builder does (the
   * daemon gives libuv's pool no other work, so its threads may take this
   * name and niceness for good) */
  ts_thread_self_setup("tissued-gzip", 10);
  j->state = E_FAILED;
  uint8_t *data = NULL;
  size_t len = 0;
  ts_file_tag now;
  if (ts_static_read_tag(j->path, TS__HTTP_FILE_MAX, &data, &len, &now) != 0) return;
  if (memcmp(&now, &j->tag, sizeof now) != 0) { /* changed since the request */
    free(data);
    return;
  }
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  /* 15 + 16: a 32 kB window inside a gzip header and trailer */
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(data);
    return;
  }
  uLong bound = deflateBound(&zs, (uLong)len);
  uint8_t *out = malloc(bound ? bound : 1);
  if (out && len <= (uInt)-1 && bound <= (uInt)-1) {
    zs.next_in = data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)bound;
    if (deflate(&zs, Z_FINISH) == Z_STREAM_END) {
      j->len = (size_t)zs.total_out;
      /* under a tenth smaller is not worth a client's decoding */
      j->state = j->len * 10 <= len * 9 ? E_READY : E_POOR;
    }
  }
  deflateEnd(&zs);
  free(data);
  if (j->state == E_READY) {
    j->gz = out;
  } else {
    free(out);
  }
}

/* ---- on the loop thread --------------------------------------------------- */

static entry *find(ts_http_gz *z, const char *path) {
  for (size_t i = 0; i < z->n; i++)
    if (strcmp(z->e[i].path, path) == 0) return &z->e[i];
  return NULL;
}

static void compressed(uv_work_t *req, int status) {
  job *j = req->data;
  ts_http_gz *z = j->z;
  z->in_flight--;
  if (status != 0) j->state = E_FAILED; /* cancelled (never, here) */
  entry *e = z->released ? NULL : find(z, j->path);
  if (e && e->state == E_PENDING && memcmp(&e->tag, &j->tag, sizeof e->tag) == 0) {
    e->state = j->state;
    if (j->state == E_READY) {
      if (z->bytes + j->len <= z->max_bytes) {
        e->gz = j->gz;
        e->len = j->len;
        z->bytes += j->len;
        j->gz = NULL;
      } else {
        e->state = E_POOR; /* over the byte bound: sent as it is */
      }
    }
  }
  free(j->gz);
  free(j->path);
  free(j);
  if (z->released && z->in_flight == 0) {
    free(z->e);
    free(z);
  }
}

static void start(ts_http_gz *z, entry *e) {
  job *j = calloc(1, sizeof *j);
  char *path = j ? strdup(e->path) : NULL;
  e->state = E_FAILED;
  if (!path) {
    free(j);
    return;
  }
  j->z = z;
  j->path = path;
  j->tag = e->tag;
  j->req.data = j;
  if (uv_queue_work(z->loop, &j->req, compress_file, compressed) != 0) {
    free(path);
    free(j);
    return;
  }
  e->state = E_PENDING;
  z->in_flight++;
}

int ts_http_gz_get(ts_http_gz *z, const char *path, const ts_file_tag *tag, const uint8_t **gz,
                   size_t *len) {
  if (!z || z->released || !path || !tag) return 0;
  entry *e = find(z, path);
  if (e && memcmp(&e->tag, tag, sizeof *tag) == 0) {
    if (e->state == E_READY) {
      *gz = e->gz;
      *len = e->len;
      return 1;
    }
    return 0; /* under way, not worth it, or failed: sent as it is */
  } else if (e) {
    if (e->state == E_PENDING) return 0; /* the older version's, under way */
    free(e->gz);
    z->bytes -= e->state == E_READY ? e->len : 0;
    e->gz = NULL;
    e->len = 0;
    e->tag = *tag;
  } else {
    if (z->n >= z->max_entries) return 0;
    char *p = strdup(path);
    if (!p) return 0;
    e = &z->e[z->n++];
    memset(e, 0, sizeof *e);
    e->path = p;
    e->tag = *tag;
  }
  start(z, e);
  return 0;
}
