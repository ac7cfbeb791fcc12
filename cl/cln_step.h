/* cln_step.h - the solver's element-wise arithmetic, written once for every backend.
 *
 * Valid as C11 and as OpenCL C (see cln_prelude.h). A backend runs:
 *   cln_init_traj   once per trajectory before the first step;
 *   cln_stage_elem  once per (trajectory, component) for each stage i: the stage argument
 *                   z_i = y + sum_{j<i} a_ij k_j (and the stage time when the model takes t);
 *   cln_finish_traj once per trajectory after the last stage: error estimate, scaled RMS norm,
 *                   PID controller, end-of-interval clipping, saving and freezing.
 * The vector field (GEMMs, bias + activation) is evaluated between stages by the backend.
 *
 * Semantics: diffrax 0.7.2 (diffeqsolve + PIDController + SaveAt), see
 * shared/reference/diffrax-semantics.md. Times are kept in the state precision in the
 * "direction-normalised" variable tau = direction * t, which increases from tau0 to tau1; the
 * vector field is evaluated at t = direction * tau and k_i = (direction * h) * f_i with
 * h = tau_next - tau_prev > 0, exactly what diffrax's WrapTerm does for backward integration.
 *
 * Buffer layouts (B trajectories, N components, s stages, row-major):
 *   Y  [B][N]          current accepted state
 *   F  [s][B][N]       stage derivatives f_i (k_i = h f_i is formed on the fly)
 *   Z  [B][ldz]        stage argument, ldz = N (+1 when the model takes t: Z[b][N] = t_i)
 *   RS [B][CLN_RS_COUNT] per-trajectory real state, IS [B][CLN_IS_COUNT] integer state
 *   CR, CI             per-solve real and integer constants (CLN_CR_*, CLN_CI_*)
 *   TS [n_ts]          requested save times as tau (increasing), TSOUT [B][n_ts][N]
 *   STT [B][max_steps], STY [B][max_steps][N]   saved accepted steps (when CI_SAVE_STEPS)
 */
#ifndef CLN_STEP_H
#define CLN_STEP_H

#include "cln_prelude.h"
#include "cln_activation.h" /* cln_pow_pos */

#include "cln_layout.h"

/* First attempt: [tau0, min(tau0 + dt0, tau1)] (diffrax applies no 100-ulp snap here). */
CLN_INLINE void cln_init_traj(size_t b, CLN_CONST real *CR, CLN_CONST cln_int *CI,
                              CLN_GLOBAL real *RS, CLN_GLOBAL cln_int *IS)
{
    const real tau0 = CR[CLN_CR_TAU0];
    const real tau1 = CR[CLN_CR_TAU1];
    const real tn = tau0 + CR[CLN_CR_DT0];
    CLN_GLOBAL real *rs = RS + b * CLN_RS_COUNT;
    CLN_GLOBAL cln_int *is = IS + b * CLN_IS_COUNT;
    rs[CLN_RS_T] = tau0;
    rs[CLN_RS_TN] = tn < tau1 ? tn : tau1;
    rs[CLN_RS_INV1] = CLN_R(1.0);
    rs[CLN_RS_INV2] = CLN_R(1.0);
    rs[CLN_RS_EREJ] = CLN_R(0.0);
    rs[CLN_RS_HREJ] = CLN_R(0.0);
    for (int k = 0; k < CLN_IS_COUNT; ++k)
        is[k] = 0;
    /* t0 == t1: the loop body never runs (num_steps = 0); padding rows never run */
    is[CLN_IS_DONE] = !(tau0 < tau1) || b >= (size_t)CI[CLN_CI_BREAL];
}

/* Time of stage i: tau_next exactly when c_i == 1 ("no floating point error"), else
 * tau_prev + c_i h. */
CLN_INLINE real cln_stage_time(real c, real t, real tn)
{
    return c == CLN_R(1.0) ? tn : t + c * (tn - t);
}

