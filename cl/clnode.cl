/* clnode.cl - the OpenCL kernels of the solver: thin wrappers that map a work-item to one call of
 * the shared arithmetic of cln_step.h and cln_activation.h (the host backend runs the same calls in
 * loops, lib/backends/host/host_math.inc).
 *
 * Specialisation: CLN_PRECISION = 32 (default, see cln_prelude.h) or 64, set with -D when the
 * program is built (once per device and precision). Needs OpenCL C 1.2; cl_khr_fp64 for 64.
 *
 * Every kernel bounds-checks its ids: the host rounds the global sizes up to a multiple of the
 * work-group size, so no divisibility of B, N or the layer widths is assumed.
 *
 * Offsets, leading dimensions and sizes are passed as ulong/int (size_t cannot be a kernel
 * argument) and count elements of `real`.
 */
#include "cln_step.h"

#include "cln_activation.h"
#include "cln_dt0.h"
#include "cln_tf32.h"

/* cln_init: one work-item per trajectory.
 *   get_global_id(0) = b, trajectory (row), 0 <= b < KI->B. */
__kernel void cln_init(__global const cln_consts *K, __global const cln_iconsts *KI,
                       __global cln_rstate *RS, __global cln_istate *IS)
{
    const size_t b = get_global_id(0);
    if (b >= (size_t)KI->B)
        return;
    cln_init_traj(b, K, KI, RS, IS);
}

/* cln_dt0: the automatic first step (cln_dt0.h), one work-item per trajectory: phase 0 writes
 * the probe's argument into Z (cln_dt0_probe), phase 1 the first step into RS (cln_dt0_pick);
 * both move f0 between F blocks 0 and 1.
 * Frozen rows are skipped.
 *   get_global_id(0) = b, trajectory (row), 0 <= b < KI->B. */
__kernel void cln_dt0(int phase, __global const cln_consts *K, __global const cln_iconsts *KI,
                      __global cln_rstate *RS, __global const cln_istate *IS,
                      __global const real *Y, __global real *F, __global real *Z)
{
    const size_t b = get_global_id(0);
    if (b >= (size_t)KI->B || IS[b].done)
        return;
    if (phase == 0)
        cln_dt0_probe(b, K, KI, RS, Y, F, Z);
    else
        cln_dt0_pick(b, K, KI, RS, Y, F);
}

/* cln_stage: the stage argument Z of stage i, one work-item per (trajectory, column).
 *   get_global_id(0) = n, column of Z, 0 <= n < KI->ldz (fastest: Z and Y rows are
 *                      contiguous);
 *   get_global_id(1) = b, trajectory, 0 <= b < KI->B.
 * Frozen rows (IS done flag) are skipped, exactly as the host loop does: they keep their last
 * stage argument. */
__kernel void cln_stage(int i, __global const cln_consts *K, __global const cln_iconsts *KI,
                        __global const cln_rstate *RS, __global const cln_istate *IS,
                        __global const real *Y, __global const real *F, __global real *Z)
{
    const int n = (int)get_global_id(0);
    const size_t b = get_global_id(1);
    if (n >= KI->ldz || b >= (size_t)KI->B)
        return;
    if (IS[b].done)
        return;
    cln_stage_elem(i, b, n, K, KI, RS, Y, F, Z);
}

/* cln_finish: error estimate, norm, controller, saving and freezing, one work-item per
 * trajectory (the norm is a sequential sum over the row, as on the host); then, when next >= 0,
 * the stage argument of stage `next` of the trajectory's next attempt (the first stage the next
 * step evaluates), exactly as cln_stage would write it from the state this pass leaves: a row
 * that is frozen now is skipped, as cln_stage skips it. That saves the next step its cln_stage
 * launch and pass.
 *   get_global_id(0) = b, trajectory, 0 <= b < KI->B. */
