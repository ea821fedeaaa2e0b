/* parallel.c - the files of a job read by a pool of threads, merged in
 * order (parallel.h).
 *
 * The workers take the next file to read from one counter, under one
 * mutex, as long as it is within the window of files read ahead of the
 * merge; the calling thread waits for file `merged` to be read, merges it,
 * and wakes the workers the window has room for again. The locking is per
 * file, never per record. */
#include "parallel.h"

#include "progress.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct pool {
    void (*read)(void *ctx, size_t i);
    void *ctx;
    size_t n, window;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t next;   /* the next file to read */
    size_t merged; /* files merged so far */
    bool *done;    /* read, per file */
} pool;

size_t fs_par_threads(size_t n)
{
    const char *env = getenv("FSDPSHIM_ANALYSIS_THREADS");
    long want = 0;
    if (env && *env) {
        char *end;
        want = strtol(env, &end, 10);
        if (*end || want < 1) want = 0; /* not a number: the default */
    }
    if (!want) {
        cpu_set_t cpus;
        want = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    }
    if (want < 1) want = 1;
    return (size_t)want < n ? (size_t)want : n;
}

static void *worker(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->next < p->n && p->next >= p->merged + p->window)
            pthread_cond_wait(&p->changed, &p->lock);
        if (p->next >= p->n) break;
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        p->read(p->ctx, i);
        pthread_mutex_lock(&p->lock);
        p->done[i] = true;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void merge_one(void (*merge)(void *, size_t), void *ctx, size_t i)
{
    if (!merge) return;
    fs_progress_hold();
    merge(ctx, i);
    fflush(stdout);
    fs_progress_release();
}

void fs_par_read(const char *command, size_t n, char *const *paths,
                 void (*read)(void *ctx, size_t i), void (*merge)(void *ctx, size_t i), void *ctx)
{
    size_t threads = fs_par_threads(n), started = 0;
    pool p = {.read = read, .ctx = ctx, .n = n, .window = 2 * threads};
    pthread_t *tids = NULL;

    fs_progress_start(command, n, paths, 1);
    if (threads > 1) {
        p.done = calloc(n, sizeof *p.done);
        tids = calloc(threads, sizeof *tids);
    }
    if (p.done && tids) {
        pthread_mutex_init(&p.lock, NULL);
        pthread_cond_init(&p.changed, NULL);
        for (; started < threads; started++)
            if (pthread_create(&tids[started], NULL, worker, &p) != 0) break;
    }
    if (!started) { /* one thread, or none could be had: in order, here */
        for (size_t i = 0; i < n; i++) {
            read(ctx, i);
            merge_one(merge, ctx, i);
        }
    } else {
        pthread_mutex_lock(&p.lock);
        while (p.merged < n) {
            while (!p.done[p.merged])
                pthread_cond_wait(&p.changed, &p.lock);
            pthread_mutex_unlock(&p.lock);
            merge_one(merge, ctx, p.merged);
            pthread_mutex_lock(&p.lock);
            p.merged++;
            pthread_cond_broadcast(&p.changed);
        }
        pthread_mutex_unlock(&p.lock);
        for (size_t t = 0; t < started; t++)
            pthread_join(tids[t], NULL);
        pthread_mutex_destroy(&p.lock);
        pthread_cond_destroy(&p.changed);
    }
    free(p.done);
    free(tids);
    fs_progress_stop();
}
