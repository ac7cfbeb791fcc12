/* cuda_adopt.h - the CUDA backend's adopting constructor, for the public
 * clnode_context_create_cuda (lib/backends/context_open.c). Not installed. */
#ifndef CLN_CUDA_ADOPT_H
#define CLN_CUDA_ADOPT_H

#include "clnode/cuda.h"

/* clnode_context_create_cuda without reading the device's stored probe results: a context on
 * CUDA device `device` that enqueues on the caller's `stream` (checked), or an error naming what
 * is wrong. */
clnode_status cln_cuda_context_adopt(const clnode_context_options *opts, int device,
                                     struct CUstream_st *stream, clnode_context **out);

#endif /* CLN_CUDA_ADOPT_H */
