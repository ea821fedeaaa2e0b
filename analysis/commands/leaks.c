/* leaks.c - `fsdpshim leaks TRACE...`: the blocks still allocated when each
 * trace ends, grouped by site, with a suppressions file in LeakSanitizer's
 * form (docs/cli.md).
 *
 * A device allocation the program never freed is not always a bug (a
 * framework's caches live until exit), so the report is grouped the way
 * `top` groups, largest first, and what is known and accepted goes into a
 * suppressions file: `leak:PATTERN` lines, PATTERN matched against each
 * line of a site (a frame's function, file and module, an annotation path,
 * a Python frame), `*` matching anything, `^` and `$` anchoring at a
 * line's start and end, otherwise anywhere in it, as LeakSanitizer does.
 * Sizes are what the program asked for, as LeakSanitizer gives them, in
 * exact bytes beside the binary units. A damaged trace says so under its
 * line: a block whose free was in the part that could not be read is
 * listed as still allocated. The reading loop runs once per file, in time
 * order, the files side by side (parallel.h). */
#include "analysis.h"
#include "cmdline.h"
#include "parallel.h"
#include "progress.h"
#include "reader.h"
#include "render.h"
#include "replayer.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct suppression {
    char *pattern;          /* as written, less its leak: */
    char *glob;             /* the whole-line glob it means: *PATTERN* less anchored ends */
    uint64_t blocks, bytes; /* what it covered */
} suppression;

typedef struct leaks_run {
    fs_sites sites;
    suppression *sup;
    size_t nsup;
    size_t limit;
    uint64_t blocks, bytes; /* live at the end, all files */
} leaks_run;

void usage_leaks(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim leaks [--by stack|frame|annotation|python] [--suppressions FILE]\n"
            "                      [-n N] [--no-symbols] [--full-stacks] [--fail] TRACE...\n"
            "\n"
            "Blocks still allocated when each trace ends, grouped by site (ranks of one job\n"
            "merged), most bytes first.\n"
            "\n"
            "  --by            stack (default), frame, annotation or python, as for top\n"
            "  --suppressions  a file of `leak:PATTERN` lines (LeakSanitizer's form, # comments):\n"
            "                  a site with a line matching PATTERN is not reported; `*` matches\n"
            "                  anything, ^ and $ anchor at a line's start and end\n"
            "  -n N            print the first N sites [20]; 0 prints all\n"
            "  --no-symbols    native frames as MODULE+0xOFFSET\n"
            "  --full-stacks   every frame, none folded (as for top)\n"
            "  --fail          exit 4 when a block no suppression covers is left\n"
            "\n"
            "Sizes are given as 3.0 MiB and in exact bytes, as LeakSanitizer gives them. A\n"
            "damaged trace says so: a block whose free was in the lost part is listed too.\n"
            "\n"
            "example:\n"
            "  echo 'leak:init_optimizer_state' >known.supp\n"
            "  fsdpshim leaks --suppressions known.supp --fail train-4242.fst\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace or the suppressions file is\n"
            "bad, 2 usage, 4 leaks with --fail.\n");
}

/* ---- suppressions ---------------------------------------------------------------- */

