/* errcodes.c - the same bad calls must give the same return value and the
 * same last-error state with and without the shim (same_output.sh compares
 * the two runs line by line).
 *
 * Three tables, one line per row: the return code, then what
 * cudaPeekAtLastError and cudaGetLastError say after the call, and for calls
 * with an out-pointer whether it was left alone, set to NULL or set.
 *   - every stream-taking entry point the shim interposes, on a stream the
 *     program destroyed (pooled under the shim by default; run with
 *     FSDPSHIM_CONF=stream_pool:false for streams destroyed for real), with
 *     good arguments and with each bad argument the runtime may check before
 *     the stream (on the sim only: NVIDIA's runtime may crash on them);
 *   - copies and sets that end exactly at a block's end, one byte past it,
 *     at and one byte past the runtime's allocation granule and one granule
 *     past, from the block's start and from inside it, for cudaMalloc and
 *     cudaMallocAsync blocks;
 *   - null out-pointers, size 0, sizes near SIZE_MAX, unknown, interior and
 *     freed pointers, and calls that succeed while an error is pending.
 * Built twice: plain, and for the per-thread default stream (_ptsz/_ptds). */
#include "probe.h"

#include <stdbool.h>
#include <string.h>

/* The granule the runtime rounds every device allocation up to
 * (docs/sim.md, "Allocation granule"). */
#define GRANULE 512

#define HOST_SIZE (64 << 10)

struct ctx {
    void *dev;         /* cudaMalloc(1000) */
    void *dev_odd;     /* cudaMalloc(700): its granule end is not its block's */
    void *async;       /* cudaMallocAsync(1000) */
    void *src;         /* cudaMalloc(64 KiB): the other side of device copies */
    void *freed;       /* cudaMalloc'd, then freed */
    void *async_freed; /* cudaMallocAsync'd, then freed */
    cudaStream_t live, dead;
    cudaEvent_t event, dead_event;
    cudaMemPool_t pool;
    unsigned char *host; /* pageable */
};

static struct ctx ctx;
static const void *const SENTINEL = &ctx;

static void CUDART_CB nop_host_fn(void *arg)
{
    (void)arg;
}

static void CUDART_CB nop_callback(cudaStream_t s, cudaError_t e, void *arg)
{
    (void)s, (void)e, (void)arg;
}

static const char *out_state(const void *p)
{
    if (p == SENTINEL) return "untouched";
    return p ? "set" : "null";
}

/* One row: the call runs with no error pending (or with
 * cudaErrorInvalidDevice pending when `pending`), then its outcome. */
static void report(const char *table, const char *name, cudaError_t ret, bool has_out,
                   const void *out)
{
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t last = cudaGetLastError();

    printf("%s %-40s ret=%-34s peek=%-34s last=%-34s out=%s\n", table, name, cudaGetErrorName(ret),
           cudaGetErrorName(peek), cudaGetErrorName(last), has_out ? out_state(out) : "-");
}

static void set_pending(bool pending)
{
    (void)cudaGetLastError();
    if (pending && cudaSetDevice(-1) != cudaErrorInvalidDevice) {
        fprintf(stderr, "cudaSetDevice(-1) did not fail\n");
        exit(1);
    }
}

/* ---- a destroyed stream `d` in every interposed stream-taking call ---- */

