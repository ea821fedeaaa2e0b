/* common.c - the transcript, block patterns, stream holds, watchdog and
 * leak check that every stress program uses (see stress.h). */
#include "stress.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_MAGIC   0x53545253u /* "STRS" */
#define TAG_BYTES   16
#define MAX_DEVICES 8

struct tag {
    uint32_t magic, id, size, how;
};

static const char *program_name = "stress";
static struct tag *tags;
static unsigned tag_count;
static atomic_uint tags_used;
static atomic_uint failures;
static atomic_uint checked;
static unsigned scale_percent = 100;
static size_t mem_start[MAX_DEVICES];

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static char phase[160] = "start";
static atomic_bool finished;
static unsigned watchdog_seconds;

/* ---- transcript ---- */

static void log_vappend(struct st_log *log, const char *fmt, va_list ap)
{
    char line[512];
    int n = vsnprintf(line, sizeof line, fmt, ap);

    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    size_t need = log->len + strlen(log->who) + 2 + (size_t)n + 2;
    if (need > log->cap) {
        log->cap = need * 2 > 4096 ? need * 2 : 4096;
        log->buf = realloc(log->buf, log->cap);
        if (!log->buf) abort();
    }
    log->len += (size_t)sprintf(log->buf + log->len, "%s: %s\n", log->who, line);
}

void st_log_init(struct st_log *log, const char *who_fmt, ...)
{
    va_list ap;

    memset(log, 0, sizeof *log);
    va_start(ap, who_fmt);
    vsnprintf(log->who, sizeof log->who, who_fmt, ap);
    va_end(ap);
}

void st_logf(struct st_log *log, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vappend(log, fmt, ap);
    va_end(ap);
}

void st_log_flush(struct st_log *log)
{
    if (log->len) fwrite(log->buf, 1, log->len, stdout);
    fflush(stdout);
    free(log->buf);
    log->buf = NULL;
    log->len = log->cap = 0;
}

static cudaError_t vrec(struct st_log *log, cudaError_t rc, bool must_succeed, const char *fmt,
                        va_list ap)
{
    cudaError_t last = cudaGetLastError();
    char what[256];

    vsnprintf(what, sizeof what, fmt, ap);
    st_logf(log, "%s -> %s / last %s", what, cudaGetErrorName(rc), cudaGetErrorName(last));
    if (must_succeed && rc != cudaSuccess)
        st_fail("CALL", "%s: %s returned %s (%d)", log->who, what, cudaGetErrorName(rc), (int)rc);
    return rc;
}

cudaError_t st_rec(struct st_log *log, cudaError_t rc, const char *what_fmt, ...)
{
    va_list ap;

    va_start(ap, what_fmt);
    vrec(log, rc, false, what_fmt, ap);
    va_end(ap);
    return rc;
}

cudaError_t st_ok(struct st_log *log, cudaError_t rc, const char *what_fmt, ...)
{
    va_list ap;

    va_start(ap, what_fmt);
    vrec(log, rc, true, what_fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- set-up, failures, scale ---- */

void st_fail(const char *kind, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s %s: %s\n", kind, program_name, msg);
    atomic_fetch_add(&failures, 1);
}

void st_init(const char *program, unsigned max_blocks)
{
    const char *scale = getenv("FSDPSHIM_STRESS_SCALE");
    cudaError_t e;

    program_name = program;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (scale && atoi(scale) > 0) scale_percent = (unsigned)atoi(scale);
    tag_count = max_blocks;
    e = cudaMallocHost((void **)&tags, (size_t)max_blocks * sizeof *tags);
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: cudaMallocHost for tags: %s\n", program, cudaGetErrorName(e));
        exit(2);
    }
}

unsigned st_seed(void)
{
    const char *seed = getenv("FSDPSHIM_STRESS_SEED");
    return seed ? (unsigned)strtoul(seed, NULL, 0) : 1u;
}

unsigned st_scaled(unsigned n)
{
    unsigned s = (unsigned)((unsigned long long)n * scale_percent / 100);
    return s ? s : 1;
}

unsigned char *st_host_buffer(size_t size)
{
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, size);

    if (e != cudaSuccess) {
        fprintf(stderr, "%s: cudaMallocHost(%zu): %s\n", program_name, size, cudaGetErrorName(e));
        exit(2);
    }
    return p;
}

