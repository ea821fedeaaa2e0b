/* ctx_probe.c - preloaded into a job's processes (after the shim), says at
 * each process's exit on which devices it holds a primary context:
 *
 *     ctx_probe: pid 4242 rank 1 local_rank 1 contexts on devices: 1
 *
 * A context on a GPU costs hundreds of MiB of that GPU's memory, so a rank
 * of a job with one device per rank must touch no device but its own: a
 * preloaded library that switched devices for its own bookkeeping (a
 * statistics pass, an event on every device, a trim of every pool) would
 * cost every GPU of the node a context per rank, as PyTorch's own early
 * releases did on device 0. check_run.sh --own-device reads these lines.
 * The driver is asked through dlsym, only when the process loaded it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*primary_state_fn)(int device, unsigned *flags, int *active);
typedef int (*device_count_fn)(int *count);

__attribute__((destructor)) static void ctx_probe_at_exit(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!driver) return;
    primary_state_fn state = (primary_state_fn)dlsym(driver, "cuDevicePrimaryCtxGetState");
    device_count_fn count = (device_count_fn)dlsym(driver, "cuDeviceGetCount");
    int devices = 0;
    if (!state || !count || count(&devices) != 0) return;

    char line[512];
    const char *rank = getenv("RANK"), *local = getenv("LOCAL_RANK");
    int len =
        snprintf(line, sizeof line,
                 "ctx_probe: pid %d rank %s local_rank %s contexts on devices:", (int)getpid(),
                 rank ? rank : "-", local ? local : "-");
    for (int d = 0; d < devices && len < (int)sizeof line - 8; d++) {
        unsigned flags;
        int active = 0;
        if (state(d, &flags, &active) == 0 && active)
            len += snprintf(line + len, sizeof line - (size_t)len, " %d", d);
    }
    fprintf(stderr, "%s\n", line);
}
