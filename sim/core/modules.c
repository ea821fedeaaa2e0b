/* modules.c - modules and what they hold: the fat binaries that nvcc's
 * generated host code registers at load time (sim/cudart/registration.c),
 * the libraries that cudaLibraryLoad* makes
 * (sim/cudart/library_management.c), and the device memory of their
 * variables on each device.
 *
 * The sim has no device code, so a module is what the runtime knows about
 * it: its kernels (by host stub and by cudaKernel_t handle) and variables
 * (by host shadow, with their sizes). A module is loaded on a device the
 * first time one of its kernels or variables is used there, as the runtime's
 * lazy loading (CUDA_MODULE_LOADING=LAZY, the default) does: then its
 * variables get one block of device memory there, charged to the device
 * like an allocation. They start from their initialisers when the sim can
 * read them from the image (image.c: an uncompressed cubin), else zeroed
 * (nvcc leaves the host shadows zero).
 *
 * Lock order: the modules' lock (a rwlock: registration and unloading write,
 * every lookup reads), then a module's load_mu, then the device's locks. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_module {
    struct sim_kernel **kernels;
    size_t nkernels, kcap;
    struct sim_var **vars;
    size_t nvars, vcap;
    size_t storage; /* bytes of all variables, each at its offset */
    pthread_mutex_t load_mu;
    char **base;                    /* per device: the storage there, NULL until loaded */
    int loaded;                     /* loaded somewhere: its layout is fixed */
    struct sim_module *next, *prev; /* in `modules`, once published */
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t maps_once = PTHREAD_ONCE_INIT;
static struct sim_handle_set *by_stub, *by_handle, *by_host_var;
static struct sim_module *modules; /* every published module */

static void maps_init(void)
{
    by_stub = sim_handles_new();
    by_handle = sim_handles_new();
    by_host_var = sim_handles_new();
}

void sim_modules_rdlock(void)
{
    pthread_once(&maps_once, maps_init);
    pthread_rwlock_rdlock(&lock);
}

void sim_modules_unlock(void)
{
    pthread_rwlock_unlock(&lock);
}

struct sim_module *sim_module_new(void)
{
    pthread_once(&maps_once, maps_init);
    struct sim_module *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->load_mu, NULL);
    return m;
}

/* Grows *arr (of *cap pointers) to hold one more; -1 without memory. */
static int grow(void *arr, size_t n, size_t *cap)
{
    void ***a = arr;
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    void **na = realloc(*a, ncap * sizeof *na);
    if (!na) return -1;
    *a = na;
    *cap = ncap;
    return 0;
}

struct sim_kernel *sim_module_add_kernel(struct sim_module *m, const void *stub, const char *name)
{
    struct sim_kernel *k = calloc(1, sizeof *k);
    if (!k || grow(&m->kernels, m->nkernels, &m->kcap) || !(k->name = strdup(name ? name : ""))) {
        free(k);
        return NULL;
    }
    k->mod = m;
    k->stub = stub;
    k->handle = sim_handles_new_key();
    m->kernels[m->nkernels++] = k;
    return k;
}

/* The alignment a variable gets: that of its host shadow (same type), up to
 * 256 bytes; 16 for a library's variable, whose type the sim cannot see. */
static size_t var_align(const void *host)
{
    if (!host) return 16;
    uintptr_t a = (uintptr_t)host & -(uintptr_t)host;
    return a && a < 256 ? a : 256;
}

int sim_module_add_var(struct sim_module *m, const void *host, const char *name, size_t size,
                       int managed, const void *init)
{
    struct sim_var *v = calloc(1, sizeof *v);
    if (!v || grow(&m->vars, m->nvars, &m->vcap) || !(v->name = strdup(name ? name : "")) ||
        (init && !(v->init = malloc(size)))) {
        if (v) free(v->name);
        free(v);
        return -1;
    }
    if (init) memcpy(v->init, init, size);
    size_t align = var_align(host);
    v->mod = m;
    v->host = host;
    v->size = size;
    v->managed = managed;
    v->offset = (m->storage + align - 1) & ~(align - 1);
    m->storage = v->offset + size;
    m->vars[m->nvars++] = v;
    return 0;
}

