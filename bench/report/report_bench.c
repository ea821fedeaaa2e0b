/* report_bench.c - `fsdpshim report` throughput and memory (SPEC section 14:
 * at least 5 million events a second on one core, memory proportional to the
 * live set and the unique stacks, not to the trace's length).
 *
 * It writes a trace of N events (--events, default 50 million) through the
 * format library, as the trace writer does: per-thread 64 KiB blocks, zstd
 * level 1, definitions in blocks of their own ahead of the events that name
 * them. The workload looks like a sharded training job's rank: a few
 * thousand native stacks (deep ones through a Python interpreter, shared
 * outer frames) and Python stacks, picked with a hot head and a long tail,
 * each Python stack with a few native ones, and a fifth of the allocations
 * without Python frames;
 * four devices with three streams each, one thread per device and a
 * collectives thread; alloc / free_requested / free_completed around a live
 * set of a few thousand blocks per device, segments as the reserved total
 * grows, NVTX ranges per layer, all-gathers and reduce-scatters, rate-limiter
 * waits. Then it runs `fsdpshim report` on it, pinned to one CPU (as
 * `taskset -c`), and takes the child's CPU time and peak RSS from wait4:
 * events per second are events over that CPU time. The trace goes to
 * $TMPDIR (else /tmp) and is deleted at the end.
 *
 *   report_bench [--events N] [--ranks R] [--cli PATH] [--keep]
 *
 * --ranks R: then `report` on the trace named R times, as a job's R ranks,
 * on every CPU it may use (the ranks are read side by side): its wall time,
 * and its rate against one rank's on one core.
 *
 * The last line is exactly
 *   summary: events_per_s=<n> peak_rss_mb=<n>
 * The CLI defaults to ../bin/fsdpshim beside this binary; FSDPSHIM or --cli
 * overrides it. */
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define DEVICES         4
#define STREAMS         3 /* per device: the legacy stream, compute, communication */
#define THREADS         (DEVICES + 1)
#define NATIVE_STACKS   4000
#define PY_STACKS       1500
#define NATIVE_VARIANTS 4 /* native stacks per Python stack */
#define LAYERS          48
#define LIVE_TARGET     3000         /* blocks per device the job holds in its steady state */
#define SLOT_SPAN       (1ull << 28) /* address room of one live slot: sizes stay below */
#define BUF_SIZE        (64u << 10)  /* raw bytes of one block, as the writer's buffers */
#define EVENT_ROOM      256
#define SEGMENT         (20ull << 20)
#define MAX_RANKS       256 /* --ranks */

static const char *const module_paths[] = {
    "/usr/bin/python3.11",
    "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_python.so",
    "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
    "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
    "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so",
    "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13",
};
#define MODULES        (sizeof module_paths / sizeof module_paths[0])
#define MODULE_BASE(m) (0x7f0000000000ull + (uint64_t)(m)*0x10000000ull)

/* ---- the output file: blocks as the writer packs them ------------------------- */

typedef struct sink {
    FILE *f;
    void *zctx;
    uint8_t *packed;
    uint64_t bytes, blocks;
} sink;

static void put_block(sink *s, uint32_t tid, uint64_t t0, const uint8_t *raw, size_t len)
{
    size_t n = fs_fmt_block_pack(s->zctx, 1, tid, t0, raw, len, s->packed);
    if (fwrite(s->packed, 1, n, s->f) != n) {
        perror("report_bench: writing the trace");
        exit(1);
    }
    s->bytes += n;
    s->blocks++;
}

/* Definitions not yet written: they go out, as a block of thread 0, before
 * any event block, so that each precedes every event that names it. */
typedef struct defs {
    uint8_t raw[BUF_SIZE];
    size_t len;
    uint64_t time_ns;
} defs;

static void defs_flush(sink *s, defs *d)
{
    if (!d->len) return;
    put_block(s, 0, d->time_ns, d->raw, d->len);
    d->len = 0;
}

static uint8_t *defs_room(sink *s, defs *d)
{
    if (d->len + FS_FMT_MAX_RECORD > BUF_SIZE) defs_flush(s, d);
    return d->raw + d->len;
}

