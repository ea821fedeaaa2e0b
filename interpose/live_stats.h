/* live_stats.h - the live statistics page of this process, which
 * `fsdpshim top --live` reads (live_stats.c; layout in format/live.h). */
#ifndef FS_LIVE_STATS_H
#define FS_LIVE_STATS_H

/* The process's rank and world size, from its first NCCL communicator. */
void fs_live_set_rank(int rank, int world);

#endif /* FS_LIVE_STATS_H */
