/* _xla_ffi.h - the part of XLA's FFI C ABI that clnode's custom calls use, declared here from its
 * documented layout (XLA's xla/ffi/api/c_api.h, API 0.x) under clnode's own names, so that the
 * extension builds without jaxlib. Every struct starts with its size (struct_size), and the
 * handlers read a field only where the size the caller gave covers it (CXF_COVERS).
 * tests/python/test_jax_ffi_abi.py compiles this header next to the installed jaxlib's c_api.h
 * and checks every struct's size, every member's offset and the enum values used here.
 *
 * The subset: a handler's call frame (its arguments, results and attributes), the metadata query
 * that XLA makes of every handler before its first call, an error's creation, and the stream of a
 * GPU platform. Nothing here is called by the library itself. */
#ifndef CLNODE_XLA_FFI_H
#define CLNODE_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

/* The API version the handlers are written against (0.1: the metadata query, scalar and string
 * attributes, buffers with dtype/rank/dims; jaxlib 0.4.31 ships 0.1, 0.10.2 ships 0.3). */
#define CXF_API_MAJOR 0
#define CXF_API_MINOR 1

/* 1 when the struct at p, of the size its struct_size says, holds member m of type T */
#define CXF_COVERS(p, T, m) ((p)->struct_size >= offsetof(T, m) + sizeof(((T *)0)->m))

typedef enum cxf_extension_type {
    CXF_EXTENSION_METADATA = 1
} cxf_extension_type;

typedef struct cxf_extension {
    size_t struct_size;
    cxf_extension_type type;
    struct cxf_extension *next;
} cxf_extension;

typedef struct cxf_api_version {
    size_t struct_size;
    cxf_extension *extension_start;
    int major_version;
    int minor_version;
} cxf_api_version;

typedef struct cxf_error cxf_error; /* XLA's; created by api->error_create, owned by XLA */

typedef enum cxf_error_code {
    CXF_OK = 0,
    CXF_CANCELLED = 1,
    CXF_UNKNOWN = 2,
    CXF_INVALID_ARGUMENT = 3,
    CXF_NOT_FOUND = 5,
    CXF_RESOURCE_EXHAUSTED = 8,
    CXF_FAILED_PRECONDITION = 9,
    CXF_UNIMPLEMENTED = 12,
    CXF_INTERNAL = 13,
    CXF_UNAVAILABLE = 14
} cxf_error_code;

typedef struct cxf_error_create_args {
    size_t struct_size;
    cxf_extension *extension_start;
    const char *message;
    cxf_error_code errc;
} cxf_error_create_args;

typedef enum cxf_dtype {
    CXF_PRED = 1,
    CXF_S32 = 4,
    CXF_S64 = 5,
    CXF_F32 = 11,
    CXF_F64 = 12
} cxf_dtype;

typedef struct cxf_buffer {
    size_t struct_size;
    cxf_extension *extension_start;
    cxf_dtype dtype;
    void *data;
    int64_t rank;
    int64_t *dims;
} cxf_buffer;

typedef enum cxf_arg_type {
    CXF_ARG_BUFFER = 1
} cxf_arg_type;
typedef enum cxf_ret_type {
    CXF_RET_BUFFER = 1
} cxf_ret_type;
typedef enum cxf_attr_type {
    CXF_ATTR_SCALAR = 3,
    CXF_ATTR_STRING = 4
} cxf_attr_type;

typedef struct cxf_bytes {
    const char *ptr;
    size_t len;
} cxf_bytes;

typedef struct cxf_scalar {
    cxf_dtype dtype;
    void *value;
} cxf_scalar;

typedef struct cxf_args {
    size_t struct_size;
    cxf_extension *extension_start;
    int64_t size;
    cxf_arg_type *types;
    void **args;
} cxf_args;

typedef struct cxf_rets {
    size_t struct_size;
    cxf_extension *extension_start;
    int64_t size;
    cxf_ret_type *types;
    void **rets;
} cxf_rets;

typedef struct cxf_attrs {
    size_t struct_size;
    cxf_extension *extension_start;
    int64_t size;
    cxf_attr_type *types;
    cxf_bytes **names;
    void **attrs;
} cxf_attrs;

typedef struct cxf_api cxf_api;
typedef struct cxf_execution_context cxf_execution_context;

typedef enum cxf_stage {
    CXF_STAGE_EXECUTE = 3
} cxf_stage;

typedef struct cxf_call_frame {
    size_t struct_size;
    cxf_extension *extension_start;
    const cxf_api *api;
    cxf_execution_context *ctx;
    cxf_stage stage;
    cxf_args args;
    cxf_rets rets;
    cxf_attrs attrs;
} cxf_call_frame;

typedef struct cxf_stream_get_args {
    size_t struct_size;
    cxf_extension *extension_start;
    cxf_execution_context *ctx;
    void *stream; /* out: the platform's stream (a CUstream on CUDA) */
} cxf_stream_get_args;

/* The leading part of XLA's function table (its later entries are not used). */
struct cxf_api {
    size_t struct_size;
    cxf_extension *extension_start;
    cxf_api_version api_version;
    const void *internal_api;
    cxf_error *(*error_create)(cxf_error_create_args *args);
    void (*error_get_message)(void *args);
    void (*error_destroy)(void *args);
    cxf_error *(*handler_register)(void *args);
    cxf_error *(*stream_get)(cxf_stream_get_args *args);
};

typedef struct cxf_metadata {
    size_t struct_size;
    cxf_api_version api_version; /* out: the version the handler needs */
    uint32_t traits;             /* out: 0 (not command-buffer compatible) */
} cxf_metadata;

typedef struct cxf_metadata_extension {
    cxf_extension extension_base;
    cxf_metadata *metadata;
} cxf_metadata_extension;

typedef cxf_error *cxf_handler(cxf_call_frame *frame);

#endif /* CLNODE_XLA_FFI_H */
