/* opencl_buffers.c - the OpenCL backend's buffers: allocation (zeroed), writes and reads. */
#include "backends/opencl/opencl_internal.h"

clnode_status ocl_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out)
{
    opencl_backend *ob = ocl(be);
    clnode_context *ctx = be->ctx;
    *out = NULL;
    cln_buf *b = calloc(1, sizeof *b);
    CLN_CHECK(ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    const size_t size = bytes ? bytes : 1;
    cl_int e = CL_SUCCESS;
    cl_ulong max_alloc = 0;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc,
                        NULL) == CL_SUCCESS &&
        max_alloc > 0 && (cl_ulong)size > max_alloc) {
        free(b);
        return cln_fail(ctx, CLNODE_ERR_DEVICE_MEMORY,
                        "a buffer of %zu bytes exceeds the largest allocation of %s (%llu bytes): "
                        "use a smaller batch",
                        size, be->device_name, (unsigned long long)max_alloc);
    }
    b->mem = clCreateBuffer(ob->context, CL_MEM_READ_WRITE, size, NULL, &e);
    if (!b->mem || e != CL_SUCCESS) {
        free(b);
        return cln_fail_native(ctx, (long)e, ocl_status(e, CLNODE_ERR_DEVICE),
                               "clCreateBuffer(%zu bytes) failed: %s (%d)", size, ocl_err_name(e),
                               (int)e);
    }
    b->size = bytes;
    /* zero-filled, so that unused parts of the save buffers read back as zeros and no kernel
     * ever reads uninitialised memory (rows that start frozen still pass through the GEMMs).
     * Oclgrind 21.10's uninitialised-value checker keeps a buffer's state right only after a host
     * store that covers the whole buffer (each host store re-creates the buffer's record with the
     * store's size; a fill stores its pattern piece by piece): there, one write of zeros. */
    if (ob->zero_by_write) {
        void *zeros = calloc(size, 1);
        if (!zeros) {
            clReleaseMemObject(b->mem);
            free(b);
            return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of zeros",
                            size);
        }
        e = clEnqueueWriteBuffer(ob->queue, b->mem, CL_TRUE, 0, size, zeros, 0, NULL, NULL);
        free(zeros);
    } else {
        const cl_uchar zero = 0;
        e = clEnqueueFillBuffer(ob->queue, b->mem, &zero, 1, 0, size, 0, NULL, NULL);
    }
    if (e != CL_SUCCESS) {
        clReleaseMemObject(b->mem);
        free(b);
        return OCL_FAIL(ctx, e,
                        ob->zero_by_write ? "clEnqueueWriteBuffer (zeroing a new buffer)"
                                          : "clEnqueueFillBuffer (zeroing a new buffer)");
    }
    *out = b;
    return CLNODE_OK;
}

/* A caller's cl_mem (backend.h: buf_adopt): of this context's cl_context, large enough; retained
 * for the handle's life (ocl_buf_free releases it). */
clnode_status ocl_buf_adopt(cln_backend *be, void *handle, size_t offset, size_t bytes,
                            const char *what, cln_buf **out)
{
    clnode_context *ctx = be->ctx;
    *out = NULL;
    const cl_mem mem = (cl_mem)handle;
    cl_context owner = NULL;
    size_t size = 0;
    cl_int e = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (e == CL_SUCCESS)
        e = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (e != CL_SUCCESS)
        return cln_fail_native(ctx, (long)e, CLNODE_ERR_INVALID_ARGUMENT,
                               "%s is not an OpenCL buffer (clGetMemObjectInfo: %s, %d)", what,
                               ocl_err_name(e), (int)e);
    CLN_CHECK(ctx, owner == ocl(be)->context, CLNODE_ERR_INVALID_ARGUMENT,
              "%s is a buffer of another OpenCL context than %s's", what, be->device_name);
    CLN_CHECK(ctx, offset <= size && bytes <= size - offset, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: %zu bytes from byte %zu do not fit its buffer of %zu bytes", what, bytes, offset,
              size);
    cln_buf *b = calloc(1, sizeof *b);
    CLN_CHECK(ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    e = clRetainMemObject(mem);
    if (e != CL_SUCCESS) {
        free(b);
        return OCL_FAIL(ctx, e, "clRetainMemObject (a caller's buffer)");
    }
    b->mem = mem;
    b->size = size;
    *out = b;
    return CLNODE_OK;
}

void ocl_buf_free(cln_backend *be, cln_buf *b)
{
    (void)be;
    if (!b)
        return;
    if (b->mem)
        clReleaseMemObject(b->mem);
    free(b);
}

clnode_status ocl_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes, const void *src)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "OpenCL buffer write out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        OCL_CHECK(
            be->ctx, "clEnqueueWriteBuffer (host to device)",
            clEnqueueWriteBuffer(ocl(be)->queue, b->mem, CL_TRUE, off, bytes, src, 0, NULL, NULL));
    return CLNODE_OK;
}

clnode_status ocl_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "OpenCL buffer read out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes) {
        be->syncs++;
        OCL_CHECK(
            be->ctx, "clEnqueueReadBuffer (device to host)",
            clEnqueueReadBuffer(ocl(be)->queue, b->mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL));
    }
    return CLNODE_OK;
}