#define STREAM_ROWS(X)                                                                             \
    X(query, cudaStreamQuery(d))                                                                   \
    X(synchronize, cudaStreamSynchronize(d))                                                       \
    X(get_flags, cudaStreamGetFlags(d, (unsigned *)&u))                                            \
    X(get_flags_null_out, cudaStreamGetFlags(d, NULL))                                             \
    X(get_priority, cudaStreamGetPriority(d, (int *)&u))                                           \
    X(get_priority_null_out, cudaStreamGetPriority(d, NULL))                                       \
    X(get_device, cudaStreamGetDevice(d, (int *)&u))                                               \
    X(get_device_null_out, cudaStreamGetDevice(d, NULL))                                           \
    X(get_id, cudaStreamGetId(d, &u))                                                              \
    X(get_id_null_out, cudaStreamGetId(d, NULL))                                                   \
    X(is_capturing, cudaStreamIsCapturing(d, &status))                                             \
    X(is_capturing_null_out, cudaStreamIsCapturing(d, NULL))                                       \
    X(capture_info, cudaStreamGetCaptureInfo(d, &status, NULL, NULL, NULL, NULL, NULL))            \
    X(capture_info_null_out, cudaStreamGetCaptureInfo(d, NULL, NULL, NULL, NULL, NULL, NULL))      \
    X(wait_event, cudaStreamWaitEvent(d, c->event, 0))                                             \
    X(wait_event_bad_flags, cudaStreamWaitEvent(d, c->event, 0x100))                               \
    X(wait_destroyed_event, cudaStreamWaitEvent(d, c->dead_event, 0))                              \
    X(event_record, cudaEventRecord(c->event, d))                                                  \
    X(event_record_destroyed_event, cudaEventRecord(c->dead_event, d))                             \
    X(event_record_with_flags, cudaEventRecordWithFlags(c->event, d, 0))                           \
    X(event_record_bad_flags, cudaEventRecordWithFlags(c->event, d, 0x100))                        \
    X(host_func, cudaLaunchHostFunc(d, nop_host_fn, NULL))                                         \
    X(host_func_null_fn, cudaLaunchHostFunc(d, NULL, NULL))                                        \
    X(add_callback, cudaStreamAddCallback(d, nop_callback, NULL, 0))                               \
    X(add_callback_null_fn, cudaStreamAddCallback(d, NULL, NULL, 0))                               \
    X(add_callback_bad_flags, cudaStreamAddCallback(d, nop_callback, NULL, 1))                     \
    X(memcpy_async, cudaMemcpyAsync(c->dev, c->host, 16, cudaMemcpyHostToDevice, d))               \
    X(memcpy_async_bad_kind, cudaMemcpyAsync(c->dev, c->host, 16, (enum cudaMemcpyKind)42, d))     \
    X(memcpy_async_zero, cudaMemcpyAsync(c->dev, c->host, 0, cudaMemcpyHostToDevice, d))           \
    X(memcpy_async_null_dst, cudaMemcpyAsync(NULL, c->host, 16, cudaMemcpyHostToDevice, d))        \
    X(memcpy_async_past_end, cudaMemcpyAsync(c->dev, c->host, 4096, cudaMemcpyHostToDevice, d))    \
    X(memcpy_2d_async,                                                                             \
      cudaMemcpy2DAsync(c->dev, 32, c->host, 32, 16, 4, cudaMemcpyHostToDevice, d))                \
    X(memcpy_2d_async_bad_pitch,                                                                   \
      cudaMemcpy2DAsync(c->dev, 8, c->host, 8, 16, 4, cudaMemcpyHostToDevice, d))                  \
    X(memcpy_2d_async_bad_kind,                                                                    \
      cudaMemcpy2DAsync(c->dev, 32, c->host, 32, 16, 4, (enum cudaMemcpyKind)42, d))               \
    X(memcpy_2d_async_past_end,                                                                    \
      cudaMemcpy2DAsync(c->dev, 1024, c->host, 1024, 16, 4, cudaMemcpyHostToDevice, d))            \
    X(memcpy_peer_async, cudaMemcpyPeerAsync(c->dev, 0, c->src, 0, 16, d))                         \
    X(memcpy_peer_async_bad_device, cudaMemcpyPeerAsync(c->dev, 9999, c->src, 0, 16, d))           \
    X(memcpy_peer_async_past_end, cudaMemcpyPeerAsync(c->dev, 0, c->src, 0, 4096, d))              \
    X(memset_async, cudaMemsetAsync(c->dev, 0, 16, d))                                             \
    X(memset_async_zero, cudaMemsetAsync(c->dev, 0, 0, d))                                         \
    X(memset_async_null, cudaMemsetAsync(NULL, 0, 16, d))                                          \
    X(memset_async_past_end, cudaMemsetAsync(c->dev, 0, 4096, d))                                  \
    X(memset_2d_async, cudaMemset2DAsync(c->dev, 32, 0, 16, 4, d))                                 \
    X(memset_2d_async_bad_pitch, cudaMemset2DAsync(c->dev, 8, 0, 16, 4, d))                        \
    X(memset_2d_async_past_end, cudaMemset2DAsync(c->dev, 1024, 0, 16, 4, d))                      \
    X(malloc_async, cudaMallocAsync(p, 16, d))                                                     \
    X(malloc_async_null_out, cudaMallocAsync(NULL, 16, d))                                         \
    X(malloc_async_zero, cudaMallocAsync(p, 0, d))                                                 \
    X(malloc_async_size_max, cudaMallocAsync(p, SIZE_MAX, d))                                      \
    X(malloc_from_pool, cudaMallocFromPoolAsync(p, 16, c->pool, d))                                \
    X(malloc_from_pool_null_pool, cudaMallocFromPoolAsync(p, 16, NULL, d))                         \
    X(malloc_from_pool_null_out, cudaMallocFromPoolAsync(NULL, 16, c->pool, d))                    \
    X(free_async_null, cudaFreeAsync(NULL, d))                                                     \
    X(free_async_freed, cudaFreeAsync(c->freed, d))                                                \
    X(free_async_interior, cudaFreeAsync((char *)c->dev + 256, d))                                 \
    X(destroy, cudaStreamDestroy(d))

