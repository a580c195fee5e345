/*
 * ts_check.h: Check (check.h) for every test program, with one change: an
 * assertion that holds costs nothing. Check's ck_assert_msg, which every
 * ck_assert_* expands to, records each assertion that holds with the
 * runner (_mark_point: its file and line written and flushed to the
 * runner's pipe), so that a crash can be placed after the last one. Tests
 * that assert something of every node in a loop spent their time there:
 * test_self_contact made 5 million such writes; itest_faults' reader made
 * 3,468 a frame and fell minutes behind the daemon's frames under ASan
 * (the divergence case's Error never reached it in CI). A failing
 * assertion is reported as before, with its file, line and message; a
 * crash is placed by the sanitizers' stack traces (CI runs every test under
 * ASan+UBSan) instead.
 */
#ifndef TS_CHECK_H
#define TS_CHECK_H
#include <check.h>

/* check.h's definition (Check 0.15) but for the _mark_point call */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                                                   \
  ((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
