/* lifetime.h - the preloaded library's process lifetime in one place: what
 * runs when the library is loaded, around a fork and at exit, in one
 * stated order.
 *
 * A file with state of its own declares one hook next to that state:
 *
 *     FS_LIFETIME(streams) = {.order = FS_ORDER_STREAMS, .init = streams_init,
 *                             .fork_child = streams_after_fork};
 *
 * and lifetime.c runs every hook: one constructor calls the init hooks in
 * increasing order; one pthread_atfork calls fork_prepare in decreasing
 * order, fork_parent and fork_child in increasing order (as pthread_atfork
 * itself orders handlers registered in turn); one destructor calls the exit
 * hooks in decreasing order; when the shim becomes active (shim.c has made
 * the allocator, before it publishes it), fs_lifetime_started calls the
 * started hooks in increasing order. The hooks are gathered from a section of the
 * library (the linker's __start_/__stop_ symbols, as Linux's initcalls), so
 * that lifetime.c names no file above it and a new file adds itself without
 * touching this core. Any hook may be NULL. */
#ifndef FS_LIFETIME_H
#define FS_LIFETIME_H

/* The order, one line each, earliest first. Init: the route sets the
 * environment before anything reads FSDPSHIM_CONF; the dynamic linker's
 * own dlsym is found while the process has one thread; then the state of
 * each part. Fork child: the shim's allocator is abandoned first, then
 * every table that named the parent's streams, memory or threads. */
enum {
    FS_ORDER_ROUTE = 10,        /* pytorch/route.c: PyTorch's route, from the environment */
    FS_ORDER_LOOKUP = 20,       /* driver/dlsym.c: the real dlsym and dlvsym */
    FS_ORDER_SHIM = 30,         /* core/shim.c: the allocator and the thread's streams */
    FS_ORDER_STREAMS = 31,      /* core/streams.c: stream keys */
    FS_ORDER_STREAM_POOL = 32,  /* runtime/stream_pool.c: pooled CUDA streams */
    FS_ORDER_ORDERED = 33,      /* core/ordered_segments.c: CUDA's pools under the segments */
    FS_ORDER_DRIVER = 34,       /* core/driver_device.c: the allocator over the driver */
    FS_ORDER_CAPTURE = 35,      /* core/capture.c: graph captures under way */
    FS_ORDER_LIVE = 36,         /* live_stats.c: the statistics page (started before the
                                   trace: the writer's fatal-signal handlers hand on to its) */
    FS_ORDER_TRACE_BLOCKS = 37, /* core/trace_glue.c: the trace and its live blocks */
    FS_ORDER_PYTHON = 38,       /* python/gil.c: the GIL's hooks, with trace:python */
    FS_ORDER_NCCL_COMMS = 40,   /* nccl/nccl_comm.c: communicators */
    FS_ORDER_NCCL_REGS = 41,    /* nccl/nccl_register.c: registrations */
    FS_ORDER_RATE_LIMIT = 42,   /* nccl/rate_limiter.c: the all-gather rate limiter */
};

struct fs_allocator;

typedef struct fs_lifetime_hook {
    int order; /* FS_ORDER_* */
    void (*init)(void);
    void (*fork_prepare)(void);
    void (*fork_parent)(void);
    void (*fork_child)(void);
    void (*exit)(void);
    /* the shim is active: `a` serves `ndev` devices (not yet published) */
    void (*started)(struct fs_allocator *a, int ndev);
} fs_lifetime_hook;

#define FS_LIFETIME(name)                                                                          \
    __attribute__((used, section("fs_lifetime"),                                                   \
                   aligned(sizeof(void *)))) static const fs_lifetime_hook fs_lifetime_##name

/* Runs the started hooks (shim.c, once per process image and after a
 * fork child's allocator is made again). */
void fs_lifetime_started(struct fs_allocator *a, int ndev);

#endif /* FS_LIFETIME_H */
