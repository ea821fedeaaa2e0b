/* bad_args.c - runs the bad-argument table (bad_args_table.h): every call
 * must return its expected code and leave its expected last error.
 *
 * Built against NVIDIA's runtime (FSDPSHIM_REAL_RUNTIME), the rows on
 * destroyed objects, whose outcome is undefined there, are left out unless
 * FS_BAD_ARGS_ONLY names one: then that row alone runs and says what it got
 * (a crash is an answer too: the process ends). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_args_table.h"
#include "require_device.h"

#define DEFINE_CASE(name, call, code, last)                                                        \
    static cudaError_t run_##name(struct fs_bad_args_ctx *c)                                       \
    {                                                                                              \
        void *p = (void *)c;                                                                       \
        (void)p;                                                                                   \
        return call;                                                                               \
    }
FS_BAD_ARGS(DEFINE_CASE)
FS_BAD_ARGS_DESTROYED(DEFINE_CASE)

struct bad_case {
    const char *name;
    cudaError_t (*run)(struct fs_bad_args_ctx *);
    cudaError_t code, last;
    bool destroyed;
};

#define LIST_CASE(name, call, code, last)      {#name, run_##name, code, last, false},
#define LIST_DESTROYED(name, call, code, last) {#name, run_##name, code, last, true},
static const struct bad_case cases[] = {FS_BAD_ARGS(LIST_CASE)
                                            FS_BAD_ARGS_DESTROYED(LIST_DESTROYED)};

/* Whether case `c` runs: all of them, or the one FS_BAD_ARGS_ONLY names;
 * against the real runtime the destroyed-object rows only when named. */
static bool selected(const struct bad_case *c)
{
    const char *only = getenv("FS_BAD_ARGS_ONLY");
    if (only && *only) return strcmp(only, c->name) == 0;
#ifdef FSDPSHIM_REAL_RUNTIME
    return !c->destroyed;
#else
    return true;
#endif
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct fs_bad_args_ctx ctx = {0};
    assert_int_equal(fs_bad_args_setup(&ctx), 0);
    int failures = 0, ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!selected(&cases[i])) continue;
        ran++;
        (void)cudaGetLastError();
        cudaError_t got = cases[i].run(&ctx);
        cudaError_t last = cudaGetLastError();
        if (getenv("FS_BAD_ARGS_ONLY"))
            print_message("%s: returned %s, last error %s\n", cases[i].name, cudaGetErrorName(got),
                          cudaGetErrorName(last));
        if (got != cases[i].code || last != cases[i].last) {
            print_error("%s: returned %s (want %s), last error %s (want %s)\n", cases[i].name,
                        cudaGetErrorName(got), cudaGetErrorName(cases[i].code),
                        cudaGetErrorName(last), cudaGetErrorName(cases[i].last));
            failures++;
        }
    }
    fs_bad_args_teardown(&ctx);
    assert_int_equal(failures, 0);
    assert_true(ran > 0); /* a FS_BAD_ARGS_ONLY that names no row is a mistake */
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
