/* nccl_comm.c - communicator set-up and tear-down, and what we know of each
 * communicator (rank, size, device).
 *
 * The device tells the rest of the NCCL glue whose streams and whose
 * rate-limiter queue a call belongs to (with ncclCommInitAll one thread
 * drives several devices, so the current device says nothing); rank and size
 * describe the call in traces. They are asked of the real NCCL once per
 * communicator: eagerly when a blocking initialisation returns, lazily on
 * first use otherwise (a non-blocking communicator, or one created inside a
 * group, is not ready when its init call returns).
 *
 * A handful of communicators live at a time, so the table is an array under
 * a read-write lock, fronted by a one-entry cache per thread; the cache
 * entry carries the table's generation, bumped whenever a communicator is
 * forgotten, because NCCL may hand the same address to a new communicator. */
#include "../live_stats.h"
#include "../core/lifetime.h"
#include "nccl_internal.h"
#include "../core/trace_glue.h"

#include <pthread.h>
#include <stdlib.h>

struct comm_entry {
    ncclComm_t comm;
    fs_nccl_comm_info info;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct comm_entry *table;
static size_t table_len, table_cap;
static atomic_uint table_generation;

static FS_TLS struct {
    ncclComm_t comm;
    unsigned generation;
    fs_nccl_comm_info info;
} last_comm;

static bool table_find(ncclComm_t comm, fs_nccl_comm_info *out)
{
    for (size_t i = 0; i < table_len; i++) {
        if (table[i].comm == comm) {
            *out = table[i].info;
            return true;
        }
    }
    return false;
}

/* Asks the real NCCL; false when any answer is missing. */
static bool query_real(ncclComm_t comm, fs_nccl_comm_info *out)
{
    __typeof__(&ncclCommUserRank) user_rank = FS_NCCL_REAL(ncclCommUserRank);
    __typeof__(&ncclCommCount) count = FS_NCCL_REAL(ncclCommCount);
    __typeof__(&ncclCommCuDevice) cu_device = FS_NCCL_REAL(ncclCommCuDevice);
    return user_rank && count && cu_device && user_rank(comm, &out->rank) == ncclSuccess &&
           count(comm, &out->nranks) == ncclSuccess && cu_device(comm, &out->device) == ncclSuccess;
}

bool fs_nccl_comm_info_get(ncclComm_t comm, fs_nccl_comm_info *out)
{
    unsigned generation = atomic_load_explicit(&table_generation, memory_order_acquire);
    if (comm && last_comm.comm == comm && last_comm.generation == generation) {
        *out = last_comm.info;
        return true;
    }
    if (!comm) return false;

    pthread_rwlock_rdlock(&table_lock);
    bool found = table_find(comm, out);
    pthread_rwlock_unlock(&table_lock);
    if (!found) {
        fs_nccl_comm_info info;
        if (!query_real(comm, &info)) return false;
        pthread_rwlock_wrlock(&table_lock);
        found = table_find(comm, out);
        if (!found && table_len == table_cap) {
            size_t cap = table_cap ? table_cap * 2 : 8;
            struct comm_entry *grown = realloc(table, cap * sizeof(*grown));
            if (grown) {
                table = grown;
                table_cap = cap;
            }
        }
        if (!found && table_len < table_cap) {
            table[table_len++] = (struct comm_entry){comm, info};
            fs_log(FS_LOG_DEBUG, "nccl: communicator %p is rank %d of %d on device %d",
                   (void *)comm, info.rank, info.nranks, info.device);
        }
        pthread_rwlock_unlock(&table_lock);
        if (!found) {
            *out = info;
            fs_trace_set_rank(info.rank, info.nranks); /* the first one names the process */
            fs_live_set_rank(info.rank, info.nranks);
        }
    }
    last_comm.comm = comm;
    last_comm.generation = generation;
    last_comm.info = *out;
    return true;
}

static void comm_forget(ncclComm_t comm)
{
    pthread_rwlock_wrlock(&table_lock);
    for (size_t i = 0; i < table_len; i++) {
        if (table[i].comm == comm) {
            table[i] = table[--table_len];
            break;
        }
    }
    atomic_fetch_add_explicit(&table_generation, 1, memory_order_acq_rel);
    pthread_rwlock_unlock(&table_lock);
}

/* A fork child has no communicator of its parent's (NCCL does not survive
 * fork), and another thread may have held the table's lock at the fork. */
static void atfork_child(void)
{
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    table_lock = fresh;
    free(table);
    table = NULL;
    table_len = table_cap = 0;
    atomic_fetch_add_explicit(&table_generation, 1, memory_order_acq_rel);
}

FS_LIFETIME(nccl_comms) = {.order = FS_ORDER_NCCL_COMMS, .fork_child = atfork_child};

/* Learns a communicator that an initialisation returned: only once it is
 * ready (ncclSuccess outside a group), else on first use. */
static void comm_learn(ncclResult_t result, ncclComm_t *comm)
{
    fs_nccl_comm_info info;
    if (result == ncclSuccess && comm && *comm && fs_nccl_group_depth() == 0)
        fs_nccl_comm_info_get(*comm, &info);
}

/* ---- entry points ----------------------------------------------------- */

/* Every entry point resolves the real one, passes straight through when
 * re-entered from inside the shim, else makes the call and keeps the books. */

FS_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    __typeof__(&ncclCommInitRank) real = FS_NCCL_REAL(ncclCommInitRank);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommInitRank");
    if (!fs_shim_enter()) return real(comm, nranks, commId, rank);
    ncclResult_t r = real(comm, nranks, commId, rank);
    comm_learn(r, comm);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t *config)
{
    __typeof__(&ncclCommInitRankConfig) real = FS_NCCL_REAL(ncclCommInitRankConfig);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommInitRankConfig");
    if (!fs_shim_enter()) return real(comm, nranks, commId, rank, config);
    ncclResult_t r = real(comm, nranks, commId, rank, config);
    comm_learn(r, comm);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                int nId, ncclUniqueId *commIds,
                                                ncclConfig_t *config)
{
    __typeof__(&ncclCommInitRankScalable) real = FS_NCCL_REAL(ncclCommInitRankScalable);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommInitRankScalable");
    if (!fs_shim_enter()) return real(newcomm, nranks, myrank, nId, commIds, config);
    ncclResult_t r = real(newcomm, nranks, myrank, nId, commIds, config);
    comm_learn(r, newcomm);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    __typeof__(&ncclCommInitAll) real = FS_NCCL_REAL(ncclCommInitAll);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommInitAll");
    if (!fs_shim_enter()) return real(comm, ndev, devlist);
    ncclResult_t r = real(comm, ndev, devlist);
    for (int i = 0; comm && i < ndev; i++)
        comm_learn(r, &comm[i]);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    __typeof__(&ncclCommSplit) real = FS_NCCL_REAL(ncclCommSplit);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommSplit");
    if (!fs_shim_enter()) return real(comm, color, key, newcomm, config);
    ncclResult_t r = real(comm, color, key, newcomm, config);
    comm_learn(r, newcomm);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                      ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    __typeof__(&ncclCommShrink) real = FS_NCCL_REAL(ncclCommShrink);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommShrink");
    if (!fs_shim_enter())
        return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    ncclResult_t r = real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    comm_learn(r, newcomm);
    fs_shim_leave();
    return r;
}

/* Forgotten before the real call: once NCCL has freed the communicator its
 * address may come back from another thread's init at any moment. The
 * registrations NCCL drops with it are unpinned after it. */
FS_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    __typeof__(&ncclCommDestroy) real = FS_NCCL_REAL(ncclCommDestroy);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommDestroy");
    if (!fs_shim_enter()) return real(comm);
    comm_forget(comm);
    ncclResult_t r = real(comm);
    if (r == ncclSuccess || r == ncclInProgress) fs_nccl_registrations_drop(comm);
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    __typeof__(&ncclCommAbort) real = FS_NCCL_REAL(ncclCommAbort);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclCommAbort");
    if (!fs_shim_enter()) return real(comm);
    comm_forget(comm);
    ncclResult_t r = real(comm);
    fs_nccl_registrations_drop(comm);
    fs_shim_leave();
    return r;
}
