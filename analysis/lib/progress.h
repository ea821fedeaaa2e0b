/* progress.h - what the analyzer says on stderr while it reads: a progress
 * line for long readings, when stderr is a terminal, and the warnings that
 * must not land in the middle of that line.
 *
 * One command runs per process, so the progress is one object of this
 * file's: fs_progress_start begins it for the traces a command reads, the
 * readers of its passes over them are watched (their bytes count),
 * and fs_progress_stop erases the line. Anything printed meanwhile on the
 * same terminal (a warning, a rank's report as soon as it is read) is
 * printed between fs_progress_hold and fs_progress_release, which erase the
 * line first; it is drawn again at the next tick. */
#ifndef FS_PROGRESS_H
#define FS_PROGRESS_H

#include "reader.h"

#include <stddef.h>

/* Begins the progress of `command` over the n traces at paths, each to be
 * opened and read `passes` times. The line appears only when stderr is a
 * terminal, once the reading has taken half a second (a short command
 * prints nothing), and is redrawn five times a second: "fsdpshim report:
 * 1.2 GiB of 3.4 GiB read (35%), 12 s". Nothing happens otherwise; every
 * call below is then cheap. */
void fs_progress_start(const char *command, size_t n, char *const *paths, unsigned passes);
/* t's reading counts: the bytes it moves past, as it reads, once per
 * opening. Call it for the openings the passes counted (a further reading
 * of a file, as explaining an OOM makes, is not). */
void fs_progress_watch(fs_reader *t);
/* Erases the line and stops; before the command's last output. */
void fs_progress_stop(void);

/* Around anything printed while the line may be shown: hold erases it and
 * keeps it away, release lets it be drawn again. */
void fs_progress_hold(void);
void fs_progress_release(void);

/* printf to stderr, between hold and release */
void fs_progress_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A reader's or symboliser's warning (their fs_reader_warn), for the
 * command named by ctx (a string): "fsdpshim COMMAND: LINE" on stderr,
 * never on the progress line. */
void fs_progress_warn(void *command, const char *line);

#endif /* FS_PROGRESS_H */