__kernel void cln_finish(int next, __global const cln_consts *K, __global const cln_iconsts *KI,
                         __global cln_rstate *RS, __global cln_istate *IS, __global real *Y,
                         __global real *F, __global real *Z, __global const real *TS,
                         __global real *TSOUT, __global real *STT, __global real *STY)
{
    const size_t b = get_global_id(0);
    if (b >= (size_t)KI->B)
        return;
    cln_finish_traj(b, K, KI, RS, IS, Y, F, Z, TS, TSOUT, STT, STY);
    if (next < 0 || IS[b].done)
        return;
    for (int n = 0; n < KI->ldz; ++n)
        cln_stage_elem(next, b, n, K, KI, RS, Y, F, Z);
}

/* cln_bias_act_<activation>: C[i][j] = act(C[i][j] + bias[j]) on an m x n block of C starting at
 * element c_off with leading dimension ldc; the sum is formed exactly as the host loop forms it
 * (x + 0 without bias).
 *   get_global_id(0) = j, column, 0 <= j < n (fastest: rows are contiguous);
 *   get_global_id(1) = i, row, 0 <= i < m.
 * has_bias = 0: `bias` is not read (any buffer may be passed).
 * One kernel per activation rather than a switch on a code: with every activation inlined into
 * one body, PoCL's work-group vectoriser gave up and ran it scalar (softplus: 13.5 ns per element
 * on a 4096 x 100 block, 3.0 ns as its own kernel), and each kernel stays small. */
#define CLN_BIAS_ACT_ELEM(fn, c, bias, j, has_bias)                                                \
    (*(c) = fn(*(c) + ((has_bias) ? (bias)[j] : CLN_R(0.0))))

#define CLN_BIAS_ACT_KERNEL(name, fn)                                                              \
    __kernel void name(__global real *C, ulong c_off, ulong ldc, int m, int n,                     \
                       __global const real *bias, int has_bias)                                    \
    {                                                                                              \
        const int j = (int)get_global_id(0);                                                       \
        const int i = (int)get_global_id(1);                                                       \
        if (j >= n || i >= m)                                                                      \
            return;                                                                                \
        CLN_BIAS_ACT_ELEM(fn, C + c_off + (ulong)i * ldc + (ulong)j, bias, j, has_bias);           \
    }

/* cln_out_scale: the model's output scale, C[i][j] = cln_out_scale(C[i][j], s of column j) on
 * an m x n block of C starting at element c_off with leading dimension ldc; `scale` holds ns
 * values (1: one for every column).
 *   get_global_id(0) = j, column, 0 <= j < n;
 *   get_global_id(1) = i, row, 0 <= i < m. */
__kernel void cln_out_scale_pass(__global real *C, ulong c_off, ulong ldc, int m, int n,
                                 __global const real *scale, int ns)
{
    const int j = (int)get_global_id(0);
    const int i = (int)get_global_id(1);
    if (j >= n || i >= m)
        return;
    __global real *c = C + c_off + (ulong)i * ldc + (ulong)j;
    *c = cln_out_scale(*c, CLN_OUT_SCALE_AT(scale, ns, j));
}

/* cln_bias_act_stage_<activation>: the last layer's bias + activation on F block i (rows < m,
 * the live rows, as cln_bias_act_<activation> with C = F block i, ldc = N), when `apply`, and
 * the output scale (as cln_out_scale_pass) when ns != 0; then the stage argument of stage i + 1
 * (as cln_stage), which needs that element of F block i and the same elements of the blocks
 * before it: one launch and one pass instead of two. Each work-item reads back only what it
 * wrote itself.
 *   get_global_id(0) = n, column of Z, 0 <= n < KI->ldz (the first N are columns of F);
 *   get_global_id(1) = b, trajectory, 0 <= b < KI->B.
 * has_bias = 0: `bias` is not read, ns = 0: `scale` is not read (any buffer may be passed). */
