/* context_open.c - the public constructors of a context: open the backend (backends/context.c),
 * then read the device's stored probe results into the context (backends/probe_cache.c), so that
 * a solve's first probe lookup reads no file. */
#include "backends/probe_cache.h"
#include "backends/registry.h"
#ifdef CLNODE_HAVE_OPENCL
#include "backends/opencl/opencl_adopt.h"
#endif
#ifdef CLNODE_HAVE_CUDA
#include "backends/cuda/cuda_adopt.h"
#endif

/* A constructor's status, the stored probe results read into the context it made. */
static clnode_status ctx_opened(clnode_status st, clnode_context **out)
{
    if (st == CLNODE_OK)
        cln_probe_preload(*out);
    return st;
}

/* The backend named by a device string (cln_backend_factory's user: the string). */
static clnode_status registry_factory(clnode_context *ctx, void *user, cln_backend **out)
{
    return cln_registry_open(ctx, user, out);
}

clnode_status clnode_context_create(const clnode_context_options *opts, clnode_context **out)
{
    const char *spec = opts ? opts->device : NULL;
    return ctx_opened(cln_context_create_with(opts, registry_factory, (void *)spec, out), out);
}

#ifdef CLNODE_HAVE_OPENCL
clnode_status clnode_context_create_opencl(const clnode_context_options *opts, cl_context context,
                                           cl_device_id device, cl_command_queue queue,
                                           clnode_context **out)
{
    return ctx_opened(cln_opencl_context_adopt(opts, context, device, queue, out), out);
}
#endif

#ifdef CLNODE_HAVE_CUDA
clnode_status clnode_context_create_cuda(const clnode_context_options *opts, int device,
                                         struct CUstream_st *stream, clnode_context **out)
{
    return ctx_opened(cln_cuda_context_adopt(opts, device, stream, out), out);
}
#endif