/* ---- blocks ---- */

const char *st_how_name(enum st_how how)
{
    switch (how) {
    case ST_MALLOC:
        return "cudaMalloc";
    case ST_ASYNC_PT:
        return "cudaMallocAsync(per-thread stream)";
    case ST_ASYNC_CREATED:
        return "cudaMallocAsync(created stream)";
    case ST_ASYNC_LEGACY:
        return "cudaMallocAsync(legacy stream)";
    case ST_FROM_POOL:
        return "cudaMallocFromPoolAsync(default pool)";
    }
    return "?";
}

static void id_name(uint32_t id, char *out, size_t n)
{
    unsigned thread = id >> 16 & 0xffu, seq = id & 0xffffu;

    if (thread == ST_MAIN)
        snprintf(out, n, "r%u/main#%u", id >> 24, seq);
    else
        snprintf(out, n, "r%u/t%u#%u", id >> 24, thread, seq);
}

static unsigned char body_byte(uint32_t id)
{
    uint32_t h = id * 2654435761u;
    return (unsigned char)(1 + (h >> 24) % 255);
}

cudaError_t st_alloc(struct st_log *log, struct st_block *b, uint32_t id, size_t size,
                     enum st_how how, cudaStream_t stream)
{
    char name[32];
    cudaError_t e;
    cudaMemPool_t pool;
    int dev = 0;

    id_name(id, name, sizeof name);
    memset(b, 0, sizeof *b);
    switch (how) {
    case ST_MALLOC:
        e = cudaMalloc(&b->p, size);
        break;
    case ST_FROM_POOL:
        e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, dev);
        if (e == cudaSuccess) e = cudaMallocFromPoolAsync(&b->p, size, pool, stream);
        break;
    default:
        e = cudaMallocAsync(&b->p, size, stream);
        break;
    }
    st_rec(log, e, "alloc %s %zu bytes by %s", name, size, st_how_name(how));
    if (e != cudaSuccess) {
        b->p = NULL;
        return e;
    }
    unsigned slot = atomic_fetch_add(&tags_used, 1);
    if (slot >= tag_count) {
        fprintf(stderr, "%s: more than %u blocks: raise st_init's max_blocks\n", program_name,
                tag_count);
        exit(2);
    }
    tags[slot] = (struct tag){TAG_MAGIC, id, (uint32_t)size, (uint32_t)how};
    b->size = size;
    b->id = b->data_id = id;
    b->how = how;
    b->tag = &tags[slot];
    cudaGetDevice(&b->device);
    return e;
}

void st_fill(struct st_log *log, const struct st_block *b, cudaStream_t s)
{
    char name[32];
    cudaError_t e1, e2 = cudaSuccess, e3 = cudaSuccess;

    if (!b->p) return;
    id_name(b->id, name, sizeof name);
    e1 = cudaMemsetAsync(b->p, body_byte(b->data_id), b->size, s);
    if (b->size >= TAG_BYTES)
        e2 = cudaMemcpyAsync(b->p, b->tag, TAG_BYTES, cudaMemcpyHostToDevice, s);
    if (b->size >= 2 * TAG_BYTES)
        e3 = cudaMemcpyAsync((char *)b->p + b->size - TAG_BYTES, b->tag, TAG_BYTES,
                             cudaMemcpyHostToDevice, s);
    st_ok(log, e1 ? e1 : e2 ? e2 : e3, "fill %s", name);
}

cudaError_t st_free(struct st_log *log, struct st_block *b, cudaStream_t s, const char *stream_name)
{
    char name[32];
    cudaError_t e;

    if (!b->p) return cudaSuccess;
    id_name(b->id, name, sizeof name);
    if (stream_name) {
        e = cudaFreeAsync(b->p, s);
        st_rec(log, e, "free %s by cudaFreeAsync(%s)", name, stream_name);
    } else {
        e = cudaFree(b->p);
        st_rec(log, e, "free %s by cudaFree", name);
    }
    b->p = NULL;
    return e;
}

