/* config.c - the allocator's defaults and its FSDPSHIM_CONF keys, parsed with
 * PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax so that a user's existing setting
 * can be copied over unchanged. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_alloc_config_default(fs_alloc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->free_semantics = FS_FREE_SEMANTICS_DEVICE;
    cfg->cross_stream_reuse = FS_REUSE_COMPLETED;
    cfg->max_split_size = SIZE_MAX;
    cfg->garbage_collection_threshold = 0.0;
    cfg->expandable_segments = false;
    cfg->large_segment = FS_LARGE_BUFFER;
}

static int bad(char *err, size_t errlen, const char *fmt, const char *key, const char *value)
{
    if (err && errlen) snprintf(err, errlen, fmt, key, value);
    return -1;
}

/* Parses an unsigned decimal that fills the whole string. */
static bool parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+') return false;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

static bool is_pow2(unsigned long long v)
{
    return v && !(v & (v - 1));
}

static int log2_u64(unsigned long long v)
{
    return 63 - __builtin_clzll(v);
}

/* "N" sets every bucket; "[256:1,512:2,>:4]" sets the bucket of each power
 * of two (in MiB), the first entry also filling the buckets below it and ">"
 * every bucket after the last named one. Divisions must be 0 or a power of 2. */
static bool parse_divisions(const char *v, unsigned out[FS_ROUNDUP_BUCKETS])
{
    unsigned long long n;
    if (!strcmp(v, "none")) v = "0"; /* the default, as fs_alloc_config_describe says it */
    if (parse_u64(v, &n)) {
        if (n != 0 && !is_pow2(n)) return false;
        for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
            out[i] = (unsigned)n;
        return true;
    }
    size_t len = strlen(v);
    if (len < 2 || v[0] != '[' || v[len - 1] != ']') return false;
    char buf[256];
    if (len - 2 >= sizeof buf) return false;
    memcpy(buf, v + 1, len - 2);
    buf[len - 2] = '\0';
    int last = -1;
    bool first = true, any = false;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) return false;
        *colon = '\0';
        unsigned long long div;
        if (!parse_u64(colon + 1, &div) || (div != 0 && !is_pow2(div)) || div > 1u << 20)
            return false;
        if (strcmp(tok, ">") == 0) {
            for (int i = last + 1; i < FS_ROUNDUP_BUCKETS; i++)
                out[i] = (unsigned)div;
            any = true;
            continue;
        }
        unsigned long long mb;
        if (!parse_u64(tok, &mb) || !is_pow2(mb)) return false;
        int idx = log2_u64(mb);
        if (idx >= FS_ROUNDUP_BUCKETS) idx = FS_ROUNDUP_BUCKETS - 1;
        if (idx <= last) return false; /* keys must grow */
        if (first)
            for (int i = 0; i < idx; i++)
                out[i] = (unsigned)div;
        first = false;
        out[idx] = (unsigned)div;
        last = idx;
        any = true;
    }
    return any;
}

static bool parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) {
        *out = false;
        return true;
    }
    return false;
}

