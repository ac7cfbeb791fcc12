/* cln_reverse_kernels.h - the bodies of the device reverse pass's kernels (clnode/gradient.h),
 * written once for OpenCL (cl/clnode.cl) and CUDA (cl/clnode_cuda.cu), whose kernels map a work
 * item to one call here. lib/backends/device/device_reverse.c drives them and issues the matrix
 * products between them through the backend's ordered GEMM. Every element is computed as the
 * host's reverse pass (lib/backends/host/host_reverse.inc) computes it, through the same functions
 * of cl/ (cln_step.h, cln_reverse.h, cln_activation.h, cln_tf32.h), and every sum is taken in the
 * order clnode/gradient.h states, so a device's gradient has the host's bits.
 *
 * A group of whole blocks of CLNODE_GRADIENT_BLOCK trajectories goes back together. Its rows
 * ("positions") are its trajectories sorted by their accepted steps M as a block's are
 * (clnode/gradient.h), so that at reverse step s the rows still going back (M > s) are the first
 * A(s); BR lists each block's rows in the block's own order.
 *
 * Buffers (Bg rows, S stages; R = real, I = cln_long; the indices CLN_RJ_*, CLN_RL_* and CLN_RT_*
 * are cln_layout.h's):
 *   JOB  I[CLN_RJ_SIZE]    the group's sizes and switches
 *   K    cln_consts        the solve's constants, as its kernels read them
 *   RL   I[Bg x CLN_RL_W]  per row: its trajectory (counted from the group's first), its M, where
 *                          its times, kept states and events start, its events not yet gone back
 *                          through, the first step of its group of recomputed steps (CLN_RL_*)
 *   RT   R[Bg x CLN_RT_W]  per row: t, tn and hd of the step it is at
 *   BR   I[blocks x 32]    each block's rows, in the block's order, -1 past its end
 *   TAU, YS                the tape's times and kept states of the group's trajectories
 *   EV   cln_rev_event[]   the cotangents' events (cln_layout.h)
 *   COT  R                 the group's cotangents (trajectory x slots x N), rounded to real
 *   TS   R                 the save times (the batch's list, or the group's rows of them)
 *   Y, SEG                 R[Bg x N] the state at the step's start; R[Bg x E x N] a group of
 *                          recomputed states (checkpoint_every > 1)
 *   Z, F, KB               R[S x Bg x ldz], R[S x Bg x N] x 2: stage arguments, f, cotangents of k
 *   P, O                   R[S x sumw x Bg]: each layer's pre-activation (then its delta) and
 *                          output, stage i layer l at (i sumw + woff_l) Bg, leading dimension out_l
 *   G                      R[Bg x maxw]: the cotangent going back through the layers
 *   YB0, YB1, CB           R[Bg x N] x 2, R[Bg x n_in]: cotangents of y_n, y_{n+1}, the inputs
 *   TH                     R[blocks x ntheta]: each block's parameter cotangent
 * Offsets and sizes are cln_long and count elements. Every body returns at once for a work item
 * outside its range (the launches round their sizes up). */
#ifndef CLN_REVERSE_KERNELS_H
#define CLN_REVERSE_KERNELS_H

#include "cln_activation.h"
#include "cln_gemm.h"
#include "cln_reverse.h"
#include "cln_step.h"
#include "cln_tf32.h"

/* buf[off + x] = 0 for x < n. */
CLN_INLINE void cln_rev_zero_body(size_t x, CLN_GLOBAL real *buf, cln_long off, cln_long n)
{
    if ((cln_long)x < n)
        buf[(size_t)off + x] = CLN_R(0.0);
}

/* The reverse pass into the caller's device arrays (clnode/device_gradient.h): row p's w values
 * of SRC (rows in the order of the positions) into DST at element off + w x its trajectory
 * (RL's CLN_RL_B, from the group's first), x < w, p = y < rows. A copy: no arithmetic. */
CLN_INLINE void cln_rev_scatter_body(size_t x, size_t p, cln_long w, cln_long rows, cln_long off,
                                     CLN_CONST cln_long *RL, CLN_CONST real *SRC,
                                     CLN_GLOBAL real *DST)
{
    if ((cln_long)x >= w || (cln_long)p >= rows)
        return;
    DST[(size_t)off + (size_t)RL[p * CLN_RL_W + CLN_RL_B] * (size_t)w + x] = SRC[p * (size_t)w + x];
}

