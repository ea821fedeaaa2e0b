/* lock.h - the allocator's short-held spin lock.
 *
 * Pool, block-map and statistics critical sections are a few dozen
 * instructions with no device call inside, so one atomic exchange to enter
 * and a plain release store to leave beat a mutex. A waiter spins briefly,
 * then yields the CPU so that a preempted holder on an oversubscribed
 * machine can finish. */
#ifndef FS_ALLOC_LOCK_H
#define FS_ALLOC_LOCK_H

#include <sched.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#define fs_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define fs_cpu_relax() __asm__ __volatile__("yield")
#else
#define fs_cpu_relax() ((void)0)
#endif

typedef struct fs_spin {
    atomic_int held;
} fs_spin;

static inline void fs_spin_init(fs_spin *l)
{
    atomic_init(&l->held, 0);
}

static inline void fs_spin_lock(fs_spin *l)
{
    for (;;) {
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
        for (int i = 0; atomic_load_explicit(&l->held, memory_order_relaxed); i++) {
            if (i < 64)
                fs_cpu_relax();
            else
                sched_yield();
        }
    }
}

static inline void fs_spin_unlock(fs_spin *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif /* FS_ALLOC_LOCK_H */
