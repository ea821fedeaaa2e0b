/* test_format.c - the trace format round-trips: every event field and every
 * definition record decodes to what was encoded, blocks survive zstd and
 * reject a flipped byte, headers reject other files and newer formats, and
 * a truncated record is reported rather than misread. */
#include "format.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zstd.h>

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random event whose fields are often zero or repeated, as in a trace. */
static fs_fmt_event random_event(uint64_t *clock)
{
    fs_fmt_event ev = {0};
    uint64_t r = next_rand();

    ev.kind = (uint8_t)(FS_REC_ALLOC + r % FS_REC_EVENT_LAST);
    *clock += next_rand() % 100000;
    ev.time_ns = *clock;
    ev.device = (int32_t)(next_rand() % 4) - (r % 17 == 0); /* some -1 */
    if (r % 13 == 0) ev.device = 70;                        /* beyond the delta table */
    ev.stream = r % 3 ? 0 : next_rand();
    ev.addr = r % 5 ? 0x7f0000000000ull + (next_rand() % (1ull << 30)) : 0;
    ev.size = next_rand() % (1ull << 33);
    ev.requested = r % 2 ? ev.size - ev.size / 3 : 0;
    ev.allocated = next_rand() % (1ull << 36);
    ev.reserved = r % 7 ? ev.allocated + 4096 : UINT64_MAX;
    ev.stack = (uint32_t)(next_rand() % 50);
    ev.pystack = r % 11 ? 0 : (uint32_t)next_rand();
    ev.annot = (uint32_t)(next_rand() % 3);
    ev.name = r % 9 ? 0 : 12345;
    ev.aux = r % 4 ? 0 : next_rand();
    ev.aux2 = r % 6 ? 0 : UINT64_MAX;
    ev.aux3 = r % 8 ? 0 : next_rand();
    ev.aux4 = r % 10 ? 0 : UINT64_MAX - 1;
    return ev;
}

static void test_events_roundtrip(void **state)
{
    static uint8_t buf[FS_FMT_MAX_BLOCK];
    static fs_fmt_event sent[20000];
    fs_fmt_enc enc;
    fs_fmt_dec dec;
    fs_fmt_record r;
    const char *err = NULL;
    uint64_t clock = 1000;
    size_t len = 0;
    (void)state;

    fs_fmt_enc_reset(&enc, 1000);
    for (size_t i = 0; i < 20000; i++) {
        sent[i] = random_event(&clock);
        len += fs_fmt_put_event(&enc, &sent[i], buf + len);
        assert_true(len < sizeof buf - FS_FMT_MAX_RECORD);
    }
    fs_fmt_dec_init(&dec, buf, len, 1000);
    for (size_t i = 0; i < 20000; i++) {
        assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
        assert_int_equal(r.kind, sent[i].kind);
        assert_memory_equal(&r.ev, &sent[i], sizeof sent[i]);
    }
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 0);
}