/* Row p's conditioning input q into its columns of every stage argument (x = q, y = p < Bg). */
CLN_INLINE void cln_rev_inputs_body(size_t q, size_t p, CLN_CONST cln_long *JOB,
                                    CLN_CONST cln_long *RL, CLN_CONST real *INP, CLN_GLOBAL real *Z)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], ldz = (size_t)JOB[CLN_RJ_LDZ];
    const size_t n_in = (size_t)JOB[CLN_RJ_NIN], S = (size_t)JOB[CLN_RJ_S];
    if (q >= n_in || p >= Bg)
        return;
    const real c = INP[(size_t)RL[p * CLN_RL_W + CLN_RL_B] * n_in + q];
    for (size_t i = 0; i < S; ++i)
        Z[(i * Bg + p) * ldz + (ldz - n_in) + q] = c;
}

/* How many of a block's rows (its positions `rows`, in its order, -1 past its end) still go back at
 * reverse step s: they come first. */
CLN_INLINE size_t cln_rev_block_rows(CLN_CONST cln_long *rows, CLN_CONST cln_long *RL, cln_long s)
{
    size_t n = 0;
    while (n < CLN_REV_BLOCK && rows[n] >= 0 && RL[(size_t)rows[n] * CLN_RL_W + CLN_RL_M] > s)
        ++n;
    return n;
}

/* Group q of the steps begins (x = component n < N, y = row p < A): the row's first step of it,
 * and its kept state there into SEG. */
CLN_INLINE void cln_rev_group_body(size_t n, size_t p, size_t A, cln_long q,
                                   CLN_CONST cln_long *JOB, CLN_GLOBAL cln_long *RL,
                                   CLN_CONST real *YS, CLN_GLOBAL real *SEG)
{
    const size_t N = (size_t)JOB[CLN_RJ_N];
    if (n >= N || p >= A)
        return;
    CLN_GLOBAL cln_long *rl = RL + p * CLN_RL_W;
    const cln_long M = rl[CLN_RL_M], end = (q + 1) * JOB[CLN_RJ_EVERY];
    if (n == 0)
        rl[CLN_RL_NLO] = M > end ? M - end : 0;
    SEG[p * (size_t)JOB[CLN_RJ_SEG] * N + n] = YS[(size_t)(rl[CLN_RL_YS] + q) * N + n];
}

/* The step a row is at (x = column n < N, or N for models that take t; y = row p < A): its times
 * into RT (column 0), the state at its start into Y and stage 0's argument (the state itself, and
 * column N the stage time) into Z, from where `mode` says (CLN_REV_*): reverse step s, or sub-step
 * j of group q. For reverse step s also each block's rows still going back (x = 0, y = block
 * k < nblocks) into NR[k], which the step's sums read. */
CLN_INLINE void cln_rev_begin_body(size_t n, size_t p, size_t A, size_t nblocks, cln_int mode,
                                   cln_long s, cln_long q, cln_long j, CLN_CONST cln_long *JOB,
                                   CLN_CONST cln_consts *K, CLN_CONST cln_long *RL,
                                   CLN_CONST cln_long *BR, CLN_CONST real *TAU, CLN_CONST real *YS,
                                   CLN_CONST real *SEG, CLN_GLOBAL real *RT, CLN_GLOBAL real *Y,
                                   CLN_GLOBAL real *Z, CLN_GLOBAL cln_long *NR)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], ldz = (size_t)JOB[CLN_RJ_LDZ];
    if (n == 0 && p < nblocks && mode != CLN_REV_SUB)
        NR[p] = (cln_long)cln_rev_block_rows(BR + p * CLN_REV_BLOCK, RL, s);
    if (n > N || p >= A || (n == N && !JOB[CLN_RJ_TIME]))
        return;
    CLN_CONST cln_long *rl = RL + p * CLN_RL_W;
    const cln_long M = rl[CLN_RL_M], nlo = rl[CLN_RL_NLO];
    cln_long step = M - 1 - s;
    if (mode == CLN_REV_SUB) {
        const cln_long nhi = M - 1 - q * JOB[CLN_RJ_EVERY];
        step = nlo + j < nhi ? nlo + j : nhi;
    }
    const real t = TAU[rl[CLN_RL_TAU] + step], tn = TAU[rl[CLN_RL_TAU] + step + 1];
    if (n == N) { /* a time column is the first after the state's (cln_iconsts.time_input) */
        Z[p * ldz + N] = K->dir * cln_stage_time(K->c[0], t, tn);
        return;
    }
    const size_t seg = p * (size_t)JOB[CLN_RJ_SEG] + (size_t)(step - nlo);
    const real y =
        mode == CLN_REV_KEPT ? YS[(size_t)(rl[CLN_RL_YS] + s) * N + n] : SEG[seg * N + n];
    Y[p * N + n] = y;
    Z[p * ldz + n] = y; /* cln_stage_value of stage 0: the state */
    if (n == 0) {
        RT[p * CLN_RT_W + CLN_RT_T] = t;
        RT[p * CLN_RT_W + CLN_RT_TN] = tn;
        RT[p * CLN_RT_W + CLN_RT_HD] = cln_stage_hd(K, t, tn);
    }
}

