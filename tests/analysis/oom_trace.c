/* oom_trace.c - writes traces of out-of-memory failures whose figures are
 * fixed, through the format library as the trace writer would (a block of
 * definitions, then the events), for report's explanations (oom_causes_test.sh).
 * A recording of a live program changes with the allocator's policy; these
 * traces say what an allocator did once, and stay that way. Each failed
 * request's stack is a frame of this program at a line marked SITE_*, so
 * that its call site symbolises.
 *
 *   oom_trace segment FILE       the cache grows by a 20 MiB segment where
 *                                only a 4 MiB one fits (issue 31): 8 MiB of
 *                                cudaMalloc weights on the legacy stream in a
 *                                20 MiB segment, then 4 MiB cudaMallocAsync
 *                                requests on two streams, six of them
 *                                failing on a 32 MiB device with 12 MiB free
 *   oom_trace other_memory FILE  a 14 MiB cudaMallocAsync fails on a 32 MiB
 *                                device with 12 MiB free, while 16 MiB lie
 *                                free in the tail of the cudaMalloc segment
 *                                that holds 4 MiB of weights
 *   oom_trace pending FILE       stream B's 3 MiB request fails while stream
 *                                A's pool holds a 3 MiB block whose
 *                                cudaFreeAsync has not completed, under the
 *                                default cross_stream_reuse:completed */
#include "format.h"

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define MiB ((uint64_t)1 << 20)
#define BUF (256u << 10)

/* the configuration the shim records for its defaults */
static const char default_config[] =
    "free_semantics:device,cross_stream_reuse:completed,max_split_size_mb:unlimited,"
    "roundup_power2_divisions:none,garbage_collection_threshold:off,expandable_segments:false,"
    "large_segment_mb:20";

#define STREAM_A 0x5a000ull
#define STREAM_B 0x5b000ull
#define SEG0     0x7f0000000000ull /* the legacy stream's cudaMalloc segment */
#define SEG1     0x7f0004000000ull /* stream A's stream-ordered segment */

typedef struct trace {
    FILE *f;
    void *zctx;
    uint8_t defs[BUF], events[BUF], *packed;
    size_t ndefs, nevents;
    fs_fmt_enc enc;
    uint32_t strings;
    uint64_t allocated, reserved; /* device 0's, after the last event */
} trace;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void put_block(trace *t, uint32_t tid, const uint8_t *raw, size_t len)
{
    size_t n = fs_fmt_block_pack(t->zctx, 1, tid, 0, raw, len, t->packed);
    if (fwrite(t->packed, 1, n, t->f) != n) die("oom_trace: writing");
}

static uint32_t string(trace *t, const char *s)
{
    t->ndefs += fs_fmt_put_string(++t->strings, s, strlen(s), t->defs + t->ndefs);
    return t->strings;
}

/* ---- the frames: this program's own, at marked lines ------------------------- */

/* The address a call of it returns to: a frame in its caller, at the line
 * of the call. In the sites below, a volatile result keeps the call from
 * being a tail call, which would return elsewhere, and `tag` (always 0)
 * keeps the three from being folded into one function. */
static volatile uint64_t tag;

__attribute__((noinline)) static uint64_t return_address(void)
{
    return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline)) static uint64_t load_weights(void)
{
    volatile uint64_t at = return_address(); /* SITE_WEIGHTS */
    return at + 1 * tag;
}

__attribute__((noinline)) static uint64_t alloc_activation(void)
{
    volatile uint64_t at = return_address(); /* SITE_ACTIVATION */
    return at + 2 * tag;
}

__attribute__((noinline)) static uint64_t alloc_buffer(void)
{
    volatile uint64_t at = return_address(); /* SITE_BUFFER */
    return at + 3 * tag;
}

/* The main program's module record: from its lowest PT_LOAD, as the
 * trace writer's (trace/modules.c). */
static int main_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    trace *t = arg;
    uint64_t lo = UINT64_MAX, hi = 0;
    char exe[4096];
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) die("oom_trace: /proc/self/exe");
    exe[n] = '\0';
    static const uint8_t no_build_id[1]; /* the encoder copies from it even when empty */
    uint32_t path = string(t, exe);
    t->ndefs +=
        fs_fmt_put_module(info->dlpi_addr + lo, hi - lo, path, no_build_id, 0, t->defs + t->ndefs);
    return 1; /* the first object is the main program */
}

