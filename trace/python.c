/* python.c - the Python frames of the allocating thread (python.h).
 *
 * libfsdpshim.so links no libpython: the CPython API is looked up at run
 * time in whatever the process has loaded (the python executable exports
 * it; an embedding program may have dlopen'ed libpython RTLD_LOCAL, found
 * then among the loaded objects), and looked up again only when objects
 * have been loaded since. Python is only ever called by a thread that
 * holds the GIL (PyGILState_Check, callable from any thread), and the GIL
 * is never taken.
 *
 * A thread that holds the GIL as it allocates has its frames read then.
 * Most allocations are made without it: PyTorch's operators release the
 * GIL (pybind11's gil_scoped_release) before their C++ allocates, ctypes
 * releases it around a CDLL call, autograd's threads run without it. Such
 * a thread's own frames cannot change until it takes the GIL back, but the
 * API cannot read them meanwhile: PyThreadState_GetFrame and
 * PyFrame_GetBack take references, and from 3.11 make frame objects, which
 * without the GIL races the thread that holds it. So they are read at the
 * moment the GIL is let go: the shim defines PyEval_SaveThread and its kin
 * (interpose/python/gil.c), and with trace:python the releasing thread,
 * still holding the GIL, interns its stack here (fs_python_gil_release);
 * the id stays the thread's until it takes the GIL back
 * (fs_python_gil_acquired), and what it allocates meanwhile carries it. A
 * repeated stack costs one walk and one probe of the table below.
 *
 * Releases nest: a thread that let the GIL go takes it again for a Python
 * callback (PyGILState_Ensure, pybind11's gil_scoped_acquire) whose own
 * operators release it again. Each release pushes the id it replaces and
 * each acquire pops one, so once the inner pair is done the outer call's
 * stack is the thread's again. The interpreter's calls to itself may
 * bypass the shim (a libpython built with -fno-semantic-interposition,
 * Debian's, calls its PyEval_RestoreThread directly from
 * PyGILState_Ensure and its PyEval_SaveThread from PyGILState_Release);
 * then both halves of that pair go unseen and the stack stays balanced.
 * The depth is bounded (RELEASE_NESTING): deeper, the ids of outer calls
 * are forgotten, never mixed up.
 *
 * Reading the frame structs without the GIL, as py-spy and memray's
 * native mode do, was the other way: it would cost nothing per release,
 * but PyThreadState, _PyInterpreterFrame, code and string objects change
 * layout with every minor version (and the thread state within patch
 * releases), each would be a table of offsets to keep for every version
 * from 3.8 on, and a stale table reads garbage without a word; what the
 * API reads under the GIL stays right on a version nobody has tried yet.
 *
 * 3.9 and later walk frames through PyThreadState_GetFrame, PyFrame_GetBack
 * and PyFrame_GetCode; 3.8, which lacks them, through PyEval_GetFrame and
 * the frames' attributes. A stack is interned by its chain of (code object,
 * line) pairs, so a repeated stack builds no string; the table keeps a
 * reference to every code object it names, so that an address is never
 * reused for another function while an entry names it. A walk that makes
 * a frame object can run the collector (3.11 collects on allocation) and
 * with it Python finalizers, which may release the GIL in turn: the walk
 * holds no lock, and the table's lock is held only for calls that make no
 * container object. */
#include "python.h"
#include "trace_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct _object PyObject;

static struct {
    int minor; /* 3.minor; 0 until found */
    int (*is_initialized)(void);
    int (*gil_check)(void);
    void *(*this_thread_state)(void);
    PyObject *(*thread_frame)(void *tstate);  /* 3.9+, new reference */
    PyObject *(*frame_back)(PyObject *frame); /* 3.9+, new reference */
    PyObject *(*frame_code)(PyObject *frame); /* 3.9+, new reference */
    int (*frame_line)(PyObject *frame);
    int (*frame_lasti)(PyObject *frame);            /* 3.11+ */
    int (*code_addr2line)(PyObject *code, int);     /* 3.11+: the line of an offset */
    PyObject *(*eval_frame)(void);                  /* borrowed */
    PyObject *(*getattr)(PyObject *, const char *); /* new reference */
    const char *(*utf8)(PyObject *, ssize_t *);
    void (*incref)(PyObject *);
    void (*decref)(PyObject *);
    void (*err_clear)(void);
    PyObject *(*err_occurred)(void); /* borrowed */
    void (*err_fetch)(PyObject **, PyObject **, PyObject **);
    void (*err_restore)(PyObject *, PyObject *, PyObject *);
    PyObject *none; /* Py_None, for 3.8's f_back */
} py;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the table of stacks */
/* Finding the API asks the loader (dl_iterate_phdr, dlsym, dlopen), whose
 * lock a thread running a library's constructor holds while it allocates:
 * no thread ever waits for this one, so that no constructor waits for a
 * thread that waits for the loader (one that finds it taken records no
 * Python frames that time). */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long looked_at_adds = ~0ull;

