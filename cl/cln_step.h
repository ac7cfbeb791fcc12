/* cln_step.h - the solver's element-wise arithmetic, written once for every backend.
 *
 * Valid as C11 and as OpenCL C (see cln_prelude.h). A backend runs:
 *   cln_init_traj   once per trajectory before the first step;
 *   cln_stage_elem  once per (trajectory, component) for each stage i: the stage argument
 *                   z_i = y + sum_{j<i} a_ij k_j (and the stage time when the model takes t);
 *   cln_finish_traj once per trajectory after the last stage.
 * The vector field (GEMMs, bias + activation) is evaluated between stages by the backend.
 *
 * cln_finish_traj is a composition of layers that are usable and tested on their own
 * (tests/unit/test_controller.c), in the order GSL's odeiv2 and diffrax keep them apart:
 *   error      cln_scaled_span (cln_scaled_error), cln_rms -> cln_error_norm
 *   control    cln_pid_factor, cln_limit_dt, cln_shift_history, cln_floor_detect -> cln_control
 *   step end   cln_clip_to_end, cln_save_dense (cln_interpolate), cln_accept, cln_save_step,
 *              cln_freeze
 *
 * Semantics: diffrax 0.7.2 (diffeqsolve + PIDController + SaveAt), see
 * shared/reference/diffrax-semantics.md. Times are kept in the state precision in the
 * "direction-normalised" variable tau = direction * t, which increases from tau0 to tau1; the
 * vector field is evaluated at t = direction * tau and k_i = (direction * h) * f_i with
 * h = tau_next - tau_prev > 0, exactly what diffrax's WrapTerm does for backward integration.
 *
 * Buffer layouts (B trajectories, N components, s stages, row-major; structs in cln_layout.h):
 *   Y  [B][N]          current accepted state
 *   F  [s][B][N]       stage derivatives f_i (k_i = h f_i is formed on the fly)
 *   Z  [B][ldz]        stage argument, ldz = N (+1 when the model takes t: Z[b][N] = t_i)
 *   RS [B] cln_rstate, IS [B] cln_istate   per-trajectory state
 *   K  cln_consts, KI cln_iconsts          per-solve constants
 *   TS [n_ts]          requested save times as tau (increasing), one list shared by the batch,
 *                      or TS [B][n_ts], a list per trajectory (KI.ts_stride = n_ts);
 *                      TSOUT [B][n_ts][N]
 *   STT [B][steps_cap], STY [B][steps_cap][N]   saved accepted steps (when KI.save_steps);
 *                      steps_cap (KI) grows with the steps taken (the driver's cln_grow_steps)
 */
#ifndef CLN_STEP_H
#define CLN_STEP_H

#include "cln_prelude.h"
#include "cln_activation.h" /* cln_pow_pos */

#include "cln_layout.h"

typedef CLN_CONSTS_STRUCT(real) cln_consts;
typedef CLN_RSTATE_STRUCT(real) cln_rstate;

/* First attempt: [tau0, min(tau0 + dt0, tau1)] (diffrax applies no 100-ulp snap here), from
 * the trajectory's own interval and first step (RS[b].tau0, tau1, dt0, written by the driver). */
CLN_INLINE void cln_init_traj(size_t b, CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                              CLN_GLOBAL cln_rstate *RS, CLN_GLOBAL cln_istate *IS)
{
    (void)K;
    CLN_GLOBAL cln_rstate *rs = RS + b;
    CLN_GLOBAL cln_istate *is = IS + b;
    const real tau0 = rs->tau0;
    const real tau1 = rs->tau1;
    const real tn = tau0 + rs->dt0;
    rs->t = tau0;
    rs->tn = tn < tau1 ? tn : tau1;
    rs->inv1 = CLN_R(1.0);
    rs->inv2 = CLN_R(1.0);
    rs->erej = CLN_R(0.0);
    rs->hrej = CLN_R(0.0);
    is->result = CLN_RESULT_SUCCESS;
    is->nsteps = is->nacc = is->nrej = 0;
    is->at_dtmin = 0;
    is->nts = is->nsteps_saved = 0;
    is->floor = 0;
    /* t0 == t1: the loop body never runs (num_steps = 0); padding rows never run */
    is->done = !(tau0 < tau1) || b >= (size_t)KI->Breal;
}

/* The check of a solve from device arrays (clnode/device_solve.h) on the device: FLAG[b] = the
 * first of row b's `cols` values X[off + b ld + n] that is not finite, counted from 1, or 0 when
 * all are (b < rows; the host path checks y0 and the inputs on the host instead). */
