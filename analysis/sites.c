/* sites.c - sites and live blocks (sites.h). */
#include "sites.h"

#include "../cli/cli.h"
#include "render.h"

#include <stdlib.h>
#include <string.h>

static const char *const by_names[] = {"stack", "frame", "annotation", "python"};

bool fs_site_by_parse(const char *arg, enum fs_site_by *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(arg, by_names[i])) {
            *out = (enum fs_site_by)i;
            return true;
        }
    return false;
}

const char *fs_site_by_name(enum fs_site_by by)
{
    return by_names[by];
}

_Noreturn void fs_analysis_oom(const char *command)
{
    fprintf(stderr, "fsdpshim %s: out of memory\n", command);
    exit(FS_EXIT_BAD_INPUT);
}

/* p grown to at least `need` elements of `size` bytes, the new ones zeroed */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (!q) fs_analysis_oom("analysis");
    memset((char *)q + *cap * size, 0, (c - *cap) * size);
    *cap = c;
    return q;
}

/* ---- sites by text --------------------------------------------------------------- */

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void rehash(fs_sites *s, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) fs_analysis_oom("analysis");
    for (size_t i = 0; i < s->n; i++) {
        size_t k = hash_text(s->all[i].key) & (nslots - 1);
        while (slots[k])
            k = (k + 1) & (nslots - 1);
        slots[k] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
}

static uint32_t site_by_text(fs_sites *s, const char *key)
{
    if (2 * (s->n + 1) > s->nslots) rehash(s, s->nslots ? 2 * s->nslots : 1024);
    size_t k = hash_text(key) & (s->nslots - 1);
    for (; s->slots[k]; k = (k + 1) & (s->nslots - 1))
        if (!strcmp(s->all[s->slots[k] - 1].key, key)) return s->slots[k];
    s->all = grow(s->all, &s->cap, s->n + 1, sizeof *s->all);
    s->all[s->n] = (fs_site){.key = strdup(key)};
    if (!s->all[s->n].key) fs_analysis_oom("analysis");
    s->slots[k] = (uint32_t)++s->n;
    return s->slots[k];
}

/* ---- an allocation's text ------------------------------------------------------------ */

static void append(char *buf, size_t len, size_t *at, const char *s)
{
    size_t n = strlen(s);
    if (*at + n + 1 >= len) n = len - *at - 1;
    memcpy(buf + *at, s, n);
    *at += n;
    buf[*at] = '\0';
}

static void key_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev, char *key, size_t len)
{
    static char text[16384];
    size_t at = 0;
    uint32_t n;

    key[0] = '\0';
    switch (s->by) {
    case FS_BY_ANNOT:
        if (!fs_render_annot(t, ev->annot, key, len)) append(key, len, &at, "(no annotation)");
        return;
    case FS_BY_PYTHON: {
        const fs_fmt_pyframe *py;
        n = ev->pystack ? fs_reader_pystack(t, ev->pystack, &py) : 0;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_pyframe(t, &py[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no Python frames)");
        return;
    }
    case FS_BY_STACK:
    case FS_BY_FRAME: {
        const uint64_t *frames;
        n = ev->stack ? fs_reader_stack(t, ev->stack, &frames) : 0;
        if (s->by == FS_BY_FRAME && n > 1) n = 1;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_frame_sym(t, s->sym, frames[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no stack)");
        return;
    }
    }
}

static uint32_t id_of(const fs_sites *s, const fs_fmt_event *ev)
{
    switch (s->by) {
    case FS_BY_ANNOT:
        return ev->annot;
    case FS_BY_PYTHON:
        return ev->pystack;
    default:
        return ev->stack;
    }
}

void fs_sites_next_file(fs_sites *s)
{
    s->file++;
    if (s->by_id) memset(s->by_id, 0, s->by_id_cap * sizeof *s->by_id);
}

uint32_t fs_sites_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev)
{
    static char key[1 << 16];
    uint32_t id = id_of(s, ev);

    s->by_id = grow(s->by_id, &s->by_id_cap, (size_t)id + 1, sizeof *s->by_id);
    if (!s->by_id[id]) {
        key_of(s, t, ev, key, sizeof key);
        s->by_id[id] = site_by_text(s, key);
    }
    fs_site *site = &s->all[s->by_id[id] - 1];
    if (site->last_file != s->file) {
        site->last_file = s->file;
        site->ranks++;
    }
    return s->by_id[id];
}

void fs_sites_free(fs_sites *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->all[i].key);
    free(s->all);
    free(s->slots);
    free(s->by_id);
}

void fs_site_print_key(FILE *out, const fs_site *site)
{
    for (const char *line = site->key; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        fprintf(out, "    %.*s\n", (int)len, line);
        line += len + (end ? 1 : 0);
    }
}

/* ---- live blocks ---------------------------------------------------------------------- */

static size_t slot_of(uint64_t addr, size_t cap)
{
    return (size_t)((addr >> 9) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

void fs_live_put(fs_live *l, uint64_t addr, uint64_t size, uint32_t site, int device)
{
    if (2 * (l->n + 1) > l->cap) {
        fs_live_block *old = l->slots;
        size_t oldcap = l->cap, cap = oldcap ? 2 * oldcap : 4096;
        l->slots = calloc(cap, sizeof *l->slots);
        if (!l->slots) fs_analysis_oom("analysis");
        l->cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].site) {
                size_t k = slot_of(old[i].addr, cap);
                while (l->slots[k].site)
                    k = (k + 1) & (cap - 1);
                l->slots[k] = old[i];
            }
        free(old);
    }
    size_t k = slot_of(addr, l->cap);
    while (l->slots[k].site && l->slots[k].addr != addr)
        k = (k + 1) & (l->cap - 1);
    if (!l->slots[k].site) l->n++;
    l->slots[k] = (fs_live_block){addr, size, site, device};
}

bool fs_live_take(fs_live *l, uint64_t addr, fs_live_block *out)
{
    if (!l->cap) return false;
    size_t mask = l->cap - 1, k = slot_of(addr, l->cap);
    while (l->slots[k].site && l->slots[k].addr != addr)
        k = (k + 1) & mask;
    if (!l->slots[k].site) return false;
    *out = l->slots[k];
    l->slots[k].site = 0;
    l->n--;
    /* shift the rest of the cluster back into the hole: an entry moves
     * unless its home slot lies cyclically in (hole, i] */
    size_t hole = k;
    for (size_t i = (k + 1) & mask; l->slots[i].site; i = (i + 1) & mask) {
        size_t home = slot_of(l->slots[i].addr, l->cap);
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) {
            l->slots[hole] = l->slots[i];
            l->slots[i].site = 0;
            hole = i;
        }
    }
    return true;
}

void fs_live_clear(fs_live *l)
{
    if (l->slots) memset(l->slots, 0, l->cap * sizeof *l->slots);
    l->n = 0;
}

void fs_live_free(fs_live *l)
{
    free(l->slots);
    *l = (fs_live){0};
}

void fs_human_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}
