/* lt_desc.c - cuBLASLt's descriptors: matmul descriptors, matrix layouts and
 * matmul preferences, created with cuBLASLt's defaults, their attributes set
 * and read with the checks cuBLASLt documents: an unknown attribute, a NULL
 * buffer or a sizeInBytes other than the attribute's own size is
 * CUBLAS_STATUS_INVALID_VALUE; a get with sizeInBytes 0 only reports the
 * size in *sizeWritten. */
#include "lt_internal.h"

#include <stdlib.h>
#include <string.h>

/* Each attribute's size by number, 0 where the number names none. */
static const uint8_t desc_sizes[SIM_LT_MAX_ATTRS] = {
    [CUBLASLT_MATMUL_DESC_COMPUTE_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_SCALE_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_POINTER_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_TRANSA] = 4,
    [CUBLASLT_MATMUL_DESC_TRANSB] = 4,
    [CUBLASLT_MATMUL_DESC_TRANSC] = 4,
    [CUBLASLT_MATMUL_DESC_FILL_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_EPILOGUE] = 4,
    [CUBLASLT_MATMUL_DESC_BIAS_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE] = 8,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD] = 8,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE] = 8,
    [CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE] = 8,
    [CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET] = 4,
    [CUBLASLT_MATMUL_DESC_A_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_B_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_C_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_D_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_AMAX_D_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_FAST_ACCUM] = 1,
    [CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_A_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_B_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_C_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_D_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER] = sizeof(void *),
    [CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR] = sizeof(cublasLtEmulationDesc_t),
    [SIM_LT_MATMUL_DESC_ALPHA_BATCH_STRIDE] = 8,
    [SIM_LT_MATMUL_DESC_BETA_BATCH_STRIDE] = 8,
};

static const uint8_t layout_sizes[SIM_LT_MAX_ATTRS] = {
    [CUBLASLT_MATRIX_LAYOUT_TYPE] = 4,
    [CUBLASLT_MATRIX_LAYOUT_ORDER] = 4,
    [CUBLASLT_MATRIX_LAYOUT_ROWS] = 8,
    [CUBLASLT_MATRIX_LAYOUT_COLS] = 8,
    [CUBLASLT_MATRIX_LAYOUT_LD] = 8,
    [CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT] = 4,
    [CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET] = 8,
    [CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET] = 8,
    [CUBLASLT_MATRIX_LAYOUT_BATCH_MODE] = 4,
};

static const uint8_t pref_sizes[SIM_LT_MAX_ATTRS] = {
    [CUBLASLT_MATMUL_PREF_SEARCH_MODE] = 4,
    [CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES] = 8,
    [CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT] = sizeof(float),
    [CUBLASLT_MATMUL_PREF_IMPL_MASK] = 8,
    [SIM_LT_MATMUL_PREF_GROUPED_AVERAGE_REDUCTION_DIM] = 4,
    [SIM_LT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_ROWS] = 4,
    [SIM_LT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_COLS] = 4,
};

static size_t attr_size(const uint8_t *sizes, int attr)
{
    return attr >= 0 && attr < SIM_LT_MAX_ATTRS ? sizes[attr] : 0;
}

static void put(struct sim_lt_attrs *a, int attr, const void *buf, size_t size)
{
    memset(&a->value[attr], 0, sizeof(a->value[attr]));
    memcpy(&a->value[attr], buf, size);
}

