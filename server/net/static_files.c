/*
 * static_files.c: request path cleaning, root-confined resolution, whole-file
 * reads and Content-Type names for the HTTP listener (see static_files.h).
 *
 * Defence in depth: the textual check (no dot segments after decoding) stops
 * "..", and the realpath prefix check stops anything the file system itself
 * redirects (symlinks) from escaping the root.
 */
#include "static_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/ts_error.h"

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Ends the segment that started at out[seg]; a dot-led segment is refused,
 * an empty one is dropped. Returns the new output length or -1. */
static long end_segment(char *out, size_t seg, size_t o) {
  if (o == seg) { /* empty: "//" or a trailing '/' */
    return seg > 0 ? (long)seg - 1 : 0; /* drop the separator we wrote */
  }
  if (out[seg] == '.') return -1;
  return (long)o;
}

int ts_static_clean_path(const char *path, size_t len, char *out, size_t cap) {
  if (!path || !out || cap == 0) return TS_EINVAL;
  if (len == 0 || path[0] != '/') return TS_EINVAL;
  size_t o = 0;   /* output length */
  size_t seg = 0; /* where the current segment starts in out */
  for (size_t i = 1; i < len; i++) {
    unsigned char ch = (unsigned char)path[i];
    if (ch == '%') {
      if (i + 2 >= len) return TS_EINVAL;
      int hi = hexval(path[i + 1]), lo = hexval(path[i + 2]);
      if (hi < 0 || lo < 0) return TS_EINVAL;
      ch = (unsigned char)(hi * 16 + lo);
      i += 2;
    }
    if (ch == 0 || ch < 0x20 || ch == 0x7f || ch == '\\') return TS_EINVAL;
    if (ch == '/') {
      long r = end_segment(out, seg, o);
      if (r < 0) return TS_EINVAL;
      o = (size_t)r;
      if (o > 0) {
        if (o + 1 >= cap) return TS_ETOOBIG;
        out[o++] = '/';
      }
      seg = o;
      continue;
    }
    if (o + 1 >= cap) return TS_ETOOBIG;
    out[o++] = (char)ch;
  }
  long r = end_segment(out, seg, o);
  if (r < 0) return TS_EINVAL;
  o = (size_t)r;
  out[o] = '\0';
  return 0;
}

/* 1 when p is root itself or lies below it (root has no trailing '/'). */
static int inside(const char *root, const char *p) {
  size_t n = strlen(root);
  if (strncmp(root, p, n) != 0) return 0;
  if (n == 1 && root[0] == '/') return 1; /* root is "/" */
  return p[n] == '\0' || p[n] == '/';
}

int ts_static_resolve(const char *root, const char *rel, char *out, size_t cap) {
  if (!root || !rel || !out) return TS_EINVAL;
  char root_real[PATH_MAX], want[PATH_MAX], real[PATH_MAX];
  if (!realpath(root, root_real)) return TS_EIO;
  int n = snprintf(want, sizeof want, "%s/%s", root_real, rel);
  if (n < 0 || (size_t)n >= sizeof want) return TS_ETOOBIG;
  if (!realpath(want, real)) return TS_EIO;
  if (!inside(root_real, real)) return TS_EINVAL;
  struct stat st;
  if (stat(real, &st) != 0) return TS_EIO;
  if (S_ISDIR(st.st_mode)) {
    n = snprintf(want, sizeof want, "%s/index.html", real);
    if (n < 0 || (size_t)n >= sizeof want) return TS_ETOOBIG;
    if (!realpath(want, real)) return TS_EIO;
    if (!inside(root_real, real)) return TS_EINVAL;
    if (stat(real, &st) != 0) return TS_EIO;
  }
  if (!S_ISREG(st.st_mode)) return TS_EIO;
  size_t rl = strlen(real);
  if (rl + 1 > cap) return TS_ETOOBIG;
  memcpy(out, real, rl + 1);
  return 0;
}

static void tag_of(const struct stat *st, ts_file_tag *tag) {
  tag->dev = (uint64_t)st->st_dev;
  tag->ino = (uint64_t)st->st_ino;
  tag->size = (uint64_t)st->st_size;
  tag->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

int ts_static_tag(const char *path, ts_file_tag *tag) {
  struct stat st;
  if (!path || !tag || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return TS_EIO;
  tag_of(&st, tag);
  return 0;
}

int ts_static_read(const char *path, size_t max, uint8_t **data, size_t *len) {
  return ts_static_read_tag(path, max, data, len, NULL);
}

int ts_static_read_tag(const char *path, size_t max, uint8_t **data, size_t *len,
                       ts_file_tag *tag) {
  if (!path || !data || !len) return TS_EINVAL;
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return TS_EIO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return TS_EIO;
  }
  if ((uint64_t)st.st_size > (uint64_t)max) {
    close(fd);
    return TS_ETOOBIG;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return TS_ENOMEM;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* error, or the file shrank meanwhile */
    got += (size_t)r;
  }
  close(fd);
  if (got != size) {
    free(buf);
    return TS_EIO;
  }
  *data = buf;
  *len = size;
  if (tag) tag_of(&st, tag);
  return 0;
}

const char *ts_static_content_type(const char *path) {
  static const struct {
    const char *ext;
    const char *type;
  } types[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".proto", "text/plain; charset=utf-8"},
      {".txt", "text/plain; charset=utf-8"},
      {".png", "image/png"},
      {".svg", "image/svg+xml"},
      {".wasm", "application/wasm"},
  };
  if (path) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');
    if (dot) {
      for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcasecmp(dot, types[i].ext) == 0) return types[i].type;
    }
  }
  return "application/octet-stream";
}
