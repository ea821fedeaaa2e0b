/* top_live.c - `fsdpshim top --live [PID...]`: the running processes' GPU
 * memory as their shim sees it, redrawn like top (docs/cli.md).
 *
 * Each process running the preload library keeps a statistics page in
 * shared memory (format/live.h), rewritten by a thread of the library every
 * 50 ms; this file only reads pages, through the seqlock of format/live.c,
 * and never links the library. With PIDs it shows those processes; without,
 * every process of the user that has a page. A page whose process is gone
 * (its pid no longer runs, or runs another program: the start time
 * differs) was left by a process killed outright: the user's own such
 * pages are removed here.
 *
 * On a terminal the view is redrawn every -d seconds [0.5] on the
 * alternate screen with plain ANSI sequences, the keyboard in
 * non-canonical mode so that q quits; everything is put back on q, Ctrl-C,
 * SIGTERM and SIGHUP, and around Ctrl-Z. Otherwise (a pipe, a file, or
 * --once) it prints one snapshot and exits. */
#include "analysis.h"
#include "cmdline.h"
#include "render.h"
#include "sites.h"

#include "live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* A page not rewritten for this long, while its process runs, is shown as
 * stale: the process is stopped, or exec'ed a program without the shim. */
#define STALE_NS (2 * 1000000000ull)

typedef struct page_view {
    int pid;
    uint32_t ndev;
    char exe[sizeof((fs_live_head *)0)->exe];
    fs_live_proc proc;
    fs_live_device devs[FS_LIVE_DEVICES];
    bool torn; /* no consistent copy: the writer died mid-update */
} page_view;

typedef enum page_status {
    PAGE_OK,
    PAGE_NONE,   /* no page: not under the shim, live:false, before its first CUDA call */
    PAGE_DENIED, /* another user's */
    PAGE_GONE,   /* a page left by a process that no longer runs */
    PAGE_BAD,    /* not readable (why in the message) */
} page_status;

void usage_top_live(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim top --live [PID...] [-d SECONDS] [--once]\n"
            "\n"
            "The GPU memory of running processes under the shim, from the statistics page\n"
            "each keeps in shared memory (rewritten every 50 ms): per process (rank, pid) and\n"
            "device, allocated and reserved bytes with their peaks, bytes pending free,\n"
            "segments, OOMs, the cached free bytes of the streams holding most, the\n"
            "all-gather rate limiter's waits, and, when allocating stacks are traced, the\n"
            "sites holding most. Without PID: every process of this user running the shim.\n"
            "\n"
            "  -d SECONDS  redraw interval [0.5]\n"
            "  --once      print one snapshot and exit (also when stdout is not a terminal)\n"
            "\n"
            "On a terminal the view is redrawn until q, Ctrl-C or the processes' end.\n"
            "\n"
            "examples:\n"
            "  fsdpshim top --live\n"
            "  fsdpshim top --live --once 4242 4243\n"
            "\n"
            "Exit status: 0 ok, 1 a PID has no readable page (or, without PID, no process\n"
            "has one), 2 usage.\n");
}

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- reading pages ------------------------------------------------------------ */

/* Whether a page's process is gone: its pid runs no more, or runs a
 * process started at another time (the pid was reused). */
static bool process_gone(const fs_live_head *h)
{
    if (kill(h->pid, 0) != 0 && errno == ESRCH) return true;
    uint64_t start = fs_live_start_ticks(h->pid);
    return h->start_ticks && start && start != h->start_ticks;
}

/* Maps the page open on fd, waiting a moment for one being made (it is
 * sized, then its head written, its magic last); NULL when it is not
 * ready then, *size its size otherwise. */
static fs_live_head *page_map(int fd, size_t *size)
{
    struct stat st;

    for (int tries = 0; tries < 20; tries++) {
        if (tries) nanosleep(&(struct timespec){0, 5000000}, NULL);
        if (fstat(fd, &st) != 0) return NULL;
        if (st.st_size < (off_t)sizeof(fs_live_head)) continue;
        fs_live_head *h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (h == MAP_FAILED) return NULL;
        if (atomic_load_explicit(&h->magic, memory_order_acquire)) {
            *size = (size_t)st.st_size;
            return h;
        }
        munmap(h, (size_t)st.st_size);
    }
    return NULL;
}

