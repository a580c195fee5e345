/*
 * http_gzip.h: the HTTP listener's cache of gzip-compressed static files.
 *
 * The page and its modules are some 2.5 MB of JavaScript (three.js alone
 * 2.1 MB), about 0.6 MB once gzip-compressed; a classroom opening the page
 * at once, or a trainee behind a slow link, gets them that much sooner. A
 * file is compressed once per version (ts_file_tag), on libuv's thread pool
 * at a lower priority, never on the loop thread, whose stalls every client
 * would feel: the request that finds no compressed copy gets the file's own
 * bytes at once and starts the compression, later ones get the copy. The
 * cache is bounded (entries and bytes); past the bound files are sent
 * uncompressed. Loop thread only, but for the compression itself.
 */
#ifndef TS_HTTP_GZIP_H
#define TS_HTTP_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "http_cond.h"

typedef struct ts_http_gz ts_http_gz;

/* Files below this size are sent as they are: the header and the round
 * trip cost more than compression saves. */
#define TS_HTTP_GZ_MIN_BYTES 1024

/* A cache of at most max_entries files and max_bytes compressed bytes;
 * NULL when out of memory (the listener then sends every file as it is). */
ts_http_gz *ts_http_gz_new(uv_loop_t *loop, size_t max_entries, size_t max_bytes);

/* The listener is done with it: freed now, or when the last compression
 * under way ends (its result is dropped). */
void ts_http_gz_release(ts_http_gz *z);

/* The gzip encoding of the file at path (a resolved real path) in version
 * *tag: 1 with *gz and *len set (valid until the loop next runs a cache
 * callback: copy it before returning to the loop); 0 when there is none
 * yet, after starting its compression unless one is under way, the cache
 * is full, or this version compressed too poorly to be worth sending (under
 * a tenth smaller) or could not be compressed (it changed under the
 * compression, which a request for its new version tries again; no memory):
 * each version is tried once. */
int ts_http_gz_get(ts_http_gz *z, const char *path, const ts_file_tag *tag, const uint8_t **gz,
                   size_t *len);

/* 1 for the content types worth compressing (text, JavaScript, JSON, SVG,
 * WebAssembly); images already compressed are not. */
int ts_http_gz_type_ok(const char *content_type);

#endif
