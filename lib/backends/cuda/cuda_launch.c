/* cuda_launch.c - the CUDA backend's launches: the launch table of the device protocol
 * (lib/backends/device/device_proto.h), one cudaLaunchKernel per kernel. */
#include "backends/cuda/cuda_internal.h"

/* Blocks of `threads` covering `items` (at least one block). */
clnode_status cu_blocks(clnode_context *ctx, unsigned long long items, unsigned threads,
                        unsigned *out)
{
    const unsigned long long g = items ? (items + threads - 1) / threads : 1;
    CLN_CHECK(ctx, g <= INT_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "%llu work items exceed the CUDA grid", items);
    *out = (unsigned)g;
    return CLNODE_OK;
}

clnode_status cu_launch(cln_backend *be, cudaKernel_t k, unsigned blocks, unsigned threads,
                        void **args, const char *name)
{
    cuda_backend *cb = cub(be);
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    const dim3 grid = {blocks, 1, 1}, block = {threads, 1, 1};
    const cudaError_t e = CU(cudaLaunchKernel)((const void *)k, grid, block, args, 0, cb->stream);
    if (e != cudaSuccess) {
        (void)CU(cudaGetLastError)();
        return cln_fail_native(be->ctx, (long)e, cu_status(e),
                               "cudaLaunchKernel(%s, %u x %u) failed: %s (%d: %s)", name, blocks,
                               threads, CU(cudaGetErrorName)(e), (int)e, CU(cudaGetErrorString)(e));
    }
    return CLNODE_OK;
}

static void cu_state_free(void *state)
{
    free(state);
}

static size_t cu_buf_size(const cln_buf *b)
{
    return b->size;
}

/* The device pointers of the solve into cs, and the argument arrays of the launches that keep
 * theirs for the whole solve pointing at them. */
static void cu_solve_args(cuda_backend *cb, const cln_solve_dev *sd, cu_solve *cs)
{
    cs->B = (int)sd->B;
    cs->CR = sd->CR->p;
    cs->CI = sd->CI->p;
    cs->RS = sd->RS->p;
    cs->IS = sd->IS->p;
    cs->Y = sd->Y->p;
    cs->F = sd->F->p;
    cs->Z = sd->Z->p;
    cs->TS = sd->TS->p;
    cs->TSOUT = sd->TSOUT->p;
    cs->STT = sd->STT->p;
    cs->STY = sd->STY->p;
    cs->count = cb->count_dev;
    cs->next = (int)sd->first_stage; /* the stage cln_finish prepares for the next step */

    void *init[] = {&cs->CR, &cs->CI, &cs->RS, &cs->IS};
    void *stage[] = {&cs->stage_i, &cs->CR, &cs->CI, &cs->RS, &cs->IS, &cs->Y, &cs->F, &cs->Z};
    void *finish[] = {&cs->next, &cs->CR, &cs->CI, &cs->RS,    &cs->IS,  &cs->Y,
                      &cs->F,    &cs->Z,  &cs->TS, &cs->TSOUT, &cs->STT, &cs->STY};
    void *count[] = {&cs->IS, &cs->B, &cs->count};
    memcpy(cs->a_init, init, sizeof init);
    memcpy(cs->a_stage, stage, sizeof stage);
    memcpy(cs->a_finish, finish, sizeof finish);
    memcpy(cs->a_count, count, sizeof count);
}

/* The launch state of a solve (device_proto.h: cln_dev_launch.solve_begin). */
static clnode_status cu_launch_begin(cln_backend *be, cln_solve_dev *sd, void **state)
{
    cuda_backend *cb = cub(be);
    clnode_context *ctx = be->ctx;
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    cu_program *p = NULL;
    st = cu_program_get(cb, sd->prec, &p);
    if (st != CLNODE_OK)
        return st;
    cu_solve *cs = calloc(1, sizeof *cs);
    CLN_CHECK(ctx, cs, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the CUDA solve state");
    *state = cs; /* released by the protocol (cu_state_free) */
    cs->p = p;
    cu_solve_args(cb, sd, cs);
    CLN_TRY(st, cu_blocks(ctx, sd->B, p->t_rows, &cs->g_rows));
    CLN_TRY(st, cu_blocks(ctx, (unsigned long long)sd->B * sd->ldz, p->t_stage, &cs->g_stage));
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "CUDA solve: B=%zu ldz=%zu; rows %u x %u, stage %u x %u", sd->B, sd->ldz, cs->g_rows,
            p->t_rows, cs->g_stage, p->t_stage);
fail:
    return st;
}

