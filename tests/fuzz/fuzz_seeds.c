/* fuzz_seeds.c - seeds for the reader's fuzz target, written with the
 * format library (tests/fuzz/README.md): a small trace with every record
 * kind, in uncompressed blocks (a mutation lands on a record, not in a zstd
 * frame) and again compressed; a snapshot file; a bare records payload (the
 * target wraps one in a header and a block); and the headers and blocks a
 * reader must refuse or skip: bad magic, a newer min_reader, a wrong header
 * size, a bad checksum, a cut header, a cut block, a block with unknown
 * flags, garbage between blocks.
 *
 *   fuzz_seeds DIR */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void append(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            perror("fuzz_seeds");
            exit(1);
        }
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void header(buf *out, uint32_t features)
{
    fs_fmt_header h = {.version = FS_FMT_VERSION,
                       .min_reader = FS_FMT_MIN_READER,
                       .features = features,
                       .pid = 77,
                       .rank = -1,
                       .trace_level = 3,
                       .clock_mono_ns = 1000,
                       .clock_real_ns = 2000,
                       .frames = 8};
    uint8_t raw[FS_FMT_HEADER_SIZE];
    snprintf(h.host, sizeof h.host, "seed");
    snprintf(h.exe, sizeof h.exe, "/bin/seed");
    fs_fmt_header_encode(&h, raw);
    append(out, raw, sizeof raw);
}

static void block(buf *out, void *zctx, uint32_t tid, uint64_t t0, const buf *raw)
{
    uint8_t *packed = malloc(fs_fmt_block_bound(raw->n));
    if (!packed) exit(1);
    append(out, packed, fs_fmt_block_pack(zctx, zctx ? 1 : 0, tid, t0, raw->p, raw->n, packed));
    free(packed);
}

/* The definitions: strings, two stacks, a Python stack, two annotations, a
 * module, a thread, the rank, a drop count. */
