/* path.h - file names as a shell sees them, for the launcher (cli/) and
 * the preloaded library (interpose/) alike (path.c). */
#ifndef FS_PATH_H
#define FS_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* The last component of `path` (all of it when it has no slash). */
const char *fs_base_name(const char *path);

/* `cmd` (a name without a slash) looked up on PATH as execvp does: the
 * first executable regular file, else the first regular file at all (which
 * a shell reports as "Permission denied"), into out; an empty entry is the
 * working directory, and with no PATH set "/usr/local/bin:/usr/bin:/bin" is
 * searched. False when there is none; *executable (if given) says whether
 * the file found can be run. */
bool fs_path_search(const char *cmd, char *out, size_t len, bool *executable);

#endif /* FS_PATH_H */
