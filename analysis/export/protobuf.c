/* protobuf.c - the protocol buffers encoder (protobuf.h): the wire format
 * of protobuf.dev/programming-guides/encoding, written by hand because the
 * export writes only a handful of Perfetto's messages (see protobuf.h). */
#include "protobuf.h"

#include "sites.h"

#include <stdlib.h>
#include <string.h>

enum wire { WIRE_VARINT = 0, WIRE_LEN = 2 };

static void reserve(fs_pb *b, size_t more)
{
    if (b->len + more <= b->cap) return;
    size_t cap = b->cap ? 2 * b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data) fs_analysis_oom("export");
    b->data = data;
    b->cap = cap;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

/* v's varint at out; its length */
static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        out[n++] = (uint8_t)(v | 0x80);
    out[n++] = (uint8_t)v;
    return n;
}

static void varint(fs_pb *b, uint64_t v)
{
    reserve(b, 10);
    b->len += put_varint(b->data + b->len, v);
}

static void tag(fs_pb *b, uint32_t field, enum wire w)
{
    varint(b, (uint64_t)field << 3 | w);
}

void fs_pb_uint(fs_pb *b, uint32_t field, uint64_t v)
{
    tag(b, field, WIRE_VARINT);
    varint(b, v);
}

void fs_pb_int(fs_pb *b, uint32_t field, int64_t v)
{
    fs_pb_uint(b, field, (uint64_t)v); /* a negative value takes ten bytes, as in protobuf */
}

void fs_pb_bytes(fs_pb *b, uint32_t field, const void *p, size_t n)
{
    tag(b, field, WIRE_LEN);
    varint(b, n);
    reserve(b, n);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

void fs_pb_str(fs_pb *b, uint32_t field, const char *s)
{
    fs_pb_bytes(b, field, s, strlen(s));
}

void fs_pb_begin(fs_pb *b, uint32_t field)
{
    if (b->depth == FS_PB_MAX_DEPTH) abort(); /* a caller's bug: the nesting is fixed */
    tag(b, field, WIRE_LEN);
    reserve(b, 1);
    b->len++; /* room for a length under 128, the common case */
    b->open[b->depth++] = b->len;
}

void fs_pb_end(fs_pb *b)
{
    size_t start = b->open[--b->depth], body = b->len - start, n = varint_size(body);
    if (n > 1) {
        reserve(b, n - 1);
        memmove(b->data + start + n - 1, b->data + start, body);
        b->len += n - 1;
    }
    put_varint(b->data + start - 1, body);
}

void fs_pb_append(fs_pb *b, const fs_pb *m)
{
    reserve(b, m->len);
    if (m->len) memcpy(b->data + b->len, m->data, m->len);
    b->len += m->len;
}

void fs_pb_clear(fs_pb *b)
{
    b->len = 0;
    b->depth = 0;
}

void fs_pb_free(fs_pb *b)
{
    free(b->data);
    *b = (fs_pb){0};
}