/* Stage argument of stage i for element (b, n), 0 <= n < ldz:
 *   z = y + sum_{j<i} a_ij k_j,  k_j = (direction h) f_j,
 * summed in order j = 0, 1, ... and added to y last, as diffrax's tensordot then add.
 * Column n == N (models taking t) receives the stage time direction * tau_i. */
CLN_INLINE void cln_stage_elem(cln_int i, size_t b, cln_int n, CLN_CONST real *CR,
                               CLN_CONST cln_int *CI, CLN_CONST real *RS, CLN_CONST real *Y,
                               CLN_CONST real *F, CLN_GLOBAL real *Z)
{
    const size_t B = (size_t)CI[CLN_CI_B];
    const cln_int N = CI[CLN_CI_N];
    const size_t ldz = (size_t)CI[CLN_CI_LDZ];
    const real t = RS[b * CLN_RS_COUNT + CLN_RS_T];
    const real tn = RS[b * CLN_RS_COUNT + CLN_RS_TN];
    if (n == N) {
        Z[b * ldz + (size_t)n] = CR[CLN_CR_DIR] * cln_stage_time(CR[CLN_CR_C + i], t, tn);
        return;
    }
    const real hd = CR[CLN_CR_DIR] * (tn - t);
    real acc = CLN_R(0.0);
    for (cln_int j = 0; j < i; ++j)
        acc += CR[CLN_CR_A + i * CLN_MAX_STAGES + j] *
               (hd * F[((size_t)j * B + b) * (size_t)N + (size_t)n]);
    const real y = Y[b * (size_t)N + (size_t)n];
    Z[b * ldz + (size_t)n] = i == 0 ? y : y + acc;
}

/* Tsitouras (2011) dense output as diffrax writes it: y(theta) = y0 + sum_i b_i(theta) k_i with
 * the polynomials in factored form, evaluated left to right. */
CLN_INLINE real cln_interp_tsit5(real th, real y0, const real *k)
{
    const real t2 = th * th;
    real w[7];
    w[0] = CLN_R(-1.0530884977290216) * th * (th - CLN_R(1.3299890189751412)) *
           (t2 - CLN_R(1.4364028541716351) * th + CLN_R(0.7139816917074209));
    w[1] = CLN_R(0.1017) * t2 * (t2 - CLN_R(2.1966568338249754) * th + CLN_R(1.2949852507374631));
    w[2] = CLN_R(2.490627285651252793) * t2 *
           (t2 - CLN_R(2.38535645472061657) * th + CLN_R(1.57803468208092486));
    w[3] = CLN_R(-16.54810288924490272) * (th - CLN_R(1.21712927295533244)) *
           (th - CLN_R(0.61620406037800089)) * t2;
    w[4] = CLN_R(47.37952196281928122) * (th - CLN_R(1.203071208372362603)) *
           (th - CLN_R(0.658047292653547382)) * t2;
    w[5] =
        CLN_R(-34.87065786149660974) * (th - CLN_R(1.2)) * (th - CLN_R(0.666666666666666667)) * t2;
    w[6] = CLN_R(2.5) * (th - CLN_R(1.0)) * (th - CLN_R(0.6)) * t2;
    real acc = CLN_R(0.0);
    for (int i = 0; i < 7; ++i)
        acc += w[i] * k[i];
    return y0 + acc;
}

/* Horner evaluation of a polynomial with coefficients from the highest degree down, as
 * jnp.polyval. */
CLN_INLINE real cln_polyval5(real c4, real c3, real c2, real c1, real c0, real x)
{
    return (((c4 * x + c3) * x + c2) * x + c1) * x + c0;
}

