/* devices.c - the simulated devices, the thread's current device and its
 * current context, device-wide synchronisation and reset.
 *
 * The current device is per thread and starts at 0, as in the runtime. Each
 * device has one context, its primary context (the driver, sim/cuda/, hands
 * it out), and the thread's current context is the current device's primary
 * context once one is bound: as on a GPU, a fresh thread has none until a
 * runtime call that works on the current device binds it (the runtime's
 * lazy initialisation), cudaSetDevice binds the new device's, and the
 * driver's cuCtxSetCurrent/Push/Pop move both at once. Binding also marks the
 * primary context active (cuDevicePrimaryCtxGetState) until a reset. */
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

static struct sim_device *devices;
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static __thread int current_device;
static __thread int context_bound; /* the thread has a current context */

static void devices_init(void)
{
    sim_init();
    devices = calloc(sim_cfg.ndevices ? (size_t)sim_cfg.ndevices : 1, sizeof *devices);
    if (!devices) abort();
    for (int d = 0; d < sim_cfg.ndevices; d++) {
        struct sim_device *dev = &devices[d];
        dev->ordinal = d;
        pthread_mutex_init(&dev->mu, NULL);
        pthread_mutex_init(&dev->hostfn_mu, NULL);
        dev->mempool = sim_mempool_new(dev);
        dev->current_mempool = dev->mempool;
        dev->graph_mempool = sim_mempool_new_graph(dev);
    }
}

struct sim_device *sim_dev(int ordinal)
{
    pthread_once(&devices_once, devices_init);
    if (ordinal < 0 || ordinal >= sim_cfg.ndevices) return NULL;
    return &devices[ordinal];
}

int sim_cur_device(void)
{
    return current_device;
}

void sim_ctx_activate(struct sim_device *dev)
{
    if (!__atomic_load_n(&dev->ctx_active, __ATOMIC_RELAXED))
        __atomic_store_n(&dev->ctx_active, 1, __ATOMIC_RELAXED);
}

/* The runtime binds the current device's primary context on first use. */
static void bind_context(struct sim_device *dev)
{
    context_bound = 1;
    sim_ctx_activate(dev);
}

struct sim_device *sim_cur_dev(void)
{
    struct sim_device *dev = sim_dev(current_device);
    if (dev) bind_context(dev);
    return dev;
}

int sim_ctx_current(void)
{
    return context_bound ? current_device : -1;
}

void sim_ctx_set_current(int device)
{
    struct sim_device *dev = sim_dev(device);
    if (!dev) {
        context_bound = 0;
        return;
    }
    current_device = device;
    bind_context(dev);
}

void sim_device_sync(struct sim_device *dev)
{
    /* Snapshot every stream's last op, then wait outside the lock. */
    pthread_mutex_lock(&dev->mu);
    size_t n = 0;
    for (struct sim_stream *s = dev->streams; s; s = s->dev_next)
        n++;
    struct sim_dep *deps = calloc(n ? n : 1, sizeof *deps);
    size_t k = 0;
    for (struct sim_stream *s = dev->streams; s && deps; s = s->dev_next)
        deps[k++] = (struct sim_dep){s, sim_stream_last(s)};
    pthread_mutex_unlock(&dev->mu);
    for (size_t i = 0; i < k; i++)
        sim_stream_wait(deps[i].stream, deps[i].seq);
    free(deps);
    sim_mempool_trim_threshold(dev->mempool);
}

void sim_device_reset(struct sim_device *dev)
{
    sim_device_sync(dev);
    sim_stream_forget_device(dev);
    sim_mempool_forget_streams(dev->mempool);
    __atomic_add_fetch(&dev->reset_gen, 1, __ATOMIC_RELEASE);
    sim_devmem_forget_device(dev->ordinal);
    sim_modules_forget_device(dev->ordinal);
    pthread_mutex_lock(&dev->mu);
    dev->flags = 0;
    pthread_mutex_unlock(&dev->mu);
    __atomic_store_n(&dev->ctx_active, 0, __ATOMIC_RELAXED);
}

void sim_devices_fork(enum sim_fork_phase phase)
{
    pthread_once(&devices_once, devices_init);
    int n = sim_cfg.ndevices;
    if (phase == SIM_FORK_PREPARE) {
        for (int d = 0; d < n; d++)
            pthread_mutex_lock(&devices[d].mu);
        return;
    }
    for (int d = n - 1; d >= 0; d--) {
        struct sim_device *dev = &devices[d];
        if (phase == SIM_FORK_CHILD) {
            /* The streams' workers did not survive the fork; a host
             * function may have held this lock in one of them. Memory
             * stays charged: the child has its own copy of it. The stats
             * count what the child does. */
            dev->streams = NULL;
            dev->legacy = NULL;
            pthread_mutex_init(&dev->hostfn_mu, NULL);
            dev->allocs = dev->frees = 0;
            dev->peak = dev->used;
            dev->touched = 0;
        }
        pthread_mutex_unlock(&dev->mu);
    }
}