#define CLN_BIAS_ACT_STAGE_KERNEL(name, fn)                                                        \
    __kernel void name(int i, __global const cln_consts *K, __global const cln_iconsts *KI,        \
                       __global const cln_rstate *RS, __global const cln_istate *IS,               \
                       __global const real *Y, __global real *F, __global real *Z, int m,          \
                       __global const real *bias, int has_bias, int apply,                         \
                       __global const real *scale, int ns)                                         \
    {                                                                                              \
        const int n = (int)get_global_id(0);                                                       \
        const size_t b = get_global_id(1);                                                         \
        if (n >= KI->ldz || b >= (size_t)KI->B)                                                    \
            return;                                                                                \
        if (n < KI->N && b < (size_t)m) {                                                          \
            __global real *f = F + ((size_t)i * (size_t)KI->B + b) * (size_t)KI->N + (size_t)n;    \
            if (apply)                                                                             \
                CLN_BIAS_ACT_ELEM(fn, f, bias, n, has_bias);                                       \
            if (ns)                                                                                \
                *f = cln_out_scale(*f, CLN_OUT_SCALE_AT(scale, ns, n));                            \
        }                                                                                          \
        if (IS[b].done)                                                                            \
            return;                                                                                \
        cln_stage_elem(i + 1, b, n, K, KI, RS, Y, F, Z);                                           \
    }

/* In CLN_ACT_* order: lib/backends/opencl/opencl.c creates them by these names. */
CLN_BIAS_ACT_KERNEL(cln_bias_act_identity, cln_identity)
CLN_BIAS_ACT_KERNEL(cln_bias_act_relu, cln_relu)
CLN_BIAS_ACT_KERNEL(cln_bias_act_tanh, cln_tanh)
CLN_BIAS_ACT_KERNEL(cln_bias_act_sigmoid, cln_sigmoid)
CLN_BIAS_ACT_KERNEL(cln_bias_act_softplus, cln_softplus)
CLN_BIAS_ACT_KERNEL(cln_bias_act_silu, cln_silu)
CLN_BIAS_ACT_KERNEL(cln_bias_act_gelu, cln_gelu)

/* In CLN_ACT_* order as well. */
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_identity, cln_identity)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_relu, cln_relu)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_tanh, cln_tanh)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_sigmoid, cln_sigmoid)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_softplus, cln_softplus)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_silu, cln_silu)
CLN_BIAS_ACT_STAGE_KERNEL(cln_bias_act_stage_gelu, cln_gelu)

/* cln_count_active: out[0] = number of trajectories b < B with IS[b].done == 0.
 * Launched as ONE work-group of get_local_size(0) work-items, a power of two, with `scratch`
 * holding that many ints:
 *   get_local_id(0) = l counts rows l, l + L, l + 2L, ... (L = local size), then a tree
 *   reduction in local memory; work-item 0 writes the total. */
__kernel void cln_count_active(__global const cln_istate *IS, int B, __global int *out,
                               __local int *scratch)
{
    const int l = (int)get_local_id(0);
    const int L = (int)get_local_size(0);
    int cnt = 0;
    for (int b = l; b < B; b += L)
        cnt += IS[b].done == 0;
    scratch[l] = cnt;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[0] = scratch[0];
}

/* cln_swap_rows: the active-set compaction's row moves (lib/solver/solver.c, cln_compact): for
 * each pair p, row pairs[2p] and row pairs[2p + 1] of a buffer swap their first `len` words. The
 * buffer is seen as 32-bit words (every row of the solver's buffers is a whole number of them),
 * rows of `stride` words from word `off`.
 *   get_global_id(0) = w, word of the row, 0 <= w < len (fastest: rows are contiguous);
 *   get_global_id(1) = p, pair, 0 <= p < npairs. */
__kernel void cln_swap_rows(__global uint *buf, ulong off, ulong stride, ulong len,
                            __global const int *pairs, int npairs)
{
    const ulong w = get_global_id(0);
    const int p = (int)get_global_id(1);
    if (w >= len || p >= npairs)
        return;
    __global uint *a = buf + off + (ulong)pairs[2 * p] * stride + w;
    __global uint *b = buf + off + (ulong)pairs[2 * p + 1] * stride + w;
    const uint t = *a;
    *a = *b;
    *b = t;
}

