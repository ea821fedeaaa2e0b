/* progress.c - the progress line on stderr, and the warnings around it
 * (progress.h).
 *
 * A thread of its own draws the line, so that the readers pay one relaxed
 * add per block read (fs_reader_count_into) and never wait for the
 * terminal. The line is drawn as "\r" + text + erase-to-end, and erased with
 * "\r" + erase-to-end; one mutex orders it with everything else written to
 * the terminal meanwhile (fs_progress_hold). */
#include "progress.h"

#include "sites.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIRST_DRAW_NS (500u * 1000 * 1000) /* a reading shorter than this shows nothing */
#define REDRAW_NS     (200u * 1000 * 1000)

static struct {
    bool on; /* the line may be drawn: stderr is a terminal, started, not stopped */
    const char *command;
    uint64_t total_bytes;
    _Atomic uint64_t read_bytes;
    uint64_t start_ns;
    bool shown; /* the line is on the terminal now */
    bool stopping;
    pthread_mutex_t lock; /* the terminal: the line and what is printed around it */
    pthread_cond_t wake;
    pthread_t thread;
} progress = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Under the lock */
static void erase(void)
{
    if (!progress.shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    progress.shown = false;
}

/* Under the lock */
static void draw(void)
{
    char done[32], total[32];
    uint64_t bytes = atomic_load_explicit(&progress.read_bytes, memory_order_relaxed);
    if (bytes > progress.total_bytes) bytes = progress.total_bytes; /* a file grew meanwhile */
    fs_human_bytes(bytes, done, sizeof done);
    fs_human_bytes(progress.total_bytes, total, sizeof total);
    fprintf(stderr, "\rfsdpshim %s: %s of %s read (%.0f%%), %.0f s\033[K", progress.command, done,
            total,
            progress.total_bytes ? 100.0 * (double)bytes / (double)progress.total_bytes : 100.0,
            (double)(now_ns() - progress.start_ns) / 1e9);
    fflush(stderr);
    progress.shown = true;
}

static void *drawing(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&progress.lock);
    for (uint64_t next = progress.start_ns + FIRST_DRAW_NS; !progress.stopping;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
        uint64_t now = now_ns(), wait = next > now ? next - now : 0;
        until.tv_sec += (time_t)(wait / 1000000000u);
        until.tv_nsec += (long)(wait % 1000000000u);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&progress.wake, &progress.lock, &until);
        if (progress.stopping || now_ns() < next) continue;
        draw();
        next = now_ns() + REDRAW_NS;
    }
    erase();
    pthread_mutex_unlock(&progress.lock);
    return NULL;
}

void fs_progress_start(const char *command, size_t n, char *const *paths, unsigned passes)
{
    if (progress.on || !isatty(STDERR_FILENO)) return;
    progress.command = command;
    progress.total_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode))
            progress.total_bytes += (uint64_t)st.st_size * passes;
    }
    atomic_store(&progress.read_bytes, 0);
    progress.start_ns = now_ns();
    progress.stopping = false;
    progress.on = pthread_create(&progress.thread, NULL, drawing, NULL) == 0;
}

void fs_progress_watch(fs_reader *t)
{
    if (progress.on) fs_reader_count_into(t, &progress.read_bytes);
}

void fs_progress_stop(void)
{
    if (!progress.on) return;
    pthread_mutex_lock(&progress.lock);
    progress.stopping = true;
    pthread_cond_signal(&progress.wake);
    pthread_mutex_unlock(&progress.lock);
    pthread_join(progress.thread, NULL);
    progress.on = false;
}

void fs_progress_hold(void)
{
    pthread_mutex_lock(&progress.lock);
    erase();
}

void fs_progress_release(void)
{
    pthread_mutex_unlock(&progress.lock);
}

void fs_progress_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fs_progress_hold();
    vfprintf(stderr, fmt, ap);
    fs_progress_release();
    va_end(ap);
}

void fs_progress_warn(void *command, const char *line)
{
    fs_progress_hold();
    fprintf(stderr, "fsdpshim %s: %s\n", (const char *)command, line);
    fs_progress_release();
}
