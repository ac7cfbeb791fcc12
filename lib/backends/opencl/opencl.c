/* lib/backends/opencl/: the OpenCL backend: CLBlast GEMMs and the kernels of cl/clnode.cl on any
 * OpenCL 1.2 device, through the ICD loader. */
/* opencl.c - the OpenCL backend: CLBlast GEMMs plus the kernels of cl/clnode.cl (the
 * shared arithmetic of cl/, embedded into the library at build time) on one in-order queue.
 *
 * Device selection (the forms ocl_forms registers): a global index "0".."N" over every
 * platform's devices (platforms first, then devices, in the ICD loader's order); "" for the first
 * device that is not a simulator; "gpu", "cpu" or "accelerator" for the first such device of that
 * type; otherwise a case-insensitive substring of the platform name or vendor, the device vendor
 * or the device name ("pocl", "nvidia", "intel", "amd", "oclgrind"; PoCL's platform is "Portable
 * Computing Language" by "The pocl project"). A simulator (Oclgrind: every access checked, about
 * a thousand times slower) is used only when named by index or name.
 *
 * Programs are built lazily, once per precision, from the embedded source with
 * -DCLN_PRECISION=32|64 and no fast-math option, and cached in the backend. During a solve the
 * stage/finish/bias_act ops only enqueue kernels; count_active and buf_read are the only waits.
 */
#include "backends/opencl/opencl_internal.h"

static void ocl_destroy(cln_backend *be)
{
    if (!be)
        return;
    opencl_backend *ob = ocl(be);
    if (ob->queue)
        clFinish(ob->queue);
    /* CLBlast caches programs and overrides per device, process-wide; drop them before the
     * context they belong to goes (every context re-applies its override afterwards). */
    pthread_rwlock_wrlock(&ocl_clblast_lock);
    CLBlastClearCache();
    ++ocl_clblast_gen;
    pthread_rwlock_unlock(&ocl_clblast_lock);
    for (int i = 0; i < 2; ++i)
        ocl_program_release(&ob->prog[i]);
    if (ob->count_buf)
        clReleaseMemObject(ob->count_buf);
    for (int i = 0; i < 2; ++i)
        if (ob->tf32_buf[i])
            clReleaseMemObject(ob->tf32_buf[i]);
    if (ob->queue)
        clReleaseCommandQueue(ob->queue);
    if (ob->context)
        clReleaseContext(ob->context);
    free(ob);
}

static int ocl_supports(const cln_backend *be, clnode_precision prec)
{
    const opencl_backend *ob = (const opencl_backend *)(const void *)be;
    return prec == CLNODE_FP32 || (prec == CLNODE_FP64 && ob->has_fp64);
}

/* As the driver reports them: CL_DEVICE_SINGLE_FP_CONFIG and cl_khr_fp64. */
static void ocl_facts(const cln_backend *be, clnode_device_facts *out)
{
    const opencl_backend *ob = (const opencl_backend *)(const void *)be;
    out->fp64 = ob->has_fp64;
    if (!ob->fp_config_known)
        return;
    out->fma = (ob->fp_config & CL_FP_FMA) != 0;
    out->denormals = (ob->fp_config & CL_FP_DENORM) != 0;
    out->correctly_rounded_div_sqrt = (ob->fp_config & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
}

static const cln_backend_ops opencl_ops = {
    .name = "opencl",
    .tf32 = CLN_TF32_EMULATED,
    .destroy = ocl_destroy,
    .supports = ocl_supports,
    .buf_alloc = ocl_buf_alloc,
    .buf_free = ocl_buf_free,
    .buf_adopt = ocl_buf_adopt,
    .buf_write = ocl_buf_write,
    .buf_read = ocl_buf_read,
    .gemm = ocl_gemm,
    CLN_DEV_PROTO_OPS, /* the device protocol's ops (device_proto.h) */
    CLN_DEV_REV_OPS,   /* and its reverse pass (device_reverse.h) */
    CLN_DEV_TAN_OPS,   /* and its tangent pass (device_tangent.h) */
    .facts = ocl_facts,
    .rhs = cln_dev_rhs,
};

/* The device's facts at INFO level, once it is set up. */
static void ocl_log_device(clnode_context *ctx, const opencl_backend *ob)
{
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
            "OpenCL device: %s, fp64 %s, correctly rounded fp32 div/sqrt %s",
            ob->proto.base.device_name, ob->has_fp64 ? "yes" : "no", ob->cr_divsqrt ? "yes" : "no");
}

