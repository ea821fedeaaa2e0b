/* parallel.h - reading the traces of a job side by side, on every core.
 *
 * A job writes one trace per rank, each with definitions of its own, so
 * each file is read on its own: `read` runs in a worker thread for file i
 * and leaves its result in the command's own slot i; `merge` then takes the
 * results on the calling thread, in the order the files were named, each as
 * soon as it and the ones before it are read. What a command prints and
 * sums is therefore the same as reading the files one after another, and a
 * rank's part is printed while later ranks are still being read. At most
 * twice as many files as threads are read and not yet merged, so memory
 * follows the threads, not the number of files.
 *
 * Threads: one per core the process may run on, at most one per file;
 * FSDPSHIM_ANALYSIS_THREADS=N sets another number (1: one file after
 * another, on the calling thread). The progress line (progress.h) runs
 * over the whole reading; `merge` prints between fs_progress_hold and
 * fs_progress_release. */
#ifndef FS_PARALLEL_H
#define FS_PARALLEL_H

#include <stddef.h>

/* Reads the n files of `command` (paths: for the progress line). read(ctx,
 * i) must be safe to run for several i at once: a result of its own per
 * file, shared state only behind a lock (the symboliser has one). merge
 * runs with the progress line held (it prints directly, never through
 * progress.h's calls); NULL: the results are taken after the call. */
void fs_par_read(const char *command, size_t n, char *const *paths,
                 void (*read)(void *ctx, size_t i), void (*merge)(void *ctx, size_t i), void *ctx);

/* The threads fs_par_read uses for n files. */
size_t fs_par_threads(size_t n);

#endif /* FS_PARALLEL_H */