/* Stage i's argument for column n <= N of row p (cln_stage_value of the row's step, column N
 * the stage time), f of the stages before it in F. */
CLN_INLINE void cln_rev_stage_arg(size_t n, size_t p, cln_long i, CLN_CONST cln_long *JOB,
                                  CLN_CONST cln_consts *K, CLN_CONST real *RT, CLN_CONST real *Y,
                                  CLN_CONST real *F, CLN_GLOBAL real *Z)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    CLN_GLOBAL real *z = Z + ((size_t)i * Bg + p) * (size_t)JOB[CLN_RJ_LDZ];
    CLN_CONST real *rt = RT + p * CLN_RT_W;
    if (n < N)
        z[n] = cln_stage_value((cln_int)i, K, rt[CLN_RT_HD], F + p * N + n, Bg * N, Y[p * N + n]);
    else /* a time column is the first after the state's (cln_iconsts.time_input) */
        z[N] = K->dir * cln_stage_time(K->c[i], rt[CLN_RT_T], rt[CLN_RT_TN]);
}

/* A recomputed layer (x = column j < n, y = row p < A): the pre-activation P = C + bias (C the
 * layer's product, in P) and the output O = act(P) of the block at `off` (leading dimension n);
 * for the last layer (f_off >= 0) also f into F at f_off, times the output scale where the model
 * has one (JOB's NS values of `scale`). */
CLN_INLINE void cln_rev_act_body(size_t j, size_t p, size_t A, cln_int act, cln_long off,
                                 cln_long n, cln_long f_off, CLN_CONST cln_long *JOB,
                                 CLN_CONST real *bias, cln_int has_bias, CLN_CONST real *scale,
                                 CLN_GLOBAL real *P, CLN_GLOBAL real *O, CLN_GLOBAL real *F)
{
    if ((cln_long)j >= n || p >= A)
        return;
    const size_t e = (size_t)off + p * (size_t)n + j;
    const real x = P[e] + (has_bias ? bias[j] : CLN_R(0.0));
    const real y = cln_activate(act, x);
    P[e] = x;
    O[e] = y;
    if (f_off >= 0) {
        const cln_long ns = JOB[CLN_RJ_NS];
        F[(size_t)f_off + p * (size_t)n + j] =
            ns ? cln_out_scale(y, CLN_OUT_SCALE_AT(scale, ns, j)) : y;
    }
}

/* The last layer of stage i - 1 recomputed, then stage i's argument (x = column j <= N, y = row
 * p < A): cln_rev_act_body's column j of that layer (f into F block i - 1), then column j of stage
 * i's argument (and x = N its time column for models that take t) from the f just written by this
 * item and those before it. */
CLN_INLINE void cln_rev_act_next_body(size_t j, size_t p, size_t A, cln_int act, cln_long off,
                                      cln_long i, CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                      CLN_CONST real *bias, cln_int has_bias, CLN_CONST real *scale,
                                      CLN_CONST real *RT, CLN_CONST real *Y, CLN_GLOBAL real *P,
                                      CLN_GLOBAL real *O, CLN_GLOBAL real *F, CLN_GLOBAL real *Z)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    if (p >= A || j > N || (j == N && !JOB[CLN_RJ_TIME]))
        return;
    cln_rev_act_body(j, p, A, act, off, (cln_long)N, (cln_long)((size_t)(i - 1) * Bg * N), JOB,
                     bias, has_bias, scale, P, O, F);
    cln_rev_stage_arg(j, p, i, JOB, K, RT, Y, F, Z);
}

/* y1 of a recomputed step into SEG (x = component n < N, y = row p < A): sub-step j of group q,
 * kept where the row's group holds that step (cln_y1, as the forward computed it). */
CLN_INLINE void cln_rev_y1_body(size_t n, size_t p, size_t A, cln_long q, cln_long j,
                                CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                CLN_CONST cln_long *RL, CLN_CONST real *RT, CLN_CONST real *Y,
                                CLN_CONST real *F, CLN_CONST real *Z, CLN_GLOBAL real *SEG)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    const size_t ldz = (size_t)JOB[CLN_RJ_LDZ], S = (size_t)JOB[CLN_RJ_S];
    if (n >= N || p >= A)
        return;
    CLN_CONST cln_long *rl = RL + p * CLN_RL_W;
    const cln_long nlo = rl[CLN_RL_NLO], nhi = rl[CLN_RL_M] - 1 - q * JOB[CLN_RJ_EVERY];
    if (nlo + j >= nhi)
        return;
    real k[CLN_MAX_STAGES];
    const real hd = RT[p * CLN_RT_W + CLN_RT_HD];
    for (size_t jj = 0; jj < S; ++jj)
        k[jj] = hd * F[(jj * Bg + p) * N + n];
    SEG[(p * (size_t)JOB[CLN_RJ_SEG] + (size_t)j + 1) * N + n] =
        cln_y1(K, (cln_int)JOB[CLN_RJ_SSAL], (cln_int)S, Y[p * N + n], k,
               Z + ((S - 1) * Bg + p) * ldz, (cln_int)n);
}