CLN_INLINE void cln_nonfinite_row(size_t b, cln_long rows, cln_long cols, cln_long ld, cln_long off,
                                  CLN_CONST real *X, CLN_GLOBAL cln_long *FLAG)
{
    if ((cln_long)b >= rows)
        return;
    cln_long first = 0;
    for (cln_long n = cols; n-- > 0;)
        if (!isfinite(X[(size_t)off + b * (size_t)ld + (size_t)n]))
            first = n + 1;
    FLAG[b] = first;
}

/* The check of the save times of a solve from device arrays (clnode/device_solve.h), forward
 * (tau = t) on the device: FLAG[b] = 4 j + why (CLN_TS_*) for the first save time j of row b
 * (TS[b ld + j], j < cols) that is not finite, lies outside [RS[b].tau0, RS[b].tau1] (only with
 * `within`) or is smaller than TS[b ld + j - 1] (cln_layout.h: CLN_TS_*), or 0 when none is (b <
 * rows; a shared list is the one row of ld 0). The host path checks the host's save times on the
 * host instead. */
CLN_INLINE void cln_bad_save_row(size_t b, cln_long rows, cln_long cols, cln_long ld,
                                 cln_long within, CLN_CONST real *TS, CLN_CONST cln_rstate *RS,
                                 CLN_GLOBAL cln_long *FLAG)
{
    if ((cln_long)b >= rows)
        return;
    const real tau0 = RS[b].tau0, tau1 = RS[b].tau1;
    CLN_CONST real *ts = TS + b * (size_t)ld;
    cln_long bad = 0;
    for (cln_long j = 0; j < cols && !bad; ++j) {
        const real t = ts[j];
        if (!isfinite(t))
            bad = 4 * j + CLN_TS_NONFINITE;
        else if (within && !(t >= tau0 && t <= tau1))
            bad = 4 * j + CLN_TS_OUTSIDE;
        else if (j > 0 && t < ts[j - 1])
            bad = 4 * j + CLN_TS_DECREASING;
    }
    FLAG[b] = bad;
}

/* Time of stage i: tau_next exactly when c_i == 1 ("no floating point error"), else
 * tau_prev + c_i h. */
CLN_INLINE real cln_stage_time(real c, real t, real tn)
{
    return c == CLN_R(1.0) ? tn : t + c * (tn - t);
}

/* direction h of the step from t to tn: the factor of every k_j = (direction h) f_j. */
CLN_INLINE real cln_stage_hd(CLN_CONST cln_consts *K, real t, real tn)
{
    return K->dir * (tn - t);
}

/* One stage argument y + sum_{j<i} a_ij (hd f_j), f_j = f[j * stride] (see cln_stage_elem). */
CLN_INLINE real cln_stage_value(cln_int i, CLN_CONST cln_consts *K, real hd, CLN_CONST real *f,
                                size_t stride, real y)
{
    real acc = CLN_R(0.0);
    for (cln_int j = 0; j < i; ++j)
        acc += K->a[i][j] * (hd * f[(size_t)j * stride]);
    return i == 0 ? y : y + acc;
}

/* Stage argument of stage i for element (b, n), 0 <= n < ldz:
 *   z = y + sum_{j<i} a_ij k_j,  k_j = (direction h) f_j,
 * summed in order j = 0, 1, ... and added to y last, as diffrax's tensordot then add.
 * Column n == N (models taking t) receives the stage time direction * tau_i. The columns after
 * those (a model's conditioning inputs, constant over the solve) are written once by the driver
 * and left alone here. */
CLN_INLINE void cln_stage_elem(cln_int i, size_t b, cln_int n, CLN_CONST cln_consts *K,
                               CLN_CONST cln_iconsts *KI, CLN_CONST cln_rstate *RS,
                               CLN_CONST real *Y, CLN_CONST real *F, CLN_GLOBAL real *Z)
{
    const size_t B = (size_t)KI->B;
    const cln_int N = KI->N;
    const size_t ldz = (size_t)KI->ldz;
    const real t = RS[b].t;
    const real tn = RS[b].tn;
    if (n >= N) {
        if (n == N && KI->time_input)
            Z[b * ldz + (size_t)n] = K->dir * cln_stage_time(K->c[i], t, tn);
        return;
    }
    const size_t e = b * (size_t)N + (size_t)n;
    Z[b * ldz + (size_t)n] =
        cln_stage_value(i, K, cln_stage_hd(K, t, tn), F + e, B * (size_t)N, Y[e]);
}