/* Reads the page `name` of process pid into v. why receives the reason of
 * PAGE_BAD and PAGE_DENIED. */
static page_status page_read(const char *name, int pid, page_view *v, char *why, size_t whylen)
{
    page_status status = PAGE_OK;
    struct stat st;
    size_t size;
    int fd = shm_open(name, O_RDONLY, 0);

    if (fd < 0) {
        if (errno == ENOENT) return PAGE_NONE;
        snprintf(why, whylen, "%s", strerror(errno));
        return errno == EACCES || errno == EPERM ? PAGE_DENIED : PAGE_BAD;
    }
    fs_live_head *h = page_map(fd, &size);
    bool mine = fstat(fd, &st) == 0 && st.st_uid == geteuid();
    close(fd);
    if (!h) {
        /* a process killed while it made its page leaves it unfinished */
        if (kill(pid, 0) != 0 && errno == ESRCH) {
            if (mine) shm_unlink(name);
            return PAGE_GONE;
        }
        snprintf(why, whylen, "not finished being made");
        return PAGE_BAD;
    }
    const char *bad = fs_live_check(h, size);
    if (bad) {
        snprintf(why, whylen, "%s", bad);
        status = PAGE_BAD;
    } else if (h->pid != pid) {
        snprintf(why, whylen, "names pid %d", (int)h->pid);
        status = PAGE_BAD;
    } else if (process_gone(h)) {
        /* left by a process killed outright: the user's own are removed */
        if (mine) shm_unlink(name);
        status = PAGE_GONE;
    } else {
        v->pid = pid;
        v->ndev = h->ndev;
        memcpy(v->exe, h->exe, sizeof v->exe);
        v->exe[sizeof v->exe - 1] = 0;
        v->torn = !fs_live_read(h, &v->proc, v->devs, 1000);
    }
    munmap(h, size);
    return status;
}

/* The page of one PID, whoever's it is: this user's name first, then any
 * other user's (which only that user, or root, can open). */
static page_status page_of_pid(int pid, page_view *v, char *why, size_t whylen)
{
    char name[300]; /* "/" and a directory entry */
    page_status s;

    fs_live_name(name, sizeof name, (unsigned)geteuid(), pid);
    if ((s = page_read(name, pid, v, why, whylen)) != PAGE_NONE) return s;
    DIR *dir = opendir(FS_LIVE_DIR);
    struct dirent *e;
    unsigned uid;
    int p;
    while (dir && (e = readdir(dir))) {
        if (!fs_live_parse_name(e->d_name, &uid, &p) || p != pid || uid == geteuid()) continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        s = page_read(name, pid, v, why, whylen);
        if (s == PAGE_DENIED)
            snprintf(why, whylen,
                     "process %d belongs to another user (uid %u): its statistics "
                     "page is readable only by that user",
                     pid, uid);
        break;
    }
    if (dir) closedir(dir);
    return s;
}

typedef struct view_set {
    page_view *v;
    size_t n, cap;
} view_set;

static page_view *view_add(view_set *set)
{
    set->v = fs_grow(set->v, &set->cap, set->n + 1, sizeof *set->v);
    return memset(&set->v[set->n++], 0, sizeof *set->v);
}

