/* backend.c - the simulated cuDNN's backend (graph) API: descriptors as
 * typed attribute stores, their finalization, and the execution of a plan.
 *
 * Each descriptor keeps the attributes set on it, each with its attribute
 * type and elements; a get answers what was set, in the type it was set
 * with. A descriptor-valued attribute keeps a finalized copy of each
 * descriptor given (cuDNN copies them too: the caller may destroy its own),
 * and a get of one copies it into the caller's descriptors of that type.
 *
 * Finalize checks the attributes cuDNN requires of the descriptor types
 * that carry semantics here (tensor, operation graph, engine heuristics,
 * engine, engine config, execution plan, variant pack, knob choice) and
 * records their derived, read-only attributes: an operation graph has one
 * engine (global index 0); heuristics rank that engine as their one result;
 * an engine has no knobs and no numerical or behaviour notes; configs and
 * plans need no workspace, configs 48 KiB of shared memory; a plan
 * describes itself in JSON. Operation descriptors (pointwise, matmul, SDPA,
 * ...) keep what is set. The handle of an operation graph or a plan is
 * optional, as cuDNN 9 deprecated it: a plan runs on the handle
 * cudnnBackendExecute is given.
 *
 * cudnnBackendExecute checks that the variant pack gives a pointer for each
 * non-virtual tensor of the plan's graph, then runs the plan as one piece
 * of device work on the handle's stream that computes nothing. */
#include "dnn_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_BE_MAGIC 0x73696d6462656e64ull /* "simdbend" */

struct sim_be;

struct sim_be_attr {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t count;
    void *data; /* count elements; for descriptors, struct sim_be * copies */
};

struct sim_be {
    uint64_t magic;
    cudnnBackendDescriptorType_t type;
    bool finalized;
    int nattrs;
    struct sim_be_attr *attrs;
};

#define FAIL(st, why) sim_dnn_fail(st, __func__, why)
#define BAD(why)      FAIL(CUDNN_STATUS_BAD_PARAM, why)

static size_t type_size(cudnnBackendAttributeType_t type)
{
    switch (type) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return sizeof(void *);
    case CUDNN_TYPE_BOOLEAN:
        return sizeof(bool);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
        return 8;
    case CUDNN_TYPE_CHAR:
        return 1;
    case CUDNN_TYPE_FRACTION:
        return sizeof(cudnnFraction_t);
    default:
        /* the enumerations, INT32 and FLOAT */
        return type >= CUDNN_TYPE_HANDLE && type <= CUDNN_TYPE_OPERATIONGRAPH_MODE ? 4 : 0;
    }
}

static struct sim_be *be_of(cudnnBackendDescriptor_t d)
{
    struct sim_be *be = d;
    return be && be->magic == SIM_BE_MAGIC ? be : NULL;
}

static struct sim_be_attr *find(const struct sim_be *be, cudnnBackendAttributeName_t name)
{
    for (int i = 0; i < be->nattrs; i++)
        if (be->attrs[i].name == name) return &be->attrs[i];
    return NULL;
}

static void be_free(struct sim_be *be);

static void attr_clear(struct sim_be_attr *a)
{
    if (a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < a->count; i++)
            be_free(((struct sim_be **)a->data)[i]);
    free(a->data);
    a->data = NULL;
    a->count = 0;
}

static void be_clear(struct sim_be *be)
{
    for (int i = 0; i < be->nattrs; i++)
        attr_clear(&be->attrs[i]);
    free(be->attrs);
    be->attrs = NULL;
    be->nattrs = 0;
    be->finalized = false;
}

static void be_free(struct sim_be *be)
{
    if (!be) return;
    be_clear(be);
    be->magic = 0;
    free(be);
}

static struct sim_be *be_clone(const struct sim_be *src);

/* Stores `count` elements under `name`, replacing what was there; a
 * descriptor-valued attribute stores copies. 0, or -1 out of memory. */
