/* forksig.c - fork, and signals, while other threads allocate.
 *
 *   forksig fork     the main thread forks again and again while worker
 *                    threads allocate, fill, check and free; each child
 *                    (which starts clean: nothing of the parent's cache)
 *                    allocates, fills and checks blocks of its own, frees
 *                    them and gives all memory back, and sends its
 *                    transcript to the parent through a pipe
 *   forksig signals  a timer (SIGALRM, to the process) and a signalling
 *                    thread (SIGUSR1, to each worker) interrupt the workers
 *                    and every other thread all the time; the handlers
 *                    touch nothing of CUDA and are installed without
 *                    SA_RESTART, so a system call of the runtime or of an
 *                    allocator that does not handle EINTR fails
 *
 * The workers' transcripts do not depend on when the forks or the signals
 * come, so both runs print the same ones. */
#include "stress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS        4
#define SLOTS          6
#define ROUNDS         400
#define FORKS          6
#define CHILD_BLOCKS   8
#define MAX_BLOCK_SIZE (1u << 20)

static const size_t sizes[] = {512, 4096, 65536, 1 << 20};

struct worker {
    unsigned index, seed;
    pthread_t tid;
    struct st_log log;
};

static unsigned rounds;
static atomic_uint progress;     /* rounds done, all workers together */
static atomic_uint workers_done; /* threads that have finished */
static atomic_uint signals_seen;

