/* nccl_register.c - buffer and window registration with NCCL.
 *
 * NCCL maps a registered buffer for its peers (and, for windows, into a
 * symmetric address space) and keeps using that mapping until the buffer is
 * deregistered, whether or not the program still holds the block. So the
 * shim pins the segment holding the buffer from a successful registration
 * until the matching deregistration: the caching allocator never releases
 * a pinned segment to the device (cudaFree/empty_cache/trim), while the
 * blocks inside it are still cached and reused as usual, exactly as with
 * PyTorch's own allocator and NCCL registration.
 *
 * Registrations are few and long-lived, so they are a list under a mutex.
 * NCCL may return the same handle twice for the same buffer (it counts
 * registrations); each registration is one node and one pin, and each
 * deregistration removes one. Destroying a communicator drops whatever was
 * still registered with it, in NCCL and here. */
#include "nccl_internal.h"
#include "../core/lifetime.h"

#include <pthread.h>
#include <stdlib.h>

struct registration {
    struct registration *next;
    ncclComm_t comm;
    const void *handle; /* ncclCommRegister's handle or the ncclWindow_t */
    void *pinned;       /* an address inside the pinned segment */
};

static pthread_mutex_t registrations_lock = PTHREAD_MUTEX_INITIALIZER;
static struct registration *registrations;

/* Pins the segment holding `buff` for `handle`. Buffers the shim does not
 * own (NCCL's own ncclMemAlloc memory, memory from before the shim) have no
 * segment of ours and are left alone. */
static void pin(ncclComm_t comm, const void *handle, void *buff)
{
    fs_allocator *a = fs_shim_allocator();
    if (!a || !buff || fs_alloc_segment_pin(a, buff, true) != FS_OK) return;
    struct registration *reg = malloc(sizeof(*reg));
    if (!reg) {
        /* Without a node the pin could never be undone: better to leave the
         * segment releasable than pinned for ever. */
        fs_alloc_segment_pin(a, buff, false);
        fs_log(FS_LOG_WARN, "nccl: out of memory, registered buffer %p is not pinned", buff);
        return;
    }
    reg->comm = comm;
    reg->handle = handle;
    reg->pinned = buff;
    pthread_mutex_lock(&registrations_lock);
    reg->next = registrations;
    registrations = reg;
    pthread_mutex_unlock(&registrations_lock);
    fs_log(FS_LOG_DEBUG, "nccl: registered buffer %p pins its segment", buff);
}

/* Takes the registrations of `comm` that match `handle` (every one of them
 * when `all`, else the first) out of the list, and unpins them. */
static void unpin(ncclComm_t comm, const void *handle, bool all)
{
    struct registration *taken = NULL;
    pthread_mutex_lock(&registrations_lock);
    for (struct registration **p = &registrations; *p;) {
        struct registration *reg = *p;
        if (reg->comm == comm && (all || reg->handle == handle)) {
            *p = reg->next;
            reg->next = taken;
            taken = reg;
            if (!all) break;
        } else {
            p = &reg->next;
        }
    }
    pthread_mutex_unlock(&registrations_lock);

    fs_allocator *a = fs_shim_allocator();
    while (taken) {
        struct registration *reg = taken;
        taken = reg->next;
        if (a) fs_alloc_segment_pin(a, reg->pinned, false);
        free(reg);
    }
}

void fs_nccl_registrations_drop(ncclComm_t comm)
{
    unpin(comm, NULL, true);
}

/* A fork child has no registration of its parent's, and its allocator is a
 * fresh one (shim.c): the nodes go, without unpinning anything. */
static void atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    registrations_lock = fresh;
    while (registrations) {
        struct registration *reg = registrations;
        registrations = reg->next;
        free(reg);
    }
}

FS_LIFETIME(nccl_regs) = {.order = FS_ORDER_NCCL_REGS, .fork_child = atfork_child};

FS_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                        void **handle)
{
    __typeof__(&ncclCommRegister) real = FS_NCCL_REAL(ncclCommRegister);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommRegister");
    if (!fs_shim_enter()) return real(comm, buff, size, handle);
    ncclResult_t r = real(comm, buff, size, handle);
    if (r == ncclSuccess && handle && *handle) pin(comm, *handle, buff);
    fs_shim_leave();
    return r;
}

/* The segment is unpinned only after NCCL has dropped its mapping. */
FS_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    __typeof__(&ncclCommDeregister) real = FS_NCCL_REAL(ncclCommDeregister);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommDeregister");
    if (!fs_shim_enter()) return real(comm, handle);
    ncclResult_t r = real(comm, handle);
    if (r == ncclSuccess) unpin(comm, handle, false);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                              ncclWindow_t *win, int winFlags)
{
    __typeof__(&ncclCommWindowRegister) real = FS_NCCL_REAL(ncclCommWindowRegister);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommWindowRegister");
    if (!fs_shim_enter()) return real(comm, buff, size, win, winFlags);
    ncclResult_t r = real(comm, buff, size, win, winFlags);
    if (r == ncclSuccess && win && *win) pin(comm, *win, buff);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    __typeof__(&ncclCommWindowDeregister) real = FS_NCCL_REAL(ncclCommWindowDeregister);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommWindowDeregister");
    if (!fs_shim_enter()) return real(comm, win);
    ncclResult_t r = real(comm, win);
    if (r == ncclSuccess) unpin(comm, win, false);
    fs_shim_leave();
    return r;
}
