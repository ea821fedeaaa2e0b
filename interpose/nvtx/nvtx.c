/* nvtx.c - the shim as the NVTX injection library.
 *
 * NVTX3 is header-only: on a program's first NVTX call its loader reads
 * NVTX_INJECTION64_PATH, dlopens that library and calls its
 * InitializeInjectionNvtx2, which fills NVTX's callback tables. `fsdpshim
 * run` points NVTX_INJECTION64_PATH at libfsdpshim.so (already loaded, so
 * the dlopen finds this copy) and keeps the user's previous value in
 * FSDPSHIM_NVTX_CHAIN. Ranges pushed and popped land on the thread's
 * annotation stack (trace/annot.c), which the public API shares, and every
 * traced event carries that stack.
 *
 * Chaining: the library that was configured first (a profiler's) is
 * initialised first, on the same tables; whatever it installed is kept and
 * called after the shim has recorded the call. Its domain and string
 * handles are kept inside the shim's own, since both libraries hand the
 * program handles. */
#define NVTX_NO_IMPL
#include "../core/shim.h"
#include "../../trace/annot.h"

#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* A domain or registered string: the shim's name for it, and the chained
 * library's handle. */
typedef struct handle {
    char *text;
    void *chained;
} handle;

/* The chained library's callbacks, each NULL when it installed none. */
static struct {
    nvtxMarkEx_impl_fntype mark_ex;
    nvtxMarkA_impl_fntype mark_a;
    nvtxRangePushEx_impl_fntype push_ex;
    nvtxRangePushA_impl_fntype push_a;
    nvtxRangePop_impl_fntype pop;
    nvtxDomainMarkEx_impl_fntype domain_mark_ex;
    nvtxDomainRangePushEx_impl_fntype domain_push_ex;
    nvtxDomainRangePop_impl_fntype domain_pop;
    nvtxDomainCreateA_impl_fntype domain_create_a;
    nvtxDomainRegisterStringA_impl_fntype register_string_a;
    nvtxDomainDestroy_impl_fntype domain_destroy;
} next;

/* The message of an event, as text (wide strings converted, lossy). */
static const char *message_of(const nvtxEventAttributes_t *a, char *buf, size_t len)
{
    if (!a) return "";
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
        if (a->message.unicode && wcstombs(buf, a->message.unicode, len) != (size_t)-1) {
            buf[len - 1] = 0;
            return buf;
        }
        return "";
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        const handle *h = (const handle *)a->message.registered;
        return h && h->text ? h->text : "";
    }
    default:
        return "";
    }
}

/* The attributes as the chained library must see them: its own string
 * handle in place of the shim's. */
static const nvtxEventAttributes_t *for_chain(const nvtxEventAttributes_t *a,
                                              nvtxEventAttributes_t *copy)
{
    if (!a || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED) return a;
    *copy = *a;
    const handle *h = (const handle *)a->message.registered;
    copy->message.registered = h ? (nvtxStringHandle_t)h->chained : NULL;
    return copy;
}

static const char *domain_name(nvtxDomainHandle_t d)
{
    const handle *h = (const handle *)d;
    return h ? h->text : NULL;
}

static void *domain_chained(nvtxDomainHandle_t d)
{
    const handle *h = (const handle *)d;
    return h ? h->chained : NULL;
}

/* ---- the callbacks ------------------------------------------------------------ */

static int push_a(const char *message)
{
    const char *m = message ? message : "";
    int depth = fs_annot_push(NULL, m, strlen(m));
    if (next.push_a) next.push_a(message);
    return depth < 0 ? NVTX_NO_PUSH_POP_TRACKING : depth - 1;
}

static int push_ex(const nvtxEventAttributes_t *a)
{
    char buf[512];
    nvtxEventAttributes_t copy;
    const char *m = message_of(a, buf, sizeof buf);
    int depth = fs_annot_push(NULL, m, strlen(m));
    if (next.push_ex) next.push_ex(for_chain(a, &copy));
    return depth < 0 ? NVTX_NO_PUSH_POP_TRACKING : depth - 1;
}

static int pop(void)
{
    int depth = fs_annot_pop(NULL);
    if (next.pop) next.pop();
    return depth; /* -1 for a pop with nothing pushed, as NVTX says */
}

static void mark_a(const char *message)
{
    const char *m = message ? message : "";
    fs_annot_mark(NULL, m, strlen(m));
    if (next.mark_a) next.mark_a(message);
}

static void mark_ex(const nvtxEventAttributes_t *a)
{
    char buf[512];
    nvtxEventAttributes_t copy;
    const char *m = message_of(a, buf, sizeof buf);
    fs_annot_mark(NULL, m, strlen(m));
    if (next.mark_ex) next.mark_ex(for_chain(a, &copy));
}

static int domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char buf[512];
    nvtxEventAttributes_t copy;
    const char *m = message_of(a, buf, sizeof buf);
    int depth = fs_annot_push(domain_name(d), m, strlen(m));
    if (next.domain_push_ex) next.domain_push_ex(domain_chained(d), for_chain(a, &copy));
    return depth < 0 ? NVTX_NO_PUSH_POP_TRACKING : depth - 1;
}

static int domain_pop(nvtxDomainHandle_t d)
{
    int depth = fs_annot_pop(domain_name(d));
    if (next.domain_pop) next.domain_pop(domain_chained(d));
    return depth;
}

static void domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char buf[512];
    nvtxEventAttributes_t copy;
    const char *m = message_of(a, buf, sizeof buf);
    fs_annot_mark(domain_name(d), m, strlen(m));
    if (next.domain_mark_ex) next.domain_mark_ex(domain_chained(d), for_chain(a, &copy));
}

static handle *handle_new(const char *text, void *chained)
{
    handle *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->text = strdup(text ? text : "");
    h->chained = chained;
    return h;
}