#define DEFINE_STREAM_ROW(name, call)                                                              \
    static cudaError_t stream_##name(struct ctx *c, cudaStream_t d, void **p)                      \
    {                                                                                              \
        unsigned long long u = 0;                                                                  \
        enum cudaStreamCaptureStatus status;                                                       \
        (void)c, (void)d, (void)p, (void)u, (void)status;                                          \
        return call;                                                                               \
    }
STREAM_ROWS(DEFINE_STREAM_ROW)

struct stream_row {
    const char *name;
    cudaError_t (*run)(struct ctx *, cudaStream_t, void **);
};
#define LIST_STREAM_ROW(name, call) {#name, stream_##name},
static const struct stream_row stream_rows[] = {STREAM_ROWS(LIST_STREAM_ROW)};

/* Each way a program can get a stream, destroyed. */
static void destroyed_streams(struct ctx *c)
{
    static const struct {
        const char *name;
        unsigned flags;
        int priority;
    } kinds[] = {
        {"blocking", cudaStreamDefault, 0},
        {"nonblocking", cudaStreamNonBlocking, 0},
        {"priority", cudaStreamDefault, -1},
    };
    char table[64];

    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        CHECK(cudaStreamCreateWithPriority(&c->dead, kinds[k].flags, kinds[k].priority));
        CHECK(cudaMemsetAsync(c->src, 1, 4096, c->dead));
        CHECK(cudaStreamDestroy(c->dead));
        CHECK(cudaDeviceSynchronize());
        snprintf(table, sizeof table, "dead-%s", kinds[k].name);
        for (size_t i = 0; i < sizeof stream_rows / sizeof stream_rows[0]; i++) {
            void *p = (void *)SENTINEL;
            set_pending(false);
            cudaError_t ret = stream_rows[i].run(c, c->dead, &p);
            report(table, stream_rows[i].name, ret, true, p);
        }
    }
}

/* ---- copies and sets against block ends ---- */

typedef cudaError_t (*span_op)(struct ctx *, void *block_at, size_t n);

static cudaError_t op_memcpy_h2d(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy(d, c->host, n, cudaMemcpyHostToDevice);
}
static cudaError_t op_memcpy_d2h(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy(c->host, d, n, cudaMemcpyDeviceToHost);
}
static cudaError_t op_memcpy_d2d_to(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy(d, c->src, n, cudaMemcpyDeviceToDevice);
}
static cudaError_t op_memcpy_d2d_from(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy(c->src, d, n, cudaMemcpyDefault);
}
static cudaError_t op_memcpy_async(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpyAsync(d, c->host, n, cudaMemcpyHostToDevice, c->live);
}
static cudaError_t op_memcpy_async_legacy(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpyAsync(c->host, d, n, cudaMemcpyDeviceToHost, 0);
}
static cudaError_t op_memcpy_2d(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy2D(d, n, c->host, n, n, 1, cudaMemcpyHostToDevice);
}
static cudaError_t op_memcpy_2d_rows(struct ctx *c, void *d, size_t n)
{
    /* two rows whose second ends at n */
    return cudaMemcpy2D(d, n - 16, c->host, n - 16, 16, 2, cudaMemcpyHostToDevice);
}
static cudaError_t op_memcpy_2d_async(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpy2DAsync(c->host, n - 16, d, n - 16, 16, 2, cudaMemcpyDeviceToHost, c->live);
}
static cudaError_t op_memcpy_peer(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpyPeer(d, 0, c->src, 0, n);
}
static cudaError_t op_memcpy_peer_async(struct ctx *c, void *d, size_t n)
{
    return cudaMemcpyPeerAsync(c->src, 0, d, 0, n, c->live);
}
static cudaError_t op_memset(struct ctx *c, void *d, size_t n)
{
    (void)c;
    return cudaMemset(d, 0x5a, n);
}
static cudaError_t op_memset_async(struct ctx *c, void *d, size_t n)
{
    return cudaMemsetAsync(d, 0x5a, n, c->live);
}
static cudaError_t op_memset_2d(struct ctx *c, void *d, size_t n)
{
    (void)c;
    return cudaMemset2D(d, n - 16, 0x5a, 16, 2);
}
static cudaError_t op_memset_2d_async(struct ctx *c, void *d, size_t n)
{
    return cudaMemset2DAsync(d, n - 16, 0x5a, 16, 2, c->live);
}