/* Row p's next event, from the last, when it is of `kind` at `step`: its index in EV, else -1. */
CLN_INLINE cln_long cln_rev_next_event(CLN_CONST cln_long *rl, CLN_CONST cln_rev_event *EV,
                                       cln_int kind, cln_long step)
{
    const cln_long nev = rl[CLN_RL_NEV];
    if (nev == 0)
        return -1;
    const cln_long e = rl[CLN_RL_EV] + nev - 1;
    return EV[e].kind == kind && (cln_long)EV[e].step == step ? e : -1;
}

/* The saved points of row p at point `step` (the state after that many steps) into yb. */
CLN_INLINE void cln_rev_points(size_t p, cln_long step, CLN_CONST cln_long *JOB,
                               CLN_GLOBAL cln_long *RL, CLN_CONST cln_rev_event *EV,
                               CLN_CONST real *COT, CLN_GLOBAL real *yb)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], slots = (size_t)JOB[CLN_RJ_SLOTS];
    CLN_GLOBAL cln_long *rl = RL + p * CLN_RL_W;
    const size_t b = (size_t)rl[CLN_RL_B];
    cln_long e;
    while ((e = cln_rev_next_event(rl, EV, CLN_REV_POINT, step)) >= 0) {
        CLN_CONST real *o = COT + (b * slots + (size_t)EV[e].slot) * N;
        for (size_t c = 0; c < N; ++c)
            yb[c] += o[c];
        rl[CLN_RL_NEV] -= 1;
    }
}

/* A reverse step's cotangents from the saved values (x = row p < A): YB0 and the row's KB from
 * zero, the points saved at the step's end into YB1, the dense output inside the step into YB0,
 * YB1 and KB (the transpose of cln_interpolate), then, for tableaux whose y1 is their sum, y1's
 * transpose (cln_y1_vjp). */
CLN_INLINE void cln_rev_events_body(size_t p, size_t A, cln_long s, CLN_CONST cln_long *JOB,
                                    CLN_CONST cln_consts *K, CLN_GLOBAL cln_long *RL,
                                    CLN_CONST real *RT, CLN_CONST cln_rev_event *EV,
                                    CLN_CONST real *COT, CLN_CONST real *TS, CLN_GLOBAL real *YB0,
                                    CLN_GLOBAL real *YB1, CLN_GLOBAL real *KB)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    const size_t S = (size_t)JOB[CLN_RJ_S], slots = (size_t)JOB[CLN_RJ_SLOTS];
    if (p >= A)
        return;
    CLN_GLOBAL cln_long *rl = RL + p * CLN_RL_W;
    const size_t b = (size_t)rl[CLN_RL_B];
    const cln_long n = rl[CLN_RL_M] - 1 - s;
    CLN_GLOBAL real *yb0 = YB0 + p * N, *yb1 = YB1 + p * N, *kb = KB + p * N;
    for (size_t c = 0; c < N; ++c) {
        yb0[c] = CLN_R(0.0);
        for (size_t i = 0; i < S; ++i)
            kb[i * Bg * N + c] = CLN_R(0.0);
    }
    cln_rev_points(p, n + 1, JOB, RL, EV, COT, yb1);
    CLN_CONST real *rt = RT + p * CLN_RT_W;
    cln_long e;
    while ((e = cln_rev_next_event(rl, EV, CLN_REV_DENSE, n)) >= 0) {
        const real ts = TS[b * (size_t)JOB[CLN_RJ_TS_STRIDE] + (size_t)EV[e].j];
        const real th = cln_dense_theta(ts, rt[CLN_RT_T], rt[CLN_RT_TN]);
        real wy0, wy1, wk[CLN_MAX_STAGES];
        cln_dense_weights(K, (cln_int)JOB[CLN_RJ_DENSE], (cln_int)S, th, &wy0, &wy1, wk);
        CLN_CONST real *o = COT + (b * slots + (size_t)EV[e].slot) * N;
        for (size_t c = 0; c < N; ++c)
            cln_dense_vjp((cln_int)S, wy0, wy1, wk, o[c], yb0 + c, yb1 + c, kb + c, Bg * N);
        rl[CLN_RL_NEV] -= 1;
    }
    if (!JOB[CLN_RJ_SSAL])
        for (size_t c = 0; c < N; ++c)
            yb0[c] = cln_y1_vjp(K, (cln_int)S, yb1[c], kb + c, Bg * N, yb0[c]);
}

