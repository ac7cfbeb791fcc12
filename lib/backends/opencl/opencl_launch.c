/* opencl_launch.c - the OpenCL backend's launches: the launch table of the device protocol
 * (lib/backends/device/device_proto.h), one NDRange enqueue per kernel, and the arguments that
 * stay for a solve. */
#include "backends/opencl/opencl_internal.h"

static clnode_status ocl_set_arg(clnode_context *ctx, cl_kernel k, cl_uint i, size_t size,
                                 const void *v, const char *kernel)
{
    const cl_int e = clSetKernelArg(k, i, size, v);
    if (e != CL_SUCCESS) {
        return cln_fail_native(ctx, (long)e, ocl_status(e, CLNODE_ERR_DEVICE),
                               "clSetKernelArg(%s, %u) failed: %s (%d)", kernel, (unsigned)i,
                               ocl_err_name(e), (int)e);
    }
    return CLNODE_OK;
}

/* solve_begin's argument setting: kernel name from the kernel field */
#define SB_ARG(k, i, v) CLN_TRY(st, ocl_set_arg(ctx, (k), (i), sizeof(v), &(v), #k))

/* cln_finish's arguments (cl/clnode.cl), the saved steps' STT and STY the last two. */
#define OCL_FINISH_ARGS 12

/* A buffer argument: NULL for a buffer the solve does not have (the bare vector-field loop of
 * bench.c has no saved points). */
static cl_mem ocl_mem(const cln_buf *b)
{
    return b ? b->mem : NULL;
}

static void ocl_state_free(void *state)
{
    free(state);
}

static size_t ocl_buf_size(const cln_buf *b)
{
    return b->size;
}

/* The work-group sizes of a solve's kernels on the device, into *os. */
static void ocl_solve_sizes(opencl_backend *ob, ocl_program *p, const cln_solve_dev *sd,
                            ocl_solve *os)
{
    os->l_rows = ocl_wg_limit(ob, p->finish, OCL_WG);
    {
        const size_t li = ocl_wg_limit(ob, p->init, OCL_WG);
        if (li < os->l_rows)
            os->l_rows = li;
    }
    os->g_rows = ocl_round_up(sd->B, os->l_rows);
    ocl_local_2d(ob, p, ocl_wg_limit(ob, p->stage, OCL_WG), sd->ldz, os->l_stage);
    os->g_stage[0] = ocl_round_up(sd->ldz, os->l_stage[0]);
    os->g_stage[1] = ocl_round_up(sd->B, os->l_stage[1]);
    os->l_count = ocl_wg_limit(ob, p->count, 256);
    for (size_t a = 0; a < OCL_NUM_ACT; ++a)
        ocl_local_2d(ob, p, p->lim_bias_stage[a], sd->ldz, os->l_bias_stage[a]);
}

/* A tf32 solve rounds the operands of every layer: the scratch for them now, and the fp32
 * program's rounding kernel. */
static clnode_status ocl_solve_tf32(opencl_backend *ob, const cln_solve_dev *sd)
{
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ocl_tf32_scratch(ob, 0, sd->B * sd->max_in * sizeof(float)));
    CLN_TRY(st, ocl_tf32_scratch(ob, 1, sd->max_weights * sizeof(float)));
    ocl_program *p32 = NULL;
    CLN_TRY(st, ocl_program_get(ob, CLNODE_FP32, &p32));
    if (!p32->lim_tf32)
        p32->lim_tf32 = ocl_wg_limit(ob, p32->tf32, OCL_WG);
fail:
    return st;
}