/* ---- dense output: y(theta) over an accepted step from y0, y1 and k_0..k_{s-1}, in the form
 * that KI.dense_form names, with the method's coefficients d = K.dense (one row per stage).
 * Each form keeps diffrax's order of evaluation, so the forms are not merged into one. ---- */

/* Tsitouras (2011) as diffrax writes it: y0 + sum_i b_i(theta) k_i with the seven polynomials in
 * factored form, evaluated left to right (cln_dense_tsit5_weights; the reverse pass's
 * coefficients too):
 *   b_0 = d00 th (th - d01) (th^2 - d02 th + d03)
 *   b_i = di0 th^2 (th^2 - di1 th + di2)      i = 1, 2
 *   b_i = di0 (th - di1) (th - di2) th^2      i = 3..6 */
CLN_INLINE void cln_dense_tsit5_weights(CLN_CONST cln_consts *K, real th, real *w)
{
    const real t2 = th * th;
    w[0] =
        K->dense[0][0] * th * (th - K->dense[0][1]) * (t2 - K->dense[0][2] * th + K->dense[0][3]);
    for (int i = 1; i < 3; ++i)
        w[i] = K->dense[i][0] * t2 * (t2 - K->dense[i][1] * th + K->dense[i][2]);
    for (int i = 3; i < 7; ++i)
        w[i] = K->dense[i][0] * (th - K->dense[i][1]) * (th - K->dense[i][2]) * t2;
}

CLN_INLINE real cln_dense_tsit5(CLN_CONST cln_consts *K, real th, real y0, const real *k)
{
    real w[7];
    cln_dense_tsit5_weights(K, th, w);
    real acc = CLN_R(0.0);
    for (int i = 0; i < 7; ++i)
        acc += w[i] * k[i];
    return y0 + acc;
}

/* theta P_i(theta), P_i of degree 5 with coefficients d_i0 (highest degree) to d_i5, by Horner as
 * jnp.polyval (Bogacki & Shampine (1990) for dopri8; its first step, 0 * theta + c_0, is c_0
 * exactly for finite theta): the coefficient of k_i in cln_dense_polynomial. */
CLN_INLINE real cln_dense_polynomial_weight(CLN_CONST cln_consts *K, cln_int i, real th)
{
    CLN_CONST real *c = K->dense[i];
    const real p = ((((c[0] * th + c[1]) * th + c[2]) * th + c[3]) * th + c[4]) * th + c[5];
    return p * th;
}

/* y0 + sum_i (theta P_i(theta)) k_i. */
CLN_INLINE real cln_dense_polynomial(CLN_CONST cln_consts *K, cln_int s, real th, real y0,
                                     const real *k)
{
    real acc = CLN_R(0.0);
    for (cln_int i = 0; i < s; ++i)
        acc += cln_dense_polynomial_weight(K, i, th) * k[i];
    return y0 + acc;
}

/* Horner evaluation of a polynomial with coefficients from the highest degree down, as
 * jnp.polyval. */
CLN_INLINE real cln_polyval5(real c4, real c3, real c2, real c1, real c0, real x)
{
    return (((c4 * x + c3) * x + c2) * x + c1) * x + c0;
}

/* Fourth-order polynomial through y0, y1, the end slopes k_0 and k_{s-1} and a midpoint value
 * y0 + sum_i d_i0 k_i (Shampine (1986) for dopri5). */
CLN_INLINE real cln_dense_midpoint(CLN_CONST cln_consts *K, cln_int s, real th, real y0, real y1,
                                   const real *k)
{
    real acc = CLN_R(0.0);
    for (cln_int i = 0; i < s; ++i)
        acc += K->dense[i][0] * k[i];
    const real ymid = y0 + acc;
    const real f0 = k[0], f1 = k[s - 1];
    const real a = CLN_R(2.0) * (f1 - f0) - CLN_R(8.0) * (y1 + y0) + CLN_R(16.0) * ymid;
    const real bb = CLN_R(5.0) * f0 - CLN_R(3.0) * f1 + CLN_R(18.0) * y0 + CLN_R(14.0) * y1 -
                    CLN_R(32.0) * ymid;
    const real c = f1 - CLN_R(4.0) * f0 - CLN_R(11.0) * y0 - CLN_R(5.0) * y1 + CLN_R(16.0) * ymid;
    return cln_polyval5(a, bb, c, f0, y0, th);
}

/* Cubic Hermite through (y0, k_0) and (y1, k_{s-1}): k_{s-1} is f(t1, y1) h for FSAL methods
 * (bosh3) and heun's second stage. */
