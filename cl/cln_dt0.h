/* cln_dt0.h - the automatic first step (clnode_solve_options.dt0_auto), written once for every
 * backend (valid as C11, OpenCL C and CUDA C++, as cln_step.h).
 *
 * The estimate of Hairer, Norsett & Wanner (Solving ODEs I, II.4), per trajectory, as torchode
 * 1.0.1 selects it per sample, in the state precision, with sc_n = atol + |y0_n| rtol:
 *   d0 = rms(y0 / sc),  d1 = rms(f0 / sc),           f0 = f(t0, y0)
 *   h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5, else (0.01 d0) / d1;  h0 = min(h0, |t1 - t0|)
 *   y1 = y0 + (dir h0) f0,  f1 = f(t0 + dir h0, y1)
 *   d2 = rms((f1 - f0) / sc) / h0
 *   h1 = max(1e-6, 1e-3 h0) if max(d1, d2) <= 1e-15, else (0.01 / max(d1, d2))^(1/p)
 *   h  = min(100 h0, h1), then clipped to dtmax and dtmin (in that order, as a given dt0)
 * p is the method's order (clnode_method.order: torchode's convergence_order; torchdiffeq passes
 * order - 1 and adds 1 back). rms is cln_rms: the squares summed in component order, sqrt(sum) /
 * sqrt(N). A NaN or infinite field gives an h that is not a positive finite number: the first step
 * is then h0 where that is one, else 1e-6 (the first step finds the field non-finite and ends the
 * trajectory). The backend evaluates f0 and f1 as the solve's stages (its GEMMs, bias +
 * activation), into F block 0 each time: f0 as stage 0 of the first attempt; then cln_dt0_probe
 * writes y1 and t0 + dir h0 into Z and keeps f0 in F block 1; f1 = MLP(Z) goes into block 0 (the
 * backend's bare field, the rhs op); cln_dt0_pick writes h into RS[b].dt0 and puts f0 back into
 * block 0 (where an FSAL method's first step reads it); the driver then runs cln_init_traj again.
 * Each is one call per trajectory that is not frozen (frozen rows: t0 == t1, and padding).
 */
#ifndef CLN_DT0_H
#define CLN_DT0_H

#include "cln_step.h"

/* The tolerance scale of one component, atol + |y0| rtol (torchode's error bounds at y0). */
CLN_INLINE real cln_dt0_scale(CLN_CONST cln_consts *K, real y0)
{
    return K->atol + fabs(y0) * K->rtol;
}

/* d0 and d1 (into *d1) of trajectory b, and h0, from f0 = f (its row): the first two lines of
 * the estimate. */
CLN_INLINE real cln_dt0_h0(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                           CLN_CONST cln_rstate *RS, size_t b, CLN_CONST real *Y, CLN_CONST real *f,
                           real *d1)
{
    const cln_int N = KI->N;
    CLN_CONST real *y = Y + b * (size_t)N;
    real s0 = CLN_R(0.0), s1 = CLN_R(0.0), u0 = CLN_R(0.0), u1 = CLN_R(0.0);
    for (cln_int n = 0; n < N; ++n) {
        const real sc = cln_dt0_scale(K, y[n]);
        u0 = y[n] / sc;
        u1 = f[n] / sc;
        s0 += u0 * u0;
        s1 += u1 * u1;
    }
    const real d0 = cln_rms(s0, u0, N, K->sqrt_n);
    *d1 = cln_rms(s1, u1, N, K->sqrt_n);
    real h0 = d0 < CLN_R(1e-5) || *d1 < CLN_R(1e-5) ? CLN_R(1e-6) : CLN_R(0.01) * d0 / *d1;
    const real span = RS[b].tau1 - RS[b].tau0;
    return h0 < span ? h0 : span; /* a NaN h0 stays NaN */
}

/* The probe of trajectory b, f0 in F block 0: Z's row = y0 + (dir h0) f0, and its time column
 * (models taking t) dir (tau0 + h0) = t0 + dir h0; f0 copied into F block 1. */
CLN_INLINE void cln_dt0_probe(size_t b, CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                              CLN_CONST cln_rstate *RS, CLN_CONST real *Y, CLN_GLOBAL real *F,
                              CLN_GLOBAL real *Z)
{
    const cln_int N = KI->N;
    const size_t ldz = (size_t)KI->ldz, BN = (size_t)KI->B * (size_t)N;
    real d1;
    const real h0 = cln_dt0_h0(K, KI, RS, b, Y, F + b * (size_t)N, &d1);
    const real hd = K->dir * h0;
    for (cln_int n = 0; n < N; ++n) {
        const size_t e = b * (size_t)N + (size_t)n;
        Z[b * ldz + (size_t)n] = Y[e] + hd * F[e];
        F[BN + e] = F[e];
    }
    if (KI->time_input)
        Z[b * ldz + (size_t)N] = K->dir * (RS[b].tau0 + h0);
}

/* The first step of trajectory b from f0 (F block 1) and f1 (F block 0), into RS[b].dt0; f0
 * back into block 0. */
CLN_INLINE void cln_dt0_pick(size_t b, CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                             CLN_GLOBAL cln_rstate *RS, CLN_CONST real *Y, CLN_GLOBAL real *F)
{
    const cln_int N = KI->N;
    CLN_CONST real *y = Y + b * (size_t)N;
    CLN_GLOBAL real *f1 = F + b * (size_t)N;                   /* block 0 */
    CLN_GLOBAL real *f0 = F + ((size_t)KI->B + b) * (size_t)N; /* block 1 */
    real d1;
    const real h0 = cln_dt0_h0(K, KI, RS, b, Y, f0, &d1);
    real s2 = CLN_R(0.0), u2 = CLN_R(0.0);
    for (cln_int n = 0; n < N; ++n) {
        u2 = (f1[n] - f0[n]) / cln_dt0_scale(K, y[n]);
        s2 += u2 * u2;
    }
    const real d2 = cln_rms(s2, u2, N, K->sqrt_n) / h0;
    const real dm = d1 >= d2 ? d1 : d2; /* max(d1, d2); a NaN d2 makes h NaN */
    real h1;
    if (dm <= CLN_R(1e-15)) {
        const real small = CLN_R(1e-3) * h0;
        h1 = small > CLN_R(1e-6) ? small : CLN_R(1e-6);
    } else {
        h1 = cln_pow_pos(CLN_R(0.01) / dm, CLN_R(1.0) / (real)KI->dt0_order);
    }
    const real big = CLN_R(100.0) * h0;
    real h = big < h1 ? big : h1;
    if (!(h > CLN_R(0.0) && h < (real)INFINITY))
        h = h0 > CLN_R(0.0) && h0 < (real)INFINITY ? h0 : CLN_R(1e-6);
    if (KI->has_dtmax && h > K->dtmax)
        h = K->dtmax;
    if (KI->has_dtmin && h < K->dtmin)
        h = K->dtmin;
    RS[b].dt0 = h;
    for (cln_int n = 0; n < N; ++n)
        f1[n] = f0[n];
}

#endif /* CLN_DT0_H */