/* Every kernel argument that stays for the whole solve, once. */
static clnode_status ocl_solve_args(opencl_backend *ob, ocl_program *p, const cln_solve_dev *sd,
                                    ocl_solve *os)
{
    clnode_context *ctx = ob->proto.base.ctx;
    clnode_status st = CLNODE_OK;
    SB_ARG(p->init, 0, sd->CR->mem);
    SB_ARG(p->init, 1, sd->CI->mem);
    SB_ARG(p->init, 2, sd->RS->mem);
    SB_ARG(p->init, 3, sd->IS->mem);

    const cl_int zero = 0;
    SB_ARG(p->stage, 0, zero); /* the stage index, set per enqueue */
    SB_ARG(p->stage, 1, sd->CR->mem);
    SB_ARG(p->stage, 2, sd->CI->mem);
    SB_ARG(p->stage, 3, sd->RS->mem);
    SB_ARG(p->stage, 4, sd->IS->mem);
    SB_ARG(p->stage, 5, sd->Y->mem);
    SB_ARG(p->stage, 6, sd->F->mem);
    SB_ARG(p->stage, 7, sd->Z->mem);

    /* the output scale, or none (ns 0: any buffer, not read) */
    const cl_int ns = sd->scale ? (cl_int)sd->scale_n : 0;
    cl_mem smem = sd->scale ? sd->scale->mem : sd->F->mem;
    for (size_t a = 0; a < OCL_NUM_ACT; ++a) {
        cl_kernel k = p->bias_act_stage[a];
        SB_ARG(k, 12, smem);
        SB_ARG(k, 13, ns);
        SB_ARG(k, 0, zero); /* i, m, bias, has_bias and apply: set per enqueue */
        SB_ARG(k, 1, sd->CR->mem);
        SB_ARG(k, 2, sd->CI->mem);
        SB_ARG(k, 3, sd->RS->mem);
        SB_ARG(k, 4, sd->IS->mem);
        SB_ARG(k, 5, sd->Y->mem);
        SB_ARG(k, 6, sd->F->mem);
        SB_ARG(k, 7, sd->Z->mem);
    }

    /* the stage the next step starts with, computed at the end of cln_finish */
    const cl_int next = (cl_int)sd->first_stage;
    /* STT and STY last: ocl_launch_rebind sets them again when they grow */
    cl_mem fin[] = {ocl_mem(sd->CR),    ocl_mem(sd->CI),  ocl_mem(sd->RS), ocl_mem(sd->IS),
                    ocl_mem(sd->Y),     ocl_mem(sd->F),   ocl_mem(sd->Z),  ocl_mem(sd->TS),
                    ocl_mem(sd->TSOUT), ocl_mem(sd->STT), ocl_mem(sd->STY)};
    _Static_assert(sizeof fin / sizeof fin[0] + 1 == OCL_FINISH_ARGS, "cln_finish's arguments");
    SB_ARG(p->finish, 0, next);
    for (cl_uint i = 0; i < sizeof fin / sizeof fin[0]; ++i)
        SB_ARG(p->finish, i + 1, fin[i]);

    SB_ARG(p->count, 0, sd->IS->mem);
    SB_ARG(p->count, 1, os->B);
    SB_ARG(p->count, 2, ob->count_buf);
    CLN_TRY(st,
            ocl_set_arg(ctx, p->count, 3, os->l_count * sizeof(cl_int), NULL, "cln_count_active"));
fail:
    return st;
}

/* The launch state of a solve (device_proto.h: cln_dev_launch.solve_begin). */
static clnode_status ocl_launch_begin(cln_backend *be, cln_solve_dev *sd, void **state)
{
    opencl_backend *ob = ocl(be);
    clnode_context *ctx = be->ctx;
    ocl_program *p = NULL;
    clnode_status st = ocl_program_get(ob, sd->prec, &p);
    if (st != CLNODE_OK)
        return st;
    ocl_solve *os = calloc(1, sizeof *os);
    CLN_CHECK(ctx, os, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the OpenCL solve state");
    *state = os; /* released by the protocol (ocl_state_free) */
    os->p = p;
    os->B = (cl_int)sd->B;
    ocl_solve_sizes(ob, p, sd, os);
    if (sd->gemm_mode == CLNODE_GEMM_TF32)
        CLN_TRY(st, ocl_solve_tf32(ob, sd));
    CLN_TRY(st, ocl_solve_args(ob, p, sd, os));
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "OpenCL solve: B=%zu ldz=%zu; rows %zu/%zu, stage %zux%zu/%zux%zu, count %zu", sd->B,
            sd->ldz, os->g_rows, os->l_rows, os->g_stage[0], os->g_stage[1], os->l_stage[0],
            os->l_stage[1], os->l_count);
fail:
    return st;
}

/* Enqueues kernel k over a dims-dimensional NDRange (g global, l local items). */
static clnode_status ocl_run(cln_backend *be, cl_kernel k, cl_uint dims, const size_t *g,
                             const size_t *l, const char *what)
{
    const cl_int e = clEnqueueNDRangeKernel(ocl(be)->queue, k, dims, NULL, g, l, 0, NULL, NULL);
    if (e != CL_SUCCESS)
        return OCL_FAIL(be->ctx, e, what);
    return CLNODE_OK;
}

/* Enqueues a 2-D kernel over an nx (fastest) by ny range in work-groups under `limit`. */
static clnode_status ocl_run_2d(cln_backend *be, const ocl_solve *os, cl_kernel k, size_t limit,
                                size_t nx, size_t ny, const char *what)
{
    size_t l[2], g[2];
    ocl_local_2d(ocl(be), os->p, limit, nx, l);
    g[0] = ocl_round_up(nx, l[0]);
    g[1] = ocl_round_up(ny, l[1]);
    return ocl_run(be, k, 2, g, l, what);
}