/* ---- finding the API --------------------------------------------------------- */

static void *handle_with_python;

/* The path of a loaded libpython, into arg (PATH_MAX bytes). The dlopen
 * comes after dl_iterate_phdr, which holds a lock of the loader's that
 * dlopen takes after its own. */
static int find_libpython(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libpython")) return 0;
    snprintf(arg, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}

static int adds_counter(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p && handle_with_python) p = dlsym(handle_with_python, name);
    return p;
}

/* Looks the API up once objects were loaded since the last look. Under
 * resolve_lock. */
static bool resolve(void)
{
    unsigned long long adds;
    const char *(*version)(void);
    int major = 0, minor = 0;

    if (py.minor) return true;
    dl_iterate_phdr(adds_counter, &adds);
    if (adds == looked_at_adds) return false;
    looked_at_adds = adds;
    version = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    if (!version) {
        char path[PATH_MAX];
        if (!handle_with_python && dl_iterate_phdr(find_libpython, path))
            handle_with_python = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
        version = (const char *(*)(void))sym("Py_GetVersion");
    }
    if (!version || sscanf(version(), "%d.%d", &major, &minor) != 2 || major != 3 || minor < 8)
        return false;
    *(void **)&py.is_initialized = sym("Py_IsInitialized");
    *(void **)&py.gil_check = sym("PyGILState_Check");
    *(void **)&py.this_thread_state = sym("PyGILState_GetThisThreadState");
    *(void **)&py.thread_frame = sym("PyThreadState_GetFrame");
    *(void **)&py.frame_back = sym("PyFrame_GetBack");
    *(void **)&py.frame_code = sym("PyFrame_GetCode");
    *(void **)&py.frame_line = sym("PyFrame_GetLineNumber");
    if (minor >= 11) {
        *(void **)&py.frame_lasti = sym("PyFrame_GetLasti");
        *(void **)&py.code_addr2line = sym("PyCode_Addr2Line");
    }
    *(void **)&py.eval_frame = sym("PyEval_GetFrame");
    *(void **)&py.getattr = sym("PyObject_GetAttrString");
    *(void **)&py.utf8 = sym("PyUnicode_AsUTF8AndSize");
    *(void **)&py.incref = sym("Py_IncRef");
    *(void **)&py.decref = sym("Py_DecRef");
    *(void **)&py.err_clear = sym("PyErr_Clear");
    *(void **)&py.err_occurred = sym("PyErr_Occurred");
    *(void **)&py.err_fetch = sym("PyErr_Fetch"); /* deprecated from 3.12, still there */
    *(void **)&py.err_restore = sym("PyErr_Restore");
    py.none = sym("_Py_NoneStruct");
    if (!py.is_initialized || !py.gil_check || !py.this_thread_state || !py.getattr || !py.utf8 ||
        !py.incref || !py.decref || !py.err_clear || !py.err_occurred || !py.frame_line)
        return false;
    if (minor >= 9 ? !py.thread_frame || !py.frame_back || !py.frame_code
                   : !py.eval_frame || !py.none)
        return false;
    __atomic_store_n(&py.minor, minor, __ATOMIC_RELEASE);
    return true;
}

/* ---- walking frames (GIL held) --------------------------------------------------- */

/* A frame as the table keys it: its code object and where in it. From
 * 3.11 that is the instruction offset, cheap to read, and the line is
 * decoded only for a stack seen the first time (PyFrame_GetLineNumber
 * decodes the line table at every call); before, the line itself. */
typedef struct pair {
    PyObject *code;
    int line; /* or the offset, when by_offset() */
} pair;

static bool by_offset(void)
{
    return py.frame_lasti && py.code_addr2line;
}

