/* bad_args.c - runs the bad-argument table (bad_args_table.h): every call
 * must return its expected code and leave its expected last error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

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

struct bad_case {
    const char *name;
    cudaError_t (*run)(struct fs_bad_args_ctx *);
    cudaError_t code, last;
};

#define LIST_CASE(name, call, code, last) {#name, run_##name, code, last},
static const struct bad_case cases[] = {FS_BAD_ARGS(LIST_CASE)};

static void test_bad_arguments(void **state)
{
    (void)state;
    struct fs_bad_args_ctx ctx = {0};
    assert_int_equal(fs_bad_args_setup(&ctx), 0);
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        (void)cudaGetLastError();
        cudaError_t got = cases[i].run(&ctx);
        cudaError_t last = cudaGetLastError();
        if (got != cases[i].code || last != cases[i].last) {
            print_error("%s: returned %s (want %s), last error %s (want %s)\n", cases[i].name,
                        cudaGetErrorName(got), cudaGetErrorName(cases[i].code),
                        cudaGetErrorName(last), cudaGetErrorName(cases[i].last));
            failures++;
        }
    }
    fs_bad_args_teardown(&ctx);
    assert_int_equal(failures, 0);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