static clnode_status ocl_launch_init(cln_backend *be, cln_solve_dev *sd, void *state)
{
    (void)sd;
    const ocl_solve *os = state;
    return ocl_run(be, os->p->init, 1, &os->g_rows, &os->l_rows,
                   "clEnqueueNDRangeKernel(cln_init)");
}

/* cln_dt0 over the live rows, its arguments set at each of its two launches per solve. */
static clnode_status ocl_launch_dt0(cln_backend *be, cln_solve_dev *sd, void *state, int phase)
{
    const ocl_solve *os = state;
    cl_kernel k = os->p->dt0;
    const cl_int ph = phase;
    OCL_ARG(be->ctx, k, 0, ph);
    cl_mem args[] = {sd->CR->mem, sd->CI->mem, sd->RS->mem, sd->IS->mem,
                     sd->Y->mem,  sd->F->mem,  sd->Z->mem};
    for (cl_uint i = 0; i < sizeof args / sizeof args[0]; ++i)
        OCL_ARG(be->ctx, k, i + 1, args[i]);
    const size_t l = ocl_wg_limit(ocl(be), k, OCL_WG);
    const size_t g = ocl_round_up(sd->live, l);
    return ocl_run(be, k, 1, &g, &l, "clEnqueueNDRangeKernel(cln_dt0)");
}

static clnode_status ocl_launch_stage(cln_backend *be, cln_solve_dev *sd, void *state, int i)
{
    const ocl_solve *os = state;
    const cl_int ci = i;
    OCL_ARG(be->ctx, os->p->stage, 0, ci);
    const size_t g[2] = {os->g_stage[0], ocl_round_up(sd->live, os->l_stage[1])};
    return ocl_run(be, os->p->stage, 2, g, os->l_stage, "clEnqueueNDRangeKernel(cln_stage)");
}

static clnode_status ocl_launch_finish(cln_backend *be, cln_solve_dev *sd, void *state)
{
    const ocl_solve *os = state;
    const size_t g = ocl_round_up(sd->live, os->l_rows);
    return ocl_run(be, os->p->finish, 1, &g, &os->l_rows, "clEnqueueNDRangeKernel(cln_finish)");
}

static clnode_status ocl_launch_bias_act(cln_backend *be, void *state, cln_buf *C, size_t c_off,
                                         size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    clnode_context *ctx = be->ctx;
    const ocl_solve *os = state;
    cl_kernel k = os->p->bias_act[act];
    const cl_ulong off = c_off, ld = ldc;
    const cl_int mi = (cl_int)m, ni = (cl_int)n, has_bias = bias != NULL;
    cl_mem bmem = bias ? bias->mem : C->mem; /* not read without bias */
    OCL_ARG(ctx, k, 0, C->mem);
    OCL_ARG(ctx, k, 1, off);
    OCL_ARG(ctx, k, 2, ld);
    OCL_ARG(ctx, k, 3, mi);
    OCL_ARG(ctx, k, 4, ni);
    OCL_ARG(ctx, k, 5, bmem);
    OCL_ARG(ctx, k, 6, has_bias);
    return ocl_run_2d(be, os, k, os->p->lim_bias[act], n, m,
                      "clEnqueueNDRangeKernel(cln_bias_act)");
}

static clnode_status ocl_launch_out_scale(cln_backend *be, cln_solve_dev *sd, void *state,
                                          cln_buf *C, size_t c_off, size_t ldc, size_t m, size_t n)
{
    clnode_context *ctx = be->ctx;
    const ocl_solve *os = state;
    cl_kernel k = os->p->out_scale;
    const cl_ulong off = c_off, ld = ldc;
    const cl_int mi = (cl_int)m, ni = (cl_int)n, ns = (cl_int)sd->scale_n;
    OCL_ARG(ctx, k, 0, C->mem);
    OCL_ARG(ctx, k, 1, off);
    OCL_ARG(ctx, k, 2, ld);
    OCL_ARG(ctx, k, 3, mi);
    OCL_ARG(ctx, k, 4, ni);
    OCL_ARG(ctx, k, 5, sd->scale->mem);
    OCL_ARG(ctx, k, 6, ns);
    return ocl_run_2d(be, os, k, os->p->lim_scale, n, m,
                      "clEnqueueNDRangeKernel(cln_out_scale_pass)");
}