/* The innermost frame, a new reference. */
static PyObject *first_frame(void)
{
    if (py.minor >= 9) {
        void *ts = py.this_thread_state();
        return ts ? py.thread_frame(ts) : NULL;
    }
    PyObject *f = py.eval_frame();
    if (f) py.incref(f);
    return f;
}

/* The caller of frame f (a reference the caller drops), and f's code (a
 * new reference) and line. */
static PyObject *step(PyObject *f, pair *out)
{
    if (py.minor >= 9) {
        out->code = py.frame_code(f);
        out->line = by_offset() ? py.frame_lasti(f) : py.frame_line(f);
        return py.frame_back(f);
    }
    out->code = py.getattr(f, "f_code");
    out->line = py.frame_line(f);
    PyObject *back = py.getattr(f, "f_back");
    if (!back) py.err_clear();
    if (back == py.none) { /* 3.8's f_back is None at the bottom */
        py.decref(back);
        back = NULL;
    }
    return back;
}

static unsigned walk(pair *pairs, unsigned max)
{
    PyObject *f = first_frame();
    unsigned n = 0;

    while (f && n < max) {
        PyObject *back = step(f, &pairs[n]);
        py.decref(f);
        if (!pairs[n].code) {
            py.err_clear();
            if (back) py.decref(back);
            break;
        }
        n++;
        f = back;
    }
    if (f) py.decref(f);
    return n;
}

/* A string attribute of a code object as an interned trace string. */
static uint32_t code_string(PyObject *code, const char *attr)
{
    PyObject *s = py.getattr(code, attr);
    ssize_t len = 0;
    const char *p = s ? py.utf8(s, &len) : NULL;
    uint32_t id;

    if (!p) {
        py.err_clear();
        p = "?";
        len = 1;
    }
    id = fs_trace_string(p, (size_t)len);
    if (s) py.decref(s);
    return id;
}

/* ---- the table ------------------------------------------------------------------- */

typedef struct entry {
    uint64_t hash;
    uint32_t id, n;
    pair *pairs;            /* code objects referenced for the table's life */
    fs_fmt_pyframe *frames; /* as defined */
} entry;

static entry *table;
static size_t cap, used;
static entry **by_id;
static size_t by_id_cap;

static uint64_t hash_pairs(const pair *p, unsigned n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)p[i].code * 31 + (uint64_t)p[i].line;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h | 1;
}

static bool grow(void)
{
    size_t ncap = cap ? cap * 2 : 256;
    entry *t = calloc(ncap, sizeof *t);
    entry **ids = realloc(by_id, ncap * sizeof *ids);
    if (!t || !ids) {
        free(t);
        if (ids) by_id = ids;
        return false;
    }
    by_id = ids;
    by_id_cap = ncap;
    for (size_t i = 0; i < cap; i++) {
        if (!table[i].hash) continue;
        size_t j = table[i].hash & (ncap - 1);
        while (t[j].hash)
            j = (j + 1) & (ncap - 1);
        t[j] = table[i];
    }
    free(table);
    table = t;
    cap = ncap;
    for (size_t i = 0; i < cap; i++)
        if (table[i].hash) by_id[table[i].id] = &table[i];
    return true;
}

/* Under lock, GIL held: the id of this chain, defined on first sight. */
static uint32_t intern(pair *pairs, unsigned n)
{
    static uint8_t rec[FS_FMT_MAX_RECORD];
    uint64_t h = hash_pairs(pairs, n);

    if ((used + 2) * 2 > cap && !grow()) return 0;
    size_t i = h & (cap - 1);
    for (; table[i].hash; i = (i + 1) & (cap - 1)) {
        entry *e = &table[i];
        if (e->hash == h && e->n == n && !memcmp(e->pairs, pairs, n * sizeof *pairs)) return e->id;
    }
    entry e = {.hash = h, .id = (uint32_t)used + 1, .n = n};
    e.pairs = malloc(n * sizeof *e.pairs + 1);
    e.frames = malloc(n * sizeof *e.frames + 1);
    if (!e.pairs || !e.frames) {
        free(e.pairs);
        free(e.frames);
        return 0;
    }
    for (unsigned k = 0; k < n; k++) {
        e.pairs[k] = pairs[k];
        py.incref(pairs[k].code);
        e.frames[k].file = code_string(pairs[k].code, "co_filename");
        e.frames[k].function = code_string(pairs[k].code, "co_name");
        int line = by_offset() ? py.code_addr2line(pairs[k].code, pairs[k].line) : pairs[k].line;
        e.frames[k].line = line > 0 ? (uint32_t)line : 0;
    }
    fs_trace_define(rec, fs_fmt_put_pystack(e.id, e.frames, n, rec));
    table[i] = e;
    by_id[e.id] = &table[i];
    used++;
    return e.id;
}