static cublasStatus_t attr_set(struct sim_lt_attrs *a, const uint8_t *sizes, int attr,
                               const void *buf, size_t sizeInBytes)
{
    size_t size = attr_size(sizes, attr);
    if (!a || !size || !buf || sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
    put(a, attr, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t attr_get(const struct sim_lt_attrs *a, const uint8_t *sizes, int attr,
                               void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
    size_t size = attr_size(sizes, attr);
    if (!a || !size) return CUBLAS_STATUS_INVALID_VALUE;
    if (sizeInBytes == 0) {
        if (!sizeWritten) return CUBLAS_STATUS_INVALID_VALUE;
        *sizeWritten = size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &a->value[attr], size);
    if (sizeWritten) *sizeWritten = size;
    return CUBLAS_STATUS_SUCCESS;
}

/* The value of a signed attribute of 1, 4 or 8 bytes. */
static int64_t attr_int(const struct sim_lt_attrs *a, const uint8_t *sizes, int attr)
{
    switch (attr_size(sizes, attr)) {
    case 1: {
        int8_t v;
        memcpy(&v, &a->value[attr], 1);
        return v;
    }
    case 4: {
        int32_t v;
        memcpy(&v, &a->value[attr], 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, &a->value[attr], 8);
        return v;
    }
    }
}

static void put_i32(struct sim_lt_attrs *a, int attr, int32_t v)
{
    put(a, attr, &v, sizeof(v));
}

static void put_u64(struct sim_lt_attrs *a, int attr, uint64_t v)
{
    put(a, attr, &v, sizeof(v));
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    struct sim_lt_desc *d = calloc(1, sizeof(*d));
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_N);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_FULL);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
    put_i32(&d->a, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1);
    *matmulDesc = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    free(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes)
{
    struct sim_lt_desc *d = (struct sim_lt_desc *)matmulDesc;
    return attr_set(d ? &d->a : NULL, desc_sizes, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t sizeInBytes, size_t *sizeWritten)
{
    struct sim_lt_desc *d = (struct sim_lt_desc *)matmulDesc;
    return attr_get(d ? &d->a : NULL, desc_sizes, attr, buf, sizeInBytes, sizeWritten);
}

int64_t sim_lt_desc_int(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr)
{
    return attr_int(&((struct sim_lt_desc *)desc)->a, desc_sizes, attr);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    struct sim_lt_layout *l = calloc(1, sizeof(*l));
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    put_i32(&l->a, CUBLASLT_MATRIX_LAYOUT_TYPE, type);
    put_i32(&l->a, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
    put_u64(&l->a, CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    put_u64(&l->a, CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    put_u64(&l->a, CUBLASLT_MATRIX_LAYOUT_LD, (uint64_t)ld);
    put_i32(&l->a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    *matLayout = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    free(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    struct sim_lt_layout *l = (struct sim_lt_layout *)matLayout;
    return attr_set(l ? &l->a : NULL, layout_sizes, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void *buf,
                                                size_t sizeInBytes, size_t *sizeWritten)
{
    struct sim_lt_layout *l = (struct sim_lt_layout *)matLayout;
    return attr_get(l ? &l->a : NULL, layout_sizes, attr, buf, sizeInBytes, sizeWritten);
}

int64_t sim_lt_layout_int(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr)
{
    return attr_int(&((struct sim_lt_layout *)layout)->a, layout_sizes, attr);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    struct sim_lt_pref *p = calloc(1, sizeof(*p));
    if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
    uint32_t all_schemes = CUBLASLT_REDUCTION_SCHEME_MASK, align = 256;
    put(&p->a, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &all_schemes, 4);
    put(&p->a, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, 4);
    put(&p->a, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, 4);
    put(&p->a, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, 4);
    put(&p->a, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, 4);
    put_u64(&p->a, CUBLASLT_MATMUL_PREF_IMPL_MASK, UINT64_MAX);
    *pref = (cublasLtMatmulPreference_t)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    struct sim_lt_pref *p = (struct sim_lt_pref *)pref;
    return attr_set(p ? &p->a : NULL, pref_sizes, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    void *buf, size_t sizeInBytes,
                                                    size_t *sizeWritten)
{
    struct sim_lt_pref *p = (struct sim_lt_pref *)pref;
    return attr_get(p ? &p->a : NULL, pref_sizes, attr, buf, sizeInBytes, sizeWritten);
}

uint64_t sim_lt_pref_max_workspace(cublasLtMatmulPreference_t pref)
{
    return (uint64_t)attr_int(&((struct sim_lt_pref *)pref)->a, pref_sizes,
                              CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
}
