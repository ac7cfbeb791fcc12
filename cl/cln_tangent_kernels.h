/* cln_tangent_kernels.h - the bodies of the device tangent pass's kernels (clnode/tangent.h),
 * written once for OpenCL (cl/clnode.cl) and CUDA (cl/clnode_cuda.cu), whose kernels map a work
 * item to one call here. lib/backends/device/device_tangent.c drives them beside the reverse
 * pass's kernels (the primal steps: cln_reverse_kernels.h) and issues the matrix products between
 * them through the backend's ordered GEMM. Every element is computed as the host's tangent pass
 * (lib/backends/host/host_tangent.inc) computes it, through the same functions of cl/
 * (cln_tangent.h, cln_step.h), so a device's tangents have the host's bits.
 *
 * The group's rows are the reverse pass's (cln_reverse_kernels.h: JOB, RL, RT, the primal Y, Z,
 * F, P, O, EV, TS of Bg rows); each row p carries the chunk's nd directions as tangent rows
 * p nd + d (Rd = Bg nd rows):
 *   YD, YD1  R[Rd x N]         the tangents of y_n and y_{n+1}
 *   ZD, FD   R[S x Rd x ldz], R[S x Rd x N]: the stage arguments' and f's tangents
 *   G        R[Rd x maxw]      the tangent going through a layer
 *   T        R[Bg x maxw]      a direction's dW h
 *   DP       R[nd x ntheta]    the parameters' directions (clnode_gradient_params' layout)
 *   EVI      I[Bg]             each row's next event, from the first
 *   OUT      R[Rd x slots x N] the tangents of the saved points
 * The element-wise kernels take x = column, y = direction d < nd, z = row p < A (no index
 * divided). */
#ifndef CLN_TANGENT_KERNELS_H
#define CLN_TANGENT_KERNELS_H

#include "cln_reverse_kernels.h"
#include "cln_tangent.h"

/* Row p's times of its step n into RT and stage 0's argument into Z (x = column c <= N, y = row
 * p < A): the state Y, then the stage time in column N where the model has a time input (as the
 * reverse pass's begin writes it; the later stages' arguments come with the stage before them). */
CLN_INLINE void cln_tan_begin_body(size_t c, size_t p, size_t A, cln_long n,
                                   CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                   CLN_CONST cln_long *RL, CLN_CONST real *TAU, CLN_CONST real *Y,
                                   CLN_GLOBAL real *RT, CLN_GLOBAL real *Z)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], ldz = (size_t)JOB[CLN_RJ_LDZ];
    if (p >= A || c > N || (c == N && !JOB[CLN_RJ_TIME]))
        return;
    CLN_CONST real *tau = TAU + RL[p * CLN_RL_W + CLN_RL_TAU] + n;
    const real t = tau[0], tn = tau[1];
    if (c == N) {
        Z[p * ldz + N] = K->dir * cln_stage_time(K->c[0], t, tn);
        return;
    }
    Z[p * ldz + c] = Y[p * N + c]; /* cln_stage_value of stage 0: the state */
    if (c == 0) {
        RT[p * CLN_RT_W + CLN_RT_T] = t;
        RT[p * CLN_RT_W + CLN_RT_TN] = tn;
        RT[p * CLN_RT_W + CLN_RT_HD] = cln_stage_hd(K, t, tn);
    }
}

/* Stage i's argument's tangent (x = component c < N, y = d, z = p < A): cln_stage_value on the
 * tangents of y_n and of the earlier stages' k. */
CLN_INLINE void cln_tan_stage_body(size_t c, size_t d, size_t p, size_t A, cln_int i, cln_long nd,
                                   cln_long Rd, CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                   CLN_CONST real *RT, CLN_CONST real *YD, CLN_CONST real *FD,
                                   CLN_GLOBAL real *ZD)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], ldz = (size_t)JOB[CLN_RJ_LDZ];
    if (c >= N || (cln_long)d >= nd || p >= A)
        return;
    const size_t rd = p * (size_t)nd + d;
    ZD[((size_t)i * (size_t)Rd + rd) * ldz + c] = cln_stage_value(
        i, K, RT[p * CLN_RT_W + CLN_RT_HD], FD + rd * N + c, (size_t)Rd * N, YD[rd * N + c]);
}