static const struct {
    const char *name;
    span_op run;
} span_ops[] = {
    {"memcpy_h2d", op_memcpy_h2d},
    {"memcpy_d2h", op_memcpy_d2h},
    {"memcpy_d2d_to", op_memcpy_d2d_to},
    {"memcpy_d2d_from", op_memcpy_d2d_from},
    {"memcpy_async", op_memcpy_async},
    {"memcpy_async_legacy", op_memcpy_async_legacy},
    {"memcpy_2d", op_memcpy_2d},
    {"memcpy_2d_rows", op_memcpy_2d_rows},
    {"memcpy_2d_async", op_memcpy_2d_async},
    {"memcpy_peer", op_memcpy_peer},
    {"memcpy_peer_async", op_memcpy_peer_async},
    {"memset", op_memset},
    {"memset_async", op_memset_async},
    {"memset_2d", op_memset_2d},
    {"memset_2d_async", op_memset_2d_async},
};

static size_t granule_end(size_t n)
{
    return (n + GRANULE - 1) / GRANULE * GRANULE;
}

static void block_ends(struct ctx *c)
{
    struct {
        const char *name;
        void *base;
        size_t size;
    } blocks[] = {{"malloc1000", c->dev, 1000},
                  {"malloc700", c->dev_odd, 700},
                  {"mallocasync1000", c->async, 1000}};

    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        size_t size = blocks[b].size, end = granule_end(size);
        /* (offset, length) spans: from the start and from 256 bytes in */
        const struct {
            const char *name;
            size_t offset, length;
        } spans[] = {
            {"to_end", 0, size},
            {"one_past_end", 0, size + 1},
            {"to_granule_end", 0, end},
            {"one_past_granule_end", 0, end + 1},
            {"granule_past_end", 0, size + GRANULE},
            {"interior_to_end", 256, size - 256},
            {"interior_one_past_end", 256, size - 255},
            {"interior_to_granule_end", 256, end - 256},
            {"interior_past_granule_end", 256, end - 255},
            {"size_max", 0, SIZE_MAX},
            {"interior_size_max", 256, SIZE_MAX - 256},
        };
        char table[64], name[96];

        snprintf(table, sizeof table, "span-%s", blocks[b].name);
        for (size_t o = 0; o < sizeof span_ops / sizeof span_ops[0]; o++)
            for (size_t s = 0; s < sizeof spans / sizeof spans[0]; s++) {
                /* NVIDIA's runtime lets a set of SIZE_MAX bytes through (its
                 * end overflows) and the device then faults, which ends the
                 * context; and a copy of SIZE_MAX bytes into a cudaMallocAsync
                 * block is started, and reads the host past its end (a
                 * segfault on an H200, driver 580.159.04). The sim and the
                 * shim refuse both; the GPU run leaves them out. */
                bool overflows = spans[s].length > SIZE_MAX / 2;
                if (ON_REAL_RUNTIME && overflows &&
                    (!strncmp(span_ops[o].name, "memset", 6) || blocks[b].base == c->async))
                    continue;
                snprintf(name, sizeof name, "%s/%s", span_ops[o].name, spans[s].name);
                set_pending(false);
                cudaError_t ret =
                    span_ops[o].run(c, (char *)blocks[b].base + spans[s].offset, spans[s].length);
                report(table, name, ret, false, NULL);
                /* each row's work is done before the next row's starts: the
                 * per-thread stream of a _ptds build does not wait for others */
                CHECK(cudaDeviceSynchronize());
            }
    }
}

/* ---- everything else: out-pointers, sizes, frees, pending errors ---- */