static void test_definitions_roundtrip(void **state)
{
    uint8_t buf[4 * FS_FMT_MAX_RECORD];
    uint64_t frames[FS_FMT_MAX_FRAMES + 10];
    fs_fmt_pyframe py[3] = {{1, 2, 10}, {3, 4, 0}, {5, 6, 123456}};
    const uint8_t build_id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
    fs_fmt_dec dec;
    fs_fmt_record r;
    const char *err;
    size_t len = 0;
    (void)state;

    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++)
        frames[i] = i % 2 ? 0x400000 + i * 16 : 0x7fffff000000 - i;
    len += fs_fmt_put_string(7, "hello", 5, buf + len);
    len += fs_fmt_put_stack(8, frames, FS_FMT_MAX_FRAMES + 10, buf + len); /* cut */
    len += fs_fmt_put_pystack(9, py, 3, buf + len);
    len += fs_fmt_put_annot(10, 3, 0, 7, buf + len);
    len += fs_fmt_put_module(0x7f0000000000, 0x21000, 7, build_id, 20, buf + len);
    len += fs_fmt_put_thread(4242, 7, buf + len);
    len += fs_fmt_put_dropped(99, 5000, buf + len);
    len += fs_fmt_put_rank(3, 8, buf + len);
    len += fs_fmt_put_config(7, buf + len);
    len += fs_fmt_put_device(5, 85899345920ull, buf + len);

    fs_fmt_dec_init(&dec, buf, len, 0);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_STRING);
    assert_int_equal(r.id, 7);
    assert_int_equal(r.u.string.len, 5);
    assert_memory_equal(r.u.string.bytes, "hello", 5);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_STACK);
    assert_int_equal(r.u.stack.n, FS_FMT_MAX_FRAMES);
    assert_memory_equal(r.u.stack.frames, frames, FS_FMT_MAX_FRAMES * sizeof frames[0]);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_PYSTACK);
    assert_int_equal(r.u.pystack.n, 3);
    assert_memory_equal(r.u.pystack.frames, py, sizeof py);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_ANNOT);
    assert_int_equal(r.u.annot.parent, 3);
    assert_int_equal(r.u.annot.name, 7);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_MODULE);
    assert_int_equal(r.u.module.base, 0x7f0000000000);
    assert_int_equal(r.u.module.size, 0x21000);
    assert_int_equal(r.u.module.build_id_len, 20);
    assert_memory_equal(r.u.module.build_id, build_id, 20);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.u.thread.tid, 4242);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.u.dropped.count, 99);
    assert_int_equal(r.u.dropped.time_ns, 5000);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.u.rank.rank, 3);
    assert_int_equal(r.u.rank.world, 8);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_CONFIG);
    assert_int_equal(r.u.config.text, 7);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 1);
    assert_int_equal(r.kind, FS_REC_DEVICE);
    assert_int_equal(r.u.device.device, 5);
    assert_int_equal(r.u.device.total, 85899345920ull);
    assert_int_equal(fs_fmt_next(&dec, &r, &err), 0);

    /* Every prefix that cuts a record short is malformed, never misread. */
    for (size_t cut = 1; cut < len; cut++) {
        int rc;
        fs_fmt_dec_init(&dec, buf, cut, 0);
        while ((rc = fs_fmt_next(&dec, &r, &err)) == 1)
            ;
        if (rc == 0) {
            /* the cut fell on a record boundary: the decoder consumed it all */
            assert_ptr_equal(dec.p, dec.end);
        } else {
            assert_non_null(err);
        }
    }
}

/* An allocation and its free, repeated at the same site, as a training
 * step does: the raw encoding stays near a dozen bytes per event. */
static void test_repeated_events_are_small(void **state)
{
    static uint8_t buf[FS_FMT_MAX_BLOCK];
    fs_fmt_enc enc;
    uint64_t t = 0, allocated = 0;
    size_t len = 0, events = 0;
    (void)state;

    fs_fmt_enc_reset(&enc, 0);
    for (int i = 0; i < 10000; i++) {
        uint64_t addr = 0x7f1200000000ull + (uint64_t)(i % 8) * (2u << 20);
        fs_fmt_event a = {.kind = FS_REC_ALLOC,
                          .time_ns = t += 900,
                          .device = 0,
                          .addr = addr,
                          .size = 2u << 20,
                          .requested = (2u << 20) - 100,
                          .allocated = allocated += 2u << 20,
                          .reserved = 64u << 20,
                          .stack = 1 + (uint32_t)(i % 8)};
        fs_fmt_event f = a;
        f.kind = FS_REC_FREE_REQUESTED;
        f.time_ns = t += 700;
        f.requested = 0;
        f.allocated = allocated -= 2u << 20;
        len += fs_fmt_put_event(&enc, &a, buf + len);
        len += fs_fmt_put_event(&enc, &f, buf + len);
        events += 2;
    }
    print_message("raw bytes per event: %.2f\n", (double)len / (double)events);
    assert_true(len <= events * 12);
}