/* Launches kernel k over `items` work items in blocks of `threads`. */
static clnode_status cu_launch_over(cln_backend *be, cudaKernel_t k, unsigned long long items,
                                    unsigned threads, void **args, const char *name)
{
    unsigned blocks = 0;
    const clnode_status st = cu_blocks(be->ctx, items, threads, &blocks);
    if (st != CLNODE_OK)
        return st;
    return cu_launch(be, k, blocks, threads, args, name);
}

static clnode_status cu_launch_init(cln_backend *be, cln_solve_dev *sd, void *state)
{
    (void)sd;
    cu_solve *cs = state;
    return cu_launch(be, cs->p->init, cs->g_rows, cs->p->t_rows, cs->a_init, "cln_init");
}

/* The kernels' bounds stay at B; the launches cover the live rows. */
static clnode_status cu_launch_stage(cln_backend *be, cln_solve_dev *sd, void *state, int i)
{
    cu_solve *cs = state;
    cs->stage_i = i; /* read by cudaLaunchKernel through a_stage[0] */
    return cu_launch_over(be, cs->p->stage, (unsigned long long)sd->live * sd->ldz, cs->p->t_stage,
                          cs->a_stage, "cln_stage");
}

static clnode_status cu_launch_finish(cln_backend *be, cln_solve_dev *sd, void *state)
{
    cu_solve *cs = state;
    return cu_launch_over(be, cs->p->finish, sd->live, cs->p->t_rows, cs->a_finish, "cln_finish");
}

static clnode_status cu_launch_dt0(cln_backend *be, cln_solve_dev *sd, void *state, int phase)
{
    cu_solve *cs = state;
    int ph = phase;
    void *args[] = {&ph, &cs->CR, &cs->CI, &cs->RS, &cs->IS, &cs->Y, &cs->F, &cs->Z};
    return cu_launch_over(be, cs->p->dt0, sd->live, cs->p->t_dt0, args, "cln_dt0");
}

static clnode_status cu_launch_bias_act(cln_backend *be, void *state, cln_buf *C, size_t c_off,
                                        size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    const cu_solve *cs = state;
    void *c = C->p, *b = bias ? bias->p : NULL; /* not read without bias */
    unsigned long long off = c_off, ld = ldc;
    int mi = (int)m, ni = (int)n, has_bias = bias != NULL, a = act;
    void *args[] = {&c, &off, &ld, &mi, &ni, &b, &has_bias, &a};
    return cu_launch_over(be, cs->p->bias_act, (unsigned long long)m * n, cs->p->t_bias, args,
                          "cln_bias_act");
}

static clnode_status cu_launch_out_scale(cln_backend *be, cln_solve_dev *sd, void *state,
                                         cln_buf *C, size_t c_off, size_t ldc, size_t m, size_t n)
{
    const cu_solve *cs = state;
    void *c = C->p, *s = sd->scale->p;
    unsigned long long off = c_off, ld = ldc;
    int mi = (int)m, ni = (int)n, ns = (int)sd->scale_n;
    void *args[] = {&c, &off, &ld, &mi, &ni, &s, &ns};
    return cu_launch_over(be, cs->p->scale, (unsigned long long)m * n, cs->p->t_scale, args,
                          "cln_out_scale_pass");
}

