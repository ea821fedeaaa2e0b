/* options.c - the launchers' options (`run`, `record`, `sim`): each command
 * describes its options in a table and this loop reads them the way getopt
 * users expect, `--name VALUE` and `--name=VALUE`, `-o VALUE` and
 * `-oVALUE`, flags, `-h`/`--help`; `--` or the first word that is not an
 * option starts the command line to run. */
#include "cli.h"

#include <string.h>

static const fs_option *find(const fs_option *opts, size_t n, const char *arg,
                             const char **inline_value)
{
    for (size_t k = 0; k < n; k++) {
        const fs_option *o = &opts[k];
        size_t len = strlen(o->name);
        *inline_value = NULL;
        if (!strcmp(arg, o->name) || (o->short_name && !strcmp(arg, o->short_name))) return o;
        if (!o->value) continue;
        if (!strncmp(arg, o->name, len) && arg[len] == '=') {
            *inline_value = arg + len + 1;
            return o;
        }
        if (o->short_name && !strncmp(arg, o->short_name, strlen(o->short_name))) {
            *inline_value = arg + strlen(o->short_name);
            return o;
        }
    }
    return NULL;
}

int fs_parse_options(int argc, char **argv, const fs_option *opts, size_t n, void (*usage)(FILE *),
                     int *first)
{
    const char *name = argv[0];
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *inline_value;
        const fs_option *o;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (a[0] != '-') break;
        if (!(o = find(opts, n, a, &inline_value))) {
            fprintf(stderr, "fsdpshim %s: unknown option '%s'\n", name, a);
            usage(stderr);
            return FS_EXIT_USAGE;
        }
        if (!o->value) {
            *o->flag = true;
        } else if (inline_value) {
            *o->value = inline_value;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            fprintf(stderr, "fsdpshim %s: %s needs a value\n", name, a);
            return FS_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "fsdpshim %s: no command to run\n", name);
        usage(stderr);
        return FS_EXIT_USAGE;
    }
    *first = i;
    return -1;
}
