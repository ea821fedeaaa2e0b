/* gil.c - the shim's PyEval_SaveThread, PyEval_RestoreThread,
 * PyEval_ReleaseThread and PyEval_AcquireThread (gil.h).
 *
 * Every way a C extension lets the GIL go and takes it back goes through
 * these: Py_BEGIN/END_ALLOW_THREADS (ctypes around a CDLL call among
 * them), pybind11's gil_scoped_release (PyTorch's operators) and
 * gil_scoped_acquire, PyGILState_Ensure/Release inside the interpreter.
 * With trace:python the thread letting the GIL go, which still holds it,
 * has its Python stack interned before the real call (trace/python.c says
 * why there), and the acquire after the real call hands the stack back.
 * Below trace:python each is a plain call of the interpreter's function,
 * with one check of the trace level on the way.
 *
 * The interpreter's functions are the first definitions in the loader's
 * order that are not the shim's, read from each object's symbol table
 * (core/real_loader.c): libpython after a preloaded shim, the python
 * executable itself where it links libpython statically. There, and where
 * the shim was loaded after libpython (the trace-only attach through
 * CUDA_INJECTION64_PATH), the global scope binds the interpreter's
 * definitions ahead of the shim's: the loaded objects' GOT slots of the
 * four names (PyTorch's libtorch_python, ctypes' _ctypes, ...) are pointed
 * here instead (../slots.h), when tracing starts and after each extension
 * module the interpreter loads (its PyInit_ lookup through the shim's
 * dlsym). A function pointer taken before that, and a call the
 * interpreter makes to itself without its PLT, still reach the interpreter
 * directly; a thread letting the GIL go that way gives no frames
 * (python.c's nesting stays balanced when both halves of a pair go unseen,
 * and bounded when one does). */
#include "gil.h"

#include "../../trace/python.h"
#include "../../trace/trace.h"
#include "../core/lifetime.h"
#include "../core/real.h"
#include "../core/shim.h"
#include "../core/slots.h"

#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct PyThreadState PyThreadState; /* the interpreter's, opaque here */

enum gil_fn { GIL_SAVE, GIL_RESTORE, GIL_RELEASE, GIL_ACQUIRE, GIL_FNS };

static const char *const gil_names[GIL_FNS] = {
    [GIL_SAVE] = "PyEval_SaveThread",
    [GIL_RESTORE] = "PyEval_RestoreThread",
    [GIL_RELEASE] = "PyEval_ReleaseThread",
    [GIL_ACQUIRE] = "PyEval_AcquireThread",
};

static void *real[GIL_FNS]; /* the interpreter's, once found; set once */
/* -1 until the interpreter is found; then whether its definitions come
 * ahead of the shim's in the global scope. */
static int preempted = -1;
static unsigned frames; /* Python frames kept per stack, from fs_python_gil_start */

/* ---- finding the interpreter's functions -------------------------------------- */

typedef struct finding {
    bool shim_seen; /* the shim's object came before the interpreter's */
    int found;
} finding;

static int find_in(struct dl_phdr_info *info, size_t size, void *arg)
{
    finding *f = arg;
    const ElfW(Dyn) *dyn = NULL;
    (void)size;

    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    if (dyn == _DYNAMIC) {
        f->shim_seen = true;
        return 0;
    }
    /* fs_object_function reads the load base and the dynamic section */
    struct link_map object = {.l_addr = info->dlpi_addr, .l_ld = (ElfW(Dyn) *)dyn};
    for (int i = 0; i < GIL_FNS; i++) {
        void *fn;
        if (__atomic_load_n(&real[i], __ATOMIC_ACQUIRE) ||
            !(fn = fs_object_function(&object, gil_names[i])))
            continue;
        if (i == GIL_SAVE) __atomic_store_n(&preempted, !f->shim_seen, __ATOMIC_RELEASE);
        __atomic_store_n(&real[i], fn, __ATOMIC_RELEASE);
        f->found++;
    }
    return f->found == GIL_FNS;
}

static pthread_mutex_t find_lock = PTHREAD_MUTEX_INITIALIZER;

/* Looks for the functions not found yet. dl_iterate_phdr takes only the
 * loader's list lock, which no thread holds while it runs a library's
 * constructor, so a thread holding the GIL never waits here for one that
 * waits for the GIL. */
static void find_interpreter(void)
{
    finding f = {0};

    pthread_mutex_lock(&find_lock);
    for (int i = 0; i < GIL_FNS; i++)
        f.found += __atomic_load_n(&real[i], __ATOMIC_ACQUIRE) != NULL;
    if (f.found < GIL_FNS) dl_iterate_phdr(find_in, &f);
    pthread_mutex_unlock(&find_lock);
}

/* The interpreter's function i. It cannot be missing when the program
 * calls one of these: the program found one somewhere. */
static void *real_fn(enum gil_fn i)
{
    void *fn = __atomic_load_n(&real[i], __ATOMIC_ACQUIRE);

    if (fs_likely(fn != NULL)) return fn;
    find_interpreter();
    if ((fn = __atomic_load_n(&real[i], __ATOMIC_ACQUIRE))) return fn;
    fs_log(FS_LOG_ERROR, "%s was called, but no loaded object other than libfsdpshim.so defines it",
           gil_names[i]);
    abort();
}