static int store(struct sim_be *be, cudnnBackendAttributeName_t name,
                 cudnnBackendAttributeType_t type, int64_t count, const void *elements)
{
    size_t size = type_size(type);
    void *data = count ? calloc((size_t)count, size) : NULL;
    if (count && !data) return -1;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < count; i++) {
            struct sim_be *copy = be_clone(((struct sim_be *const *)elements)[i]);
            if (!copy) {
                for (int64_t j = 0; j < i; j++)
                    be_free(((struct sim_be **)data)[j]);
                free(data);
                return -1;
            }
            ((struct sim_be **)data)[i] = copy;
        }
    } else if (count) {
        memcpy(data, elements, (size_t)count * size);
    }
    struct sim_be_attr *a = find(be, name);
    if (!a) {
        struct sim_be_attr *grown = realloc(be->attrs, sizeof(*grown) * (size_t)(be->nattrs + 1));
        if (!grown) {
            struct sim_be_attr tmp = {name, type, count, data};
            attr_clear(&tmp);
            return -1;
        }
        be->attrs = grown;
        a = &be->attrs[be->nattrs++];
        a->count = 0;
        a->data = NULL;
        a->type = type;
    }
    attr_clear(a);
    a->name = name;
    a->type = type;
    a->count = count;
    a->data = data;
    return 0;
}

static struct sim_be *be_clone(const struct sim_be *src)
{
    struct sim_be *be = calloc(1, sizeof(*be));
    if (!be) return NULL;
    be->magic = SIM_BE_MAGIC;
    be->type = src->type;
    for (int i = 0; i < src->nattrs; i++) {
        const struct sim_be_attr *a = &src->attrs[i];
        if (store(be, a->name, a->type, a->count, a->data)) {
            be_free(be);
            return NULL;
        }
    }
    be->finalized = src->finalized;
    return be;
}

/* The first element of a one-element attribute of `type`, or NULL. */
static const void *one(const struct sim_be *be, cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type)
{
    const struct sim_be_attr *a = find(be, name);
    return a && a->type == type && a->count >= 1 ? a->data : NULL;
}

static const struct sim_be *one_desc(const struct sim_be *be, cudnnBackendAttributeName_t name,
                                     cudnnBackendDescriptorType_t type)
{
    const void *p = one(be, name, CUDNN_TYPE_BACKEND_DESCRIPTOR);
    const struct sim_be *d = p ? *(struct sim_be *const *)p : NULL;
    return d && d->type == type ? d : NULL;
}

/* Attribute types cuDNN fixes for the attributes given semantics here: a
 * set with another type is BAD_PARAM. */
static const struct {
    cudnnBackendDescriptorType_t desc;
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    bool read_only;
} sim_be_schema[] = {
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, false},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE,
     false},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
     CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, false},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_RESULTS,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
     true},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
     true},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
     true},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_LAYOUT_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
     true},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
     false},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
     true},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, CUDNN_TYPE_INT32,
     true},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
     false},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
     CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
     CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
     CUDNN_TYPE_CHAR, true},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
     false},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
     CUDNN_TYPE_VOID_PTR, false},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
     false},
    {CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
     false},
    {CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64,
     false},
};

static int schema(cudnnBackendDescriptorType_t desc, cudnnBackendAttributeName_t name)
{
    for (size_t i = 0; i < sizeof(sim_be_schema) / sizeof(sim_be_schema[0]); i++)
        if (sim_be_schema[i].desc == desc && sim_be_schema[i].name == name) return (int)i;
    return -1;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t *descriptor)
{
    if (!descriptor) return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "descriptor is NULL");
    if (descriptorType < CUDNN_BACKEND_POINTWISE_DESCRIPTOR ||
        descriptorType > CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR)
        return FAIL(CUDNN_STATUS_NOT_SUPPORTED, "unknown descriptor type");
    struct sim_be *be = calloc(1, sizeof(*be));
    if (!be) return FAIL(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of host memory");
    be->magic = SIM_BE_MAGIC;
    be->type = descriptorType;
    *descriptor = be;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    struct sim_be *be = be_of(descriptor);
    if (!be) return BAD("not a backend descriptor");
    be_free(be);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType,
                                       int64_t elementCount, const void *arrayOfElements)
{
    struct sim_be *be = be_of(descriptor);
    if (!be) return BAD("not a backend descriptor");
    if (be->finalized) return FAIL(CUDNN_STATUS_NOT_INITIALIZED, "descriptor already finalized");
    if (elementCount < 0 || (elementCount > 0 && !arrayOfElements))
        return BAD("negative elementCount or NULL elements");
    if (!type_size(attributeType)) return BAD("unknown attribute type");
    int s = schema(be->type, attributeName);
    if (s >= 0 && sim_be_schema[s].read_only) return BAD("read-only attribute");
    if (s >= 0 && sim_be_schema[s].type != attributeType)
        return BAD("attribute type is not the attribute's");
    if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < elementCount; i++) {
            const struct sim_be *d = be_of(((cudnnBackendDescriptor_t const *)arrayOfElements)[i]);
            if (!d) return BAD("an element is not a backend descriptor");
            if (!d->finalized)
                return FAIL(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "an element is not finalized");
        }
    if (attributeType == CUDNN_TYPE_HANDLE)
        for (int64_t i = 0; i < elementCount; i++)
            if (!sim_dnn_handle_ok(((cudnnHandle_t const *)arrayOfElements)[i]))
                return BAD("an element is not a cuDNN handle");
    if (store(be, attributeName, attributeType, elementCount, arrayOfElements))
        return FAIL(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of host memory");
    return CUDNN_STATUS_SUCCESS;
}