/* One layer of stage i's vector-Jacobian product (x = column j < n, y = row p < A): the incoming
 * cotangent (the last layer: cln_f_bar of k_i's, times the output scale; the others: G, the
 * product of the layer above) times the activation's derivative at P and O, the delta, into P
 * (the block at `off`, leading dimension n), where the weight and bias sums read it. */
CLN_INLINE void cln_rev_delta_body(size_t j, size_t p, size_t A, cln_int act, cln_int i,
                                   cln_long off, cln_long n, cln_int last, CLN_CONST cln_long *JOB,
                                   CLN_CONST real *RT, CLN_CONST real *KB, CLN_CONST real *G,
                                   CLN_CONST real *scale, CLN_GLOBAL real *P, CLN_CONST real *O)
{
    if ((cln_long)j >= n || p >= A)
        return;
    const size_t e = (size_t)off + p * (size_t)n + j;
    real g;
    if (last) { /* n is N */
        const size_t Bg = (size_t)JOB[CLN_RJ_BG];
        const cln_long ns = JOB[CLN_RJ_NS];
        g = cln_f_bar(RT[p * CLN_RT_W + CLN_RT_HD], KB[((size_t)i * Bg + p) * (size_t)n + j]);
        if (ns)
            g = cln_out_scale_vjp(g, CLN_OUT_SCALE_AT(scale, ns, j));
    } else {
        g = G[p * (size_t)n + j];
    }
    P[e] = act == CLN_ACT_IDENTITY ? g : g * cln_activate_grad(act, P[e], O[e]);
}

/* Stage i's argument's cotangent (x = column c < ldz, y = row p < A): G (the first layer's input
 * cotangent; with `skip`, where the stage's MLP did not go back, YB1 alone), plus y1's for the
 * last stage of an SSAL tableau; its inputs' columns into CB; its state columns through the
 * transpose of cln_stage_value into YB0 and the row's KB. */
CLN_INLINE void cln_rev_arg_body(size_t c, size_t p, size_t A, cln_int i, cln_int skip,
                                 CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                 CLN_CONST real *G, CLN_CONST real *YB1, CLN_GLOBAL real *YB0,
                                 CLN_GLOBAL real *KB, CLN_GLOBAL real *CB)
{
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    const size_t ldz = (size_t)JOB[CLN_RJ_LDZ], n_in = (size_t)JOB[CLN_RJ_NIN];
    if (c >= ldz || p >= A || (skip && c >= N))
        return;
    real zb;
    if (skip) {
        zb = YB1[p * N + c];
    } else {
        zb = G[p * ldz + c];
        if (c < N && JOB[CLN_RJ_SSAL] && (cln_long)i + 1 == JOB[CLN_RJ_S])
            zb = zb + YB1[p * N + c];
        if (c >= ldz - n_in)
            CB[p * n_in + (c - (ldz - n_in))] += zb;
    }
    if (c < N)
        YB0[p * N + c] = cln_stage_value_vjp(i, K, zb, KB + p * N + c, Bg * N, YB0[p * N + c]);
}

/* Stage i + 1's argument's cotangent, then stage i's last layer's delta (x = column c < ldz, or
 * < N where stage i + 1's MLP did not go back (askip); y = row p < A): cln_rev_arg_body of stage
 * i + 1, which completes column c of k_i's cotangent, then cln_rev_delta_body of column c of the
 * last layer of stage i (at `off`), which reads it. */
CLN_INLINE void cln_rev_delta_arg_body(size_t c, size_t p, size_t A, cln_int act, cln_int i,
                                       cln_long off, cln_int askip, CLN_CONST cln_long *JOB,
                                       CLN_CONST cln_consts *K, CLN_CONST real *RT,
                                       CLN_GLOBAL real *KB, CLN_CONST real *G,
                                       CLN_CONST real *scale, CLN_CONST real *YB1,
                                       CLN_GLOBAL real *YB0, CLN_GLOBAL real *CB,
                                       CLN_GLOBAL real *P, CLN_CONST real *O)
{
    cln_rev_arg_body(c, p, A, i + 1, askip, JOB, K, G, YB1, YB0, KB, CB);
    cln_rev_delta_body(c, p, A, act, i, off, JOB[CLN_RJ_N], 1, JOB, RT, KB, G, scale, P, O);
}