static void test_block_pack_unpack(void **state)
{
    static uint8_t raw[FS_FMT_MAX_BLOCK], back[FS_FMT_MAX_BLOCK];
    static uint8_t out[FS_FMT_MAX_BLOCK + 65536];
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    fs_fmt_block b;
    (void)state;

    for (size_t i = 0; i < 100000; i++)
        raw[i] = (uint8_t)(i % 251 < 200 ? i % 7 : next_rand());
    assert_true(fs_fmt_block_bound(100000) <= sizeof out);
    for (int level = 0; level <= 1; level++) {
        size_t n = fs_fmt_block_pack(cctx, level, 77, 123456789, raw, 100000, out);
        assert_null(fs_fmt_block_parse(out, &b));
        assert_int_equal(b.tid, 77);
        assert_int_equal(b.time_ns, 123456789);
        assert_int_equal(b.raw_len, 100000);
        assert_int_equal(n, FS_FMT_BLOCK_HDR_SIZE + b.stored_len);
        assert_int_equal(!!(b.flags & FS_FMT_BLOCK_ZSTD), level);
        if (level) assert_true(b.stored_len < 100000);
        assert_null(fs_fmt_block_unpack(dctx, out, &b, out + FS_FMT_BLOCK_HDR_SIZE, back));
        assert_memory_equal(raw, back, 100000);

        /* A flipped payload byte, or a changed time in the header, fails the checksum. */
        out[FS_FMT_BLOCK_HDR_SIZE + b.stored_len / 2] ^= 0x10;
        assert_non_null(fs_fmt_block_unpack(dctx, out, &b, out + FS_FMT_BLOCK_HDR_SIZE, back));
        out[FS_FMT_BLOCK_HDR_SIZE + b.stored_len / 2] ^= 0x10;
        out[FS_FMT_BLOCK_HDR_SIZE - 1] ^= 1;
        assert_null(fs_fmt_block_parse(out, &b));
        assert_non_null(fs_fmt_block_unpack(dctx, out, &b, out + FS_FMT_BLOCK_HDR_SIZE, back));
        out[FS_FMT_BLOCK_HDR_SIZE - 1] ^= 1;
    }
    out[0] ^= 1;
    assert_non_null(fs_fmt_block_parse(out, &b));
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
}

static void test_header(void **state)
{
    uint8_t buf[FS_FMT_HEADER_SIZE];
    fs_fmt_header h = {.version = FS_FMT_VERSION,
                       .min_reader = FS_FMT_MIN_READER,
                       .features = FS_FMT_FEAT_STACKS,
                       .pid = 4321,
                       .rank = -1,
                       .clock_mono_ns = 5,
                       .clock_real_ns = 6,
                       .trace_level = 2,
                       .frames = 64},
                  back;
    (void)state;

    strcpy(h.host, "node17");
    memset(h.exe, 'x', sizeof h.exe); /* not terminated: cut to fit */
    fs_fmt_header_encode(&h, buf);
    assert_null(fs_fmt_header_decode(buf, &back));
    assert_int_equal(back.pid, 4321);
    assert_int_equal(back.rank, -1);
    assert_int_equal(back.features, FS_FMT_FEAT_STACKS);
    assert_int_equal(back.clock_real_ns, 6);
    assert_string_equal(back.host, "node17");
    assert_int_equal(strlen(back.exe), sizeof h.exe - 1);

    buf[60] ^= 1;
    assert_non_null(fs_fmt_header_decode(buf, &back));
    h.min_reader = FS_FMT_VERSION + 1;
    fs_fmt_header_encode(&h, buf);
    assert_non_null(strstr(fs_fmt_header_decode(buf, &back), "newer"));
    memcpy(buf, "\177ELF", 4);
    assert_non_null(strstr(fs_fmt_header_decode(buf, &back), "magic"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_roundtrip),
        cmocka_unit_test(test_definitions_roundtrip),
        cmocka_unit_test(test_repeated_events_are_small),
        cmocka_unit_test(test_block_pack_unpack),
        cmocka_unit_test(test_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
