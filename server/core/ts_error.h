/*
 * ts_error.h: the project's single error table.
 *
 * Every failure that crosses a module boundary or the wire is one of these
 * negative codes (libuv style: one macro list generates the names, the
 * messages and the enum). The protocol's Error message carries the code as a
 * positive number (the negation) plus the name, so clients and server agree on
 * one table. Header-only and dependency-free so the core may use it.
 */
#ifndef TS_ERROR_H
#define TS_ERROR_H

#define TS_ERRNO_MAP(XX)                                                       \
  XX(OK, 0, "no error")                                                        \
  XX(NOMEM, 1, "out of memory")                                                \
  XX(INVAL, 2, "invalid argument")                                             \
  XX(RANGE, 3, "value out of range")                                           \
  XX(NAN, 4, "number is NaN or infinite")                                      \
  XX(DECODE, 5, "message does not decode")                                     \
  XX(TOOBIG, 6, "message or object over the size limit")                       \
  XX(VERSION, 7, "unsupported protocol version")                               \
  XX(NOHELLO, 8, "the first message must be Hello")                            \
  XX(NOSESSION, 9, "no such session")                                          \
  XX(NOTJOINED, 10, "not joined to a session")                                 \
  XX(ROLE, 11, "the client's role does not allow this")                        \
  XX(NOTISSUE, 12, "no such tissue")                                           \
  XX(QUAT, 13, "orientation quaternion is not normalised")                     \
  XX(FULL, 14, "limit reached")                                                \
  XX(UNSUPPORTED, 15, "not supported")                                         \
  XX(IO, 16, "input/output error")                                             \
  XX(STORAGE, 17, "storage error")                                             \
  XX(DIVERGED, 18, "the simulation diverged")                                  \
  XX(MESH, 19, "invalid mesh")                                                 \
  XX(TOOL, 20, "no such tool or tool taken")                                   \
  XX(SHUTDOWN, 21, "server is shutting down")                                  \
  XX(PROTOCOL, 22, "protocol violation")                                       \
  XX(INTERNAL, 23, "internal error")                                          \
  XX(AUTH, 24, "not authorised: missing or wrong server key or session token")  \
  XX(EXISTS, 25, "the name is taken")                                         \
  XX(MISMATCH, 26, "the model belongs to another tissue or material")         \
  XX(NOMODEL, 27, "no such model")                                           \
  XX(BUSY, 28, "in use, or holding what the request would delete")

typedef enum ts_errno {
#define TS__ERR_ENUM(name, num, msg) TS_E##name = -(num),
  TS_ERRNO_MAP(TS__ERR_ENUM)
#undef TS__ERR_ENUM
} ts_errno;

/* Name ("TS_EINVAL") and message for a code; unknown codes give "TS_EUNKNOWN". */
static inline const char *ts_err_name(int code) {
  switch (code) {
#define TS__ERR_NAME(name, num, msg)                                           \
  case -(num):                                                                 \
    return "TS_E" #name;
    TS_ERRNO_MAP(TS__ERR_NAME)
#undef TS__ERR_NAME
  default:
    return "TS_EUNKNOWN";
  }
}

static inline const char *ts_strerror(int code) {
  switch (code) {
#define TS__ERR_MSG(name, num, msg)                                            \
  case -(num):                                                                 \
    return msg;
    TS_ERRNO_MAP(TS__ERR_MSG)
#undef TS__ERR_MSG
  default:
    return "unknown error";
  }
}

#endif
