/* cln_activation.h - the MLP activations, written once for the host (C11) and OpenCL C 1.2.
 *
 * Every function here is branch-free element-wise arithmetic in the state precision `real`:
 * only +, -, *, /, fma, comparisons feeding bit-mask selects, and bit casts
 * (CLN_AS_BITS/CLN_AS_REAL). No libm call but fma, no data-dependent loop, so GCC vectorises a
 * host loop over them (-O3, or -O2 with -fvect-cost-model=dynamic; with FMA in the target, as the
 * host's x86-64-v3 and v4 clones have it) and an OpenCL device evaluates exactly the same
 * operation sequence. fma is written out where it is meant and is correctly rounded in C99,
 * OpenCL C and CUDA alike; contraction of a*b+c is disabled on every side (see cln_prelude.h).
 * With correctly rounded division (-cl-fp32-correctly-rounded-divide-sqrt where the device
 * offers it), no -cl-fast-relaxed-math and no -cl-denorms-are-zero, an IEEE-conforming device
 * returns the same bits as the host (checked on PoCL and Oclgrind: all activations, float and
 * double).
 *
 * The polynomial coefficients below are near-minimax fits (Chebyshev interpolation or least
 * squares on Chebyshev nodes in 60-digit arithmetic, then rounded to the state precision) made
 * for this file; each block says its interval and the error of the rounded polynomial on it.
 *
 * Accuracy (tests/unit/test_activation.c, against double libm for float and long double libm for
 * double; max error in ulps of the reference, float sweep of every 64th bit pattern in
 * [-100, 100], 4 million random doubles):
 *            tanh  sigmoid  softplus  silu  gelu*  exp   log1p
 *   float    1.12  1.56     1.77      1.49  1.55   0.78  0.83
 *   double   1.12  1.55     1.50      1.48  1.61   0.76  0.88
 * (*gelu on x >= 0; for x < 0 the function is ill-conditioned, see cln_gelu.) relu and identity
 * are exact. softplus in float over every float in [-100, 100] (2.24e9 inputs; outside it the
 * result is x or the flushed zero): max 1.881 ulp, at x = 0.014095455 (float softplus has no
 * small form, see cln_softplus; with one it was 1.53 ulp, and 19% more time per value). exp and
 * log1p are the double-word forms that cln_pow_pos uses; softplus has its own fma forms
 * (cln_exp_fma_, cln_log1p_fma_).
 *
 * Inputs: every real, including +-0, +-inf, NaN (propagated) and subnormals.
 */
#ifndef CLN_ACTIVATION_H
#define CLN_ACTIVATION_H

#include "cln_prelude.h"

/* Activation codes; they equal enum clnode_activation in include/clnode/model.h. */
#define CLN_ACT_IDENTITY 0
#define CLN_ACT_RELU 1
#define CLN_ACT_TANH 2
#define CLN_ACT_SIGMOID 3
#define CLN_ACT_SOFTPLUS 4
#define CLN_ACT_SILU 5
#define CLN_ACT_GELU 6

#define CLN_INF_ ((real)INFINITY)

/* c ? a : b for c = 0 or 1, as bit masks. Every select in this file goes through it rather than
 * through ?: because GCC gimplifies ?: into branches, and under the default -ftrapping-math it
 * then neither speculates the floating-point operations that end up inside them nor if-converts
 * the loop, so the loop would not vectorise (measured with GCC 12: of the seven array loops in
 * cl/activation_f32.c only identity vectorised with ?:, all seven with this). OpenCL compilers
 * turn it into their select either way. */
CLN_INLINE real cln_select_(cln_int c, real a, real b)
{
    cln_rbits mask = -(cln_rbits)c;
    return CLN_AS_REAL((CLN_AS_BITS(a) & mask) | (CLN_AS_BITS(b) & ~mask));
}

/* -|x| (NaN stays NaN) and |a| with the sign of b, by the sign bit. */
CLN_INLINE real cln_negabs_(real x)
{
    return CLN_AS_REAL(CLN_AS_BITS(x) | CLN_AS_BITS(CLN_R(-0.0)));
}

CLN_INLINE real cln_copysign_(real a, real b)
{
    cln_rbits sign = CLN_AS_BITS(CLN_R(-0.0));
    return CLN_AS_REAL((CLN_AS_BITS(a) & ~sign) | (CLN_AS_BITS(b) & sign));
}

#if CLN_PRECISION == 64
/* ---------------------------------------------------------------- double constants */
#define CLN_EXP_LO_ CLN_R(-760.0) /* 760 e^-760 < 2^-1075: rounds to 0 */
/* The largest double whose exp is finite; exp(x) = inf above. */
#define CLN_EXP_HI_ CLN_R(709.782712893383973096)
#define CLN_EXP_SHIFT_ CLN_R(6755399441055744.0) /* 1.5 * 2^52 */
#define CLN_EXP_BIAS_ 1023
#define CLN_EXP_MANT_ 52
#define CLN_MIN_NORMAL_ CLN_R(2.2250738585072014e-308) /* DBL_MIN */
#define CLN_LOG1P_SMALL_ CLN_R(8.673617379884035e-19)  /* 2^-60: log1p(u) rounds to u below */
/* cln_pow_pos: subnormals are scaled by 2^54 (an exact product) before the exponent is read */
#define CLN_POW_SUBN_BITS_ 54
#define CLN_POW_SUBN_SCALE_ 18014398509481984.0              /* 2^54 */
#define CLN_POW_MIN_NORMAL_SCALED_ 4.008336720017945555e-292 /* 2^-1022 * 2^54 */
#define CLN_LOG2E_ CLN_R(1.4426950408889634)
/* Cody-Waite: ln2 = HI + LO, HI with 32 significant bits so that n * HI is exact for |n| < 2^21
 * (fdlibm's split). */