typedef struct thread_buf {
    uint32_t tid;
    uint8_t raw[BUF_SIZE];
    size_t len;
    uint64_t t0;
    fs_fmt_enc enc;
} thread_buf;

static void thread_flush(sink *s, defs *d, thread_buf *b)
{
    if (!b->len) return;
    defs_flush(s, d);
    put_block(s, b->tid, b->t0, b->raw, b->len);
    b->len = 0;
}

static void emit(sink *s, defs *d, thread_buf *b, const fs_fmt_event *ev)
{
    if (b->len + EVENT_ROOM > BUF_SIZE) thread_flush(s, d, b);
    if (!b->len) {
        b->t0 = ev->time_ns;
        fs_fmt_enc_reset(&b->enc, ev->time_ns);
    }
    b->len += fs_fmt_put_event(&b->enc, ev, b->raw + b->len);
}

/* ---- the workload ------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double uniform(void)
{
    return (double)(next_random() >> 11) / (double)(1ull << 53);
}

/* An index in [0, n) with a hot head and a long tail, as call sites are. */
static uint32_t skewed(uint32_t n)
{
    double u = uniform();
    return (uint32_t)((double)n * u * u * u);
}

typedef struct stack_def {
    uint32_t n;
    uint64_t frames[48];
} stack_def;

typedef struct live_block {
    uint64_t size;
    uint32_t slot;
} live_block;

typedef struct device_state {
    live_block *live; /* the live blocks, in no order */
    uint32_t *free_slots;
    uint32_t nlive, nfree, next_slot;
    uint64_t allocated, reserved;
    uint32_t annot; /* the device thread's annotation stack: step/PHASE/layers.N */
    uint32_t layer;
    bool forward;
} device_state;

typedef struct workload {
    sink out;
    defs defs;
    thread_buf threads[THREADS];
    device_state dev[DEVICES];
    stack_def *stacks;
    bool *stack_defined, *pystack_defined;
    uint32_t next_string;
    uint32_t py_files, py_funcs; /* first string id of each */
    uint32_t annot_step, annot_phase[2], annot_layer[2][LAYERS];
    uint32_t step_name, phase_name[2], layer_name[LAYERS]; /* string ids */
    uint64_t now, events, target, peak_live;
} workload;

static uint32_t define_string(workload *w, const char *text)
{
    uint32_t id = ++w->next_string;
    uint8_t *p = defs_room(&w->out, &w->defs);
    w->defs.len += fs_fmt_put_string(id, text, strlen(text), p);
    return id;
}

/* Native stacks: allocator frames innermost, then the operator's frames in
 * libtorch, the dispatcher, the Python binding and the interpreter's
 * evaluation loop outermost. Outer frames come from small pools, inner ones
 * from larger, so that stacks share their outer parts as real ones do. */
static void make_stacks(workload *w)
{
    w->stacks = calloc(NATIVE_STACKS, sizeof *w->stacks);
    w->stack_defined = calloc(NATIVE_STACKS, sizeof *w->stack_defined);
    w->pystack_defined = calloc(PY_STACKS, sizeof *w->pystack_defined);
    if (!w->stacks || !w->stack_defined || !w->pystack_defined) {
        fprintf(stderr, "report_bench: out of memory\n");
        exit(1);
    }
    static const struct {
        unsigned module, pool, depth;
    } layers[] = {
        {7, 4, 1},    {4, 6, 3},   {5, 20, 2},   {3, 600, 4},
        {2, 1500, 6}, {1, 400, 4}, {0, 120, 12}, {6, 2, 2},
    };
    for (uint32_t s = 0; s < NATIVE_STACKS; s++) {
        stack_def *st = &w->stacks[s];
        for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++)
            for (unsigned k = 0; k < layers[l].depth && st->n < 48; k++) {
                uint64_t pick = next_random() % layers[l].pool;
                st->frames[st->n++] = MODULE_BASE(layers[l].module) + 0x1000 + pick * 0x1a4 + k * 8;
            }
    }
}

static void define_stack(workload *w, uint32_t s)
{
    uint8_t *p = defs_room(&w->out, &w->defs);
    w->defs.len += fs_fmt_put_stack(s + 1, w->stacks[s].frames, w->stacks[s].n, p);
    w->stack_defined[s] = true;
}

