/* cupti.c - the trace-only attach through CUPTI's callback API
 * (docs/tracing.md, "Trace-only attach").
 *
 * The driver loads CUDA_INJECTION64_PATH at cuInit and calls its
 * InitializeInjection; `fsdpshim attach` calls fsdpshim_attach_start in a
 * running process (attach.c). Either way the shim is not preloaded, its
 * interposed entry points are not in effect, and it serves nothing: it
 * subscribes to CUPTI and writes each of the program's memory and stream
 * calls that succeeded to the trace through passive.c. The stack is taken on
 * API enter (where it is the program's, below CUPTI's and CUDA's own
 * frames), the event written on exit, once the address is known. A runtime
 * call that the driver reports again from inside (cudaMalloc making
 * cuMemAlloc) is written once, by the outermost call.
 *
 * libcupti is never linked (docs/architecture.md): it is opened with dlopen,
 * and only the five functions below are used. CUPTI allows one subscriber per
 * process; when a profiler or compute-sanitizer holds it, the shim says so
 * once and the program runs on without a trace. */
#include "cupti.h"

#include "../../trace/trace.h"
#include "../attach/passive.h"
#include "../core/shim.h"
#include "../core/trace_glue.h"

#include <cupti.h> /* with the params structs of every traced call */
#include <dlfcn.h>
#include <libgen.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    __typeof__(&cuptiSubscribe) subscribe;
    __typeof__(&cuptiUnsubscribe) unsubscribe;
    __typeof__(&cuptiEnableCallback) enable_callback;
    __typeof__(&cuptiGetDeviceId) device_id;
    __typeof__(&cuptiGetResultString) result_string;
} cupti;

static CUpti_SubscriberHandle subscriber;
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static bool attached;
/* Which libcupti was loaded, and why the last attach could not use it: for
 * the log, and for `fsdpshim attach` to say (attach.c), since the process's
 * stderr may be nowhere its user looks. Under attach_lock. */
static char cupti_path[4096];
static char failure[4096 + 256];

static const CUpti_CallbackId runtime_ids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050,
};

static const CUpti_CallbackId driver_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
};

/* Calls of the list above that the thread is inside: only the outermost
 * one is written. Counted per subscription: a thread that was inside a
 * call when a detach unsubscribed never gets its exit, and a count left
 * from then would keep every later call of the thread out of the next
 * attach's trace. */
static atomic_uint subscription; /* one more at each cuptiSubscribe */
static FS_TLS struct {
    int depth;
    unsigned subscription;
} inside;

/* The legacy stream is 0 in traces, as in the CUDA API. */
static uint64_t stream_value(const void *stream)
{
    return stream == (const void *)cudaStreamLegacy ? 0 : (uint64_t)(uintptr_t)stream;
}

static int device_of(const CUpti_CallbackData *d)
{
    uint32_t dev;
    return d->context && cupti.device_id(d->context, &dev) == CUPTI_SUCCESS ? (int)dev : -1;
}