#define CLN_LN2_CW_HI_ CLN_R(6.93147180369123816490e-01)
#define CLN_LN2_CW_LO_ CLN_R(1.90821492927058770002e-10)
/* ln2 = HI + LO with HI the correctly rounded ln2 (used once, with k = 1, in cln_log1p). */
#define CLN_LN2_HI_ CLN_R(0.6931471805599453)
#define CLN_LN2_LO_ CLN_R(2.3190468138462996e-17)
/* tanh: odd polynomial below this |x|, exp formula above. */
#define CLN_TANH_SMALL_ CLN_R(0.625)
/* sigmoid(x) = exp(x) to within 1e-19 (relative) below -SIG_TAIL. */
#define CLN_SIG_TAIL_ CLN_R(44.0)

/* e^r = 1 + r + r^2 Q(r), |r| <= 1.002 ln2/2; max relative error 1.7e-17 (0.15 eps). */
/* The Horner forms are laid out by hand. */
/* clang-format off */
#define CLN_EXP_Q_(r)                                                                              \
    (CLN_R(0.5000000000000001) +                                                                   \
     (r) * (CLN_R(0.16666666666666669) +                                                           \
            (r) * (CLN_R(0.04166666666662348) +                                                    \
                   (r) * (CLN_R(0.008333333333330011) +                                            \
                          (r) * (CLN_R(0.0013888888917538296) +                                    \
                                 (r) * (CLN_R(0.00019841269863303223) +                            \
                                        (r) * (CLN_R(2.4801520792572694e-05) +                     \
                                               (r) * (CLN_R(2.75572680728901e-06) +                \
                                                      (r) * (CLN_R(2.762032742826824e-07) +        \
                                                             (r) * CLN_R(2.5100569275813683e-08))))))))))

/* 2 atanh(s) = 2s + s w L(w), w = s^2 <= 1.001 * 0.04; max relative error 6.8e-19. */
#define CLN_LOG_L_(w)                                                                              \
    (CLN_R(0.6666666666666666) +                                                                   \
     (w) * (CLN_R(0.40000000000007857) +                                                           \
            (w) * (CLN_R(0.28571428567313983) +                                                    \
                   (w) * (CLN_R(0.222222230420118) +                                               \
                          (w) * (CLN_R(0.181817381241429) +                                        \
                                 (w) * (CLN_R(0.15388847907331235) +                               \
                                        (w) * (CLN_R(0.13210099817863546) +                        \
                                               (w) * CLN_R(0.13606021262798104))))))))

/* tanh(x) = x + x z P(z), z = x^2, |x| <= 0.625; max relative error 8.0e-18 (0.07 eps). */
#define CLN_TANH_P_(z)                                                                             \
    (CLN_R(-0.3333333333333333) +                                                                  \
     (z) * (CLN_R(0.13333333333333042) +                                                           \
            (z) * (CLN_R(-0.05396825396789699) +                                                   \
                   (z) * (CLN_R(0.021869488519008305) +                                            \
                          (z) * (CLN_R(-0.008863235103240878) +                                    \
                                 (z) * (CLN_R(0.0035921217511549622) +                             \
                                        (z) * (CLN_R(-0.0014557754120478055) +                     \
                                               (z) * (CLN_R(0.0005896606577757043) +               \
                                                      (z) * (CLN_R(-0.0002375906496055562) +       \
                                                             (z) * (CLN_R(9.257116129556769e-05) + \
                                                                    (z) * (CLN_R(-3.12011014257974e-05) + \
                                                                           (z) * CLN_R(6.485163482793113e-06))))))))))))

/* The fma-based core of softplus (cln_exp_fma_, cln_log1p_fma_, and double's small form G). The
 * polynomials were fitted with their coefficients rounded one at a time, each next one refitted
 * (weighted least squares on Chebyshev nodes in 60-digit arithmetic) to what the rounded ones
 * leave; scripts/fit_softplus.py makes Q and G (eps = 2^-53 here, 2^-24 in float). */
/* e^r = 1 + r P(r), |r| <= 1.001 ln2/2; |r (P - (e^r - 1)/r)| < 0.08 ulp of e^r. */
#define CLN_EXPM1_P_(r)                                                                            \
    fma(r, fma(r, fma(r, fma(r, fma(r, fma(r, fma(r, fma(r, fma(r, fma(r,                          \
        CLN_R(2.5109221785853486e-08), CLN_R(2.762642206421934e-07)),                              \
        CLN_R(2.7557243684278753e-06)), CLN_R(2.4801504236409678e-05)),                            \
        CLN_R(0.00019841269886645515)), CLN_R(0.0013888888932519676)),                             \
        CLN_R(0.008333333333321424)), CLN_R(0.04166666666657334)),                                 \
        CLN_R(0.16666666666666677)), CLN_R(0.5000000000000006)), CLN_R(1.0))
/* log1p(t) = t + t^2 Q(t), 0 <= t <= e^-1/2 (softplus's big form, |x| >= 1/2);
 * |t^2 (Q - (log1p(t) - t)/t^2)| < 0.033 eps log1p(t) (degree 16). */