static void define_pystack(workload *w, uint32_t s)
{
    fs_fmt_pyframe frames[16];
    uint64_t seed = rng;
    uint32_t n = 5 + s % 11;
    rng = 0x2545f4914f6cdd1dull * (s + 1); /* the same frames whatever the order */
    for (uint32_t i = 0; i < n; i++)
        frames[i] = (fs_fmt_pyframe){.file = w->py_files + (uint32_t)(next_random() % 200),
                                     .function = w->py_funcs + (uint32_t)(next_random() % 1000),
                                     .line = 1 + (uint32_t)(next_random() % 3000)};
    rng = seed;
    uint8_t *p = defs_room(&w->out, &w->defs);
    w->defs.len += fs_fmt_put_pystack(s + 1, frames, n, p);
    w->pystack_defined[s] = true;
}

static void define_everything_else(workload *w)
{
    char text[128];
    uint8_t *p;

    for (size_t m = 0; m < MODULES; m++) {
        uint32_t path = define_string(w, module_paths[m]);
        uint8_t build_id[20];
        for (size_t i = 0; i < sizeof build_id; i++)
            build_id[i] = (uint8_t)(m * 31 + i);
        p = defs_room(&w->out, &w->defs);
        w->defs.len +=
            fs_fmt_put_module(MODULE_BASE(m), 0x8000000, path, build_id, sizeof build_id, p);
    }
    w->py_files = w->next_string + 1;
    for (int i = 0; i < 200; i++) {
        snprintf(text, sizeof text, "/opt/venv/lib/python3.11/site-packages/model/part%d.py", i);
        define_string(w, text);
    }
    w->py_funcs = w->next_string + 1;
    for (int i = 0; i < 1000; i++) {
        snprintf(text, sizeof text, "module_%d.forward_fn_%d", i / 7, i);
        define_string(w, text);
    }
    /* annotations: step, step/forward|backward, step/PHASE/layers.N */
    uint32_t id = 0;
    w->step_name = define_string(w, "step");
    for (int ph = 0; ph < 2; ph++)
        w->phase_name[ph] = define_string(w, ph ? "backward" : "forward");
    for (int l = 0; l < LAYERS; l++) {
        snprintf(text, sizeof text, "layers.%d", l);
        w->layer_name[l] = define_string(w, text);
    }
    w->annot_step = ++id;
    p = defs_room(&w->out, &w->defs);
    w->defs.len += fs_fmt_put_annot(id, 0, 0, w->step_name, p);
    for (int ph = 0; ph < 2; ph++) {
        w->annot_phase[ph] = ++id;
        p = defs_room(&w->out, &w->defs);
        w->defs.len += fs_fmt_put_annot(id, w->annot_step, 0, w->phase_name[ph], p);
        for (int l = 0; l < LAYERS; l++) {
            w->annot_layer[ph][l] = ++id;
            p = defs_room(&w->out, &w->defs);
            w->defs.len += fs_fmt_put_annot(id, w->annot_phase[ph], 0, w->layer_name[l], p);
        }
    }
    for (int t = 0; t < THREADS; t++) {
        snprintf(text, sizeof text, t < DEVICES ? "pt_autograd_%d" : "pt_nccl_watchdg", t);
        uint32_t name = define_string(w, text);
        p = defs_room(&w->out, &w->defs);
        w->defs.len += fs_fmt_put_thread(w->threads[t].tid, name, p);
    }
    p = defs_room(&w->out, &w->defs);
    w->defs.len += fs_fmt_put_rank(0, 8, p);
}

static fs_fmt_event event_of(workload *w, int kind, int device, uint64_t stream)
{
    w->now += 40 + next_random() % 400;
    fs_fmt_event ev = {
        .kind = (uint8_t)kind, .time_ns = w->now, .device = device, .stream = stream};
    if (device >= 0) {
        ev.allocated = w->dev[device].allocated;
        ev.reserved = w->dev[device].reserved;
    }
    return ev;
}

