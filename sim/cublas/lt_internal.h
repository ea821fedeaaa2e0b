/* lt_internal.h - the simulated cuBLASLt's descriptors, shared by
 * lt_desc.c (their create/destroy and attributes) and lt_matmul.c (which
 * reads them).
 *
 * Every descriptor keeps its attributes in one slot per attribute of a
 * table that names each attribute's size, the size cuBLASLt checks
 * sizeInBytes against (cublasLt.h states each attribute's type). */
#ifndef SIM_LT_INTERNAL_H
#define SIM_LT_INTERNAL_H

#include <cublasLt.h>
#include <stddef.h>
#include <stdint.h>

/* Attributes cuBLAS 13.4 (the wheel's) added after the toolkit's 13.1
 * cublasLt.h; values and types from the 13.4 header. */
#define SIM_LT_MATMUL_DESC_ALPHA_BATCH_STRIDE            39 /* int64_t */
#define SIM_LT_MATMUL_DESC_BETA_BATCH_STRIDE             40 /* int64_t */
#define SIM_LT_MATMUL_PREF_GROUPED_AVERAGE_REDUCTION_DIM 13 /* uint32_t */
#define SIM_LT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_ROWS   14 /* uint32_t */
#define SIM_LT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_COLS   15 /* uint32_t */

#define SIM_LT_MAX_ATTRS 48 /* above every attribute number of the three kinds */

struct sim_lt_attrs {
    uint64_t value[SIM_LT_MAX_ATTRS]; /* each attribute's bytes, at the slot's start */
};

/* The three descriptors; their handles (cublasLtMatmulDesc_t, ...) point at
 * these. */
struct sim_lt_desc {
    struct sim_lt_attrs a;
};
struct sim_lt_layout {
    struct sim_lt_attrs a;
};
struct sim_lt_pref {
    struct sim_lt_attrs a;
};

/* 1 for CUBLAS_OP_N, _T or _C as a descriptor's TRANSA/TRANSB. */
static inline int sim_lt_op_ok(int64_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* "lt_desc.c" */

/* An attribute's value as a signed integer of its own size. */
int64_t sim_lt_desc_int(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr);
int64_t sim_lt_layout_int(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr);
uint64_t sim_lt_pref_max_workspace(cublasLtMatmulPreference_t pref);

#endif /* SIM_LT_INTERNAL_H */
