/* errors.c - the per-thread last error and the names and messages of every
 * status code.
 *
 * The runtime's rules: every failing call records its error as the thread's
 * last error, except cudaErrorNotReady (a query's "not yet", not an error);
 * cudaGetLastError returns it and resets it to cudaSuccess;
 * cudaPeekAtLastError returns it and leaves it. */
#include <stddef.h>

#include "error_table.h"
#include "sim.h"

static __thread cudaError_t last_error = cudaSuccess;

cudaError_t sim_record_error(cudaError_t err)
{
    if (err != cudaSuccess && err != cudaErrorNotReady) last_error = err;
    return err;
}

cudaError_t sim_err_hold(void)
{
    return last_error;
}

void sim_err_put(cudaError_t held)
{
    last_error = held;
}

static const struct sim_error_row *find(const struct sim_error_row *rows, size_t n, int code)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].code == code) return &rows[i];
    return NULL;
}

#define RUNTIME_ROWS (sizeof sim_runtime_errors / sizeof sim_runtime_errors[0])
#define DRIVER_ROWS  (sizeof sim_driver_errors / sizeof sim_driver_errors[0])

const char *sim_error_name(cudaError_t err)
{
    const struct sim_error_row *r = find(sim_runtime_errors, RUNTIME_ROWS, err);
    return r ? r->name : NULL;
}

const char *sim_error_text(cudaError_t err)
{
    const struct sim_error_row *r = find(sim_runtime_errors, RUNTIME_ROWS, err);
    return r ? r->text : NULL;
}

/* Driver API (reached through cudaGetDriverEntryPoint): an unknown code is
 * CUDA_ERROR_INVALID_VALUE with *str set to NULL, as cuda.h documents. */
CUresult sim_cu_get_error_name(CUresult err, const char **str)
{
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const struct sim_error_row *r = find(sim_driver_errors, DRIVER_ROWS, err);
    *str = r ? r->name : NULL;
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_cu_get_error_string(CUresult err, const char **str)
{
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const struct sim_error_row *r = find(sim_driver_errors, DRIVER_ROWS, err);
    *str = r ? r->text : NULL;
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