static void put(workload *w, int thread, const fs_fmt_event *ev)
{
    emit(&w->out, &w->defs, &w->threads[thread], ev);
    w->events++;
}

static uint64_t stream_of(int device, int which)
{
    return which ? 0x5500000000ull + (uint64_t)device * 0x100 + (uint64_t)which * 0x10 : 0;
}

/* Sizes as a transformer's: many small tensors, activations of a few MiB,
 * now and then a flat parameter shard of tens of MiB; multiples of 512. */
static uint64_t pick_size(void)
{
    double u = uniform();
    uint64_t bytes;
    if (u < 0.55)
        bytes = 512 * (1 + next_random() % 2048);
    else if (u < 0.95)
        bytes = (1ull << 20) * (1 + next_random() % 16);
    else
        bytes = (1ull << 20) * (16 + next_random() % 112);
    return bytes;
}

static void alloc_one(workload *w, int d)
{
    device_state *dev = &w->dev[d];
    /* as in a training job, the Python line decides most of the native
     * path (a few dispatch variants each); a fifth of the allocations come
     * from threads without Python frames (autograd's backward, NCCL's) */
    uint32_t py = skewed(PY_STACKS), s;
    bool python = uniform() < 0.8;
    if (python)
        s = (py * 7 + skewed(NATIVE_VARIANTS)) % NATIVE_STACKS;
    else
        s = skewed(NATIVE_STACKS);
    uint64_t size = pick_size();
    uint32_t slot = dev->nfree ? dev->free_slots[--dev->nfree] : dev->next_slot++;

    if (!w->stack_defined[s]) define_stack(w, s);
    if (python && !w->pystack_defined[py]) define_pystack(w, py);
    dev->allocated += size;
    while (dev->allocated > dev->reserved) {
        dev->reserved += size > SEGMENT ? (size + SEGMENT - 1) / SEGMENT * SEGMENT : SEGMENT;
        fs_fmt_event seg = event_of(w, FS_REC_SEGMENT_ALLOC, d, stream_of(d, 1));
        seg.addr = (uint64_t)(d + 1) << 44 | dev->reserved;
        seg.size = SEGMENT;
        seg.allocated = dev->allocated - size;
        put(w, d, &seg);
    }
    fs_fmt_event ev = event_of(w, FS_REC_ALLOC, d, stream_of(d, size > (1u << 20) ? 1 : 0));
    ev.addr = (uint64_t)(d + 1) << 44 | (uint64_t)slot * SLOT_SPAN;
    ev.size = size;
    ev.requested = size - (next_random() % 2 ? 0 : 256);
    ev.stack = s + 1;
    ev.pystack = python ? py + 1 : 0;
    ev.annot = dev->annot;
    ev.aux = size <= (1u << 20) ? 1 : 2;
    put(w, d, &ev);
    dev->live[dev->nlive++] = (live_block){size, slot};
}

static void free_one(workload *w, int d)
{
    device_state *dev = &w->dev[d];
    /* mostly the newest blocks (activations, temporaries), sometimes old */
    uint32_t back = next_random() % 4 ? (uint32_t)(next_random() % 8) : skewed(dev->nlive);
    uint32_t i = dev->nlive - 1 - (back < dev->nlive ? back : 0);
    live_block b = dev->live[i];
    dev->live[i] = dev->live[--dev->nlive];
    dev->free_slots[dev->nfree++] = b.slot;

    uint64_t addr = (uint64_t)(d + 1) << 44 | (uint64_t)b.slot * SLOT_SPAN;
    uint64_t stream = stream_of(d, b.size > (1u << 20) ? 1 : 0);
    fs_fmt_event ev = event_of(w, FS_REC_FREE_REQUESTED, d, stream);
    ev.addr = addr;
    ev.size = b.size;
    put(w, d, &ev);
    dev->allocated -= b.size;
    ev = event_of(w, FS_REC_FREE_COMPLETED, d, stream);
    ev.addr = addr;
    ev.size = b.size;
    put(w, d, &ev);
}

static void annotate(workload *w, int d, int kind, uint32_t annot, uint32_t name)
{
    fs_fmt_event ev = event_of(w, kind, -1, 0);
    ev.annot = annot;
    ev.name = name;
    w->dev[d].annot = annot;
    put(w, d, &ev);
}