/* Dense output of one component over the accepted step [tau_prev, tau_next]. */
CLN_INLINE real cln_interpolate(cln_int kind, CLN_CONST real *CR, cln_int s, real th, real y0,
                                real y1, const real *k)
{
    if (kind == CLN_INTERP_TSIT5)
        return cln_interp_tsit5(th, y0, k);
    if (kind == CLN_INTERP_DOPRI8) {
        /* y0 + sum_i (theta P_i(theta)) k_i, P_i by Horner from the highest degree as jnp.polyval
         * (its first step, 0 * theta + c_0, is c_0 exactly for finite theta) */
        real acc = CLN_R(0.0);
        for (cln_int i = 0; i < s; ++i) {
            CLN_CONST real *c = CR + CLN_CR_DENSE + i * CLN_DENSE_COEFFS;
            const real p = ((((c[0] * th + c[1]) * th + c[2]) * th + c[3]) * th + c[4]) * th + c[5];
            acc += (p * th) * k[i];
        }
        return y0 + acc;
    }
    if (kind == CLN_INTERP_DOPRI5) {
        /* fourth-order polynomial through y0, y1 and a midpoint value (Shampine 1986) */
        real acc = CLN_R(0.0);
        for (cln_int i = 0; i < s; ++i)
            acc += CR[CLN_CR_CMID + i] * k[i];
        const real ymid = y0 + acc;
        const real f0 = k[0], f1 = k[s - 1];
        const real a = CLN_R(2.0) * (f1 - f0) - CLN_R(8.0) * (y1 + y0) + CLN_R(16.0) * ymid;
        const real bb = CLN_R(5.0) * f0 - CLN_R(3.0) * f1 + CLN_R(18.0) * y0 + CLN_R(14.0) * y1 -
                        CLN_R(32.0) * ymid;
        const real c =
            f1 - CLN_R(4.0) * f0 - CLN_R(11.0) * y0 - CLN_R(5.0) * y1 + CLN_R(16.0) * ymid;
        return cln_polyval5(a, bb, c, f0, y0, th);
    }
    if (kind == CLN_INTERP_HERMITE) {
        /* cubic Hermite through (y0, k0) and (y1, k1), k1 the last stage (FSAL) or k_2 (heun) */
        const real k0 = k[0], k1 = k[s - 1];
        const real c3 = k0 + k1 + CLN_R(2.0) * y0 - CLN_R(2.0) * y1;
        const real c2 = CLN_R(-2.0) * k0 - k1 - CLN_R(3.0) * y0 + CLN_R(3.0) * y1;
        return cln_polyval5(CLN_R(0.0), c3, c2, k0, y0, th);
    }
    return y0 + (y1 - y0) * th;
}

/* Whether a row of the stage derivatives holds a NaN or infinity. */
CLN_INLINE int cln_row_nonfinite(CLN_CONST real *f, cln_int N)
{
    int bad = 0;
    for (cln_int n = 0; n < N; ++n)
        bad |= isnan(f[n]) || isinf(f[n]);
    return bad;
}

/* k_j of component n for j < s. */
CLN_INLINE void cln_load_k(real *k, CLN_CONST real *F, size_t B, cln_int N, cln_int s, size_t b,
                           cln_int n, real hd)
{
    for (cln_int j = 0; j < s; ++j)
        k[j] = hd * F[((size_t)j * B + b) * (size_t)N + (size_t)n];
}

/* y1 of component n: the last stage argument for SSAL tableaux (Z holds it), else
 * y + sum_j b_j k_j. */
CLN_INLINE real cln_y1(CLN_CONST real *CR, cln_int ssal, cln_int s, real y, const real *k,
                       CLN_CONST real *zrow, cln_int n)
{
    if (ssal)
        return zrow[n];
    real acc = CLN_R(0.0);
    for (cln_int j = 0; j < s; ++j)
        acc += CR[CLN_CR_B + j] * k[j];
    return y + acc;
}