/* A layer's parameter terms of direction d (x = output j < n, y = row p < A): G's W dh becomes
 * cln_tan_affine(W dh, dW h, db) (T: the product dW h of the rows, DP + db_off the bias's
 * direction where has_db). */
CLN_INLINE void cln_tan_terms_body(size_t j, size_t p, size_t A, cln_long n, cln_long nd,
                                   cln_long d, CLN_CONST real *T, CLN_CONST real *DP,
                                   cln_long db_off, cln_int has_db, CLN_GLOBAL real *G)
{
    if ((cln_long)j >= n || p >= A)
        return;
    CLN_GLOBAL real *v = G + (p * (size_t)nd + (size_t)d) * (size_t)n + j;
    *v = cln_tan_affine(*v, T[p * (size_t)n + j], has_db ? DP[(size_t)db_off + j] : CLN_R(0.0));
}

/* A layer's activation's tangent (x = output j < n, y = d, z = p < A): cln_tan_act at the
 * recomputed pre-activation and output of the block at `off` of P and O. */
CLN_INLINE void cln_tan_layer_body(size_t j, size_t d, size_t p, size_t A, cln_int act, cln_long n,
                                   cln_long nd, cln_long off, CLN_CONST real *P, CLN_CONST real *O,
                                   CLN_GLOBAL real *G)
{
    if ((cln_long)j >= n || (cln_long)d >= nd || p >= A)
        return;
    const size_t e = (size_t)off + p * (size_t)n + j;
    CLN_GLOBAL real *v = G + (p * (size_t)nd + d) * (size_t)n + j;
    *v = cln_tan_act(act, P[e], O[e], *v);
}

/* Stage i's f's tangent (x = component j < N, y = d, z = p < A): the last layer's tangent X, or
 * cln_tan_scale of it with the output (O at o_off) and the scale's direction (DP at s_off of
 * direction d, where has_ds) for a model with an output scale. */
CLN_INLINE void cln_tan_out_body(size_t j, size_t d, size_t p, size_t A, cln_int i, cln_long nd,
                                 cln_long Rd, cln_long o_off, cln_long ntheta, cln_long s_off,
                                 cln_int has_ds, CLN_CONST cln_long *JOB, CLN_CONST real *X,
                                 CLN_CONST real *O, CLN_CONST real *scale, CLN_CONST real *DP,
                                 CLN_GLOBAL real *FD)
{
    const size_t N = (size_t)JOB[CLN_RJ_N];
    const cln_long ns = JOB[CLN_RJ_NS];
    if (j >= N || (cln_long)d >= nd || p >= A)
        return;
    const size_t e = (p * (size_t)nd + d) * N + j;
    real v = X[e];
    if (ns) {
        CLN_CONST real *ds = DP + (size_t)d * (size_t)ntheta + (size_t)s_off;
        v = cln_tan_scale(v, O[(size_t)o_off + p * N + j], CLN_OUT_SCALE_AT(scale, ns, j),
                          has_ds ? CLN_OUT_SCALE_AT(ds, ns, j) : CLN_R(0.0));
    }
    FD[(size_t)i * (size_t)Rd * N + e] = v;
}

/* y_{n+1} of a row or its tangent (x = component c < N, y = d < nd, z = p < A; nd = 1 and Rd =
 * Bg for the primal rows): cln_y1 of the row of YI, the k of its first nk stages of F (stride Rd
 * rows) and the last stage's argument in Z, into YO. */
CLN_INLINE void cln_tan_y1_body(size_t c, size_t d, size_t p, size_t A, cln_long nd, cln_long Rd,
                                cln_long nk, CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                CLN_CONST real *RT, CLN_CONST real *YI, CLN_CONST real *F,
                                CLN_CONST real *Z, CLN_GLOBAL real *YO)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], ldz = (size_t)JOB[CLN_RJ_LDZ];
    const size_t S = (size_t)JOB[CLN_RJ_S];
    if (c >= N || (cln_long)d >= nd || p >= A)
        return;
    const size_t rd = p * (size_t)nd + d;
    const real hd = RT[p * CLN_RT_W + CLN_RT_HD];
    real k[CLN_MAX_STAGES];
    for (size_t j = 0; j < S; ++j)
        k[j] = (cln_long)j < nk ? hd * F[(j * (size_t)Rd + rd) * N + c] : CLN_R(0.0);
    YO[rd * N + c] = cln_y1(K, (cln_int)JOB[CLN_RJ_SSAL], (cln_int)S, YI[rd * N + c], k,
                            Z + ((S - 1) * (size_t)Rd + rd) * ldz, (cln_int)c);
}