static void runtime_exit(CUpti_CallbackId id, const CUpti_CallbackData *d, int dev)
{
    const void *p = d->functionParams;
    switch (id) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const cudaMalloc_v3020_params *m = p;
        fs_passive_alloc(dev, 0, (uint64_t)(uintptr_t)*m->devPtr, m->size, false);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        fs_passive_free(dev, 0, (uint64_t)(uintptr_t)((const cudaFree_v3020_params *)p)->devPtr,
                        false);
        return;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        const cudaMallocAsync_v11020_params *m = p;
        fs_passive_alloc(dev, stream_value(m->hStream), (uint64_t)(uintptr_t)*m->devPtr, m->size,
                         true);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
        const cudaMallocFromPoolAsync_v11020_params *m = p;
        fs_passive_alloc(dev, stream_value(m->stream), (uint64_t)(uintptr_t)*m->ptr, m->size, true);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *f = p;
        fs_passive_free(dev, stream_value(f->hStream), (uint64_t)(uintptr_t)f->devPtr, true);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020:
        fs_trace_stream(true, dev, *((const cudaStreamCreate_v3020_params *)p)->pStream, 0, 0,
                        false);
        return;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000: {
        const cudaStreamCreateWithFlags_v5000_params *c = p;
        fs_trace_stream(true, dev, *c->pStream, c->flags, 0, false);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050: {
        const cudaStreamCreateWithPriority_v5050_params *c = p;
        fs_trace_stream(true, dev, *c->pStream, c->flags, c->priority, false);
        return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050:
        fs_trace_stream(false, dev, ((const cudaStreamDestroy_v5050_params *)p)->stream, 0, 0,
                        false);
        return;
    default:
        return;
    }
}

static void driver_exit(CUpti_CallbackId id, const CUpti_CallbackData *d, int dev)
{
    const void *p = d->functionParams;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *m = p;
        fs_passive_alloc(dev, 0, *m->dptr, m->bytesize, false);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        fs_passive_free(dev, 0, ((const cuMemFree_v2_params *)p)->dptr, false);
        return;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *m = p;
        fs_passive_alloc(dev, stream_value(m->hStream), *m->dptr, m->bytesize, true);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *f = p;
        fs_passive_free(dev, stream_value(f->hStream), f->dptr, true);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        const cuMemCreate_params *c = p;
        fs_trace_vmm(FS_VMM_CREATE, c->prop->location.id, 0, c->size, *c->handle);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
        fs_trace_vmm(FS_VMM_RELEASE, -1, 0, 0, ((const cuMemRelease_params *)p)->handle);
        return;
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const cuMemMap_params *m = p;
        fs_trace_vmm(FS_VMM_MAP, -1, m->ptr, m->size, m->handle);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const cuMemUnmap_params *u = p;
        fs_trace_vmm(FS_VMM_UNMAP, -1, u->ptr, u->size, 0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
        const cuMemAddressReserve_params *r = p;
        fs_trace_vmm(FS_VMM_RESERVE, -1, *r->ptr, r->size, 0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        const cuMemAddressFree_params *f = p;
        fs_trace_vmm(FS_VMM_ADDRESS_FREE, -1, f->ptr, f->size, 0);
        return;
    }
    default:
        return;
    }
}

/* The address a call of the lists above frees; 0 for the other calls. */
static uint64_t freed_address(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *p)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (id) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
            return (uint64_t)(uintptr_t)((const cudaFree_v3020_params *)p)->devPtr;
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
            return (uint64_t)(uintptr_t)((const cudaFreeAsync_v11020_params *)p)->devPtr;
        default:
            return 0;
        }
    }
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        return ((const cuMemFree_v2_params *)p)->dptr;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
        return ((const cuMemFreeAsync_params *)p)->dptr;
    default:
        return 0;
    }
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *data)
{
    const CUpti_CallbackData *d = data;
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    unsigned now = atomic_load_explicit(&subscription, memory_order_relaxed);
    if (inside.subscription != now) {
        inside.subscription = now;
        inside.depth = 0;
    }
    if (d->callbackSite == CUPTI_API_ENTER) {
        if (inside.depth++ > 0) return;
        fs_passive_enter();
        uint64_t freed = freed_address(domain, id, d->functionParams);
        if (freed) fs_passive_free_enter(freed);
        return;
    }
    /* entered before the subscription, or nested */
    if (inside.depth == 0 || --inside.depth > 0) return;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (*(const cudaError_t *)d->functionReturnValue == cudaSuccess)
            runtime_exit(id, d, device_of(d));
        else
            fs_passive_free_failed();
    } else if (*(const CUresult *)d->functionReturnValue == CUDA_SUCCESS) {
        driver_exit(id, d, device_of(d));
    } else {
        fs_passive_free_failed();
    }
}

/* ---- finding CUPTI ------------------------------------------------------------ */

static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};

/* The directory of a loaded CUDA runtime or driver: the toolkit's lib
 * directory and NVIDIA's wheels keep libcupti beside libcudart. */
static int cuda_dir(struct dl_phdr_info *info, size_t size, void *arg)
{
    char *dir = arg, copy[4096];
    const char *base;
    (void)size;
    if (!info->dlpi_name || !*info->dlpi_name) return 0;
    base = strrchr(info->dlpi_name, '/');
    if (!base || (strncmp(base + 1, "libcudart.so", 12) && strncmp(base + 1, "libcuda.so", 10)))
        return 0;
    snprintf(copy, sizeof copy, "%s", info->dlpi_name);
    snprintf(dir, 4096, "%s", dirname(copy));
    return 1;
}