/* Whether glob p (only `*` special) matches all of s[0..n). */
static bool glob(const char *p, size_t pn, const char *s, size_t n)
{
    size_t pi = 0, si = 0, star = (size_t)-1, back = 0;
    while (si < n) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            back = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++back;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

static suppression *suppressed_by(leaks_run *r, const fs_site *site)
{
    for (size_t i = 0; i < r->nsup; i++)
        for (const char *line = site->key; *line;) {
            const char *end = strchr(line, '\n');
            size_t len = end ? (size_t)(end - line) : strlen(line);
            if (glob(r->sup[i].glob, strlen(r->sup[i].glob), line, len)) return &r->sup[i];
            line += len + (end ? 1 : 0);
        }
    return NULL;
}

/* Reads FILE's leak: lines; false (with a message) on a line it does not
 * understand: a suppression that silently does nothing hides a leak. */
static bool load_suppressions(leaks_run *r, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    unsigned lineno = 0;

    if (!f) {
        fprintf(stderr, "fsdpshim leaks: %s: cannot open the suppressions file\n", path);
        return false;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = line, *e = line + strcspn(line, "\r\n");
        *e = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (!*s || *s == '#') continue;
        if (strncmp(s, "leak:", 5) != 0 || !s[5]) {
            fprintf(stderr, "fsdpshim leaks: %s:%u: not a leak:PATTERN line: %s\n", path, lineno,
                    s);
            fclose(f);
            return false;
        }
        s += 5;
        size_t len = strlen(s);
        bool start = *s == '^', end = s[len - 1] == '$' && len > (size_t)start;
        suppression x = {.pattern = strdup(s), .glob = malloc(len + 3)};
        suppression *more = realloc(r->sup, (r->nsup + 1) * sizeof *more);
        if (!more || !x.pattern || !x.glob) fs_analysis_oom("leaks");
        snprintf(x.glob, len + 3, "%s%.*s%s", start ? "" : "*", (int)(len - start - end), s + start,
                 end ? "" : "*");
        r->sup = more;
        r->sup[r->nsup++] = x;
    }
    fclose(f);
    return true;
}

/* ---- reading, the files side by side (parallel.h) ------------------------------- */

/* One trace: its sites, each with the blocks still live at its end */
typedef struct leaks_file {
    fs_sites sites;
    uint64_t blocks, bytes;
    char line[4400]; /* what it ended with, printed in the order named */
    bool read;
} leaks_file;

typedef struct leaks_job {
    leaks_run *run;
    char **paths;
    leaks_file *files;
    size_t unread;
} leaks_job;

/* An allocation's block (replayer.h) keeps its site */
static uint32_t block_site(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    leaks_file *f = ctx;
    return fs_sites_of(&f->sites, t, &rec->ev, tid);
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fs_progress_warn("leaks", line);
}

static void read_trace(void *ctx, size_t i)
{
    leaks_job *job = ctx;
    leaks_file *f = &job->files[i];
    char err[4200], bytes[32];
    fs_reader *t = fs_reader_open(job->paths[i], err, sizeof err);

    if (!t) {
        fs_progress_warn("leaks", err);
        return;
    }
    fs_progress_watch(t);
    f->sites = (fs_sites){
        .by = job->run->sites.by, .sym = job->run->sites.sym, .full = job->run->sites.full};
    fs_sites_next_file(&f->sites);
    /* the blocks keep the bytes asked for, as LeakSanitizer counts (a
     * trace-only attach may know only the block's) */
    fs_replayer_ops ops = {.site = block_site, .warn = warn, .requested = true};
    fs_replayer *rp = fs_replayer_create(&ops, f);
    fs_replayer_read(rp, t);
    fs_live_block l;
    for (size_t pos = 0; fs_live_next(fs_replayer_live(rp), &pos, &l);) {
        fs_site *site = &f->sites.all[l.site - 1];
        site->live++;
        site->live_bytes += l.size;
        f->blocks++;
        f->bytes += l.size;
    }
    fs_replayer_free(rp);
    fs_human_bytes(f->bytes, bytes, sizeof bytes);
    int n = snprintf(f->line, sizeof f->line,
                     "%s: %s %d: %" PRIu64 " block%s, %s (%" PRIu64
                     " bytes), still allocated at the end\n",
                     fs_reader_file(t), fs_reader_rank(t) >= 0 ? "rank" : "pid",
                     fs_reader_rank(t) >= 0 ? fs_reader_rank(t) : (int)fs_reader_header(t)->pid,
                     f->blocks, fs_plural(f->blocks), bytes, f->bytes);
    const fs_reader_damage *d = fs_reader_damage_of(t);
    if ((d->skipped_blocks || d->skipped_bytes) && n > 0 && (size_t)n < sizeof f->line)
        snprintf(f->line + n, sizeof f->line - (size_t)n,
                 "%s: the trace is damaged (%" PRIu64 " bytes could not be read): a block whose "
                 "free was in them is listed as still allocated\n",
                 fs_reader_file(t), d->skipped_bytes);
    fs_reader_close(t);
    f->read = true;
}

static void merge_trace(void *ctx, size_t i)
{
    leaks_job *job = ctx;
    leaks_file *f = &job->files[i];
    if (!f->read) {
        job->unread++;
        return;
    }
    fputs(f->line, stdout);
    for (size_t k = 0; k < f->sites.n; k++)
        fs_sites_add(&job->run->sites, &f->sites.all[k]);
    job->run->blocks += f->blocks;
    job->run->bytes += f->bytes;
    fs_sites_free(&f->sites);
}

/* Reads the n traces into r; false when one could not be read. */
static bool read_traces(leaks_run *r, size_t n, char **paths)
{
    leaks_job job = {r, paths, calloc(n, sizeof *job.files), 0};
    if (!job.files) fs_analysis_oom("leaks");
    fs_par_read("leaks", n, paths, read_trace, merge_trace, &job);
    free(job.files);
    return !job.unread;
}

/* ---- output -------------------------------------------------------------------- */

static int by_bytes(const void *a, const void *b)
{
    const fs_site *x = a, *y = b;
    if (x->live_bytes != y->live_bytes) return x->live_bytes < y->live_bytes ? 1 : -1;
    if (x->live != y->live) return x->live < y->live ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* Prints the unsuppressed sites; returns their bytes. */
static uint64_t report(leaks_run *r)
{
    fs_sites *s = &r->sites;
    uint64_t left = 0, left_blocks = 0;
    size_t nleft = 0, printed = 0;
    char bytes[32];

    for (size_t i = 0; i < s->n; i++) {
        fs_site *site = &s->all[i];
        if (!site->live) continue;
        suppression *x = suppressed_by(r, site);
        if (x) {
            site->suppressed = true;
            x->blocks += site->live;
            x->bytes += site->live_bytes;
            continue;
        }
        left += site->live_bytes;
        left_blocks += site->live;
        nleft++;
    }
    if (s->n) qsort(s->all, s->n, sizeof *s->all, by_bytes); /* no sites: all is NULL */
    fs_human_bytes(left, bytes, sizeof bytes);
    printf("%" PRIu64 " block%s, %s (%" PRIu64 " bytes), in %zu site%s by %s, not suppressed\n",
           left_blocks, fs_plural(left_blocks), bytes, left, nleft, fs_plural(nleft),
           fs_site_by_name(s->by));
    if (nleft) printf("%12s %14s %10s %6s\n", "size", "bytes", "blocks", "ranks");
    for (size_t i = 0; i < s->n; i++) {
        const fs_site *site = &s->all[i];
        if (!site->live || site->suppressed) continue;
        if (r->limit && printed == r->limit) {
            printf("... %zu more site%s (-n 0 prints all)\n", nleft - printed,
                   fs_plural(nleft - printed));
            break;
        }
        fs_human_bytes(site->live_bytes, bytes, sizeof bytes);
        printf("%12s %14" PRIu64 " %10" PRIu64 " %6u\n", bytes, site->live_bytes, site->live,
               site->ranks);
        fs_site_print_key(stdout, site);
        printed++;
    }
    if (r->nsup) printf("suppressions used:\n");
    for (size_t i = 0; i < r->nsup; i++) {
        fs_human_bytes(r->sup[i].bytes, bytes, sizeof bytes);
        printf("%10" PRIu64 " block%-1s %12s %14" PRIu64 "  leak:%s\n", r->sup[i].blocks,
               fs_plural(r->sup[i].blocks), bytes, r->sup[i].bytes, r->sup[i].pattern);
    }
    return left;
}

int command_leaks(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},
        {"suppressions", required_argument, NULL, 'S'},
        {"no-symbols", no_argument, NULL, 'N'},
        {"fail", no_argument, NULL, 'F'},
        {"full-stacks", no_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    leaks_run r = {.sites.by = FS_BY_STACK, .limit = 20};
    const char *suppressions = NULL;
    bool symbols = true, fail = false;
    int c, status = 0;

    optind = 1;
    while ((c = fs_site_getopt(argc, argv, longopts, &r.sites.by, &r.limit, &symbols,
                               &r.sites.full)) != -1) {
        switch (c) {
        case 'S':
            suppressions = optarg;
            break;
        case 'F':
            fail = true;
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_leaks);
        }
    }
    if (optind >= argc) return fs_usage_error(argv[0], "no trace named");
    if (suppressions && !load_suppressions(&r, suppressions)) return FS_EXIT_BAD_INPUT;
    if (symbols && !(r.sites.sym = fs_symbols_create(fs_progress_warn, "leaks")))
        fs_analysis_oom("leaks");
    if (!read_traces(&r, (size_t)(argc - optind), argv + optind)) status = FS_EXIT_BAD_INPUT;
    uint64_t left = report(&r);
    if (!status && fail && left) status = FS_EXIT_LEAKS;
    fs_sites_free(&r.sites);
    for (size_t i = 0; i < r.nsup; i++) {
        free(r.sup[i].pattern);
        free(r.sup[i].glob);
    }
    free(r.sup);
    fs_symbols_destroy(r.sites.sym);
    return status;
}
