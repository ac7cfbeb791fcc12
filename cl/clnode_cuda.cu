/* clnode_cuda.cu - the CUDA kernels of the solver: thin wrappers that map a thread to one call of
 * the shared arithmetic of cln_step.h and cln_activation.h, exactly as cl/clnode.cl does for
 * OpenCL and lib/backends/host/host_math.inc does in host loops.
 *
 * Compiled at run time by NVRTC (lib/backends/cuda/cuda.c), once per (device, precision), from the
 * text embedded into the library by cl/embed.py (local includes inlined), with
 *   -DCLN_PRECISION=32|64 --fmad=false --ftz=false --prec-div=true --prec-sqrt=true
 * and no fast-math option. It also compiles with nvcc (-Icl --fmad=false).
 *
 * Work mapping: every kernel but cln_count_active is one-dimensional over a flat 64-bit index
 *   g = blockIdx.x * blockDim.x + threadIdx.x
 * split into (row, column) as the host loops nest them (row outer, column inner), so no grid
 * dimension but x is used and no divisibility of B, N or the layer widths is assumed: every
 * kernel bounds-checks g (the host rounds the grid up to whole blocks).
 *
 * Offsets and leading dimensions are unsigned long long and count elements of `real`. */
#include "cln_step.h"

#include "cln_activation.h"
#include "cln_dt0.h"
#include "cln_gemm.h"

/* Threads of cln_count_active's single block (a power of two). */
#define CLN_COUNT_THREADS 256