/* ---- capturing ------------------------------------------------------------------- */

/* Whether the API has been found; looks for it while it has not (never
 * waiting for the loader's lock: see resolve_lock). */
static bool ready(void)
{
    if (fs_likely(__atomic_load_n(&py.minor, __ATOMIC_ACQUIRE))) return true;
    if (pthread_mutex_trylock(&resolve_lock) != 0) return false;
    bool ok = resolve();
    pthread_mutex_unlock(&resolve_lock);
    return ok;
}

/* Whether the calling thread holds the GIL; both calls are safe without
 * it. Py_IsInitialized turns false as finalisation begins. */
static bool holds_gil(void)
{
    return py.is_initialized() && py.gil_check() && py.this_thread_state();
}

/* The stack of the calling thread, which holds the GIL, interned. An
 * exception the program has pending is set aside meanwhile: the walk
 * clears the errors it meets, which must not be the program's (a C
 * function may release the GIL with its error set, to clean up). */
static uint32_t capture(unsigned max_frames)
{
    pair pairs[FS_FMT_MAX_FRAMES];
    PyObject *type = NULL, *value = NULL, *traceback = NULL;
    bool pending = py.err_occurred() != NULL;
    unsigned n;
    uint32_t id = 0;

    if (pending && (!py.err_fetch || !py.err_restore)) return 0;
    if (pending) py.err_fetch(&type, &value, &traceback);
    if (max_frames > FS_FMT_MAX_FRAMES) max_frames = FS_FMT_MAX_FRAMES;
    n = walk(pairs, max_frames);
    if (n) {
        pthread_mutex_lock(&lock);
        id = intern(pairs, n);
        pthread_mutex_unlock(&lock);
        for (unsigned k = 0; k < n; k++)
            py.decref(pairs[k].code);
    }
    if (pending) py.err_restore(type, value, traceback);
    return id;
}

/* The stack of a thread that let the GIL go through the shim, as it was at
 * that moment (the file's first comment); a fork child's one thread keeps
 * its parent thread's, which are its own frames too. */
#define RELEASE_NESTING 16
static FS_TLS struct {
    uint32_t stack;                  /* 0: none (then also depth 0, or an outer release had none) */
    uint32_t depth;                  /* releases seen and not yet matched by an acquire */
    uint32_t outer[RELEASE_NESTING]; /* the stack each pending release replaced */
} released;

void fs_python_gil_release(unsigned max_frames)
{
    /* captured before the push: a collection the walk runs may release
     * and take the GIL in pairs of its own, which leave the stack as they
     * found it */
    uint32_t id = max_frames && ready() && holds_gil() ? capture(max_frames) : 0;

    if (released.depth < RELEASE_NESTING) released.outer[released.depth] = released.stack;
    released.depth++;
    released.stack = id;
}

void fs_python_gil_acquired(void)
{
    if (!released.depth) { /* an acquire whose release went unseen */
        released.stack = 0;
        return;
    }
    released.depth--;
    released.stack = released.depth < RELEASE_NESTING ? released.outer[released.depth] : 0;
}

uint32_t fs_python_stack(unsigned max_frames)
{
    if (fs_trace_level() < FS_TRACE_PYTHON || !max_frames || !ready()) return 0;
    /* A thread that holds the GIL has its frames read now; one that let it
     * go through the shim has them from then (one with no Python state, or
     * that let it go some other way, has none there). */
    return holds_gil() ? capture(max_frames) : released.stack;
}

uint32_t fs_python_frames(uint32_t id, fs_fmt_pyframe *out, uint32_t max)
{
    uint32_t n = 0;

    pthread_mutex_lock(&lock);
    if (id && id < by_id_cap && by_id[id]) {
        n = by_id[id]->n < max ? by_id[id]->n : max;
        memcpy(out, by_id[id]->frames, n * sizeof *out);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

/* fork: no thread may be inside the table across it. Taken ahead of the
 * strings' lock (session.c), which intern() takes under it. */
void fs_python_fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void fs_python_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void fs_python_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    /* a thread of the parent's may have been looking the API up */
    pthread_mutex_init(&resolve_lock, NULL);
}
