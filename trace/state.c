/* state.c - the trace's process-wide state (fs_trace_g), its level and
 * clock, and the writer's one log function: the bottom of trace/, used by
 * every other file of it and using none of them. */
#include "trace_internal.h"

#include <stdarg.h>
#include <stdio.h>

fs_trace_state fs_trace_g = {.fd = -1};

/* Acquire: a thread that sees tracing on sees everything fs_trace_start
 * (and a trace-only attach, before it) set up ahead of turning it on, the
 * clock's base among them (a plain load on x86). */
int fs_trace_level(void)
{
    return atomic_load_explicit(&fs_trace_g.level, memory_order_acquire);
}

uint64_t fs_trace_now(void)
{
    return fs_trace_mono_ns() - fs_trace_g.mono_base;
}

uint64_t fs_trace_mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void fs_trace_keep_stacks(unsigned frames)
{
    if (!fs_trace_level()) fs_trace_g.settings.frames = frames; /* for snapshot headers */
    atomic_store_explicit(&fs_trace_g.keep_stacks, true, memory_order_relaxed);
}

void fs_trace_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (fs_trace_g.settings.log)
        fs_trace_g.settings.log(line);
    else
        fprintf(stderr, "fsdpshim: %s\n", line);
}
