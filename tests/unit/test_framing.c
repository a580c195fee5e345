/*
 * test_framing.c: unit tests of the TCP framing (proto/ts_framing.[ch]): a
 * stream of length-prefixed messages must reassemble to the same messages
 * however the bytes are split across reads (at every byte boundary, byte by
 * byte, in random chunks, all at once), a declared length over the limit is
 * refused with TS_ETOOBIG before any body arrives, and a callback's non-zero
 * return stops the feed.
 */
#include "ts_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ts_error.h"
#include "ts_framing.h"

/* The messages the callback received, concatenated, with their lengths. */
typedef struct sink {
  uint8_t *bytes;
  size_t len, cap;
  size_t msg_len[64];
  int n;
  int stop_after; /* return 7 from the callback after this many; 0: never */
} sink;

static int collect(void *ud, const uint8_t *msg, size_t len) {
  sink *s = ud;
  ck_assert_int_lt(s->n, 64);
  if (s->len + len > s->cap) {
    size_t cap = s->cap ? s->cap : 1024;
    while (cap < s->len + len) cap *= 2;
    s->bytes = realloc(s->bytes, cap);
    ck_assert_ptr_nonnull(s->bytes);
    s->cap = cap;
  }
  if (len) memcpy(s->bytes + s->len, msg, len);
  s->len += len;
  s->msg_len[s->n++] = len;
  if (s->stop_after && s->n == s->stop_after) return 7;
  return 0;
}

static void sink_free(sink *s) { free(s->bytes); }

/* The test streams: messages of these lengths, body byte j of message m is
 * (m * 31 + j * 7) & 0xFF. Both include an empty message and messages larger
 * than the framer's initial buffer; the short one is split at every byte. */
static const size_t long_lens[] = {5, 0, 1, 300, 4, 1000, 2, 70000, 3};
static const size_t short_lens[] = {5, 0, 1, 300, 4, 700, 2, 0, 3};
enum { NMSG = sizeof long_lens / sizeof long_lens[0] };
_Static_assert(sizeof short_lens == sizeof long_lens, "same message count");
static const size_t *lens = long_lens;

static uint8_t body_byte(int m, size_t j) { return (uint8_t)((size_t)m * 31 + j * 7); }

static uint8_t *make_stream(size_t *total) {
  size_t n = 0;
  for (int m = 0; m < NMSG; m++) n += 4 + lens[m];
  uint8_t *s = malloc(n), *p = s;
  ck_assert_ptr_nonnull(s);
  for (int m = 0; m < NMSG; m++) {
    ts_frame_header(p, (uint32_t)lens[m]);
    p += 4;
    for (size_t j = 0; j < lens[m]; j++) *p++ = body_byte(m, j);
  }
  *total = n;
  return s;
}

static void check_all_received(const sink *s) {
  ck_assert_int_eq(s->n, NMSG);
  size_t off = 0;
  for (int m = 0; m < NMSG; m++) {
    ck_assert_uint_eq(s->msg_len[m], lens[m]);
    for (size_t j = 0; j < lens[m]; j++)
      if (s->bytes[off + j] != body_byte(m, j))
        ck_abort_msg("message %d byte %zu differs", m, j);
    off += lens[m];
  }
  ck_assert_uint_eq(off, s->len);
}

/* Feeds [p, p+n) from an exactly-sized copy so that the sanitizer catches a
 * read past the end of a chunk. */
static int feed_copy(ts_framer *f, const uint8_t *p, size_t n, sink *s) {
  uint8_t *c = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(c);
  if (n) memcpy(c, p, n);
  int rc = ts_framer_feed(f, c, n, collect, s);
  free(c);
  return rc;
}

START_TEST(header_bytes) {
  uint8_t h[4];
  ts_frame_header(h, 0x01020304u);
  ck_assert_uint_eq(h[0], 1);
  ck_assert_uint_eq(h[1], 2);
  ck_assert_uint_eq(h[2], 3);
  ck_assert_uint_eq(h[3], 4);
}
END_TEST

START_TEST(whole_stream_in_one_feed) {
  size_t total;
  uint8_t *stream = make_stream(&total);
  ts_framer f;
  ts_framer_init(&f, 1 << 20);
  sink s = {0};
  ck_assert_int_eq(feed_copy(&f, stream, total, &s), 0);
  check_all_received(&s);
  ck_assert_uint_eq(ts_framer_pending(&f), 0);
  ts_framer_free(&f);
  sink_free(&s);
  free(stream);
}
END_TEST

START_TEST(split_at_every_byte) {
  size_t total;
  lens = short_lens;
  uint8_t *stream = make_stream(&total);
  for (size_t cut = 0; cut <= total; cut++) {
    ts_framer f;
    ts_framer_init(&f, 1 << 20);
    sink s = {0};
    ck_assert_int_eq(feed_copy(&f, stream, cut, &s), 0);
    ck_assert_int_eq(feed_copy(&f, stream + cut, total - cut, &s), 0);
    check_all_received(&s);
    ck_assert_uint_eq(ts_framer_pending(&f), 0);
    ts_framer_free(&f);
    sink_free(&s);
  }
  free(stream);
  lens = long_lens;
}
END_TEST

START_TEST(byte_by_byte) {
  size_t total;
  uint8_t *stream = make_stream(&total);
  ts_framer f;
  ts_framer_init(&f, 1 << 20);
  sink s = {0};
  size_t before_last = total - (4 + lens[NMSG - 1]);
  for (size_t i = 0; i < total; i++) {
    ck_assert_int_eq(ts_framer_feed(&f, stream + i, 1, collect, &s), 0);
    /* inside the last message the framer holds exactly what it was given */
    if (i + 1 > before_last && i + 1 < total)
      ck_assert_uint_eq(ts_framer_pending(&f), i + 1 - before_last);
  }
  check_all_received(&s);
  ck_assert_uint_eq(ts_framer_pending(&f), 0);
  ts_framer_free(&f);
  sink_free(&s);
  free(stream);
}
END_TEST

