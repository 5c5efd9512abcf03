/* Typed test assertions that print both values (libuv style). Header-only.
 * Use in one-process-per-test executables run by CTest: a failed check prints
 * file:line, the expression and both values, then exits 1. */
#ifndef MRD_TEST_CHECK_H
#define MRD_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_FAIL_(fmt, ...)                                                                   \
    do {                                                                                        \
        fprintf(stderr, "%s:%d: check failed: " fmt "\n", __FILE__, __LINE__, __VA_ARGS__);     \
        exit(1);                                                                                \
    } while (0)

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond))                                                                            \
            CHECK_FAIL_("%s", #cond);                                                           \
    } while (0)

#define CHECK_INT_OP_(a, op, b)                                                                 \
    do {                                                                                        \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                           \
        if (!(a_ op b_))                                                                        \
            CHECK_FAIL_("%s %s %s (%" PRId64 " vs %" PRId64 ")", #a, #op, #b, a_, b_);          \
    } while (0)
#define CHECK_UINT_OP_(a, op, b)                                                                \
    do {                                                                                        \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                        \
        if (!(a_ op b_))                                                                        \
            CHECK_FAIL_("%s %s %s (%" PRIu64 " vs %" PRIu64 ")", #a, #op, #b, a_, b_);          \
    } while (0)

#define CHECK_EQ(a, b) CHECK_INT_OP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_INT_OP_(a, !=, b)
#define CHECK_LT(a, b) CHECK_INT_OP_(a, <, b)
#define CHECK_LE(a, b) CHECK_INT_OP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_INT_OP_(a, >, b)
#define CHECK_GE(a, b) CHECK_INT_OP_(a, >=, b)
#define CHECK_UEQ(a, b) CHECK_UINT_OP_(a, ==, b)
#define CHECK_ULE(a, b) CHECK_UINT_OP_(a, <=, b)
#define CHECK_OK(expr) CHECK_INT_OP_(expr, ==, 0)
#define CHECK_STREQ(a, b)                                                                       \
    do {                                                                                        \
        const char *a_ = (a), *b_ = (b);                                                        \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                  \
            CHECK_FAIL_("%s == %s (\"%s\" vs \"%s\")", #a, #b, a_ ? a_ : "(null)",              \
                        b_ ? b_ : "(null)");                                                    \
    } while (0)

#endif