int fs_alloc_config_set(fs_alloc_config *cfg, const char *key, const char *value, char *err,
                        size_t errlen)
{
    if (!key) return 0;
    if (!value) value = "";
    if (!strcmp(key, "free_semantics")) {
        if (!strcmp(value, "sync"))
            cfg->free_semantics = FS_FREE_SEMANTICS_SYNC;
        else if (!strcmp(value, "device"))
            cfg->free_semantics = FS_FREE_SEMANTICS_DEVICE;
        else if (!strcmp(value, "stream"))
            cfg->free_semantics = FS_FREE_SEMANTICS_STREAM;
        else
            return bad(err, errlen, "%s: '%s' is not one of sync, device (default), stream", key,
                       value);
        return 1;
    }
    if (!strcmp(key, "cross_stream_reuse")) {
        if (!strcmp(value, "none"))
            cfg->cross_stream_reuse = FS_REUSE_NONE;
        else if (!strcmp(value, "completed"))
            cfg->cross_stream_reuse = FS_REUSE_COMPLETED;
        else if (!strcmp(value, "wait"))
            cfg->cross_stream_reuse = FS_REUSE_WAIT;
        else
            return bad(err, errlen, "%s: '%s' is not one of none, completed (default), wait", key,
                       value);
        return 1;
    }
    if (!strcmp(key, "max_split_size_mb")) {
        unsigned long long mb;
        if (!strcmp(value, "unlimited")) { /* the default, as fs_alloc_config_describe says it */
            cfg->max_split_size = SIZE_MAX;
            return 1;
        }
        /* As PyTorch: anything up to a large segment would forbid every split. */
        if (!parse_u64(value, &mb) || mb <= FS_LARGE_BUFFER / FS_MiB)
            return bad(err, errlen,
                       "%s: '%s' is not a whole number of MiB greater than 20 (default: unlimited)",
                       key, value);
        cfg->max_split_size = mb > SIZE_MAX / FS_MiB ? SIZE_MAX : (size_t)mb * FS_MiB;
        return 1;
    }
    if (!strcmp(key, "roundup_power2_divisions")) {
        unsigned tmp[FS_ROUNDUP_BUCKETS];
        memcpy(tmp, cfg->roundup_divisions, sizeof tmp);
        if (!parse_divisions(value, tmp))
            return bad(err, errlen,
                       "%s: '%s' is not N or [MB:N,...,>:N] with N 0 or a power of two, MB a "
                       "power of two (default: none)",
                       key, value);
        memcpy(cfg->roundup_divisions, tmp, sizeof tmp);
        return 1;
    }
    if (!strcmp(key, "garbage_collection_threshold")) {
        char *end;
        if (!strcmp(value, "off")) { /* the default, as fs_alloc_config_describe says it */
            cfg->garbage_collection_threshold = 0.0;
            return 1;
        }
        errno = 0;
        double t = strtod(value, &end);
        if (!*value || *end || errno || !(t > 0.0 && t < 1.0))
            return bad(err, errlen,
                       "%s: '%s' is not a fraction strictly between 0 and 1 "
                       "(default: off)",
                       key, value);
        cfg->garbage_collection_threshold = t;
        return 1;
    }
    if (!strcmp(key, "expandable_segments")) {
        bool b;
        if (!parse_bool(value, &b))
            return bad(err, errlen, "%s: '%s' is not true or false (default: false)", key, value);
        cfg->expandable_segments = b;
        return 1;
    }
    if (!strcmp(key, "large_segment_mb")) {
        unsigned long long mb;
        /* Segments come in 2 MiB steps; the bound keeps the size in a size_t. */
        if (!parse_u64(value, &mb) || mb < 2 || mb % 2 || mb > SIZE_MAX / FS_MiB)
            return bad(err, errlen,
                       "%s: '%s' is not an even whole number of MiB, 2 or more (default: 20)", key,
                       value);
        cfg->large_segment = (size_t)mb * FS_MiB;
        return 1;
    }
    if (!strcmp(key, "segment_growth")) {
        if (strcmp(value, "small_first") && strcmp(value, "pytorch"))
            return bad(err, errlen, "%s: '%s' is not small_first or pytorch (default: small_first)",
                       key, value);
        cfg->pytorch_growth = !strcmp(value, "pytorch");
        return 1;
    }
    if (!strcmp(key, "malloc_reuse")) {
        if (strcmp(value, "wait") && strcmp(value, "grow"))
            return bad(err, errlen, "%s: '%s' is not wait or grow (default: wait)", key, value);
        cfg->malloc_grow = !strcmp(value, "grow");
        return 1;
    }
    return 0;
}

/* The buckets as PyTorch's bracketed list, or the single N when all agree. */
static void describe_divisions(const unsigned div[FS_ROUNDUP_BUCKETS], char *buf, size_t len)
{
    size_t n = 0;
    bool same = true;

    for (int i = 1; i < FS_ROUNDUP_BUCKETS; i++)
        same = same && div[i] == div[0];
    if (same) {
        if (div[0] == 0)
            snprintf(buf, len, "none");
        else
            snprintf(buf, len, "%u", div[0]);
        return;
    }
    for (int i = 0; i < FS_ROUNDUP_BUCKETS && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu:%u", i ? "," : "[", 1ull << i, div[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

void fs_alloc_config_describe(const fs_alloc_config *cfg, char *buf, size_t len)
{
    static const char *const semantics[] = {"sync", "device", "stream"};
    static const char *const reuse[] = {"none", "completed", "wait"};
    char split[32] = "unlimited", gc[32] = "off", divisions[192];

    if (cfg->max_split_size != SIZE_MAX)
        snprintf(split, sizeof split, "%zu", cfg->max_split_size / FS_MiB);
    if (cfg->garbage_collection_threshold > 0.0)
        snprintf(gc, sizeof gc, "%g", cfg->garbage_collection_threshold);
    describe_divisions(cfg->roundup_divisions, divisions, sizeof divisions);
    snprintf(buf, len,
             "free_semantics:%s,cross_stream_reuse:%s,max_split_size_mb:%s,"
             "roundup_power2_divisions:%s,garbage_collection_threshold:%s,"
             "expandable_segments:%s,large_segment_mb:%zu,segment_growth:%s,malloc_reuse:%s",
             semantics[cfg->free_semantics], reuse[cfg->cross_stream_reuse], split, divisions, gc,
             cfg->expandable_segments ? "true" : "false", cfg->large_segment / FS_MiB,
             cfg->pytorch_growth ? "pytorch" : "small_first", cfg->malloc_grow ? "grow" : "wait");
}
