/*
 * itest_auth.c: access control and limits against a real daemon (issue 8).
 *   - creating a session needs the server key; a wrong key or none is
 *     refused with TS_EAUTH and counted;
 *   - SessionCreated hands out an observer token and one controller token
 *     per tool (128 random bits, distinct); an observer token cannot drive a
 *     tool, a controller token drives only its own tool, one session's token
 *     opens no other session; a token may also come in Hello.credentials;
 *   - with no key configured the daemon generates <data-dir>/server.key
 *     (0600) and prints it on that first start only; the file's key works;
 *   - neither keys nor tokens appear in the daemon's log otherwise;
 *   - WebSocket upgrades from a foreign Origin are refused (403), the
 *     daemon's own Origin and the configured ones are accepted;
 *   - limits: sessions per key, pose rate, mesh vertices: Error codes and
 *     the tissued_limit_refused_total counters.
 */
#include <arpa/inet.h>
#include "ts_check.h"
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../server/core/ts_error.h"
#include "daemon_proc.h"
#include "rawclient.h"
#include "tissueclient.h"

static tc_client *connect_with(const ts_dproc *d, const char *name, const char *cred) {
  char err[256];
  tc_client *c = tc_connect_key("127.0.0.1", d->tcp_port, name, cred, 0, err, sizeof err);
  ck_assert_msg(c != NULL, "connect %s: %s", name, err);
  return c;
}

static int join(tc_client *c, uint32_t sid, int role, uint32_t tool, const char *token,
                uint32_t *got_tool) {
  tc_join_params p = {.session_id = sid, .role = role, .tool_id = tool, .token = token};
  tc_joined j;
  int rc = tc_join_ex(c, &p, &j);
  if (!rc && got_tool) *got_tool = j.tool_id;
  return rc;
}

static int is_hex32(const char *s) {
  if (strlen(s) != 32) return 0;
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdef", s[i])) return 0;
  return 1;
}

