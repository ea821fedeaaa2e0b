/* clique.c - the shared-memory segment a communicator's ranks meet in.
 *
 * Every communicator, whether its ranks are threads of one process or
 * separate processes, maps one POSIX shared-memory segment named from its
 * unique id. The segment holds a header, one slot per rank (pid, device,
 * barrier counters), a staging area per rank through which collectives move
 * data, and a mailbox per ordered pair of ranks for send/recv.
 *
 * Every wait on a peer goes through sim_clique_wait: it sleeps on a futex
 * "bell" that any state change rings, and while waiting it checks that the
 * peers it depends on are alive and have not failed, the local abort flag
 * and a timeout. Real NCCL would hang on a dead peer; the simulation fails
 * with an error instead, by design. */
#include "nccl_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SIM_PAGE 4096
/* How often a waiter looks at its peers' processes. */
#define SIM_LIVENESS_NS (50ull * 1000 * 1000)

struct sim_clique_hdr {
    _Atomic uint32_t bell; /* futex word: bumped on every state change */
    _Atomic int nranks;
    _Atomic int joined;
};

static size_t sim_round(size_t n)
{
    return (n + SIM_PAGE - 1) & ~(size_t)(SIM_PAGE - 1);
}

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_once_t sim_timeout_once = PTHREAD_ONCE_INIT;
static uint64_t sim_timeout_value;

static void sim_timeout_init(void)
{
    const char *s = getenv("FSDPSHIM_SIM_NCCL_TIMEOUT");
    double sec = 300.0;
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (end != s && v > 0) sec = v;
    }
    sim_timeout_value = (uint64_t)(sec * 1e9);
}

/* FSDPSHIM_SIM_NCCL_TIMEOUT (seconds, default 300): how long any wait on
 * peers may last before it fails. */
static uint64_t sim_timeout_ns(void)
{
    pthread_once(&sim_timeout_once, sim_timeout_init);
    return sim_timeout_value;
}

/* The segment's name: the unique id's random bytes in hex. */
static void sim_clique_name(const ncclUniqueId *id, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = (size_t)snprintf(out, outlen, "/fsdpshim-nccl-");
    for (int i = 0; i < 20 && n + 2 < outlen; i++) {
        unsigned char b = (unsigned char)id->internal[i];
        out[n++] = hex[b >> 4];
        out[n++] = hex[b & 15];
    }
    out[n] = '\0';
}

