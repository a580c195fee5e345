/*
 * log.c: the daemon's logger (see log.h). The level is the one process-wide
 * setting of the daemon outside its server struct: it is written once at
 * startup, read atomically everywhere after.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static atomic_int ts__log_level = TS_LOG_INFO;

int ts_log_parse_level(const char *s) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

void ts_log_set_level(int level) { atomic_store(&ts__log_level, level); }

int ts_log_enabled(int level) { return level <= atomic_load(&ts__log_level); }

void ts_log(int level, const char *fmt, ...) {
  if (!ts_log_enabled(level)) return;
  static const char *tags[] = {"error", "warn ", "info ", "debug"};
  char line[1024];
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
  n += snprintf(line + n, sizeof line - (size_t)n, ".%03dZ %s ", (int)(tv.tv_usec / 1000),
                tags[level < 0 ? 0 : level > 3 ? 3 : level]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  n += m;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  fwrite(line, 1, (size_t)n, stderr); /* one call: lines stay whole */
}