__device__ static inline unsigned long long cln_gid(void)
{
    return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

/* cln_init: g = b, trajectory (row), 0 <= b < KI->B. */
extern "C" __global__ void cln_init(const cln_consts *K, const cln_iconsts *KI, cln_rstate *RS,
                                    cln_istate *IS)
{
    const unsigned long long b = cln_gid();
    if (b >= (unsigned long long)KI->B)
        return;
    cln_init_traj((size_t)b, K, KI, RS, IS);
}

/* cln_dt0: the automatic first step (cln_dt0.h): phase 0 the probe's argument into Z, phase 1
 * the first step into RS; frozen rows are skipped.
 *   g = b, trajectory (row), 0 <= b < KI->B. */
extern "C" __global__ void cln_dt0(int phase, const cln_consts *K, const cln_iconsts *KI,
                                   cln_rstate *RS, const cln_istate *IS, const real *Y, real *F,
                                   real *Z)
{
    const unsigned long long b = cln_gid();
    if (b >= (unsigned long long)KI->B || IS[b].done)
        return;
    if (phase == 0)
        cln_dt0_probe((size_t)b, K, KI, RS, Y, F, Z);
    else
        cln_dt0_pick((size_t)b, K, KI, RS, Y, F);
}

/* This thread's place in the B x ldz grid of the stage kernels: row b (trajectory) and column
 * n of Z (g = b * ldz + n); 0 for a thread past the grid's end. */
__device__ static inline int cln_row_col(const cln_iconsts *KI, size_t *b, int *n)
{
    const unsigned long long g = cln_gid();
    const unsigned long long ldz = (unsigned long long)KI->ldz;
    if (g >= (unsigned long long)KI->B * ldz)
        return 0;
    *b = (size_t)(g / ldz);
    *n = (int)(g % ldz);
    return 1;
}

/* cln_stage: the stage argument Z of stage i.
 *   g = b * ldz + n: b trajectory (0 <= b < KI->B), n column of Z (0 <= n < ldz =
 *   KI->ldz); consecutive threads walk a row of Z and Y.
 * Frozen rows (IS done flag) are skipped, exactly as the host loop does: they keep their last
 * stage argument. */
extern "C" __global__ void cln_stage(int i, const cln_consts *K, const cln_iconsts *KI,
                                     const cln_rstate *RS, const cln_istate *IS, const real *Y,
                                     const real *F, real *Z)
{
    size_t b;
    int n;
    if (!cln_row_col(KI, &b, &n))
        return;
    if (IS[b].done)
        return;
    cln_stage_elem(i, b, n, K, KI, RS, Y, F, Z);
}

/* cln_finish: error estimate, norm, controller, saving and freezing; then, when next >= 0, the
 * stage argument of stage `next` of the trajectory's next attempt, exactly as cln_stage would
 * write it from the state this pass leaves (a row frozen now is skipped, as cln_stage skips it).
 *   g = b, trajectory, 0 <= b < KI->B; the norm is a sequential sum over the row, as on
 *   the host. */
extern "C" __global__ void cln_finish(int next, const cln_consts *K, const cln_iconsts *KI,
                                      cln_rstate *RS, cln_istate *IS, real *Y, real *F, real *Z,
                                      const real *TS, real *TSOUT, real *STT, real *STY)
{
    const unsigned long long b = cln_gid();
    if (b >= (unsigned long long)KI->B)
        return;
    cln_finish_traj((size_t)b, K, KI, RS, IS, Y, F, Z, TS, TSOUT, STT, STY);
    if (next < 0 || IS[b].done)
        return;
    for (int n = 0; n < KI->ldz; ++n)
        cln_stage_elem(next, (size_t)b, n, K, KI, RS, Y, F, Z);
}

/* cln_bias_act: C[i][j] = act(C[i][j] + bias[j]) on an m x n block of C starting at element
 * c_off with leading dimension ldc; the sum is formed exactly as the host loop forms it (x + 0
 * without bias).
 *   g = i * n + j: i row (0 <= i < m), j column (0 <= j < n).
 * has_bias = 0: `bias` is not read (may be NULL); ns = 0: `scale` is not read (may be NULL).
 * act: a CLN_ACT_* code, uniform over the grid. */
extern "C" __global__ void cln_bias_act(real *C, unsigned long long c_off, unsigned long long ldc,
                                        int m, int n, const real *bias, int has_bias, int act)
{
    const unsigned long long g = cln_gid();
    if (g >= (unsigned long long)m * (unsigned long long)n)
        return;
    const unsigned long long i = g / (unsigned long long)n;
    const int j = (int)(g % (unsigned long long)n);
    real *c = C + c_off + i * ldc + (unsigned long long)j;
    const real x = *c + (has_bias ? bias[j] : CLN_R(0.0));
    *c = cln_activate(act, x);
}

/* cln_out_scale_pass: the model's output scale, C[i][j] = cln_out_scale(C[i][j], s of column j)
 * on an m x n block of C from element c_off, leading dimension ldc; `scale` holds ns values (1:
 * one for every column). g = i * n + j. */
extern "C" __global__ void cln_out_scale_pass(real *C, unsigned long long c_off,
                                              unsigned long long ldc, int m, int n,
                                              const real *scale, int ns)
{
    const unsigned long long g = cln_gid();
    if (g >= (unsigned long long)m * (unsigned long long)n)
        return;
    const unsigned long long i = g / (unsigned long long)n;
    const int j = (int)(g % (unsigned long long)n);
    real *c = C + c_off + i * ldc + (unsigned long long)j;
    *c = cln_out_scale(*c, CLN_OUT_SCALE_AT(scale, ns, j));
}

/* cln_bias_act_stage: the last layer's bias + activation on F block i (rows < m, the live rows,
 * as cln_bias_act with C = F block i, ldc = N), when `apply`, and the output scale (as
 * cln_out_scale_pass) when ns != 0; then the stage argument of stage i + 1 (as cln_stage), which
 * needs that element of F block i and the same elements of the blocks before it: one launch and one
 * pass instead of two. Each thread reads back only what it wrote itself. g = b * ldz + n: b
 * trajectory (0 <= b < KI->B), n column of Z (0 <= n < KI->ldz; the first N are columns of F).
 * has_bias = 0: `bias` is not read (may be NULL); ns = 0: `scale` is not read (may be NULL).
 * act: a CLN_ACT_* code, uniform over the grid. */
extern "C" __global__ void cln_bias_act_stage(int i, const cln_consts *K, const cln_iconsts *KI,
                                              const cln_rstate *RS, const cln_istate *IS,
                                              const real *Y, real *F, real *Z, int m,
                                              const real *bias, int has_bias, int apply, int act,
                                              const real *scale, int ns)
{
    size_t b;
    int n;
    if (!cln_row_col(KI, &b, &n))
        return;
    if (n < KI->N && b < (size_t)m) {
        real *c = F + ((size_t)i * (size_t)KI->B + b) * (size_t)KI->N + (size_t)n;
        if (apply) {
            const real x = *c + (has_bias ? bias[n] : CLN_R(0.0));
            *c = cln_activate(act, x);
        }
        if (ns)
            *c = cln_out_scale(*c, CLN_OUT_SCALE_AT(scale, ns, n));
    }
    if (IS[b].done)
        return;
    cln_stage_elem(i + 1, b, n, K, KI, RS, Y, F, Z);
}

/* cln_gemm_ordered: C[i][j] = sum_k A[i][k] B[j][k] for an m x n block, each element cln_gemm.h's
 * ordered sum (in order k = 0, 1, ... with fma from 0: the host's ordered GEMM and CLBlast's
 * per-work-item sum), so strict GEMMs round alike on every backend. g = i * n + j: i row of C
 * (0 <= i < m), j column (0 <= j < n). Offsets and leading dimensions in elements; k may be 0
 * (C = 0). */
extern "C" __global__ void cln_gemm_ordered(const real *A, unsigned long long a_off,
                                            unsigned long long lda, const real *B,
                                            unsigned long long b_off, unsigned long long ldb,
                                            real *C, unsigned long long c_off,
                                            unsigned long long ldc, int m, int n, int k)
{
    const unsigned long long g = cln_gid();
    if (g >= (unsigned long long)m * (unsigned long long)n)
        return;
    const unsigned long long i = g / (unsigned long long)n;
    const unsigned long long j = g % (unsigned long long)n;
    C[c_off + i * ldc + j] = cln_gemm_dot(A + a_off + i * lda, B + b_off + j * ldb, k);
}

/* cln_count_active: out[0] = number of trajectories b < B with IS[b].done == 0.
 * Launched as ONE block of CLN_COUNT_THREADS threads: thread l counts rows l, l + L, l + 2L, ...
 * (L = CLN_COUNT_THREADS), then a tree reduction in shared memory; thread 0 writes the total. */
extern "C" __global__ void cln_count_active(const cln_istate *IS, int B, int *out)
{
    __shared__ int scratch[CLN_COUNT_THREADS];
    const int l = (int)threadIdx.x;
    int cnt = 0;
    for (long long b = l; b < (long long)B; b += CLN_COUNT_THREADS)
        cnt += IS[b].done == 0;
    scratch[l] = cnt;
    __syncthreads();
    for (int s = CLN_COUNT_THREADS / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] += scratch[l + s];
        __syncthreads();
    }
    if (l == 0)
        out[0] = scratch[0];
}