/* cln_bias_act_stage over (live row, column of Z). */
static clnode_status cu_launch_bias_act_stage(cln_backend *be, cln_solve_dev *sd, void *state,
                                              int i, cln_buf *bias, int act, int apply)
{
    cu_solve *cs = state;
    void *b = bias ? bias->p : NULL; /* not read without bias */
    int ci = i, m = (int)sd->live, has_bias = bias != NULL, a = act, ap = apply;
    void *s = sd->scale ? sd->scale->p : NULL; /* not read without a scale */
    int ns = sd->scale ? (int)sd->scale_n : 0;
    void *args[] = {&ci, &cs->CR, &cs->CI,   &cs->RS, &cs->IS, &cs->Y, &cs->F, &cs->Z,
                    &m,  &b,      &has_bias, &ap,     &a,      &s,     &ns};
    return cu_launch_over(be, cs->p->bias_act_stage, (unsigned long long)sd->live * sd->ldz,
                          cs->p->t_bias_stage, args, "cln_bias_act_stage");
}

static clnode_status cu_launch_count(cln_backend *be, cln_solve_dev *sd, void *state, long *count)
{
    cuda_backend *cb = cub(be);
    cu_solve *cs = state;
    cs->B = (int)sd->live; /* the rows counted, read through a_count[1]; rows past are frozen */
    const clnode_status st =
        cu_launch(be, cs->p->count, 1, CU_COUNT_THREADS, cs->a_count, "cln_count_active");
    if (st != CLNODE_OK)
        return st;
    CU_CHECK(be->ctx, "cudaMemcpyAsync (active-trajectory count)",
             CU(cudaMemcpyAsync)(cb->count_host, cb->count_dev, sizeof(int), cudaMemcpyDeviceToHost,
                                 cb->stream));
    /* also where a fault of any kernel enqueued since the last wait surfaces */
    CU_CHECK(be->ctx, "cudaStreamSynchronize (active-trajectory count)",
             CU(cudaStreamSynchronize)(cb->stream));
    *count = *cb->count_host;
    return CLNODE_OK;
}

/* cln_swap_rows over (pair, word of the row). */
static clnode_status cu_launch_swap(cln_backend *be, cln_solve_dev *sd, void *state, cln_buf *buf,
                                    size_t off_words, size_t stride_words, size_t len_words,
                                    size_t npairs)
{
    const cu_solve *cs = state;
    void *b = buf->p, *pairs = sd->PAIRS->p;
    unsigned long long o = off_words, sw = stride_words, lw = len_words;
    int np = (int)npairs;
    void *args[] = {&b, &o, &sw, &lw, &pairs, &np};
    return cu_launch_over(be, cs->p->swap, (unsigned long long)npairs * lw, cs->p->t_swap, args,
                          "cln_swap_rows");
}

/* One 2D copy on the stream (a copy per row where a pitch is beyond what cudaMemcpy2DAsync
 * takes). */
static clnode_status cu_launch_copy(cln_backend *be, cln_buf *dst, size_t dst_off,
                                    size_t dst_stride, cln_buf *src, size_t src_off,
                                    size_t src_stride, size_t len, size_t rows)
{
    cuda_backend *cb = cub(be);
    clnode_context *ctx = be->ctx;
    clnode_status st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    unsigned char *d = (unsigned char *)dst->p + dst_off;
    const unsigned char *sp = (const unsigned char *)src->p + src_off;
    if (dst_stride <= INT32_MAX && src_stride <= INT32_MAX) {
        CU_CHECK(ctx, "cudaMemcpy2DAsync (rows, device to device)",
                 CU(cudaMemcpy2DAsync)(d, dst_stride, sp, src_stride, len, rows,
                                       cudaMemcpyDeviceToDevice, cb->stream));
        return CLNODE_OK;
    }
    for (size_t r = 0; r < rows; ++r)
        CU_CHECK(ctx, "cudaMemcpyAsync (a row, device to device)",
                 CU(cudaMemcpyAsync)(d + r * dst_stride, sp + r * src_stride, len,
                                     cudaMemcpyDeviceToDevice, cb->stream));
    return CLNODE_OK;
}

