/* protobuf_test.c - the protobuf encoder of `export --perfetto`
 * (analysis/export/protobuf.c) writes the bytes of the wire format: the examples
 * of protobuf.dev's encoding page, the edges of varints and negative
 * integers, and nested messages whose lengths take more than one byte, the
 * case where the encoder moves a body already written. Perfetto's own
 * protos read the whole export in tests/analysis/perfetto_test.sh. */
#include "protobuf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

static void expect_bytes(const fs_pb *b, const uint8_t *want, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->data, want, n);
    assert_int_equal(b->depth, 0);
}

/* protobuf.dev/programming-guides/encoding: 150 in field 1, "testing" in
 * field 2, and a message holding the first in field 3 */
static void test_documented_examples(void **state)
{
    fs_pb b = {0};
    (void)state;
    fs_pb_uint(&b, 1, 150);
    expect_bytes(&b, (const uint8_t[]){0x08, 0x96, 0x01}, 3);
    fs_pb_clear(&b);
    fs_pb_str(&b, 2, "testing");
    expect_bytes(&b, (const uint8_t[]){0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}, 9);
    fs_pb_clear(&b);
    fs_pb_begin(&b, 3);
    fs_pb_uint(&b, 1, 150);
    fs_pb_end(&b);
    expect_bytes(&b, (const uint8_t[]){0x1a, 0x03, 0x08, 0x96, 0x01}, 5);
    fs_pb_free(&b);
}

static void test_varint_edges(void **state)
{
    fs_pb b = {0};
    (void)state;
    fs_pb_uint(&b, 1, 0);
    fs_pb_uint(&b, 1, 127);
    fs_pb_uint(&b, 1, 128);
    expect_bytes(&b, (const uint8_t[]){0x08, 0x00, 0x08, 0x7f, 0x08, 0x80, 0x01}, 7);
    fs_pb_clear(&b);
    fs_pb_uint(&b, 1, UINT64_MAX); /* ten bytes, the last holding one bit */
    expect_bytes(
        &b, (const uint8_t[]){0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        11);
    fs_pb_clear(&b);
    fs_pb_int(&b, 1, -2); /* int64: two's complement, ten bytes */
    expect_bytes(
        &b, (const uint8_t[]){0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        11);
    fs_pb_clear(&b);
    fs_pb_uint(&b, 60, 1); /* a tag of two bytes: (60 << 3) | 0 */
    fs_pb_uint(&b, 87, 1);
    expect_bytes(&b, (const uint8_t[]){0xe0, 0x03, 0x01, 0xb8, 0x05, 0x01}, 6);
    fs_pb_free(&b);
}

static void test_empty_fields(void **state)
{
    fs_pb b = {0};
    (void)state;
    fs_pb_bytes(&b, 2, NULL, 0);
    fs_pb_begin(&b, 3);
    fs_pb_end(&b);
    expect_bytes(&b, (const uint8_t[]){0x12, 0x00, 0x1a, 0x00}, 4);
    fs_pb_free(&b);
}

/* The varint of v (not 0) at want + *at */
static void varint_at(uint8_t *want, size_t *at, uint64_t v)
{
    for (; v; v >>= 7)
        want[(*at)++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
}

/* A body of n bytes in field 2, nested in field 1: its length takes one to
 * three bytes, so the body moves up behind it, intact */
static void check_nested(size_t n)
{
    static uint8_t body[70000], want[70016];
    fs_pb b = {0};
    size_t at = 0, inner = n + (n < 128 ? 2 : n < 16384 ? 3 : 4);

    for (size_t i = 0; i < n; i++)
        body[i] = (uint8_t)(i * 7 + 1);
    fs_pb_begin(&b, 1);
    fs_pb_bytes(&b, 2, body, n);
    fs_pb_end(&b);

    want[at++] = 0x0a;
    varint_at(want, &at, inner);
    want[at++] = 0x12;
    varint_at(want, &at, n);
    memcpy(want + at, body, n);
    expect_bytes(&b, want, at + n);
    fs_pb_free(&b);
}

static void test_nested_lengths(void **state)
{
    (void)state;
    check_nested(1);
    check_nested(125);   /* the outer length: 127, one byte */
    check_nested(126);   /* 128: two bytes */
    check_nested(300);   /* both two bytes */
    check_nested(16381); /* the outer 16384: three bytes */
    check_nested(69000);
}

/* Three levels, each closing past 127 bytes: every end moves what the ones
 * inside it wrote */
static void test_deep_nesting(void **state)
{
    fs_pb b = {0};
    uint8_t body[200];
    (void)state;

    memset(body, 0x5a, sizeof body);
    fs_pb_begin(&b, 1);
    fs_pb_uint(&b, 5, 1);
    fs_pb_begin(&b, 2);
    fs_pb_begin(&b, 3);
    fs_pb_bytes(&b, 4, body, sizeof body);
    fs_pb_end(&b);
    fs_pb_uint(&b, 6, 2);
    fs_pb_end(&b);
    fs_pb_end(&b);

    /* field 4: 2 + 200 = 203 bytes; field 3: 2 + 203 = 205 -> 3 + 203 = 206
     * with its tag; field 2's body 206 + 2 = 208, field 2: 3 + 208 = 211;
     * field 1's body: 2 + 211 = 213 */
    const uint8_t head[] = {0x0a, 0xd5, 0x01, 0x28, 0x01, 0x12, 0xd0,
                            0x01, 0x1a, 0xcb, 0x01, 0x22, 0xc8, 0x01};
    assert_int_equal(b.len, sizeof head + sizeof body + 2);
    assert_memory_equal(b.data, head, sizeof head);
    assert_memory_equal(b.data + sizeof head, body, sizeof body);
    assert_memory_equal(b.data + sizeof head + sizeof body, ((const uint8_t[]){0x30, 0x02}), 2);
    fs_pb_free(&b);
}

/* Fields written apart, appended into an open message */
static void test_append(void **state)
{
    fs_pb b = {0}, part = {0};
    (void)state;
    fs_pb_uint(&part, 2, 3);
    fs_pb_str(&part, 3, "ab");
    fs_pb_begin(&b, 1);
    fs_pb_append(&b, &part);
    fs_pb_end(&b);
    expect_bytes(&b, (const uint8_t[]){0x0a, 0x06, 0x10, 0x03, 0x1a, 0x02, 'a', 'b'}, 8);
    fs_pb_free(&b);
    fs_pb_free(&part);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documented_examples), cmocka_unit_test(test_varint_edges),
        cmocka_unit_test(test_empty_fields),        cmocka_unit_test(test_nested_lengths),
        cmocka_unit_test(test_deep_nesting),        cmocka_unit_test(test_append),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