/* cln_swap_rows: the active-set compaction's row moves (lib/solver/solver.c, cln_compact): for
 * each pair p, row pairs[2p] and row pairs[2p + 1] of a buffer swap their first `len` words. The
 * buffer is seen as 32-bit words (every row of the solver's buffers is a whole number of them),
 * rows of `stride` words from word `off`.
 *   g = p * len + w: p pair (0 <= p < npairs), w word of the row (0 <= w < len). */
extern "C" __global__ void cln_swap_rows(unsigned int *buf, unsigned long long off,
                                         unsigned long long stride, unsigned long long len,
                                         const int *pairs, int npairs)
{
    const unsigned long long g = cln_gid();
    if (len == 0 || g >= (unsigned long long)npairs * len)
        return;
    const unsigned long long p = g / len, w = g % len;
    unsigned int *a = buf + off + (unsigned long long)pairs[2 * p] * stride + w;
    unsigned int *b = buf + off + (unsigned long long)pairs[2 * p + 1] * stride + w;
    const unsigned int t = *a;
    *a = *b;
    *b = t;
}

/* ---- the reverse pass (cl/cln_reverse_kernels.h; driven by lib/backends/device/device_reverse.c):
 * each kernel one call of its body per thread, over an nx (fastest) by ny by nz grid flattened into
 * g (x = g % nx, y = g / nx % ny, z = g / (nx ny); nx, ny and nz are each kernel's last three
 * arguments); A: the rows still
 * going back. cln_rev_act and cln_rev_delta take the activation's code (OpenCL has one kernel per
 * activation). */
#include "cln_reverse_kernels.h"

typedef unsigned long long cln_u64;

