/* lock.h - the allocator's short-held lock.
 *
 * Pool, block-map and statistics critical sections are a few dozen
 * instructions with no device call inside. Uncontended, entering is one
 * compare-and-swap and leaving one exchange. Contended, a waiter spins a
 * little and then sleeps on a futex rather than spinning on: on a machine
 * with more threads than cores the holder may have been preempted, and
 * spinning would only keep it off the CPU longer (Drepper, "Futexes Are
 * Tricky", mutex 2). */
#ifndef FS_ALLOC_LOCK_H
#define FS_ALLOC_LOCK_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define fs_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define fs_cpu_relax() __asm__ __volatile__("yield")
#else
#define fs_cpu_relax() ((void)0)
#endif

typedef struct fs_spin {
    atomic_int state; /* 0 free, 1 held, 2 held with sleepers */
} fs_spin;

static inline void fs_spin_init(fs_spin *l)
{
    atomic_init(&l->state, 0);
}

static inline void fs_lock_slow(fs_spin *l)
{
    for (int i = 0; i < 32; i++) {
        fs_cpu_relax();
        int c = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &c, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
    }
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

static inline void fs_spin_lock(fs_spin *l)
{
    int c = 0;
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                             &l->state, &c, 1, memory_order_acquire, memory_order_relaxed),
                         1))
        return;
    fs_lock_slow(l);
}

/* One attempt; true when the lock is now the caller's. */
static inline bool fs_spin_trylock(fs_spin *l)
{
    int c = 0;
    return atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong_explicit(&l->state, &c, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void fs_spin_unlock(fs_spin *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2, 0))
        syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif /* FS_ALLOC_LOCK_H */