/* cln_tf32: the operand rounding of the tf32 GEMM emulation (cl/cln_tf32.h):
 * dst[i][j] = TF32(src[src_off + i * lds + j]) for a rows x cols block, dst packed (leading
 * dimension cols). Always float, whatever CLN_PRECISION (tf32 applies to fp32 solves only).
 *   get_global_id(0) = j, column, 0 <= j < cols (fastest: rows are contiguous);
 *   get_global_id(1) = i, row, 0 <= i < rows. */
__kernel void cln_tf32(__global const float *src, ulong src_off, ulong lds, int rows, int cols,
                       __global float *dst)
{
    const int j = (int)get_global_id(0);
    const int i = (int)get_global_id(1);
    if (j >= cols || i >= rows)
        return;
    const float x = src[src_off + (ulong)i * lds + (ulong)j];
    dst[(ulong)i * (ulong)cols + (ulong)j] = cln_tf32_round(x);
}

/* ---- the reverse pass (cl/cln_reverse_kernels.h; driven by lib/backends/device/device_reverse.c):
 * each kernel one call of its body per work-item, x = get_global_id(0) (fastest), y =
 * get_global_id(1), z = get_global_id(2) (the weight sums' blocks: three dimensions, so that no
 * kernel divides an index and takes its remainder too, which Oclgrind's checker cannot follow);
 * A: the rows still going back. cln_rev_act_<activation> and
 * cln_rev_delta_<activation> are one kernel per activation, as cln_bias_act is (their `act`
 * argument is that activation's code, and not read). */
#include "cln_reverse_kernels.h"

#define CLN_GX ((size_t)get_global_id(0))
#define CLN_GY ((size_t)get_global_id(1))
#define CLN_GZ ((size_t)get_global_id(2))

__kernel void cln_rev_zero(__global real *buf, long off, long n)
{
    cln_rev_zero_body(CLN_GX, buf, off, n);
}

/* cln_nonfinite_rows (cln_step.h: cln_nonfinite_row): x = row. */
__kernel void cln_nonfinite_rows(long rows, long cols, long ld, long off, __global const real *X,
                                 __global long *FLAG)
{
    cln_nonfinite_row(CLN_GX, rows, cols, ld, off, X, FLAG);
}

/* cln_bad_save_ts (cln_step.h: cln_bad_save_row): x = row. */
__kernel void cln_bad_save_ts(long rows, long cols, long ld, long within, __global const real *TS,
                              __global const cln_rstate *RS, __global long *FLAG)
{
    cln_bad_save_row(CLN_GX, rows, cols, ld, within, TS, RS, FLAG);
}

/* cln_rev_scatter (cln_reverse_kernels.h: cln_rev_scatter_body): x = value, y = row. */
__kernel void cln_rev_scatter(long w, long rows, long off, __global const long *RL,
                              __global const real *SRC, __global real *DST)
{
    cln_rev_scatter_body(CLN_GX, CLN_GY, w, rows, off, RL, SRC, DST);
}

__kernel void cln_rev_inputs(__global const long *JOB, __global const long *RL,
                             __global const real *INP, __global real *Z)
{
    cln_rev_inputs_body(CLN_GX, CLN_GY, JOB, RL, INP, Z);
}

__kernel void cln_rev_group(int A, long q, __global const long *JOB, __global long *RL,
                            __global const real *YS, __global real *SEG)
{
    cln_rev_group_body(CLN_GX, CLN_GY, (size_t)A, q, JOB, RL, YS, SEG);
}

__kernel void cln_rev_begin(int A, int nblocks, int mode, long s, long q, long j,
                            __global const long *JOB, __global const cln_consts *K,
                            __global const long *RL, __global const long *BR,
                            __global const real *TAU, __global const real *YS,
                            __global const real *SEG, __global real *RT, __global real *Y,
                            __global real *Z, __global long *NR)
{
    cln_rev_begin_body(CLN_GX, CLN_GY, (size_t)A, (size_t)nblocks, mode, s, q, j, JOB, K, RL, BR,
                       TAU, YS, SEG, RT, Y, Z, NR);
}

