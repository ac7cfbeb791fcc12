/* clnode/context.h - the context: one compute device, its logger and its last error.
 *
 * Every object of the library is created with a context. A context is bound to one device of one
 * backend ("host", "opencl:0", ...) for its whole life; it owns that device's handles and caches.
 * Thread-safety: a context and everything created from it may be used by one thread at a time.
 * Different contexts are independent.
 */
#ifndef CLNODE_CONTEXT_H
#define CLNODE_CONTEXT_H

#include "clnode/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clnode_context clnode_context;

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_context_default_options, then change what you need. */
typedef struct clnode_context_options {
    /* sizeof(clnode_context_options) where the program was compiled: set by
     * clnode_context_default_options; the library reads only the fields it covers. */
    size_t struct_size;
    /* Device to use: "host", "opencl:0", "opencl:pocl", "cuda:0", ... (clnode_device_help in
     * clnode/devices.h lists every form). NULL (default) means the environment variable
     * CLNODE_DEVICE if set, else "host". */
    const char *device;
    /* Logger; NULL (default) discards every message. */
    clnode_log_fn log;
    void *log_user;
    /* Most verbose level passed to the logger; default CLNODE_LOG_WARN. */
    clnode_log_level log_level;
    /* Host backend: the most threads a solve uses (the caller's included). 0 (default): the
     * environment variable CLNODE_NUM_THREADS if it holds a positive integer, else the CPUs the
     * process may run on. Small batches run on the caller's thread alone whatever the setting;
     * waiting threads sleep. Other backends ignore it. */
    int num_threads;
} clnode_context_options;

/* Fills `opts` with the documented defaults, struct_size included. `opts` must not be NULL. A
 * macro: it passes the size of the struct the program was compiled with. */
#define clnode_context_default_options(opts)                                                       \
    clnode_context_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_context_default_options_sized(clnode_context_options *opts,
                                                     size_t struct_size);

/* Creates a context bound to the device named in `opts` (NULL: all defaults).
 * Returns CLNODE_OK and stores the new context in *out, or an error and stores NULL:
 * CLNODE_ERR_NO_DEVICE for an unknown or absent device (the message lists what exists),
 * CLNODE_ERR_UNSUPPORTED for a backend this build lacks or host kernels this CPU cannot run
 * ("host:avx512: this CPU/OS does not support AVX-512F", doc/devices.md),
 * CLNODE_ERR_OUT_OF_MEMORY,
 * CLNODE_ERR_INVALID_ARGUMENT for a struct_size this library does not know.
 * On failure the message is passed to the logger of `opts` (there is no context to hold it).
 * Blocking: may initialise a device driver. */
CLNODE_API clnode_status clnode_context_create(const clnode_context_options *opts,
                                               clnode_context **out);

/* Destroys the context and sets *ctx to NULL. Accepts NULL and a pointer to NULL. Every object
 * created with the context must have been destroyed first. */
CLNODE_API void clnode_context_destroy(clnode_context **ctx);

/* The detailed message of the last failure of a call made with this context ("" if none).
 * Valid until the next call with the context. */
CLNODE_API const char *clnode_context_last_error(const clnode_context *ctx);

/* The raw code of the lower layer behind the last failure (an OpenCL cl_int, a CLBlast or cuBLAS
 * status), or 0 when the failure did not come from such a layer. */
CLNODE_API long clnode_context_last_native_error(const clnode_context *ctx);

/* The backend of the context: "host", "opencl" or "cuda". Static string. */
CLNODE_API const char *clnode_context_backend(const clnode_context *ctx);

/* A human-readable device name ("host (OpenBLAS 0.3.21, 2 threads)", "pthread-skylake (PoCL)").
 * Valid for the life of the context. */
CLNODE_API const char *clnode_context_device(const clnode_context *ctx);

/* The commands the context's device has enqueued since the context was created: kernel launches,
 * device-to-device copies and matrix products (each GEMM counts once, whatever its library
 * enqueues for it); *gemms (may be NULL) receives how many of them were GEMMs. Statistics, for
 * example clnode-bench --grad's launches per reverse step. 0 on the host, which enqueues none. */
CLNODE_API long clnode_context_launches(const clnode_context *ctx, long *gemms);

/* Whether the device can solve in the given precision (1) or not (0). */
CLNODE_API int clnode_context_supports(const clnode_context *ctx, clnode_precision precision);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_CONTEXT_H */