/* cln_bias_act_stage over (column of Z, live row); its output scale is set for the solve in
 * ocl_solve_args. */
static clnode_status ocl_launch_bias_act_stage(cln_backend *be, cln_solve_dev *sd, void *state,
                                               int i, cln_buf *bias, int act, int apply)
{
    clnode_context *ctx = be->ctx;
    const ocl_solve *os = state;
    cl_kernel k = os->p->bias_act_stage[act];
    const cl_int ci = i, m = (cl_int)sd->live, has_bias = bias != NULL, ap = apply;
    cl_mem bmem = bias ? bias->mem : sd->F->mem; /* not read without bias */
    OCL_ARG(ctx, k, 0, ci);
    OCL_ARG(ctx, k, 8, m);
    OCL_ARG(ctx, k, 9, bmem);
    OCL_ARG(ctx, k, 10, has_bias);
    OCL_ARG(ctx, k, 11, ap);
    const size_t *l = os->l_bias_stage[act];
    const size_t g[2] = {ocl_round_up(sd->ldz, l[0]), ocl_round_up(sd->live, l[1])};
    return ocl_run(be, k, 2, g, l, "clEnqueueNDRangeKernel(cln_bias_act_stage)");
}

static clnode_status ocl_launch_count(cln_backend *be, cln_solve_dev *sd, void *state, long *count)
{
    opencl_backend *ob = ocl(be);
    const ocl_solve *os = state;
    const cl_int live = (cl_int)sd->live; /* rows past it are frozen */
    OCL_ARG(be->ctx, os->p->count, 1, live);
    const clnode_status st = ocl_run(be, os->p->count, 1, &os->l_count, &os->l_count,
                                     "clEnqueueNDRangeKernel(cln_count_active)");
    if (st != CLNODE_OK)
        return st;
    cl_int n = 0;
    OCL_CHECK(
        be->ctx, "clEnqueueReadBuffer (active-trajectory count)",
        clEnqueueReadBuffer(ob->queue, ob->count_buf, CL_TRUE, 0, sizeof n, &n, 0, NULL, NULL));
    *count = n;
    return CLNODE_OK;
}

static clnode_status ocl_launch_swap(cln_backend *be, cln_solve_dev *sd, void *state, cln_buf *buf,
                                     size_t off_words, size_t stride_words, size_t len_words,
                                     size_t npairs)
{
    clnode_context *ctx = be->ctx;
    const ocl_solve *os = state;
    cl_kernel k = os->p->swap;
    const cl_ulong o = off_words, sw = stride_words, lw = len_words;
    const cl_int np = (cl_int)npairs;
    OCL_ARG(ctx, k, 0, buf->mem);
    OCL_ARG(ctx, k, 1, o);
    OCL_ARG(ctx, k, 2, sw);
    OCL_ARG(ctx, k, 3, lw);
    OCL_ARG(ctx, k, 4, sd->PAIRS->mem);
    OCL_ARG(ctx, k, 5, np);
    return ocl_run_2d(be, os, k, os->p->lim_swap, len_words, npairs,
                      "clEnqueueNDRangeKernel(cln_swap_rows)");
}

static clnode_status ocl_launch_copy(cln_backend *be, cln_buf *dst, size_t dst_off,
                                     size_t dst_stride, cln_buf *src, size_t src_off,
                                     size_t src_stride, size_t len, size_t rows)
{
    const size_t so[3] = {src_off, 0, 0}, dof[3] = {dst_off, 0, 0}, region[3] = {len, rows, 1};
    OCL_CHECK(be->ctx, "clEnqueueCopyBufferRect (the saved steps, to larger buffers)",
              clEnqueueCopyBufferRect(ocl(be)->queue, src->mem, dst->mem, so, dof, region,
                                      src_stride, 0, dst_stride, 0, 0, NULL, NULL));
    return CLNODE_OK;
}

static clnode_status ocl_launch_rebind(cln_backend *be, cln_solve_dev *sd, void *state)
{
    const ocl_solve *os = state;
    cl_kernel k = os->p->finish;
    OCL_ARG(be->ctx, k, OCL_FINISH_ARGS - 2, sd->STT->mem);
    OCL_ARG(be->ctx, k, OCL_FINISH_ARGS - 1, sd->STY->mem);
    return CLNODE_OK;
}

/* Reverse kernel `kernel` (of activation act for CLN_RK_ACT and CLN_RK_DELTA) of program p, and
 * its work-group size limit; NULL for an activation code that has no kernel. */
