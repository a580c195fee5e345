/*
 * test_tl_link.c: tissueload's WebSocket frame reader (client-c/tl_link.c)
 * on frames a server might send, without a daemon: tl_link.c is compiled in
 * and a link is set up over a socketpair as after its handshake. Cases found
 * by tests/fuzz/fuzz_tllink.c live here as regression tests.
 */
#include "ts_check.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../client-c/tl_link.c"

typedef struct got {
  int n;
  size_t len[4];
  char text[4][16];
  int null_ptr;
} got;

static int on_msg(void *ud, const uint8_t *msg, size_t len) {
  got *g = ud;
  if (!msg) g->null_ptr = 1;
  if (g->n < 4) {
    g->len[g->n] = len;
    memcpy(g->text[g->n], msg, len < 15 ? len : 15);
  }
  g->n++;
  return 0;
}

/* A WebSocket link over sv[0], as tl_link_open leaves it after the
 * handshake; the test writes the server's frames to sv[1]. */
static tl_link *ws_link(int sv[2]) {
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  tl_link *l = calloc(1, sizeof *l);
  ck_assert_ptr_nonnull(l);
  l->rng = 1;
  l->transport = TL_WS;
  ts_framer_init(&l->framer, TL_MAX_MESSAGE);
  l->fd = sv[0];
  return l;
}

/* A binary message in fragments whose first is empty, and a message of
 * empty fragments only: the reader did pointer arithmetic on its NULL
 * message buffer (undefined behaviour; the ASan+UBSan build stops). */
START_TEST(test_empty_first_fragment) {
  int sv[2];
  tl_link *l = ws_link(sv);
  static const uint8_t frames[] = {
      0x02, 0x00,            /* binary, not final, empty */
      0x00, 0x02, 'a', 'b',  /* continuation, not final */
      0x80, 0x01, 'c',       /* continuation, final: "abc" */
      0x02, 0x00, 0x80, 0x00 /* an empty message in two empty fragments */
  };
  ck_assert_int_eq(send(sv[1], frames, sizeof frames, 0), (ssize_t)sizeof frames);
  got g = {0};
  ck_assert_int_eq(tl_link_read(l, 0, on_msg, &g), 2);
  ck_assert_int_eq(g.n, 2);
  ck_assert_uint_eq(g.len[0], 3);
  ck_assert_str_eq(g.text[0], "abc");
  ck_assert_uint_eq(g.len[1], 0);
  ck_assert_int_eq(g.null_ptr, 0);
  tl_link_close(l);
  close(sv[1]);
}
END_TEST

/* A continuation with no message begun and a control frame over 125 bytes
 * are protocol errors (RFC 6455 5.4, 5.5); the link is then broken. */
START_TEST(test_bad_frames) {
  static const uint8_t cont[] = {0x80, 0x01, 'x'};
  uint8_t ping[2 + 2 + 126] = {0x89, 126, 0, 126};
  const struct {
    const uint8_t *p;
    size_t n;
  } cases[] = {{cont, sizeof cont}, {ping, sizeof ping}};
  for (size_t i = 0; i < 2; i++) {
    int sv[2];
    tl_link *l = ws_link(sv);
    ck_assert_int_eq(send(sv[1], cases[i].p, cases[i].n, 0), (ssize_t)cases[i].n);
    got g = {0};
    ck_assert_int_eq(tl_link_read(l, 0, on_msg, &g), TS_EPROTOCOL);
    ck_assert_int_eq(g.n, 0);
    ck_assert_int_eq(tl_link_read(l, 0, on_msg, &g), TS_EIO);
    tl_link_close(l);
    close(sv[1]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("tl_link");
  TCase *tc = tcase_create("tl_link");
  tcase_add_test(tc, test_empty_first_fragment);
  tcase_add_test(tc, test_bad_frames);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