CLN_INLINE real cln_dense_hermite(cln_int s, real th, real y0, real y1, const real *k)
{
    const real k0 = k[0], k1 = k[s - 1];
    const real c3 = k0 + k1 + CLN_R(2.0) * y0 - CLN_R(2.0) * y1;
    const real c2 = CLN_R(-2.0) * k0 - k1 - CLN_R(3.0) * y0 + CLN_R(3.0) * y1;
    return cln_polyval5(CLN_R(0.0), c3, c2, k0, y0, th);
}

/* Dense output of one component over the accepted step [tau_prev, tau_next]. */
CLN_INLINE real cln_interpolate(CLN_CONST cln_consts *K, cln_int form, cln_int s, real th, real y0,
                                real y1, const real *k)
{
    if (form == CLN_DENSE_TSIT5)
        return cln_dense_tsit5(K, th, y0, k);
    if (form == CLN_DENSE_POLYNOMIAL)
        return cln_dense_polynomial(K, s, th, y0, k);
    if (form == CLN_DENSE_MIDPOINT)
        return cln_dense_midpoint(K, s, th, y0, y1, k);
    if (form == CLN_DENSE_HERMITE)
        return cln_dense_hermite(s, th, y0, y1, k);
    return y0 + (y1 - y0) * th; /* CLN_DENSE_LINEAR */
}

/* ---- one row of a trajectory's stages ---- */

/* Whether a row of the stage derivatives holds a NaN or infinity. */
CLN_INLINE int cln_row_nonfinite(CLN_CONST real *f, cln_int N)
{
    int bad = 0;
    for (cln_int n = 0; n < N; ++n)
        bad |= !isfinite(f[n]);
    return bad;
}

/* k_j of component n for j < s. */
CLN_INLINE void cln_load_k(real *k, CLN_CONST real *F, size_t B, cln_int N, cln_int s, size_t b,
                           cln_int n, real hd)
{
    for (cln_int j = 0; j < s; ++j)
        k[j] = hd * F[((size_t)j * B + b) * (size_t)N + (size_t)n];
}

/* Term j of y1's sum (b_j k_j) and of the error estimate's (e_j k_j, e = b - b_hat), each sum
 * taken from 0 in stage order (cln_y1, cln_scaled_span). */
CLN_INLINE real cln_y1_term(CLN_CONST cln_consts *K, cln_int j, real acc, real k)
{
    return acc + K->b[j] * k;
}
CLN_INLINE real cln_err_term(CLN_CONST cln_consts *K, cln_int j, real acc, real k)
{
    return acc + K->e[j] * k;
}

/* y1 of component n: the last stage argument for SSAL tableaux (Z holds it), else
 * y + sum_j b_j k_j. */
CLN_INLINE real cln_y1(CLN_CONST cln_consts *K, cln_int ssal, cln_int s, real y, const real *k,
                       CLN_CONST real *zrow, cln_int n)
{
    if (ssal)
        return zrow[n];
    real acc = CLN_R(0.0);
    for (cln_int j = 0; j < s; ++j)
        acc = cln_y1_term(K, j, acc, k[j]);
    return y + acc;
}

/* ---- the error norm ---- */

/* One component of the scaled error: y_err / (atol + rtol max(|y0|, |y1|)), a NaN y_err counting
 * as +inf. */
CLN_INLINE real cln_scaled_error(real err, real y0, real y1, real atol, real rtol)
{
    if (isnan(err))
        err = (real)INFINITY;
    const real a0 = fabs(y0), a1 = fabs(y1);
    /* fmax(a0, a1) of two magnitudes (a NaN gives way to the other one), as a select that a
     * compiler vectorises (where fmax is a library call) */
    const real ymax = a0 >= a1 || a1 != a1 ? a0 : a1;
    return err / (atol + ymax * rtol);
}

/* The RMS norm sqrt(sum) / sqrt(N) from the sum of squares, as lineax's rms_norm; one component:
 * |last| (its square root of a square). */
CLN_INLINE real cln_rms(real sum, real last, cln_int N, real sqrt_n)
{
    return N == 1 ? fabs(last) : sqrt(sum) / sqrt_n;
}

/* The scaled errors of components n .. n + len - 1 of trajectory b (len <= CLN_NORM_CHUNK) into
 * sc: each one's error estimate y_err = sum_j e_j k_j in stage order (never y1 - y1_hat), its y1
 * (y0 alone when y1_nan; the last stage argument for SSAL tableaux, else y + sum_j b_j k_j, as
 * cln_y1) and cln_scaled_error, computed stage by stage across the components, contiguous in F, y
 * and zrow. */
