/* registration.c - the ABI of nvcc's generated host code: the fat binaries
 * it registers at load time (__cudaRegisterFatBinary[End],
 * __cudaUnregisterFatBinary), their kernels and variables
 * (__cudaRegisterFunction, __cudaRegisterVar) and __cudaInitModule, each a
 * module of sim/core/modules.c. The registration handle nvcc keeps is a
 * slot of ours that names the module. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct fatbin {
    void *slot; /* what the handle points at: the wrapper nvcc passed, read for initialisers */
    struct sim_module *mod;
};

static struct sim_handle_set *fatbins;
static pthread_once_t fatbins_once = PTHREAD_ONCE_INIT;

static void fatbins_init(void)
{
    fatbins = sim_handles_new();
}

static struct sim_module *module_of(void **handle)
{
    pthread_once(&fatbins_once, fatbins_init);
    struct fatbin *fb = sim_handles_get(fatbins, handle);
    return fb ? fb->mod : NULL;
}

SIM_API void **__cudaRegisterFatBinary(void *fat_cubin)
{
    pthread_once(&fatbins_once, fatbins_init);
    struct fatbin *fb = malloc(sizeof *fb);
    if (!fb) return NULL;
    fb->slot = fat_cubin;
    fb->mod = sim_module_register();
    if (!fb->mod) {
        free(fb);
        return NULL;
    }
    sim_handles_add(fatbins, &fb->slot, fb);
    return &fb->slot;
}

SIM_API void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle; /* every kernel and variable is usable as soon as it is registered */
}

SIM_API void __cudaUnregisterFatBinary(void **handle)
{
    pthread_once(&fatbins_once, fatbins_init);
    struct fatbin *fb = sim_handles_remove(fatbins, handle);
    if (!fb) return;
    /* Called from atexit handlers, when a stream may still be busy (or
     * stuck): the runtime does not wait there, and neither does the sim. */
    sim_module_destroy(fb->mod, 0);
    free(fb);
}

SIM_API void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                    const char *device_name, int thread_limit, uint3 *tid,
                                    uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    struct sim_module *m = module_of(handle);
    if (!m || !host_fun) return;
    sim_module_register_kernel(m, host_fun, device_name);
}

SIM_API void __cudaRegisterVar(void **handle, char *host_var, char *device_address,
                               const char *device_name, int ext, size_t size, int constant,
                               int global)
{
    (void)device_address, (void)ext, (void)constant, (void)global;
    struct sim_module *m = module_of(handle);
    if (!m || !host_var) return;
    /* The initial value is in the device code: found when the fat binary
     * holds an uncompressed cubin that declares the variable. */
    size_t init_size = 0;
    const void *init = sim_image_var_init(*handle, device_name, &init_size);
    if (init_size != size) init = NULL;
    sim_module_register_var(m, host_var, device_name, size, init);
}

/* Called before the first use of a __managed__ variable: loads the module
 * on the current device. Returns nonzero on success (the generated code
 * keeps it as "initialised"). */
SIM_API char __cudaInitModule(void **handle)
{
    sim_init();
    struct sim_module *m = module_of(handle);
    if (!m) return 0;
    sim_modules_rdlock();
    cudaError_t err = sim_module_load(m, sim_cur_device());
    sim_modules_unlock();
    return err == cudaSuccess;
}