/* The whole log of a daemon as a malloc'd string. */
static char *read_log(const ts_dproc *d) {
  FILE *f = fopen(d->log, "r");
  ck_assert_msg(f != NULL, "log %s", d->log);
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static int count_in(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void on_role_error(void *ud, int code, const char *name, const char *message,
                          uint64_t rid) {
  (void)name, (void)message, (void)rid;
  if (code == TS_EROLE) (*(int *)ud)++;
}

START_TEST(test_keys_and_tokens) {
  ts_dproc d;
  char err[512];
  ck_assert_msg(ts_dproc_start(&d, NULL, err, sizeof err) == 0, "%s", err);

  /* no key, a wrong key: no session */
  tc_client *anon = connect_with(&d, "itest-auth-anon", NULL);
  uint32_t sid = 0;
  ck_assert_int_eq(tc_create_session(anon, NULL, &sid, NULL, NULL), TS_EAUTH);
  tc_client *wrong = connect_with(&d, "itest-auth-wrong", "itest-server-key-0000000000");
  ck_assert_int_eq(tc_create_session(wrong, NULL, &sid, NULL, NULL), TS_EAUTH);
  ck_assert_double_ge(ts_dproc_metric(d.http_port, "tissued_auth_refused_total"), 2);

  /* the key creates two sessions and gets their tokens */
  tc_client *admin = connect_with(&d, "itest-auth-admin", TS_DPROC_KEY);
  uint32_t a = 0, b = 0;
  ck_assert_int_eq(tc_create_session(admin, NULL, &a, NULL, NULL), 0);
  tc_tokens ta, tb;
  ck_assert(tc_session_tokens(admin, &ta));
  ck_assert_int_eq(tc_create_session(admin, NULL, &b, NULL, NULL), 0);
  ck_assert(tc_session_tokens(admin, &tb));
  ck_assert_uint_eq(ta.n_controller, 4); /* max-tools defaults to 4 */
  ck_assert(is_hex32(ta.observer));
  const char *all[10];
  int n = 0;
  all[n++] = ta.observer;
  all[n++] = tb.observer;
  for (uint32_t i = 0; i < ta.n_controller; i++) {
    ck_assert_msg(is_hex32(ta.controller[i]), "token '%s'", ta.controller[i]);
    all[n++] = ta.controller[i];
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) ck_assert_str_ne(all[i], all[j]);

  /* observer token: watch yes, drive no; not for the other session */
  tc_client *obs = connect_with(&d, "itest-auth-obs", NULL);
  ck_assert_int_eq(join(obs, a, TC_ROLE_CONTROLLER, 0, ta.observer, NULL), TS_EAUTH);
  ck_assert_int_eq(join(obs, b, TC_ROLE_OBSERVER, 0, ta.observer, NULL), TS_EAUTH);
  ck_assert_int_eq(join(obs, a, TC_ROLE_OBSERVER, 0, NULL, NULL), TS_EAUTH);
  ck_assert_int_eq(join(obs, a, TC_ROLE_OBSERVER, 0, ta.observer, NULL), 0);
  double pos[3] = {0, 0.02, 0}, q[4] = {1, 0, 0, 0};
  int role_errors = 0;
  tc_set_error_cb(obs, on_role_error, &role_errors);
  ck_assert_int_eq(tc_send_pose(obs, 1, pos, q, 1), 0);
  /* the refusal comes back as an Error, before the reply to this ping */
  uint64_t rtt;
  ck_assert_int_eq(tc_ping(obs, &rtt), 0);
  ck_assert_int_eq(role_errors, 1);

  /* controller token of tool 2: that tool only */
  tc_client *ctl = connect_with(&d, "itest-auth-ctl", NULL);
  uint32_t tool = 0;
  ck_assert_int_eq(join(ctl, a, TC_ROLE_CONTROLLER, 1, ta.controller[1], NULL), TS_EAUTH);
  ck_assert_int_eq(join(ctl, b, TC_ROLE_CONTROLLER, 0, ta.controller[1], NULL), TS_EAUTH);
  ck_assert_int_eq(join(ctl, a, TC_ROLE_CONTROLLER, 0, ta.controller[1], &tool), 0);
  ck_assert_uint_eq(tool, 2);
  ck_assert_int_eq(tc_send_pose(ctl, 2, pos, q, 1), 0);
  ck_assert_int_eq(tc_ping(ctl, &rtt), 0);

  /* a token said in Hello serves the join */
  tc_client *hello_tok = connect_with(&d, "itest-auth-hellotoken", tb.controller[0]);
  ck_assert_int_eq(join(hello_tok, b, TC_ROLE_CONTROLLER, 0, NULL, &tool), 0);
  ck_assert_uint_eq(tool, 1);
  ck_assert_int_eq(tc_create_session(hello_tok, NULL, &sid, NULL, NULL), TS_EAUTH);

  /* the key opens every session in every role */
  tc_client *admin2 = connect_with(&d, "itest-auth-admin2", TS_DPROC_KEY);
  ck_assert_int_eq(join(admin2, b, TC_ROLE_CONTROLLER, 3, NULL, &tool), 0);
  ck_assert_uint_eq(tool, 3);

  /* nothing secret in the log */
  char *log = read_log(&d);
  ck_assert_int_eq(count_in(log, TS_DPROC_KEY), 0);
  for (int i = 0; i < n; i++) ck_assert_msg(!strstr(log, all[i]), "token %d is in the log", i);
  free(log);

  tc_close(anon);
  tc_close(wrong);
  tc_close(admin);
  tc_close(admin2);
  tc_close(obs);
  tc_close(ctl);
  tc_close(hello_tok);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

START_TEST(test_generated_key) {
  char dir[] = "/tmp/tissued-auth-XXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char data[300], keyfile[320];
  snprintf(data, sizeof data, "%s/data", dir);
  snprintf(keyfile, sizeof keyfile, "%s/server.key", data);
  const char *args[] = {"--server-key", "", "--data-dir", data, NULL};
  char key[64] = "";
  for (int round = 0; round < 2; round++) {
    ts_dproc d;
    char err[512];
    ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
    FILE *f = fopen(keyfile, "r");
    ck_assert_msg(f != NULL, "no %s", keyfile);
    char line[128] = "";
    ck_assert(fgets(line, sizeof line, f) != NULL);
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    ck_assert_msg(is_hex32(line), "key file holds '%s'", line);
    struct stat st;
    ck_assert_int_eq(stat(keyfile, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    if (round == 0)
      snprintf(key, sizeof key, "%s", line);
    else
      ck_assert_str_eq(key, line); /* kept, not regenerated */
    /* the file's key creates sessions */
    tc_client *c = connect_with(&d, "itest-auth-filekey", key);
    uint32_t sid;
    ck_assert_int_eq(tc_create_session(c, NULL, &sid, NULL, NULL), 0);
    tc_close(c);
    char *log = read_log(&d);
    /* printed on the first start (the key line and the URL with #key=),
     * never again */
    ck_assert_int_eq(count_in(log, key), round == 0 ? 2 : 0);
    free(log);
    char why[256] = "";
    ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Sends a WebSocket upgrade with this Origin (NULL: none); the status code. */
static int upgrade_status(int port, const char *origin) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  char req[512], o[200] = "";
  if (origin) snprintf(o, sizeof o, "Origin: %s\r\n", origin);
  int n = snprintf(req, sizeof req,
                   "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s\r\n",
                   port, o);
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  char resp[256] = "";
  ssize_t got = read(fd, resp, sizeof resp - 1);
  close(fd);
  ck_assert_int_gt(got, 12);
  return atoi(resp + 9); /* "HTTP/1.1 101" */
}

START_TEST(test_origin) {
  ts_dproc d;
  char err[512];
  const char *args[] = {"--allowed-origins", "https://sim.example.org, http://room2:8080", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  char own[64];
  snprintf(own, sizeof own, "http://127.0.0.1:%d", d.http_port);
  ck_assert_int_eq(upgrade_status(d.http_port, NULL), 101);
  ck_assert_int_eq(upgrade_status(d.http_port, own), 101);
  ck_assert_int_eq(upgrade_status(d.http_port, "https://sim.example.org"), 101);
  ck_assert_int_eq(upgrade_status(d.http_port, "http://room2:8080"), 101);
  ck_assert_int_eq(upgrade_status(d.http_port, "https://evil.example.com"), 403);
  ck_assert_int_eq(upgrade_status(d.http_port, "http://127.0.0.1:1"), 403);
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_origin_refused_total"), 2);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct errs {
  int full;
} errs;

static void on_error(void *ud, int code, const char *name, const char *message, uint64_t rid) {
  (void)name, (void)message, (void)rid;
  if (code == TS_EFULL) ((errs *)ud)->full++;
}

START_TEST(test_limits) {
  ts_dproc d;
  char err[512];
  const char *args[] = {"--max-sessions-per-key", "1", "--max-pose-rate", "50",
                        "--max-mesh-vertices", "3", "--max-message", "4096", NULL};
  ck_assert_msg(ts_dproc_start(&d, args, err, sizeof err) == 0, "%s", err);
  tc_client *admin = connect_with(&d, "itest-auth-limits", TS_DPROC_KEY);
  uint32_t a, b;
  ck_assert_int_eq(tc_create_session(admin, NULL, &a, NULL, NULL), 0);
  ck_assert_int_eq(tc_create_session(admin, NULL, &b, NULL, NULL), TS_EFULL);
  ck_assert_double_eq(
      ts_dproc_metric(d.http_port, "tissued_limit_refused_total{limit=\"max-sessions-per-key\"}"), 1);

  /* four vertices against a limit of three */
  static const char tet[] = "v 0 0 0\nv 0.05 0 0\nv 0 0 0.05\nv 0 0.05 0\n"
                            "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";
  ck_assert_int_eq(tc_end_session(admin, a), 0); /* the key ends it unjoined; its place frees */
  uint32_t m;
  int rc = tc_create_session_mesh(admin, TC_MESH_OBJ, tet, sizeof tet - 1, 1, NULL, 0, "tet", &m,
                                  NULL, NULL);
  ck_assert_msg(rc == TS_ETOOBIG, "mesh over max-mesh-vertices: %d %s", rc, tc_last_error(admin));
  ck_assert_double_eq(ts_dproc_metric(d.http_port, "tissued_limit_refused_total{limit=\"max-mesh\"}"),
                      1);

  /* 200 poses at once against 50 a second: dropped, one Error, counted */
  ck_assert_int_eq(tc_create_session(admin, NULL, &b, NULL, NULL), 0);
  tc_client *ctl = connect_with(&d, "itest-auth-poses", TS_DPROC_KEY);
  errs e = {0};
  tc_set_error_cb(ctl, on_error, &e);
  ck_assert_int_eq(join(ctl, b, TC_ROLE_CONTROLLER, 0, NULL, NULL), 0);
  double pos[3] = {0, 0.02, 0}, q[4] = {1, 0, 0, 0};
  long long t0 = now_ms();
  for (int i = 0; i < 200; i++) ck_assert_int_eq(tc_send_pose(ctl, 0, pos, q, 1), 0);
  long long deadline = now_ms() + 5000;
  while (!e.full && now_ms() < deadline) ck_assert_int_ge(tc_poll(ctl, 20), 0);
  ck_assert_int_ge(e.full, 1);
  /* the first Error comes with the 51st pose: the rest may still be unread.
   * A Ping is answered after every message before it on the connection, so
   * after the Pong all 200 are counted (a loaded TSan run once read the
   * metric before) */
  uint64_t rtt;
  ck_assert_int_eq(tc_ping(ctl, &rtt), 0);
  double dropped = ts_dproc_metric(d.http_port, "tissued_poses_dropped_total");
  /* at most 50 per started second were accepted */
  long long secs = (now_ms() - t0) / 1000 + 1;
  ck_assert_msg(dropped >= 200 - 50 * secs, "dropped %g of 200 in %lld s", dropped, secs);
  ck_assert_double_ge(
      ts_dproc_metric(d.http_port, "tissued_limit_refused_total{limit=\"max-pose-rate\"}"), 1);
  tc_close(ctl);
  tc_close(admin);

  /* a message over max-message, on each transport: refused, counted */
  static char name[8000];
  memset(name, 'x', sizeof name - 1);
  for (int ws = 0; ws < 2; ws++) {
    rc_conn raw;
    ck_assert_int_eq(ws ? rc_ws(&raw, d.http_port) : rc_tcp(&raw, d.tcp_port), 0);
    Tissued__V1__Hello h = TISSUED__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = name;
    Tissued__V1__Envelope env = TISSUED__V1__ENVELOPE__INIT;
    env.body_case = TISSUED__V1__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    ck_assert_int_eq(rc_send(&raw, &env), 0);
    ck_assert_msg(rc_wait_closed(&raw, 10000, 0, NULL), "%s: not closed", ws ? "ws" : "tcp");
    if (ws) ck_assert_int_eq(raw.close_code, 1009);
    rc_close(&raw);
  }
  ck_assert_double_eq(
      ts_dproc_metric(d.http_port, "tissued_limit_refused_total{limit=\"max-message\"}"), 2);
  char why[256] = "";
  ck_assert_msg(ts_dproc_stop(&d, 10000, why, sizeof why) == 0, "stop: %s", why);
}
END_TEST

int main(void) {
  Suite *s = suite_create("auth");
  TCase *tc = tcase_create("tcp");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_keys_and_tokens);
  tcase_add_test(tc, test_generated_key);
  tcase_add_test(tc, test_origin);
  tcase_add_test(tc, test_limits);
  suite_add_tcase(s, tc);
  return ts_dproc_run_suite(s);
}