static void *open_cupti(void)
{
    static const char *const toolkit[] = {"/usr/local/cuda/extras/CUPTI/lib64",
                                          "/usr/local/cuda/lib64"};
    char dir[4096] = "", path[4200];
    void *lib = NULL;

    for (size_t i = 0; !lib && i < sizeof sonames / sizeof sonames[0]; i++)
        lib = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
    if (!lib && dl_iterate_phdr(cuda_dir, dir)) {
        for (size_t i = 0; !lib && i < sizeof sonames / sizeof sonames[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, sonames[i]);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    for (size_t i = 0; !lib && i < sizeof sonames / sizeof sonames[0]; i++)
        lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    for (size_t t = 0; !lib && t < sizeof toolkit / sizeof toolkit[0]; t++) {
        for (size_t i = 0; !lib && i < sizeof sonames / sizeof sonames[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", toolkit[t], sonames[i]);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    return lib;
}

static bool resolve(void *lib)
{
    *(void **)&cupti.subscribe = dlsym(lib, "cuptiSubscribe");
    *(void **)&cupti.unsubscribe = dlsym(lib, "cuptiUnsubscribe");
    *(void **)&cupti.enable_callback = dlsym(lib, "cuptiEnableCallback");
    *(void **)&cupti.device_id = dlsym(lib, "cuptiGetDeviceId");
    *(void **)&cupti.result_string = dlsym(lib, "cuptiGetResultString");
    return cupti.subscribe && cupti.unsubscribe && cupti.enable_callback && cupti.device_id &&
           cupti.result_string;
}

static const char *result_text(CUptiResult r)
{
    const char *s = NULL;
    return cupti.result_string(r, &s) == CUPTI_SUCCESS && s ? s : "unknown CUPTI error";
}

/* The file a loaded libcupti was loaded from, into cupti_path. */
static void note_path(void *lib)
{
    Dl_info info;
    void *sym = dlsym(lib, "cuptiSubscribe");
    char *real;

    if (!sym || !dladdr(sym, &info) || !info.dli_fname) {
        snprintf(cupti_path, sizeof cupti_path, "libcupti");
        return;
    }
    real = realpath(info.dli_fname, NULL);
    snprintf(cupti_path, sizeof cupti_path, "%s", real ? real : info.dli_fname);
    free(real);
}

static enum fs_cupti_status attach_locked(int level, unsigned frames, const char *path,
                                          const char *how, bool say_why)
{
    void *lib;
    CUptiResult r;

    if (attached) return FS_CUPTI_ALREADY;
    failure[0] = 0;
    if (!cupti.subscribe) {
        lib = open_cupti();
        if (lib) note_path(lib);
        if (!lib || !resolve(lib)) {
            cupti.subscribe = NULL; /* not half of a table: the next attach looks again */
            if (lib)
                snprintf(failure, sizeof failure, "%s lacks CUPTI's callback API", cupti_path);
            else
                snprintf(failure, sizeof failure,
                         "no CUPTI (libcupti.so.13) beside the CUDA runtime, on the loader's path "
                         "or in /usr/local/cuda");
            if (say_why)
                fs_log(FS_LOG_WARN, "%s: %s: no trace. Add its directory to LD_LIBRARY_PATH", how,
                       failure);
            return FS_CUPTI_NO_CUPTI;
        }
    }
    r = cupti.subscribe(&subscriber, on_callback, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        snprintf(failure, sizeof failure,
                 "another CUPTI client (a profiler such as Nsight Systems, or compute-sanitizer) "
                 "holds CUPTI's only subscriber slot");
        if (say_why) fs_log(FS_LOG_WARN, "%s: %s; no trace, the program runs on", how, failure);
        return FS_CUPTI_TAKEN;
    }
    if (r != CUPTI_SUCCESS) {
        /* NVIDIA's CUPTI in a process on the simulated device, say */
        snprintf(failure, sizeof failure, "cuptiSubscribe of %s: %s", cupti_path, result_text(r));
        if (say_why) fs_log(FS_LOG_WARN, "%s: %s; no trace", how, failure);
        return FS_CUPTI_FAILED;
    }
    if (!fs_passive_start(level, frames, path, how)) {
        cupti.unsubscribe(subscriber);
        snprintf(failure, sizeof failure, "the trace could not be started");
        return FS_CUPTI_NO_TRACE;
    }
    atomic_fetch_add(&subscription, 1); /* before any callback is enabled */
    for (size_t i = 0; i < sizeof runtime_ids / sizeof runtime_ids[0]; i++)
        cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]);
    for (size_t i = 0; i < sizeof driver_ids / sizeof driver_ids[0]; i++)
        cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]);
    attached = true;
    return FS_CUPTI_TRACING;
}

enum fs_cupti_status fs_cupti_attach(int level, unsigned frames, const char *path, const char *how,
                                     bool say_why)
{
    pthread_mutex_lock(&attach_lock);
    enum fs_cupti_status st = attach_locked(level, frames, path, how, say_why);
    pthread_mutex_unlock(&attach_lock);
    return st;
}

const char *fs_cupti_library(void)
{
    return cupti_path[0] ? cupti_path : NULL;
}

const char *fs_cupti_failure(void)
{
    return failure[0] ? failure : NULL;
}

bool fs_cupti_detach(void)
{
    pthread_mutex_lock(&attach_lock);
    bool was = attached;
    if (was) {
        cupti.unsubscribe(subscriber);
        fs_passive_stop();
        attached = false;
    }
    pthread_mutex_unlock(&attach_lock);
    return was;
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names
 * libfsdpshim.so. Tracing is all this mode does: with no trace level in
 * FSDPSHIM_CONF it traces at `stacks`. A preloaded shim already traces
 * everything the program allocates (and serves it): then CUPTI is left
 * alone. */
FS_EXPORT int InitializeInjection(void)
{
    const fs_shim_config *cfg = fs_shim_config_get();

    if (fs_shim_preloaded()) {
        fs_log(FS_LOG_INFO, "CUDA_INJECTION64_PATH: the shim is preloaded; CUPTI is not needed");
        return 1;
    }
    fs_cupti_attach(cfg->trace ? cfg->trace : FS_TRACE_STACKS, cfg->trace_frames,
                    getenv("FSDPSHIM_TRACE"), "CUDA_INJECTION64_PATH", true);
    return 1;
}