/* The callers of these three hold the lock for writing. */
static void publish_kernel(struct sim_kernel *k)
{
    sim_handles_add(by_handle, k->handle, k);
    /* A template kernel instantiated in several translation units has one
     * host stub that each of their modules registers: the first names it. */
    if (k->stub && !sim_handles_get(by_stub, k->stub)) sim_handles_add(by_stub, k->stub, k);
}

static void publish_var(struct sim_var *v)
{
    if (v->host && !sim_handles_get(by_host_var, v->host)) sim_handles_add(by_host_var, v->host, v);
}

static void link_module(struct sim_module *m)
{
    m->next = modules;
    if (modules) modules->prev = m;
    modules = m;
}

void sim_module_publish(struct sim_module *m)
{
    pthread_rwlock_wrlock(&lock);
    for (size_t i = 0; i < m->nkernels; i++)
        publish_kernel(m->kernels[i]);
    for (size_t i = 0; i < m->nvars; i++)
        publish_var(m->vars[i]);
    link_module(m);
    pthread_rwlock_unlock(&lock);
}

/* The storage of m on `device`, dropped from the registry and uncharged,
 * and unmapped if `unmap`; the caller holds m->load_mu or the only
 * reference to m. */
struct sim_module *sim_module_register(void)
{
    struct sim_module *m = sim_module_new();
    if (!m) return NULL;
    pthread_rwlock_wrlock(&lock);
    link_module(m);
    pthread_rwlock_unlock(&lock);
    return m;
}

void sim_module_register_kernel(struct sim_module *m, const void *stub, const char *name)
{
    pthread_rwlock_wrlock(&lock);
    struct sim_kernel *k = sim_module_add_kernel(m, stub, name);
    if (k) publish_kernel(k);
    pthread_rwlock_unlock(&lock);
}

void sim_module_register_var(struct sim_module *m, const void *host, const char *name, size_t size,
                             const void *init)
{
    pthread_rwlock_wrlock(&lock);
    /* Once the module is loaded somewhere its layout is fixed. */
    if (!m->loaded && sim_module_add_var(m, host, name, size, 0, init) == 0)
        publish_var(m->vars[m->nvars - 1]);
    pthread_rwlock_unlock(&lock);
}

static void unload(struct sim_module *m, int device, int unmap)
{
    struct sim_range r;
    if (!m->base || !m->base[device]) return;
    if (sim_registry_find((uintptr_t)m->base[device], &r)) {
        if (unmap)
            sim_devmem_release(&r);
        else
            sim_devmem_drop(&r);
    }
    m->base[device] = NULL;
}

void sim_module_destroy(struct sim_module *m, int wait)
{
    pthread_rwlock_wrlock(&lock);
    if (m->prev)
        m->prev->next = m->next;
    else if (modules == m)
        modules = m->next;
    if (m->next) m->next->prev = m->prev;
    for (size_t i = 0; i < m->nkernels; i++) {
        struct sim_kernel *k = m->kernels[i];
        sim_handles_remove(by_handle, k->handle);
        if (k->stub && sim_handles_get(by_stub, k->stub) == k) sim_handles_remove(by_stub, k->stub);
    }
    for (size_t i = 0; i < m->nvars; i++) {
        struct sim_var *v = m->vars[i];
        if (v->host && sim_handles_get(by_host_var, v->host) == v)
            sim_handles_remove(by_host_var, v->host);
    }
    pthread_rwlock_unlock(&lock);

    /* Nothing can find the module any more, but work queued on a stream
     * may still touch its memory: wait for the device first, as cudaFree
     * does, or leave the mapping to the process's end. */
    for (int d = 0; m->base && d < sim_cfg.ndevices; d++) {
        if (!m->base[d]) continue;
        if (wait) sim_device_sync(sim_dev(d));
        unload(m, d, wait);
    }
    for (size_t i = 0; i < m->nkernels; i++) {
        sim_kernel_attrs_free(m->kernels[i]);
        free(m->kernels[i]->name);
        free(m->kernels[i]);
    }
    for (size_t i = 0; i < m->nvars; i++) {
        free(m->vars[i]->name);
        free(m->vars[i]->init);
        free(m->vars[i]);
    }
    free(m->kernels);
    free(m->vars);
    free(m->base);
    pthread_mutex_destroy(&m->load_mu);
    free(m);
}

