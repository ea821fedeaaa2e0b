/* stats.c - what the sim tells about a process's device use at exit.
 *
 * FSDPSHIM_SIM_STATS=1: one line per device that was used, on stderr, with
 * how many allocations reached the device and its peak usage (the shim's
 * benchmarks compare these counts with and without the shim).
 *
 * FSDPSHIM_SIM_REPORT=DIR: the same figures, plus the allocations the device
 * refused for lack of capacity, in a file DIR/sim-PID that `fsdpshim sim`
 * reads once the program's processes have exited (one file per process, so
 * the ranks of a torchrun job need no coordination). The file is written
 * under a temporary name and renamed, so a reader never sees half of it.
 * A child forked after the sim started does not write one: its figures are
 * copies of its parent's. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim.h"

static pid_t installed_by;

/* One device's figures, read under its lock. */
struct figures {
    unsigned long long allocs, frees, refused;
    size_t peak, largest_refused;
};

/* Fills *f with device d's figures; 0 when the process never used it. */
static int device_figures(int d, struct figures *f)
{
    struct sim_device *dev = sim_dev(d);
    pthread_mutex_lock(&dev->mu);
    int touched = dev->touched;
    *f = (struct figures){dev->allocs, dev->frees, dev->refused, dev->peak, dev->largest_refused};
    pthread_mutex_unlock(&dev->mu);
    return touched;
}

static void print_stats(void)
{
    struct figures f;
    for (int d = 0; d < sim_cfg.ndevices; d++)
        if (device_figures(d, &f))
            fprintf(stderr,
                    "fsdpshim-sim: device %d: device_allocs=%llu device_frees=%llu "
                    "peak_used_bytes=%zu\n",
                    d, f.allocs, f.frees, f.peak);
}

static void write_report_lines(FILE *f)
{
    const char *rank = getenv("RANK");
    struct figures g;

    fprintf(f, "fsdpshim-sim-report 1\npid %d\nrank %s\ncapacity %zu\nmoves_data %d\n",
            (int)getpid(), rank && *rank ? rank : "-", sim_cfg.capacity, sim_cfg.moves_data);
    for (int d = 0; d < sim_cfg.ndevices; d++)
        if (device_figures(d, &g))
            fprintf(f,
                    "device %d peak_used_bytes %zu device_allocs %llu device_frees %llu "
                    "refused %llu largest_refused %zu\n",
                    d, g.peak, g.allocs, g.frees, g.refused, g.largest_refused);
}

static void write_report(void)
{
    const char *dir = getenv("FSDPSHIM_SIM_REPORT");
    char path[4096], tmp[4200];
    FILE *f;

    if (!dir || !*dir || getpid() != installed_by) return;
    snprintf(path, sizeof path, "%s/sim-%d", dir, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        fprintf(stderr, "fsdpshim-sim: cannot write the report %s\n", tmp);
        return;
    }
    write_report_lines(f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "fsdpshim-sim: cannot write the report %s\n", path);
        unlink(tmp);
    }
}

void sim_stats_install(void)
{
    const char *dir = getenv("FSDPSHIM_SIM_REPORT");

    installed_by = getpid();
    if (sim_cfg.stats) atexit(print_stats);
    if (dir && *dir) atexit(write_report);
}