#define CLN_LOG1P_Q_(t)                                                                            \
    fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t,     \
    fma(t, fma(t, fma(t,                                                                           \
        CLN_R(-0.000790680566821139), CLN_R(0.005125118819540457)),                                \
        CLN_R(-0.016094724520427428)), CLN_R(0.03321347287674102)),                                \
        CLN_R(-0.05196596864819302)), CLN_R(0.06794503952215178)),                                 \
        CLN_R(-0.08008415146767023)), CLN_R(0.0899949414406107)),                                  \
        CLN_R(-0.09980224191689184)), CLN_R(0.11107871415202054)),                                 \
        CLN_R(-0.12499606785297268)), CLN_R(0.14285680034051673)),                                 \
        CLN_R(-0.16666664625184038)), CLN_R(0.19999999922818268)),                                 \
        CLN_R(-0.2499999999838333)), CLN_R(0.3333333333331964)),                                   \
        CLN_R(-0.5))
/* softplus(x) = ln2 + x/2 + x^2 G(x^2) for |x| < 1/2 (log(2 cosh(x/2)) is even); the rounded
 * polynomial's error is below 0.017 eps of the result (degree 6). */
#define CLN_SP_G_(z)                                                                               \
    fma(z, fma(z, fma(z, fma(z, fma(z, fma(z,                                                      \
        CLN_R(1.4396555170757956e-08), CLN_R(-1.798468318323455e-07)),                             \
        CLN_R(2.13560035989025e-06)), CLN_R(-2.635167708796631e-05)),                              \
        CLN_R(0.00034722222174426044)), CLN_R(-0.005208333333324184)),                             \
        CLN_R(0.125))
/* clang-format on */
/* softplus: below this x, e^x < DBL_MIN (x < -1022 ln2) and the result is flushed to zero. */
#define CLN_SP_THRESH_ CLN_R(-708.3964185322641)

#else
/* ---------------------------------------------------------------- float constants
 * (every literal is an exact float, so (float)literal is the same in C and OpenCL C) */
#define CLN_EXP_LO_ CLN_R(-150.0) /* 150 e^-150 < 2^-150: rounds to 0 */
/* The largest float whose exp is finite; exp(x) = inf above. */
#define CLN_EXP_HI_ CLN_R(88.72283172607421875)
#define CLN_EXP_SHIFT_ CLN_R(12582912.0) /* 1.5 * 2^23 */
#define CLN_EXP_BIAS_ 127
#define CLN_EXP_MANT_ 23
#define CLN_MIN_NORMAL_ CLN_R(1.17549435082228750797e-38) /* FLT_MIN */
#define CLN_LOG1P_SMALL_ CLN_R(9.313225746154785e-10)     /* 2^-30: log1p(u) rounds to u below */
#define CLN_POW_SUBN_BITS_ 25
#define CLN_POW_SUBN_SCALE_ 33554432.0                       /* 2^25 */
#define CLN_POW_MIN_NORMAL_SCALED_ 3.9443045261050590271e-31 /* 2^-126 * 2^25 */
#define CLN_LOG2E_ CLN_R(1.4426950216293335)
/* Cody-Waite: HI = 355/512 has 9 significant bits, so n * HI is exact for |n| < 2^15. */
#define CLN_LN2_CW_HI_ CLN_R(0.693359375)
#define CLN_LN2_CW_LO_ CLN_R(-0.00021219444170128554)
#define CLN_LN2_HI_ CLN_R(0.6931471824645996)
#define CLN_LN2_LO_ CLN_R(-1.9046542121259336e-09)
#define CLN_TANH_SMALL_ CLN_R(0.625)
/* sigmoid(x) = exp(x) to within 4e-11 (relative) below -SIG_TAIL. */
#define CLN_SIG_TAIL_ CLN_R(24.0)

/* e^r = 1 + r + r^2 Q(r), |r| <= 1.002 ln2/2; max relative error 1.0e-8 (0.17 eps). */
/* The Horner forms are laid out by hand. */
/* clang-format off */
#define CLN_EXP_Q_(r)                                                                              \
    (CLN_R(0.5) +                                                                                  \
     (r) * (CLN_R(0.16666576266288757) +                                                           \
            (r) * (CLN_R(0.04166655242443085) +                                                    \
                   (r) * (CLN_R(0.008363292552530766) + (r) * CLN_R(0.0013926326064392924)))))

/* 2 atanh(s) = 2s + s w L(w), w = s^2 <= 1.001 * 0.04; max relative error 4.9e-10. */
#define CLN_LOG_L_(w)                                                                              \
    (CLN_R(0.6666666865348816) +                                                                   \
     (w) * (CLN_R(0.4000031352043152) +                                                            \
            (w) * (CLN_R(0.28532665967941284) + (w) * CLN_R(0.23748943209648132))))

/* tanh(x) = x + x z P(z), z = x^2, |x| <= 0.625; max relative error 4.2e-9 (0.07 eps). */
#define CLN_TANH_P_(z)                                                                             \
    (CLN_R(-0.3333333432674408) +                                                                  \
     (z) * (CLN_R(0.13333304226398468) +                                                           \
            (z) * (CLN_R(-0.053959257900714874) +                                                  \
                   (z) * (CLN_R(0.02176891826093197) +                                             \
                          (z) * (CLN_R(-0.008343945257365704) + (z) * CLN_R(0.002292744815349579))))))