/* Copies a finalized descriptor's content into the caller's descriptor. */
static cudnnStatus_t copy_into(struct sim_be *dst, const struct sim_be *src)
{
    struct sim_be *copy = be_clone(src);
    if (!copy) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    be_clear(dst);
    dst->attrs = copy->attrs;
    dst->nattrs = copy->nattrs;
    dst->finalized = copy->finalized;
    copy->attrs = NULL;
    copy->nattrs = 0;
    be_free(copy);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType,
                                       int64_t requestedElementCount, int64_t *elementCount,
                                       void *arrayOfElements)
{
    const struct sim_be *be = be_of(descriptor);
    if (!be) return BAD("not a backend descriptor");
    if (!be->finalized) return FAIL(CUDNN_STATUS_NOT_INITIALIZED, "descriptor not finalized");
    if (requestedElementCount < 0) return BAD("negative requestedElementCount");
    /* a NULL array asks for the count alone, whatever the request */
    if (!elementCount && !arrayOfElements) return BAD("no output");
    if (!type_size(attributeType)) return BAD("unknown attribute type");
    int s = schema(be->type, attributeName);
    if (s >= 0 && sim_be_schema[s].type != attributeType)
        return BAD("attribute type is not the attribute's");
    const struct sim_be_attr *a = find(be, attributeName);
    if (a && a->type != attributeType) return BAD("attribute type is not the one set");
    int64_t n = a ? a->count : 0; /* an optional attribute never set has no elements */
    if (elementCount) *elementCount = n;
    int64_t copy = !arrayOfElements ? 0 : n < requestedElementCount ? n : requestedElementCount;
    if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < copy; i++) {
            const struct sim_be *src = ((struct sim_be *const *)a->data)[i];
            struct sim_be *dst = be_of(((cudnnBackendDescriptor_t *)arrayOfElements)[i]);
            if (!dst || dst->type != src->type)
                return BAD("an element is not a descriptor of the attribute's type");
            if (copy_into(dst, src) != CUDNN_STATUS_SUCCESS)
                return FAIL(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                            "out of host memory");
        }
    } else if (copy > 0) {
        memcpy(arrayOfElements, a->data, (size_t)copy * type_size(attributeType));
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The one engine this library offers for any operation graph. */
#define SIM_BE_ENGINES 1
/* The shared memory an engine config reports using: the 48 KiB a kernel
 * gets without opting in to more, within every device's limit. */
#define SIM_BE_SHARED_MEMORY (48 * 1024)

/* An engine config's derived attributes: no workspace, no intermediates. */
static int cfg_derive(struct sim_be *cfg)
{
    int64_t zero = 0;
    int32_t smem = SIM_BE_SHARED_MEMORY;
    return store(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &zero) ||
           store(cfg, CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, CUDNN_TYPE_INT32, 1, &smem) ||
           store(cfg, CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                 NULL);
}

static cudnnStatus_t finalize_tensor(struct sim_be *be)
{
    const struct sim_be_attr *dims = find(be, CUDNN_ATTR_TENSOR_DIMENSIONS);
    const struct sim_be_attr *strides = find(be, CUDNN_ATTR_TENSOR_STRIDES);
    const int64_t *align = one(be, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64);
    if (!one(be, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE) || !dims || !strides ||
        !one(be, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64) || !align)
        return BAD("tensor lacks data type, dimensions, strides, unique id or byte alignment");
    if (dims->count < 1 || dims->count > CUDNN_DIM_MAX || dims->count != strides->count)
        return BAD("dimensions and strides differ in count or exceed CUDNN_DIM_MAX");
    for (int64_t i = 0; i < dims->count; i++)
        if (((int64_t *)dims->data)[i] <= 0 || ((int64_t *)strides->data)[i] < 0)
            return BAD("a dimension is not positive or a stride negative");
    if (*align <= 0) return BAD("byte alignment is not positive");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_engine(struct sim_be *be)
{
    const struct sim_be *graph =
        one_desc(be, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    const int64_t *index = one(be, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64);
    if (!graph || !index) return BAD("engine lacks its operation graph or global index");
    if (*index < 0 || *index >= SIM_BE_ENGINES)
        return FAIL(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND, "global index beyond the graph's engines");
    if (store(be, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, NULL) ||
        store(be, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 0, NULL) ||
        store(be, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 0, NULL) ||
        store(be, CUDNN_ATTR_ENGINE_LAYOUT_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, NULL))
        return FAIL(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of host memory");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_heuristics(struct sim_be *be)
{
    const struct sim_be *graph = one_desc(be, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                          CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    const cudnnBackendHeurMode_t *mode = one(be, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE);
    if (!graph || !mode) return BAD("heuristics lack their operation graph or mode");
    if (*mode < CUDNN_HEUR_MODE_INSTANT || *mode >= CUDNN_HEUR_MODES_COUNT)
        return BAD("invalid heuristics mode");
    /* the one result: a finalized config of engine 0 */
    struct sim_be engine = {SIM_BE_MAGIC, CUDNN_BACKEND_ENGINE_DESCRIPTOR, false, 0, NULL};
    struct sim_be cfg = {SIM_BE_MAGIC, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, false, 0, NULL};
    const struct sim_be *graph_ptr = graph, *engine_ptr = &engine, *cfg_ptr = &cfg;
    int64_t index = 0;
    cudnnStatus_t st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (!store(&engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &graph_ptr) &&
        !store(&engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index) &&
        (st = finalize_engine(&engine)) == CUDNN_STATUS_SUCCESS) {
        engine.finalized = true;
        st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        if (!store(&cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                   &engine_ptr) &&
            !cfg_derive(&cfg)) {
            cfg.finalized = true;
            if (!store(be, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                       &cfg_ptr))
                st = CUDNN_STATUS_SUCCESS;
        }
    }
    be_clear(&engine);
    be_clear(&cfg);
    return st == CUDNN_STATUS_SUCCESS ? st : FAIL(st, "building the heuristics' result");
}

static cudnnStatus_t finalize_plan(struct sim_be *be)
{
    const struct sim_be *cfg =
        one_desc(be, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    /* the handle is optional since it was deprecated (cuDNN 9): the plan
     * runs on the handle cudnnBackendExecute is given */
    if (!cfg) return BAD("plan lacks its engine config");
    const struct sim_be *engine =
        one_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    const int64_t *index =
        engine ? one(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64) : NULL;
    char json[128];
    int len = snprintf(json, sizeof(json),
                       "{\"version\":\"%d.%d.%d\",\"engineId\":%lld,\"knobs\":[],\"sim\":true}",
                       SIM_DNN_VER_MAJOR, SIM_DNN_VER_MINOR, SIM_DNN_VER_PATCH,
                       (long long)(index ? *index : 0));
    int64_t zero = 0;
    if (store(be, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &zero) ||
        store(be, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, len + 1, json))
        return FAIL(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of host memory");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_variant_pack(struct sim_be *be)
{
    const struct sim_be_attr *uids = find(be, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const struct sim_be_attr *ptrs = find(be, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    int64_t nu = uids ? uids->count : 0, np = ptrs ? ptrs->count : 0;
    if (nu != np) return BAD("unique ids and data pointers differ in count");
    for (int64_t i = 0; i < nu; i++)
        for (int64_t j = 0; j < i; j++)
            if (((int64_t *)uids->data)[i] == ((int64_t *)uids->data)[j])
                return FAIL(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "a unique id twice");
    return CUDNN_STATUS_SUCCESS;
}

/* The three below fail in cudnnBackendFinalize's name, whose cases they were. */
#define FINALIZE "cudnnBackendFinalize"

/* An operation graph: its operations, and the engines it offers (the
 * handle is optional since it was deprecated, cuDNN 9). */
static cudnnStatus_t finalize_graph(struct sim_be *be)
{
    int64_t count = SIM_BE_ENGINES;
    const struct sim_be_attr *ops = find(be, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (!ops || ops->count < 1)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, FINALIZE,
                            "operation graph lacks its operations");
    if (store(be, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &count))
        return sim_dnn_fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, FINALIZE,
                            "out of host memory");
    return CUDNN_STATUS_SUCCESS;
}

/* An engine config: its engine; it asks for no workspace and has no
 * intermediates. */
static cudnnStatus_t finalize_engine_cfg(struct sim_be *be)
{
    int64_t zero = 0;
    if (!one_desc(be, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, FINALIZE, "engine config lacks its engine");
    if (store(be, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &zero) ||
        store(be, CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, NULL))
        return sim_dnn_fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, FINALIZE,
                            "out of host memory");
    return CUDNN_STATUS_SUCCESS;
}

/* A knob choice: its knob's type and value. */
static cudnnStatus_t finalize_knob_choice(struct sim_be *be)
{
    if (!one(be, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE) ||
        !one(be, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, FINALIZE,
                            "knob choice lacks its type or value");
    return CUDNN_STATUS_SUCCESS;
}

/* What finalizing checks and derives, by descriptor type; a type not here
 * finalizes as it is. */
static const struct {
    cudnnBackendDescriptorType_t type;
    cudnnStatus_t (*finalize)(struct sim_be *be);
} finalizers[] = {
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, finalize_tensor},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, finalize_graph},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, finalize_heuristics},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, finalize_engine},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, finalize_engine_cfg},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, finalize_plan},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, finalize_variant_pack},
    {CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, finalize_knob_choice},
};

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    struct sim_be *be = be_of(descriptor);
    if (!be) return BAD("not a backend descriptor");
    if (be->finalized) return FAIL(CUDNN_STATUS_NOT_INITIALIZED, "descriptor already finalized");
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    for (size_t k = 0; k < sizeof finalizers / sizeof finalizers[0]; k++)
        if (finalizers[k].type == be->type) st = finalizers[k].finalize(be);
    if (st == CUDNN_STATUS_SUCCESS) be->finalized = true;
    return st;
}

/* 1 when every non-virtual tensor reachable from `be` has its unique id
 * among the variant pack's `uids`. */
static int tensors_bound(const struct sim_be *be, const int64_t *uids, int64_t n)
{
    if (be->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
        const bool *virt = one(be, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN);
        const int64_t *uid = one(be, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64);
        if ((virt && *virt) || !uid) return 1;
        for (int64_t i = 0; i < n; i++)
            if (uids[i] == *uid) return 1;
        return 0;
    }
    for (int i = 0; i < be->nattrs; i++) {
        const struct sim_be_attr *a = &be->attrs[i];
        if (a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR) continue;
        for (int64_t j = 0; j < a->count; j++)
            if (!tensors_bound(((struct sim_be **)a->data)[j], uids, n)) return 0;
    }
    return 1;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack)
{
    const struct sim_be *plan = be_of(executionPlan), *pack = be_of(variantPack);
    if (!sim_dnn_handle_ok(handle)) return BAD("not a cuDNN handle");
    if (!plan || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !pack ||
        pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return FAIL(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                    "not an execution plan and variant pack");
    if (!plan->finalized || !pack->finalized)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "plan or variant pack not finalized");
    const int64_t *ws = one(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64);
    const void *const *wsp = one(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR);
    if (ws && *ws > 0 && !(wsp && *wsp)) return BAD("the plan needs a workspace");
    const struct sim_be_attr *uids = find(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    if (!tensors_bound(plan, uids ? uids->data : NULL, uids ? uids->count : 0))
        return BAD("a non-virtual tensor of the graph has no pointer in the variant pack");
    cudnnStatus_t st = sim_dnn_launch(handle);
    return st == CUDNN_STATUS_SUCCESS ? st : FAIL(st, "the stream refused the work");
}
