/* opencl_program.c - the OpenCL backend's program cache: cl/clnode.cl built once per precision
 * and its kernels, with their work-group sizes. */
#include "backends/opencl/opencl_internal.h"

static const char *const ocl_bias_act_names[OCL_NUM_ACT] = {
    "cln_bias_act_identity", "cln_bias_act_relu", "cln_bias_act_tanh", "cln_bias_act_sigmoid",
    "cln_bias_act_softplus", "cln_bias_act_silu", "cln_bias_act_gelu"};
static const char *const ocl_bias_act_stage_names[OCL_NUM_ACT] = {
    "cln_bias_act_stage_identity", "cln_bias_act_stage_relu",     "cln_bias_act_stage_tanh",
    "cln_bias_act_stage_sigmoid",  "cln_bias_act_stage_softplus", "cln_bias_act_stage_silu",
    "cln_bias_act_stage_gelu"};

/* The reverse pass's kernels of one program (NULL: none yet), each with its limit. */
static void ocl_rev_slots(ocl_program *p, cl_kernel **ks, size_t **lims, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < CLN_RK_COUNT; ++i) {
        if (i == CLN_RK_ACT || i == CLN_RK_DELTA)
            continue;
        ks[*n] = &p->rev[i];
        lims[(*n)++] = &p->lim_rev[i];
    }
    for (size_t a = 0; a < OCL_NUM_ACT; ++a) {
        ks[*n] = &p->rev_act[a];
        lims[(*n)++] = &p->lim_rev_act[a];
        ks[*n] = &p->rev_delta[a];
        lims[(*n)++] = &p->lim_rev_delta[a];
    }
}

/* The names of the slots of ocl_rev_slots, in its order, into names (OCL_REV_KERNELS). */
#define OCL_REV_KERNELS (CLN_RK_COUNT - 2 + 2 * OCL_NUM_ACT)
static void ocl_rev_names(char names[OCL_REV_KERNELS][40])
{
    size_t n = 0;
    for (size_t i = 0; i < CLN_RK_COUNT; ++i)
        if (i != CLN_RK_ACT && i != CLN_RK_DELTA)
            snprintf(names[n++], 40, "%s", cln_rev_kernel_names[i]);
    for (size_t a = 0; a < OCL_NUM_ACT; ++a) {
        const char *act = ocl_bias_act_names[a] + strlen("cln_bias_act_"); /* "identity", ... */
        snprintf(names[n++], 40, "%s_%s", cln_rev_kernel_names[CLN_RK_ACT], act);
        snprintf(names[n++], 40, "%s_%s", cln_rev_kernel_names[CLN_RK_DELTA], act);
    }
}

void ocl_program_release(ocl_program *p)
{
    cl_kernel *rk[OCL_REV_KERNELS];
    size_t *rl[OCL_REV_KERNELS], nr = 0;
    ocl_rev_slots(p, rk, rl, &nr);
    for (size_t i = 0; i < nr; ++i) {
        if (*rk[i])
            clReleaseKernel(*rk[i]);
        *rk[i] = NULL;
    }
    cl_kernel *ks[] = {&p->init, &p->stage, &p->finish,    &p->count,
                       &p->tf32, &p->swap,  &p->out_scale, &p->dt0};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
        if (*ks[i])
            clReleaseKernel(*ks[i]);
        *ks[i] = NULL;
    }
    for (size_t i = 0; i < OCL_NUM_ACT; ++i) {
        if (p->bias_act[i])
            clReleaseKernel(p->bias_act[i]);
        p->bias_act[i] = NULL;
        if (p->bias_act_stage[i])
            clReleaseKernel(p->bias_act_stage[i]);
        p->bias_act_stage[i] = NULL;
    }
    if (p->prog)
        clReleaseProgram(p->prog);
    p->prog = NULL;
}

/* Builds (once) the program of precision `prec` and creates its kernels. */
/* The build log of `prog` (malloc'ed), or NULL when it is empty, only whitespace or unreadable. */
static char *ocl_build_log(const opencl_backend *ob, cl_program prog)
{
    size_t size = 0;
    if (clGetProgramBuildInfo(prog, ob->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) !=
            CL_SUCCESS ||
        size <= 1)
        return NULL;
    char *log = malloc(size + 1);
    if (!log || clGetProgramBuildInfo(prog, ob->device, CL_PROGRAM_BUILD_LOG, size, log, NULL) !=
                    CL_SUCCESS) {
        free(log);
        return NULL;
    }
    log[size] = '\0';
    const char *q = log;
    while (*q && isspace((unsigned char)*q))
        ++q;
    if (!*q) { /* a log of only whitespace is no log */
        free(log);
        return NULL;
    }
    return log;
}