/* cln_finish reads the saved steps through cs->STT and cs->STY (a_finish points at them), so the
 * new pointers take effect at its next launch. */
static clnode_status cu_launch_rebind(cln_backend *be, cln_solve_dev *sd, void *state)
{
    (void)be;
    cu_solve *cs = state;
    cs->STT = sd->STT->p;
    cs->STY = sd->STY->p;
    return CLNODE_OK;
}

/* The most arguments of a reverse kernel, its three grid sizes included. */
#define CU_REV_ARGS 24

/* The reverse pass's launches (device_proto.h: cln_dev_launch.rev_launch): the arguments in
 * order, then the range's three sizes; one thread per item of the n[0] by n[1] by n[2] range. */
static clnode_status cu_rev_launch(cln_backend *be, clnode_precision prec, cln_rev_kernel kernel,
                                   int act, const cln_dev_arg *args, size_t nargs,
                                   const size_t n[3])
{
    (void)act; /* an argument of CUDA's cln_rev_act and cln_rev_delta */
    clnode_context *ctx = be->ctx;
    CLN_CHECK(ctx, nargs + 3 <= CU_REV_ARGS, CLNODE_ERR_INTERNAL, "%s takes %zu arguments",
              cln_rev_kernel_names[kernel], nargs);
    cu_program *p = NULL;
    clnode_status st = cu_program_get(cub(be), prec, &p);
    if (st != CLNODE_OK)
        return st;
    void *ptr[CU_REV_ARGS], *argv[CU_REV_ARGS];
    long long i64[CU_REV_ARGS];
    int i32[CU_REV_ARGS];
    unsigned long long grid[3] = {n[0], n[1], n[2]};
    for (size_t i = 0; i < nargs; ++i) {
        ptr[i] = args[i].buf ? args[i].buf->p : NULL;
        i64[i] = args[i].v;
        i32[i] = (int)args[i].v;
        argv[i] = args[i].kind == CLN_ARG_BUF   ? (void *)&ptr[i]
                  : args[i].kind == CLN_ARG_I32 ? (void *)&i32[i]
                                                : (void *)&i64[i];
    }
    for (int i = 0; i < 3; ++i)
        argv[nargs + (size_t)i] = &grid[i];
    return cu_launch_over(be, p->rev[kernel], grid[0] * grid[1] * grid[2], p->t_rev[kernel], argv,
                          cln_rev_kernel_names[kernel]);
}

/* The device's memory (device_proto.h: cln_dev_launch.memory): what is free now, as the most a
 * buffer can take too. */
static void cu_memory(cln_backend *be, size_t *total, size_t *max_buffer)
{
    size_t free_bytes = 0, all = 0;
    if (cu_bind(cub(be)) != CLNODE_OK || CU(cudaMemGetInfo)(&free_bytes, &all) != cudaSuccess) {
        (void)CU(cudaGetLastError)();
        free_bytes = 0;
    }
    *total = free_bytes;
    *max_buffer = free_bytes;
}

const cln_dev_launch cu_launches = {
    .api = "CUDA",
    .rev_sums_by_gemm = 0, /* the one kernel: the ordered GEMM's thread per element, one launch */
    .rev_fused_rows =
        0, /* not yet run on a GPU: the ordered GEMM's launch and the kernel beside it */
    .buf_size = cu_buf_size,
    .solve_begin = cu_launch_begin,
    .state_free = cu_state_free,
    .init = cu_launch_init,
    .stage = cu_launch_stage,
    .finish = cu_launch_finish,
    .dt0 = cu_launch_dt0,
    .bias_act = cu_launch_bias_act,
    .out_scale = cu_launch_out_scale,
    .bias_act_stage = cu_launch_bias_act_stage,
    .count = cu_launch_count,
    .swap = cu_launch_swap,
    .copy = cu_launch_copy,
    .rebind = cu_launch_rebind,
    .rev_launch = cu_rev_launch,
    .memory = cu_memory,
};
