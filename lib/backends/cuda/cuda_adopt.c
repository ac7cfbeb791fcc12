/* cuda_adopt.c - contexts on the caller's CUDA device and stream (include/clnode/cuda.h). */
#include "backends/cuda/cuda_adopt.h"
#include "backends/cuda/cuda_internal.h"

typedef struct cu_adopt {
    int device;
    cudaStream_t stream;
} cu_adopt;

static clnode_status cu_adopt_make(clnode_context *ctx, void *user, cln_backend **out)
{
    const cu_adopt *a = user;
    CLN_CHECK(ctx, a->device >= 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_context_create_cuda: the device ordinal %d is negative", a->device);
    char why[512];
    if (cu_available(why, sizeof why) != CLNODE_OK)
        return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                        "clnode_context_create_cuda: cuda not available: %s", why);
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", a->device);
    clnode_status st = cu_check_index(ctx, spec, a->device);
    if (st != CLNODE_OK)
        return st;
    if (a->stream) { /* the legacy default stream (NULL) is every device's */
        int sdev = -1;
        CU_CHECK(ctx, "cudaStreamGetDevice (the caller's stream)",
                 CU(cudaStreamGetDevice)(a->stream, &sdev));
        CLN_CHECK(ctx, sdev == a->device, CLNODE_ERR_INVALID_ARGUMENT,
                  "the stream given to clnode_context_create_cuda belongs to cuda:%d, not to %s",
                  sdev, spec);
    }
    return cu_open(ctx, spec, a->device, 0, a->stream, 1, out);
}

clnode_status cln_cuda_context_adopt(const clnode_context_options *opts, int device,
                                     struct CUstream_st *stream, clnode_context **out)
{
    cu_adopt a = {device, stream};
    return cln_context_create_with(opts, cu_adopt_make, &a, out);
}
