/*
 * static_files.h: the safe half of serving files over HTTP: turning a request
 * path into a relative path that cannot climb out of its root, resolving it
 * on disk (symlinks included) without leaving the root, reading the file,
 * and naming its Content-Type. No sockets here, so every rule is unit-tested.
 */
#ifndef TS_STATIC_FILES_H
#define TS_STATIC_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "http_cond.h"

/* Percent-decodes the path part of a request target (it must start with
 * '/'), drops empty segments and writes the segments joined by '/' into out
 * ("" for the root). Rejected with TS_EINVAL: a bad %XX escape, NUL, a
 * control character or backslash (raw or encoded), and any segment that
 * starts with '.' ("..", ".", dot files). TS_ETOOBIG when out is too small. */
int ts_static_clean_path(const char *path, size_t len, char *out, size_t cap);

/* Resolves rel (from ts_static_clean_path) under root with realpath(3). The
 * result must lie inside the root's own real path and be a regular file; a
 * directory stands for its index.html. Writes the real path into out.
 * Returns 0, TS_EINVAL when the path leaves the root (a symlink pointing
 * outside, say), TS_EIO when it does not exist or is not a regular file,
 * TS_ETOOBIG when a path does not fit. */
int ts_static_resolve(const char *root, const char *rel, char *out, size_t cap);

/* Reads a whole regular file of at most max bytes with blocking reads (the
 * served files are small: the web client and its vendored modules). *data is
 * malloc()ed (non-NULL even when empty). Returns 0, TS_EIO, TS_ETOOBIG or
 * TS_ENOMEM. */
int ts_static_read(const char *path, size_t max, uint8_t **data, size_t *len);

/* ts_static_read that also gives the version of the file it read (from the
 * open file, so that the tag names the bytes read); tag may be NULL. */
int ts_static_read_tag(const char *path, size_t max, uint8_t **data, size_t *len,
                       ts_file_tag *tag);

/* The version of the regular file at path, without reading it: 0 or
 * TS_EIO. */
int ts_static_tag(const char *path, ts_file_tag *tag);

/* Content-Type for a file name by extension; application/octet-stream for
 * anything unknown. */
const char *ts_static_content_type(const char *path);

#endif