/* The rounding-floor detector, after the controller's decision on an attempt of size h with
 * error norm E (it only reads the decision, so the step sequence is diffrax's until it fires).
 * The embedded error estimate of a method of order p falls like h^(p+1) as the step shrinks
 * (roughly E ~ h^5 for tsit5), so after a rejection the controller's smaller step is normally
 * accepted, or at least has a much smaller E. When E is rounding noise of the vector field
 * instead (a GEMM with a unit roundoff u far above rtol: the noise h f u / (rtol |y|) shrinks at
 * most like h, and the rounding of the stage arguments makes it jump about), a rejection can
 * follow a rejection with an E that did not fall at all. Such an event adds CLN_FLOOR_EVENT to a
 * leaky counter that every accepted step drains by one; at CLN_FLOOR_LIMIT the trajectory ends
 * with CLN_RESULT_PRECISION_FLOOR. Tuned on the seed problem in tf32 (bursts of 2-4 rejections
 * with E rising from 1.3 to 5.5 while dt fell by 3x near t = 42-43) and silent on every strict
 * problem of the conformance suite (424 solves), including an fp64 diffrax case where E falls
 * only slowly across four rejections and fp32 runs at rtol 1e-6 (16 u). Steps held at dtmin do not
 * shrink and never count; a non-finite E is a different failure and never counts either. */
CLN_INLINE void cln_floor_detect(CLN_GLOBAL real *rs, CLN_GLOBAL cln_int *is, int keep, real h,
                                 real E)
{
    if (keep) {
        rs[CLN_RS_HREJ] = CLN_R(0.0);
        if (is[CLN_IS_FLOOR] > 0)
            is[CLN_IS_FLOOR] -= 1;
        return;
    }
    const real hprev = rs[CLN_RS_HREJ];
    if (hprev > CLN_R(0.0) && h < hprev && !isinf(E) && !isnan(E) && E >= rs[CLN_RS_EREJ]) {
        is[CLN_IS_FLOOR] += CLN_FLOOR_EVENT;
        if (is[CLN_IS_FLOOR] >= CLN_FLOOR_LIMIT && is[CLN_IS_RESULT] == CLN_RESULT_SUCCESS)
            is[CLN_IS_RESULT] = CLN_RESULT_PRECISION_FLOOR;
    }
    rs[CLN_RS_EREJ] = E;
    rs[CLN_RS_HREJ] = h;
}

/* Everything after the stages of one attempt, for trajectory b (diffrax's loop body):
 * error estimate y_err = sum_j e_j k_j (NaN -> +inf), scaled RMS norm
 * E = sqrt(sum_i (y_err_i / (atol + rtol max(|y0_i|, |y1_i|)))^2) / sqrt(N), acceptance E < 1,
 * the PID factor safety (1/E)^coeff1 (1/E_prev)^coeff2 (1/E_prevprev)^coeff3 clipped to
 * [1, factormax] on acceptance and [factormin, safety] on rejection, dtmin/dtmax, the next
 * interval with the end-of-interval rule, saving, FSAL, counters and freezing. */