/* A layer boundary on device d's thread: its NVTX range moves to the next
 * layer (and to the other phase after the last), and the collectives
 * thread gathers the next layer's parameters (reduces its gradients in the
 * backward phase), sometimes after a wait in the rate limiter. */
static void next_layer(workload *w, int d)
{
    device_state *dev = &w->dev[d];
    int phase = dev->forward ? 0 : 1;
    annotate(w, d, FS_REC_ANNOT_POP, w->annot_phase[phase], 0);
    if (++dev->layer == LAYERS) {
        dev->layer = 0;
        dev->forward = !dev->forward;
        annotate(w, d, FS_REC_ANNOT_POP, w->annot_step, 0);
        phase = dev->forward ? 0 : 1;
        annotate(w, d, FS_REC_ANNOT_PUSH, w->annot_phase[phase], w->phase_name[phase]);
    }
    annotate(w, d, FS_REC_ANNOT_PUSH, w->annot_layer[phase][dev->layer], w->layer_name[dev->layer]);

    int c = DEVICES; /* the collectives thread */
    fs_fmt_event ev;
    if (next_random() % 8 == 0) {
        ev = event_of(w, FS_REC_RL_WAIT_START, d, stream_of(d, 2));
        ev.aux = 2;
        ev.aux2 = 96ull << 20;
        put(w, c, &ev);
        ev = event_of(w, FS_REC_RL_WAIT_END, d, stream_of(d, 2));
        ev.aux = 0x1000 + dev->layer;
        put(w, c, &ev);
    }
    ev = event_of(w, FS_REC_COLLECTIVE, d, stream_of(d, 2));
    ev.addr = (uint64_t)(d + 1) << 44;
    ev.size = 48ull << 20;
    ev.aux = dev->forward ? FS_COLL_ALL_GATHER : FS_COLL_REDUCE_SCATTER;
    ev.aux2 = 0xc0ffee00 + (uint64_t)d;
    put(w, c, &ev);
}