/* This thread's (x, y, z) in the nx by ny by nz grid (x fastest); 0 past its end. */
__device__ static inline int cln_grid_xyz(cln_u64 nx, cln_u64 ny, cln_u64 nz, size_t *x, size_t *y,
                                          size_t *z)
{
    const cln_u64 g = cln_gid();
    if (nx == 0 || ny == 0 || g >= nx * ny * nz)
        return 0;
    *x = (size_t)(g % nx);
    *y = (size_t)(g / nx % ny);
    *z = (size_t)(g / nx / ny);
    return 1;
}

#define CLN_XY                                                                                     \
    size_t x, y, z;                                                                                \
    if (!cln_grid_xyz(nx, ny, nz, &x, &y, &z))                                                     \
        return;                                                                                    \
    (void)z;

extern "C" __global__ void cln_rev_zero(real *buf, long long off, long long n, cln_u64 nx,
                                        cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_rev_zero_body(x, buf, off, n);
}

/* cln_nonfinite_rows (cln_step.h: cln_nonfinite_row): x = row. */
extern "C" __global__ void cln_nonfinite_rows(long long rows, long long cols, long long ld,
                                              long long off, const real *X, long long *FLAG,
                                              cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_nonfinite_row(x, rows, cols, ld, off, X, FLAG);
}

/* cln_bad_save_ts (cln_step.h: cln_bad_save_row): x = row. */
extern "C" __global__ void cln_bad_save_ts(long long rows, long long cols, long long ld,
                                           long long within, const real *TS, const cln_rstate *RS,
                                           long long *FLAG, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_bad_save_row(x, rows, cols, ld, within, TS, RS, FLAG);
}

/* cln_rev_scatter (cln_reverse_kernels.h: cln_rev_scatter_body): x = value, y = row. */
extern "C" __global__ void cln_rev_scatter(long long w, long long rows, long long off,
                                           const long long *RL, const real *SRC, real *DST,
                                           cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_scatter_body(x, y, w, rows, off, RL, SRC, DST);
}

extern "C" __global__ void cln_rev_inputs(const long long *JOB, const long long *RL,
                                          const real *INP, real *Z, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_inputs_body(x, y, JOB, RL, INP, Z);
}

extern "C" __global__ void cln_rev_group(int A, long long q, const long long *JOB, long long *RL,
                                         const real *YS, real *SEG, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_group_body(x, y, (size_t)A, q, JOB, RL, YS, SEG);
}

extern "C" __global__ void cln_rev_begin(int A, int nblocks, int mode, long long s, long long q,
                                         long long j, const long long *JOB, const cln_consts *K,
                                         const long long *RL, const long long *BR, const real *TAU,
                                         const real *YS, const real *SEG, real *RT, real *Y,
                                         real *Z, long long *NR, cln_u64 nx, cln_u64 ny,
                                         cln_u64 nz)
{
    CLN_XY
    cln_rev_begin_body(x, y, (size_t)A, (size_t)nblocks, mode, s, q, j, JOB, K, RL, BR, TAU, YS,
                       SEG, RT, Y, Z, NR);
}

extern "C" __global__ void cln_rev_act(int A, int act, long long off, long long n, long long f_off,
                                       const long long *JOB, const real *bias, int has_bias,
                                       const real *scale, real *P, real *O, real *F, cln_u64 nx,
                                       cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_act_body(x, y, (size_t)A, act, off, n, f_off, JOB, bias, has_bias, scale, P, O, F);
}

extern "C" __global__ void cln_rev_act_next(int A, int act, long long off, long long i,
                                            const long long *JOB, const cln_consts *K,
                                            const real *bias, int has_bias, const real *scale,
                                            const real *RT, const real *Y, real *P, real *O,
                                            real *F, real *Z, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_act_next_body(x, y, (size_t)A, act, off, i, JOB, K, bias, has_bias, scale, RT, Y, P, O,
                          F, Z);
}

extern "C" __global__ void cln_rev_gemm_act(int A, int act, long long off, long long n,
                                            long long fi, const real *X, long long x_off,
                                            long long ldx, const real *W, long long k,
                                            const long long *JOB, const cln_consts *K,
                                            const real *bias, int has_bias, const real *scale,
                                            const real *RT, const real *Y, real *P, real *O,
                                            real *F, real *Z, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_gemm_act_body(x, y, (size_t)A, act, off, n, fi, X, x_off, ldx, W, k, JOB, K, bias,
                          has_bias, scale, RT, Y, P, O, F, Z);
}

