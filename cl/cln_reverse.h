/* cln_reverse.h - the reverse pass's element-wise arithmetic, written once for every backend:
 * the vector-Jacobian products of cln_step.h's step combinations (clnode/gradient.h gives the
 * semantics: diffrax's jax.grad with every step size held at its forward value).
 *
 * Valid as C11 and as OpenCL C (see cln_prelude.h). Every function here is linear in the
 * cotangents it takes: the times (and so theta and the step h) are constants of the reverse pass.
 * Notation: `kbar[j]` is the cotangent of k_j = (direction h) f_j, the stage's contribution to
 * the step combinations (cln_stage_value, cln_y1, cln_interpolate); the cotangent of f_j is
 * hd * kbar[j] (cln_f_bar).
 */
#ifndef CLN_REVERSE_H
#define CLN_REVERSE_H

#include "cln_prelude.h"
#include "cln_step.h"

/* The cotangent of f_j from that of k_j = hd f_j. */
CLN_INLINE real cln_f_bar(real hd, real kbar)
{
    return hd * kbar;
}

/* The transpose of stage i's argument z_i = y + sum_{j<i} a_ij k_j (cln_stage_value) for one
 * component: the cotangent zbar of z_i adds to that of y (returned) and to kbar[j * stride] for
 * j < i (stage 0: z_0 = y). */
CLN_INLINE real cln_stage_value_vjp(cln_int i, CLN_CONST cln_consts *K, real zbar,
                                    CLN_GLOBAL real *kbar, size_t stride, real ybar)
{
    for (cln_int j = 0; j < i; ++j)
        kbar[(size_t)j * stride] += K->a[i][j] * zbar;
    return ybar + zbar;
}

/* The transpose of y1 = y + sum_j b_j k_j (cln_y1 without SSAL) for one component: y1bar adds to
 * kbar[j * stride] for every stage j, and to ybar (returned). SSAL tableaux take y1 as the last
 * stage argument instead: their y1bar goes to that stage's zbar, not through here. */
CLN_INLINE real cln_y1_vjp(CLN_CONST cln_consts *K, cln_int s, real y1bar, CLN_GLOBAL real *kbar,
                           size_t stride, real ybar)
{
    for (cln_int j = 0; j < s; ++j)
        kbar[(size_t)j * stride] += K->b[j] * y1bar;
    return ybar + y1bar;
}

/* ---- dense output: every form of cln_interpolate is linear in (y0, y1, k_0 .. k_{s-1}) for a
 * fixed theta. cln_dense_weights gives its coefficients wy0, wy1 and wk[i], so that the cotangent
 * obar of a saved value adds wy0 obar to y0's, wy1 obar to y1's and wk[i] obar to k_i's. Where
 * the forward evaluates the coefficients (tsit5, polynomial) they are its own functions of
 * cln_step.h; the other forms' are expanded from their Horner forms here. ---- */

/* cln_dense_midpoint: a th^4 + bb th^3 + c th^2 + f0 th + y0 with ymid = y0 + sum_i d_i0 k_i,
 * f0 = k_0, f1 = k_{s-1} and a, bb, c the combinations of cln_dense_midpoint. */
CLN_INLINE void cln_dense_weights_midpoint(CLN_CONST cln_consts *K, cln_int s, real th, real *wy0,
                                           real *wy1, real *wk)
{
    const real p2 = th * th, p3 = p2 * th, p4 = p3 * th;
    const real gmid = CLN_R(16.0) * p4 - CLN_R(32.0) * p3 + CLN_R(16.0) * p2;
    for (cln_int i = 0; i < s; ++i)
        wk[i] = K->dense[i][0] * gmid;
    wk[0] += CLN_R(-2.0) * p4 + CLN_R(5.0) * p3 - CLN_R(4.0) * p2 + th;
    wk[s - 1] += CLN_R(2.0) * p4 - CLN_R(3.0) * p3 + p2;
    *wy0 = CLN_R(-8.0) * p4 + CLN_R(18.0) * p3 - CLN_R(11.0) * p2 + CLN_R(1.0) + gmid;
    *wy1 = CLN_R(-8.0) * p4 + CLN_R(14.0) * p3 - CLN_R(5.0) * p2;
}

/* cln_dense_hermite: ((c3 th + c2) th + k0) th + y0, c3 = k0 + k1 + 2 y0 - 2 y1,
 * c2 = -2 k0 - k1 - 3 y0 + 3 y1, k1 = k_{s-1}. */
CLN_INLINE void cln_dense_weights_hermite(cln_int s, real th, real *wy0, real *wy1, real *wk)
{
    const real p2 = th * th, p3 = p2 * th;
    for (cln_int i = 0; i < s; ++i)
        wk[i] = CLN_R(0.0);
    wk[0] = p3 - CLN_R(2.0) * p2 + th;
    wk[s - 1] += p3 - p2;
    *wy0 = CLN_R(2.0) * p3 - CLN_R(3.0) * p2 + CLN_R(1.0);
    *wy1 = CLN_R(-2.0) * p3 + CLN_R(3.0) * p2;
}

/* The coefficients of the dense output over an accepted step at theta, in the form KI.dense_form
 * names (cln_interpolate): y(theta) = wy0 y0 + wy1 y1 + sum_i wk[i] k_i. */
CLN_INLINE void cln_dense_weights(CLN_CONST cln_consts *K, cln_int form, cln_int s, real th,
                                  real *wy0, real *wy1, real *wk)
{
    *wy0 = CLN_R(1.0);
    *wy1 = CLN_R(0.0);
    if (form == CLN_DENSE_TSIT5) {
        cln_dense_tsit5_weights(K, th, wk);
    } else if (form == CLN_DENSE_POLYNOMIAL) {
        for (cln_int i = 0; i < s; ++i)
            wk[i] = cln_dense_polynomial_weight(K, i, th);
    } else if (form == CLN_DENSE_MIDPOINT) {
        cln_dense_weights_midpoint(K, s, th, wy0, wy1, wk);
    } else if (form == CLN_DENSE_HERMITE) {
        cln_dense_weights_hermite(s, th, wy0, wy1, wk);
    } else { /* CLN_DENSE_LINEAR: y0 + (y1 - y0) theta */
        for (cln_int i = 0; i < s; ++i)
            wk[i] = CLN_R(0.0);
        *wy0 = CLN_R(1.0) - th;
        *wy1 = th;
    }
}

/* The cotangent o of one component of a saved dense value into those of y0 (*yb0), y1 (*yb1) and
 * the stages (kbar[i * stride]), with the coefficients of cln_dense_weights. */
CLN_INLINE void cln_dense_vjp(cln_int s, real wy0, real wy1, const real *wk, real o,
                              CLN_GLOBAL real *yb0, CLN_GLOBAL real *yb1, CLN_GLOBAL real *kbar,
                              size_t stride)
{
    *yb0 += wy0 * o;
    *yb1 += wy1 * o;
    for (cln_int i = 0; i < s; ++i)
        kbar[(size_t)i * stride] += wk[i] * o;
}

/* ---- the MLP's last layer ---- */

/* The transpose of the output scale x s (cln_out_scale) for one element: the cotangent of x. */
CLN_INLINE real cln_out_scale_vjp(real gbar, real s)
{
    return gbar * s;
}

/* One term of the output scale's cotangent: the cotangent gbar of an element of f = x s (before
 * the scale: cln_f_bar's) times x, the last layer's activated output. */
CLN_INLINE real cln_out_scale_term(real gbar, real x)
{
    return gbar * x;
}

#endif /* CLN_REVERSE_H */
