/* note_hook.c - preloaded after the shim, so the shim's "real"
 * cudaLaunchHostFunc is this one: once armed (note_hook_arm), it runs the
 * given function at the moment the shim hands the call on, before the
 * runtime has the work. note_order.c uses it to place a fence exactly
 * between the shim's bookkeeping and the work it describes. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>

static void (*armed)(void);

__attribute__((visibility("default"))) void note_hook_arm(void (*fn)(void))
{
    armed = fn;
}

__attribute__((visibility("default"))) cudaError_t
cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    cudaError_t (*next)(cudaStream_t, cudaHostFn_t, void *) =
        (cudaError_t(*)(cudaStream_t, cudaHostFn_t, void *))dlsym(RTLD_NEXT, "cudaLaunchHostFunc");
    void (*run)(void) = armed;

    armed = NULL;
    if (run) run();
    return next ? next(stream, fn, userData) : cudaErrorInitializationError;
}
