/* common.h - shared helpers of the allocator tests: an allocator over the
 * fake device with a given FSDPSHIM_CONF-style configuration, and short
 * names for the streams every test uses. */
#ifndef ALLOC_TEST_COMMON_H
#define ALLOC_TEST_COMMON_H

#include "allocator.h"
#include "fake_device.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define MiB    ((size_t)1 << 20)
#define LEG    ((fs_stream_t)0)
#define S1     ((fs_stream_t)0x1001)
#define S2     ((fs_stream_t)0x1002)
#define S3     ((fs_stream_t)0x1003)
#define SEG(n) ((uintptr_t)FAKE_SEG_BASE + (uintptr_t)(n)*2 * MiB) /* n-th 2 MiB slot */

typedef struct env {
    fake_device *fake;
    fs_allocator *a;
} env;

/* conf: "key:value;key:value" applied over the defaults (NULL: defaults);
 * ';' separates so that bracketed values may hold commas. */
static inline env env_make(const char *conf, size_t capacity)
{
    fs_alloc_config cfg;
    fs_alloc_config_default(&cfg);
    if (conf) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", conf);
        char *save = NULL;
        for (char *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
            char *colon = strchr(kv, ':');
            assert_non_null(colon);
            *colon = '\0';
            char err[256];
            assert_int_equal(fs_alloc_config_set(&cfg, kv, colon + 1, err, sizeof err), 1);
        }
    }
    env e;
    e.fake = fake_create(2, capacity);
    e.a = fs_allocator_create(&cfg, fake_ops(e.fake), 2);
    assert_non_null(e.a);
    fs_alloc_stream_register(e.a, 0, LEG, FS_STREAM_LEGACY);
    fs_alloc_stream_register(e.a, 0, S1, FS_STREAM_NONBLOCKING);
    fs_alloc_stream_register(e.a, 0, S2, FS_STREAM_NONBLOCKING);
    fs_alloc_stream_register(e.a, 0, S3, FS_STREAM_NONBLOCKING);
    return e;
}

static inline void env_free(env *e)
{
    fs_allocator_destroy(e->a);
    fake_destroy(e->fake);
}

static inline void *must_alloc(env *e, fs_stream_t s, size_t size)
{
    void *p = NULL;
    assert_int_equal(fs_malloc(e->a, 0, s, size, 0, &p), FS_OK);
    assert_non_null(p);
    return p;
}

/* cudaMallocAsync: served from ordered segments only. */
static inline void *must_alloc_ordered(env *e, fs_stream_t s, size_t size)
{
    void *p = NULL;
    assert_int_equal(fs_malloc(e->a, 0, s, size, FS_ALLOC_STREAM_ORDERED, &p), FS_OK);
    assert_non_null(p);
    return p;
}

static inline size_t block_size(env *e, void *p)
{
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e->a, p, &bi), FS_OK);
    return bi.block_size;
}

static inline fs_alloc_stats stats(env *e)
{
    fs_alloc_stats st;
    fs_alloc_get_stats(e->a, 0, &st);
    return st;
}

static inline fake_counts counts(env *e)
{
    fake_counts c;
    fake_counts_get(e->fake, &c);
    return c;
}

#define U(p) ((uintptr_t)(p))

#endif /* ALLOC_TEST_COMMON_H */
