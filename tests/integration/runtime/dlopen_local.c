/* dlopen_local.c - the CUDA runtime arrives late and locally: this program
 * is not linked with it; it dlopens a plugin (linked with the runtime) with
 * RTLD_LOCAL, as Python does, and calls it. Under the shim the plugin's
 * allocations must be served by the shim (its statistics say so), which
 * finds the runtime among the loaded objects since RTLD_NEXT cannot.
 *
 *   dlopen_local PLUGIN [--expect-shim] */
#include "probe.h"

#include <string.h>

int main(int argc, char **argv)
{
    int expect_shim = argc > 2 && !strcmp(argv[2], "--expect-shim");
    int (*roundtrip)(size_t);
    void *h;

    watchdog(30);
    if (argc < 2) return 2;
    EXPECT(dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY) == NULL);
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    /* the runtime is loaded now, but not in the global scope */
    EXPECT(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion") == NULL); /* not one the shim serves */
    roundtrip = (int (*)(size_t))dlsym(h, "plugin_roundtrip");
    EXPECT(roundtrip != NULL);
    EXPECT(roundtrip(1 << 20) == 0);
    EXPECT(roundtrip(3 << 20) == 0);
    if (expect_shim) {
        /* two cudaMalloc calls went through the shim's allocator */
        EXPECT(shim_stat("allocation.all.allocated", -1) == 2);
        EXPECT(shim_stat("num_device_alloc", -1) >= 1);
    }
    printf("dlopen_local: ok\n");
    return 0;
}
