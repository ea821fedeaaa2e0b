/* config.c - reads the sim's environment once, on the first CUDA call.
 *
 *   FSDPSHIM_SIM_DEVICES  number of devices (default 8, at most 64)
 *   FSDPSHIM_SIM_MEM      capacity of each device: bytes or K/M/G/T suffixes
 *                         (default 16G)
 *   FSDPSHIM_SIM_STATS=1  print per-device allocation counts at exit
 *   FSDPSHIM_SIM_DATA     1 (default): copies, sets and collectives move
 *                         bytes; 0: they move none and device memory is
 *                         never touched (a dry run, docs/sim.md)
 *   FSDPSHIM_SIM_REPORT   a directory: each process writes its figures
 *                         there at exit, for `fsdpshim sim` (stats.c)
 *   CUDA_INJECTION64_PATH a tool the driver loads at its initialisation,
 *                         which the runtime's first call then makes
 *                         (driver_load.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "size_parse.h"

struct sim_config sim_cfg;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int initialized; /* atomic */
/* CUDA_INJECTION64_PATH is set: the first call also initialises the
 * driver, which loads the injection library (driver_load.c). The driver's cuInit
 * calls sim_init in turn: the thread starting it goes straight through. */
static int injection;
static __thread int starting_driver;

static void init_once(void)
{
    sim_cfg.ndevices = 8;
    sim_cfg.capacity = (size_t)16 << 30;
    const char *e = getenv("FSDPSHIM_SIM_DEVICES");
    if (e && *e) {
        int n = atoi(e);
        if (n >= 0 && n <= 64)
            sim_cfg.ndevices = n;
        else
            fprintf(stderr, "fsdpshim-sim: ignoring FSDPSHIM_SIM_DEVICES=%s (0..64)\n", e);
    }
    e = getenv("FSDPSHIM_SIM_MEM");
    if (e && *e) {
        size_t cap = sim_parse_size(e);
        if (cap)
            sim_cfg.capacity = cap;
        else
            fprintf(stderr, "fsdpshim-sim: ignoring FSDPSHIM_SIM_MEM=%s\n", e);
    }
    e = getenv("FSDPSHIM_SIM_STATS");
    sim_cfg.stats = e && e[0] == '1';
    sim_cfg.moves_data = 1;
    e = getenv("FSDPSHIM_SIM_DATA");
    if (e && *e) {
        if (strcmp(e, "0") == 0 || strcmp(e, "1") == 0)
            sim_cfg.moves_data = e[0] == '1';
        else
            fprintf(stderr, "fsdpshim-sim: ignoring FSDPSHIM_SIM_DATA=%s (0 or 1)\n", e);
    }
    e = getenv("CUDA_INJECTION64_PATH");
    injection = e && *e;
    sim_stats_install();
    sim_fork_install();
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

void sim_init(void)
{
    pthread_once(&once, init_once);
    if (injection && !starting_driver) {
        starting_driver = 1;
        sim_driver_start();
        starting_driver = 0;
    }
}

int sim_initialized(void)
{
    return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

SIM_SEAM int sim_moves_data(void)
{
    sim_init();
    return sim_cfg.moves_data;
}
