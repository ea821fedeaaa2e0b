/* exit_status.h - the fsdpshim command's exit statuses, shared by the
 * launchers (cli/) and the analyzer's commands (analysis/), which return
 * them from their command_X entry points (docs/cli.md). */
#ifndef FS_EXIT_STATUS_H
#define FS_EXIT_STATUS_H

#define FS_EXIT_BAD_INPUT  1
#define FS_EXIT_USAGE      2
#define FS_EXIT_NOT_BUILT  3
#define FS_EXIT_LEAKS      4 /* leaks --fail: blocks no suppression covers */
#define FS_EXIT_CANNOT_RUN 126
#define FS_EXIT_NOT_FOUND  127

#endif /* FS_EXIT_STATUS_H */