/* The fma-based core of softplus (see the double block). */
/* e^r = 1 + r P(r), |r| <= 1.001 ln2/2; |r (P - (e^r - 1)/r)| < 0.11 ulp of e^r. */
#define CLN_EXPM1_P_(r)                                                                            \
    fma(r, fma(r, fma(r, fma(r, fma(r,                                                             \
        CLN_R(0.0013933711452409625), CLN_R(0.008366839960217476)),                                \
        CLN_R(0.04166647791862488)), CLN_R(0.16666540503501892)), CLN_R(0.5)), CLN_R(1.0))
/* log1p(t) = t + t^2 Q(t), 0 <= t <= 1 (float softplus takes this form for every x, see
 * cln_softplus); |t^2 (Q - (log1p(t) - t)/t^2)| < 0.024 eps log1p(t) (degree 9; made by
 * scripts/fit_softplus.py 32 0 9). */
#define CLN_LOG1P_Q_(t)                                                                            \
    fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t, fma(t,                                 \
        CLN_R(0.0022042884957045317), CLN_R(-0.0143276397138834)),                                 \
        CLN_R(0.043561432510614395)), CLN_R(-0.08507776260375977)),                                \
        CLN_R(0.12622396647930145)), CLN_R(-0.16204847395420074)),                                 \
        CLN_R(0.19920675456523895)), CLN_R(-0.24992595613002777)),                                 \
        CLN_R(0.33333057165145874)), CLN_R(-0.5))
/* clang-format on */
/* softplus: below this x, e^x < FLT_MIN (x < -126 ln2) and the result is flushed to zero. */
#define CLN_SP_THRESH_ CLN_R(-87.33654022216797)
#endif

/* Subnormal activations are flushed to (signed) zero. They carry nothing a sum of normal terms
 * can see, but a GEMM that reads them runs many times slower on x86 CPUs (every FMA with a
 * subnormal input takes a microcode assist: the seed solve at batch 4096 ran 3x slower), and
 * flushing here, in the shared code, gives every backend the same zeros. (XLA on CPUs, under
 * JAX, also runs with subnormals flushed.) */
CLN_INLINE real cln_ftz_(real r)
{
    return cln_select_(-cln_negabs_(r) < CLN_MIN_NORMAL_, cln_copysign_(CLN_R(0.0), r), r);
}

/* exp(x) as e^x = (p s2) s1 with p = ph + pl carried in two parts; cln_exp and the functions
 * below combine them.
 *
 * Range reduction (Cody & Waite 1980; Tang 1989 without the table): x = n ln2 + r with
 * n = rint(x / ln2), |r| <= ln2/2. rint is the add-and-subtract of 1.5 * 2^p (p = mantissa bits),
 * which rounds to nearest in the default rounding mode and leaves n in the low bits of the sum,
 * so no float<->int conversion is needed (there is none for 64-bit lanes in SSE2/AVX2); the split
 * n = n1 + n2, n1 = rint(n/2), is done the same way. rh = x - n HI is exact, rl = -n LO.
 * e^r = 1 + r + r^2 Q(r), Q a near-minimax polynomial (table above). Without an FMA the plain
 * evaluation would stack three roundings (r, r + r^2 Q, 1 + ...: up to 1.04 ulp measured), and
 * sigmoid, silu and tanh add two more of their own; so the sums are done error-free (Knuth's
 * TwoSum for rh + rl, whose magnitudes are unordered; Dekker's Fast2Sum where the first operand
 * is the larger) and the rounding errors are carried in pl, |pl| <~ ulp(ph). Only the rounding
 * of the small term r^2 Q (and of rl) is left, a few hundredths of an ulp.
 * s1 = 2^n1 and s2 = 2^n2 are both normal numbers for every clamped x, so a product that lands in
 * the subnormal range is rounded once, by the last multiplication, and underflows there
 * naturally. x is clamped to [LO, HI], HI the last x with a finite e^x; the callers select inf
 * above HI and NaN for NaN. (A select of inf rather than an overflowing product because a product
 * of constants on a jump-threaded path would not be folded under -ftrapping-math.) */
typedef struct {
    real ph, pl, s1, s2;
} cln_exp_parts_;

CLN_INLINE cln_exp_parts_ cln_exp_parts_of_(real x)
{
    cln_exp_parts_ e;
    real xc = cln_select_(x > CLN_EXP_LO_, x, CLN_EXP_LO_);
    xc = cln_select_(xc < CLN_EXP_HI_, xc, CLN_EXP_HI_);
    real t = xc * CLN_LOG2E_ + CLN_EXP_SHIFT_;
    real n = t - CLN_EXP_SHIFT_;
    real t1 = n * CLN_R(0.5) + CLN_EXP_SHIFT_;
    real n1 = t1 - CLN_EXP_SHIFT_;
    real t2 = (n - n1) + CLN_EXP_SHIFT_;
    real rh = xc - n * CLN_LN2_CW_HI_;
    real rl = -(n * CLN_LN2_CW_LO_);
    real r = rh + rl; /* TwoSum: r + re = rh + rl exactly */
    real rv = r - rh;
    real re = (rh - (r - rv)) + (rl - rv);
    real u = re + (r * r) * CLN_EXP_Q_(r);
    real sum = r + u; /* Fast2Sum, |r| >= |u| */
    real se = u - (sum - r);
    e.ph = CLN_R(1.0) + sum; /* Fast2Sum, 1 >= |sum| */
    e.pl = ((CLN_R(1.0) - e.ph) + sum) + se;
    cln_rbits i1 = CLN_AS_BITS(t1) - CLN_AS_BITS(CLN_EXP_SHIFT_) + CLN_EXP_BIAS_;
    cln_rbits i2 = CLN_AS_BITS(t2) - CLN_AS_BITS(CLN_EXP_SHIFT_) + CLN_EXP_BIAS_;
    e.s1 = CLN_AS_REAL(i1 << CLN_EXP_MANT_);
    e.s2 = CLN_AS_REAL(i2 << CLN_EXP_MANT_);
    return e;
}