static cl_kernel ocl_rev_kernel(const ocl_program *p, cln_rev_kernel kernel, int act, size_t *lim)
{
    if (kernel == CLN_RK_ACT || kernel == CLN_RK_DELTA) {
        if (act < 0 || act >= OCL_NUM_ACT)
            return NULL;
        *lim = kernel == CLN_RK_ACT ? p->lim_rev_act[act] : p->lim_rev_delta[act];
        return kernel == CLN_RK_ACT ? p->rev_act[act] : p->rev_delta[act];
    }
    *lim = p->lim_rev[kernel];
    return p->rev[kernel];
}

/* The reverse pass's launches (device_proto.h: cln_dev_launch.rev_launch): the arguments set in
 * order, then an n[0] by n[1] by n[2] NDRange (of fewer dimensions where the last are 1). */
static clnode_status ocl_rev_launch(cln_backend *be, clnode_precision prec, cln_rev_kernel kernel,
                                    int act, const cln_dev_arg *args, size_t nargs,
                                    const size_t n[3])
{
    opencl_backend *ob = ocl(be);
    clnode_context *ctx = be->ctx;
    ocl_program *p = NULL;
    clnode_status st = ocl_program_get(ob, prec, &p);
    if (st != CLNODE_OK)
        return st;
    size_t lim = 1;
    cl_kernel k = ocl_rev_kernel(p, kernel, act, &lim);
    const char *name = cln_rev_kernel_names[kernel];
    CLN_CHECK(ctx, k, CLNODE_ERR_INTERNAL, "%s of activation code %d", name, act);
    for (size_t i = 0; i < nargs && st == CLNODE_OK; ++i) {
        const cl_mem m = args[i].buf ? args[i].buf->mem : NULL;
        const cl_int v32 = (cl_int)args[i].v;
        const cl_long v64 = (cl_long)args[i].v;
        if (args[i].kind == CLN_ARG_BUF)
            st = ocl_set_arg(ctx, k, (cl_uint)i, sizeof m, &m, name);
        else if (args[i].kind == CLN_ARG_I32)
            st = ocl_set_arg(ctx, k, (cl_uint)i, sizeof v32, &v32, name);
        else
            st = ocl_set_arg(ctx, k, (cl_uint)i, sizeof v64, &v64, name);
    }
    if (st != CLNODE_OK)
        return st;
    const cl_uint dims = n[2] > 1 ? 3 : n[1] > 1 ? 2 : 1;
    size_t l[3] = {lim, 1, 1}, g[3];
    if (dims > 1)
        ocl_local_2d(ob, p, lim, n[0], l);
    for (int i = 0; i < 3; ++i)
        g[i] = ocl_round_up(n[i], l[i]);
    char what[64];
    snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", name);
    return ocl_run(be, k, dims, g, l, what);
}

/* The device's memory (device_proto.h: cln_dev_launch.memory). */
static void ocl_memory(cln_backend *be, size_t *total, size_t *max_buffer)
{
    const opencl_backend *ob = ocl(be);
    cl_ulong t = 0, m = 0;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof t, &t, NULL) != CL_SUCCESS)
        t = 0;
    if (clGetDeviceInfo(ob->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof m, &m, NULL) != CL_SUCCESS)
        m = 0;
    *total = t > SIZE_MAX ? SIZE_MAX : (size_t)t;
    *max_buffer = m > SIZE_MAX ? SIZE_MAX : (size_t)m;
}

const cln_dev_launch ocl_launch = {
    .api = "OpenCL",
    .rev_sums_by_gemm = 1, /* CLBlast's tuned GEMM: on PoCL 3x the one kernel's speed */
    /* on PoCL the kernels' one sum per work item beats CLBlast's GEMM and a launch beside it up to
     * about 16 rows of the seed model (1.8x at 1 row, 1.3x at 8, even at 16, 0.7x at 32) */
    .rev_fused_rows = 16,
    .buf_size = ocl_buf_size,
    .solve_begin = ocl_launch_begin,
    .state_free = ocl_state_free,
    .init = ocl_launch_init,
    .dt0 = ocl_launch_dt0,
    .stage = ocl_launch_stage,
    .finish = ocl_launch_finish,
    .bias_act = ocl_launch_bias_act,
    .out_scale = ocl_launch_out_scale,
    .bias_act_stage = ocl_launch_bias_act_stage,
    .count = ocl_launch_count,
    .swap = ocl_launch_swap,
    .copy = ocl_launch_copy,
    .rebind = ocl_launch_rebind,
    .rev_launch = ocl_rev_launch,
    .memory = ocl_memory,
};