static void definitions(buf *d)
{
    uint8_t rec[FS_FMT_MAX_RECORD];
    static const char *const strings[] = {"/lib/libseed.so", "model.py", "forward", "step",
                                          "layer",           "worker",   "label"};
    const uint64_t frames[] = {0x7f0000001234, 0x7f0000005678, 0x7f0000009abc, 0x400100};
    const fs_fmt_pyframe py[] = {{2, 3, 10}, {2, 3, 20}};
    const uint8_t build_id[] = {0xde, 0xad, 0xbe, 0xef};

    for (uint32_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        append(d, rec, fs_fmt_put_string(i + 1, strings[i], strlen(strings[i]), rec));
    append(d, rec, fs_fmt_put_module(0x7f0000000000, 0x100000, 1, build_id, 4, rec));
    append(d, rec, fs_fmt_put_stack(1, frames, 4, rec));
    append(d, rec, fs_fmt_put_stack(2, frames + 1, 2, rec));
    append(d, rec, fs_fmt_put_pystack(1, py, 2, rec));
    append(d, rec, fs_fmt_put_annot(1, 0, 0, 4, rec));
    append(d, rec, fs_fmt_put_annot(2, 1, 0, 5, rec));
    append(d, rec, fs_fmt_put_thread(100, 6, rec));
    append(d, rec, fs_fmt_put_rank(1, 2, rec));
    append(d, rec, fs_fmt_put_dropped(3, 500, rec));
}

static void event(buf *b, fs_fmt_enc *e, fs_fmt_event ev)
{
    uint8_t rec[FS_FMT_MAX_RECORD];
    append(b, rec, fs_fmt_put_event(e, &ev, rec));
}

/* One thread's events: two devices, two streams, blocks allocated, freed
 * and reused, segments, an OOM, every other event kind once. */
static void events(buf *b, uint64_t t0)
{
    fs_fmt_enc e;
    uint64_t t = t0, s = 0x5000;
    fs_fmt_enc_reset(&e, t0);
#define EV(...) event(b, &e, (fs_fmt_event){.time_ns = (t += 100), __VA_ARGS__})
    EV(.kind = FS_REC_STREAM_CREATE, .device = 0, .stream = s, .aux = 1, .aux2 = (uint64_t)-1);
    EV(.kind = FS_REC_SEGMENT_ALLOC, .device = 0, .stream = s, .addr = 1 << 21, .size = 2 << 20,
       .reserved = 2 << 20);
    EV(.kind = FS_REC_ANNOT_PUSH, .device = -1, .annot = 1, .name = 4);
    EV(.kind = FS_REC_ALLOC, .device = 0, .stream = s, .addr = 1 << 21, .size = 1 << 20,
       .requested = 1000000, .allocated = 1 << 20, .reserved = 2 << 20, .stack = 1, .pystack = 1,
       .annot = 1, .aux = 2);
    EV(.kind = FS_REC_ALLOC, .device = 0, .stream = 0, .addr = (1 << 21) + (1 << 20), .size = 512,
       .requested = 100, .allocated = (1 << 20) + 512, .reserved = 2 << 20, .stack = 2, .aux = 1);
    EV(.kind = FS_REC_ANNOT_PUSH, .device = -1, .annot = 2, .name = 5);
    EV(.kind = FS_REC_FREE_REQUESTED, .device = 0, .stream = s, .addr = 1 << 21, .size = 1 << 20,
       .allocated = 512, .reserved = 2 << 20);
    EV(.kind = FS_REC_ANNOT_MARK, .device = -1, .annot = 2, .name = 7);
    EV(.kind = FS_REC_FREE_COMPLETED, .device = 0, .stream = s, .addr = 1 << 21, .size = 1 << 20,
       .allocated = 512, .reserved = 2 << 20);
    EV(.kind = FS_REC_ALLOC, .device = 1, .stream = 0, .addr = 3 << 21, .size = 3 << 20,
       .requested = 3 << 20, .allocated = 3 << 20, .reserved = 4 << 20, .stack = 1, .annot = 2,
       .aux = 2);
    EV(.kind = FS_REC_OOM, .device = 1, .stream = 0, .size = 8 << 20, .allocated = 3 << 20,
       .reserved = 4 << 20, .stack = 2, .aux = 1 << 20);
    EV(.kind = FS_REC_SEGMENT_MAP, .device = 1, .addr = 5 << 21, .size = 2 << 20,
       .allocated = 3 << 20, .reserved = 6 << 20);
    EV(.kind = FS_REC_SEGMENT_UNMAP, .device = 1, .addr = 5 << 21, .size = 2 << 20,
       .allocated = 3 << 20, .reserved = 4 << 20);
    EV(.kind = FS_REC_RL_WAIT_START, .device = 0, .stream = s, .aux = 2, .aux2 = 4 << 20);
    EV(.kind = FS_REC_RL_WAIT_END, .device = 0, .stream = s, .aux = 9);
    EV(.kind = FS_REC_COLLECTIVE, .device = 0, .stream = s, .addr = 1 << 21, .size = 1 << 20,
       .aux = FS_COLL_ALL_GATHER, .aux2 = 0xc0);
    EV(.kind = FS_REC_ANNOT_POP, .device = -1, .annot = 1);
    EV(.kind = FS_REC_POOL_HIT, .device = 0, .stream = s, .aux = 1);
    EV(.kind = FS_REC_SNAPSHOT, .device = -1, .name = 7);
    EV(.kind = FS_REC_SEGMENT_FREE, .device = 0, .stream = s, .addr = 1 << 21, .size = 2 << 20,
       .allocated = 512, .reserved = 0);
    EV(.kind = FS_REC_STREAM_DESTROY, .device = 0, .stream = s);
#undef EV
}

/* A snapshot file: its segments and blocks. */
static void snapshot_entries(buf *b)
{
    fs_fmt_enc e;
    fs_fmt_enc_reset(&e, 0);
    event(b, &e,
          (fs_fmt_event){.kind = FS_REC_SNAP_SEGMENT,
                         .device = 0,
                         .addr = 1 << 21,
                         .size = 2 << 20,
                         .allocated = 1 << 20,
                         .reserved = 2 << 20});
    event(b, &e,
          (fs_fmt_event){.kind = FS_REC_SNAP_BLOCK,
                         .device = 0,
                         .addr = 1 << 21,
                         .size = 1 << 20,
                         .requested = 1000,
                         .aux = FS_BLOCK_LIVE,
                         .stack = 1,
                         .pystack = 1,
                         .annot = 2});
    event(b, &e,
          (fs_fmt_event){.kind = FS_REC_SNAP_BLOCK,
                         .device = 0,
                         .addr = (1 << 21) + (1 << 20),
                         .size = 1 << 20,
                         .aux = FS_BLOCK_CACHED});
}

/* A trace: definitions, then the events of two threads, blocks
 * interleaved out of time order as the writer's cycles leave them. */
static void trace(buf *out, void *zctx)
{
    buf d = {0}, a = {0}, b = {0};
    header(out, FS_FMT_FEAT_STACKS | FS_FMT_FEAT_PYTHON);
    definitions(&d);
    block(out, zctx, 0, 0, &d);
    events(&a, 5000);
    events(&b, 1000);
    block(out, zctx, 100, 5000, &a);
    block(out, zctx, 101, 1000, &b);
    free(d.p);
    free(a.p);
    free(b.p);
}

static void save(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The header's checksum made right again after a field was changed. */
static void reseal_header(uint8_t *p)
{
    put32(p + FS_FMT_HEADER_SIZE - 4, (uint32_t)crc32(0, p, FS_FMT_HEADER_SIZE - 4));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    void *zctx = ZSTD_createCCtx();
    buf plain = {0}, packed = {0}, snap = {0}, records = {0}, m = {0};

    trace(&plain, NULL);
    save(dir, "plain.fst", plain.p, plain.n);
    trace(&packed, zctx);
    save(dir, "zstd.fst", packed.p, packed.n);

    header(&snap, FS_FMT_FEAT_STACKS | FS_FMT_FEAT_SNAPSHOT);
    definitions(&records);
    block(&snap, NULL, 0, 0, &records);
    records.n = 0;
    snapshot_entries(&records);
    block(&snap, NULL, 0, 0, &records);
    save(dir, "snapshot.fst", snap.p, snap.n);

    /* records alone: the target puts them behind a header, in one block */
    records.n = 0;
    definitions(&records);
    events(&records, 0);
    save(dir, "records.bin", records.p, records.n);

    /* what the reader refuses or skips */
    m.n = 0;
    append(&m, plain.p, plain.n);
    m.p[0] = 'X';
    save(dir, "bad-magic.fst", m.p, m.n);
    m.p[0] = plain.p[0];
    m.p[10] = 99; /* min_reader */
    reseal_header(m.p);
    save(dir, "newer.fst", m.p, m.n);
    m.p[10] = plain.p[10];
    m.p[12] = 128; /* header size */
    reseal_header(m.p);
    save(dir, "header-size.fst", m.p, m.n);
    m.p[12] = plain.p[12];
    m.p[FS_FMT_HEADER_SIZE - 1] ^= 0xff; /* checksum */
    save(dir, "header-crc.fst", m.p, m.n);
    save(dir, "cut-header.fst", plain.p, FS_FMT_HEADER_SIZE / 2);
    save(dir, "cut-block.fst", plain.p, plain.n - 7);
    save(dir, "cut-block-header.fst", plain.p, FS_FMT_HEADER_SIZE + FS_FMT_BLOCK_HDR_SIZE / 2);
    memcpy(m.p, plain.p, plain.n);
    m.p[FS_FMT_HEADER_SIZE + 12] = 0x80; /* the first block's flags */
    save(dir, "block-flags.fst", m.p, m.n);
    m.n = FS_FMT_HEADER_SIZE;
    append(&m, "garbage between blocks", 22);
    append(&m, plain.p + FS_FMT_HEADER_SIZE, plain.n - FS_FMT_HEADER_SIZE);
    save(dir, "garbage.fst", m.p, m.n);
    m.n = 0;
    append(&m, packed.p, packed.n);
    m.p[m.n - 3] ^= 0x55; /* inside the last zstd frame */
    save(dir, "zstd-corrupt.fst", m.p, m.n);

    ZSTD_freeCCtx(zctx);
    free(plain.p);
    free(packed.p);
    free(snap.p);
    free(records.p);
    free(m.p);
    return 0;
}