/* ---- the hooks ---------------------------------------------------------------- */

static bool capturing(void)
{
    return fs_unlikely(fs_trace_level() >= FS_TRACE_PYTHON);
}

static PyThreadState *gil_save_thread(void)
{
    if (capturing()) fs_python_gil_release(__atomic_load_n(&frames, __ATOMIC_RELAXED));
    return ((PyThreadState * (*)(void)) real_fn(GIL_SAVE))();
}

static void gil_restore_thread(PyThreadState *tstate)
{
    ((void (*)(PyThreadState *))real_fn(GIL_RESTORE))(tstate);
    if (capturing()) fs_python_gil_acquired();
}

static void gil_release_thread(PyThreadState *tstate)
{
    if (capturing()) fs_python_gil_release(__atomic_load_n(&frames, __ATOMIC_RELAXED));
    ((void (*)(PyThreadState *))real_fn(GIL_RELEASE))(tstate);
}

static void gil_acquire_thread(PyThreadState *tstate)
{
    ((void (*)(PyThreadState *))real_fn(GIL_ACQUIRE))(tstate);
    if (capturing()) fs_python_gil_acquired();
}

/* The addresses slots are pointed at: inside the shim a reference to an
 * exported name binds to the global scope's first definition, which is
 * the interpreter's exactly where slots need pointing. */
static void *const ours[GIL_FNS] = {
    [GIL_SAVE] = (void *)gil_save_thread,
    [GIL_RESTORE] = (void *)gil_restore_thread,
    [GIL_RELEASE] = (void *)gil_release_thread,
    [GIL_ACQUIRE] = (void *)gil_acquire_thread,
};

FS_EXPORT PyThreadState *PyEval_SaveThread(void) __attribute__((alias("gil_save_thread")));
FS_EXPORT void PyEval_RestoreThread(PyThreadState *tstate)
    __attribute__((alias("gil_restore_thread")));
FS_EXPORT void PyEval_ReleaseThread(PyThreadState *tstate)
    __attribute__((alias("gil_release_thread")));
FS_EXPORT void PyEval_AcquireThread(PyThreadState *tstate)
    __attribute__((alias("gil_acquire_thread")));

/* ---- slots, where the interpreter's definitions come first ---------------------- */

static pthread_mutex_t redirect_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *redirected; /* load bases of the objects done */
static size_t nredirected, redirected_cap;
static unsigned long long redirected_at_adds = ~0ull;
static unsigned slots_written;

static void redirect_slot(void *ctx, const char *name, void **slot, bool relro)
{
    (void)ctx;
    if (strncmp(name, "PyEval_", 7) != 0) return;
    for (int i = 0; i < GIL_FNS; i++) {
        if (strcmp(name, gil_names[i]) != 0) continue;
        if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != ours[i]) {
            fs_slot_write(slot, ours[i], relro);
            slots_written++;
        }
        return;
    }
}

static int redirect_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    for (size_t i = 0; i < nredirected; i++)
        if (redirected[i] == info->dlpi_addr) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
            (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) == _DYNAMIC)
            return 0; /* the shim's own calls go to the interpreter */
    if (nredirected == redirected_cap) {
        size_t cap = redirected_cap ? 2 * redirected_cap : 64;
        uintptr_t *more = realloc(redirected, cap * sizeof *more);
        if (!more) return 1; /* the rest at the next look */
        redirected = more;
        redirected_cap = cap;
    }
    redirected[nredirected++] = info->dlpi_addr;
    fs_slots_each(info, redirect_slot, NULL);
    return 0;
}

static int adds_counter(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

/* The objects loaded since the last look; how many slots were written in
 * all so far. */
static unsigned redirect_loaded(void)
{
    unsigned long long adds = 0;
    unsigned written;

    pthread_mutex_lock(&redirect_lock);
    dl_iterate_phdr(adds_counter, &adds);
    if (adds != redirected_at_adds) {
        redirected_at_adds = adds;
        dl_iterate_phdr(redirect_object, NULL);
    }
    written = slots_written;
    pthread_mutex_unlock(&redirect_lock);
    return written;
}

static bool interpreter_first(void)
{
    return __atomic_load_n(&preempted, __ATOMIC_ACQUIRE) == 1;
}

void fs_python_gil_start(unsigned kept)
{
    __atomic_store_n(&frames, kept, __ATOMIC_RELAXED);
    find_interpreter();
    if (!interpreter_first()) return; /* no Python, or the shim's definitions bind */
    fs_log(FS_LOG_INFO,
           "trace:python: the interpreter's GIL functions bind ahead of the shim's (libpython "
           "linked statically, or the shim loaded after it): %u slots pointed at the shim's",
           redirect_loaded());
}

/* With trace:python, once the trace has started (core/lifetime.h) */
static void gil_started(fs_allocator *a, int ndev)
{
    (void)a, (void)ndev;
    if (fs_trace_level() >= FS_TRACE_PYTHON)
        fs_python_gil_start(fs_shim_config_get()->trace_frames);
}

FS_LIFETIME(python) = {.order = FS_ORDER_PYTHON, .started = gil_started};

void fs_python_gil_loaded(void)
{
    if (fs_trace_level() < FS_TRACE_PYTHON || !interpreter_first()) return;
    redirect_loaded();
}