/* The products of a reverse step with the element-wise work beside them inside them, for the
 * backends and batches where the pass takes its products itself (device_proto.h:
 * cln_dev_launch.rev_fused_rows): each element the ordered sum of cln_gemm.h, which is what the
 * backend's strict GEMM computes, then in the same work item what the separate kernel does with
 * it, through the same body.
 *
 * A recomputed layer (x = column j < n, or <= N for the last layer of a stage that writes the
 * next stage's argument; y = row p < A): element (p, j) of X . W^T (X: rows of ldx at x_off; W:
 * n rows of k) into P at `off` (leading dimension n), then cln_rev_act_body of that element: a
 * hidden layer (fi < 0) without f, the last layer of stage fi with f into F block fi, and where
 * stage fi + 1 exists cln_rev_act_next_body instead, which also writes that stage's argument. */
CLN_INLINE void cln_rev_gemm_act_body(size_t j, size_t p, size_t A, cln_int act, cln_long off,
                                      cln_long n, cln_long fi, CLN_CONST real *X, cln_long x_off,
                                      cln_long ldx, CLN_CONST real *W, cln_long k,
                                      CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                      CLN_CONST real *bias, cln_int has_bias, CLN_CONST real *scale,
                                      CLN_CONST real *RT, CLN_CONST real *Y, CLN_GLOBAL real *P,
                                      CLN_GLOBAL real *O, CLN_GLOBAL real *F, CLN_GLOBAL real *Z)
{
    if (p >= A)
        return;
    if ((cln_long)j < n)
        P[(size_t)off + p * (size_t)n + j] =
            cln_gemm_dot(X + (size_t)x_off + p * (size_t)ldx, W + j * (size_t)k, k);
    if (fi >= 0 && fi + 1 < JOB[CLN_RJ_S])
        cln_rev_act_next_body(j, p, A, act, off, fi + 1, JOB, K, bias, has_bias, scale, RT, Y, P, O,
                              F, Z);
    else
        cln_rev_act_body(j, p, A, act, off, n, fi >= 0 ? fi * JOB[CLN_RJ_BG] * n : -1, JOB, bias,
                         has_bias, scale, P, O, F);
}

/* A layer's transposed product of stage i (x = column c < k, y = row p < A): element (p, c) of
 * the layer's deltas (P at `off`, n columns) times its weights (WT: k rows of n), the cotangent
 * of its input, into G (leading dimension k); then, where the layer below's deltas are at d_off
 * (>= 0), cln_rev_delta_body of that element, which reads it there. */
CLN_INLINE void cln_rev_gemm_delta_body(size_t c, size_t p, size_t A, cln_int act, cln_int i,
                                        cln_long off, cln_long n, cln_long k, CLN_CONST real *WT,
                                        cln_long d_off, CLN_CONST cln_long *JOB, CLN_CONST real *RT,
                                        CLN_CONST real *KB, CLN_GLOBAL real *G,
                                        CLN_CONST real *scale, CLN_GLOBAL real *P,
                                        CLN_CONST real *O)
{
    if ((cln_long)c >= k || p >= A)
        return;
    G[p * (size_t)k + c] = cln_gemm_dot(P + (size_t)off + p * (size_t)n, WT + c * (size_t)n, n);
    if (d_off >= 0)
        cln_rev_delta_body(c, p, A, act, i, d_off, k, 0, JOB, RT, KB, G, scale, P, O);
}

/* A step's bias sum of one layer (x = output j < out, y = block k; or cln_rev_side_sums): the
 * deltas of its stages from the last and its NR[k] rows still going back in order, added one by one
 * to TH[k ntheta + bth + j]. */
CLN_INLINE void cln_rev_bsum_body(size_t j, size_t k, size_t nblocks, cln_long out, cln_long p_off,
                                  cln_long bth, CLN_CONST cln_long *JOB, CLN_CONST cln_long *NR,
                                  CLN_CONST cln_long *BR, CLN_CONST real *P, CLN_GLOBAL real *TH)
{
    if ((cln_long)j >= out || k >= nblocks)
        return;
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], sumw = (size_t)JOB[CLN_RJ_SUMW];
    const size_t nr = (size_t)NR[k];
    CLN_CONST cln_long *rows = BR + k * CLN_REV_BLOCK;
    CLN_GLOBAL real *acc = TH + k * (size_t)JOB[CLN_RJ_NTHETA] + (size_t)bth + j;
    real a = *acc;
    for (cln_long i = JOB[CLN_RJ_S1]; i-- > 0;) {
        CLN_CONST real *D = P + (size_t)p_off + (size_t)i * sumw * Bg + j;
        for (size_t r = 0; r < nr; ++r)
            a += D[(size_t)rows[r] * (size_t)out];
    }
    *acc = a;
}

