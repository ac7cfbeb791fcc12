/* cuda_buffers.c - the CUDA backend's buffers: allocation (zeroed), writes and reads. */
#include "backends/cuda/cuda_internal.h"
#include "backends/ptr_adopt.h"

clnode_status cu_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out)
{
    cuda_backend *cb = cub(be);
    clnode_context *ctx = be->ctx;
    *out = NULL;
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    cln_buf *b = calloc(1, sizeof *b);
    CLN_CHECK(ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    const size_t size = bytes ? bytes : 1;
    cudaError_t e = CU(cudaMalloc)(&b->p, size);
    if (e != cudaSuccess) {
        free(b);
        (void)CU(cudaGetLastError)();
        return cln_fail_native(ctx, (long)e, cu_status(e),
                               "cudaMalloc(%zu bytes) on %s failed: %s (%d)", size, be->device_name,
                               CU(cudaGetErrorName)(e), (int)e);
    }
    b->size = bytes;
    /* zero-filled, so that unused parts of the save buffers read back as zeros */
    e = CU(cudaMemsetAsync)(b->p, 0, size, cb->stream);
    if (e != cudaSuccess) {
        CU(cudaFree)(b->p);
        free(b);
        return CU_FAIL(ctx, e, "cudaMemsetAsync(zeroing a new buffer)");
    }
    *out = b;
    return CLNODE_OK;
}

/* A caller's device pointer (backend.h: buf_adopt): borrowed, never freed. */
CLN_PTR_BUF_ADOPT(cu_buf_adopt)

void cu_buf_free(cln_backend *be, cln_buf *b)
{
    if (!b)
        return;
    if (b->p && !b->borrowed && cu_bind(cub(be)) == CLNODE_OK)
        CU(cudaFree)(b->p); /* waits for the work that still uses it */
    free(b);
}

clnode_status cu_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes, const void *src)
{
    cuda_backend *cb = cub(be);
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "CUDA buffer write out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (!bytes)
        return CLNODE_OK;
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    /* in stream order; waiting here makes the write blocking (src may be reused at once) and
     * reports its errors here. Set-up only (and the saved steps' new capacity into CI, a few
     * times per solve between groups of steps): never called per step. */
    CU_CHECK(be->ctx, "cudaMemcpyAsync (host to device)",
             CU(cudaMemcpyAsync)((unsigned char *)b->p + off, src, bytes, cudaMemcpyHostToDevice,
                                 cb->stream));
    CU_CHECK(be->ctx, "cudaStreamSynchronize (a buffer copy)",
             CU(cudaStreamSynchronize)(cb->stream));
    return CLNODE_OK;
}

clnode_status cu_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst)
{
    cuda_backend *cb = cub(be);
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "CUDA buffer read out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (!bytes)
        return CLNODE_OK;
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    be->syncs++;
    CU_CHECK(be->ctx, "cudaMemcpyAsync (device to host)",
             CU(cudaMemcpyAsync)(dst, (const unsigned char *)b->p + off, bytes,
                                 cudaMemcpyDeviceToHost, cb->stream));
    CU_CHECK(be->ctx, "cudaStreamSynchronize (a buffer copy)",
             CU(cudaStreamSynchronize)(cb->stream));
    return CLNODE_OK;
}
