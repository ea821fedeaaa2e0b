/* blas_internal.h - what the simulated libcublas.so.13 and libcublasLt.so.13
 * share: the handle both libraries accept, and the one way either of them
 * turns a validated BLAS call into device work.
 *
 * PyTorch passes the handle from cublasCreate to cublasLtMatmul (it casts a
 * cublasHandle_t to cublasLtHandle_t instead of calling cublasLtCreate), so
 * both libraries use one handle layout, told apart from garbage by a magic
 * number. blas_core.c is compiled into each library; its names stay local
 * to each (the version scripts export only the cuBLAS entry points).
 *
 * A GEMM, or any other BLAS operation, is device work on the handle's
 * stream, ordered like a copy, that computes nothing (docs/sim.md, "cuBLAS
 * and cuBLASLt"). */
#ifndef SIM_BLAS_INTERNAL_H
#define SIM_BLAS_INTERNAL_H

#include <cublas_api.h>
#include <stddef.h>
#include <stdint.h>

/* The cuBLAS release these libraries answer for: the one PyTorch 2.15.0's
 * wheel ships (nvidia-cublas 13.4.1.3). The toolkit's headers are 13.1. */
#define SIM_BLAS_VER_MAJOR 13
#define SIM_BLAS_VER_MINOR 4
#define SIM_BLAS_VER_PATCH 1
/* CUBLAS_VERSION's formula: major * 10000 + minor * 100 + patch. */
#define SIM_BLAS_VERSION                                                                           \
    (SIM_BLAS_VER_MAJOR * 10000 + SIM_BLAS_VER_MINOR * 100 + SIM_BLAS_VER_PATCH)

#define SIM_BLAS_MAGIC 0x73696d626c617321ull /* "simblas!" */

/* cublasContext is the toolkit's opaque name for the handle's target. */
struct cublasContext {
    uint64_t magic;
    int device; /* current device at creation */
    cudaStream_t stream;
    cublasPointerMode_t pointer_mode;
    cublasMath_t math_mode;
    cublasAtomicsMode_t atomics_mode;
    int sm_count_target;
    void *workspace; /* cublasSetWorkspace's buffer, NULL for the default */
    size_t workspace_size;
};

/* "blas_core.c" */

/* A new handle for the current device, or a status: NOT_INITIALIZED when
 * there is no device (cublasCreate on a machine without a GPU),
 * ALLOC_FAILED when out of host memory. */
cublasStatus_t sim_blas_handle_new(struct cublasContext **out);
/* Waits for the handle's device (cublasDestroy's documented implicit
 * cudaDeviceSynchronize), then frees it. */
void sim_blas_handle_free(struct cublasContext *h);
/* 1 for a handle sim_blas_handle_new made and that is not yet freed. */
int sim_blas_handle_ok(const struct cublasContext *h);

/* Enqueues one piece of device work that computes nothing on `stream`:
 * SUCCESS, or EXECUTION_FAILED ("the function failed to launch on the
 * GPU") for a destroyed or unknown stream. */
cublasStatus_t sim_blas_launch(cudaStream_t stream);

/* Host pointer mode results (dot, nrm2, amax, ...): cuBLAS returns only once
 * the result is on the host, so the call waits for its stream. */
cublasStatus_t sim_blas_wait(cudaStream_t stream);

/* "args.c" */

/* The argument checks that cuBLAS documents for its routines: each is 1 for
 * a value the routine accepts. */
int sim_blas_op_ok(cublasOperation_t op);
int sim_blas_fill_ok(cublasFillMode_t uplo); /* lower or upper */
int sim_blas_side_ok(cublasSideMode_t side);
int sim_blas_diag_ok(cublasDiagType_t diag);
/* ld >= max(1, rows): the leading dimension of a rows-row matrix. */
int sim_blas_ld_ok(int64_t ld, int64_t rows);

/* The end of every BLAS entry point, once its arguments are checked: no
 * work at all when `empty` (cuBLAS returns at once for an empty problem,
 * without touching the stream), else one launch on the handle's stream. */
cublasStatus_t sim_blas_run(const struct cublasContext *h, int empty);

/* "status.c" */

/* The library's status strings, shared by cublasGetStatus{Name,String} and
 * cublasLtGetStatus{Name,String}, worded as NVIDIA's libraries word them. */
const char *sim_blas_status_name(cublasStatus_t status);
const char *sim_blas_status_string(cublasStatus_t status);

/* cublasGetProperty / cublasLtGetProperty. */
cublasStatus_t sim_blas_property(libraryPropertyType type, int *value);

#endif /* SIM_BLAS_INTERNAL_H */