/* A step's output-scale sum (x = the scale's value j < NS, y = block k; or cln_rev_side_sums): the
 * terms
 * cln_out_scale_term(f's cotangent, the last layer's output) of its stages from the last and its
 * NR[k] rows still going back in order (a single value takes every component of a row in order),
 * added one by one to TH[k ntheta + sth + j]; O's last layer at o_off + i sumw Bg (leading
 * dimension N). */
CLN_INLINE void cln_rev_ssum_body(size_t j, size_t k, size_t nblocks, cln_long o_off, cln_long sth,
                                  CLN_CONST cln_long *JOB, CLN_CONST cln_long *NR,
                                  CLN_CONST cln_long *BR, CLN_CONST real *RT, CLN_CONST real *KB,
                                  CLN_CONST real *O, CLN_GLOBAL real *TH)
{
    const cln_long ns = JOB[CLN_RJ_NS];
    if ((cln_long)j >= ns || k >= nblocks)
        return;
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], N = (size_t)JOB[CLN_RJ_N];
    const size_t sumw = (size_t)JOB[CLN_RJ_SUMW], nr = (size_t)NR[k];
    const size_t c0 = ns == 1 ? 0 : j, c1 = ns == 1 ? N : j + 1;
    CLN_CONST cln_long *rows = BR + k * CLN_REV_BLOCK;
    CLN_GLOBAL real *acc = TH + k * (size_t)JOB[CLN_RJ_NTHETA] + (size_t)sth + j;
    real a = *acc;
    for (cln_long i = JOB[CLN_RJ_S1]; i-- > 0;) {
        CLN_CONST real *X = O + (size_t)o_off + (size_t)i * sumw * Bg;
        for (size_t r = 0; r < nr; ++r) {
            const size_t pos = (size_t)rows[r];
            const real hd = RT[pos * CLN_RT_W + CLN_RT_HD];
            CLN_CONST real *kb = KB + ((size_t)i * Bg + pos) * N;
            for (size_t c = c0; c < c1; ++c)
                a += cln_out_scale_term(cln_f_bar(hd, kb[c]), X[pos * N + c]);
        }
    }
    *acc = a;
}

/* The one kernel of a layer's weight sums takes its bias and output-scale sums too, past its input
 * columns (x = c >= in): c = in the bias sum of output j (bth >= 0: the layer has a bias), c =
 * in + 1 the output scale's value j (sth >= 0: the last layer of a model with a scale), each with
 * the deltas (P) and outputs (O) of the layer's blocks at p_off. Returns whether item (c, j, k)
 * has no weight term to take: past the inputs, the outputs or the blocks, or of a block back at
 * its start. */
CLN_INLINE int cln_rev_side_sums(size_t c, size_t j, size_t k, size_t nblocks, cln_long in,
                                 cln_long out, cln_long p_off, cln_long bth, cln_long sth,
                                 CLN_CONST cln_long *JOB, CLN_CONST cln_long *NR,
                                 CLN_CONST cln_long *BR, CLN_CONST real *RT, CLN_CONST real *KB,
                                 CLN_CONST real *P, CLN_CONST real *O, CLN_GLOBAL real *TH)
{
    if ((cln_long)c == in && bth >= 0)
        cln_rev_bsum_body(j, k, nblocks, out, p_off, bth, JOB, NR, BR, P, TH);
    else if ((cln_long)c == in + 1 && sth >= 0)
        cln_rev_ssum_body(j, k, nblocks, p_off, sth, JOB, NR, BR, RT, KB, O, TH);
    return (cln_long)c >= in || (cln_long)j >= out || k >= nblocks || NR[k] == 0;
}

/* A step's weight sum of one layer in one kernel (x = input column c < in, y = output j < out,
 * z = block k): its terms, stage by stage (the S1 whose MLP went back) and the block's NR[k] rows
 * still going back in order, summed from zero with one fma each (factors rounded to TF32 in tf32
 * mode), then added to the block's sum at TH[k ntheta + wth + j in + c]; nothing for a block back
 * at its start. The deltas are P's blocks at p_off + i sumw Bg (leading dimension out), the inputs
 * X's at x_off + i x_stage (leading dimension ldx). Past the inputs, its bias and output-scale sums
 * (cln_rev_side_sums). */
