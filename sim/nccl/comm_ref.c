/* comm_ref.c - a communicator's references in the simulated NCCL: its
 * handle and every piece of queued device work hold one, and the last to
 * let go frees it, its segment and its registrations. Apart from comm.c
 * because the device work (transport.c) lets go of it too, and comm.c
 * queues that work (through group.c): the references stand below both. */
#include "nccl_internal.h"

#include <stdlib.h>

void sim_comm_ref(struct ncclComm *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void sim_comm_unref(struct ncclComm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    sim_clique_close(&c->clq);
    sim_buffers_release(c);
    pthread_mutex_destroy(&c->lock);
    c->magic = 0;
    free(c);
}