/* Stack `id`: site's frame, then define's. */
static void stack(trace *t, uint32_t id, uint64_t site, uint64_t outer)
{
    uint64_t frames[2] = {site, outer};
    t->ndefs += fs_fmt_put_stack(id, frames, 2, t->defs + t->ndefs);
}

/* ---- events --------------------------------------------------------------------- */

static uint64_t now_ns = 1000000; /* each event 1 ms after the last */

static void event(trace *t, fs_fmt_event ev)
{
    ev.time_ns = now_ns;
    now_ns += 1000000;
    ev.device = 0;
    ev.allocated = t->allocated;
    ev.reserved = t->reserved;
    if (t->nevents + FS_FMT_MAX_RECORD > BUF) {
        fprintf(stderr, "oom_trace: too many events for one block\n");
        exit(1);
    }
    t->nevents += fs_fmt_put_event(&t->enc, &ev, t->events + t->nevents);
}

static void segment(trace *t, uint64_t stream, uint64_t addr, uint64_t size)
{
    t->reserved += size;
    event(t, (fs_fmt_event){
                 .kind = FS_REC_SEGMENT_ALLOC, .stream = stream, .addr = addr, .size = size});
}

/* An allocation of the large pool; ordered: through cudaMallocAsync. */
static void alloc(trace *t, uint64_t stream, uint64_t addr, uint64_t size, bool ordered,
                  uint32_t stack_id)
{
    t->allocated += size;
    event(t, (fs_fmt_event){.kind = FS_REC_ALLOC,
                            .stream = stream,
                            .addr = addr,
                            .size = size,
                            .requested = size,
                            .stack = stack_id,
                            .aux = 2 | (ordered ? FS_FMT_ALLOC_STREAM_ORDERED : 0)});
}

static void free_block(trace *t, uint64_t stream, uint64_t addr, uint64_t size, bool ordered)
{
    t->allocated -= size;
    event(t, (fs_fmt_event){.kind = FS_REC_FREE_REQUESTED,
                            .stream = stream,
                            .addr = addr,
                            .size = size,
                            .aux = ordered ? FS_FMT_FREE_STREAM_ORDERED : 0});
}

static void free_completed(trace *t, uint64_t stream, uint64_t addr, uint64_t size)
{
    event(t, (fs_fmt_event){
                 .kind = FS_REC_FREE_COMPLETED, .stream = stream, .addr = addr, .size = size});
}

/* A failed request with the figures the allocator reported: the largest
 * free block, the device's free memory, the free bytes in other streams'
 * pools and in pending frees. */
static void oom(trace *t, uint64_t stream, uint64_t size, uint32_t stack_id, uint64_t largest,
                uint64_t device_free, uint64_t other, uint64_t pending)
{
    event(t, (fs_fmt_event){.kind = FS_REC_OOM,
                            .stream = stream,
                            .size = size,
                            .stack = stack_id,
                            .aux = largest,
                            .aux2 = device_free,
                            .aux3 = other,
                            .aux4 = pending});
}

static void stream_create(trace *t, uint64_t stream)
{
    event(t, (fs_fmt_event){.kind = FS_REC_STREAM_CREATE, .stream = stream});
}

/* ---- the scenarios ------------------------------------------------------------------ */

static const uint64_t capacity = 32 * MiB;

/* The definitions: the module, stacks 1 to 3 (the weights, an
 * activation, a buffer), the configuration and the device. */
static void define(trace *t, const char *config)
{
    volatile uint64_t outer = return_address(); /* SITE_DEFINE */
    dl_iterate_phdr(main_module, t);
    stack(t, 1, load_weights(), outer);
    stack(t, 2, alloc_activation(), outer);
    stack(t, 3, alloc_buffer(), outer);
    uint32_t text = string(t, config), name = string(t, "oom_trace");
    t->ndefs += fs_fmt_put_config(text, t->defs + t->ndefs);
    t->ndefs += fs_fmt_put_device(0, capacity, t->defs + t->ndefs);
    t->ndefs += fs_fmt_put_thread(4242, name, t->defs + t->ndefs);
}