/* Kernel `name` of the built program p->prog into *k. */
static clnode_status ocl_create_kernel(clnode_context *ctx, ocl_program *p, const char *name,
                                       cl_kernel *k)
{
    cl_int e = CL_SUCCESS;
    *k = clCreateKernel(p->prog, name, &e);
    if (!*k || e != CL_SUCCESS) {
        *k = NULL;
        return cln_fail_native(ctx, (long)e, ocl_status(e, CLNODE_ERR_BUILD),
                               "clCreateKernel(%s) failed: %s (%d)", name, ocl_err_name(e), (int)e);
    }
    return CLNODE_OK;
}

/* Every kernel of the built program p->prog. */
static clnode_status ocl_create_kernels(clnode_context *ctx, ocl_program *p)
{
    struct {
        cl_kernel *k;
        const char *name;
    } ks[8 + 2 * OCL_NUM_ACT] = {{&p->init, "cln_init"},
                                 {&p->stage, "cln_stage"},
                                 {&p->finish, "cln_finish"},
                                 {&p->count, "cln_count_active"},
                                 {&p->tf32, "cln_tf32"},
                                 {&p->swap, "cln_swap_rows"},
                                 {&p->out_scale, "cln_out_scale_pass"},
                                 {&p->dt0, "cln_dt0"}};
    for (size_t i = 0; i < OCL_NUM_ACT; ++i) {
        ks[8 + i].k = &p->bias_act[i];
        ks[8 + i].name = ocl_bias_act_names[i];
        ks[8 + OCL_NUM_ACT + i].k = &p->bias_act_stage[i];
        ks[8 + OCL_NUM_ACT + i].name = ocl_bias_act_stage_names[i];
    }
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
        const clnode_status st = ocl_create_kernel(ctx, p, ks[i].name, ks[i].k);
        if (st != CLNODE_OK)
            return st;
    }
    char names[OCL_REV_KERNELS][40];
    cl_kernel *rk[OCL_REV_KERNELS];
    size_t *rl[OCL_REV_KERNELS], nr = 0;
    ocl_rev_names(names);
    ocl_rev_slots(p, rk, rl, &nr);
    for (size_t i = 0; i < nr; ++i) {
        const clnode_status st = ocl_create_kernel(ctx, p, names[i], rk[i]);
        if (st != CLNODE_OK)
            return st;
    }
    return CLNODE_OK;
}

/* Builds p->prog from the embedded source for `prec` with the options opts names (no fast-math
 * option: the kernels must round like the host; correctly rounded fp32 division and sqrt where
 * the device offers them, as the host's are). The build log goes to the logger. */