static int by_rank_pid(const void *a, const void *b)
{
    const page_view *x = a, *y = b;
    /* known ranks first, in order; then by pid */
    if ((x->proc.rank < 0) != (y->proc.rank < 0)) return x->proc.rank < 0 ? 1 : -1;
    if (x->proc.rank != y->proc.rank) return x->proc.rank < y->proc.rank ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Every page of this user whose process runs. */
static void gather_all(view_set *set)
{
    DIR *dir = opendir(FS_LIVE_DIR);
    struct dirent *e;
    unsigned uid;
    int pid;
    char name[300], why[160];

    set->n = 0;
    while (dir && (e = readdir(dir))) {
        if (!fs_live_parse_name(e->d_name, &uid, &pid) || uid != geteuid()) continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        page_view *v = view_add(set);
        if (page_read(name, pid, v, why, sizeof why) != PAGE_OK) set->n--;
    }
    if (dir) closedir(dir);
    if (set->n) qsort(set->v, set->n, sizeof *set->v, by_rank_pid); /* none: v may be NULL */
}

/* The given PIDs' pages; false with a line on stderr for each that has
 * none (its view left out). */
static bool gather_pids(view_set *set, const int *pids, size_t npids, bool say)
{
    bool all = true;
    char why[256];

    set->n = 0;
    for (size_t i = 0; i < npids; i++) {
        page_view *v = view_add(set);
        page_status s = page_of_pid(pids[i], v, why, sizeof why);
        if (s == PAGE_OK) continue;
        set->n--;
        all = false;
        if (!say) continue;
        if (s == PAGE_NONE || s == PAGE_GONE)
            fprintf(stderr, "fsdpshim top: process %d has no fsdpshim statistics page (%s)\n",
                    pids[i],
                    kill(pids[i], 0) != 0 && errno == ESRCH
                        ? "no such process"
                        : "not running under the shim, live:false, or no CUDA call yet");
        else if (s == PAGE_DENIED && strstr(why, "another user"))
            fprintf(stderr, "fsdpshim top: %s\n", why);
        else if (s == PAGE_DENIED)
            fprintf(stderr, "fsdpshim top: process %d: statistics page: permission denied (%s)\n",
                    pids[i], why);
        else
            fprintf(stderr, "fsdpshim top: process %d: statistics page: %s\n", pids[i], why);
    }
    return all;
}

/* ---- drawing ------------------------------------------------------------------ */

static void bytes(uint64_t b, char *buf, size_t len)
{
    fs_human_bytes(b, buf, len);
}

static void stream_name(const fs_live_stream *s, char *buf, size_t len)
{
    switch (s->kind) {
    case FS_LIVE_STREAM_LEGACY:
        snprintf(buf, len, "legacy");
        break;
    case FS_LIVE_STREAM_PER_THREAD:
        snprintf(buf, len, "per-thread#%" PRIu64, s->id);
        break;
    case FS_LIVE_STREAM_RETIRED:
        snprintf(buf, len, "destroyed 0x%" PRIx64, s->id);
        break;
    default:
        snprintf(buf, len, "0x%" PRIx64, s->id);
    }
}

static bool device_used(const fs_live_device *d)
{
    return d->allocations || d->reserved_peak || d->ooms || d->rl_waits;
}

static void draw_device(FILE *out, const fs_live_device *d)
{
    char a[16], ap[16], r[16], rp[16], pend[16], fr[16], lf[16];

    bytes(d->allocated, a, sizeof a);
    bytes(d->allocated_peak, ap, sizeof ap);
    bytes(d->reserved, r, sizeof r);
    bytes(d->reserved_peak, rp, sizeof rp);
    bytes(d->pending_bytes, pend, sizeof pend);
    bytes(d->cached_free, fr, sizeof fr);
    bytes(d->largest_free, lf, sizeof lf);
    fprintf(out,
            "  %3" PRId64 " %10s %10s %10s %10s %10s %10s %10s %6" PRIu64 " %7" PRIu64 " %5" PRIu64
            "\n",
            d->device, a, ap, r, rp, pend, fr, lf, d->segments, d->blocks, d->ooms);
    if (d->streams_with_free) {
        fprintf(out, "      cached free by stream:");
        uint64_t shown = 0, n = d->streams_with_free < FS_LIVE_STREAMS ? d->streams_with_free
                                                                       : FS_LIVE_STREAMS;
        for (uint64_t i = 0; i < n; i++) {
            char name[48], b[16];
            stream_name(&d->streams[i], name, sizeof name);
            bytes(d->streams[i].free_bytes, b, sizeof b);
            fprintf(out, "%s %s %s", i ? "," : "", name, b);
            shown += d->streams[i].free_bytes;
        }
        if (d->streams_with_free > n) {
            char b[16];
            bytes(d->cached_free - shown, b, sizeof b);
            fprintf(out, ", %" PRIu64 " more streams %s", d->streams_with_free - n, b);
        }
        fprintf(out, "\n");
    }
    char bi[16];
    bytes(d->rl_in_flight_bytes, bi, sizeof bi);
    fprintf(out,
            "      rate limiter: %" PRIu64 " wait%s (%.1f ms); %" PRIu64
            " freed all-gather output%s in flight (%s)\n",
            d->rl_waits, fs_plural(d->rl_waits), (double)d->rl_wait_ns / 1e6, d->rl_in_flight,
            fs_plural(d->rl_in_flight), bi);
}

static void draw_sites(FILE *out, const fs_live_proc *p, uint64_t now)
{
    if (p->sites_state == FS_LIVE_SITES_NONE) {
        fprintf(out, "  sites: not kept (trace:stacks or oom_snapshot:stacks keeps them)\n");
        return;
    }
    if (!p->nsites) {
        fprintf(out, "  sites: no live block with a stack\n");
        return;
    }
    fprintf(out, "  sites holding most (counted %.1f s ago):\n",
            now > p->sites_at_ns ? (double)(now - p->sites_at_ns) / 1e9 : 0.0);
    for (uint64_t i = 0; i < p->nsites && i < FS_LIVE_SITES; i++) {
        char b[16];
        bytes(p->sites[i].bytes, b, sizeof b);
        fprintf(out, "    %10s in %6" PRIu64 " block%-1s  %.*s\n", b, p->sites[i].blocks,
                fs_plural(p->sites[i].blocks), FS_LIVE_LABEL, p->sites[i].label);
    }
}

static void draw_process(FILE *out, const page_view *v, uint64_t now)
{
    static const char *const levels[] = {"off", "events", "stacks", "python"};
    const fs_live_proc *p = &v->proc;
    char who[48];

    if (p->rank >= 0 && p->world > 0)
        snprintf(who, sizeof who, "rank %" PRId64 "/%" PRId64, p->rank, p->world);
    else if (p->rank >= 0)
        snprintf(who, sizeof who, "rank %" PRId64, p->rank);
    else
        snprintf(who, sizeof who, "rank ?");
    fprintf(out, "PID %d  %s  %s  ", v->pid, who, v->exe);
    if (v->torn)
        fprintf(out, "(page mid-update: the writer stopped while writing)\n");
    else if (now > p->update_ns + STALE_NS)
        fprintf(out, "not updated for %.0f s (stopped, or exec'ed without the shim)\n",
                (double)(now - p->update_ns) / 1e9);
    else
        fprintf(out, "updated %.2f s ago, trace:%s\n",
                now > p->update_ns ? (double)(now - p->update_ns) / 1e9 : 0.0,
                levels[p->trace_level < 4 ? p->trace_level : 0]);
    bool any = false;
    for (uint32_t d = 0; d < v->ndev && d < FS_LIVE_DEVICES; d++) {
        if (!device_used(&v->devs[d])) continue;
        if (!any)
            fprintf(out, "  dev  allocated       peak   reserved       peak    pending     cached"
                         "    largest   segs  blocks  OOMs\n");
        any = true;
        draw_device(out, &v->devs[d]);
    }
    if (!any) fprintf(out, "  no device memory yet (%u devices)\n", v->ndev);
    draw_sites(out, p, now);
}

static void draw(FILE *out, const view_set *set, double delay, bool tty)
{
    uint64_t now = mono_ns();

    fprintf(out, "fsdpshim top --live: %zu process%s", set->n, set->n == 1 ? "" : "es");
    if (tty) fprintf(out, ", every %.1f s (q quits)", delay);
    fprintf(out, "\n");
    for (size_t i = 0; i < set->n; i++) {
        fprintf(out, "\n");
        draw_process(out, &set->v[i], now);
    }
}

/* ---- the terminal ------------------------------------------------------------- */

static volatile sig_atomic_t quit_signal, resized, suspended;
static struct termios saved_termios;
static bool termios_saved, screen_on;

static void on_quit(int sig)
{
    quit_signal = sig;
}

static void on_winch(int sig)
{
    (void)sig;
    resized = 1;
}

static void on_tstp(int sig)
{
    (void)sig;
    suspended = 1;
}

/* Non-canonical input without echo (q needs no Enter), the alternate
 * screen, the cursor hidden. */
static void screen_enter(void)
{
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_termios) == 0) {
        struct termios raw = saved_termios;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        termios_saved = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    fputs("\033[?1049h\033[?25l", stdout);
    fflush(stdout);
    screen_on = true;
}