void st_copy(struct st_log *log, struct st_block *dst, const struct st_block *src, cudaStream_t s)
{
    char d[32], f[32];

    if (!dst->p || !src->p) return;
    id_name(dst->id, d, sizeof d);
    id_name(src->id, f, sizeof f);
    st_ok(log, cudaMemcpyAsync(dst->p, src->p, src->size, cudaMemcpyDefault, s), "copy %s into %s",
          f, d);
    dst->data_id = src->data_id;
    dst->tag = src->tag;
}

/* What the region found at the start of a block says about its origin. */
static void describe_found(const unsigned char *host, size_t size, char *out, size_t n)
{
    struct tag t;

    if (size < TAG_BYTES) {
        snprintf(out, n, "a block too small for a tag");
        return;
    }
    memcpy(&t, host, sizeof t);
    if (t.magic == TAG_MAGIC) {
        char other[32];
        id_name(t.id, other, sizeof other);
        snprintf(out, n, "the tag of block %s (%u bytes, %s)", other, t.size,
                 st_how_name((enum st_how)t.how));
    } else {
        snprintf(out, n, "no tag (first bytes %02x %02x %02x %02x)", host[0], host[1], host[2],
                 host[3]);
    }
}

/* The fast comparison: tags with memcmp, the body a word at a time. */
static bool intact(const unsigned char *host, size_t size, const unsigned char *tag,
                   unsigned char body)
{
    size_t from = 0, to = size;
    uint64_t word = 0x0101010101010101ull * body, w;

    if (size >= TAG_BYTES) {
        if (memcmp(host, tag, TAG_BYTES)) return false;
        from = TAG_BYTES;
    }
    if (size >= 2 * TAG_BYTES) {
        if (memcmp(host + size - TAG_BYTES, tag, TAG_BYTES)) return false;
        to = size - TAG_BYTES;
    }
    for (; from < to && from % 8; from++)
        if (host[from] != body) return false;
    for (; from + 8 <= to; from += 8) {
        memcpy(&w, host + from, 8);
        if (w != word) return false;
    }
    for (; from < to; from++)
        if (host[from] != body) return false;
    return true;
}