#define MISC_ROWS(X)                                                                               \
    X(malloc_null_out, cudaMalloc(NULL, 16))                                                       \
    X(malloc_zero, cudaMalloc(p, 0))                                                               \
    X(malloc_size_max, cudaMalloc(p, SIZE_MAX))                                                    \
    X(malloc_size_max_minus_4k, cudaMalloc(p, SIZE_MAX - 4095))                                    \
    X(malloc_async_null_out, cudaMallocAsync(NULL, 16, c->live))                                   \
    X(malloc_async_zero, cudaMallocAsync(p, 0, c->live))                                           \
    X(malloc_async_size_max, cudaMallocAsync(p, SIZE_MAX, c->live))                                \
    X(malloc_async_legacy_zero, cudaMallocAsync(p, 0, 0))                                          \
    X(malloc_from_pool_null_pool, cudaMallocFromPoolAsync(p, 16, NULL, c->live))                   \
    X(malloc_from_pool_null_out, cudaMallocFromPoolAsync(NULL, 16, c->pool, c->live))              \
    X(malloc_from_pool_zero, cudaMallocFromPoolAsync(p, 0, c->pool, c->live))                      \
    X(stream_create_null_out, cudaStreamCreate(NULL))                                              \
    X(stream_create_bad_flags, cudaStreamCreateWithFlags((cudaStream_t *)p, 0x8))                  \
    X(stream_create_priority_null_out, cudaStreamCreateWithPriority(NULL, 0, 0))                   \
    X(stream_destroy_legacy, cudaStreamDestroy(cudaStreamLegacy))                                  \
    X(mem_get_info_null_free, cudaMemGetInfo(NULL, (size_t *)&u))                                  \
    X(mem_get_info_null_total, cudaMemGetInfo((size_t *)&u, NULL))                                 \
    X(default_pool_null_out, cudaDeviceGetDefaultMemPool(NULL, 0))                                 \
    X(default_pool_bad_device, cudaDeviceGetDefaultMemPool((cudaMemPool_t *)p, 9999))              \
    X(pool_get_null_pool, cudaMemPoolGetAttribute(NULL, cudaMemPoolAttrUsedMemCurrent, &u))        \
    X(pool_get_null_value, cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrUsedMemCurrent, NULL))  \
    X(pool_set_null_pool, cudaMemPoolSetAttribute(NULL, cudaMemPoolAttrUsedMemHigh, &zero))        \
    X(pool_set_high_nonzero, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh, &one))   \
    X(pool_trim_null_pool, cudaMemPoolTrimTo(NULL, 0))                                             \
    X(set_device_bad, cudaSetDevice(9999))                                                         \
    X(memcpy_zero, cudaMemcpy(c->dev, c->host, 0, cudaMemcpyHostToDevice))                         \
    X(memcpy_bad_kind, cudaMemcpy(c->dev, c->host, 16, (enum cudaMemcpyKind)42))                   \
    X(memcpy_bad_kind_past_end, cudaMemcpy(c->dev, c->host, 4096, (enum cudaMemcpyKind)42))        \
    X(memcpy_null_dst, cudaMemcpy(NULL, c->host, 16, cudaMemcpyHostToDevice))                      \
    X(memcpy_null_dst_past_end, cudaMemcpy(NULL, c->dev, 4096, cudaMemcpyDeviceToHost))            \
    X(memset_zero, cudaMemset(c->dev, 0, 0))                                                       \
    X(memset_null, cudaMemset(NULL, 0, 16))                                                        \
    X(memset_host, cudaMemset(c->host, 0, 16))                                                     \
    X(memset_2d_bad_pitch_past_end, cudaMemset2D(c->dev, 8, 0, 16, 4096))                          \
    X(memcpy_peer_bad_device_past_end, cudaMemcpyPeer(c->dev, 9999, c->src, 0, 4096))              \
    X(free_null, cudaFree(NULL))                                                                   \
    X(free_interior, cudaFree((char *)c->dev + 256))                                               \
    X(free_host, cudaFree(c->host))                                                                \
    X(free_double, cudaFree(c->freed))                                                             \
    X(free_async_null, cudaFreeAsync(NULL, c->live))                                               \
    X(free_async_interior, cudaFreeAsync((char *)c->async + 256, c->live))                         \
    X(free_async_double, cudaFreeAsync(c->async_freed, c->live))                                   \
    X(free_async_host, cudaFreeAsync(c->host, c->live))