extern "C" __global__ void cln_rev_gemm_delta(int A, int act, int i, long long off, long long n,
                                              long long k, const real *WT, long long d_off,
                                              const long long *JOB, const real *RT, const real *KB,
                                              real *G, const real *scale, real *P, const real *O,
                                              cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_gemm_delta_body(x, y, (size_t)A, act, i, off, n, k, WT, d_off, JOB, RT, KB, G, scale, P,
                            O);
}

extern "C" __global__ void cln_rev_y1(int A, long long q, long long j, const long long *JOB,
                                      const cln_consts *K, const long long *RL, const real *RT,
                                      const real *Y, const real *F, const real *Z, real *SEG,
                                      cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_y1_body(x, y, (size_t)A, q, j, JOB, K, RL, RT, Y, F, Z, SEG);
}

extern "C" __global__ void cln_rev_events(int A, long long s, const long long *JOB,
                                          const cln_consts *K, long long *RL, const real *RT,
                                          const cln_rev_event *EV, const real *COT, const real *TS,
                                          real *YB0, real *YB1, real *KB, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_rev_events_body(x, (size_t)A, s, JOB, K, RL, RT, EV, COT, TS, YB0, YB1, KB);
}

extern "C" __global__ void cln_rev_delta(int A, int act, int i, long long off, long long n,
                                         int last, const long long *JOB, const real *RT,
                                         const real *KB, const real *G, const real *scale, real *P,
                                         const real *O, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_delta_body(x, y, (size_t)A, act, i, off, n, last, JOB, RT, KB, G, scale, P, O);
}

extern "C" __global__ void cln_rev_delta_arg(int A, int act, int i, long long off, int askip,
                                             const long long *JOB, const cln_consts *K,
                                             const real *RT, real *KB, const real *G,
                                             const real *scale, const real *YB1, real *YB0,
                                             real *CB, real *P, const real *O, cln_u64 nx,
                                             cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_delta_arg_body(x, y, (size_t)A, act, i, off, askip, JOB, K, RT, KB, G, scale, YB1, YB0,
                           CB, P, O);
}

extern "C" __global__ void cln_rev_arg(int A, int i, int skip, const long long *JOB,
                                       const cln_consts *K, const real *G, const real *YB1,
                                       real *YB0, real *KB, real *CB, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_arg_body(x, y, (size_t)A, i, skip, JOB, K, G, YB1, YB0, KB, CB);
}

extern "C" __global__ void cln_rev_finish(long long from, long long to, const long long *JOB,
                                          long long *RL, const cln_rev_event *EV, const real *COT,
                                          real *YB1, real *YBAR, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_rev_finish_body(x, from, to, JOB, RL, EV, COT, YB1, YBAR);
}

extern "C" __global__ void cln_rev_wsum(int nblocks, long long in, long long out, long long p_off,
                                        long long x_off, long long x_stage, long long ldx,
                                        long long wth, long long bth, long long sth,
                                        const long long *JOB, const long long *NR,
                                        const long long *BR, const real *RT, const real *KB,
                                        const real *P, const real *O, const real *X, real *TH,
                                        cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_wsum_body(x, y, z, (size_t)nblocks, in, out, p_off, x_off, x_stage, ldx, wth, bth, sth,
                      JOB, NR, BR, RT, KB, P, O, X, TH);
}

extern "C" __global__ void cln_rev_gather(int nblocks, long long cols, long long src_off,
                                          long long src_stage, long long ld, long long kmax,
                                          const long long *JOB, const long long *NR,
                                          const long long *BR, const real *SRC, real *DST,
                                          cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_gather_body(x, y, z, (size_t)nblocks, cols, src_off, src_stage, ld, kmax, JOB, NR, BR,
                        SRC, DST);
}

extern "C" __global__ void cln_rev_wadd(int nblocks, long long in, long long out, long long wth,
                                        const long long *JOB, const long long *NR, const real *GS,
                                        real *TH, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_wadd_body(x, y, z, (size_t)nblocks, in, out, wth, JOB, NR, GS, TH);
}