/* The forms of "opencl" device strings (lib/backends/registry.h). */
enum {
    OCL_FIRST,
    OCL_INDEX,
    OCL_GPU,
    OCL_CPU,
    OCL_ACCELERATOR,
    OCL_NAME
};
static const cln_device_form ocl_forms[] = {
    {"", OCL_FIRST, "the first OpenCL device"},
    {"N", OCL_INDEX, "OpenCL device N (all platforms, in the ICD loader's order)"},
    {"gpu", OCL_GPU, "the first OpenCL GPU"},
    {"cpu", OCL_CPU, "the first OpenCL CPU device"},
    {"accelerator", OCL_ACCELERATOR, "the first OpenCL accelerator"},
    {"NAME", OCL_NAME,
     "the first OpenCL device whose platform, vendor or name has NAME (pocl, amd)"},
};

static clnode_status ocl_create(clnode_context *ctx, const cln_device_sel *dsel, cln_backend **out)
{
    *out = NULL;
    ocl_select sel;
    memset(&sel, 0, sizeof sel);
    sel.spec = dsel->word;
    sel.index = -1;
    switch (dsel->variant) {
    case OCL_FIRST: /* the first device that is not a simulator */
        sel.any = 1;
        break;
    case OCL_INDEX:
        sel.index = dsel->index;
        break;
    case OCL_GPU:
        sel.type = CL_DEVICE_TYPE_GPU;
        break;
    case OCL_CPU:
        sel.type = CL_DEVICE_TYPE_CPU;
        break;
    case OCL_ACCELERATOR:
        sel.type = CL_DEVICE_TYPE_ACCELERATOR;
        break;
    default: /* OCL_NAME: a piece of the platform, vendor or device name */
        break;
    }
    clnode_status st = ocl_enumerate(ctx, ocl_select_one, &sel);
    if (st != CLNODE_OK)
        return st;
    if (!sel.found) {
        if (!sel.seen[0])
            return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                            "no OpenCL device \"%s\": no OpenCL platform or device found "
                            "(see /etc/OpenCL/vendors or OCL_ICD_VENDORS)",
                            dsel->spec);
        if (sel.any || sel.type)
            return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                            "no OpenCL device matches \"%s\" (a simulator such as Oclgrind is "
                            "used only when named, e.g. \"opencl:oclgrind\"); devices: %s",
                            dsel->spec, sel.seen);
        return cln_fail(ctx, CLNODE_ERR_NO_DEVICE, "no OpenCL device matches \"%s\"; devices: %s",
                        dsel->spec, sel.seen);
    }

    return ocl_setup(ctx, &sel.chosen, NULL, NULL, out);
}

const cln_backend_desc cln_opencl_backend = {
    .name = "opencl",
    .caps = 0, /* fp64 per device (cl_khr_fp64); tf32 emulated */
    .forms = ocl_forms,
    .num_forms = sizeof ocl_forms / sizeof ocl_forms[0],
    .available = NULL,
    .create = ocl_create,
    .list = ocl_list,
};

/* The backend on the device `chosen`: in a new context and in-order queue, or in the caller's
 * (adopt_ctx and adopt_queue, retained here and released by ocl_destroy, never owned). */
/* The device's fp32 configuration and work-group limits, into the backend. */
static void ocl_query_device(opencl_backend *ob)
{
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) ==
        CL_SUCCESS) {
        ob->cr_divsqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
        ob->fp_config = fp;
        ob->fp_config_known = 1;
    }
    ob->max_item[0] = ob->max_item[1] = ob->max_item[2] = 1;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof ob->max_item,
                        ob->max_item, NULL) != CL_SUCCESS)
        ob->max_item[0] = ob->max_item[1] = ob->max_item[2] = 1;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof ob->max_wg, &ob->max_wg,
                        NULL) != CL_SUCCESS ||
        ob->max_wg == 0)
        ob->max_wg = 1;
}

