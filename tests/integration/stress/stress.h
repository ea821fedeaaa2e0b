/* stress.h - what the stress programs share: a per-thread transcript of
 * return codes, blocks that carry a pattern of their own, stream holds,
 * a watchdog, and the leak check.
 *
 * Every program runs twice, natively on the simulated device and with the
 * shim preloaded (compare.sh), and the two transcripts must be the same. A
 * transcript holds return codes and last-error states, never addresses or
 * timings, so it is deterministic for a given seed. Data and leaks are
 * checked by the program itself in both runs: a failure is a line on stderr
 * that starts with DATA, LEAK, CALL, HANG or CRASH and says exactly what was found,
 * and the exit status is 1 (3 for a hang). */
#ifndef FS_STRESS_H
#define FS_STRESS_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A transcript: the lines of one thread (or one round of one), printed by
 * the main thread in a fixed order at the end. */
struct st_log {
    char *buf;
    size_t len, cap;
    char who[24];
};

void st_log_init(struct st_log *log, const char *who_fmt, ...)
    __attribute__((format(printf, 2, 3)));
void st_logf(struct st_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the transcript to stdout and frees it. */
void st_log_flush(struct st_log *log);

/* Records "what -> code / last error" (reading the last error clears it,
 * so each line shows what that call left behind) and returns rc. */
cudaError_t st_rec(struct st_log *log, cudaError_t rc, const char *what_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* st_rec for a call that must succeed: a failure is also a CALL line on
 * stderr and fails the program. */
cudaError_t st_ok(struct st_log *log, cudaError_t rc, const char *what_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* How a block was allocated and on what kind of stream: written into the
 * block's tag, so a block found holding another's data names it. */
enum st_how {
    ST_MALLOC = 1,    /* cudaMalloc */
    ST_ASYNC_PT,      /* cudaMallocAsync on cudaStreamPerThread */
    ST_ASYNC_CREATED, /* cudaMallocAsync on a created stream */
    ST_ASYNC_LEGACY,  /* cudaMallocAsync on the legacy stream */
    ST_FROM_POOL,     /* cudaMallocFromPoolAsync on the default pool */
};

/* A device block with a pattern of its own: a byte derived from its id
 * everywhere, and a 16-byte tag (magic, id, size, how) at both ends. */
struct st_block {
    void *p;
    size_t size;
    uint32_t id;
    enum st_how how;
    int device;
    uint32_t data_id; /* whose pattern it holds: its own, or a copied block's */
    const void *tag;  /* pinned: the source of data_id's tag */
};

/* Block ids: owner (a round and a thread, or ST_MAIN) and a sequence. */
#define ST_MAIN 255u
static inline uint32_t st_id(unsigned round, unsigned thread, unsigned seq)
{
    return (round & 0xffu) << 24 | (thread & 0xffu) << 16 | (seq & 0xffffu);
}

/* Reserves pinned memory for `max_blocks` tags and sets up the failure
 * counters and the scale. Call once from main before any thread starts. */
void st_init(const char *program, unsigned max_blocks);
/* FSDPSHIM_STRESS_SEED (default 1). */
unsigned st_seed(void);
/* n scaled by FSDPSHIM_STRESS_SCALE percent (default 100; the sanitizer
 * builds run less), at least 1. */
unsigned st_scaled(unsigned n);
/* A small deterministic generator. */
static inline unsigned st_rand(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* Allocates a block through `how` (stream for the stream-ordered kinds)
 * and logs the call; on failure b->p is NULL. */
cudaError_t st_alloc(struct st_log *log, struct st_block *b, uint32_t id, size_t size,
                     enum st_how how, cudaStream_t stream);
/* Writes the block's pattern with stream-ordered sets and copies on s. */
void st_fill(struct st_log *log, const struct st_block *b, cudaStream_t s);
/* Copies src into dst (same size) on s, a cudaMemcpyAsync of the whole
 * block: dst then holds src's pattern. */
void st_copy(struct st_log *log, struct st_block *dst, const struct st_block *src, cudaStream_t s);
/* Reads the block back through `host` (pinned, at least b->size bytes) on
 * s, waits, and compares. A mismatch is a DATA line naming the block, the
 * first wrong offset, the expected and found bytes, how many were wrong
 * and whose tag was found instead; returns false then. */
bool st_check(struct st_log *log, const struct st_block *b, cudaStream_t s, unsigned char *host,
              const char *when);
/* Frees the block with cudaFreeAsync on s (stream_name says which, for the
 * transcript), or with cudaFree when stream_name is NULL; logs the code and
 * forgets the block whatever it was. */
cudaError_t st_free(struct st_log *log, struct st_block *b, cudaStream_t s,
                    const char *stream_name);
/* Pinned host memory for st_check. */
unsigned char *st_host_buffer(size_t size);
const char *st_how_name(enum st_how how);

/* A stream hold: a host function that waits until st_release, so that the
 * work queued behind it (and the frees) stays pending. */
struct st_hold {
    atomic_int released;
};
void st_hold(struct st_log *log, struct st_hold *h, cudaStream_t s);
void st_release(struct st_hold *h);

/* cudaMemGetInfo of each of the first `devices` devices, before any
 * device allocation. */
void st_mem_start(int devices);
/* After everything is freed: per device cudaDeviceSynchronize,
 * cudaMemPoolTrimTo(default pool, 0), cudaMemGetInfo; logs the
 * difference from the start and reports a LEAK line when it is not 0. */
void st_mem_end(struct st_log *log, int devices);

/* The watchdog: after `seconds` without st_finish, a HANG line naming the
 * last phase, and exit 3; and a CRASH line naming it on SIGSEGV or SIGBUS. */
void st_watchdog(unsigned seconds);
void st_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Counts a failure (DATA, LEAK, CALL lines do it themselves). */
void st_fail(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Failures so far (a child of fork compares with the count it started with). */
unsigned st_failures(void);
/* Logs how many blocks were checked, writes main_log out, stops the
 * watchdog, and returns the exit status: 0, or 1 after any failure. */
int st_finish(struct st_log *main_log);

#endif /* FS_STRESS_H */