/* m e^x = ((m p) s2) s1, for |m| <= 2^16 (m = 1 is plain exp): scaling by m before the powers
 * of two keeps x e^x (silu, gelu) at full precision where e^x alone is already subnormal. */
CLN_INLINE real cln_mulexp_(real m, real x)
{
    cln_exp_parts_ e = cln_exp_parts_of_(x);
    real y = ((m * (e.ph + e.pl)) * e.s2) * e.s1;
    y = cln_select_(x > CLN_EXP_HI_, CLN_INF_, y);
    return cln_select_(x == x, y, x);
}

/* exp(x) for every real x, +-inf and NaN included. */
CLN_INLINE real cln_exp(real x)
{
    return cln_mulexp_(CLN_R(1.0), x);
}

/* 1 + e^x rounded once (x <= HI; NaN gives NaN): the exact sum 1 + ph' + pl' (the parts scaled
 * by 2^n) formed with TwoSum, since e^x may be smaller or larger than 1. */
CLN_INLINE real cln_one_plus_exp_(real x)
{
    cln_exp_parts_ e = cln_exp_parts_of_(x);
    real eh = (e.ph * e.s2) * e.s1;
    real el = (e.pl * e.s2) * e.s1;
    real d = CLN_R(1.0) + eh;
    real dv = d - eh;
    real de = (eh - (d - dv)) + (CLN_R(1.0) - dv);
    return cln_select_(x == x, d + (de + el), x);
}

/* log(1 + u) for 0 <= u <= 1 (all that softplus needs), exact-ish for tiny u.
 *
 * 1 + u = 2^k (1 + f) with the reduction done exactly: k = 0, f = u for u < 1/2, and k = 1,
 * f = (u - 1)/2 in [-1/4, 0] for u >= 1/2 (u - 1 is exact by Sterbenz). No rounded 1 + u is ever
 * formed, so no correction term is needed and subnormal u is returned unchanged.
 * log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| <= 1/5, evaluated in the fdlibm form
 * log(1 + f) = f - (h - s (h + R)), h = f^2/2, R = s^2 L(s^2) ~ 2 atanh(s)/s - 2, where the
 * rounding errors of s and R are damped by s. The k ln2 term is added last, ln2 split in two. */
CLN_INLINE real cln_log1p(real u)
{
    /* Below 2^-30 (2^-60 in double) log1p(u) = u (the next term, -u^2/2, is under half an
     * ulp), and evaluating the polynomial there would underflow s^2 and f^2 into subnormals,
     * which cost a microcode assist per operation on x86 (softplus of x < -20 in the seed solve
     * ran 5x slower): the polynomial sees a clamped argument and u is returned. */
    const cln_int small = u < CLN_LOG1P_SMALL_;
    const real u0 = u;
    u = cln_select_(small, CLN_LOG1P_SMALL_, u);
    cln_int big = u >= CLN_R(0.5);
    real f = cln_select_(big, (u - CLN_R(1.0)) * CLN_R(0.5), u);
    real k = cln_select_(big, CLN_R(1.0), CLN_R(0.0));
    real s = f / (CLN_R(2.0) + f);
    real w = s * s;
    real R = w * CLN_LOG_L_(w);
    real h = CLN_R(0.5) * (f * f);
    return cln_select_(small, u0, k * CLN_LN2_HI_ - ((h - (s * (h + R) + k * CLN_LN2_LO_)) - f));
}

/* x^y for x >= 0 (+inf included) and finite y: the step-size controller's (1/E)^coeff.
 * Written here, from + - * / only, rather than taken from the device's pow, because OpenCL
 * allows pow an error of 16 ulp and PoCL's and NVIDIA's differ from glibc's on ~10% of
 * arguments: the step sizes must round alike on every backend.
 * x = 2^k m with m in [sqrt(1/2), sqrt(2)) from the exponent bits (subnormal x is first scaled
 * by 2^(p+1)); log m = f - (h - s (h + R)) with f = m - 1 (exact), s = f / (2 + f), h = f^2 / 2
 * (the fdlibm form of cln_log1p); x^y = exp(y (k ln2 + log m)). The relative error is a few ulp
 * where the controller's factor is not clipped (|y log x| < 3). x = 0 and x = inf give 0 or inf
 * by the sign of y; NaN gives NaN. */
