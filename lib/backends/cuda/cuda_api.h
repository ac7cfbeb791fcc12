/* cuda_api.h - the CUDA libraries (runtime, cuBLAS, NVRTC) loaded at run time with dlopen, so that
 * one build of libclnode loads and runs on machines with and without CUDA.
 *
 * The headers of the toolkit are used at build time only: every entry point is a pointer of the
 * exact type the header declares (__typeof__ of the declaration), looked up under the name the
 * header maps it to (cublasCreate is cublasCreate_v2, ...). Call them as CU(cudaMalloc)(...).
 *
 * Libraries tried, first found wins (the ABI of the runtime's structs changes between major
 * versions, so a runtime of another major version than the headers' is refused; cuBLAS and NVRTC
 * carry their own runtime and keep a stable C API, so they may come from CUDA 12 as well):
 *   runtime  libcudart.so.<M>, libcudart.so           (M: the major version of the headers)
 *   cuBLAS   libcublas.so.<M>, libcublas.so.12, libcublas.so
 *   NVRTC    libnvrtc.so.<M>, libnvrtc.so.12, libnvrtc.so
 * each through the dynamic loader's search, then in $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
 * /usr/local/cuda/lib64. The driver (libcuda.so.1) is loaded by the runtime itself; its absence
 * is an error code of the runtime's first call. Libraries are loaded once per process and never
 * unloaded.
 */
#ifndef CLN_CUDA_API_H
#define CLN_CUDA_API_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "core/internal.h"

/* The runtime entry points the backend calls. */
#define CLN_CUDART_FNS(X)                                                                          \
    X(cudaGetErrorName)                                                                            \
    X(cudaGetErrorString)                                                                          \
    X(cudaGetLastError)                                                                            \
    X(cudaGetDeviceCount)                                                                          \
    X(cudaGetDevice)                                                                               \
    X(cudaSetDevice)                                                                               \
    X(cudaGetDeviceProperties)                                                                     \
    X(cudaDriverGetVersion)                                                                        \
    X(cudaRuntimeGetVersion)                                                                       \
    X(cudaMalloc)                                                                                  \
    X(cudaFree)                                                                                    \
    X(cudaMallocHost)                                                                              \
    X(cudaFreeHost)                                                                                \
    X(cudaMemcpyAsync)                                                                             \
    X(cudaMemcpy2DAsync)                                                                           \
    X(cudaMemsetAsync)                                                                             \
    X(cudaMemset2DAsync)                                                                           \
    X(cudaStreamCreateWithFlags)                                                                   \
    X(cudaStreamDestroy)                                                                           \
    X(cudaStreamSynchronize)                                                                       \
    X(cudaStreamGetDevice)                                                                         \
    X(cudaLaunchKernel)                                                                            \
    X(cudaFuncGetAttributes)                                                                       \
    X(cudaLibraryLoadData)                                                                         \
    X(cudaLibraryUnload)                                                                           \
    X(cudaLibraryGetKernel)                                                                        \
    X(cudaMemGetInfo)

/* The cuBLAS entry points. */
#define CLN_CUBLAS_FNS(X)                                                                          \
    X(cublasCreate)                                                                                \
    X(cublasDestroy)                                                                               \
    X(cublasSetStream)                                                                             \
    X(cublasSetMathMode)                                                                           \
    X(cublasGetMathMode)                                                                           \
    X(cublasGetVersion)                                                                            \
    X(cublasGemmEx)                                                                                \
    X(cublasGetStatusName)                                                                         \
    X(cublasGetStatusString)

/* The NVRTC entry points. */
#define CLN_NVRTC_FNS(X)                                                                           \
    X(nvrtcGetErrorString)                                                                         \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetPTXSize)                                                                             \
    X(nvrtcGetPTX)                                                                                 \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetCUBIN)                                                                               \
    X(nvrtcGetNumSupportedArchs)                                                                   \
    X(nvrtcGetSupportedArchs)

/* One pointer per entry point, of the type its header declares. A member is named as the header
 * maps the function (the argument of X is macro-expanded), and so is every use through CU(). */
#define CLN_CU_MEMBER(f) __typeof__(f) *f;
typedef struct cln_cuda_api {
    CLN_CUDART_FNS(CLN_CU_MEMBER)
    CLN_CUBLAS_FNS(CLN_CU_MEMBER)
    CLN_NVRTC_FNS(CLN_CU_MEMBER)
} cln_cuda_api;
#undef CLN_CU_MEMBER

/* The loaded entry points; a group is valid once its loader returned CLNODE_OK. */
extern cln_cuda_api cln_cu;
#define CU(f) (cln_cu.f)

/* Loads the runtime and cuBLAS (once per process; thread-safe). Returns CLNODE_OK, or
 * CLNODE_ERR_NO_DEVICE with the reason ("cannot load libcudart.so.13: ...") in `why`. */
clnode_status cln_cuda_load_runtime(char *why, size_t why_size);

/* Loads NVRTC (once per process; thread-safe), as cln_cuda_load_runtime. Needs no runtime, no
 * driver and no GPU. */
clnode_status cln_cuda_load_nvrtc(char *why, size_t why_size);

#endif /* CLN_CUDA_API_H */