static size_t pick_size(unsigned *seed)
{
    return sizes[st_rand(seed) % (sizeof sizes / sizeof sizes[0])];
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct st_block live[SLOTS] = {{0}};
    unsigned char *host = st_host_buffer(MAX_BLOCK_SIZE);
    cudaStream_t s, other;
    cudaEvent_t used;
    unsigned seq = 0;

    st_ok(&w->log, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    st_ok(&w->log, cudaEventCreateWithFlags(&used, cudaEventDisableTiming), "cudaEventCreate");
    st_ok(&w->log, cudaStreamCreate(&other), "cudaStreamCreate");
    for (unsigned r = 0; r < rounds; r++) {
        int slot = (int)(st_rand(&w->seed) % SLOTS);
        struct st_block *b = &live[slot];

        if (b->p) {
            if (r % 3 == 0) st_check(&w->log, b, s, host, "before its free");
            switch (r % 4) {
            case 0:
                st_free(&w->log, b, NULL, NULL);
                break;
            case 1:
                st_free(&w->log, b, s, "own stream");
                break;
            case 2:
                st_ok(&w->log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
                st_free(&w->log, b, other, "another stream, after a synchronize");
                break;
            default:
                /* its last use was on s */
                st_ok(&w->log, cudaEventRecord(used, s), "cudaEventRecord");
                st_ok(&w->log, cudaStreamWaitEvent(cudaStreamPerThread, used, 0),
                      "cudaStreamWaitEvent(per-thread stream)");
                st_free(&w->log, b, cudaStreamPerThread, "per-thread stream, after it waits");
                break;
            }
        }
        static const enum st_how kinds[] = {ST_MALLOC, ST_ASYNC_CREATED, ST_ASYNC_PT};
        enum st_how how = kinds[r % 3];
        cudaStream_t on = how == ST_ASYNC_PT ? cudaStreamPerThread : s;
        if (!st_alloc(&w->log, b, st_id(r >> 8, w->index, seq++), pick_size(&w->seed), how, on)) {
            st_fill(&w->log, b, on);
            if (on != s) {
                /* later work on the block is on s */
                st_ok(&w->log, cudaStreamSynchronize(on), "cudaStreamSynchronize(per-thread)");
            }
        }
        atomic_fetch_add(&progress, 1);
    }
    for (int i = 0; i < SLOTS; i++) {
        st_check(&w->log, &live[i], s, host, "at the end");
        st_free(&w->log, &live[i], i % 2 ? s : NULL, "own stream");
    }
    st_ok(&w->log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
    st_ok(&w->log, cudaStreamSynchronize(other), "cudaStreamSynchronize");
    st_ok(&w->log, cudaStreamDestroy(s), "cudaStreamDestroy");
    st_ok(&w->log, cudaStreamDestroy(other), "cudaStreamDestroy");
    st_ok(&w->log, cudaEventDestroy(used), "cudaEventDestroy");
    cudaFreeHost(host);
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

/* ---- fork ---- */

/* The child: a few blocks of its own, checked, freed, all memory back. */
static int child_main(unsigned n, int out)
{
    struct st_block b[CHILD_BLOCKS];
    struct st_log log;
    unsigned seed = n * 17u + 5u;
    size_t start = 0, end = 0, total = 0;
    cudaMemPool_t pool;
    cudaStream_t s;
    unsigned failures_before = st_failures();

    /* a hang in the child (a lock held by a parent's thread at the fork)
     * kills it; the parent reports the signal */
    signal(SIGALRM, SIG_DFL);
    alarm(20);
    st_log_init(&log, "child%u", n);
    /* what the parent's pool had cached is the child's to trim too */
    st_ok(&log, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    st_ok(&log, cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    st_ok(&log, cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    st_ok(&log, cudaMemGetInfo(&start, &total), "cudaMemGetInfo at the child's start");
    st_ok(&log, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    unsigned char *host = st_host_buffer(MAX_BLOCK_SIZE);
    for (int i = 0; i < CHILD_BLOCKS; i++) {
        enum st_how how = i % 3 == 0 ? ST_MALLOC : i % 3 == 1 ? ST_ASYNC_CREATED : ST_ASYNC_PT;
        cudaStream_t on = how == ST_ASYNC_PT ? cudaStreamPerThread : s;
        if (!st_alloc(&log, &b[i], st_id(n, 200, (unsigned)i), pick_size(&seed), how, on))
            st_fill(&log, &b[i], on);
    }
    st_ok(&log, cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize(per-thread)");
    for (int i = 0; i < CHILD_BLOCKS; i++)
        st_check(&log, &b[i], s, host, "in a child of fork");
    for (int i = 0; i < CHILD_BLOCKS; i++)
        st_free(&log, &b[i], i % 2 ? s : NULL, "stream");
    st_ok(&log, cudaStreamDestroy(s), "cudaStreamDestroy");
    st_ok(&log, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    st_ok(&log, cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    st_ok(&log, cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    st_ok(&log, cudaMemGetInfo(&end, &total), "cudaMemGetInfo at the child's end");
    st_logf(&log, "free memory at the child's end = at its start %+lld bytes",
            (long long)end - (long long)start);
    if (end != start)
        st_fail("LEAK", "child %u: cudaMemGetInfo's free at its end %zu, at its start %zu", n, end,
                start);
    for (size_t off = 0; off < log.len;) {
        ssize_t k = write(out, log.buf + off, log.len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 2;
        off += (size_t)k;
    }
    return st_failures() > failures_before ? 1 : 0;
}

static void fork_children(struct st_log *log)
{
    for (unsigned n = 0; n < FORKS; n++) {
        /* spread the forks over the workers' run */
        unsigned target = rounds * THREADS * (n + 1) / (FORKS + 1);
        struct timespec ts = {0, 200000};
        while (atomic_load(&progress) < target && atomic_load(&workers_done) < THREADS)
            nanosleep(&ts, NULL);

        int fds[2];
        if (pipe(fds) != 0) abort();
        st_phase("fork %u", n);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) abort();
        if (pid == 0) {
            close(fds[0]);
            _exit(child_main(n, fds[1]));
        }
        close(fds[1]);
        char buf[4096];
        ssize_t k;
        size_t got = 0;
        char *text = NULL;
        while ((k = read(fds[0], buf, sizeof buf)) != 0) {
            if (k < 0) {
                if (errno == EINTR) continue;
                break;
            }
            text = realloc(text, got + (size_t)k + 1);
            if (!text) abort();
            memcpy(text + got, buf, (size_t)k);
            got += (size_t)k;
        }
        close(fds[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        /* the child's transcript, line by line, into ours */
        for (char *line = text, *nl; line && line < text + got; line = nl + 1) {
            nl = memchr(line, '\n', (size_t)(text + got - line));
            if (!nl) break;
            *nl = 0;
            st_logf(log, "| %s", line);
        }
        free(text);
        if (WIFEXITED(status)) {
            st_logf(log, "child %u: exit %d", n, WEXITSTATUS(status));
            if (WEXITSTATUS(status))
                st_fail("CALL", "child %u of fork exited with %d (see its lines above)", n,
                        WEXITSTATUS(status));
        } else {
            st_logf(log, "child %u: killed by signal %d", n, WTERMSIG(status));
            st_fail("HANG", "child %u of fork was killed by signal %d%s", n, WTERMSIG(status),
                    WTERMSIG(status) == SIGALRM ? " (it hung for 20 s)" : "");
        }
    }
}

/* ---- signals ---- */

static void on_signal(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals_seen, 1);
}

static void install(int sig)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: interrupted calls fail with EINTR */
    sigaction(sig, &sa, NULL);
}

static void signal_workers(struct worker *w)
{
    struct itimerval every = {{0, 500}, {0, 500}}, off = {{0, 0}, {0, 0}};
    struct timespec ts = {0, 100000};

    install(SIGALRM);
    install(SIGUSR1);
    setitimer(ITIMER_REAL, &every, NULL);
    /* a finished worker is not joined yet: its id stays valid */
    for (unsigned i = 0; atomic_load(&workers_done) < THREADS; i++) {
        pthread_kill(w[i % THREADS].tid, SIGUSR1);
        nanosleep(&ts, NULL);
    }
    setitimer(ITIMER_REAL, &off, NULL);
}

int main(int argc, char **argv)
{
    struct worker w[THREADS];
    struct st_log log;
    bool forks = argc > 1 && !strcmp(argv[1], "fork");
    bool signals = argc > 1 && !strcmp(argv[1], "signals");

    if (!forks && !signals) {
        fprintf(stderr, "usage: forksig fork|signals\n");
        return 2;
    }
    st_init(forks ? "forksig fork" : "forksig signals", 1 << 16);
    st_watchdog(90);
    st_log_init(&log, "main");
    rounds = st_scaled(ROUNDS);
    st_mem_start(1);
    st_phase("workers");
    for (unsigned t = 0; t < THREADS; t++) {
        w[t].index = t;
        w[t].seed = st_seed() * 4099u + t;
        st_log_init(&w[t].log, "t%u", t);
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0) abort();
    }
    if (forks) fork_children(&log);
    if (signals) signal_workers(w);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(w[t].tid, NULL);
    for (unsigned t = 0; t < THREADS; t++)
        st_log_flush(&w[t].log);
    if (signals && atomic_load(&signals_seen) == 0)
        st_fail("CALL", "no signal arrived: the test tested nothing");
    st_phase("leak check");
    st_mem_end(&log, 1);
    return st_finish(&log);
}