#define CLN_REV_ACT_KERNEL(name, code)                                                             \
    __kernel void name(int A, int act, long off, long n, long f_off, __global const long *JOB,     \
                       __global const real *bias, int has_bias, __global const real *scale,        \
                       __global real *P, __global real *O, __global real *F)                       \
    {                                                                                              \
        (void)act;                                                                                 \
        cln_rev_act_body(CLN_GX, CLN_GY, (size_t)A, code, off, n, f_off, JOB, bias, has_bias,      \
                         scale, P, O, F);                                                          \
    }

#define CLN_REV_DELTA_KERNEL(name, code)                                                           \
    __kernel void name(int A, int act, int i, long off, long n, int last,                          \
                       __global const long *JOB, __global const real *RT,                         \
                       __global const real *KB, __global const real *G,                            \
                       __global const real *scale, __global real *P, __global const real *O)       \
    {                                                                                              \
        (void)act;                                                                                 \
        cln_rev_delta_body(CLN_GX, CLN_GY, (size_t)A, code, i, off, n, last, JOB, RT, KB, G,       \
                           scale, P, O);                                                           \
    }

/* In CLN_ACT_* order: lib/backends/opencl/opencl_program.c creates them by these names. */
CLN_REV_ACT_KERNEL(cln_rev_act_identity, CLN_ACT_IDENTITY)
CLN_REV_ACT_KERNEL(cln_rev_act_relu, CLN_ACT_RELU)
CLN_REV_ACT_KERNEL(cln_rev_act_tanh, CLN_ACT_TANH)
CLN_REV_ACT_KERNEL(cln_rev_act_sigmoid, CLN_ACT_SIGMOID)
CLN_REV_ACT_KERNEL(cln_rev_act_softplus, CLN_ACT_SOFTPLUS)
CLN_REV_ACT_KERNEL(cln_rev_act_silu, CLN_ACT_SILU)
CLN_REV_ACT_KERNEL(cln_rev_act_gelu, CLN_ACT_GELU)
CLN_REV_DELTA_KERNEL(cln_rev_delta_identity, CLN_ACT_IDENTITY)
CLN_REV_DELTA_KERNEL(cln_rev_delta_relu, CLN_ACT_RELU)
CLN_REV_DELTA_KERNEL(cln_rev_delta_tanh, CLN_ACT_TANH)
CLN_REV_DELTA_KERNEL(cln_rev_delta_sigmoid, CLN_ACT_SIGMOID)
CLN_REV_DELTA_KERNEL(cln_rev_delta_softplus, CLN_ACT_SOFTPLUS)
CLN_REV_DELTA_KERNEL(cln_rev_delta_silu, CLN_ACT_SILU)
CLN_REV_DELTA_KERNEL(cln_rev_delta_gelu, CLN_ACT_GELU)

/* The fused last layer's kernels take the activation's code (a switch, as CUDA's kernels): they
 * run over the last layer's N columns alone. */
__kernel void cln_rev_act_next(int A, int act, long off, long i, __global const long *JOB,
                               __global const cln_consts *K, __global const real *bias,
                               int has_bias, __global const real *scale, __global const real *RT,
                               __global const real *Y, __global real *P, __global real *O,
                               __global real *F, __global real *Z)
{
    cln_rev_act_next_body(CLN_GX, CLN_GY, (size_t)A, act, off, i, JOB, K, bias, has_bias, scale, RT,
                          Y, P, O, F, Z);
}

__kernel void cln_rev_delta_arg(int A, int act, int i, long off, int askip,
                                __global const long *JOB, __global const cln_consts *K,
                                __global const real *RT, __global real *KB,
                                __global const real *G, __global const real *scale,
                                __global const real *YB1, __global real *YB0, __global real *CB,
                                __global real *P, __global const real *O)
{
    cln_rev_delta_arg_body(CLN_GX, CLN_GY, (size_t)A, act, i, off, askip, JOB, K, RT, KB, G, scale,
                           YB1, YB0, CB, P, O);
}

/* The products with their element-wise work inside them (cln_rev_gemm_act_body,
 * cln_rev_gemm_delta_body) take the activation's code too. */
