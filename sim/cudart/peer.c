/* peer.c - peer access between devices (cudaDeviceEnablePeerAccess and
 * cudaDeviceDisablePeerAccess): which device may address which peer's memory.
 *
 * Every simulated device lives in one host address space, so a peer's memory
 * is always reachable; what the sim keeps is the runtime's bookkeeping and
 * its errors. The GPU keeps peer mappings per context; the sim has no
 * context, so a mapping belongs to the (device, peer) pair and lasts until
 * either device is reset (cudaDeviceReset destroys the context that held it),
 * which the reset generations stamped at enable time detect. */
#include <pthread.h>

#include "sim.h"

#define SIM_MAX_DEVICES 64

struct peer_mapping {
    int enabled;
    uint64_t device_gen, peer_gen; /* reset generations when enabled */
};

static pthread_mutex_t peer_mu = PTHREAD_MUTEX_INITIALIZER;
static struct peer_mapping mappings[SIM_MAX_DEVICES][SIM_MAX_DEVICES];

static uint64_t reset_gen(struct sim_device *dev)
{
    return __atomic_load_n(&dev->reset_gen, __ATOMIC_ACQUIRE);
}

/* Under peer_mu. */
static int mapping_live(struct sim_device *dev, struct sim_device *peer)
{
    struct peer_mapping *m = &mappings[dev->ordinal][peer->ordinal];
    return m->enabled && m->device_gen == reset_gen(dev) && m->peer_gen == reset_gen(peer);
}

SIM_API cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned int flags)
{
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    struct sim_device *peer = sim_dev(peer_device);
    /* A device is not its own peer: cudaDeviceCanAccessPeer says 0. */
    if (!peer || peer == dev) return sim_record_error(cudaErrorInvalidDevice);
    if (flags != 0) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&peer_mu);
    if (mapping_live(dev, peer))
        err = cudaErrorPeerAccessAlreadyEnabled;
    else
        mappings[dev->ordinal][peer->ordinal] = (struct peer_mapping){
            .enabled = 1, .device_gen = reset_gen(dev), .peer_gen = reset_gen(peer)};
    pthread_mutex_unlock(&peer_mu);
    return err == cudaSuccess ? cudaSuccess : sim_record_error(err);
}
SIM_RT_ALIAS(cudaDeviceEnablePeerAccess);

SIM_API cudaError_t cudaDeviceDisablePeerAccess(int peer_device)
{
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    struct sim_device *peer = sim_dev(peer_device);
    if (!peer || peer == dev) return sim_record_error(cudaErrorInvalidDevice);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&peer_mu);
    if (mapping_live(dev, peer))
        mappings[dev->ordinal][peer->ordinal].enabled = 0;
    else
        err = cudaErrorPeerAccessNotEnabled;
    pthread_mutex_unlock(&peer_mu);
    return err == cudaSuccess ? cudaSuccess : sim_record_error(err);
}
SIM_RT_ALIAS(cudaDeviceDisablePeerAccess);
