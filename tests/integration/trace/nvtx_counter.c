/* nvtx_counter.c - a stand-in for a profiler's NVTX injection library (say
 * Nsight Systems'), configured before the shim: it counts the pushes, pops,
 * marks and domain pushes it receives and writes the counts to
 * $NVTX_COUNTER_OUT at exit, so that the test can tell the shim chained
 * every call to it. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

static int pushes, pops, marks, domain_pushes;

static int push_a(const char *m)
{
    (void)m;
    return pushes++;
}

static int pop(void)
{
    return pops++;
}

static void mark_a(const char *m)
{
    (void)m;
    marks++;
}

static int domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    (void)a;
    return domain_pushes++;
}

static void report(void)
{
    const char *out = getenv("NVTX_COUNTER_OUT");
    FILE *f = out ? fopen(out, "w") : NULL;
    if (!f) return;
    fprintf(f, "pushes=%d pops=%d marks=%d domain_pushes=%d\n", pushes, pops, marks, domain_pushes);
    fclose(f);
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void *(*get)(uint32_t))
{
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable t;
    unsigned n;

    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) return 0;
    *t[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push_a;
    *t[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
    *t[NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer)mark_a;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n))
        *t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)domain_push_ex;
    atexit(report);
    return 1;
}