/* This process's joined cliques, for the exit handler (sim_cliques_at_exit). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_clique *open_cliques;

static void sim_clique_register(struct sim_clique *c)
{
    pthread_mutex_lock(&open_lock);
    c->next_open = open_cliques;
    open_cliques = c;
    pthread_mutex_unlock(&open_lock);
}

static void sim_clique_unregister(struct sim_clique *c)
{
    pthread_mutex_lock(&open_lock);
    for (struct sim_clique **p = &open_cliques; *p; p = &(*p)->next_open)
        if (*p == c) {
            *p = c->next_open;
            break;
        }
    pthread_mutex_unlock(&open_lock);
}

ncclResult_t sim_clique_open(struct sim_clique *c, const ncclUniqueId *id, int nranks, int rank)
{
    memset(c, 0, sizeof(*c));
    c->nranks = nranks;
    c->rank = rank;
    sim_clique_name(id, c->name, sizeof(c->name));

    size_t n = (size_t)nranks;
    size_t off_slots = sim_round(sizeof(struct sim_clique_hdr));
    size_t off_stage = off_slots + sim_round(n * sizeof(struct sim_slot));
    size_t off_mbox = off_stage + n * SIM_STAGE_BYTES;
    size_t off_mdata = off_mbox + sim_round(n * n * sizeof(struct sim_mbox));
    c->size = off_mdata + n * n * SIM_MBOX_BYTES;

    int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        sim_set_last_error("sim NCCL: shm_open(%s): %s", c->name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_size != 0 && (size_t)st.st_size != c->size)) {
        close(fd);
        sim_set_last_error("sim NCCL: ranks disagree on nranks (%d here)", nranks);
        return ncclInvalidArgument;
    }
    /* Sparse: only pages that are used are backed. Every rank sets the same size. */
    if (st.st_size == 0 && ftruncate(fd, (off_t)c->size) != 0) {
        close(fd);
        sim_set_last_error("sim NCCL: ftruncate(%s): %s", c->name, strerror(errno));
        return ncclSystemError;
    }
    c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->base == MAP_FAILED) {
        c->base = NULL;
        sim_set_last_error("sim NCCL: mmap(%s): %s", c->name, strerror(errno));
        return ncclSystemError;
    }
    char *b = c->base;
    c->hdr = (struct sim_clique_hdr *)b;
    c->slots = (struct sim_slot *)(b + off_slots);
    c->staging = b + off_stage;
    c->mbox = (struct sim_mbox *)(b + off_mbox);
    c->mdata = b + off_mdata;

    int zero = 0;
    if (!atomic_compare_exchange_strong(&c->hdr->nranks, &zero, nranks) && zero != nranks) {
        sim_set_last_error("sim NCCL: ranks disagree on nranks (%d here, %d there)", nranks, zero);
        sim_clique_close(c);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

ncclResult_t sim_clique_join(struct sim_clique *c, int device)
{
    struct sim_slot *s = &c->slots[c->rank];
    int zero = 0;
    s->pid = getpid();
    s->device = device;
    if (!atomic_compare_exchange_strong(&s->present, &zero, 1)) {
        sim_set_last_error("sim NCCL: rank %d joined twice", c->rank);
        return ncclInvalidUsage;
    }
    atomic_fetch_add(&c->hdr->joined, 1);
    sim_clique_register(c);
    sim_clique_ring(c);
    return ncclSuccess;
}

void sim_clique_ring(struct sim_clique *c)
{
    atomic_fetch_add(&c->hdr->bell, 1);
    syscall(SYS_futex, (uint32_t *)&c->hdr->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void sim_clique_fail(struct sim_clique *c)
{
    if (!c->base) return;
    atomic_store(&c->slots[c->rank].failed, 1);
    sim_clique_ring(c);
}

void sim_clique_unlink(struct sim_clique *c)
{
    if (c->name[0]) {
        shm_unlink(c->name);
        c->name[0] = '\0';
    }
}

/* A rank that leaves while it is a member says how (SIM_LEFT_*): a peer
 * still waiting on it fails at once, with that in its error. */
static void sim_clique_leave(struct sim_clique *c, int how)
{
    struct sim_slot *me = &c->slots[c->rank];
    int none = 0;

    /* a rank that failed or aborted stays that: its peers say so */
    if (!atomic_load(&me->present) || atomic_load(&me->failed)) return;
    atomic_compare_exchange_strong(&me->left, &none, how);
    sim_clique_ring(c);
}

void sim_clique_close(struct sim_clique *c)
{
    if (!c->base) return;
    sim_clique_unregister(c);
    sim_clique_leave(c, SIM_LEFT_DESTROYED);
    munmap(c->base, c->size);
    c->base = NULL;
}

/* At a normal exit (exit(), return from main) the process's ranks that are
 * still members leave as exited; a rank killed or crashed never gets here,
 * and stays one that died. */
__attribute__((destructor)) static void sim_cliques_at_exit(void)
{
    pthread_mutex_lock(&open_lock);
    /* a forked child (a data loader's worker) inherits the list and the
     * mappings but is no rank: only the rank's own process leaves */
    for (struct sim_clique *c = open_cliques; c; c = c->next_open)
        if (c->slots[c->rank].pid == getpid()) sim_clique_leave(c, SIM_LEFT_EXITED);
    pthread_mutex_unlock(&open_lock);
}

/* 1 if the peer's process is gone (or a zombie). */
static int sim_peer_dead(int pid)
{
    if (pid <= 0 || pid == getpid()) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    /* A child that died but was not yet reaped still answers kill(pid, 0). */
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Why peer r is gone, into why: it left the communicator (destroyed it, or
 * its process exited normally, while this rank still waits on it: the ranks
 * called different collectives), or its process died. */
static void sim_describe_gone(struct sim_clique *c, int r, char *why, size_t whylen)
{
    struct sim_slot *s = &c->slots[r];
    unsigned long long theirs = atomic_load(&s->colls),
                       mine = atomic_load(&c->slots[c->rank].colls);
    int left = atomic_load(&s->left);

    if (left)
        snprintf(why, whylen,
                 "peer rank %d (pid %d) %s after %llu collective%s while this rank, after %llu, "
                 "still waits on it: the ranks diverged (they did not call the same collectives)",
                 r, s->pid,
                 left == SIM_LEFT_EXITED ? "exited normally" : "destroyed its communicator", theirs,
                 theirs == 1 ? "" : "s", mine);
    else
        snprintf(why, whylen,
                 "peer rank %d (pid %d) died (killed or crashed) after %llu collective%s", r,
                 s->pid, theirs, theirs == 1 ? "" : "s");
}

/* Checks the peers a waiter depends on; returns SIM_WAIT_OK or why not. A
 * peer that failed usually failed because another died: then the dead one
 * is named, as the root cause. */
static enum sim_wait_rc sim_check_peers(struct sim_clique *c, int peer, int liveness, char *why,
                                        size_t whylen)
{
    int lo = peer < 0 ? 0 : peer, hi = peer < 0 ? c->nranks : peer + 1, failed = -1;
    for (int r = lo; r < hi && failed < 0; r++)
        if (r != c->rank && atomic_load(&c->slots[r].failed)) failed = r;
    if (failed >= 0 || liveness)
        for (int r = 0; r < c->nranks; r++) {
            struct sim_slot *s = &c->slots[r];
            /* one that failed or left before its process ended is named
             * for that, not as dead */
            if (r != c->rank && atomic_load(&s->present) && !atomic_load(&s->left) &&
                !atomic_load(&s->failed) && sim_peer_dead(s->pid)) {
                sim_describe_gone(c, r, why, whylen);
                return SIM_WAIT_PEER;
            }
        }
    /* one this rank waits on that left, or, when a peer failed, any that
     * left: the root cause */
    for (int r = failed >= 0 ? 0 : lo; r < (failed >= 0 ? c->nranks : hi); r++)
        if (r != c->rank && atomic_load(&c->slots[r].left)) {
            sim_describe_gone(c, r, why, whylen);
            return SIM_WAIT_PEER;
        }
    if (failed >= 0) {
        snprintf(why, whylen, "peer rank %d failed or aborted", failed);
        return SIM_WAIT_PEER;
    }
    return SIM_WAIT_OK;
}

enum sim_wait_rc sim_clique_wait(struct sim_clique *c, int (*ready)(void *), void *arg, int peer,
                                 char *why, size_t whylen)
{
    uint64_t start = sim_now_ns(), last_check = start, timeout = sim_timeout_ns();
    for (;;) {
        uint32_t bell = atomic_load(&c->hdr->bell);
        if (ready(arg)) return SIM_WAIT_OK;
        if (c->abort_flag && atomic_load(c->abort_flag)) {
            snprintf(why, whylen, "communicator aborted");
            return SIM_WAIT_ABORT;
        }
        uint64_t now = sim_now_ns();
        int liveness = now - last_check >= SIM_LIVENESS_NS;
        if (liveness) last_check = now;
        enum sim_wait_rc rc = sim_check_peers(c, peer, liveness, why, whylen);
        /* A peer may finish its part and exit between the two checks. */
        if (rc != SIM_WAIT_OK) return ready(arg) ? SIM_WAIT_OK : rc;
        if (now - start >= timeout) {
            snprintf(why, whylen,
                     "timed out after %.0f s waiting on %s (FSDPSHIM_SIM_NCCL_TIMEOUT)",
                     (double)timeout / 1e9, peer < 0 ? "peers" : "a peer");
            return SIM_WAIT_TIMEOUT;
        }
        /* Sleep until the bell rings, waking up now and then for the checks. */
        struct timespec ts = {0, 10 * 1000 * 1000};
        syscall(SYS_futex, (uint32_t *)&c->hdr->bell, FUTEX_WAIT, bell, &ts, NULL, 0);
    }
}

int sim_clique_poll(struct sim_clique *c, int (*ready)(void *), void *arg, uint64_t started,
                    char *why, size_t whylen)
{
    uint32_t bell = atomic_load(&c->hdr->bell);
    if (ready(arg)) return 1;
    if (c->abort_flag && atomic_load(c->abort_flag)) {
        snprintf(why, whylen, "communicator aborted");
        return -SIM_WAIT_ABORT;
    }
    if (sim_check_peers(c, -1, 1, why, whylen) != SIM_WAIT_OK)
        return ready(arg) ? 1 : -SIM_WAIT_PEER; /* a peer may finish its part and exit meanwhile */
    if (sim_now_ns() - started >= sim_timeout_ns()) {
        snprintf(why, whylen, "timed out after %.0f s waiting on peers (FSDPSHIM_SIM_NCCL_TIMEOUT)",
                 (double)sim_timeout_ns() / 1e9);
        return -SIM_WAIT_TIMEOUT;
    }
    struct timespec ts = {0, 2 * 1000 * 1000};
    syscall(SYS_futex, (uint32_t *)&c->hdr->bell, FUTEX_WAIT, bell, &ts, NULL, 0);
    return 0;
}

struct sim_tick_arg {
    struct sim_clique *c;
    uint64_t target;
    int host;
};

static int sim_ticks_reached(void *p)
{
    struct sim_tick_arg *a = p;
    for (int r = 0; r < a->c->nranks; r++) {
        struct sim_slot *s = &a->c->slots[r];
        uint64_t t = a->host ? atomic_load_explicit(&s->xtick, memory_order_acquire)
                             : atomic_load_explicit(&s->tick, memory_order_acquire);
        if (t < a->target) return 0;
    }
    return 1;
}

enum sim_wait_rc sim_clique_barrier(struct sim_clique *c, char *why, size_t whylen)
{
    struct sim_tick_arg a = {c, 0, 0};
    a.target = atomic_fetch_add_explicit(&c->slots[c->rank].tick, 1, memory_order_acq_rel) + 1;
    sim_clique_ring(c);
    enum sim_wait_rc rc = sim_clique_wait(c, sim_ticks_reached, &a, -1, why, whylen);
    if (rc == SIM_WAIT_TIMEOUT) {
        /* Name the first rank that never arrived: the one to look at. */
        for (int r = 0; r < c->nranks; r++)
            if (atomic_load(&c->slots[r].tick) < a.target) {
                size_t len = strlen(why);
                snprintf(why + len, whylen - len, "; rank %d never arrived", r);
                break;
            }
    }
    return rc;
}

uint64_t sim_clique_xpost(struct sim_clique *c, const int64_t mine[2])
{
    struct sim_slot *me = &c->slots[c->rank];
    uint64_t k = atomic_load(&me->xtick) + 1;
    /* A peer is at most one exchange ahead, so two payload buffers suffice. */
    memcpy(me->xchg[k & 1], mine, sizeof(me->xchg[0]));
    atomic_store_explicit(&me->xtick, k, memory_order_release);
    sim_clique_ring(c);
    return k;
}

int sim_clique_xpoll(struct sim_clique *c, uint64_t k, int64_t *out, uint64_t started, char *why,
                     size_t whylen)
{
    struct sim_tick_arg a = {c, k, 1};
    int rc = sim_clique_poll(c, sim_ticks_reached, &a, started, why, whylen);
    if (rc == 1)
        for (int r = 0; r < c->nranks; r++)
            memcpy(out + 2 * r, c->slots[r].xchg[k & 1], sizeof(c->slots[r].xchg[0]));
    return rc;
}

static int sim_all_joined(void *arg)
{
    struct sim_clique *c = arg;
    return atomic_load(&c->hdr->joined) == c->nranks;
}

int sim_clique_poll_joined(struct sim_clique *c, uint64_t started, char *why, size_t whylen)
{
    return sim_clique_poll(c, sim_all_joined, c, started, why, whylen);
}
