/* api_device_stream.c - the thread's current stream is per device, as
 * PyTorch's is: fsdpshim_set_stream(s) sets it for s's own device, and a
 * stream of device 1 set while device 0 is current never makes cudaMalloc
 * allocate anywhere but on the current device. Built without the shim
 * (fsdpshim_loader.h) and run with it preloaded on two devices. */
#include "probe.h"

#include <fsdpshim/fsdpshim_loader.h>
#include <pthread.h>

static fsdpshim_api fs;

static void *current_stream(void)
{
    void *s = (void *)1;

    EXPECT(fs.get_stream(&s) == FSDPSHIM_OK);
    return s;
}

static int device_of(void *p)
{
    struct cudaPointerAttributes a;

    CHECK(cudaPointerGetAttributes(&a, p));
    EXPECT(a.type == cudaMemoryTypeDevice);
    return a.device;
}

static int64_t allocations(int device)
{
    int64_t v = -1;

    EXPECT(fs.stat("allocation.all.current", device, &v) == FSDPSHIM_OK);
    return v;
}

/* Another thread has current streams of its own. */
static void *other_thread(void *s1)
{
    CHECK(cudaSetDevice(1));
    EXPECT(current_stream() == NULL);
    EXPECT(fs.set_stream(s1) == FSDPSHIM_OK);
    EXPECT(current_stream() == s1);
    return NULL;
}

int main(void)
{
    cudaStream_t s0, s1;
    pthread_t t;
    void *p, *q;
    int n = 0;

    watchdog(30);
    require_device();
    CHECK(cudaGetDeviceCount(&n));
    if (n < 2) {
        fprintf(stderr, "skipped: needs two devices (FSDPSHIM_SIM_DEVICES=2)\n");
        return 77;
    }
    EXPECT(fsdpshim_load(&fs) == FSDPSHIM_OK);
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s0));
    EXPECT(fs.active() == FSDPSHIM_OK);

    /* a device-1 stream set on device 0: device 0 keeps the legacy stream */
    EXPECT(fs.set_stream(s1) == FSDPSHIM_OK);
    CHECK(cudaMalloc(&p, 1 << 20));
    EXPECT(device_of(p) == 0);
    EXPECT(allocations(0) == 1 && allocations(1) == 0);
    EXPECT(current_stream() == NULL);

    /* ... and is device 1's current stream */
    CHECK(cudaSetDevice(1));
    EXPECT(current_stream() == (void *)s1);
    CHECK(cudaMalloc(&q, 1 << 20));
    EXPECT(device_of(q) == 1);
    EXPECT(allocations(0) == 1 && allocations(1) == 1);

    /* a device-0 stream set on device 1 changes device 0 only */
    EXPECT(fs.set_stream(s0) == FSDPSHIM_OK);
    EXPECT(current_stream() == (void *)s1);
    CHECK(cudaSetDevice(0));
    EXPECT(current_stream() == (void *)s0);
    EXPECT(fs.set_stream(NULL) == FSDPSHIM_OK);
    EXPECT(current_stream() == NULL);
    CHECK(cudaSetDevice(1));
    EXPECT(current_stream() == (void *)s1);

    EXPECT(pthread_create(&t, NULL, other_thread, s1) == 0);
    EXPECT(pthread_join(t, NULL) == 0);
    CHECK(cudaSetDevice(0));
    EXPECT(current_stream() == NULL);

    CHECK(cudaFree(p));
    CHECK(cudaFree(q));
    CHECK(cudaStreamDestroy(s0));
    CHECK(cudaStreamDestroy(s1));
    printf("api_device_stream: ok\n");
    return 0;
}