CLN_INLINE real cln_pow_pos(real x, real y)
{
    const cln_int sub =
        x < CLN_R(1.0) / CLN_R(CLN_POW_SUBN_SCALE_) * CLN_R(CLN_POW_MIN_NORMAL_SCALED_);
    const real xs = cln_select_(sub, x * CLN_R(CLN_POW_SUBN_SCALE_), x);
    const cln_rbits bits = CLN_AS_BITS(xs);
    const cln_rbits mant_mask = (((cln_rbits)1) << CLN_EXP_MANT_) - 1;
    const cln_rbits e = (bits >> CLN_EXP_MANT_) - CLN_EXP_BIAS_;
    real m = CLN_AS_REAL((bits & mant_mask) | (((cln_rbits)CLN_EXP_BIAS_) << CLN_EXP_MANT_));
    const cln_int halve = m > CLN_R(1.4142135623730951);
    m = cln_select_(halve, m * CLN_R(0.5), m);
    const real k = (real)e + cln_select_(halve, CLN_R(1.0), CLN_R(0.0)) -
                   cln_select_(sub, CLN_R(CLN_POW_SUBN_BITS_), CLN_R(0.0));
    const real f = m - CLN_R(1.0);
    const real s = f / (CLN_R(2.0) + f);
    const real w = s * s;
    const real R = w * CLN_LOG_L_(w);
    const real h = CLN_R(0.5) * (f * f);
    const real logx = k * CLN_LN2_HI_ - ((h - (s * (h + R) + k * CLN_LN2_LO_)) - f);
    real r = cln_exp(y * logx);
    const real edge = cln_select_(y > CLN_R(0.0), CLN_R(0.0), CLN_INF_); /* 0^y */
    r = cln_select_(x == CLN_R(0.0), edge, r);
    r = cln_select_(x == CLN_INF_, cln_select_(y > CLN_R(0.0), CLN_INF_, CLN_R(0.0)), r);
    return cln_select_(x == x, r, x);
}

/* The softplus functions are always inlined in C: a vectorised host loop must see their whole
 * body (GCC's inliner left the double softplus, with its degree-20 polynomial, as a call, and
 * the loop ran scalar with libm's fma: 30x slower). OpenCL C and CUDA inline CLN_INLINE anyway. */
#if defined(__GNUC__) && !defined(__OPENCL_VERSION__) && !defined(__CUDACC__) &&                   \
    !defined(__CUDACC_RTC__)
#define CLN_ACT_INLINE static inline __attribute__((always_inline))
#else
#define CLN_ACT_INLINE CLN_INLINE
#endif

/* e^a for a in [SP_THRESH, 0] (e^a >= the smallest normal number), +0 for a below (and NaN):
 * a = n ln2 + r with n = rint(a / ln2) (the add-and-subtract of SHIFT = 1.5 * 2^p, fused with the
 * product; a LOG2E is never halfway between two integers, which would need the odd part of
 * LOG2E's significand, far above 2^12, to divide an odd number below 2^12), r = (a - n HI) - n LO
 * with ln2 = HI + LO (HI the rounded ln2: the first fma is exact, |r| <= ln2/2, so r rounds once),
 * e^r = 1 + r P(r) with the last step fused, and the exact scaling by 2^n. The sum t = SHIFT + n
 * has the bits of SHIFT plus n, and the bits of 1.5 * 2^p are 0 below its top significand bit, so
 * t's bits shifted left by p hold n, in two's complement, in the exponent field and above: added
 * to p's bits (unsigned, so a negative n wraps around as it should), they add n to p's exponent.
 * That is p 2^n exactly, the product of the scaling it replaces, because p 2^n is a normal number
 * on this domain (p's exponent plus n stays >= 1: the same bits as the product on every float and
 * on 5e8 doubles, from the 2^26 on each side of SP_THRESH to every boundary between two n;
 * tests/unit/test_activation.c keeps a sweep of that tail). Below SP_THRESH the sum is meaningless
 * (the scaling would give a subnormal number or wrap around) and a mask returns +0 in its place.
 * The integer addition instead of a multiplication, and the mask (an and) instead of a clamp of
 * the argument (a compare and a blend), take two operations a vector off the FMA units, which
 * bound the throughput of the host's activation loop: 5% less time per value there (Zen 4). fma
 * is correctly rounded in C99, OpenCL C and CUDA, so every backend rounds each step alike. Error:
 * below 1 ulp (0.5 from the last fma, up to ~0.35 from the rounding of r, the rest from P). */
CLN_ACT_INLINE real cln_exp_fma_(real a)
{
    const real t = fma(a, CLN_LOG2E_, CLN_EXP_SHIFT_);
    const real n = t - CLN_EXP_SHIFT_;
    real r = fma(n, -CLN_LN2_HI_, a);
    r = fma(n, -CLN_LN2_LO_, r);
    const real p = fma(r, CLN_EXPM1_P_(r), CLN_R(1.0));
    const cln_urbits e = (cln_urbits)CLN_AS_BITS(t) << CLN_EXP_MANT_;
    const real scaled = CLN_AS_REAL((cln_rbits)((cln_urbits)CLN_AS_BITS(p) + e));
    return cln_select_(a >= CLN_SP_THRESH_, scaled, CLN_R(0.0));
}

/* log1p(t) for the arguments of softplus's big form, t = e^-|x|: 0 <= t <= 1 in float, 0 <= t <=
 * e^-1/2 in double (|x| >= 1/2): t + t (t Q(t)) with the last step fused. One polynomial over the
 * whole interval (degree 9 in float, 16 in double) costs fewer operations than a reduction of the
 * argument and a division, and no subnormal intermediate arises for normal t. */
CLN_ACT_INLINE real cln_log1p_fma_(real t)
{
    return fma(t, t * CLN_LOG1P_Q_(t), t);
}