__kernel void cln_rev_gemm_act(int A, int act, long off, long n, long fi, __global const real *X,
                               long x_off, long ldx, __global const real *W, long k,
                               __global const long *JOB, __global const cln_consts *K,
                               __global const real *bias, int has_bias, __global const real *scale,
                               __global const real *RT, __global const real *Y, __global real *P,
                               __global real *O, __global real *F, __global real *Z)
{
    cln_rev_gemm_act_body(CLN_GX, CLN_GY, (size_t)A, act, off, n, fi, X, x_off, ldx, W, k, JOB, K,
                          bias, has_bias, scale, RT, Y, P, O, F, Z);
}

__kernel void cln_rev_gemm_delta(int A, int act, int i, long off, long n, long k,
                                 __global const real *WT, long d_off, __global const long *JOB,
                                 __global const real *RT, __global const real *KB, __global real *G,
                                 __global const real *scale, __global real *P,
                                 __global const real *O)
{
    cln_rev_gemm_delta_body(CLN_GX, CLN_GY, (size_t)A, act, i, off, n, k, WT, d_off, JOB, RT, KB, G,
                            scale, P, O);
}

__kernel void cln_rev_y1(int A, long q, long j, __global const long *JOB,
                         __global const cln_consts *K, __global const long *RL,
                         __global const real *RT, __global const real *Y, __global const real *F,
                         __global const real *Z, __global real *SEG)
{
    cln_rev_y1_body(CLN_GX, CLN_GY, (size_t)A, q, j, JOB, K, RL, RT, Y, F, Z, SEG);
}

__kernel void cln_rev_events(int A, long s, __global const long *JOB, __global const cln_consts *K,
                             __global long *RL, __global const real *RT,
                             __global const cln_rev_event *EV, __global const real *COT,
                             __global const real *TS, __global real *YB0, __global real *YB1,
                             __global real *KB)
{
    cln_rev_events_body(CLN_GX, (size_t)A, s, JOB, K, RL, RT, EV, COT, TS, YB0, YB1, KB);
}

__kernel void cln_rev_arg(int A, int i, int skip, __global const long *JOB,
                          __global const cln_consts *K, __global const real *G,
                          __global const real *YB1, __global real *YB0, __global real *KB,
                          __global real *CB)
{
    cln_rev_arg_body(CLN_GX, CLN_GY, (size_t)A, i, skip, JOB, K, G, YB1, YB0, KB, CB);
}

__kernel void cln_rev_finish(long from, long to, __global const long *JOB, __global long *RL,
                             __global const cln_rev_event *EV, __global const real *COT,
                             __global real *YB1, __global real *YBAR)
{
    cln_rev_finish_body(CLN_GX, from, to, JOB, RL, EV, COT, YB1, YBAR);
}

__kernel void cln_rev_wsum(int nblocks, long in, long out, long p_off, long x_off, long x_stage,
                           long ldx, long wth, long bth, long sth, __global const long *JOB,
                           __global const long *NR, __global const long *BR,
                           __global const real *RT, __global const real *KB,
                           __global const real *P, __global const real *O,
                           __global const real *X, __global real *TH)
{
    cln_rev_wsum_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)nblocks, in, out, p_off, x_off, x_stage, ldx,
                      wth, bth, sth, JOB, NR, BR, RT, KB, P, O, X, TH);
}

__kernel void cln_rev_gather(int nblocks, long cols, long src_off, long src_stage, long ld,
                             long kmax, __global const long *JOB, __global const long *NR,
                             __global const long *BR, __global const real *SRC,
                             __global real *DST)
{
    cln_rev_gather_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)nblocks, cols, src_off, src_stage, ld, kmax, JOB,
                        NR, BR, SRC, DST);
}

__kernel void cln_rev_wadd(int nblocks, long in, long out, long wth, __global const long *JOB,
                           __global const long *NR, __global const real *GS, __global real *TH)
{
    cln_rev_wadd_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)nblocks, in, out, wth, JOB, NR, GS, TH);
}