CLN_INLINE void cln_scaled_span(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                                cln_int n, cln_int len, CLN_CONST real *y, CLN_CONST real *F,
                                CLN_CONST real *zrow, real hd, int y1_nan, real *sc)
{
    const size_t B = (size_t)KI->B, N = (size_t)KI->N;
    const cln_int s = KI->stages, ssal = KI->ssal;
    real err[CLN_NORM_CHUNK], acc[CLN_NORM_CHUNK];
    CLN_ACROSS_COMPONENTS
    for (cln_int c = 0; c < len; ++c)
        err[c] = acc[c] = CLN_R(0.0);
    for (cln_int j = 0; j < s; ++j) {
        CLN_CONST real *f = F + ((size_t)j * B + b) * N + (size_t)n;
        CLN_ACROSS_COMPONENTS
        for (cln_int c = 0; c < len; ++c) {
            const real k = hd * f[c];
            err[c] = cln_err_term(K, j, err[c], k);
            acc[c] = cln_y1_term(K, j, acc[c], k);
        }
    }
    CLN_ACROSS_COMPONENTS
    for (cln_int c = 0; c < len; ++c) {
        const real y0 = y[n + c];
        const real y1 = y1_nan ? y0 : ssal ? zrow[n + c] : y0 + acc[c];
        sc[c] = cln_scaled_error(err[c], y0, y1, K->atol, K->rtol);
    }
}

/* E of trajectory b's attempt: the RMS of the scaled errors over its N components, squared and
 * summed in component order. Two passes: when any component of y1 is NaN, y0 alone sets the
 * scale of every component (diffrax). The scaled errors are computed CLN_NORM_CHUNK components at
 * a time (cln_scaled_span, whose loops have that constant length, so that a host compiler
 * vectorises them; the last chunk ends at component N - 1 and overlaps the one before, whose
 * components it does not sum again), or all N at once when N is smaller, then summed in order. */
CLN_INLINE real cln_error_norm(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                               CLN_CONST real *y, CLN_CONST real *F, CLN_CONST real *zrow, real hd)
{
    const cln_int N = KI->N, ssal = KI->ssal;
    int y1_nan = 0;
    if (ssal) { /* y1 is the last stage argument: no k to load */
        for (cln_int n = 0; n < N; ++n)
            y1_nan |= isnan(zrow[n]);
    } else {
        const cln_int s = KI->stages;
        real k[CLN_MAX_STAGES];
        for (cln_int n = 0; n < N; ++n) {
            cln_load_k(k, F, (size_t)KI->B, N, s, b, n, hd);
            y1_nan |= isnan(cln_y1(K, ssal, s, y[n], k, zrow, n));
        }
    }
    real sum = CLN_R(0.0), last = CLN_R(0.0);
    for (cln_int n0 = 0; n0 < N; n0 += CLN_NORM_CHUNK) {
        real sc[CLN_NORM_CHUNK];
        cln_int base = 0;
        if (N >= CLN_NORM_CHUNK) {
            base = n0 + CLN_NORM_CHUNK > N ? N - CLN_NORM_CHUNK : n0;
            cln_scaled_span(K, KI, b, base, CLN_NORM_CHUNK, y, F, zrow, hd, y1_nan, sc);
        } else {
            cln_scaled_span(K, KI, b, 0, N, y, F, zrow, hd, y1_nan, sc);
        }
        for (cln_int n = n0; n < N && n < n0 + CLN_NORM_CHUNK; ++n) {
            last = sc[n - base];
            sum += last * last;
        }
    }
    return cln_rms(sum, last, N, K->sqrt_n);
}

/* ---- the PID controller ---- */

/* The step-size factor of diffrax's PIDController from inv = 1/E and the history inv1, inv2:
 * safety inv^coeff1 inv1^coeff2 inv2^coeff3 (a zero coefficient skips its power), clipped to
 * [1, factormax] when the step is kept and to [factormin, safety] when it is rejected. */
CLN_INLINE real cln_pid_factor(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, real inv,
                               real inv1, real inv2, int keep)
{
    const real f1 = KI->coeff1_zero ? CLN_R(1.0) : cln_pow_pos(inv, K->coeff1);
    const real f2 = KI->coeff2_zero ? CLN_R(1.0) : cln_pow_pos(inv1, K->coeff2);
    const real f3 = KI->coeff3_zero ? CLN_R(1.0) : cln_pow_pos(inv2, K->coeff3);
    const real factor = K->safety * f1 * f2 * f3;
    const real lo = keep ? CLN_R(1.0) : K->factormin;
    const real hi = keep ? K->factormax : K->safety;
    return factor < hi ? (factor > lo ? factor : lo) : hi; /* jnp.clip */
}

