/* config.c - FSDPSHIM_CONF, parsed once.
 *
 * The syntax is PYTORCH_CUDA_ALLOC_CONF's: key:value pairs separated by
 * commas, where a value may itself hold a bracketed list
 * (roundup_power2_divisions:[256:1,512:2,>:4]). Allocator keys are applied
 * by the allocator's own fs_alloc_config_set; the shim's keys here. A bad key
 * or value is reported once, with the valid choices, and the default kept:
 * a typo in the environment must never stop a training job (SPEC 13). */
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fs_shim_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static const char valid_keys[] =
    "free_semantics, cross_stream_reuse, max_split_size_mb, roundup_power2_divisions, "
    "garbage_collection_threshold, expandable_segments, large_segment_mb, ag_limit, ag_limit_mb, "
    "stream_pool, stream_pool_size, trace, trace_frames";

static bool parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v;

    if (*s < '0' || *s > '9') return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0")) {
        *out = false;
        return true;
    }
    return false;
}

/* Applies one of the shim's own keys: 1 applied, 0 not a shim key, -1 bad
 * value (err names the valid choices, in the allocator's words). */
static int shim_key_set(fs_shim_config *c, const char *key, const char *value, char *err,
                        size_t errlen)
{
    static const char *const trace_names[] = {"off", "events", "stacks", "python"};
    unsigned long long v;

    if (!strcmp(key, "ag_limit")) {
        if (!parse_uint(value, 1u << 20, &v)) goto bad;
        c->ag_limit = (unsigned)v;
    } else if (!strcmp(key, "ag_limit_mb")) {
        if (!strcmp(value, "off"))
            v = 0;
        else if (!parse_uint(value, SIZE_MAX >> 20, &v))
            goto bad;
        c->ag_limit_bytes = (size_t)v << 20;
    } else if (!strcmp(key, "stream_pool")) {
        if (!parse_bool(value, &c->stream_pool)) goto bad;
    } else if (!strcmp(key, "stream_pool_size")) {
        if (!parse_uint(value, 1u << 16, &v)) goto bad;
        c->stream_pool_size = (unsigned)v;
    } else if (!strcmp(key, "trace")) {
        for (int i = 0; i < 4; i++)
            if (!strcmp(value, trace_names[i])) {
                c->trace = i;
                return 1;
            }
        goto bad;
    } else if (!strcmp(key, "trace_frames")) {
        if (!parse_uint(value, 1024, &v)) goto bad;
        c->trace_frames = (unsigned)v;
    } else {
        return 0;
    }
    return 1;
bad:
    if (!strcmp(key, "ag_limit"))
        snprintf(err, errlen, "%s: '%s' is not a count of all-gathers, 0 = off (default: 2)", key,
                 value);
    else if (!strcmp(key, "ag_limit_mb"))
        snprintf(err, errlen, "%s: '%s' is not a whole number of MiB or off (default: off)", key,
                 value);
    else if (!strcmp(key, "stream_pool"))
        snprintf(err, errlen, "%s: '%s' is not true or false (default: true)", key, value);
    else if (!strcmp(key, "stream_pool_size"))
        snprintf(err, errlen, "%s: '%s' is not a count of streams up to 65536 (default: 32)", key,
                 value);
    else if (!strcmp(key, "trace"))
        snprintf(err, errlen, "%s: '%s' is not one of off (default), events, stacks, python", key,
                 value);
    else
        snprintf(err, errlen, "%s: '%s' is not a count of frames up to 1024 (default: 64)", key,
                 value);
    return -1;
}

static void apply_pair(fs_shim_config *c, char *pair)
{
    char err[256] = "";
    char *colon = strchr(pair, ':');
    const char *key = pair, *value;
    int r;

    if (!*pair) return;
    if (!colon) {
        fs_log(FS_LOG_WARN, "FSDPSHIM_CONF: '%s' is not key:value; ignored (keys: %s)", pair,
               valid_keys);
        return;
    }
    *colon = '\0';
    value = colon + 1;
    r = fs_alloc_config_set(&c->alloc, key, value, err, sizeof err);
    if (r == 0) r = shim_key_set(c, key, value, err, sizeof err);
    if (r == 0)
        fs_log(FS_LOG_WARN, "FSDPSHIM_CONF: unknown key '%s' ignored (valid keys: %s)", key,
               valid_keys);
    else if (r < 0)
        fs_log(FS_LOG_WARN, "FSDPSHIM_CONF: %s; the default is kept", err);
}

static void config_init(void)
{
    const char *env = getenv("FSDPSHIM_CONF");
    fs_shim_config *c = &config;
    char *copy, *p, *start;
    int depth = 0;

    fs_alloc_config_default(&c->alloc);
    c->ag_limit = 2;
    c->ag_limit_bytes = 0;
    c->stream_pool = true;
    c->stream_pool_size = 32;
    c->trace = 0;
    c->trace_frames = 64;
    if (!env || !*env) return;
    copy = strdup(env);
    if (!copy) return;
    /* split on commas outside brackets */
    for (p = start = copy;; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth > 0)
            depth--;
        else if ((*p == ',' && depth == 0) || *p == '\0') {
            bool last = *p == '\0';
            *p = '\0';
            apply_pair(c, start);
            if (last) break;
            start = p + 1;
        }
    }
    free(copy);
    /* The key is accepted so that configurations written for a tracing build
     * keep working, but the user must not believe a trace is being written. */
    if (c->trace)
        fs_log(FS_LOG_WARN, "tracing was asked for, but this build has no trace writer yet: "
                            "no trace file is written");
}

const fs_shim_config *fs_shim_config_get(void)
{
    pthread_once(&config_once, config_init);
    return &config;
}