extern "C" __global__ void cln_rev_bsum(int nblocks, long long out, long long p_off,
                                        long long bth, const long long *JOB, const long long *NR,
                                        const long long *BR, const real *P, real *TH, cln_u64 nx,
                                        cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_bsum_body(x, y, (size_t)nblocks, out, p_off, bth, JOB, NR, BR, P, TH);
}

extern "C" __global__ void cln_rev_ssum(int nblocks, long long o_off, long long sth,
                                        const long long *JOB, const long long *NR,
                                        const long long *BR, const real *RT, const real *KB,
                                        const real *O, real *TH, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_rev_ssum_body(x, y, (size_t)nblocks, o_off, sth, JOB, NR, BR, RT, KB, O, TH);
}

/* ---- the tangent pass (clnode/tangent.h): cl/cln_tangent_kernels.h's bodies, in step with
 * cl/clnode.cl's cln_tan_* kernels ---- */
#include "cln_tangent_kernels.h"

extern "C" __global__ void cln_tan_begin(int A, long long n, const long long *JOB,
                                         const cln_consts *K, const long long *RL, const real *TAU,
                                         const real *Y, real *RT, real *Z, cln_u64 nx, cln_u64 ny,
                                         cln_u64 nz)
{
    CLN_XY
    cln_tan_begin_body(x, y, (size_t)A, n, JOB, K, RL, TAU, Y, RT, Z);
}

extern "C" __global__ void cln_tan_stage(int A, int i, long long nd, long long Rd,
                                         const long long *JOB, const cln_consts *K, const real *RT,
                                         const real *YD, const real *FD, real *ZD, cln_u64 nx,
                                         cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_tan_stage_body(x, y, z, (size_t)A, i, nd, Rd, JOB, K, RT, YD, FD, ZD);
}

extern "C" __global__ void cln_tan_terms(int A, long long n, long long nd, long long d,
                                          const real *T, const real *DP, long long db_off,
                                          int has_db, real *G, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_tan_terms_body(x, y, (size_t)A, n, nd, d, T, DP, db_off, has_db, G);
}

extern "C" __global__ void cln_tan_layer(int A, int act, long long n, long long nd, long long off,
                                       const real *P, const real *O, real *G, cln_u64 nx,
                                       cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_tan_layer_body(x, y, z, (size_t)A, act, n, nd, off, P, O, G);
}

extern "C" __global__ void cln_tan_out(int A, int i, long long nd, long long Rd, long long o_off,
                                         long long ntheta, long long s_off, int has_ds,
                                         const long long *JOB, const real *X, const real *O,
                                         const real *scale, const real *DP, real *FD, cln_u64 nx,
                                         cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_tan_out_body(x, y, z, (size_t)A, i, nd, Rd, o_off, ntheta, s_off, has_ds, JOB, X, O,
                       scale, DP, FD);
}

extern "C" __global__ void cln_tan_y1(int A, long long nd, long long Rd, long long nk,
                                      const long long *JOB, const cln_consts *K, const real *RT,
                                      const real *YI, const real *F, const real *Z, real *YO,
                                      cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    cln_tan_y1_body(x, y, z, (size_t)A, nd, Rd, nk, JOB, K, RT, YI, F, Z, YO);
}

extern "C" __global__ void cln_tan_points(int A, long long step, long long nd,
                                          const long long *JOB, const long long *RL,
                                          const cln_rev_event *EV, long long *EVI, const real *YD,
                                          real *OUT, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_tan_points_body(x, (size_t)A, step, nd, JOB, RL, EV, EVI, YD, OUT);
}

extern "C" __global__ void cln_tan_dense(int A, long long n, long long nd, long long nk,
                                         const long long *JOB, const cln_consts *K,
                                         const long long *RL, const real *RT,
                                         const cln_rev_event *EV, const real *TS, long long *EVI,
                                         const real *YD, const real *YD1, const real *FD,
                                         real *OUT, cln_u64 nx, cln_u64 ny, cln_u64 nz)
{
    CLN_XY
    (void)y;
    cln_tan_dense_body(x, (size_t)A, n, nd, nk, JOB, K, RL, RT, EV, TS, EVI, YD, YD1, FD, OUT);
}
