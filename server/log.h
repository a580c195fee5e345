/*
 * log.h: leveled logging to stderr for the daemon (never used by the core).
 * One line per event: "2026-11-30T01:02:03.456Z info  tcp: listening on ...".
 * The level is set once at startup; lines from any thread are written whole.
 */
#ifndef TS_LOG_H
#define TS_LOG_H

enum { TS_LOG_ERROR = 0, TS_LOG_WARN = 1, TS_LOG_INFO = 2, TS_LOG_DEBUG = 3 };

/* Parses "error", "warn", "info", "debug"; returns -1 if unknown. */
int ts_log_parse_level(const char *s);
void ts_log_set_level(int level);
int ts_log_enabled(int level);

void ts_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ts_log_error(...) ts_log(TS_LOG_ERROR, __VA_ARGS__)
#define ts_log_warn(...) ts_log(TS_LOG_WARN, __VA_ARGS__)
#define ts_log_info(...) ts_log(TS_LOG_INFO, __VA_ARGS__)
#define ts_log_debug(...)                                                      \
  do {                                                                         \
    if (ts_log_enabled(TS_LOG_DEBUG)) ts_log(TS_LOG_DEBUG, __VA_ARGS__);       \
  } while (0)

#endif