CLN_INLINE void cln_finish_traj(size_t b, CLN_CONST real *CR, CLN_CONST cln_int *CI,
                                CLN_GLOBAL real *RS, CLN_GLOBAL cln_int *IS, CLN_GLOBAL real *Y,
                                CLN_GLOBAL real *F, CLN_CONST real *Z, CLN_CONST real *TS,
                                CLN_GLOBAL real *TSOUT, CLN_GLOBAL real *STT, CLN_GLOBAL real *STY)
{
    CLN_GLOBAL cln_int *is = IS + b * CLN_IS_COUNT;
    if (is[CLN_IS_DONE])
        return;
    CLN_GLOBAL real *rs = RS + b * CLN_RS_COUNT;
    const size_t B = (size_t)CI[CLN_CI_B];
    const cln_int N = CI[CLN_CI_N];
    const cln_int s = CI[CLN_CI_STAGES];
    const cln_int ssal = CI[CLN_CI_SSAL];
    const size_t ldz = (size_t)CI[CLN_CI_LDZ];
    CLN_GLOBAL real *y = Y + b * (size_t)N;
    CLN_CONST real *zrow = Z + b * ldz;

    /* the vector field at the current state (stage 1) is not finite: no step can succeed */
    if (cln_row_nonfinite(F + b * (size_t)N, N)) {
        is[CLN_IS_RESULT] = CLN_RESULT_NONFINITE;
        is[CLN_IS_DONE] = 1;
        return;
    }

    const real t = rs[CLN_RS_T];
    const real tn = rs[CLN_RS_TN];
    const real h = tn - t;
    const real hd = CR[CLN_CR_DIR] * h;
    const real tau1 = CR[CLN_CR_TAU1];
    real k[CLN_MAX_STAGES];

    int keep = 1;
    real dt = h;
    if (CI[CLN_CI_ADAPTIVE]) {
        /* pass 1: is any component of y1 NaN? then y0 is used for the scale */
        int y1_nan = 0;
        for (cln_int n = 0; n < N; ++n) {
            cln_load_k(k, F, B, N, s, b, n, hd);
            y1_nan |= isnan(cln_y1(CR, ssal, s, y[n], k, zrow, n));
        }
        /* pass 2: scaled error and its sum of squares */
        const real atol = CR[CLN_CR_ATOL], rtol = CR[CLN_CR_RTOL];
        real sum = CLN_R(0.0), last = CLN_R(0.0);
        for (cln_int n = 0; n < N; ++n) {
            cln_load_k(k, F, B, N, s, b, n, hd);
            real err = CLN_R(0.0);
            for (cln_int j = 0; j < s; ++j)
                err += CR[CLN_CR_E + j] * k[j];
            if (isnan(err))
                err = (real)INFINITY;
            const real y1 = y1_nan ? y[n] : cln_y1(CR, ssal, s, y[n], k, zrow, n);
            const real ymax = fmax(fabs(y[n]), fabs(y1));
            const real sc = err / (atol + ymax * rtol);
            last = sc;
            sum += sc * sc;
        }
        const real E = N == 1 ? fabs(last) : sqrt(sum) / CR[CLN_CR_SQRT_N];
        keep = E < CLN_R(1.0);
        if (CI[CLN_CI_HAS_DTMIN])
            keep |= is[CLN_IS_AT_DTMIN];
        const real inv = CLN_R(1.0) / E;
        const real f1 = CI[CLN_CI_COEFF1_ZERO] ? CLN_R(1.0) : cln_pow_pos(inv, CR[CLN_CR_COEFF1]);
        const real f2 =
            CI[CLN_CI_COEFF2_ZERO] ? CLN_R(1.0) : cln_pow_pos(rs[CLN_RS_INV1], CR[CLN_CR_COEFF2]);
        const real f3 =
            CI[CLN_CI_COEFF3_ZERO] ? CLN_R(1.0) : cln_pow_pos(rs[CLN_RS_INV2], CR[CLN_CR_COEFF3]);
        real factor = CR[CLN_CR_SAFETY] * f1 * f2 * f3;
        const real lo = keep ? CLN_R(1.0) : CR[CLN_CR_FACTORMIN];
        const real hi = keep ? CR[CLN_CR_FACTORMAX] : CR[CLN_CR_SAFETY];
        factor = factor < hi ? (factor > lo ? factor : lo) : hi; /* jnp.clip */
        dt = h * factor;
        if (CI[CLN_CI_HAS_DTMAX])
            dt = dt < CR[CLN_CR_DTMAX] ? dt : CR[CLN_CR_DTMAX];
        if (CI[CLN_CI_HAS_DTMIN]) {
            const real dtmin = CR[CLN_CR_DTMIN];
            if (!CI[CLN_CI_FORCE_DTMIN] && dt < dtmin)
                is[CLN_IS_RESULT] = CLN_RESULT_DT_MIN;
            if (is[CLN_IS_AT_DTMIN] && factor == CLN_R(1.0))
                dt = dtmin;
            is[CLN_IS_AT_DTMIN] = dt <= dtmin;
            dt = dt > dtmin ? dt : dtmin;
        }
        if (keep) {
            /* a zero or infinite error must not poison the PI/PID history */
            rs[CLN_RS_INV2] = rs[CLN_RS_INV1];
            rs[CLN_RS_INV1] = (inv == CLN_R(0.0) || isinf(inv)) ? CLN_R(1.0) : inv;
        }
        if (CI[CLN_CI_FLOOR_DETECT])
            cln_floor_detect(rs, is, keep, h, E);
    } else {
        dt = CR[CLN_CR_DT0];
    }

    /* next interval, then diffrax's _clip_to_end */
    const real next_t0 = keep ? tn : t;
    const real next_t1 = next_t0 + dt;
    const real tprev = next_t0 < tau1 ? next_t0 : tau1;
    real tnext = next_t1;
    if (next_t1 > CR[CLN_CR_CLIP_FLOOR])
        tnext = keep ? tau1 : tprev + CLN_R(0.5) * (tau1 - tprev);

    is[CLN_IS_NSTEPS] += 1;
    if (keep) {
        is[CLN_IS_NACC] += 1;
        /* dense output at the requested times inside this step, before y moves on */
        const cln_int nts = CI[CLN_CI_N_TS];
        cln_int j = is[CLN_IS_NTS];
        for (; j < nts && TS[j] <= tn; ++j) {
            const real th = tn == t ? CLN_R(0.0) : (TS[j] - t) / (tn - t);
            CLN_GLOBAL real *out = TSOUT + (b * (size_t)nts + (size_t)j) * (size_t)N;
            for (cln_int n = 0; n < N; ++n) {
                cln_load_k(k, F, B, N, s, b, n, hd);
                const real y1 = cln_y1(CR, ssal, s, y[n], k, zrow, n);
                out[n] = cln_interpolate(CI[CLN_CI_INTERP], CR, s, th, y[n], y1, k);
            }
        }
        is[CLN_IS_NTS] = j;
        /* accept: y <- y1, FSAL f0 <- f_last */
        for (cln_int n = 0; n < N; ++n) {
            cln_load_k(k, F, B, N, s, b, n, hd);
            y[n] = cln_y1(CR, ssal, s, y[n], k, zrow, n);
            if (CI[CLN_CI_FSAL])
                F[b * (size_t)N + (size_t)n] = F[((size_t)(s - 1) * B + b) * (size_t)N + (size_t)n];
        }
        if (CI[CLN_CI_SAVE_STEPS]) {
            const size_t m = (size_t)is[CLN_IS_NSTEPS_SAVED];
            const size_t ms = (size_t)CI[CLN_CI_MAX_STEPS];
            STT[b * ms + m] = CR[CLN_CR_DIR] * tprev;
            for (cln_int n = 0; n < N; ++n)
                STY[(b * ms + m) * (size_t)N + (size_t)n] = y[n];
            is[CLN_IS_NSTEPS_SAVED] = (cln_int)(m + 1);
        }
    } else {
        is[CLN_IS_NREJ] += 1;
    }
    rs[CLN_RS_T] = tprev;
    rs[CLN_RS_TN] = tnext;

    /* diffrax's loop condition: tprev < t1, successful, and num_steps < max_steps */
    if (!(tprev < tau1)) {
        is[CLN_IS_DONE] = 1;
    } else if (is[CLN_IS_RESULT] != CLN_RESULT_SUCCESS) {
        is[CLN_IS_DONE] = 1;
    } else if (is[CLN_IS_NSTEPS] >= CI[CLN_CI_MAX_STEPS]) {
        is[CLN_IS_RESULT] = CLN_RESULT_MAX_STEPS;
        is[CLN_IS_DONE] = 1;
    }
}

#endif /* CLN_STEP_H */
