/* format.c - encoding and decoding of the trace format (format.h): the file
 * header, block framing (zstd, crc32 from zlib) and the records.
 *
 * Records are a kind byte and LEB128 varints; signed quantities (deltas) are
 * zigzag-coded. An event carries a field mask right after its kind, so a
 * field equal to its previous value in the block costs nothing: a repeated
 * alloc on the same device and stream is kind, mask, time delta, address
 * delta, size, totals deltas and a stack id, about a dozen bytes before
 * compression. */
#include "format.h"

#include <string.h>
#include <zlib.h>
#include <zstd.h>

/* ---- little-endian fixed fields and varints -------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static size_t put_var(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Reads one varint; false when the payload ends inside it or it is longer
 * than 64 bits. */
static bool get_var_long(fs_fmt_dec *d, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (d->p >= d->end) return false;
        uint8_t b = *d->p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Most of a record's varints are one byte: those are read inline. */
static inline bool get_var(fs_fmt_dec *d, uint64_t *v)
{
    if (d->p < d->end && *d->p < 0x80) {
        *v = *d->p++;
        return true;
    }
    return get_var_long(d, v);
}

static bool get_u32(fs_fmt_dec *d, uint32_t *v)
{
    uint64_t x;
    if (!get_var(d, &x) || x > UINT32_MAX) return false;
    *v = (uint32_t)x;
    return true;
}

static uint32_t crc(uint32_t c, const uint8_t *p, size_t n)
{
    return (uint32_t)crc32(c, p, (uInt)n);
}

/* ---- header ------------------------------------------------------------------ */

enum {
    H_VERSION = 8,
    H_MIN_READER = 10,
    H_SIZE = 12,
    H_FEATURES = 16,
    H_PID = 20,
    H_RANK = 24,
    H_LEVEL = 28,
    H_MONO = 32,
    H_REAL = 40,
    H_FRAMES = 48,
    H_HOST = 52,
    H_EXE = H_HOST + 64,
    H_CRC = FS_FMT_HEADER_SIZE - 4,
};

_Static_assert(H_EXE + 112 <= H_CRC, "header fields overlap the checksum");
_Static_assert(FS_FMT_MAX_RECORD >= 11 + FS_FMT_MAX_STRING &&
                   FS_FMT_MAX_RECORD >= 11 + 15 * FS_FMT_MAX_FRAMES,
               "FS_FMT_MAX_RECORD cannot hold the largest record");

void fs_fmt_header_encode(const fs_fmt_header *h, uint8_t out[FS_FMT_HEADER_SIZE])
{
    memset(out, 0, FS_FMT_HEADER_SIZE);
    memcpy(out, FS_FMT_MAGIC, 8);
    put16(out + H_VERSION, h->version);
    put16(out + H_MIN_READER, h->min_reader);
    put32(out + H_SIZE, FS_FMT_HEADER_SIZE);
    put32(out + H_FEATURES, h->features);
    put32(out + H_PID, h->pid);
    put32(out + H_RANK, (uint32_t)h->rank);
    put32(out + H_LEVEL, h->trace_level);
    put64(out + H_MONO, h->clock_mono_ns);
    put64(out + H_REAL, h->clock_real_ns);
    put32(out + H_FRAMES, h->frames);
    memcpy(out + H_HOST, h->host, strnlen(h->host, sizeof h->host - 1));
    memcpy(out + H_EXE, h->exe, strnlen(h->exe, sizeof h->exe - 1));
    put32(out + H_CRC, crc(0, out, H_CRC));
}

const char *fs_fmt_header_decode(const uint8_t in[FS_FMT_HEADER_SIZE], fs_fmt_header *h)
{
    if (memcmp(in, FS_FMT_MAGIC, 8)) return "not an fsdpshim trace (bad magic)";
    if (get16(in + H_MIN_READER) > FS_FMT_VERSION)
        return "written by a newer fsdpshim: this reader is too old for its format";
    if (get32(in + H_SIZE) != FS_FMT_HEADER_SIZE) return "unexpected header size";
    if (get32(in + H_CRC) != crc(0, in, H_CRC)) return "header checksum mismatch";
    memset(h, 0, sizeof *h);
    h->version = get16(in + H_VERSION);
    h->min_reader = get16(in + H_MIN_READER);
    h->features = get32(in + H_FEATURES);
    h->pid = get32(in + H_PID);
    h->rank = (int32_t)get32(in + H_RANK);
    h->trace_level = get32(in + H_LEVEL);
    h->clock_mono_ns = get64(in + H_MONO);
    h->clock_real_ns = get64(in + H_REAL);
    h->frames = get32(in + H_FRAMES);
    memcpy(h->host, in + H_HOST, sizeof h->host - 1);
    memcpy(h->exe, in + H_EXE, sizeof h->exe - 1);
    return NULL;
}

/* ---- blocks ------------------------------------------------------------------ */

enum { B_MAGIC = 0, B_STORED = 4, B_RAW = 8, B_FLAGS = 12, B_TID = 16, B_CRC = 20, B_TIME = 24 };

static uint32_t block_crc(const uint8_t *hdr, const uint8_t *stored, size_t stored_len)
{
    uint32_t c = crc(0, hdr, B_CRC);
    c = crc(c, hdr + B_TIME, FS_FMT_BLOCK_HDR_SIZE - B_TIME);
    return crc(c, stored, stored_len);
}

size_t fs_fmt_block_bound(size_t raw_len)
{
    size_t z = ZSTD_compressBound(raw_len);
    return FS_FMT_BLOCK_HDR_SIZE + (z > raw_len ? z : raw_len);
}

size_t fs_fmt_block_pack(void *zctx, int zstd_level, uint32_t tid, uint64_t time_ns,
                         const uint8_t *raw, size_t raw_len, uint8_t *out)
{
    uint8_t *payload = out + FS_FMT_BLOCK_HDR_SIZE;
    size_t stored = raw_len;
    uint32_t flags = 0;

    if (zctx && zstd_level > 0 && raw_len > 64) {
        size_t z =
            ZSTD_compressCCtx(zctx, payload, ZSTD_compressBound(raw_len), raw, raw_len, zstd_level);
        if (!ZSTD_isError(z) && z < raw_len) {
            stored = z;
            flags |= FS_FMT_BLOCK_ZSTD;
        }
    }
    if (!(flags & FS_FMT_BLOCK_ZSTD)) memcpy(payload, raw, raw_len);
    put32(out + B_MAGIC, FS_FMT_BLOCK_MAGIC);
    put32(out + B_STORED, (uint32_t)stored);
    put32(out + B_RAW, (uint32_t)raw_len);
    put32(out + B_FLAGS, flags);
    put32(out + B_TID, tid);
    put64(out + B_TIME, time_ns);
    put32(out + B_CRC, block_crc(out, payload, stored));
    return FS_FMT_BLOCK_HDR_SIZE + stored;
}

const char *fs_fmt_block_parse(const uint8_t *in, fs_fmt_block *b)
{
    if (get32(in + B_MAGIC) != FS_FMT_BLOCK_MAGIC) return "bad block magic";
    b->stored_len = get32(in + B_STORED);
    b->raw_len = get32(in + B_RAW);
    b->flags = get32(in + B_FLAGS);
    b->tid = get32(in + B_TID);
    b->time_ns = get64(in + B_TIME);
    if (b->raw_len > FS_FMT_MAX_BLOCK || b->stored_len > fs_fmt_block_bound(FS_FMT_MAX_BLOCK))
        return "impossible block length";
    if (b->flags & ~(uint32_t)FS_FMT_BLOCK_ZSTD) return "unknown block flags";
    if (!(b->flags & FS_FMT_BLOCK_ZSTD) && b->stored_len != b->raw_len)
        return "stored and raw lengths differ in an uncompressed block";
    return NULL;
}

const char *fs_fmt_block_unpack(void *dctx, const uint8_t *hdr, const fs_fmt_block *b,
                                const uint8_t *stored, uint8_t *raw)
{
    if (get32(hdr + B_CRC) != block_crc(hdr, stored, b->stored_len))
        return "block checksum mismatch";
    if (!(b->flags & FS_FMT_BLOCK_ZSTD)) {
        memcpy(raw, stored, b->raw_len);
        return NULL;
    }
    if (!dctx) return "compressed block and no zstd context";
    size_t n = ZSTD_decompressDCtx(dctx, raw, b->raw_len, stored, b->stored_len);
    if (ZSTD_isError(n)) return "bad zstd frame in block";
    if (n != b->raw_len) return "block decompresses to the wrong length";
    return NULL;
}

/* ---- records ------------------------------------------------------------------ */

/* The event field mask: the fields most events carry come first, so that
 * a common event's mask fits in one byte. */
enum {
    F_ADDR = 1u << 0,
    F_SIZE = 1u << 1,
    F_ALLOCATED = 1u << 2,
    F_RESERVED = 1u << 3,
    F_STACK = 1u << 4,
    F_ANNOT = 1u << 5,
    F_REQUESTED = 1u << 6,
    F_DEVICE = 1u << 7,
    F_STREAM = 1u << 8,
    F_PYSTACK = 1u << 9,
    F_NAME = 1u << 10,
    F_AUX = 1u << 11,
    F_AUX2 = 1u << 12,
    F_AUX3 = 1u << 13, /* version 2 */
    F_AUX4 = 1u << 14,
    F_ALL = (1u << 15) - 1,
};

/* The top bit of an event's kind byte: its addresses, size and totals are
 * stored in FS_FMT_GRANULE units. */
#define KIND_SCALED    0x80u
#define FS_FMT_GRANULE 512u

void fs_fmt_enc_reset(fs_fmt_enc *e, uint64_t block_time_ns)
{
    memset(e, 0, sizeof *e);
    e->time_ns = block_time_ns;
    e->device = -1;
}

static bool is_event_kind(unsigned kind)
{
    return (kind >= FS_REC_ALLOC && kind <= FS_REC_EVENT_LAST) || kind == FS_REC_SNAP_SEGMENT ||
           kind == FS_REC_SNAP_BLOCK;
}

/* Where a device's totals are delta-coded; devices beyond the table are
 * coded against zero (absolute). */
static uint64_t *totals_slot(uint64_t *table, int32_t device, uint64_t *scratch)
{
    if (device >= 0 && device < FS_FMT_MAX_DEVICES) return &table[device];
    *scratch = 0;
    return scratch;
}

size_t fs_fmt_put_event(fs_fmt_enc *e, const fs_fmt_event *ev, uint8_t *out)
{
    uint64_t s1, s2;
    uint64_t *alloc_prev = totals_slot(e->allocated, ev->device, &s1);
    uint64_t *res_prev = totals_slot(e->reserved, ev->device, &s2);
    uint32_t mask = 0;
    size_t n = 0;

    if (ev->addr != e->addr) mask |= F_ADDR;
    if (ev->size) mask |= F_SIZE;
    if (ev->allocated != *alloc_prev) mask |= F_ALLOCATED;
    if (ev->reserved != *res_prev) mask |= F_RESERVED;
    if (ev->stack) mask |= F_STACK;
    if (ev->annot) mask |= F_ANNOT;
    if (ev->requested) mask |= F_REQUESTED;
    if (ev->device != e->device) mask |= F_DEVICE;
    if (ev->stream != e->stream) mask |= F_STREAM;
    if (ev->pystack) mask |= F_PYSTACK;
    if (ev->name) mask |= F_NAME;
    if (ev->aux) mask |= F_AUX;
    if (ev->aux2) mask |= F_AUX2;
    if (ev->aux3) mask |= F_AUX3;
    if (ev->aux4) mask |= F_AUX4;

    /* Allocator addresses, sizes and totals are multiples of 512 (PyTorch's
     * and the shim's smallest rounding): then they are stored in those units,
     * which saves a byte or two on each. */
    uint64_t scale = 1;
    if (((ev->addr - e->addr) | ev->size | (ev->allocated - *alloc_prev) |
         (ev->reserved - *res_prev)) %
            FS_FMT_GRANULE ==
        0)
        scale = FS_FMT_GRANULE;

    out[n++] = (uint8_t)(ev->kind | (scale > 1 ? KIND_SCALED : 0));
    n += put_var(out + n, mask);
    n += put_var(out + n, zigzag((int64_t)(ev->time_ns - e->time_ns)));
    e->time_ns = ev->time_ns;
    if (mask & F_ADDR)
        n += put_var(out + n, zigzag((int64_t)(ev->addr - e->addr) / (int64_t)scale));
    e->addr = ev->addr;
    if (mask & F_SIZE) n += put_var(out + n, ev->size / scale);
    if (mask & F_DEVICE) n += put_var(out + n, zigzag(ev->device));
    e->device = ev->device;
    if (mask & F_ALLOCATED)
        n += put_var(out + n, zigzag((int64_t)(ev->allocated - *alloc_prev) / (int64_t)scale));
    *alloc_prev = ev->allocated;
    if (mask & F_RESERVED)
        n += put_var(out + n, zigzag((int64_t)(ev->reserved - *res_prev) / (int64_t)scale));
    *res_prev = ev->reserved;
    if (mask & F_STACK) n += put_var(out + n, ev->stack);
    if (mask & F_ANNOT) n += put_var(out + n, ev->annot);
    if (mask & F_REQUESTED) n += put_var(out + n, zigzag((int64_t)(ev->size - ev->requested)));
    if (mask & F_STREAM) n += put_var(out + n, ev->stream);
    e->stream = ev->stream;
    if (mask & F_PYSTACK) n += put_var(out + n, ev->pystack);
    if (mask & F_NAME) n += put_var(out + n, ev->name);
    if (mask & F_AUX) n += put_var(out + n, ev->aux);
    if (mask & F_AUX2) n += put_var(out + n, ev->aux2);
    if (mask & F_AUX3) n += put_var(out + n, ev->aux3);
    if (mask & F_AUX4) n += put_var(out + n, ev->aux4);
    return n;
}

/* The device is decoded before the totals (its slot is needed), although
 * its mask bit comes later: the order in the record is the order above. */
static int get_event(fs_fmt_dec *d, uint8_t kind, uint64_t scale, fs_fmt_event *ev,
                     const char **err)
{
    fs_fmt_enc *e = &d->state;
    uint64_t mask, v, s1, s2, size = 0, requested = 0, aux = 0, aux2 = 0, aux3 = 0, aux4 = 0;
    uint32_t stack = 0, annot = 0, pystack = 0, name = 0;

    if (!get_var(d, &mask) || mask & ~(uint64_t)F_ALL) goto bad;
    if (!get_var(d, &v)) goto bad;
    e->time_ns += (uint64_t)unzigzag(v);
    if (mask & F_ADDR) {
        if (!get_var(d, &v)) goto bad;
        e->addr += (uint64_t)unzigzag(v) * scale;
    }
    if (mask & F_SIZE) {
        if (!get_var(d, &size)) goto bad;
        size *= scale;
    }
    if (mask & F_DEVICE) {
        if (!get_var(d, &v)) goto bad;
        int64_t dev = unzigzag(v);
        if (dev < -1 || dev > INT32_MAX) goto bad;
        e->device = (int32_t)dev;
    }
    uint64_t *alloc_prev = totals_slot(e->allocated, e->device, &s1);
    uint64_t *res_prev = totals_slot(e->reserved, e->device, &s2);
    if (mask & F_ALLOCATED) {
        if (!get_var(d, &v)) goto bad;
        *alloc_prev += (uint64_t)unzigzag(v) * scale;
    }
    if (mask & F_RESERVED) {
        if (!get_var(d, &v)) goto bad;
        *res_prev += (uint64_t)unzigzag(v) * scale;
    }
    if ((mask & F_STACK) && !get_u32(d, &stack)) goto bad;
    if ((mask & F_ANNOT) && !get_u32(d, &annot)) goto bad;
    if (mask & F_REQUESTED) {
        if (!get_var(d, &v)) goto bad;
        requested = size - (uint64_t)unzigzag(v);
    }
    if (mask & F_STREAM) {
        if (!get_var(d, &v)) goto bad;
        e->stream = v;
    }
    if ((mask & F_PYSTACK) && !get_u32(d, &pystack)) goto bad;
    if ((mask & F_NAME) && !get_u32(d, &name)) goto bad;
    if ((mask & F_AUX) && !get_var(d, &aux)) goto bad;
    if ((mask & F_AUX2) && !get_var(d, &aux2)) goto bad;
    if ((mask & F_AUX3) && !get_var(d, &aux3)) goto bad;
    if ((mask & F_AUX4) && !get_var(d, &aux4)) goto bad;
    /* each field written once: clearing the event first costs more than
     * decoding it, on the reader's hottest path */
    *ev = (fs_fmt_event){.kind = kind,
                         .time_ns = e->time_ns,
                         .device = e->device,
                         .stream = e->stream,
                         .addr = e->addr,
                         .size = size,
                         .requested = requested,
                         .allocated = *alloc_prev,
                         .reserved = *res_prev,
                         .stack = stack,
                         .pystack = pystack,
                         .annot = annot,
                         .name = name,
                         .aux = aux,
                         .aux2 = aux2,
                         .aux3 = aux3,
                         .aux4 = aux4};
    return 1;
bad:
    *err = "malformed event record";
    return -1;
}

size_t fs_fmt_put_string(uint32_t id, const char *s, size_t len, uint8_t *out)
{
    size_t n = 0;
    if (len > FS_FMT_MAX_STRING) len = FS_FMT_MAX_STRING;
    out[n++] = FS_REC_STRING;
    n += put_var(out + n, id);
    n += put_var(out + n, len);
    memcpy(out + n, s, len);
    return n + len;
}

size_t fs_fmt_put_stack(uint32_t id, const uint64_t *frames, uint32_t nframes, uint8_t *out)
{
    uint64_t prev = 0;
    size_t n = 0;
    if (nframes > FS_FMT_MAX_FRAMES) nframes = FS_FMT_MAX_FRAMES;
    out[n++] = FS_REC_STACK;
    n += put_var(out + n, id);
    n += put_var(out + n, nframes);
    /* Return addresses of one stack sit in few modules: deltas stay short. */
    for (uint32_t i = 0; i < nframes; i++) {
        n += put_var(out + n, zigzag((int64_t)(frames[i] - prev)));
        prev = frames[i];
    }
    return n;
}

size_t fs_fmt_put_pystack(uint32_t id, const fs_fmt_pyframe *frames, uint32_t nframes, uint8_t *out)
{
    size_t n = 0;
    if (nframes > FS_FMT_MAX_FRAMES) nframes = FS_FMT_MAX_FRAMES;
    out[n++] = FS_REC_PYSTACK;
    n += put_var(out + n, id);
    n += put_var(out + n, nframes);
    for (uint32_t i = 0; i < nframes; i++) {
        n += put_var(out + n, frames[i].file);
        n += put_var(out + n, frames[i].function);
        n += put_var(out + n, frames[i].line);
    }
    return n;
}

size_t fs_fmt_put_annot(uint32_t id, uint32_t parent, uint32_t domain, uint32_t name, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_ANNOT;
    n += put_var(out + n, id);
    n += put_var(out + n, parent);
    n += put_var(out + n, domain);
    n += put_var(out + n, name);
    return n;
}

size_t fs_fmt_put_module(uint64_t base, uint64_t size, uint32_t path, const uint8_t *build_id,
                         uint32_t build_id_len, uint8_t *out)
{
    size_t n = 0;
    if (build_id_len > 64) build_id_len = 64;
    out[n++] = FS_REC_MODULE;
    n += put_var(out + n, base);
    n += put_var(out + n, size);
    n += put_var(out + n, path);
    n += put_var(out + n, build_id_len);
    memcpy(out + n, build_id, build_id_len);
    return n + build_id_len;
}

size_t fs_fmt_put_thread(uint32_t tid, uint32_t name, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_THREAD;
    n += put_var(out + n, tid);
    n += put_var(out + n, name);
    return n;
}

size_t fs_fmt_put_dropped(uint64_t count, uint64_t time_ns, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_DROPPED;
    n += put_var(out + n, count);
    n += put_var(out + n, time_ns);
    return n;
}

size_t fs_fmt_put_rank(int32_t rank, int32_t world, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_RANK;
    n += put_var(out + n, zigzag(rank));
    n += put_var(out + n, zigzag(world));
    return n;
}

size_t fs_fmt_put_config(uint32_t text, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_CONFIG;
    n += put_var(out + n, text);
    return n;
}

size_t fs_fmt_put_device(int32_t device, uint64_t total, uint8_t *out)
{
    size_t n = 0;
    out[n++] = FS_REC_DEVICE;
    n += put_var(out + n, zigzag(device));
    n += put_var(out + n, total);
    return n;
}

void fs_fmt_dec_init(fs_fmt_dec *d, const uint8_t *raw, size_t len, uint64_t block_time_ns)
{
    d->p = raw;
    d->end = raw + len;
    fs_fmt_enc_reset(&d->state, block_time_ns);
}

static int get_definition(fs_fmt_dec *d, fs_fmt_record *r, const char **err)
{
    uint64_t a, b;

    switch (r->kind) {
    case FS_REC_STRING:
        if (!get_u32(d, &r->id) || !get_u32(d, &r->u.string.len)) break;
        if (r->u.string.len > FS_FMT_MAX_STRING || r->u.string.len > (size_t)(d->end - d->p)) break;
        r->u.string.bytes = (const char *)d->p;
        d->p += r->u.string.len;
        return 1;
    case FS_REC_STACK: {
        uint64_t prev = 0;
        if (!get_u32(d, &r->id) || !get_u32(d, &r->u.stack.n)) break;
        if (r->u.stack.n > FS_FMT_MAX_FRAMES) break;
        for (uint32_t i = 0; i < r->u.stack.n; i++) {
            if (!get_var(d, &a)) goto bad;
            prev += (uint64_t)unzigzag(a);
            d->frames[i] = prev;
        }
        r->u.stack.frames = d->frames;
        return 1;
    }
    case FS_REC_PYSTACK:
        if (!get_u32(d, &r->id) || !get_u32(d, &r->u.pystack.n)) break;
        if (r->u.pystack.n > FS_FMT_MAX_FRAMES) break;
        for (uint32_t i = 0; i < r->u.pystack.n; i++) {
            fs_fmt_pyframe *f = &d->pyframes[i];
            if (!get_u32(d, &f->file) || !get_u32(d, &f->function) || !get_u32(d, &f->line))
                goto bad;
        }
        r->u.pystack.frames = d->pyframes;
        return 1;
    case FS_REC_ANNOT:
        if (!get_u32(d, &r->id) || !get_u32(d, &r->u.annot.parent) ||
            !get_u32(d, &r->u.annot.domain) || !get_u32(d, &r->u.annot.name))
            break;
        return 1;
    case FS_REC_MODULE:
        if (!get_var(d, &r->u.module.base) || !get_var(d, &r->u.module.size) ||
            !get_u32(d, &r->u.module.path) || !get_u32(d, &r->u.module.build_id_len))
            break;
        if (r->u.module.build_id_len > 64 || r->u.module.build_id_len > (size_t)(d->end - d->p))
            break;
        r->u.module.build_id = d->p;
        d->p += r->u.module.build_id_len;
        return 1;
    case FS_REC_THREAD:
        if (!get_u32(d, &r->u.thread.tid) || !get_u32(d, &r->u.thread.name)) break;
        return 1;
    case FS_REC_DROPPED:
        if (!get_var(d, &r->u.dropped.count) || !get_var(d, &r->u.dropped.time_ns)) break;
        return 1;
    case FS_REC_RANK:
        if (!get_var(d, &a) || !get_var(d, &b)) break;
        r->u.rank.rank = (int32_t)unzigzag(a);
        r->u.rank.world = (int32_t)unzigzag(b);
        return 1;
    case FS_REC_CONFIG:
        if (!get_u32(d, &r->u.config.text)) break;
        return 1;
    case FS_REC_DEVICE:
        if (!get_var(d, &a) || !get_var(d, &r->u.device.total)) break;
        if (unzigzag(a) < 0 || unzigzag(a) > INT32_MAX) break;
        r->u.device.device = (int32_t)unzigzag(a);
        return 1;
    default:
        *err = "unknown record kind";
        return -1;
    }
bad:
    *err = "malformed definition record";
    return -1;
}

int fs_fmt_next(fs_fmt_dec *d, fs_fmt_record *r, const char **err)
{
    if (d->p >= d->end) return 0;
    uint8_t byte = *d->p++;
    uint8_t kind = byte & ~KIND_SCALED;
    if (is_event_kind(kind)) {
        /* get_event writes the whole event; one memset of the whole record
         * first would be the costliest step of reading a trace */
        r->kind = kind;
        r->id = 0;
        memset(&r->u, 0, sizeof r->u);
        return get_event(d, kind, byte & KIND_SCALED ? FS_FMT_GRANULE : 1, &r->ev, err);
    }
    memset(r, 0, sizeof *r);
    r->kind = kind;
    if (byte & KIND_SCALED) {
        *err = "unknown record kind";
        return -1;
    }
    return get_definition(d, r, err);
}

const char *fs_fmt_kind_name(unsigned kind)
{
    static const char *const names[] = {
        [FS_REC_ALLOC] = "alloc",
        [FS_REC_FREE_REQUESTED] = "free_requested",
        [FS_REC_FREE_COMPLETED] = "free_completed",
        [FS_REC_SEGMENT_ALLOC] = "segment_alloc",
        [FS_REC_SEGMENT_FREE] = "segment_free",
        [FS_REC_SEGMENT_MAP] = "segment_map",
        [FS_REC_SEGMENT_UNMAP] = "segment_unmap",
        [FS_REC_OOM] = "oom",
        [FS_REC_STREAM_CREATE] = "stream_create",
        [FS_REC_STREAM_DESTROY] = "stream_destroy",
        [FS_REC_POOL_HIT] = "stream_pool_hit",
        [FS_REC_COLLECTIVE] = "collective",
        [FS_REC_RL_WAIT_START] = "ratelimit_wait_start",
        [FS_REC_RL_WAIT_END] = "ratelimit_wait_end",
        [FS_REC_ANNOT_PUSH] = "annotation_push",
        [FS_REC_ANNOT_POP] = "annotation_pop",
        [FS_REC_ANNOT_MARK] = "annotation_mark",
        [FS_REC_SNAPSHOT] = "snapshot",
        [FS_REC_VMM] = "vmm",
        [FS_REC_STRING] = "string",
        [FS_REC_STACK] = "stack",
        [FS_REC_PYSTACK] = "pystack",
        [FS_REC_ANNOT] = "annotation",
        [FS_REC_MODULE] = "module",
        [FS_REC_THREAD] = "thread",
        [FS_REC_DROPPED] = "dropped",
        [FS_REC_RANK] = "rank",
        [FS_REC_CONFIG] = "config",
        [FS_REC_DEVICE] = "device",
        [FS_REC_SNAP_SEGMENT] = "snapshot_segment",
        [FS_REC_SNAP_BLOCK] = "snapshot_block",
    };
    return kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

const char *fs_fmt_coll_name(unsigned coll)
{
    static const char *const names[] = {
        [FS_COLL_ALL_GATHER] = "all_gather",
        [FS_COLL_REDUCE_SCATTER] = "reduce_scatter",
        [FS_COLL_ALL_REDUCE] = "all_reduce",
        [FS_COLL_BROADCAST] = "broadcast",
        [FS_COLL_REDUCE] = "reduce",
        [FS_COLL_ALL_TO_ALL] = "all_to_all",
        [FS_COLL_SEND] = "send",
        [FS_COLL_RECV] = "recv",
        [FS_COLL_GATHER] = "gather",
        [FS_COLL_SCATTER] = "scatter",
        [FS_COLL_OTHER] = "other",
    };
    return coll < sizeof names / sizeof names[0] ? names[coll] : NULL;
}

const char *fs_fmt_vmm_name(unsigned op)
{
    static const char *const names[] = {
        [FS_VMM_CREATE] = "cuMemCreate",
        [FS_VMM_RELEASE] = "cuMemRelease",
        [FS_VMM_MAP] = "cuMemMap",
        [FS_VMM_UNMAP] = "cuMemUnmap",
        [FS_VMM_RESERVE] = "cuMemAddressReserve",
        [FS_VMM_ADDRESS_FREE] = "cuMemAddressFree",
    };
    return op < sizeof names / sizeof names[0] ? names[op] : NULL;
}