bool st_check(struct st_log *log, const struct st_block *b, cudaStream_t s, unsigned char *host,
              const char *when)
{
    unsigned char want[TAG_BYTES];
    unsigned char body = body_byte(b->data_id);
    size_t wrong = 0, first = 0;
    char name[32];
    cudaError_t e;

    if (!b->p) return true;
    id_name(b->id, name, sizeof name);
    memcpy(want, b->tag, TAG_BYTES);
    e = cudaMemcpyAsync(host, b->p, b->size, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    st_ok(log, e, "read back %s", name);
    if (e != cudaSuccess) return false;
    atomic_fetch_add(&checked, 1);
    if (intact(host, b->size, want, body)) return true;
    for (size_t i = 0; i < b->size; i++) {
        unsigned char expect = body;
        if (b->size >= TAG_BYTES && i < TAG_BYTES)
            expect = want[i];
        else if (b->size >= 2 * TAG_BYTES && i >= b->size - TAG_BYTES)
            expect = want[i - (b->size - TAG_BYTES)];
        if (host[i] != expect && wrong++ == 0) first = i;
    }
    if (!wrong) return true;

    unsigned char expect = first < TAG_BYTES && b->size >= TAG_BYTES ? want[first] : body;
    if (b->size >= 2 * TAG_BYTES && first >= b->size - TAG_BYTES)
        expect = want[first - (b->size - TAG_BYTES)];
    char found[160], holds[64] = "";
    describe_found(host, b->size, found, sizeof found);
    if (b->data_id != b->id) {
        char src[32];
        id_name(b->data_id, src, sizeof src);
        snprintf(holds, sizeof holds, " (a copy of block %s)", src);
    }
    st_fail("DATA",
            "%s: block %s%s (%zu bytes, %s, device %d) %s: %zu of its bytes are wrong, the first "
            "at offset %zu: expected 0x%02x, found 0x%02x; the block starts with %s",
            log->who, name, holds, b->size, st_how_name(b->how), b->device, when, wrong, first,
            expect, host[first], found);
    return false;
}

/* ---- holds ---- */

static void CUDART_CB hold_fn(void *arg)
{
    struct st_hold *h = arg;
    struct timespec ts = {0, 20000};

    while (!atomic_load(&h->released))
        nanosleep(&ts, NULL);
}

void st_hold(struct st_log *log, struct st_hold *h, cudaStream_t s)
{
    atomic_store(&h->released, 0);
    st_ok(log, cudaLaunchHostFunc(s, hold_fn, h), "hold the stream");
}

void st_release(struct st_hold *h)
{
    atomic_store(&h->released, 1);
}

/* ---- memory at start and end ---- */

void st_mem_start(int devices)
{
    size_t total;

    for (int d = 0; d < devices && d < MAX_DEVICES; d++) {
        if (cudaSetDevice(d) != cudaSuccess || cudaMemGetInfo(&mem_start[d], &total)) {
            fprintf(stderr, "%s: cannot read device %d's memory\n", program_name, d);
            exit(2);
        }
    }
    cudaSetDevice(0);
}

void st_mem_end(struct st_log *log, int devices)
{
    for (int d = 0; d < devices && d < MAX_DEVICES; d++) {
        cudaMemPool_t pool;
        size_t free_bytes = 0, total = 0;

        st_ok(log, cudaSetDevice(d), "cudaSetDevice(%d)", d);
        st_ok(log, cudaDeviceSynchronize(), "cudaDeviceSynchronize on device %d", d);
        st_ok(log, cudaDeviceGetDefaultMemPool(&pool, d), "cudaDeviceGetDefaultMemPool(%d)", d);
        st_ok(log, cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo(device %d pool, 0)", d);
        st_ok(log, cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo on device %d", d);
        long long delta = (long long)free_bytes - (long long)mem_start[d];
        st_logf(log, "device %d: free memory at the end = at the start %+lld bytes", d, delta);
        if (delta != 0)
            st_fail("LEAK",
                    "device %d: cudaMemGetInfo's free after everything was freed, "
                    "cudaDeviceSynchronize and cudaMemPoolTrimTo(pool, 0) is %zu, at the start "
                    "%zu (%+lld bytes)",
                    d, free_bytes, mem_start[d], delta);
    }
    st_ok(log, cudaSetDevice(0), "cudaSetDevice(0)");
}

/* ---- watchdog ---- */

void st_phase(const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&phase_lock);
    va_start(ap, fmt);
    vsnprintf(phase, sizeof phase, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&phase_lock);
}

static void *watchdog_main(void *unused)
{
    struct timespec ts = {0, 100 * 1000 * 1000};
    (void)unused;

    for (unsigned ticks = 0; ticks < watchdog_seconds * 10; ticks++) {
        nanosleep(&ts, NULL);
        if (atomic_load(&finished)) return NULL;
    }
    pthread_mutex_lock(&phase_lock);
    fprintf(stderr, "HANG %s: no end after %u s; last phase: %s\n", program_name, watchdog_seconds,
            phase);
    fflush(stderr);
    _exit(3);
}

/* A crash names the phase it happened in, then the previous handler (the
 * default, or a sanitizer's) takes the fault again and reports it. */
static struct sigaction previous_segv, previous_bus;

static void on_crash(int sig)
{
    static const char head[] = "CRASH ", mid[] = ": fatal signal in phase: ";
    const char *name = program_name;

    write(2, head, sizeof head - 1);
    write(2, name, strlen(name));
    write(2, mid, sizeof mid - 1);
    write(2, phase, strnlen(phase, sizeof phase));
    write(2, "\n", 1);
    sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, NULL);
}

void st_watchdog(unsigned seconds)
{
    struct sigaction sa;
    pthread_t t;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);

    watchdog_seconds = seconds;
    if (pthread_create(&t, NULL, watchdog_main, NULL) != 0) abort();
    pthread_detach(t);
}

unsigned st_failures(void)
{
    return atomic_load(&failures);
}

int st_finish(struct st_log *main_log)
{
    unsigned n = atomic_load(&failures);

    st_logf(main_log, "blocks checked: %u", atomic_load(&checked));
    st_log_flush(main_log);
    atomic_store(&finished, true);
    if (n) fprintf(stderr, "%s: %u failure(s)\n", program_name, n);
    return n ? 1 : 0;
}
