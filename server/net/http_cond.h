/*
 * http_cond.h: the request headers that decide how a static file is sent
 * back: Accept-Encoding (may the body be gzip-compressed?) and
 * If-None-Match (does the browser already hold this version?), and the
 * entity tag a file version is named by. Pure string work, no sockets, so
 * that every rule is unit-tested (tests/unit/test_net.c) and fuzzed through
 * the HTTP parser (tests/fuzz/fuzz_wshandshake.c).
 */
#ifndef TS_HTTP_COND_H
#define TS_HTTP_COND_H

#include <stddef.h>
#include <stdint.h>

/* A version of a file: what its entity tag is made of (device, inode, size
 * and modification time, as nginx and Apache make theirs), so that any
 * change on disk, a file replaced by a rename included, makes a new tag. */
typedef struct ts_file_tag {
  uint64_t dev, ino, size, mtime_ns;
} ts_file_tag;

/* Longest entity tag ts_http_etag writes, quotes and NUL included. */
#define TS_HTTP_ETAG_MAX 96

/* Writes the quoted entity tag of version t into out (at least
 * TS_HTTP_ETAG_MAX bytes): "<hex>-<hex>-<hex>-<hex>" for the file's own
 * bytes, with "-gz" before the closing quote for its gzip encoding (each
 * representation has its own tag, RFC 9110 8.8.3). */
void ts_http_etag(const ts_file_tag *t, int gzip, char *out);

/* 1 when an Accept-Encoding value (all its header lines joined by ", ")
 * accepts gzip: a "gzip" or "x-gzip" element, or "*" with no gzip element,
 * whose q is not zero (RFC 9110 12.5.3; codings compared without case). An
 * element with a malformed q counts as refused. NULL (no header): 0, since
 * such a client may not decode it. */
int ts_http_accepts_gzip(const char *value);

/* 1 when an If-None-Match value lists tag (quoted, as ts_http_etag writes
 * it) by the weak comparison GET uses (a W/ prefix ignored), or is "*".
 * Malformed elements match nothing. NULL: 0. */
int ts_http_etag_listed(const char *value, const char *tag);

#endif