static void generate(workload *w)
{
    define_everything_else(w);
    for (int d = 0; d < DEVICES; d++) {
        for (int s = 1; s < STREAMS; s++) {
            fs_fmt_event ev = event_of(w, FS_REC_STREAM_CREATE, d, stream_of(d, s));
            ev.aux = 1;
            put(w, d, &ev);
        }
        w->dev[d].forward = true;
        annotate(w, d, FS_REC_ANNOT_PUSH, w->annot_step, w->step_name);
        annotate(w, d, FS_REC_ANNOT_PUSH, w->annot_phase[0], w->phase_name[0]);
        annotate(w, d, FS_REC_ANNOT_PUSH, w->annot_layer[0][0], w->layer_name[0]);
    }
    while (w->events < w->target) {
        int d = (int)(next_random() % DEVICES);
        device_state *dev = &w->dev[d];
        /* the live set hovers around its target: more frees above it */
        double p_alloc = dev->nlive < LIVE_TARGET / 2 ? 0.9 : dev->nlive > LIVE_TARGET ? 0.3 : 0.5;
        if (!dev->nlive || (dev->nlive < 2 * LIVE_TARGET && uniform() < p_alloc))
            alloc_one(w, d);
        else
            free_one(w, d);
        if (next_random() % 40 == 0) next_layer(w, d);
        uint64_t live = 0;
        for (int k = 0; k < DEVICES; k++)
            live += w->dev[k].nlive;
        if (live > w->peak_live) w->peak_live = live;
    }
    for (int t = 0; t < THREADS; t++)
        thread_flush(&w->out, &w->defs, &w->threads[t]);
    defs_flush(&w->out, &w->defs);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

typedef struct trace_stats {
    uint64_t bytes, blocks, peak_live;
} trace_stats;

static bool write_trace(const char *path, uint64_t events, trace_stats *st)
{
    static workload w; /* large: the thread buffers */
    fs_fmt_header h = {.version = FS_FMT_VERSION,
                       .min_reader = FS_FMT_MIN_READER,
                       .features = FS_FMT_FEAT_STACKS | FS_FMT_FEAT_PYTHON,
                       .pid = 4242,
                       .rank = 0,
                       .trace_level = 3,
                       .clock_mono_ns = 1000000000000ull,
                       .clock_real_ns = 1700000000000000000ull,
                       .frames = 64};
    uint8_t header[FS_FMT_HEADER_SIZE];

    snprintf(h.host, sizeof h.host, "report-bench");
    snprintf(h.exe, sizeof h.exe, "/usr/bin/python3.11");
    w.target = events;
    w.out.f = fopen(path, "wbx");
    w.out.zctx = ZSTD_createCCtx();
    w.out.packed = malloc(fs_fmt_block_bound(BUF_SIZE));
    for (int d = 0; d < DEVICES; d++) {
        w.dev[d].live = malloc(4 * LIVE_TARGET * sizeof *w.dev[d].live);
        w.dev[d].free_slots = malloc(4 * LIVE_TARGET * sizeof *w.dev[d].free_slots);
        if (!w.dev[d].live || !w.dev[d].free_slots) return false;
    }
    if (!w.out.f || !w.out.zctx || !w.out.packed) {
        fprintf(stderr, "report_bench: %s: %s\n", path, strerror(errno));
        return false;
    }
    for (int t = 0; t < THREADS; t++)
        w.threads[t].tid = 5000 + (uint32_t)t;
    fs_fmt_header_encode(&h, header);
    fwrite(header, 1, sizeof header, w.out.f);
    w.out.bytes = sizeof header;
    make_stacks(&w);
    generate(&w);
    bool ok = fclose(w.out.f) == 0;
    *st = (trace_stats){w.out.bytes, w.out.blocks, w.peak_live};
    ZSTD_freeCCtx(w.out.zctx);
    free(w.out.packed);
    free(w.stacks);
    free(w.stack_defined);
    free(w.pystack_defined);
    for (int d = 0; d < DEVICES; d++) {
        free(w.dev[d].live);
        free(w.dev[d].free_slots);
    }
    return ok;
}

/* ---- timing `fsdpshim report` ---------------------------------------------------- */

/* The first CPU this process may run on: CPU 0 unless a cpuset says otherwise. */
static int first_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) return c;
    return 0;
}

/* What one run of `fsdpshim report` took: wall time, the CPU time it used
 * (user and system), its peak resident size. */
typedef struct run_cost {
    double wall_s, cpu_s;
    long rss_kib;
} run_cost;

static double tv_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Runs CLI report with the trace named `copies` times (the ranks of a job),
 * on CPU `cpu` (-1: on every CPU it may use), its output thrown away (its
 * stderr in errpath). */
static bool time_report(const char *cli, const char *trace, int copies, const char *errpath,
                        int cpu, run_cost *cost)
{
    struct timespec t0;
    struct rusage ru;
    int status;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        cpu_set_t set;
        char *args[MAX_RANKS + 3] = {(char *)cli, "report"};
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (cpu >= 0) sched_setaffinity(0, sizeof set, &set);
        int out = open("/dev/null", O_WRONLY),
            err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || err < 0) _exit(127);
        dup2(out, 1);
        dup2(err, 2);
        for (int i = 0; i < copies; i++)
            args[2 + i] = (char *)trace;
        execv(cli, args);
        _exit(127);
    }
    if (wait4(pid, &status, 0, &ru) != pid) return false;
    cost->wall_s = seconds_since(&t0);
    cost->cpu_s = tv_seconds(ru.ru_utime) + tv_seconds(ru.ru_stime);
    cost->rss_kib = ru.ru_maxrss;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void default_cli(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(buf, len, "fsdpshim");
        return;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    if (snprintf(buf, len, "%s/../bin/fsdpshim", self) >= (int)len) snprintf(buf, len, "fsdpshim");
}

static char trace_path[PATH_MAX], err_path[PATH_MAX];
static bool keep;

static void remove_files(void)
{
    if (!keep && trace_path[0]) unlink(trace_path);
    if (err_path[0]) unlink(err_path);
}

