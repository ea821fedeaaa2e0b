/* conf_lex.c - splits a PYTORCH_CUDA_ALLOC_CONF-style string into key:value
 * pairs (conf_lex.h). */
#include "conf_lex.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void fs_conf_squeeze(char *s)
{
    char *out = s;

    for (; *s; s++)
        if (!isspace((unsigned char)*s)) *out++ = *s;
    *out = '\0';
}

bool fs_conf_next(char **cursor, char **key, char **value)
{
    char *p = *cursor, *start;
    int depth = 0;

    while (*p == ',')
        p++;
    if (!*p) {
        *cursor = p;
        return false;
    }
    start = p;
    /* a comma inside brackets belongs to the value */
    for (; *p && !(*p == ',' && depth == 0); p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth > 0)
            depth--;
    }
    if (*p) *p++ = '\0';
    *cursor = p;
    *key = start;
    *value = NULL;
    for (char *c = start; *c; c++)
        if (*c == ':') {
            *c = '\0';
            *value = c + 1;
            break;
        }
    return true;
}

bool fs_conf_sets(const char *conf, const char *key)
{
    char *copy, *cur, *k, *v;
    bool found = false;

    if (!conf || !(copy = strdup(conf))) return false;
    fs_conf_squeeze(copy);
    for (cur = copy; !found && fs_conf_next(&cur, &k, &v);)
        found = !strcmp(k, key);
    free(copy);
    return found;
}