CLN_INLINE void cln_rev_wsum_body(size_t c, size_t j, size_t k, size_t nblocks, cln_long in,
                                  cln_long out, cln_long p_off, cln_long x_off, cln_long x_stage,
                                  cln_long ldx, cln_long wth, cln_long bth, cln_long sth,
                                  CLN_CONST cln_long *JOB, CLN_CONST cln_long *NR,
                                  CLN_CONST cln_long *BR, CLN_CONST real *RT, CLN_CONST real *KB,
                                  CLN_CONST real *P, CLN_CONST real *O, CLN_CONST real *X,
                                  CLN_GLOBAL real *TH)
{
    if (cln_rev_side_sums(c, j, k, nblocks, in, out, p_off, bth, sth, JOB, NR, BR, RT, KB, P, O,
                          TH))
        return;
    const size_t Bg = (size_t)JOB[CLN_RJ_BG], sumw = (size_t)JOB[CLN_RJ_SUMW];
    const size_t nr = (size_t)NR[k];
    const cln_long S1 = JOB[CLN_RJ_S1];
    CLN_CONST cln_long *rows = BR + k * CLN_REV_BLOCK;
    real acc = CLN_R(0.0);
    for (cln_long i = 0; i < S1; ++i) {
        CLN_CONST real *D = P + (size_t)p_off + (size_t)i * sumw * Bg + j;
        CLN_CONST real *Xi = X + (size_t)(x_off + i * x_stage) + c;
        for (size_t r = 0; r < nr; ++r) {
            const size_t pos = (size_t)rows[r];
            real d = D[pos * (size_t)out], x = Xi[pos * (size_t)ldx];
#if CLN_PRECISION == 32
            if (JOB[CLN_RJ_TF32]) {
                d = cln_tf32_round(d);
                x = cln_tf32_round(x);
            }
#endif
            acc = fma(d, x, acc);
        }
    }
    TH[k * (size_t)JOB[CLN_RJ_NTHETA] + (size_t)wth + j * (size_t)in + c] += acc;
}

/* The weight sums through the GEMM, first the gather (x = column j < cols, y = row slot r < 32,
 * z = block k): for each stage i < S1, term t = i nr + r (nr = NR[k] rows still going back, r < nr)
 * of column j of the factor at SRC's blocks src_off + i src_stage (leading dimension ld) into
 * DST[(k cols + j) kmax + t], so that block k's factor is a cols x (S1 nr) matrix of leading
 * dimension kmax, its terms in the order of the one kernel's sums. */
CLN_INLINE void cln_rev_gather_body(size_t j, size_t r, size_t k, size_t nblocks, cln_long cols,
                                    cln_long src_off, cln_long src_stage, cln_long ld,
                                    cln_long kmax, CLN_CONST cln_long *JOB, CLN_CONST cln_long *NR,
                                    CLN_CONST cln_long *BR, CLN_CONST real *SRC,
                                    CLN_GLOBAL real *DST)
{
    if ((cln_long)j >= cols || k >= nblocks || r >= (size_t)NR[k])
        return;
    const size_t nr = (size_t)NR[k], pos = (size_t)BR[k * CLN_REV_BLOCK + r];
    CLN_GLOBAL real *dst = DST + (k * (size_t)cols + j) * (size_t)kmax + r;
    CLN_CONST real *src = SRC + (size_t)src_off + pos * (size_t)ld + j;
    for (cln_long i = 0; i < JOB[CLN_RJ_S1]; ++i)
        dst[(size_t)i * nr] = src[(size_t)(i * src_stage)];
}

/* Then the step's product of block k (GS, out x in per block, from the GEMM of its gathered
 * factors) added to its weight's sum (x = input column c < in, y = output j < out, z = block k);
 * nothing for a block back at its start. */
CLN_INLINE void cln_rev_wadd_body(size_t c, size_t j, size_t k, size_t nblocks, cln_long in,
                                  cln_long out, cln_long wth, CLN_CONST cln_long *JOB,
                                  CLN_CONST cln_long *NR, CLN_CONST real *GS, CLN_GLOBAL real *TH)
{
    if ((cln_long)c >= in || (cln_long)j >= out || k >= nblocks || NR[k] == 0)
        return;
    TH[k * (size_t)JOB[CLN_RJ_NTHETA] + (size_t)wth + j * (size_t)in + c] +=
        GS[(k * (size_t)out + j) * (size_t)in + c];
}

/* A row back at its start (x = row p - from, p < to): the points saved at y0 into YB1, then its
 * cotangent of y0 into YBAR. */
CLN_INLINE void cln_rev_finish_body(size_t x, cln_long from, cln_long to, CLN_CONST cln_long *JOB,
                                    CLN_GLOBAL cln_long *RL, CLN_CONST cln_rev_event *EV,
                                    CLN_CONST real *COT, CLN_GLOBAL real *YB1,
                                    CLN_GLOBAL real *YBAR)
{
    const size_t N = (size_t)JOB[CLN_RJ_N];
    const size_t p = (size_t)from + x;
    if ((cln_long)p >= to)
        return;
    cln_rev_points(p, 0, JOB, RL, EV, COT, YB1 + p * N);
    for (size_t c = 0; c < N; ++c)
        YBAR[p * N + c] = YB1[p * N + c];
}

#endif /* CLN_REVERSE_KERNELS_H */