/* The next step size h * factor within dtmax and dtmin (diffrax): below dtmin the trajectory
 * fails with dt_min_reached unless force_dtmin; a step held at dtmin stays there while the
 * factor is 1; is->at_dtmin records whether the new step is held at dtmin. */
CLN_INLINE real cln_limit_dt(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                             CLN_GLOBAL cln_istate *is, real h, real factor)
{
    real dt = h * factor;
    if (KI->has_dtmax)
        dt = dt < K->dtmax ? dt : K->dtmax;
    if (KI->has_dtmin) {
        const real dtmin = K->dtmin;
        if (!KI->force_dtmin && dt < dtmin)
            is->result = CLN_RESULT_DT_MIN;
        if (is->at_dtmin && factor == CLN_R(1.0))
            dt = dtmin;
        is->at_dtmin = dt <= dtmin;
        dt = dt > dtmin ? dt : dtmin;
    }
    return dt;
}

/* After an accepted step: the history moves on by one; a zero or infinite 1/E must not poison
 * it (it stores 1 instead). */
CLN_INLINE void cln_shift_history(CLN_GLOBAL cln_rstate *rs, real inv)
{
    rs->inv2 = rs->inv1;
    rs->inv1 = (inv == CLN_R(0.0) || isinf(inv)) ? CLN_R(1.0) : inv;
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
 * shrink and never count; a non-finite E is a different failure and never counts either. A kink
 * of the vector field (relu) gives the same pattern with truncation error: E rose from 1.06 to
 * 4.4 across four rejections of an fp64 solve at rtol 1e-6, where a step past the kink resolves
 * it. So the driver runs the detector only where rtol is below CLNODE_GUARD_FACTOR u of the
 * solve's arithmetic (KI->floor_detect), where the guard warned before the solve. */
CLN_INLINE void cln_floor_detect(CLN_GLOBAL cln_rstate *rs, CLN_GLOBAL cln_istate *is, int keep,
                                 real h, real E)
{
    if (keep) {
        rs->hrej = CLN_R(0.0);
        if (is->floor > 0)
            is->floor -= 1;
        return;
    }
    const real hprev = rs->hrej;
    if (hprev > CLN_R(0.0) && h < hprev && !isinf(E) && !isnan(E) && E >= rs->erej) {
        is->floor += CLN_FLOOR_EVENT;
        if (is->floor >= CLN_FLOOR_LIMIT && is->result == CLN_RESULT_SUCCESS)
            is->result = CLN_RESULT_PRECISION_FLOOR;
    }
    rs->erej = E;
    rs->hrej = h;
}

/* The adaptive controller on trajectory b's attempt of size h (hd = direction * h): the error
 * norm E, acceptance (E < 1, or held at dtmin), the PID factor, the next step size *dt, the
 * history and the floor detector. Returns whether the step is kept. */
CLN_INLINE int cln_control(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                           CLN_GLOBAL cln_rstate *rs, CLN_GLOBAL cln_istate *is, CLN_CONST real *y,
                           CLN_CONST real *F, CLN_CONST real *zrow, real h, real hd, real *dt)
{
    const real E = cln_error_norm(K, KI, b, y, F, zrow, hd);
    int keep = E < CLN_R(1.0);
    if (KI->has_dtmin)
        keep |= is->at_dtmin;
    const real inv = CLN_R(1.0) / E;
    const real factor = cln_pid_factor(K, KI, inv, rs->inv1, rs->inv2, keep);
    *dt = cln_limit_dt(K, KI, is, h, factor);
    if (keep)
        cln_shift_history(rs, inv);
    if (KI->floor_detect)
        cln_floor_detect(rs, is, keep, h, E);
    return keep;
}

/* ---- the end of a step ---- */

/* The next attempt [*tprev, *tnext] after an attempt [t, tn] and the next step size dt
 * (diffrax's _clip_to_end) on a trajectory ending at tau1: it starts at tn when the step is
 * kept, else again at t; an end beyond clip_floor (tau1 minus 100 ulp) becomes tau1 when the
 * step is kept, else the midpoint of what remains. cln_clip_end_at: the same for the attempt
 * [next_t0, next_t1] the controller proposed. */
CLN_INLINE void cln_clip_end_at(real tau1, real clip_floor, int keep, real next_t0, real next_t1,
                                real *tprev, real *tnext)
{
    const real tp = next_t0 < tau1 ? next_t0 : tau1;
    real tx = next_t1;
    if (next_t1 > clip_floor)
        tx = keep ? tau1 : tp + CLN_R(0.5) * (tau1 - tp);
    *tprev = tp;
    *tnext = tx;
}

CLN_INLINE void cln_clip_to_end(real tau1, real clip_floor, int keep, real t, real tn, real dt,
                                real *tprev, real *tnext)
{
    const real next_t0 = keep ? tn : t;
    cln_clip_end_at(tau1, clip_floor, keep, next_t0, next_t0 + dt, tprev, tnext);
}

/* Constant steps (diffrax 0.7.2's ConstantStepSize) on [tau0, tau1] with the step dt0 > 0: the
 * first step ends at tau0 + dt0, step k >= 2 at tau0 + (tau1 - tau0) * (k / n) and step n at tau1
 * itself, n = ceil((tau1 - tau0) / nextafter(dt0, +inf)), all in the state precision (a fraction
 * of the interval rather than a sum of steps, so that rounding does not compound). The product
 * and the sum are one fused multiply-add, as XLA evaluates diffrax's expression on the CPU (the
 * step ends of tests/data/diffrax/forms-*.json, bit for bit). Returns the end of step k. */
CLN_INLINE real cln_constant_end(real tau0, real tau1, real dt0, cln_int k)
{
    const real span = tau1 - tau0;
    const real n = ceil(span / CLN_AS_REAL(CLN_AS_BITS(dt0) + 1));
    const real kr = (real)k;
    return kr == n ? tau1 : fma(span, kr / n, tau0);
}

/* Where the save time ts lies in the accepted step [t, tn], as a fraction theta of it (0 for a
 * step of no length): the argument of cln_interpolate, in the forward and the reverse pass. */
CLN_INLINE real cln_dense_theta(real ts, real t, real tn)
{
    return tn == t ? CLN_R(0.0) : (ts - t) / (tn - t);
}

/* Dense output at the requested times inside the accepted step [t, tn], before y moves on:
 * rows is->nts, ... of TSOUT[b] while ts[j] <= tn, ts the trajectory's list (row b of TS with a
 * list per trajectory, KI->ts_stride = n_ts; the list shared by the batch, stride 0). Times
 * before the trajectory's own start tau0 are passed over (not written: outside its interval;
 * a list per trajectory has none). */
CLN_INLINE void cln_save_dense(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                               CLN_GLOBAL cln_istate *is, CLN_CONST real *y, CLN_CONST real *F,
                               CLN_CONST real *zrow, CLN_CONST real *TS, CLN_GLOBAL real *TSOUT,
                               real tau0, real t, real tn, real hd)
{
    const size_t B = (size_t)KI->B;
    const cln_int N = KI->N, s = KI->stages, ssal = KI->ssal, nts = KI->n_ts;
    CLN_CONST real *ts = TS + b * (size_t)KI->ts_stride;
    real k[CLN_MAX_STAGES];
    cln_int j = is->nts;
    CLN_TS_STEP_LOOP(j, nts, ts[j], tn)
    {
        if (CLN_TS_BEFORE_START(ts[j], tau0))
            continue;
        const real th = cln_dense_theta(ts[j], t, tn);
        CLN_GLOBAL real *out = TSOUT + (b * (size_t)nts + (size_t)j) * (size_t)N;
        for (cln_int n = 0; n < N; ++n) {
            cln_load_k(k, F, B, N, s, b, n, hd);
            const real y1 = cln_y1(K, ssal, s, y[n], k, zrow, n);
            out[n] = cln_interpolate(K, KI->dense_form, s, th, y[n], y1, k);
        }
    }
    is->nts = j;
}

/* Accepts the step: y <- y1 and, for FSAL methods, f_0 <- f_last (the next step's first
 * stage). */
CLN_INLINE void cln_accept(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                           CLN_GLOBAL real *y, CLN_GLOBAL real *F, CLN_CONST real *zrow, real hd)
{
    const size_t B = (size_t)KI->B;
    const cln_int N = KI->N, s = KI->stages, ssal = KI->ssal;
    real k[CLN_MAX_STAGES];
    for (cln_int n = 0; n < N; ++n) {
        cln_load_k(k, F, B, N, s, b, n, hd);
        y[n] = cln_y1(K, ssal, s, y[n], k, zrow, n);
        if (KI->fsal)
            F[b * (size_t)N + (size_t)n] = F[((size_t)(s - 1) * B + b) * (size_t)N + (size_t)n];
    }
}

/* Saves the accepted step's end: t = direction * tau and y (already moved on), as point m of row
 * b (rows steps_cap points apart). The driver keeps steps_cap above every count a step can reach;
 * a point past it would not be written, only counted, and the driver reports that. */
CLN_INLINE void cln_save_step(CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI, size_t b,
                              CLN_GLOBAL cln_istate *is, real tau, CLN_CONST real *y,
                              CLN_GLOBAL real *STT, CLN_GLOBAL real *STY)
{
    const cln_int N = KI->N;
    const size_t m = (size_t)is->nsteps_saved;
    const size_t cap = (size_t)KI->steps_cap;
    if (m < cap) {
        STT[b * cap + m] = K->dir * tau;
        for (cln_int n = 0; n < N; ++n)
            STY[(b * cap + m) * (size_t)N + (size_t)n] = y[n];
    }
    is->nsteps_saved = (cln_int)(m + 1);
}

/* diffrax's loop condition: the trajectory goes on while tprev < tau1, it has not failed, and
 * num_steps < max_steps; otherwise it is frozen. */
CLN_INLINE void cln_freeze(CLN_CONST cln_iconsts *KI, CLN_GLOBAL cln_istate *is, real tprev,
                           real tau1)
{
    if (!(tprev < tau1)) {
        is->done = 1;
    } else if (is->result != CLN_RESULT_SUCCESS) {
        is->done = 1;
    } else if (is->nsteps >= KI->max_steps) {
        is->result = CLN_RESULT_MAX_STEPS;
        is->done = 1;
    }
}

/* Everything after the stages of one attempt, for trajectory b (diffrax's loop body): a
 * non-finite vector field at the current state ends the trajectory; otherwise the controller
 * (or the constant step dt0), the next interval, the counters, and on acceptance dense output,
 * y1, FSAL and the saved step; then freezing. */
CLN_INLINE void cln_finish_traj(size_t b, CLN_CONST cln_consts *K, CLN_CONST cln_iconsts *KI,
                                CLN_GLOBAL cln_rstate *RS, CLN_GLOBAL cln_istate *IS,
                                CLN_GLOBAL real *Y, CLN_GLOBAL real *F, CLN_CONST real *Z,
                                CLN_CONST real *TS, CLN_GLOBAL real *TSOUT, CLN_GLOBAL real *STT,
                                CLN_GLOBAL real *STY)
{
    CLN_GLOBAL cln_istate *is = IS + b;
    if (is->done)
        return;
    CLN_GLOBAL cln_rstate *rs = RS + b;
    const cln_int N = KI->N;
    CLN_GLOBAL real *y = Y + b * (size_t)N;
    CLN_CONST real *zrow = Z + b * (size_t)KI->ldz;

    /* the vector field at the current state (stage 1) is not finite: no step can succeed */
    if (cln_row_nonfinite(F + b * (size_t)N, N)) {
        is->result = CLN_RESULT_NONFINITE;
        is->done = 1;
        return;
    }

    const real t = rs->t;
    const real tn = rs->tn;
    const real h = tn - t;
    const real hd = K->dir * h;
    real dt = rs->dt0;
    int keep = 1;
    if (KI->adaptive)
        keep = cln_control(K, KI, b, rs, is, y, F, zrow, h, hd, &dt);
    real tprev, tnext;
    if (KI->adaptive)
        cln_clip_to_end(rs->tau1, rs->clip_floor, keep, t, tn, dt, &tprev, &tnext);
    else /* this step is step nacc + 1, the next one nacc + 2 */
        cln_clip_end_at(rs->tau1, rs->clip_floor, 1, tn,
                        cln_constant_end(rs->tau0, rs->tau1, dt, is->nacc + 2), &tprev, &tnext);

    is->nsteps += 1;
    if (keep) {
        is->nacc += 1;
        cln_save_dense(K, KI, b, is, y, F, zrow, TS, TSOUT, rs->tau0, t, tn, hd);
        cln_accept(K, KI, b, y, F, zrow, hd);
        if (KI->save_steps)
            cln_save_step(K, KI, b, is, tprev, y, STT, STY);
    } else {
        is->nrej += 1;
    }
    rs->t = tprev;
    rs->tn = tnext;
    cln_freeze(KI, is, tprev, rs->tau1);
}

#endif /* CLN_STEP_H */
