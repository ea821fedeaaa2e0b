/* userobject.c - user objects (cudaUserObjectCreate, cudaUserObjectRetain,
 * cudaUserObjectRelease): the runtime's checks of their arguments, over the
 * model's reference counts and destructors (core/user_objects.c). A graph
 * holds references of its own (cudaGraphRetainUserObject) and releases them
 * when it is destroyed. */
#include <limits.h>

#include "sim.h"

SIM_API cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr,
                                         cudaHostFn_t destroy, unsigned int initial_refcount,
                                         unsigned int flags)
{
    if (!object_out || !destroy || initial_refcount == 0 || initial_refcount > INT_MAX ||
        flags != cudaUserObjectNoDestructorSync)
        return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_user_object_create(object_out, ptr, destroy, initial_refcount);
    return err == cudaSuccess ? cudaSuccess : sim_record_error(err);
}

SIM_API cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count)
{
    if (count == 0 || count > INT_MAX) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_user_object_retain(object, count);
    return err == cudaSuccess ? cudaSuccess : sim_record_error(err);
}

SIM_API cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count)
{
    if (count == 0 || count > INT_MAX) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_user_object_release(object, count);
    return err == cudaSuccess ? cudaSuccess : sim_record_error(err);
}