START_TEST(random_chunks) {
  size_t total;
  uint8_t *stream = make_stream(&total);
  uint64_t r = 0x1234567;
  for (int round = 0; round < 40; round++) {
    ts_framer f;
    ts_framer_init(&f, 1 << 20);
    sink s = {0};
    size_t off = 0;
    while (off < total) {
      r = r * 6364136223846793005ULL + 1442695040888963407ULL;
      size_t chunk = (size_t)(r >> 33) % (round % 2 ? 17 : 5000);
      if (chunk > total - off) chunk = total - off;
      ck_assert_int_eq(feed_copy(&f, stream + off, chunk, &s), 0);
      off += chunk;
    }
    check_all_received(&s);
    ts_framer_free(&f);
    sink_free(&s);
  }
  free(stream);
}
END_TEST

START_TEST(oversized_is_refused) {
  enum { MAX = 1000 };
  uint8_t msg[4 + MAX + 1];
  memset(msg, 0xAB, sizeof msg);

  /* exactly the limit is accepted */
  ts_framer f;
  ts_framer_init(&f, MAX);
  sink s = {0};
  ts_frame_header(msg, MAX);
  ck_assert_int_eq(feed_copy(&f, msg, 4 + MAX, &s), 0);
  ck_assert_int_eq(s.n, 1);
  ck_assert_uint_eq(s.msg_len[0], MAX);
  ts_framer_free(&f);
  sink_free(&s);

  /* one more is refused as soon as the header is complete: whole header in
   * one feed, before any body byte */
  ts_framer_init(&f, MAX);
  memset(&s, 0, sizeof s);
  ts_frame_header(msg, MAX + 1);
  ck_assert_int_eq(feed_copy(&f, msg, 4, &s), TS_ETOOBIG);
  ck_assert_int_eq(s.n, 0);
  ts_framer_free(&f);

  /* header split across feeds */
  for (size_t cut = 1; cut < 4; cut++) {
    ts_framer_init(&f, MAX);
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(feed_copy(&f, msg, cut, &s), 0);
    ck_assert_int_eq(feed_copy(&f, msg + cut, 4 - cut, &s), TS_ETOOBIG);
    ck_assert_int_eq(s.n, 0);
    ts_framer_free(&f);
  }

  /* a huge declared length after a good message: the good one is delivered,
   * then the feed fails without buffering the rest */
  uint8_t two[4 + 3 + 4 + 8];
  ts_frame_header(two, 3);
  memcpy(two + 4, "abc", 3);
  ts_frame_header(two + 7, 0xFFFFFFFFu);
  memset(two + 11, 0, 8);
  ts_framer_init(&f, MAX);
  memset(&s, 0, sizeof s);
  ck_assert_int_eq(feed_copy(&f, two, sizeof two, &s), TS_ETOOBIG);
  ck_assert_int_eq(s.n, 1);
  ck_assert_uint_eq(s.msg_len[0], 3);
  ck_assert_mem_eq(s.bytes, "abc", 3);
  ck_assert_uint_le(ts_framer_pending(&f), 4);
  ts_framer_free(&f);
  sink_free(&s);
}
END_TEST

START_TEST(callback_stops_feed) {
  size_t total;
  uint8_t *stream = make_stream(&total);
  ts_framer f;
  ts_framer_init(&f, 1 << 20);
  sink s = {0};
  s.stop_after = 3;
  ck_assert_int_eq(feed_copy(&f, stream, total, &s), 7);
  ck_assert_int_eq(s.n, 3);
  ck_assert_uint_eq(s.msg_len[2], lens[2]);
  ts_framer_free(&f);
  sink_free(&s);
  free(stream);
}
END_TEST

START_TEST(partial_message_is_pending) {
  uint8_t msg[4 + 10];
  ts_frame_header(msg, 10);
  memset(msg + 4, 1, 10);
  ts_framer f;
  ts_framer_init(&f, 100);
  sink s = {0};
  ck_assert_int_eq(feed_copy(&f, msg, 2, &s), 0);
  ck_assert_uint_eq(ts_framer_pending(&f), 2);
  ck_assert_int_eq(feed_copy(&f, msg + 2, 7, &s), 0);
  ck_assert_uint_eq(ts_framer_pending(&f), 9);
  ck_assert_int_eq(s.n, 0);
  ck_assert_int_eq(feed_copy(&f, msg + 9, 5, &s), 0);
  ck_assert_int_eq(s.n, 1);
  ck_assert_uint_eq(s.msg_len[0], 10);
  ck_assert_uint_eq(ts_framer_pending(&f), 0);
  ts_framer_free(&f);
  sink_free(&s);
}
END_TEST

static Suite *framing_suite(void) {
  Suite *s = suite_create("framing");
  TCase *tc = tcase_create("length-prefix");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, header_bytes);
  tcase_add_test(tc, whole_stream_in_one_feed);
  tcase_add_test(tc, split_at_every_byte);
  tcase_add_test(tc, byte_by_byte);
  tcase_add_test(tc, random_chunks);
  tcase_add_test(tc, oversized_is_refused);
  tcase_add_test(tc, callback_stops_feed);
  tcase_add_test(tc, partial_message_is_pending);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(framing_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