/* softplus(x) = log(1 + e^x): jax.nn.softplus, i.e. jnp.logaddexp(x, 0). Branch-free, with fma
 * (see cln_exp_fma_).
 *   big form: max(x, 0) + log1p(e^-|x|). Where e^-|x| is below the smallest normal number the
 *     exact result is too (x < 0, flushed to +0) or log1p(e^-|x|) is below half an ulp of x
 *     (x > 0): e^-|x| is taken as +0 there, so that the log1p term is exactly +0.
 *   small form, double only, for |x| < 1/2: ln2 + x (1/2 + x G(x^2)), one rounding at the end.
 *     (The big form rounds log1p(e^-|x|) ~ ln2 and then its sum with x: two roundings, where
 *     this form has one.)
 * Float takes the big form for every x, with log1p's polynomial over [0, 1]: 29 vector operations
 * per 8 floats on AVX2 (besides the loads, stores and register copies), of which 19 fma and 1
 * multiplication, against 34 (21 fma, 2 multiplications and a blend, which Zen 4 also runs on its
 * two FMA units) with the small form. The host's activation loop costs 16% less per value and a
 * solve of a large batch 5% less; the price is 1.881 ulp at most, near 0+, instead of 1.53 (the
 * bound of the tests is 1.9, the specification's 2). Double keeps its small form (both forms
 * evaluated, one selected), and so its bits, whose step counts match diffrax's exactly.
 * NaN propagates (through max(x, 0); e^-|x| is +0 for it). */
CLN_ACT_INLINE real cln_softplus(real x)
{
    const real m = cln_select_(x < CLN_R(0.0), CLN_R(0.0), x);
    const real big = m + cln_log1p_fma_(cln_exp_fma_(cln_negabs_(x)));
#ifdef CLN_SP_G_ /* the small form, where its polynomial is defined (double) */
    const real z = x * x;
    const real small = fma(x, fma(x, CLN_SP_G_(z), CLN_R(0.5)), CLN_LN2_HI_);
    return cln_select_(z < CLN_R(0.25), small, big);
#else
    return big;
#endif
}

/* m sigmoid(w) = m / (1 + e^-w), the common core of sigmoid, silu and gelu, with one exp.
 * For w >= -T the quotient has two roundings, 1 + e^-w (see cln_one_plus_exp_) and the division,
 * for both signs of w (e^-w may be large but stays finite). Below -T, 1 + e^w rounds to 1 and
 * m sigmoid(w) = m e^w (relative difference < e^-T, far below an ulp), computed by cln_mulexp_
 * so that the subnormal tail is right instead of m / inf = 0. Below LO the result is the signed
 * zero it underflows to, also for m = +-inf (rather than inf * 0 = NaN). NaN propagates. */
CLN_INLINE real cln_mulsigmoid_(real m, real w)
{
    cln_int tail = w < -CLN_SIG_TAIL_;
    real e = cln_mulexp_(cln_select_(tail, m, CLN_R(1.0)), w);
    real q = m / cln_one_plus_exp_(-w);
    q = cln_select_(tail, e, q);
    return cln_ftz_(cln_select_(w < CLN_EXP_LO_, cln_copysign_(CLN_R(0.0), m), q));
}

/* sigmoid(x) = 1 / (1 + e^-x) (jax.nn.sigmoid), stable for both signs. */
CLN_INLINE real cln_sigmoid(real x)
{
    return cln_mulsigmoid_(CLN_R(1.0), x);
}

/* tanh(x): for |x| < 0.625 the odd polynomial x + x z P(z) (no cancellation near 0, exact for
 * subnormals); above, sign(x) (1 - 2 / (e^2|x| + 1)), which saturates to +-1 (e^2|x| = inf). */
CLN_INLINE real cln_tanh(real x)
{
    real a = -cln_negabs_(x);
    real z = a * a;
    real small = a + a * (z * CLN_TANH_P_(z));
    real big = CLN_R(1.0) - CLN_R(2.0) / cln_one_plus_exp_(a + a);
    return cln_ftz_(cln_copysign_(cln_select_(a < CLN_TANH_SMALL_, small, big), x));
}

/* silu(x) = x sigmoid(x) (jax.nn.silu), computed as x / (1 + e^-x) (x e^x in the far negative
 * tail, so that results stay accurate where sigmoid(x) alone is subnormal). silu(-inf) is the
 * limit -0 rather than -inf * 0 = NaN. */
CLN_INLINE real cln_silu(real x)
{
    return cln_mulsigmoid_(x, x);
}

/* gelu(x), tanh approximation as jax.nn.gelu(approximate=True):
 *   0.5 x (1 + tanh(v)),  v = sqrt(2/pi) (x + 0.044715 x^3),
 * with x^3 = (x x) x and both constants rounded to the state precision as JAX does. Evaluated
 * through the identity 0.5 (1 + tanh(v)) = sigmoid(2 v): the same function without the
 * cancellation of 1 + tanh(v) for x < 0 (2 v is exact doubling of the same rounded v).
 * gelu(-inf) is the limit -0. Note that for x < 0 the function is ill-conditioned in v (relative
 * condition number about 2|v|), so the roundings of v itself dominate the error there, exactly
 * as in any float evaluation of the formula (JAX's included). */
CLN_INLINE real cln_gelu(real x)
{
    real v = CLN_R(0.7978845608028654) * (x + CLN_R(0.044715) * ((x * x) * x));
    return cln_mulsigmoid_(x, v + v);
}

/* relu(x) = max(x, 0); NaN propagates (x < 0 is false for NaN). */
CLN_INLINE real cln_relu(real x)
{
    return cln_ftz_(cln_select_(x < CLN_R(0.0), CLN_R(0.0), x));
}

CLN_INLINE real cln_identity(real x)
{
    return x;
}

/* The activation with code `act` (CLN_ACT_*); an unknown code acts as the identity (the model
 * loader rejects unknown names before any code reaches this point). For loops, switch once
 * outside the loop and call the function directly, so that the loop vectorises. */
