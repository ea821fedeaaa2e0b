/* analysis.h - the analyzer's commands, one file each over the trace
 * reader (reader.h), dispatched from the command table in cli/main.c with
 * the command line's exit statuses (common/exit_status.h). */
#ifndef FS_ANALYSIS_H
#define FS_ANALYSIS_H

#include "exit_status.h"

#include <stdio.h>

/* diff.c */
int command_diff(int argc, char **argv);
void usage_diff(FILE *out);

/* dump.c */
int command_dump(int argc, char **argv);
void usage_dump(FILE *out);

/* export.c */
int command_export(int argc, char **argv);
void usage_export(FILE *out);

/* leaks.c */
int command_leaks(int argc, char **argv);
void usage_leaks(FILE *out);

/* replay.c */
int command_replay(int argc, char **argv);
void usage_replay(FILE *out);

/* report.c */
int command_report(int argc, char **argv);
void usage_report(FILE *out);

/* timeline.c */
int command_timeline(int argc, char **argv);
void usage_timeline(FILE *out);

/* top.c */
int command_top(int argc, char **argv);
void usage_top(FILE *out);

/* top_live.c: `top --live`, reached through command_top */
int command_top_live(int argc, char **argv);
void usage_top_live(FILE *out);

#endif /* FS_ANALYSIS_H */