static nvtxDomainHandle_t domain_create_a(const char *name)
{
    void *chained = next.domain_create_a ? (void *)next.domain_create_a(name) : NULL;
    return (nvtxDomainHandle_t)handle_new(name, chained);
}

static void domain_destroy(nvtxDomainHandle_t d)
{
    handle *h = (handle *)d;
    if (next.domain_destroy) next.domain_destroy(domain_chained(d));
    if (!h) return;
    /* annotation nodes keep copies of the name */
    free(h->text);
    free(h);
}

static nvtxStringHandle_t register_string_a(nvtxDomainHandle_t d, const char *s)
{
    void *chained =
        next.register_string_a ? (void *)next.register_string_a(domain_chained(d), s) : NULL;
    return (nvtxStringHandle_t)handle_new(s, chained);
}

/* ---- initialisation ------------------------------------------------------------ */

/* One slot of a module's table: the callback id, where the shim keeps the
 * chained library's function, and the shim's own. */
typedef struct slot {
    unsigned id;
    NvtxFunctionPointer *next;
    NvtxFunctionPointer mine;
} slot;

#define SLOT(cbid, field, fn)                                                                      \
    {                                                                                              \
        cbid, (NvtxFunctionPointer *)&next.field, (NvtxFunctionPointer)fn                          \
    }

static const slot core[] = {
    SLOT(NVTX_CBID_CORE_MarkEx, mark_ex, mark_ex),
    SLOT(NVTX_CBID_CORE_MarkA, mark_a, mark_a),
    SLOT(NVTX_CBID_CORE_RangePushEx, push_ex, push_ex),
    SLOT(NVTX_CBID_CORE_RangePushA, push_a, push_a),
    SLOT(NVTX_CBID_CORE_RangePop, pop, pop),
};

static const slot core2[] = {
    SLOT(NVTX_CBID_CORE2_DomainMarkEx, domain_mark_ex, domain_mark_ex),
    SLOT(NVTX_CBID_CORE2_DomainRangePushEx, domain_push_ex, domain_push_ex),
    SLOT(NVTX_CBID_CORE2_DomainRangePop, domain_pop, domain_pop),
    SLOT(NVTX_CBID_CORE2_DomainCreateA, domain_create_a, domain_create_a),
    SLOT(NVTX_CBID_CORE2_DomainRegisterStringA, register_string_a, register_string_a),
    SLOT(NVTX_CBID_CORE2_DomainDestroy, domain_destroy, domain_destroy),
};

typedef const void *(*get_export_table_fn)(uint32_t);

FS_EXPORT int InitializeInjectionNvtx2(get_export_table_fn get);

/* What the tables held before the chained library ran: a slot it did not
 * change still holds NVTX's own initialisation stub, which must not be
 * called as if it were the chained library's. */
typedef struct before {
    NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE], core2[NVTX_CBID_CORE2_SIZE];
} before;

static bool table_of(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m, NvtxFunctionTable *t,
                     unsigned *n)
{
    return cb && cb->GetModuleFunctionTable && cb->GetModuleFunctionTable(m, t, n) && *t;
}

static void remember(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m,
                     NvtxFunctionPointer *out, unsigned max)
{
    NvtxFunctionTable t;
    unsigned n;
    if (!table_of(cb, m, &t, &n)) return;
    for (unsigned i = 1; i < n && i < max; i++)
        out[i] = t[i] ? *t[i] : NULL;
}

static void install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m, const slot *s,
                    size_t ns, const NvtxFunctionPointer *prior)
{
    NvtxFunctionTable t;
    unsigned n;
    if (!table_of(cb, m, &t, &n)) return;
    for (size_t i = 0; i < ns; i++) {
        if (s[i].id >= n || !t[s[i].id]) continue;
        NvtxFunctionPointer cur = *t[s[i].id];
        *s[i].next = cur != prior[s[i].id] ? cur : NULL;
        *t[s[i].id] = s[i].mine;
    }
}

/* Initialises the library configured before the shim, on the same tables. */
static void init_chained(get_export_table_fn get)
{
    const char *path = getenv("FSDPSHIM_NVTX_CHAIN");
    int (*init)(get_export_table_fn);
    void *lib;

    if (!path || !*path) return;
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fs_log(FS_LOG_WARN, "NVTX: cannot load the injection library to chain, %s: %s", path,
               dlerror());
        return;
    }
    *(void **)&init = dlsym(lib, "InitializeInjectionNvtx2");
    if (!init || init == (void *)InitializeInjectionNvtx2) {
        fs_log(FS_LOG_WARN, "NVTX: %s has no InitializeInjectionNvtx2 to chain", path);
        return;
    }
    if (!init(get)) fs_log(FS_LOG_WARN, "NVTX: the chained injection %s failed to start", path);
}

FS_EXPORT int InitializeInjectionNvtx2(get_export_table_fn get)
{
    const NvtxExportTableCallbacks *cb;
    static before prior;

    if (!get) return 0;
    cb = get(NVTX_ETID_CALLBACKS);
    if (!cb) return 0;
    remember(cb, NVTX_CB_MODULE_CORE, prior.core, NVTX_CBID_CORE_SIZE);
    remember(cb, NVTX_CB_MODULE_CORE2, prior.core2, NVTX_CBID_CORE2_SIZE);
    init_chained(get);
    install(cb, NVTX_CB_MODULE_CORE, core, sizeof core / sizeof core[0], prior.core);
    install(cb, NVTX_CB_MODULE_CORE2, core2, sizeof core2 / sizeof core2[0], prior.core2);
    fs_log(FS_LOG_INFO, "NVTX ranges are recorded%s", next.push_a ? ", and chained" : "");
    return 1;
}