/* The device's name for the user and the probe cache's key: device, platform and driver with
 * their versions ("" where one cannot be read: never cached). */
static void ocl_name_device(opencl_backend *ob, const ocl_dev_info *chosen)
{
    cln_backend *be = &ob->proto.base;
    char clc[16];
    ocl_clc_version(chosen->clc, clc, sizeof clc);
    snprintf(be->device_name, sizeof be->device_name, "%.120s (%.100s, OpenCL C %.8s)",
             chosen->name, chosen->platform_name, clc);
    char drv[128] = "", dev[128] = "", plat[128] = "";
    const int known =
        clGetDeviceInfo(ob->device, CL_DRIVER_VERSION, sizeof drv - 1, drv, NULL) == CL_SUCCESS &&
        clGetDeviceInfo(ob->device, CL_DEVICE_VERSION, sizeof dev - 1, dev, NULL) == CL_SUCCESS &&
        clGetPlatformInfo(ob->platform, CL_PLATFORM_VERSION, sizeof plat - 1, plat, NULL) ==
            CL_SUCCESS;
    if (known)
        snprintf(be->cache_id, sizeof be->cache_id, "%.120s | %.100s | %.90s | %.90s | %.90s",
                 chosen->name, chosen->platform_name, drv, dev, plat);
}

/* The caller's context and queue, retained (adopt_ctx non-NULL), or a new context and in-order
 * queue on the device. */
static clnode_status ocl_open_queue(opencl_backend *ob, cl_context adopt_ctx,
                                    cl_command_queue adopt_queue)
{
    clnode_context *ctx = ob->proto.base.ctx;
    if (adopt_ctx) {
        OCL_CHECK(ctx, "clRetainContext(the caller's context)", clRetainContext(adopt_ctx));
        ob->context = adopt_ctx;
        OCL_CHECK(ctx, "clRetainCommandQueue(the caller's queue)",
                  clRetainCommandQueue(adopt_queue));
        ob->queue = adopt_queue;
        return CLNODE_OK;
    }
    cl_int e = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ob->platform,
                                           0};
    cl_context context = clCreateContext(props, 1, &ob->device, NULL, NULL, &e);
    if (!context || e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clCreateContext");
    ob->context = context;
    cl_command_queue queue = clCreateCommandQueue(ob->context, ob->device, 0, &e); /* in order */
    if (!queue || e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clCreateCommandQueue");
    ob->queue = queue;
    return CLNODE_OK;
}

clnode_status ocl_setup(clnode_context *ctx, const ocl_dev_info *chosen, cl_context adopt_ctx,
                        cl_command_queue adopt_queue, cln_backend **out)
{
    *out = NULL;
    opencl_backend *ob = calloc(1, sizeof *ob);
    CLN_CHECK(ctx, ob, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the OpenCL backend");
    ob->proto.base.ops = &opencl_ops;
    ob->proto.launch = &ocl_launch;
    ob->proto.base.ctx = ctx;
    ob->proto.base.group_steps = 8;
    ob->proto.base.row_align = 1;
    ob->platform = chosen->platform;
    ob->device = chosen->device;
    ob->has_fp64 = chosen->fp64;
    ob->zero_by_write = chosen->simulator;
    ocl_name_device(ob, chosen);
    ocl_query_device(ob);
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ocl_open_queue(ob, adopt_ctx, adopt_queue));
    cl_int e = CL_SUCCESS;
    cl_mem count = clCreateBuffer(ob->context, CL_MEM_READ_WRITE, sizeof(cl_int), NULL, &e);
    if (!count || e != CL_SUCCESS) {
        st = OCL_FAIL(ctx, e, "clCreateBuffer(active count)");
        goto fail;
    }
    ob->count_buf = count;
    ocl_log_device(ctx, ob);
    *out = &ob->proto.base;
    return CLNODE_OK;
fail:
    ocl_destroy(&ob->proto.base);
    return st;
}
