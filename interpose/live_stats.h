/* live_stats.h - the live statistics page of this process, which
 * `fsdpshim top --live` reads (live_stats.c; layout in format/live.h). */
#ifndef FS_LIVE_STATS_H
#define FS_LIVE_STATS_H

#include "../allocator/allocator.h"

/* Makes the page and starts the thread that keeps it up to date, unless
 * FSDPSHIM_CONF says live:false. Called once the allocator exists, before
 * the trace writer starts (its fatal-signal handlers hand on to the ones
 * installed here); again in a fork child, with its own allocator. Failing
 * to make the page is logged (info) and changes nothing else. */
void fs_live_start(fs_allocator *a, int ndev);

/* The process's rank and world size, from its first NCCL communicator. */
void fs_live_set_rank(int rank, int world);

#endif /* FS_LIVE_STATS_H */