static void on_signal(int sig)
{
    remove_files();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Prints what `report` printed on stderr, after a failed run. */
static void report_failed(const char *cli, const char *trace)
{
    char line[512];
    FILE *e = fopen(err_path, "r");
    fprintf(stderr, "report_bench: FAILED: %s report %s\n", cli, trace);
    while (e && fgets(line, sizeof line, e))
        fputs(line, stderr);
    if (e) fclose(e);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: report_bench [--events N] [--ranks R] [--cli PATH] [--keep]\n"
                 "  --events N  events in the generated trace [50000000]\n"
                 "  --ranks R   then also report on the trace named R times, as the R ranks of\n"
                 "              a job, on every CPU (the analyzer reads ranks side by side)\n"
                 "  --cli PATH  the fsdpshim to time [FSDPSHIM, else ../bin/fsdpshim]\n"
                 "  --keep      leave the trace in $TMPDIR (its path is printed)\n");
}

int main(int argc, char **argv)
{
    uint64_t events = 50000000;
    int ranks = 0;
    trace_stats st;
    char cli[PATH_MAX];
    const char *tmp = getenv("TMPDIR");

    if (getenv("FSDPSHIM"))
        snprintf(cli, sizeof cli, "%s", getenv("FSDPSHIM"));
    else
        default_cli(cli, sizeof cli);
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--events") && i + 1 < argc) {
            events = strtoull(argv[++i], &end, 10);
            if (*end || !events) {
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 1 || r > MAX_RANKS) {
                usage(stderr);
                return 2;
            }
            ranks = (int)r;
        } else if (!strcmp(argv[i], "--cli") && i + 1 < argc) {
            snprintf(cli, sizeof cli, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "--keep")) {
            keep = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(trace_path, sizeof trace_path, "%s/report_bench-%d.fst", tmp, (int)getpid());
    snprintf(err_path, sizeof err_path, "%s/report_bench-%d.err", tmp, (int)getpid());
    atexit(remove_files);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    printf("report_bench: %" PRIu64 " events: %d native and %d Python stacks, %d devices x %d "
           "streams, %d threads, a live set of about %d blocks per device\n",
           events, NATIVE_STACKS, PY_STACKS, DEVICES, STREAMS, THREADS, LIVE_TARGET);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!write_trace(trace_path, events, &st)) return 1;
    printf("  trace: %s, %.1f MB in %" PRIu64 " blocks (%.2f bytes per event), written in %.1f "
           "s; at most %" PRIu64 " blocks live\n",
           trace_path, (double)st.bytes / 1e6, st.blocks, (double)st.bytes / (double)events,
           seconds_since(&t0), st.peak_live);
    fflush(stdout);

    int cpu = first_cpu();
    run_cost cost;
    if (!time_report(cli, trace_path, 1, err_path, cpu, &cost)) {
        report_failed(cli, trace_path);
        return 1;
    }
    /* The rate is taken on the CPU time the command used: pinned to one CPU,
     * that is its time on one core, which other work on a shared machine
     * does not inflate as it does the wall time (on an idle one they agree). */
    double rate = (double)events / cost.cpu_s, mb = (double)cost.rss_kib / 1024;
    printf("  %s report on CPU %d: %.2f s of CPU (%.2f s wall): %.2f million events per second, "
           "peak RSS %.1f MB\n",
           cli, cpu, cost.cpu_s, cost.wall_s, rate / 1e6, mb);
    if (ranks) {
        /* R ranks on the CPUs this process may use: the wall time is the
         * figure (the ranks share the cores), against R times one rank's */
        cpu_set_t set;
        int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        run_cost all;
        if (!time_report(cli, trace_path, ranks, err_path, -1, &all)) {
            report_failed(cli, trace_path);
            return 1;
        }
        printf("  %d ranks on %d CPUs: %.2f s wall (%.2f s of CPU): %.2f million events per "
               "second, %.2fx one rank's rate on one core; peak RSS %.1f MB\n",
               ranks, cores, all.wall_s, all.cpu_s, (double)events * ranks / all.wall_s / 1e6,
               (double)events * ranks / all.wall_s / rate, (double)all.rss_kib / 1024);
    }
    printf("summary: events_per_s=%.0f peak_rss_mb=%.0f\n", rate, mb);
    return 0;
}
