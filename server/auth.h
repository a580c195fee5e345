/*
 * auth.h: who may do what (issue 8). The server's keys (one or more; a key
 * may create sessions and fit materials, and opens every session) and the
 * per-session tokens (an observer token and one controller token per tool).
 * Keys and tokens are compared in constant time and never logged.
 */
#ifndef TS_AUTH_H
#define TS_AUTH_H

#include <stddef.h>

#define TS_TOKEN_HEX 32   /* 128 random bits as lowercase hex */
#define TS_MAX_KEYS 16
#define TS_KEY_MIN 16     /* shortest key accepted from config or environment */
#define TS_KEY_MAX 128

typedef struct ts_keyring {
  int n;
  char key[TS_MAX_KEYS][TS_KEY_MAX + 1];
} ts_keyring;

/* Fills out with TS_TOKEN_HEX hex digits of fresh OS randomness (getrandom)
 * and a NUL. Returns 0 or TS_EIO. */
int ts_auth_random_token(char out[TS_TOKEN_HEX + 1]);

/* Replaces token (a session's controller or observer token) with a fresh
 * one from ts_auth_random_token; on failure token is left as it was.
 * Returns 0 or TS_EIO. */
int ts_auth_renew_token(char token[TS_TOKEN_HEX + 1]);

/* Equal strings? Time depends only on the lengths, not on where they differ. */
int ts_auth_equal(const char *a, const char *b);

/* Index of the key equal to cred, or -1 (cred NULL or empty gives -1). Every
 * key is compared, so the time does not say which one matched. */
int ts_auth_key_index(const ts_keyring *k, const char *cred);

/* Parses "key1,key2" (spaces around commas ignored). Returns 0, or -1 with a
 * message in err (a key shorter than TS_KEY_MIN, too many, bad characters). */
int ts_auth_parse_keys(const char *list, ts_keyring *out, char *err, size_t errcap);

/* The server's keys: `configured` if not empty, else `env` (the value of
 * $TISSUED_SERVER_KEY, may be NULL), else the first line of
 * <data_dir>/server.key, which is created (mode 0600) with a fresh token when
 * missing; *generated is then 1 and the caller prints the key once. `source`
 * gets a description of where the keys came from (never the key). Returns 0,
 * or -1 with a message in err. */
int ts_auth_load_keys(const char *configured, const char *env, const char *data_dir,
                      ts_keyring *out, int *generated, char *source, size_t srccap, char *err,
                      size_t errcap);

/* Is the WebSocket upgrade's Origin allowed? No Origin (not a browser), an
 * Origin whose host:port equals the request's Host (the daemon's own page),
 * or one listed in `allowed` (comma-separated, exact "scheme://host[:port]";
 * "*" allows any). */
int ts_auth_origin_allowed(const char *origin, const char *host, const char *allowed);

/* Checks an allowed-origins list: every entry "*" or an origin as a
 * browser sends it, scheme://host[:port] (no path, not even "/"). An entry
 * such as "sim.example.org" would match no Origin, and the pages it was
 * meant for would be refused. Returns 0, or -1 with a message in err. */
int ts_auth_origins_check(const char *allowed, char *err, size_t errcap);

#endif
