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

/* `cmd` as a shell finds the program to run: a name with a slash as it is
 * (true when it exists), else looked up on PATH (fs_path_search), else the
 * working directory's regular file of that name (the convenience `fsdpshim
 * run train.py` offers). The path into `path`; false when there is none. */
bool fs_path_resolve(const char *cmd, char *path, size_t len);

#endif /* FS_PATH_H */