struct sim_kernel *sim_kernel_find(const void *func)
{
    if (!func) return NULL;
    struct sim_kernel *k = sim_handles_get(by_stub, func);
    return k ? k : sim_handles_get(by_handle, func);
}

struct sim_var *sim_var_find(const void *host)
{
    return host ? sim_handles_get(by_host_var, host) : NULL;
}

cudaError_t sim_module_load(struct sim_module *m, int device)
{
    struct sim_device *dev = sim_dev(device);
    if (!dev) return cudaErrorInvalidDevice;
    if (m->storage == 0) return cudaSuccess;
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&m->load_mu);
    if (!m->base) m->base = calloc((size_t)sim_cfg.ndevices, sizeof *m->base);
    if (!m->base) {
        err = cudaErrorMemoryAllocation;
    } else if (!m->base[device]) {
        void *p;
        err = sim_devmem_alloc(dev, m->storage, SIM_RANGE_MODULE, &p);
        if (!err) {
            m->base[device] = p;
            m->loaded = 1;
            /* Variables start zeroed, or from the image; the storage may lie
             * where a freed allocation left its bytes (a shared page). */
            if (sim_cfg.moves_data) memset(p, 0, m->storage);
            for (size_t i = 0; sim_cfg.moves_data && i < m->nvars; i++)
                if (m->vars[i]->init)
                    memcpy(m->base[device] + m->vars[i]->offset, m->vars[i]->init,
                           m->vars[i]->size);
        }
    }
    pthread_mutex_unlock(&m->load_mu);
    return err;
}

cudaError_t sim_var_address(struct sim_var *v, int device, char **out)
{
    cudaError_t err = sim_module_load(v->mod, device);
    if (err) return err;
    pthread_mutex_lock(&v->mod->load_mu);
    /* A module whose variables are all empty has no storage to point into. */
    char *base = v->mod->base ? v->mod->base[device] : NULL;
    if (base) *out = base + v->offset;
    pthread_mutex_unlock(&v->mod->load_mu);
    return base ? cudaSuccess : cudaErrorInvalidSymbol;
}

size_t sim_module_kernel_count(const struct sim_module *m)
{
    return m->nkernels;
}

struct sim_kernel *sim_module_kernel_at(const struct sim_module *m, size_t i)
{
    return i < m->nkernels ? m->kernels[i] : NULL;
}

struct sim_kernel *sim_module_kernel_named(const struct sim_module *m, const char *name)
{
    for (size_t i = 0; i < m->nkernels; i++)
        if (strcmp(m->kernels[i]->name, name) == 0) return m->kernels[i];
    return NULL;
}

struct sim_var *sim_module_var_named(const struct sim_module *m, const char *name)
{
    for (size_t i = 0; i < m->nvars; i++)
        if (strcmp(m->vars[i]->name, name) == 0) return m->vars[i];
    return NULL;
}

void sim_modules_forget_device(int device)
{
    pthread_once(&maps_once, maps_init);
    pthread_rwlock_wrlock(&lock);
    for (struct sim_module *m = modules; m; m = m->next) {
        pthread_mutex_lock(&m->load_mu);
        unload(m, device, 1); /* cudaDeviceReset waited for the device */
        pthread_mutex_unlock(&m->load_mu);
    }
    pthread_rwlock_unlock(&lock);
}

void sim_modules_fork(enum sim_fork_phase phase)
{
    sim_fork_rwlock(&lock, phase);
}

/* ---- the ABI of nvcc's generated host code (crt/host_runtime.h) ----
 *
 * Each translation unit's static constructor registers its fat binary,
 * then, from a callback, each kernel (__cudaRegisterFunction) and variable
 * (__cudaRegisterVar), then ends the registration; an atexit handler
 * unregisters it. The handle is a void ** the generated code only passes
 * back; it points into a record of ours, looked up before use. These calls
 * return nothing (or a handle), so a bad handle is ignored. */
