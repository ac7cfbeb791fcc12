/* cuda_errors.c - the CUDA backend's errors: runtime and cuBLAS failures recorded with their
 * native codes and mapped to clnode statuses. */
#include "backends/cuda/cuda_internal.h"

clnode_status cu_status(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return CLNODE_ERR_DEVICE_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        return CLNODE_ERR_NO_DEVICE;
    case cudaErrorInvalidPtx:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorJitCompilerNotFound:
    case cudaErrorSharedObjectInitFailed:
        return CLNODE_ERR_BUILD;
    default:
        return CLNODE_ERR_DEVICE;
    }
}

clnode_status cu_fail_at(clnode_context *ctx, cudaError_t e, const char *what, const char *file,
                         int line)
{
    (void)CU(cudaGetLastError)(); /* clear a non-sticky error so that later calls start clean */
    return cln_fail_native_at(ctx, (long)e, cu_status(e), file, line, "%s failed: %s (%d: %s)",
                              what, CU(cudaGetErrorName)(e), (int)e, CU(cudaGetErrorString)(e));
}

clnode_status blas_fail_at(clnode_context *ctx, cublasStatus_t s, const char *what,
                           const char *file, int line)
{
    clnode_status st = CLNODE_ERR_BLAS;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        st = CLNODE_ERR_DEVICE_MEMORY;
    else if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
        st = CLNODE_ERR_UNSUPPORTED;
    else if (s == CUBLAS_STATUS_NOT_INITIALIZED)
        st = CLNODE_ERR_DEVICE;
    return cln_fail_native_at(ctx, (long)s, st, file, line, "%s failed: %s (cuBLAS status %d: %s)",
                              what, CU(cublasGetStatusName)(s), (int)s,
                              CU(cublasGetStatusString)(s));
}
