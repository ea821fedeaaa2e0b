/* path.c - file names as a shell sees them (path.h): written once for the
 * launcher, which runs a command as the user's shell would, and for the
 * preloaded library, which finds the interpreter a process was started as. */
#include "path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fs_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool fs_path_search(const char *cmd, char *out, size_t len, bool *executable)
{
    const char *dirs = getenv("PATH"), *end;
    char candidate[PATH_MAX];
    bool found = false;

    if (executable) *executable = false;
    if (!dirs) dirs = "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
        end = strchrnul(dirs, ':');
        /* an empty entry is the working directory, as in execvp */
        if ((size_t)snprintf(candidate, sizeof candidate, "%.*s/%s", (int)(end - dirs),
                             end > dirs ? dirs : ".", cmd) < sizeof candidate &&
            is_regular(candidate)) {
            if (access(candidate, X_OK) == 0) {
                snprintf(out, len, "%s", candidate);
                if (executable) *executable = true;
                return true;
            }
            if (!found) snprintf(out, len, "%s", candidate);
            found = true;
        }
        if (!*end) break;
        dirs = end + 1;
    }
    return found;
}

bool fs_path_resolve(const char *cmd, char *path, size_t len)
{
    if (!*cmd) return false;
    if (strchr(cmd, '/')) {
        snprintf(path, len, "%s", cmd);
        return access(path, F_OK) == 0;
    }
    if (fs_path_search(cmd, path, len, NULL)) return true;
    snprintf(path, len, "./%s", cmd);
    return is_regular(path);
}
