/* cmdline.c - the analyzer's command lines (cmdline.h). */
#include "cmdline.h"
#include "exit_status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fs_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fsdpshim %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (fsdpshim %s --help)\n", command);
    return FS_EXIT_USAGE;
}

/* The option getopt_long just refused, as the user wrote it: a long one
 * up to its '=', a short one as -X (it may sit in a bundle such as -sx). */
static void refused_option(char *const *argv, char *buf, size_t len)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (!strncmp(arg, "--", 2) || !optopt)
        snprintf(buf, len, "%.*s", (int)strcspn(arg, "="), arg);
    else
        snprintf(buf, len, "-%c", optopt);
}

/* Whether name is "--X" for a flag X of longopts (refused as --X=VALUE). */
static bool takes_no_value(const struct option *longopts, const char *name)
{
    if (strncmp(name, "--", 2)) return false;
    for (const struct option *o = longopts; o && o->name; o++)
        if (!strcmp(o->name, name + 2)) return o->has_arg == no_argument;
    return false;
}

int fs_getopt(int argc, char *const *argv, const char *shortopts, const struct option *longopts)
{
    char opts[64], name[256];
    int c;

    /* a leading ':' tells a missing value (':') from an unknown option ('?') */
    snprintf(opts, sizeof opts, ":%s", shortopts);
    opterr = 0;
    optopt = 0;
    c = getopt_long(argc, argv, opts, longopts, NULL);
    if (c == '?') {
        refused_option(argv, name, sizeof name);
        if (takes_no_value(longopts, name))
            fs_usage_error(argv[0], "%s takes no value", name);
        else
            fs_usage_error(argv[0], "unknown option '%s'", name);
        return FS_GETOPT_BAD;
    }
    if (c == ':') {
        fs_usage_error(argv[0], "%s needs a value", argv[optind - 1]);
        return FS_GETOPT_BAD;
    }
    return c;
}

bool fs_parse_count(const char *arg, uint64_t max, uint64_t *out)
{
    char *end;
    if (*arg < '0' || *arg > '9') return false;
    errno = 0;
    *out = strtoull(arg, &end, 10);
    return !*end && !errno && *out <= max;
}

int fs_option_rest(int c, void (*usage)(FILE *out))
{
    if (c != 'h') return FS_EXIT_USAGE;
    usage(stdout);
    return 0;
}