#define DEFINE_MISC_ROW(name, call)                                                                \
    static cudaError_t misc_##name(struct ctx *c, void **p)                                        \
    {                                                                                              \
        unsigned long long u = 0, zero = 0, one = 1;                                               \
        (void)c, (void)p, (void)u, (void)zero, (void)one;                                          \
        return call;                                                                               \
    }
MISC_ROWS(DEFINE_MISC_ROW)

/* Calls that succeed must leave a pending error as it was; a pair
 * reports the first failure. */
#define PENDING_ROWS(X)                                                                            \
    X(malloc_free, (e = cudaMalloc(p, 64)) ? e : cudaFree(*p))                                     \
    X(malloc_async_free_async,                                                                     \
      (e = cudaMallocAsync(p, 64, c->live)) ? e : cudaFreeAsync(*p, c->live))                      \
    X(stream_create_destroy,                                                                       \
      (e = cudaStreamCreate((cudaStream_t *)p)) ? e : cudaStreamDestroy(*(cudaStream_t *)p))       \
    X(memcpy, cudaMemcpy(c->dev, c->host, 1000, cudaMemcpyHostToDevice))                           \
    X(memset_async, cudaMemsetAsync(c->async, 0, 1000, c->live))                                   \
    X(stream_synchronize, cudaStreamSynchronize(c->live))                                          \
    X(device_synchronize, cudaDeviceSynchronize())

#define DEFINE_PENDING_ROW(name, call)                                                             \
    static cudaError_t pending_##name(struct ctx *c, void **p)                                     \
    {                                                                                              \
        cudaError_t e;                                                                             \
        (void)c, (void)p, (void)e;                                                                 \
        return call;                                                                               \
    }
PENDING_ROWS(DEFINE_PENDING_ROW)

struct plain_row {
    const char *name;
    cudaError_t (*run)(struct ctx *, void **);
};
#define LIST_MISC_ROW(name, call) {#name, misc_##name},
static const struct plain_row misc_rows[] = {MISC_ROWS(LIST_MISC_ROW)};
#define LIST_PENDING_ROW(name, call) {#name, pending_##name},
static const struct plain_row pending_rows[] = {PENDING_ROWS(LIST_PENDING_ROW)};

static void plain_rows(struct ctx *c, const char *table, const struct plain_row *rows, size_t n,
                       bool pending)
{
    for (size_t i = 0; i < n; i++) {
        void *p = (void *)SENTINEL;
        set_pending(pending);
        cudaError_t ret = rows[i].run(c, &p);
        report(table, rows[i].name, ret, !pending, p);
        CHECK(cudaDeviceSynchronize());
    }
}

static void setup(struct ctx *c)
{
    c->host = calloc(1, HOST_SIZE);
    EXPECT(c->host);
    CHECK(cudaStreamCreate(&c->live));
    CHECK(cudaMalloc(&c->dev, 1000));
    CHECK(cudaMalloc(&c->dev_odd, 700));
    CHECK(cudaMalloc(&c->src, HOST_SIZE));
    CHECK(cudaMallocAsync(&c->async, 1000, c->live));
    CHECK(cudaMalloc(&c->freed, 4096));
    CHECK(cudaFree(c->freed));
    CHECK(cudaMallocAsync(&c->async_freed, 4096, c->live));
    CHECK(cudaFreeAsync(c->async_freed, c->live));
    CHECK(cudaEventCreate(&c->event));
    CHECK(cudaEventCreate(&c->dead_event));
    CHECK(cudaEventDestroy(c->dead_event));
    CHECK(cudaDeviceGetDefaultMemPool(&c->pool, 0));
    CHECK(cudaDeviceSynchronize());
}

int main(void)
{
    /* a line at a time: where a run ends early, its last line says where */
    setvbuf(stdout, NULL, _IOLBF, 0);
    watchdog(60);
    require_device();
    setup(&ctx);
    /* undefined on NVIDIA's runtime, which crashed on them (driver 580,
     * CUDA 13.0): a destroyed handle points at memory it has freed */
    if (!ON_REAL_RUNTIME) destroyed_streams(&ctx);
    block_ends(&ctx);
    plain_rows(&ctx, "misc", misc_rows, sizeof misc_rows / sizeof misc_rows[0], false);
    plain_rows(&ctx, "pending", pending_rows, sizeof pending_rows / sizeof pending_rows[0], true);
    CHECK(cudaDeviceSynchronize());
    return 0;
}
