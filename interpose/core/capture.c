/* capture.c - which streams are being captured into CUDA graphs.
 *
 * While a stream is captured the shim must not record or query events on it
 * (that would invalidate the capture), allocations on it go to the real
 * runtime (they become graph memory nodes), and while a capture in global
 * mode is under way anywhere, the shim's own calls run in relaxed mode. The
 * interposed capture calls keep this list; its count is read without a lock
 * so that the common case (no capture at all) costs one load. */
#include "devices.h"
#include "lifetime.h"

#include <pthread.h>

#define MAX_CAPTURES 256

static struct {
    fs_stream_t key;
    enum cudaStreamCaptureMode mode;
} captures[MAX_CAPTURES];
static unsigned n_captures, n_global;
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

unsigned fs_capture_active(void)
{
    return __atomic_load_n(&n_captures, __ATOMIC_ACQUIRE);
}

bool fs_capture_global_underway(void)
{
    return __atomic_load_n(&n_global, __ATOMIC_ACQUIRE) > 0;
}

bool fs_capture_key_capturing(fs_stream_t key)
{
    bool found = false;

    pthread_mutex_lock(&capture_lock);
    for (unsigned i = 0; i < n_captures && !found; i++)
        found = captures[i].key == key;
    pthread_mutex_unlock(&capture_lock);
    return found;
}

void fs_capture_begin(fs_stream_t key, enum cudaStreamCaptureMode mode)
{
    pthread_mutex_lock(&capture_lock);
    if (n_captures < MAX_CAPTURES) {
        captures[n_captures].key = key;
        captures[n_captures].mode = mode;
        __atomic_store_n(&n_captures, n_captures + 1, __ATOMIC_RELEASE);
        if (mode == cudaStreamCaptureModeGlobal) __atomic_add_fetch(&n_global, 1, __ATOMIC_ACQ_REL);
    } else {
        fs_log(FS_LOG_WARN, "more than %d concurrent graph captures; not tracked", MAX_CAPTURES);
    }
    pthread_mutex_unlock(&capture_lock);
}

void fs_capture_end(fs_stream_t key)
{
    pthread_mutex_lock(&capture_lock);
    for (unsigned i = 0; i < n_captures; i++) {
        if (captures[i].key != key) continue;
        if (captures[i].mode == cudaStreamCaptureModeGlobal)
            __atomic_sub_fetch(&n_global, 1, __ATOMIC_ACQ_REL);
        captures[i] = captures[n_captures - 1];
        __atomic_store_n(&n_captures, n_captures - 1, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&capture_lock);
}

void fs_capture_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

    capture_lock = fresh;
    n_captures = 0;
    n_global = 0;
}

FS_LIFETIME(capture) = {.order = FS_ORDER_CAPTURE, .fork_child = fs_capture_reset};

bool fs_shim_stream_capturing(cudaStream_t stream, bool per_thread)
{
    if (fs_likely(fs_capture_active() == 0)) return false;
    if (stream == cudaStreamLegacy || (stream == NULL && !per_thread))
        return false; /* the legacy stream cannot be captured */
    return fs_capture_key_capturing(fs_shim_stream_key(stream, per_thread, NULL));
}
