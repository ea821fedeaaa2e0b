/* attach.c - the entry points `fsdpshim attach` and `fsdpshim detach` call
 * through gdb in a running process (cli/attach.c): the shim has just been
 * dlopen'ed there, is not preloaded, and serves nothing. It traces through
 * CUPTI (cupti/cupti.c) where CUPTI can be had, else through the loaded
 * objects' GOT/PLT slots of the hooked entry points (got.c): never both,
 * which would write each call twice. */
#include "../../include/fsdpshim/fsdpshim.h"
#include "../../trace/trace.h"
#include "../cupti/cupti.h"
#include "got.h"
#include "../core/shim.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum { NOT_ATTACHED, BY_CUPTI, BY_GOT } way;
/* How the last start traces, for fsdpshim_attach_way. Under lock. */
static char way_text[8192];

static const char *const why[] = {
    [FS_CUPTI_NO_CUPTI] = "no libcupti found",
    [FS_CUPTI_TAKEN] = "another CUPTI client (a profiler, compute-sanitizer) holds it",
    [FS_CUPTI_FAILED] = "CUPTI refused",
};

static int start(const char *trace_path, int level)
{
    unsigned frames = fs_shim_config_get()->trace_frames;

    if (way != NOT_ATTACHED) return FSDPSHIM_OK;
    enum fs_cupti_status st = fs_cupti_attach(level, frames, trace_path, "fsdpshim attach", false);
    if (st == FS_CUPTI_TRACING || st == FS_CUPTI_ALREADY) {
        way = BY_CUPTI;
        snprintf(way_text, sizeof way_text, "CUPTI (%s)",
                 fs_cupti_library() ? fs_cupti_library() : "libcupti");
        return FSDPSHIM_OK;
    }
    /* the GOT slots would write to the same file: not a reason to use them */
    if (st == FS_CUPTI_NO_TRACE) return FSDPSHIM_ERR_INVALID;
    const char *reason = fs_cupti_failure();
    if (!reason) reason = st < sizeof why / sizeof why[0] && why[st] ? why[st] : "?";
    fs_log(FS_LOG_WARN,
           "fsdpshim attach: no CUPTI (%s): tracing the runtime, driver-lookup and NCCL memory "
           "entry points of every loaded object through their GOT slots instead",
           reason);
    snprintf(way_text, sizeof way_text, "the GOT slots, without CUPTI (%s)", reason);
    switch (fs_got_attach(level, frames, trace_path)) {
    case FS_GOT_TRACING:
        break;
    case FS_GOT_NO_TRACE:
        return FSDPSHIM_ERR_INVALID;
    default:
        return FSDPSHIM_ERR_DEVICE;
    }
    way = BY_GOT;
    return FSDPSHIM_OK;
}

FS_EXPORT int fsdpshim_attach_start(const char *trace_path, int level)
{
    if (level < FS_TRACE_EVENTS || level > FS_TRACE_PYTHON) return FSDPSHIM_ERR_INVALID;
    /* a preloaded shim traces through FSDPSHIM_CONF, and serves */
    if (fs_shim_preloaded()) return FSDPSHIM_ERR_INACTIVE;
    pthread_mutex_lock(&lock);
    int r = start(trace_path, level);
    pthread_mutex_unlock(&lock);
    return r;
}

/* A phrase for `fsdpshim attach` to print, called through gdb right after
 * fsdpshim_attach_start: "CUPTI (PATH)", or "the GOT slots, without CUPTI
 * (WHY)". Without it the user would learn of a fallback, and of what the
 * slots miss (docs/attach.md), only from the process's own stderr. The text
 * stays until the next start. */
FS_EXPORT const char *fsdpshim_attach_way(void)
{
    return way_text;
}

FS_EXPORT int fsdpshim_attach_stop(void)
{
    pthread_mutex_lock(&lock);
    bool stopped = way == BY_CUPTI ? fs_cupti_detach() : way == BY_GOT ? fs_got_detach() : false;
    way = NOT_ATTACHED;
    pthread_mutex_unlock(&lock);
    return stopped ? FSDPSHIM_OK : FSDPSHIM_ERR_INACTIVE;
}
