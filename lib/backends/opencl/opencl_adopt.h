/* opencl_adopt.h - the OpenCL backend's adopting constructor, for the public
 * clnode_context_create_opencl (lib/backends/context_open.c). Not installed. */
#ifndef CLN_OPENCL_ADOPT_H
#define CLN_OPENCL_ADOPT_H

#include "clnode/opencl.h"

/* clnode_context_create_opencl without reading the device's stored probe results: a context on
 * the caller's context, device and in-order queue (checked), or an error naming what is wrong. */
clnode_status cln_opencl_context_adopt(const clnode_context_options *opts, cl_context context,
                                       cl_device_id device, cl_command_queue queue,
                                       clnode_context **out);

#endif /* CLN_OPENCL_ADOPT_H */