/* Row p's next event, from the first, when it is of `kind` at `step`: its index in EV, else -1. */
CLN_INLINE cln_long cln_tan_next_event(CLN_CONST cln_long *rl, CLN_CONST cln_long *evi,
                                       CLN_CONST cln_rev_event *EV, cln_int kind, cln_long step)
{
    if (*evi >= rl[CLN_RL_NEV])
        return -1;
    const cln_long e = rl[CLN_RL_EV] + *evi;
    return EV[e].kind == kind && (cln_long)EV[e].step == step ? e : -1;
}

/* The saved points of row p after `step` steps (x = row p < A): the tangents of y_step into
 * their rows of OUT. */
CLN_INLINE void cln_tan_points_body(size_t p, size_t A, cln_long step, cln_long nd,
                                    CLN_CONST cln_long *JOB, CLN_CONST cln_long *RL,
                                    CLN_CONST cln_rev_event *EV, CLN_GLOBAL cln_long *EVI,
                                    CLN_CONST real *YD, CLN_GLOBAL real *OUT)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], slots = (size_t)JOB[CLN_RJ_SLOTS];
    if (p >= A)
        return;
    CLN_CONST cln_long *rl = RL + p * CLN_RL_W;
    cln_long e;
    while ((e = cln_tan_next_event(rl, EVI + p, EV, CLN_REV_POINT, step)) >= 0) {
        for (size_t d = 0; d < (size_t)nd; ++d) {
            const size_t rd = p * (size_t)nd + d;
            for (size_t c = 0; c < N; ++c)
                OUT[(rd * slots + (size_t)EV[e].slot) * N + c] = YD[rd * N + c];
        }
        EVI[p] += 1;
    }
}

/* The dense outputs inside row p's step n (x = row p < A): cln_interpolate on the tangents of
 * y_n, y_{n+1} and the k of the first nk stages, into their rows of OUT. */
CLN_INLINE void cln_tan_dense_body(size_t p, size_t A, cln_long n, cln_long nd, cln_long nk,
                                   CLN_CONST cln_long *JOB, CLN_CONST cln_consts *K,
                                   CLN_CONST cln_long *RL, CLN_CONST real *RT,
                                   CLN_CONST cln_rev_event *EV, CLN_CONST real *TS,
                                   CLN_GLOBAL cln_long *EVI, CLN_CONST real *YD,
                                   CLN_CONST real *YD1, CLN_CONST real *FD, CLN_GLOBAL real *OUT)
{
    const size_t N = (size_t)JOB[CLN_RJ_N], slots = (size_t)JOB[CLN_RJ_SLOTS];
    const size_t S = (size_t)JOB[CLN_RJ_S], Rd = (size_t)JOB[CLN_RJ_BG] * (size_t)nd;
    if (p >= A)
        return;
    CLN_CONST cln_long *rl = RL + p * CLN_RL_W;
    CLN_CONST real *rt = RT + p * CLN_RT_W;
    const size_t b = (size_t)rl[CLN_RL_B];
    cln_long e;
    while ((e = cln_tan_next_event(rl, EVI + p, EV, CLN_REV_DENSE, n)) >= 0) {
        const real ts = TS[b * (size_t)JOB[CLN_RJ_TS_STRIDE] + (size_t)EV[e].j];
        const real th = cln_dense_theta(ts, rt[CLN_RT_T], rt[CLN_RT_TN]);
        for (size_t d = 0; d < (size_t)nd; ++d) {
            const size_t rd = p * (size_t)nd + d;
            for (size_t c = 0; c < N; ++c) {
                real k[CLN_MAX_STAGES];
                for (size_t j = 0; j < S; ++j)
                    k[j] =
                        (cln_long)j < nk ? rt[CLN_RT_HD] * FD[(j * Rd + rd) * N + c] : CLN_R(0.0);
                OUT[(rd * slots + (size_t)EV[e].slot) * N + c] =
                    cln_interpolate(K, (cln_int)JOB[CLN_RJ_DENSE], (cln_int)S, th, YD[rd * N + c],
                                    YD1[rd * N + c], k);
            }
        }
        EVI[p] += 1;
    }
}

#endif /* CLN_TANGENT_KERNELS_H */
