/* traced.h - the runtime's CUPTI-traced entry points, as one expression
 * (cudart-private; the driver's twin is SIM_CU_TRACED in
 * ../cuda/driver_internal.h). */
#ifndef SIM_CUDART_TRACED_H
#define SIM_CUDART_TRACED_H

#include <cupti.h> /* the callback ids and params structs */

#include "sim.h"

/* An entry point as CUPTI sees it (sim.h, ../core/api_callback.c): the
 * params struct of name at CUPTI version ver (name##_##ver##_params)
 * filled with the arguments (...), the callbacks on entry and exit around
 * `work`, and work's result. The callback id and the name the subscriber
 * sees are name's own. */
#define SIM_RT_TRACED(name, ver, work, ...)                                                        \
    __extension__({                                                                                \
        name##_##ver##_params params_ = {__VA_ARGS__};                                             \
        cudaError_t ret; /* SIM_API_CALL's .ret designator wants this name */                      \
        SIM_API_CALL(2, CUPTI_RUNTIME_TRACE_CBID_##name##_##ver, #name, &params_, ret, (work));    \
        ret;                                                                                       \
    })

#endif /* SIM_CUDART_TRACED_H */
