/* clnode/opencl.h - using clnode inside an application that already has OpenCL objects.
 *
 * Include after <CL/cl.h> (or let this header include it). Only in builds with the OpenCL
 * backend. Thread-safety: as any clnode context; the caller must not use the queue from another
 * thread while clnode works on it.
 */
#ifndef CLNODE_OPENCL_H
#define CLNODE_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "clnode/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a context on the caller's OpenCL device that enqueues everything on the caller's
 * in-order `queue` (of `context` and `device`). The three objects are retained, never owned:
 * clnode_context_destroy releases its references, the caller's stay valid. `opts` may be NULL
 * (its `device` field is ignored). Errors: CLNODE_ERR_INVALID_ARGUMENT (a missing object, a queue
 * of another context or device, an out-of-order queue), CLNODE_ERR_DEVICE (the raw cl_int in
 * clnode_context_last_native_error), CLNODE_ERR_OUT_OF_MEMORY. Blocking: queries the device. */
CLNODE_API clnode_status clnode_context_create_opencl(const clnode_context_options *opts,
                                                      cl_context context, cl_device_id device,
                                                      cl_command_queue queue, clnode_context **out);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_OPENCL_H */
