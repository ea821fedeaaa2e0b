/* user_objects.c - the model of CUDA's user objects (sim.h): a reference
 * count and a destructor callback that runs once the count reaches zero, on
 * another thread than the releasing one (on the releasing one only when no
 * thread can be started). The runtime's entry points (cudart/userobject.c)
 * and the graphs that hold references (graph.c) both count through here.
 *
 * The runtime runs destructors on one shared internal thread; the sim starts
 * a detached thread per destruction and serialises them with a lock, so two
 * destructors still never run at once and nothing outlives a fork. Releasing
 * more references than are held, or using a handle whose object is gone, is
 * undefined in the runtime; the sim keeps the live objects in a list and
 * refuses both with cudaErrorInvalidValue. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "sim.h"

struct CUuserObject_st {
    struct CUuserObject_st *next; /* in live_objects */
    unsigned refcount;            /* under objects_mu */
    cudaHostFn_t destroy;
    void *ptr;
};

static pthread_mutex_t objects_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUuserObject_st *live_objects;
/* Held while a destructor runs: one at a time, as on the runtime's thread. */
static pthread_mutex_t destructor_mu = PTHREAD_MUTEX_INITIALIZER;

static void *run_destructor(void *arg)
{
    struct CUuserObject_st *obj = arg;
    pthread_mutex_lock(&destructor_mu);
    obj->destroy(obj->ptr);
    pthread_mutex_unlock(&destructor_mu);
    free(obj);
    return NULL;
}

static void start_destructor(struct CUuserObject_st *dead)
{
    pthread_t t;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (rc == 0) rc = pthread_create(&t, &attr, run_destructor, dead);
        pthread_attr_destroy(&attr);
    }
    /* With no thread to be had the destructor would never run: run it here
     * rather than leak what it frees. */
    if (rc != 0) run_destructor(dead);
}

/* Under objects_mu; NULL when obj is not a live object. */
static struct CUuserObject_st **find_live(cudaUserObject_t obj)
{
    for (struct CUuserObject_st **p = &live_objects; *p; p = &(*p)->next)
        if (*p == obj) return p;
    return NULL;
}

cudaError_t sim_user_object_create(cudaUserObject_t *out, void *ptr, cudaHostFn_t destroy,
                                   unsigned refcount)
{
    struct CUuserObject_st *obj = malloc(sizeof *obj);
    if (!obj) return cudaErrorMemoryAllocation;
    *obj = (struct CUuserObject_st){.refcount = refcount, .destroy = destroy, .ptr = ptr};
    pthread_mutex_lock(&objects_mu);
    obj->next = live_objects;
    live_objects = obj;
    pthread_mutex_unlock(&objects_mu);
    *out = obj;
    return cudaSuccess;
}

cudaError_t sim_user_object_retain(cudaUserObject_t object, unsigned count)
{
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&objects_mu);
    struct CUuserObject_st **link = find_live(object);
    if (!link || (*link)->refcount > UINT_MAX - count)
        err = cudaErrorInvalidValue;
    else
        (*link)->refcount += count;
    pthread_mutex_unlock(&objects_mu);
    return err;
}

cudaError_t sim_user_object_release(cudaUserObject_t object, unsigned count)
{
    cudaError_t err = cudaSuccess;
    struct CUuserObject_st *dead = NULL;
    pthread_mutex_lock(&objects_mu);
    struct CUuserObject_st **link = find_live(object);
    if (!link || (*link)->refcount < count) {
        err = cudaErrorInvalidValue;
    } else if (((*link)->refcount -= count) == 0) {
        dead = *link;
        *link = dead->next;
    }
    pthread_mutex_unlock(&objects_mu);
    if (dead) start_destructor(dead);
    return err;
}