CLN_INLINE real cln_activate(cln_int act, real x)
{
    switch (act) {
    case CLN_ACT_RELU:
        return cln_relu(x);
    case CLN_ACT_TANH:
        return cln_tanh(x);
    case CLN_ACT_SIGMOID:
        return cln_sigmoid(x);
    case CLN_ACT_SOFTPLUS:
        return cln_softplus(x);
    case CLN_ACT_SILU:
        return cln_silu(x);
    case CLN_ACT_GELU:
        return cln_gelu(x);
    default:
        return cln_identity(x);
    }
}

/* ---- the derivatives, for the reverse pass: act'(x) from the input x and the output y = act(x)
 * that the forward pass computed (each reads the one it needs), one formula beside each
 * activation (tests/unit/test_activation.c holds each to its stated bound against the derivative
 * of the activation itself, in long double). JAX's rules are the same functions (tanh: (1 + y)(1 -
 * y); sigmoid: y (1 - y), here y sigmoid(-x), which keeps its accuracy where y rounds to 1). ---- */

/* sigmoid(x) from e = e^-|x| (cln_exp_fma_ of -|x|, one exponential for sigmoid(x) and
 * sigmoid(-x) alike): e / (1 + e) for x < 0, else 1 / (1 + e); three roundings after e's (below
 * 1 ulp), +0 where e^-|x| is below the smallest normal number (x < SP_THRESH: the flushed tail of
 * the activations). NaN propagates. */
CLN_ACT_INLINE real cln_sigmoid_e_(real x, real e)
{
    const real q = cln_select_(x < CLN_R(0.0), e, CLN_R(1.0)) / (CLN_R(1.0) + e);
    return cln_select_(x == x, q, x);
}

CLN_ACT_INLINE real cln_exp_negabs_(real x)
{
    return cln_exp_fma_(cln_negabs_(x));
}

/* relu'(x) = 1 for x > 0, else 0 (at 0 as well, as jax.nn.relu's rule; NaN gives 0). */
CLN_INLINE real cln_relu_grad(real x)
{
    return cln_select_(x > CLN_R(0.0), CLN_R(1.0), CLN_R(0.0));
}

/* tanh'(x) = 1 - y^2, as (1 - y)(1 + y): 1 - y is exact near y = 1. */
CLN_INLINE real cln_tanh_grad(real y)
{
    return (CLN_R(1.0) - y) * (CLN_R(1.0) + y);
}

/* sigmoid'(x) = sigmoid(x) sigmoid(-x), from y = sigmoid(x). */
CLN_ACT_INLINE real cln_sigmoid_grad(real x, real y)
{
    return y * cln_sigmoid_e_(-x, cln_exp_negabs_(x));
}

/* softplus'(x) = sigmoid(x). */
CLN_ACT_INLINE real cln_softplus_grad(real x)
{
    return cln_sigmoid_e_(x, cln_exp_negabs_(x));
}

/* silu'(x) = sigmoid(x) (1 + x sigmoid(-x)). */
CLN_ACT_INLINE real cln_silu_grad(real x)
{
    const real e = cln_exp_negabs_(x);
    return cln_sigmoid_e_(x, e) * (CLN_R(1.0) + x * cln_sigmoid_e_(-x, e));
}

/* gelu'(x) of the tanh approximation x sigmoid(2 v), v = sqrt(2/pi) (x + 0.044715 x^3):
 * sigmoid(2 v) + x sigmoid(2 v) sigmoid(-2 v) 2 dv/dx, dv/dx = sqrt(2/pi) (1 + 3 0.044715 x^2). */
CLN_ACT_INLINE real cln_gelu_grad(real x)
{
    const real c = CLN_R(0.7978845608028654);
    const real v = c * (x + CLN_R(0.044715) * ((x * x) * x));
    const real w = v + v, e = cln_exp_negabs_(w);
    const real s = cln_sigmoid_e_(w, e);
    const real dv = c * (CLN_R(1.0) + CLN_R(0.134145) * (x * x));
    return s + x * (s * cln_sigmoid_e_(-w, e)) * (dv + dv);
}

/* act'(x) of the activation with code `act` from its input x and output y (an unknown code is
 * the identity's, 1). */
CLN_ACT_INLINE real cln_activate_grad(cln_int act, real x, real y)
{
    switch (act) {
    case CLN_ACT_RELU:
        return cln_relu_grad(x);
    case CLN_ACT_TANH:
        return cln_tanh_grad(y);
    case CLN_ACT_SIGMOID:
        return cln_sigmoid_grad(x, y);
    case CLN_ACT_SOFTPLUS:
        return cln_softplus_grad(x);
    case CLN_ACT_SILU:
        return cln_silu_grad(x);
    case CLN_ACT_GELU:
        return cln_gelu_grad(x);
    default:
        return CLN_R(1.0);
    }
}

/* The model's output scale on one element of the last layer's activated output: x * s, one
 * multiplication in the state precision, as JAX computes `s * mlp(y)`. s is the element's own
 * value of the scale (the only one, or that of its component). Applied only for a model with a
 * scale: one without multiplies nothing. */
CLN_INLINE real cln_out_scale(real x, real s)
{
    return x * s;
}

/* The scale of component j of a scale of ns values (1: one for every component). */
#define CLN_OUT_SCALE_AT(s, ns, j) ((s)[(ns) == 1 ? 0 : (j)])

#endif /* CLN_ACTIVATION_H */