static void segment_size(trace *t)
{
    stream_create(t, STREAM_A);
    stream_create(t, STREAM_B);
    segment(t, 0, SEG0, 20 * MiB);
    alloc(t, 0, SEG0, 8 * MiB, false, 1);
    /* each 4 MiB request wants a 20 MiB stream-ordered segment: 12 MiB
     * free on the device, 12 MiB free in the legacy stream's segment */
    for (int i = 0; i < 6; i++)
        oom(t, i % 2 ? STREAM_B : STREAM_A, 4 * MiB, 2, 12 * MiB, capacity - t->reserved, 12 * MiB,
            0);
    free_block(t, 0, SEG0, 8 * MiB, false);
}

static void other_memory(trace *t)
{
    stream_create(t, STREAM_A);
    segment(t, 0, SEG0, 20 * MiB);
    alloc(t, 0, SEG0, 4 * MiB, false, 1);
    oom(t, STREAM_A, 14 * MiB, 2, 16 * MiB, capacity - t->reserved, 16 * MiB, 0);
    free_block(t, 0, SEG0, 4 * MiB, false);
}

static void pending(trace *t)
{
    stream_create(t, STREAM_A);
    stream_create(t, STREAM_B);
    /* A: a 20 MiB segment of six 3 MiB blocks and a 2 MiB tail */
    segment(t, STREAM_A, SEG1, 20 * MiB);
    for (uint64_t i = 0; i < 6; i++)
        alloc(t, STREAM_A, SEG1 + i * 3 * MiB, 3 * MiB, true, 3);
    /* a second segment fills the device but for 2 MiB */
    segment(t, STREAM_A, SEG1 + 20 * MiB, 10 * MiB);
    alloc(t, STREAM_A, SEG1 + 20 * MiB, 10 * MiB, true, 3);
    /* A frees one block; its free has not completed when B asks, so only
     * the 2 MiB tail is free in A's pool, the largest free block */
    free_block(t, STREAM_A, SEG1 + 3 * MiB, 3 * MiB, true);
    oom(t, STREAM_B, 3 * MiB, 2, 2 * MiB, capacity - t->reserved, 2 * MiB, 3 * MiB);
    free_completed(t, STREAM_A, SEG1 + 3 * MiB, 3 * MiB);
}

int main(int argc, char **argv)
{
    static trace t;
    void (*scenario)(trace *) = NULL;
    const char *config = default_config;
    if (argc == 3 && !strcmp(argv[1], "segment")) scenario = segment_size;
    if (argc == 3 && !strcmp(argv[1], "other_memory")) scenario = other_memory;
    if (argc == 3 && !strcmp(argv[1], "pending")) scenario = pending;
    if (!scenario) {
        fprintf(stderr, "usage: oom_trace segment|other_memory|pending FILE\n");
        return 2;
    }
    fs_fmt_header h = {.version = FS_FMT_VERSION,
                       .min_reader = FS_FMT_MIN_READER,
                       .features = FS_FMT_FEAT_STACKS,
                       .pid = (uint32_t)getpid(),
                       .rank = -1,
                       .trace_level = 2,
                       .clock_mono_ns = 1000000000000ull,
                       .clock_real_ns = 1700000000000000000ull,
                       .frames = 64};
    uint8_t header[FS_FMT_HEADER_SIZE];
    snprintf(h.host, sizeof h.host, "oom-trace");
    snprintf(h.exe, sizeof h.exe, "oom_trace");
    if (!(t.f = fopen(argv[2], "wb"))) die(argv[2]);
    if (!(t.zctx = ZSTD_createCCtx()) || !(t.packed = malloc(fs_fmt_block_bound(BUF))))
        die("oom_trace");
    fs_fmt_header_encode(&h, header);
    if (fwrite(header, 1, sizeof header, t.f) != sizeof header) die(argv[2]);
    define(&t, config);
    fs_fmt_enc_reset(&t.enc, 0);
    scenario(&t);
    put_block(&t, 0, t.defs, t.ndefs);
    put_block(&t, 4242, t.events, t.nevents);
    if (fclose(t.f)) die(argv[2]);
    ZSTD_freeCCtx(t.zctx);
    free(t.packed);
    return 0;
}