static clnode_status ocl_program_compile(opencl_backend *ob, clnode_precision prec, ocl_program *p,
                                         char *opts, size_t opts_size)
{
    clnode_context *ctx = ob->proto.base.ctx;
    cl_int e = CL_SUCCESS;
    const char *src = cln_kernel_source;
    cl_program prog = clCreateProgramWithSource(ob->context, 1, &src, NULL, &e);
    if (!prog || e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clCreateProgramWithSource");
    p->prog = prog;
    snprintf(opts, opts_size, "-DCLN_PRECISION=%d%s", prec == CLNODE_FP64 ? 64 : 32,
             prec == CLNODE_FP32 && ob->cr_divsqrt ? " -cl-fp32-correctly-rounded-divide-sqrt"
                                                   : "");
    const cl_int be_ = clBuildProgram(p->prog, 1, &ob->device, opts, NULL, NULL);
    char *log = ocl_build_log(ob, p->prog);
    if (log)
        cln_log(ctx, be_ == CL_SUCCESS ? CLNODE_LOG_DEBUG : CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL,
                "OpenCL build log (%s, %s):\n%s", ob->proto.base.device_name, opts, log);
    clnode_status st = CLNODE_OK;
    if (be_ != CL_SUCCESS) {
        st = cln_fail_native(ctx, (long)be_,
                             be_ == CL_BUILD_PROGRAM_FAILURE ? CLNODE_ERR_BUILD
                                                             : ocl_status(be_, CLNODE_ERR_BUILD),
                             "clBuildProgram(%s) failed: %s (%d)%s%.600s", opts, ocl_err_name(be_),
                             (int)be_, log ? "; log: " : "", log ? log : "");
    }
    free(log);
    return st;
}

/* The work-group size limits of p's kernels on the device. */
static void ocl_program_limits(opencl_backend *ob, ocl_program *p)
{
    for (size_t i = 0; i < OCL_NUM_ACT; ++i) {
        p->lim_bias[i] = ocl_wg_limit(ob, p->bias_act[i], OCL_WG);
        p->lim_bias_stage[i] = ocl_wg_limit(ob, p->bias_act_stage[i], OCL_WG);
    }
    cl_kernel *rk[OCL_REV_KERNELS];
    size_t *rl[OCL_REV_KERNELS], nr = 0;
    ocl_rev_slots(p, rk, rl, &nr);
    for (size_t i = 0; i < nr; ++i)
        *rl[i] = ocl_wg_limit(ob, *rk[i], OCL_WG);
    p->lim_swap = ocl_wg_limit(ob, p->swap, OCL_WG);
    p->lim_scale = ocl_wg_limit(ob, p->out_scale, OCL_WG);
    size_t multiple = 0;
    const cl_int e =
        clGetKernelWorkGroupInfo(p->stage, ob->device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof multiple, &multiple, NULL);
    p->wg_multiple = e == CL_SUCCESS && multiple != 0 ? multiple : OCL_WG;
}

/* Builds (once) the program of precision `prec`, its kernels and their limits. */
static clnode_status ocl_program_build(opencl_backend *ob, clnode_precision prec, ocl_program *p)
{
    clnode_context *ctx = ob->proto.base.ctx;
    char opts[128], what[48];
    snprintf(what, sizeof what, "the OpenCL program (%s)", clnode_precision_name(prec));
    const double t_build = cln_build_begin(ctx, ob->proto.base.device_name, what);
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ocl_program_compile(ob, prec, p, opts, sizeof opts));
    CLN_TRY(st, ocl_create_kernels(ctx, p));
    ocl_program_limits(ob, p);
    cln_build_end(ctx, ob->proto.base.device_name, what, t_build, 1);
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL, "OpenCL program options for %s: %s",
            ob->proto.base.device_name, opts);
    return CLNODE_OK;
fail:
    cln_build_end(ctx, ob->proto.base.device_name, what, t_build, 0);
    ocl_program_release(p);
    return st;
}

/* The program cache: the program of precision `prec`, built on first use. */
clnode_status ocl_program_get(opencl_backend *ob, clnode_precision prec, ocl_program **out)
{
    ocl_program *p = &ob->prog[prec == CLNODE_FP64];
    const clnode_status st = p->prog ? CLNODE_OK : ocl_program_build(ob, prec, p);
    *out = st == CLNODE_OK ? p : NULL;
    return st;
}

/* Largest power of two <= x (x >= 1). */
static size_t ocl_pow2_floor(size_t x)
{
    size_t p = 1;
    while (p <= x / 2)
        p *= 2;
    return p;
}

/* Work-group size limit of kernel k on the device, capped at `cap`, as a power of two. */
size_t ocl_wg_limit(opencl_backend *ob, cl_kernel k, size_t cap)
{
    size_t w = 0;
    if (clGetKernelWorkGroupInfo(k, ob->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof w, &w, NULL) !=
            CL_SUCCESS ||
        w == 0)
        w = 1;
    if (w > ob->max_wg)
        w = ob->max_wg;
    if (w > cap)
        w = cap;
    return ocl_pow2_floor(w ? w : 1);
}

size_t ocl_round_up(size_t x, size_t m)
{
    return (x + m - 1) / m * m;
}

/* A 2-D work-group for an NDRange of nx (fastest) by ny items: x covers the row up to the
 * device's preferred work-group size multiple (a warp on NVIDIA; PoCL's vector width on a CPU),
 * y takes the rest of the limit. Wider x only pads more: on PoCL a 100-wide row in 64 x 1 groups
 * (128 items, 28% idle) ran softplus at 2.9 ns per element, in 8 x 8 groups at 1.7 ns. */
void ocl_local_2d(const opencl_backend *ob, const ocl_program *p, size_t limit, size_t nx,
                  size_t l[2])
{
    size_t lx = 1;
    while (lx < nx && lx < limit && lx < p->wg_multiple && lx < ob->max_item[0])
        lx *= 2;
    if (lx > limit)
        lx = limit;
    if (lx > ob->max_item[0])
        lx = ocl_pow2_floor(ob->max_item[0]);
    size_t ly = limit / lx;
    if (ly > ob->max_item[1])
        ly = ob->max_item[1];
    l[0] = lx;
    l[1] = ly ? ly : 1;
}