/* Everything as it was: called on every way out, and at exit. */
static void screen_leave(void)
{
    if (!screen_on) return;
    screen_on = false;
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    if (termios_saved) tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    termios_saved = false;
}

static void signals_set(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_quit; /* no SA_RESTART: poll() returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, NULL);
    sa.sa_handler = on_tstp;
    sigaction(SIGTSTP, &sa, NULL);
}

/* Ctrl-Z: the terminal put back before the stop, taken again after it. */
static void suspend(void)
{
    suspended = 0;
    screen_leave();
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    /* continued */
    signals_set();
    screen_enter();
}

/* The frame, each line cut to the terminal's width (a wrapped line would
 * scroll the screen) and cleared to its end, then the rest of the screen
 * cleared. */
static void frame_show(const char *text, size_t len)
{
    struct winsize ws;
    int cols = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
    int rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row ? ws.ws_row : 24;
    const char *s = text, *end = text + len;

    fputs("\033[H", stdout);
    for (int row = 0; s < end && row < rows; row++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        fprintf(stdout, "%.*s\033[K%s", (int)(n < (size_t)cols ? n : (size_t)cols), s,
                row + 1 < rows ? "\r\n" : "");
        s += n + (nl ? 1 : 0);
    }
    fputs("\033[J", stdout);
    fflush(stdout);
}

/* Redraws until q, a quitting signal, or (with PIDs) every process gone. */
static void run_screen(view_set *set, const int *pids, size_t npids, double delay)
{
    signals_set();
    atexit(screen_leave);
    screen_enter();
    for (;;) {
        if (npids)
            gather_pids(set, pids, npids, false);
        else
            gather_all(set);
        if (npids && !set->n) break;
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (!mem) fs_analysis_oom("top --live");
        draw(mem, set, delay, true);
        fclose(mem);
        frame_show(text, len);
        free(text);
        /* wait for the next redraw, a key or a signal */
        uint64_t until = mono_ns() + (uint64_t)(delay * 1e9);
        bool redraw = false;
        while (!redraw && !quit_signal) {
            if (suspended) {
                suspend();
                break;
            }
            if (resized) {
                resized = 0;
                break;
            }
            uint64_t now = mono_ns();
            if (now >= until) break;
            struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
            int timeout = (int)((until - now + 999999) / 1000000);
            if (poll(&pfd, termios_saved ? 1 : 0, timeout) <= 0) continue;
            char c;
            /* a terminal that went away ends the view as q does */
            if (!(pfd.revents & POLLIN) || read(STDIN_FILENO, &c, 1) != 1 || c == 'q' || c == 'Q')
                quit_signal = -1;
            redraw = true; /* any other key: at once */
        }
        if (quit_signal) break;
    }
    screen_leave();
    if (npids && !set->n) printf("fsdpshim top: the process%s ended\n", npids == 1 ? "" : "es");
}

/* ---- the command ------------------------------------------------------------------ */

int command_top_live(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"live", no_argument, NULL, 'L'},
        {"once", no_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double delay = 0.5;
    bool once = false;
    view_set set = {0};
    int *pids = NULL, c, status = 0;
    size_t npids = 0;

    optind = 1;
    while ((c = fs_getopt(argc, argv, "hd:", longopts)) != -1) {
        char *end;
        switch (c) {
        case 'L':
            break;
        case 'o':
            once = true;
            break;
        case 'd':
            delay = strtod(optarg, &end);
            if (*end || end == optarg || !(delay >= 0.05 && delay <= 3600)) {
                fprintf(stderr, "fsdpshim top: -d %s: seconds from 0.05 to 3600\n", optarg);
                return FS_EXIT_USAGE;
            }
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_top_live);
        }
    }
    if (argc > optind && !(pids = calloc((size_t)(argc - optind), sizeof *pids)))
        fs_analysis_oom("top --live");
    for (int i = optind; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || v <= 0 || v > 0x7fffffff) {
            fprintf(stderr, "fsdpshim top: --live takes process ids, not '%s'\n", argv[i]);
            free(pids);
            return FS_EXIT_USAGE;
        }
        pids[npids++] = (int)v;
    }
    /* the PIDs are checked before any screen is drawn */
    if (npids && !gather_pids(&set, pids, npids, true)) status = FS_EXIT_BAD_INPUT;
    if (!npids) gather_all(&set);
    if (once || !isatty(STDOUT_FILENO)) {
        if (!npids && !set.n) {
            fprintf(stderr, "fsdpshim top: no process of this user runs the shim with a "
                            "statistics page\n");
            status = FS_EXIT_BAD_INPUT;
        } else if (set.n) {
            draw(stdout, &set, delay, false);
        }
    } else if (!status) {
        run_screen(&set, pids, npids, delay);
    }
    free(set.v);
    free(pids);
    return status;
}
