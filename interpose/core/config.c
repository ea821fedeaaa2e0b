/* config.c - FSDPSHIM_CONF, parsed once, over the keys of the user's
 * PYTORCH_CUDA_ALLOC_CONF that the shim understands.
 *
 * The syntax is PYTORCH_CUDA_ALLOC_CONF's (common/conf_lex.h): key:value
 * pairs separated by commas, where a value may itself hold a bracketed list
 * (roundup_power2_divisions:[256:1,512:2,>:4]), whitespace ignored. Allocator
 * keys are applied by the allocator's own fs_alloc_config_set; the shim's
 * keys here. A bad key or value is reported once, with the valid choices, and
 * the default kept: a typo in the environment must never stop a training job
 * (docs/configuration.md). */
#include "shim.h"

#include "conf_lex.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fs_shim_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static const char valid_keys[] =
    "free_semantics, cross_stream_reuse, max_split_size_mb, roundup_power2_divisions, "
    "garbage_collection_threshold, expandable_segments, large_segment_mb, segment_growth, "
    "malloc_reuse, ag_limit, ag_limit_mb, "
    "stream_pool, stream_pool_size, trace, trace_frames, snapshot_signal, oom_snapshot, live, "
    "torch_route";

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
        if (!parse_uint(value, 256, &v) || !v) goto bad;
        c->trace_frames = (unsigned)v;
    } else if (!strcmp(key, "snapshot_signal")) {
        if (!parse_bool(value, &c->snapshot_signal)) goto bad;
    } else if (!strcmp(key, "oom_snapshot")) {
        if (strcmp(value, "blocks") && strcmp(value, "stacks")) goto bad;
        c->oom_snapshot_stacks = !strcmp(value, "stacks");
    } else if (!strcmp(key, "live")) {
        if (!parse_bool(value, &c->live)) goto bad;
    } else if (!strcmp(key, "torch_route")) {
        /* read by the route at the process's start (route/torch_route.c) */
        if (strcmp(value, "adapter") && strcmp(value, "async")) goto bad;
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
    else if (!strcmp(key, "snapshot_signal"))
        snprintf(err, errlen, "%s: '%s' is not true or false (default: false)", key, value);
    else if (!strcmp(key, "live"))
        snprintf(err, errlen, "%s: '%s' is not true or false (default: true)", key, value);
    else if (!strcmp(key, "torch_route"))
        snprintf(err, errlen, "%s: '%s' is not adapter (default) or async", key, value);
    else if (!strcmp(key, "oom_snapshot"))
        snprintf(err, errlen, "%s: '%s' is not blocks (default) or stacks", key, value);
    else if (!strcmp(key, "stream_pool_size"))
        snprintf(err, errlen, "%s: '%s' is not a count of streams up to 65536 (default: 32)", key,
                 value);
    else if (!strcmp(key, "trace"))
        snprintf(err, errlen, "%s: '%s' is not one of off (default), events, stacks, python", key,
                 value);
    else
        snprintf(err, errlen, "%s: '%s' is not a count of frames from 1 to 256 (default: 64)", key,
                 value);
    return -1;
}

/* PyTorch's keys that mean the same to the shim. A user's
 * PYTORCH_CUDA_ALLOC_CONF supplies them as defaults, so that a program
 * preloaded by hand behaves as under `fsdpshim run`, which carries them into
 * FSDPSHIM_CONF (docs/configuration.md); PyTorch's other keys are its own. */
static const char *const torch_keys[] = {"expandable_segments", "max_split_size_mb",
                                         "roundup_power2_divisions",
                                         "garbage_collection_threshold"};

static bool is_torch_key(const char *key)
{
    for (size_t i = 0; i < sizeof torch_keys / sizeof torch_keys[0]; i++)
        if (!strcmp(key, torch_keys[i])) return true;
    return false;
}

/* A squeezed copy of the variable, NULL when it is unset, empty or cannot be
 * copied. */
static char *conf_copy(const char *var)
{
    const char *env = getenv(var);
    char *copy;

    if (!env || !*env || !(copy = strdup(env))) return NULL;
    fs_conf_squeeze(copy);
    return copy;
}

static void apply_pair(fs_shim_config *c, const char *var, const char *key, const char *value)
{
    char err[256] = "";
    int r;

    if (!value) {
        fs_log(FS_LOG_WARN, "%s: '%s' is not key:value; ignored (keys: %s)", var, key, valid_keys);
        return;
    }
    r = fs_alloc_config_set(&c->alloc, key, value, err, sizeof err);
    if (r == 0) r = shim_key_set(c, key, value, err, sizeof err);
    if (r == 0)
        fs_log(FS_LOG_WARN, "%s: unknown key '%s' ignored (valid keys: %s)", var, key, valid_keys);
    else if (r < 0)
        fs_log(FS_LOG_WARN, "%s: %s; the default is kept", var, err);
}

static void log_config(const fs_shim_config *c)
{
    static const char *const trace_names[] = {"off", "events", "stacks", "python"};
    char alloc[512], ag_mb[32] = "off";

    fs_alloc_config_describe(&c->alloc, alloc, sizeof alloc);
    if (c->ag_limit_bytes) snprintf(ag_mb, sizeof ag_mb, "%zu", c->ag_limit_bytes >> 20);
    fs_log(FS_LOG_DEBUG,
           "configuration: %s,ag_limit:%u,ag_limit_mb:%s,stream_pool:%s,stream_pool_size:%u,"
           "trace:%s,trace_frames:%u,snapshot_signal:%s,oom_snapshot:%s,live:%s",
           alloc, c->ag_limit, ag_mb, c->stream_pool ? "true" : "false", c->stream_pool_size,
           trace_names[c->trace], c->trace_frames, c->snapshot_signal ? "true" : "false",
           c->oom_snapshot_stacks ? "stacks" : "blocks", c->live ? "true" : "false");
}

/* Precedence: an FSDPSHIM_CONF key, then the same key in
 * PYTORCH_CUDA_ALLOC_CONF, then the default. */
static void config_init(void)
{
    fs_shim_config *c = &config;
    char *shim_conf = conf_copy("FSDPSHIM_CONF"),
         *torch_conf = conf_copy("PYTORCH_CUDA_ALLOC_CONF");
    char *cur, *key, *value;

    fs_alloc_config_default(&c->alloc);
    c->ag_limit = 2;
    c->ag_limit_bytes = 0;
    c->stream_pool = true;
    c->stream_pool_size = 32;
    c->trace = 0;
    c->trace_frames = 64;
    c->snapshot_signal = false;
    c->oom_snapshot_stacks = false;
    c->live = true;
    for (cur = torch_conf; cur && fs_conf_next(&cur, &key, &value);) {
        if (!value || !is_torch_key(key) || fs_conf_sets(shim_conf, key)) continue;
        fs_log(FS_LOG_INFO, "PYTORCH_CUDA_ALLOC_CONF: %s:%s taken (FSDPSHIM_CONF does not set it)",
               key, value);
        apply_pair(c, "PYTORCH_CUDA_ALLOC_CONF", key, value);
    }
    for (cur = shim_conf; cur && fs_conf_next(&cur, &key, &value);)
        apply_pair(c, "FSDPSHIM_CONF", key, value);
    free(torch_conf);
    free(shim_conf);
    if (fs_log_enabled(FS_LOG_DEBUG)) log_config(c);
}

const fs_shim_config *fs_shim_config_get(void)
{
    pthread_once(&config_once, config_init);
    return &config;
}
