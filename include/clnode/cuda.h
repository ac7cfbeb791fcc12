/* clnode/cuda.h - using clnode inside an application that already has a CUDA device and stream
 * (JAX's XLA custom calls, PyTorch's current stream).
 *
 * Only in builds with the CUDA backend. Needs no CUDA header: a stream is passed as the
 * `struct CUstream_st *` that both `CUstream` (driver API) and `cudaStream_t` (runtime API) are.
 * Thread-safety: as any clnode context; the caller must not destroy the stream while the context
 * lives.
 */
#ifndef CLNODE_CUDA_H
#define CLNODE_CUDA_H

#include "clnode/context.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* CUstream, cudaStream_t */

/* Creates a context on CUDA device `device` (an ordinal in the CUDA runtime's order, as in
 * "cuda:N"; CUDA_VISIBLE_DEVICES applies) that enqueues everything it does on the caller's
 * `stream`: kernels, GEMMs (its cuBLAS handle is bound to that stream) and copies. The stream is
 * never owned: clnode_context_destroy waits for the work clnode enqueued on it and leaves it to
 * the caller. NULL is the device's legacy default stream. Strict GEMMs run in the ordered kernel
 * (as "cuda:N"); `opts` may be NULL (its `device` field is ignored). Work runs in the device's
 * primary context (the runtime API's), which is the one JAX and PyTorch use.
 * Errors: CLNODE_ERR_INVALID_ARGUMENT (`out` NULL, a negative device, a stream of another
 * device), CLNODE_ERR_NO_DEVICE (the CUDA libraries, the driver or device `device` are missing:
 * the message says which), CLNODE_ERR_DEVICE and others a CUDA call maps to (the raw cudaError_t
 * in clnode_context_last_native_error), CLNODE_ERR_OUT_OF_MEMORY. Blocking: loads the CUDA
 * libraries on first use and queries the device. */
CLNODE_API clnode_status clnode_context_create_cuda(const clnode_context_options *opts, int device,
                                                    struct CUstream_st *stream,
                                                    clnode_context **out);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_CUDA_H */