__kernel void cln_rev_bsum(int nblocks, long out, long p_off, long bth, __global const long *JOB,
                           __global const long *NR, __global const long *BR,
                           __global const real *P, __global real *TH)
{
    cln_rev_bsum_body(CLN_GX, CLN_GY, (size_t)nblocks, out, p_off, bth, JOB, NR, BR, P, TH);
}

__kernel void cln_rev_ssum(int nblocks, long o_off, long sth, __global const long *JOB,
                           __global const long *NR, __global const long *BR,
                           __global const real *RT, __global const real *KB,
                           __global const real *O, __global real *TH)
{
    cln_rev_ssum_body(CLN_GX, CLN_GY, (size_t)nblocks, o_off, sth, JOB, NR, BR, RT, KB, O, TH);
}

/* ---- the tangent pass (clnode/tangent.h): cl/cln_tangent_kernels.h's bodies, as the reverse
 * pass's kernels are, beside which lib/backends/device/device_tangent.c runs them ---- */
#include "cln_tangent_kernels.h"

__kernel void cln_tan_begin(int A, long n, __global const long *JOB, __global const cln_consts *K,
                            __global const long *RL, __global const real *TAU,
                            __global const real *Y, __global real *RT, __global real *Z)
{
    cln_tan_begin_body(CLN_GX, CLN_GY, (size_t)A, n, JOB, K, RL, TAU, Y, RT, Z);
}

__kernel void cln_tan_stage(int A, int i, long nd, long Rd, __global const long *JOB,
                            __global const cln_consts *K, __global const real *RT,
                            __global const real *YD, __global const real *FD, __global real *ZD)
{
    cln_tan_stage_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)A, i, nd, Rd, JOB, K, RT, YD, FD, ZD);
}

__kernel void cln_tan_terms(int A, long n, long nd, long d, __global const real *T,
                             __global const real *DP, long db_off, int has_db, __global real *G)
{
    cln_tan_terms_body(CLN_GX, CLN_GY, (size_t)A, n, nd, d, T, DP, db_off, has_db, G);
}

__kernel void cln_tan_layer(int A, int act, long n, long nd, long off, __global const real *P,
                          __global const real *O, __global real *G)
{
    cln_tan_layer_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)A, act, n, nd, off, P, O, G);
}

__kernel void cln_tan_out(int A, int i, long nd, long Rd, long o_off, long ntheta, long s_off,
                            int has_ds, __global const long *JOB, __global const real *X,
                            __global const real *O, __global const real *scale,
                            __global const real *DP, __global real *FD)
{
    cln_tan_out_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)A, i, nd, Rd, o_off, ntheta, s_off, has_ds,
                       JOB, X, O, scale, DP, FD);
}

__kernel void cln_tan_y1(int A, long nd, long Rd, long nk, __global const long *JOB,
                         __global const cln_consts *K, __global const real *RT,
                         __global const real *YI, __global const real *F, __global const real *Z,
                         __global real *YO)
{
    cln_tan_y1_body(CLN_GX, CLN_GY, CLN_GZ, (size_t)A, nd, Rd, nk, JOB, K, RT, YI, F, Z, YO);
}

__kernel void cln_tan_points(int A, long step, long nd, __global const long *JOB,
                             __global const long *RL, __global const cln_rev_event *EV,
                             __global long *EVI, __global const real *YD, __global real *OUT)
{
    cln_tan_points_body(CLN_GX, (size_t)A, step, nd, JOB, RL, EV, EVI, YD, OUT);
}

__kernel void cln_tan_dense(int A, long n, long nd, long nk, __global const long *JOB,
                            __global const cln_consts *K, __global const long *RL,
                            __global const real *RT, __global const cln_rev_event *EV,
                            __global const real *TS, __global long *EVI, __global const real *YD,
                            __global const real *YD1, __global const real *FD, __global real *OUT)
{
    cln_tan_dense_body(CLN_GX, (size_t)A, n, nd, nk, JOB, K, RL, RT, EV, TS, EVI, YD, YD1, FD,
                       OUT);
}
