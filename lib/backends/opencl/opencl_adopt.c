/* opencl_adopt.c - contexts on the caller's OpenCL context, device and in-order queue
 * (include/clnode/opencl.h). */
#include "backends/opencl/opencl_internal.h"

typedef struct ocl_adopt {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
} ocl_adopt;

static clnode_status ocl_adopt_make(clnode_context *ctx, void *user, cln_backend **out)
{
    const ocl_adopt *a = user;
    CLN_CHECK(ctx, a->context && a->device && a->queue, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_context_create_opencl needs a context, a device and a queue");
    /* the queue must belong to that context and device, and execute in order: the solver
     * enqueues dependent kernels without events */
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_command_queue_properties qprops = 0;
    cl_int e = clGetCommandQueueInfo(a->queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
    if (e == CL_SUCCESS)
        e = clGetCommandQueueInfo(a->queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
    if (e == CL_SUCCESS)
        e = clGetCommandQueueInfo(a->queue, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
    if (e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clGetCommandQueueInfo(the caller's queue)");
    CLN_CHECK(ctx, qctx == a->context && qdev == a->device, CLNODE_ERR_INVALID_ARGUMENT,
              "the command queue given to clnode_context_create_opencl belongs to another "
              "context or device");
    CLN_CHECK(ctx, !(qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE), CLNODE_ERR_INVALID_ARGUMENT,
              "clnode needs an in-order command queue (the caller's is out of order)");
    cl_platform_id plat = NULL;
    e = clGetDeviceInfo(a->device, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    if (e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clGetDeviceInfo(CL_DEVICE_PLATFORM)");
    ocl_dev_info info;
    ocl_fill_info(plat, a->device, &info);
    return ocl_setup(ctx, &info, a->context, a->queue, out);
}

clnode_status cln_opencl_context_adopt(const clnode_context_options *opts, cl_context context,
                                       cl_device_id device, cl_command_queue queue,
                                       clnode_context **out)
{
    ocl_adopt a = {context, device, queue};
    return cln_context_create_with(opts, ocl_adopt_make, &a, out);
}
