/* stats.c - FSDPSHIM_SIM_STATS=1: at exit, one line per device that was
 * used, with how many allocations reached the device and its peak usage.
 * The shim's benchmarks compare these counts with and without the shim. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static void print_stats(void)
{
    for (int d = 0; d < fs_cfg.ndevices; d++) {
        struct fs_device *dev = fs_dev(d);
        pthread_mutex_lock(&dev->mu);
        if (dev->touched)
            fprintf(stderr,
                    "fsdpshim-sim: device %d: device_allocs=%llu device_frees=%llu "
                    "peak_used_bytes=%zu\n",
                    d, (unsigned long long)dev->allocs, (unsigned long long)dev->frees, dev->peak);
        pthread_mutex_unlock(&dev->mu);
    }
}

void fs_stats_install(void)
{
    atexit(print_stats);
}
