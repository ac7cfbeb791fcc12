/* test_activation.c - accuracy and special values of cl/cln_activation.h on the host.
 *
 * float: a sweep of every 256th bit pattern in [-100, 100] (about 8.7 million inputs) against a
 * double-precision libm reference. double: a million pseudo-random inputs against a long double
 * (x87 extended, 64-bit mantissa) libm reference. With CLNODE_TEST_FULL=1 in the environment:
 * every 64th pattern (35 million) and 4.2 million random doubles (about 30 s optimised); with
 * CLNODE_TEST_FULL=all also softplus on every float in [-100, 100] (2.24e9 inputs, minutes). Errors
 * are in ulps of the reference (the ulp of the reference's binade; 2^-149 / 2^-1074 in the
 * subnormal range), and each function's maximum must stay within the bound stated in bound_f32 /
 * bound_f64. The measured maxima are printed so that they can be quoted.
 *
 * gelu is ill-conditioned for x < 0 (relative condition number about |w| (1 - sigmoid(w)) with
 * respect to its inner argument w = 2 sqrt(2/pi) (x + 0.044715 x^3)), so the three roundings of
 * w, which every evaluation of the formula in the state precision makes (JAX's too), are allowed
 * for: its bound is GELU_BASE + GELU_COND * cond(x) ulps, and the printed figure is the largest
 * error minus that allowance, next to the raw maximum over x >= 0 where cond < 0.3.
 *
 * The derivatives (cln_activate_grad, test_grad_*): the same sweeps against the derivative of the
 * true function in long double, with the bounds and floors stated before test_grad_sweep_f32,
 * their special values, and a central difference of each activation.
 *
 * Also checked: +-0, +-inf, NaN, huge, tiny and subnormal inputs; that the vectorised array
 * loops (cl/activation_f32.c, _f64.c, built with AVX2 clones) return the same bits as the
 * scalar functions.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* cl/activation_f32.c and cl/activation_f64.c */
float act_f32(int act, float x);
float act_grad_f32(int act, float x, float y);
float exp_f32(float x);
float log1p01_f32(float u);
void act_array_f32(int act, const float *x, float *y, size_t n);
double act_f64(int act, double x);
double act_grad_f64(int act, double x, double y);
double exp_f64(double x);
double log1p01_f64(double u);
void act_array_f64(int act, const double *x, double *y, size_t n);

enum {
    IDENTITY,
    RELU,
    TANH,
    SIGMOID,
    SOFTPLUS,
    SILU,
    GELU,
    N_ACT,
    EXP = N_ACT,
    LOG1P,
    N_FN
};
static const char *const fn_name[N_FN] = {"identity", "relu", "tanh", "sigmoid",   "softplus",
                                          "silu",     "gelu", "exp",  "log1p[0,1]"};

/* Maximum error in ulps. Measured with GCC 12 on x86-64 (this sweep and these random points):
 *          tanh  sigmoid softplus silu  gelu(excess) exp   log1p
 *   f32    1.12  1.56    1.77     1.49  1.49         0.78  0.83
 *   f64    1.12  1.55    1.50     1.48  1.48         0.76  0.88
 * (softplus: the fma forms of cln_softplus; exp and log1p: the double-word forms cln_pow_pos
 * uses.) Float softplus has no small form (see cln_softplus): its bound is 1.9, which also holds
 * on every float in [-100, 100] (test_exhaustive_softplus_f32: 1.881). */
static const double bound_f32[N_FN] = {0, 0, 1.75, 1.75, 1.9, 1.75, 1.75, 1.0, 1.0};
static const double bound_f64[N_FN] = {0, 0, 1.75, 1.75, 1.75, 1.75, 1.75, 1.0, 1.0};
#define GELU_BASE 1.75
#define GELU_COND 4.0

static int full_run(void)
{
    const char *v = getenv("CLNODE_TEST_FULL");
    return v != NULL && strcmp(v, "0") != 0 && v[0] != '\0';
}

typedef struct {
    double max_ulp[N_FN];
    double at[N_FN];
    double gelu_pos_max; /* raw gelu maximum over x >= 0 */
} err_stats;

static void stats_init(err_stats *s)
{
    memset(s, 0, sizeof *s);
}

static void stats_add(err_stats *s, int fn, double ulps, double x)
{
    if (!(ulps <= s->max_ulp[fn])) { /* also records a NaN error */
        s->max_ulp[fn] = ulps;
        s->at[fn] = x;
    }
}

static void stats_report(const err_stats *s, const char *prec, const double *bound)
{
    for (int fn = 0; fn < N_FN; fn++)
        print_message("%s %-10s max %.3f ulp (bound %.2f) at x = %.9g\n", prec, fn_name[fn],
                      s->max_ulp[fn], bound[fn], s->at[fn]);
    print_message("%s gelu on x >= 0: max %.3f ulp; above is the excess over %.2f + %.2f cond(x)\n",
                  prec, s->gelu_pos_max, GELU_BASE, GELU_COND);
    for (int fn = 0; fn < N_FN; fn++) {
        if (!(s->max_ulp[fn] <= bound[fn]))
            fail_msg("%s %s: %.3f ulp at x = %.17g exceeds %.2f", prec, fn_name[fn], s->max_ulp[fn],
                     s->at[fn], bound[fn]);
    }
}

/* ------------------------------------------------------------------------ float */

static double ulp_of_f32(double r)
{
    int e;
    r = fabs(r);
    if (r < FLT_MIN)
        return ldexp(1.0, -149);
    frexp(r, &e);
    return ldexp(1.0, e - 24);
}

/* |got - ref| in ulps of ref; an infinity must match exactly unless ref is past FLT_MAX. */
static double ulps_f32(float got, double ref)
{
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(got))
        return fabs(ref) >= FLT_MAX && (got > 0) == (ref > 0) ? 0.0 : INFINITY;
    if (isinf(ref))
        return INFINITY;
    /* subnormal results are flushed to zero (cln_ftz_): a zero where the exact value is below
     * (or within a few ulps of) the smallest normal counts as exact */
    if (got == 0.0f && fabs(ref) < FLT_MIN * (1.0 + 0x1p-16))
        return 0.0;
    return fabs((double)got - ref) / ulp_of_f32(ref);
}

static double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* gelu's inner argument w = 2 v with float-rounded constants, as JAX rounds them; the reference
 * is x sigmoid(w) = 0.5 x (1 + tanh(v)) without the cancellation. */
static double gelu_w_d(double x)
{
    return 2.0 * (double)(float)0.7978845608028654 * (x + (double)(float)0.044715 * (x * x * x));
}

static double gelu_cond(double w)
{
    return fabs(w) * (1.0 - sigmoid_d(w));
}

#define CHUNK 4096

static void sweep_f32(err_stats *s, const float *x, size_t n)
{
    static float y[N_ACT][CHUNK];
    for (int act = 0; act < N_ACT; act++)
        act_array_f32(act, x, y[act], n);
    for (size_t i = 0; i < n; i++) {
        double xd = x[i];
        double sp = fmax(xd, 0.0) + log1p(exp(-fabs(xd)));
        double sg = sigmoid_d(xd);
        double w = gelu_w_d(xd);
        stats_add(s, IDENTITY, ulps_f32(y[IDENTITY][i], xd), xd);
        stats_add(s, RELU, ulps_f32(y[RELU][i], xd < 0 ? 0.0 : xd), xd);
        stats_add(s, TANH, ulps_f32(y[TANH][i], tanh(xd)), xd);
        stats_add(s, SIGMOID, ulps_f32(y[SIGMOID][i], sg), xd);
        stats_add(s, SOFTPLUS, ulps_f32(y[SOFTPLUS][i], sp), xd);
        stats_add(s, SILU, ulps_f32(y[SILU][i], xd * sg), xd);
        double ge = ulps_f32(y[GELU][i], xd * sigmoid_d(w));
        if (xd >= 0 && !(ge <= s->gelu_pos_max))
            s->gelu_pos_max = ge;
        stats_add(s, GELU, ge - GELU_COND * gelu_cond(w), xd);
        stats_add(s, EXP, ulps_f32(exp_f32(x[i]), exp(xd)), xd);
    }
}

static float f32_of_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static void test_sweep_f32(void **state)
{
    (void)state;
    static float x[CHUNK];
    err_stats s;
    stats_init(&s);
    uint32_t top = 0x42C80000u; /* 100.0f */
    uint32_t step = full_run() ? 64 : 256;
    size_t n = 0;
    for (uint32_t sign = 0; sign <= 1; sign++) {
        for (uint32_t b = 0; b <= top; b += step) {
            x[n++] = f32_of_bits(b | sign << 31);
            if (n == CHUNK) {
                sweep_f32(&s, x, n);
                n = 0;
            }
        }
    }
    sweep_f32(&s, x, n);
    /* log1p on its domain [0, 1]: every 16th pattern */
    for (uint32_t b = 0; b <= 0x3F800000u; b += step / 4) {
        float u = f32_of_bits(b);
        stats_add(&s, LOG1P, ulps_f32(log1p01_f32(u), log1p((double)u)), u);
    }
    stats_report(&s, "f32", bound_f32);
}

/* softplus on every float in [-100, 100] (beyond, the result is x or the flushed zero), only
 * with CLNODE_TEST_FULL=all: the float figure quoted in cl/cln_activation.h. */
static void test_exhaustive_softplus_f32(void **state)
{
    (void)state;
    const char *v = getenv("CLNODE_TEST_FULL");
    if (v == NULL || strcmp(v, "all") != 0)
        skip();
    static float x[CHUNK], y[CHUNK];
    err_stats s;
    stats_init(&s);
    for (uint32_t sign = 0; sign <= 1; sign++) {
        for (uint64_t b0 = 0; b0 <= 0x42C80000u; b0 += CHUNK) {
            size_t n = 0;
            for (uint64_t b = b0; b < b0 + CHUNK && b <= 0x42C80000u; b++)
                x[n++] = f32_of_bits((uint32_t)b | sign << 31);
            act_array_f32(SOFTPLUS, x, y, n);
            for (size_t i = 0; i < n; i++) {
                const double xd = x[i];
                const double sp = fmax(xd, 0.0) + log1p(exp(-fabs(xd)));
                stats_add(&s, SOFTPLUS, ulps_f32(y[i], sp), xd);
            }
        }
    }
    print_message("f32 softplus on every float in [-100, 100]: max %.3f ulp at x = %.9g\n",
                  s.max_ulp[SOFTPLUS], s.at[SOFTPLUS]);
    assert_true(s.max_ulp[SOFTPLUS] <= bound_f32[SOFTPLUS]);
}

/* ------------------------------------------------------------------------ double */

static long double ulp_of_f64(long double r)
{
    int e;
    r = fabsl(r);
    if (r < DBL_MIN)
        return ldexpl(1.0L, -1074);
    frexpl(r, &e);
    return ldexpl(1.0L, e - 53);
}

static double ulps_f64(double got, long double ref)
{
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(got))
        return fabsl(ref) >= DBL_MAX && (got > 0) == (ref > 0) ? 0.0 : INFINITY;
    if (isinf(ref))
        return INFINITY;
    if (got == 0.0 && fabsl(ref) < DBL_MIN * (1.0L + 0x1p-40L)) /* flushed, as above */
        return 0.0;
    return (double)(fabsl((long double)got - ref) / ulp_of_f64(ref));
}

static long double sigmoid_l(long double x)
{
    if (x >= 0)
        return 1.0L / (1.0L + expl(-x));
    long double e = expl(x);
    return e / (1.0L + e);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double uniform01(void)
{
    return (double)(splitmix64() >> 11) * 0x1p-53;
}

static void check_f64(err_stats *s, const double *x, size_t n)
{
    static double y[N_ACT][CHUNK];
    for (int act = 0; act < N_ACT; act++)
        act_array_f64(act, x, y[act], n);
    for (size_t i = 0; i < n; i++) {
        long double xl = x[i];
        long double sg = sigmoid_l(xl);
        long double sp = (xl > 0 ? xl : 0.0L) + log1pl(expl(-fabsl(xl)));
        long double w =
            2.0L * (long double)0.7978845608028654 * (xl + (long double)0.044715 * (xl * xl * xl));
        stats_add(s, IDENTITY, ulps_f64(y[IDENTITY][i], xl), x[i]);
        stats_add(s, RELU, ulps_f64(y[RELU][i], xl < 0 ? 0.0L : xl), x[i]);
        stats_add(s, TANH, ulps_f64(y[TANH][i], tanhl(xl)), x[i]);
        stats_add(s, SIGMOID, ulps_f64(y[SIGMOID][i], sg), x[i]);
        stats_add(s, SOFTPLUS, ulps_f64(y[SOFTPLUS][i], sp), x[i]);
        stats_add(s, SILU, ulps_f64(y[SILU][i], xl * sg), x[i]);
        double ge = ulps_f64(y[GELU][i], xl * sigmoid_l(w));
        if (x[i] >= 0 && !(ge <= s->gelu_pos_max))
            s->gelu_pos_max = ge;
        stats_add(s, GELU, ge - GELU_COND * gelu_cond((double)w), x[i]);
        stats_add(s, EXP, ulps_f64(exp_f64(x[i]), expl(xl)), x[i]);
    }
}

static void test_random_f64(void **state)
{
    (void)state;
    static double x[CHUNK];
    err_stats s;
    stats_init(&s);
    const size_t total = (size_t)CHUNK * (full_run() ? 1024 : 256);
    for (size_t done = 0; done < total; done += CHUNK) {
        for (size_t i = 0; i < CHUNK; i++) {
            double u = uniform01();
            switch ((done / CHUNK) % 4) {
            case 0: /* the range where the activations are not trivial */
                x[i] = -40.0 + 80.0 * u;
                break;
            case 1: /* tanh's polynomial, sigmoid and softplus around 0 */
                x[i] = -2.0 + 4.0 * u;
                break;
            case 2: /* magnitudes 2^-60 .. 2^10, both signs */
                x[i] = ldexp(1.0 + uniform01(), (int)(u * 70.0) - 60) * (splitmix64() & 1 ? -1 : 1);
                break;
            default: /* the exp range, overflow and the subnormal tail */
                x[i] = -760.0 + 1480.0 * u;
                break;
            }
        }
        check_f64(&s, x, CHUNK);
    }
    const int n_log = full_run() ? 2000000 : 500000;
    for (int i = 0; i < n_log; i++) {
        double u = i < n_log / 2 ? uniform01() : ldexp(uniform01(), -(int)(uniform01() * 1100));
        stats_add(&s, LOG1P, ulps_f64(log1p01_f64(u), log1pl((long double)u)), u);
    }
    stats_report(&s, "f64", bound_f64);
}

/* ------------------------------------------------------------------------ special values */

#define EXPECT_SAME(got, want)                                                                     \
    do {                                                                                           \
        double g_ = (got), w_ = (want);                                                            \
        if (!((isnan(g_) && isnan(w_)) || (g_ == w_ && signbit(g_) == signbit(w_))))               \
            fail_msg("%s = %.17g, expected %.17g", #got, g_, w_);                                  \
    } while (0)

#define EXPECT_CLOSE(got, want, ulps, ulpfn)                                                       \
    do {                                                                                           \
        double g_ = (got), w_ = (want);                                                            \
        if (!(fabs(g_ - w_) <= (ulps)*ulpfn(w_)))                                                  \
            fail_msg("%s = %.17g, expected %.17g", #got, g_, w_);                                  \
    } while (0)

static double ulp_of_f64d(double r)
{
    return (double)ulp_of_f64(r);
}

static void test_specials_f32(void **state)
{
    (void)state;
    const float inf = INFINITY, nan = NAN, dmin = 0x1p-149f, big = 1e30f, tiny = 1e-30f;
    const float ln2 = 0.6931471805599453f;
    for (int act = 0; act < N_ACT; act++) {
        EXPECT_SAME(act_f32(act, nan), nan);
        EXPECT_SAME(act_f32(act, -nan), nan);
    }
    EXPECT_SAME(act_f32(IDENTITY, -0.0f), -0.0f);
    EXPECT_SAME(act_f32(IDENTITY, dmin), dmin);
    EXPECT_SAME(act_f32(RELU, -inf), 0.0f);
    EXPECT_SAME(act_f32(RELU, inf), inf);
    EXPECT_SAME(act_f32(RELU, -dmin), 0.0f);
    EXPECT_SAME(act_f32(RELU, dmin), 0.0f); /* subnormal results are flushed to zero */

    EXPECT_SAME(act_f32(TANH, 0.0f), 0.0f);
    EXPECT_SAME(act_f32(TANH, -0.0f), -0.0f);
    EXPECT_SAME(act_f32(TANH, inf), 1.0f);
    EXPECT_SAME(act_f32(TANH, -inf), -1.0f);
    EXPECT_SAME(act_f32(TANH, big), 1.0f);
    EXPECT_SAME(act_f32(TANH, -FLT_MAX), -1.0f);
    EXPECT_SAME(act_f32(TANH, tiny), tiny);
    EXPECT_SAME(act_f32(TANH, -dmin), -0.0f);
    EXPECT_SAME(act_f32(TANH, FLT_MIN), FLT_MIN);

    EXPECT_SAME(act_f32(SIGMOID, 0.0f), 0.5f);
    EXPECT_SAME(act_f32(SIGMOID, -0.0f), 0.5f);
    EXPECT_SAME(act_f32(SIGMOID, inf), 1.0f);
    EXPECT_SAME(act_f32(SIGMOID, -inf), 0.0f);
    EXPECT_SAME(act_f32(SIGMOID, FLT_MAX), 1.0f);
    EXPECT_SAME(act_f32(SIGMOID, -big), 0.0f);
    EXPECT_SAME(act_f32(SIGMOID, dmin), 0.5f);
    EXPECT_SAME(act_f32(SIGMOID, -100.0f), 0.0f); /* e^-100 is subnormal: flushed */
    EXPECT_CLOSE(act_f32(SIGMOID, -87.0f), exp(-87.0), 1.0, ulp_of_f32); /* still normal */

    EXPECT_SAME(act_f32(SOFTPLUS, 0.0f), ln2);
    EXPECT_SAME(act_f32(SOFTPLUS, -dmin), ln2);
    EXPECT_SAME(act_f32(SOFTPLUS, inf), inf);
    EXPECT_SAME(act_f32(SOFTPLUS, -inf), 0.0f);
    EXPECT_SAME(act_f32(SOFTPLUS, FLT_MAX), FLT_MAX);
    EXPECT_SAME(act_f32(SOFTPLUS, big), big);
    EXPECT_SAME(act_f32(SOFTPLUS, -big), 0.0f);
    EXPECT_SAME(act_f32(SOFTPLUS, -100.0f), 0.0f);
    EXPECT_CLOSE(act_f32(SOFTPLUS, -87.0f), exp(-87.0), 1.0, ulp_of_f32);
    /* the cut: the smallest float >= -126 ln2 still gives e^x (>= FLT_MIN), the next one down
     * the flushed zero (test_softplus_tail: every float around it); around |x| = 1/2, from both
     * sides (where float switched to a small form before it lost it, and double still does) */
    EXPECT_CLOSE(act_f32(SOFTPLUS, -87.33654022216797f), exp(-87.33654022216797), 1.0, ulp_of_f32);
    EXPECT_SAME(act_f32(SOFTPLUS, nextafterf(-87.33654022216797f, -inf)), 0.0f);
    const float half[3] = {nextafterf(0.5f, 0.0f), 0.5f, nextafterf(0.5f, 1.0f)};
    for (int k = 0; k < 3; k++) {
        EXPECT_CLOSE(act_f32(SOFTPLUS, half[k]), log1p(exp((double)half[k])), 1.5, ulp_of_f32);
        EXPECT_CLOSE(act_f32(SOFTPLUS, -half[k]), log1p(exp(-(double)half[k])), 1.5, ulp_of_f32);
    }

    EXPECT_SAME(act_f32(SILU, 0.0f), 0.0f);
    EXPECT_SAME(act_f32(SILU, inf), inf);
    EXPECT_SAME(act_f32(SILU, -inf), -0.0f);
    EXPECT_SAME(act_f32(SILU, FLT_MAX), FLT_MAX);
    EXPECT_SAME(act_f32(SILU, -big), -0.0f);
    EXPECT_SAME(act_f32(SILU, tiny), tiny * 0.5f);
    EXPECT_CLOSE(act_f32(SILU, -90.0f), -90.0 * exp(-90.0), 1.5, ulp_of_f32);

    EXPECT_SAME(act_f32(GELU, 0.0f), 0.0f);
    EXPECT_SAME(act_f32(GELU, inf), inf);
    EXPECT_SAME(act_f32(GELU, -inf), -0.0f);
    EXPECT_SAME(act_f32(GELU, FLT_MAX), FLT_MAX);
    EXPECT_SAME(act_f32(GELU, big), big);
    EXPECT_SAME(act_f32(GELU, -big), -0.0f);
    EXPECT_SAME(act_f32(GELU, tiny), tiny * 0.5f);

    EXPECT_SAME(exp_f32(0.0f), 1.0f);
    EXPECT_SAME(exp_f32(-dmin), 1.0f);
    EXPECT_SAME(exp_f32(inf), inf);
    EXPECT_SAME(exp_f32(-inf), 0.0f);
    EXPECT_SAME(exp_f32(nan), nan);
    EXPECT_SAME(exp_f32(88.72283172607421875f), (float)exp(88.72283172607421875));
    EXPECT_SAME(exp_f32(88.72283935546875f), inf);
    EXPECT_SAME(exp_f32(-104.0f), 0.0f);
    EXPECT_CLOSE(exp_f32(-103.0f), exp(-103.0), 1.0, ulp_of_f32);
    EXPECT_SAME(log1p01_f32(0.0f), 0.0f);
    EXPECT_SAME(log1p01_f32(dmin), dmin);
    EXPECT_SAME(log1p01_f32(1.0f), ln2);
}

static void test_specials_f64(void **state)
{
    (void)state;
    const double inf = INFINITY, nan = NAN, dmin = 0x1p-1074, big = 1e300, tiny = 1e-300;
    const double ln2 = 0.6931471805599453;
    for (int act = 0; act < N_ACT; act++) {
        EXPECT_SAME(act_f64(act, nan), nan);
        EXPECT_SAME(act_f64(act, -nan), nan);
    }
    EXPECT_SAME(act_f64(IDENTITY, -0.0), -0.0);
    EXPECT_SAME(act_f64(RELU, -inf), 0.0);
    EXPECT_SAME(act_f64(RELU, dmin), 0.0);
    EXPECT_SAME(act_f64(TANH, -0.0), -0.0);
    EXPECT_SAME(act_f64(TANH, inf), 1.0);
    EXPECT_SAME(act_f64(TANH, -inf), -1.0);
    EXPECT_SAME(act_f64(TANH, -DBL_MAX), -1.0);
    EXPECT_SAME(act_f64(TANH, tiny), tiny);
    EXPECT_SAME(act_f64(TANH, -dmin), -0.0);
    EXPECT_SAME(act_f64(SIGMOID, 0.0), 0.5);
    EXPECT_SAME(act_f64(SIGMOID, inf), 1.0);
    EXPECT_SAME(act_f64(SIGMOID, -inf), 0.0);
    EXPECT_SAME(act_f64(SIGMOID, -big), 0.0);
    EXPECT_SAME(act_f64(SIGMOID, -740.0), 0.0); /* subnormal: flushed */
    EXPECT_CLOSE(act_f64(SIGMOID, -700.0), (double)expl(-700.0L), 1.0, ulp_of_f64d);
    EXPECT_SAME(act_f64(SOFTPLUS, 0.0), ln2);
    EXPECT_SAME(act_f64(SOFTPLUS, inf), inf);
    EXPECT_SAME(act_f64(SOFTPLUS, -inf), 0.0);
    EXPECT_SAME(act_f64(SOFTPLUS, DBL_MAX), DBL_MAX);
    EXPECT_SAME(act_f64(SOFTPLUS, -big), 0.0);
    const double sp_lo = -708.3964185322641; /* the smallest double >= -1022 ln2 */
    EXPECT_CLOSE(act_f64(SOFTPLUS, sp_lo), (double)expl((long double)sp_lo), 1.0, ulp_of_f64d);
    EXPECT_SAME(act_f64(SOFTPLUS, nextafter(sp_lo, -inf)), 0.0);
    EXPECT_CLOSE(act_f64(SOFTPLUS, 0.5), (double)log1pl(expl(0.5L)), 1.5, ulp_of_f64d);
    EXPECT_CLOSE(act_f64(SOFTPLUS, -0.5), (double)log1pl(expl(-0.5L)), 1.5, ulp_of_f64d);
    EXPECT_SAME(act_f64(SILU, inf), inf);
    EXPECT_SAME(act_f64(SILU, -inf), -0.0);
    EXPECT_SAME(act_f64(SILU, -big), -0.0);
    EXPECT_SAME(act_f64(SILU, tiny), tiny * 0.5);
    EXPECT_SAME(act_f64(SILU, -720.0), -0.0); /* subnormal: flushed */
    EXPECT_CLOSE(act_f64(SILU, -700.0), (double)(-700.0L * expl(-700.0L)), 1.5, ulp_of_f64d);
    EXPECT_SAME(act_f64(GELU, inf), inf);
    EXPECT_SAME(act_f64(GELU, -inf), -0.0);
    EXPECT_SAME(act_f64(GELU, DBL_MAX), DBL_MAX);
    EXPECT_SAME(act_f64(GELU, -big), -0.0);
    EXPECT_SAME(exp_f64(0.0), 1.0);
    EXPECT_SAME(exp_f64(inf), inf);
    EXPECT_SAME(exp_f64(-inf), 0.0);
    EXPECT_SAME(exp_f64(710.0), inf);
    EXPECT_SAME(exp_f64(-746.0), 0.0);
    EXPECT_CLOSE(exp_f64(-744.0), (double)expl(-744.0L), 1.0, ulp_of_f64d);
    EXPECT_CLOSE(exp_f64(709.78), (double)expl((long double)709.78), 1.0, ulp_of_f64d);
    EXPECT_SAME(log1p01_f64(dmin), dmin);
    EXPECT_SAME(log1p01_f64(1.0), ln2);
}

/* The vectorised loops (AVX2 or SSE2 clone) must give the scalar function's bits. */
static void test_array_matches_scalar(void **state)
{
    (void)state;
    enum {
        N = 1003
    }; /* not a multiple of any vector width: exercises the epilogue */
    static float xf[N], yf[N];
    static double xd[N], yd[N];
    for (int i = 0; i < N; i++) {
        xd[i] = (uniform01() - 0.5) * (i % 3 == 0 ? 2.0 : i % 3 == 1 ? 60.0 : 400.0);
        xf[i] = (float)xd[i];
    }
    xf[0] = xd[0] = INFINITY;
    xf[1] = xd[1] = -INFINITY;
    xf[2] = xd[2] = NAN;
    xf[3] = 0x1p-149f;
    xd[3] = 0x1p-1074;
    for (int act = 0; act < N_ACT; act++) {
        act_array_f32(act, xf, yf, N);
        act_array_f64(act, xd, yd, N);
        for (int i = 0; i < N; i++) {
            float sf = act_f32(act, xf[i]);
            double sd = act_f64(act, xd[i]);
            if (memcmp(&sf, &yf[i], sizeof sf) != 0)
                fail_msg("f32 %s(%a): scalar %a, array %a", fn_name[act], xf[i], sf, yf[i]);
            if (memcmp(&sd, &yd[i], sizeof sd) != 0)
                fail_msg("f64 %s(%a): scalar %a, array %a", fn_name[act], xd[i], sd, yd[i]);
        }
    }
}

/* softplus's tail, where e^x nears the smallest normal number: cln_exp_fma_ scales e^r by 2^n by
 * adding n to the exponent bits, which is exact only while the result stays normal, and cuts to
 * +0 below SP_THRESH = -126 ln2 (float) or -1022 ln2 (double). Every x below the cut must give
 * exactly +0, every x above it a normal number within the sweep's bound of log(1 + e^x); checked
 * on the vectorised loop (and the scalar function, bit for bit) for the 2^17 values of the
 * precision on each side of the cut (in float: every float within 1 of it), and the 128 around
 * each switch of n, (n + 1/2) ln2 for n = -128 .. 0 (float) and -1024 .. 0 (double), where e^r is
 * at its extremes. */
typedef double (*tail_step)(double x, double toward);

static double tail_step_f32(double x, double toward)
{
    return nextafterf((float)x, (float)toward);
}

static double tail_step_f64(double x, double toward)
{
    return nextafter(x, toward);
}

/* The points above, in the precision `step` moves in, into x[0 .. cap); returns how many. */
static size_t tail_points(double *x, size_t cap, tail_step step, double cut, int kmin)
{
    size_t n = 0;
    double v = cut;
    for (int i = 0; i < (1 << 17); i++)
        v = step(v, -INFINITY);
    for (int i = 0; i < (1 << 18) && n < cap; i++, v = step(v, INFINITY))
        x[n++] = v;
    for (int k = kmin; k <= 0; k++) {
        v = step((k + 0.5) * 0.6931471805599453, 0.0);
        for (int i = 0; i < 64; i++)
            v = step(v, -INFINITY);
        for (int i = 0; i < 128 && n < cap; i++, v = step(v, INFINITY))
            x[n++] = v;
    }
    assert_true(n < cap);
    return n;
}

/* One point: y from the loop, `same`: whether the scalar function gave its bits. */
static void tail_check(const char *prec, double x, double y, int same, double cut, double least,
                       double ulps, double bound)
{
    if (!same)
        fail_msg("%s softplus(%a): the loop and the scalar function differ", prec, x);
    if (x < cut) {
        if (!(y == 0.0 && !signbit(y)))
            fail_msg("%s softplus(%a) = %a below the cut: +0 expected", prec, x, y);
    } else if (!(y >= least && ulps <= bound)) {
        fail_msg("%s softplus(%a) = %a: %.3f ulp (bound %.2f), or below the least normal", prec, x,
                 y, ulps, bound);
    }
}

static void test_softplus_tail(void **state)
{
    (void)state;
    enum {
        CAP = 1 << 19
    };
    static double x[CAP], yd[CAP];
    static float xf[CAP], yf[CAP];
    /* the cuts as the formulas hold them: CLN_SP_THRESH_ in each precision */
    const double cut_f = (double)-87.33654022216797f, cut_d = -708.3964185322641;
    size_t n = tail_points(x, CAP, tail_step_f32, cut_f, -128);
    for (size_t i = 0; i < n; i++)
        xf[i] = (float)x[i];
    act_array_f32(SOFTPLUS, xf, yf, n);
    for (size_t i = 0; i < n; i++) {
        const float s = act_f32(SOFTPLUS, xf[i]);
        tail_check("f32", x[i], yf[i], memcmp(&s, &yf[i], sizeof s) == 0, cut_f, FLT_MIN,
                   ulps_f32(yf[i], log1p(exp(x[i]))), bound_f32[SOFTPLUS]);
    }
    n = tail_points(x, CAP, tail_step_f64, cut_d, -1024);
    act_array_f64(SOFTPLUS, x, yd, n);
    for (size_t i = 0; i < n; i++) {
        const double s = act_f64(SOFTPLUS, x[i]);
        tail_check("f64", x[i], yd[i], memcmp(&s, &yd[i], sizeof s) == 0, cut_d, DBL_MIN,
                   ulps_f64(yd[i], log1pl(expl((long double)x[i]))), bound_f64[SOFTPLUS]);
    }
}

/* ------------------------------------------------------------------------ derivatives
 *
 * cln_activate_grad(act, x, y = act(x)) against the derivative of the true function at x, in long
 * double (closed forms with long double libm; for gelu the derivative of the tanh approximation
 * with its two constants rounded to the state precision, as the forward rounds them). Errors are
 * in units of max(ulp(reference), ulp(floor)): floor 0 (plain ulps of the reference) for relu,
 * sigmoid and softplus, whose derivatives are products and quotients of accurate terms; floor =
 * the derivative's maximum for
 *   tanh (1): the rule (1 - y)(1 + y) from the rounded y, JAX's, carries y's absolute error,
 *     ~ulp(1), into a derivative that falls to e^-2|x|: relative accuracy is lost for |x| >~ 1;
 *   silu (1.0998, at x = 2.40): its derivative has a zero at x = -1.2785, where
 *     1 + x sigmoid(-x) cancels;
 *   gelu (1.1289, at x = 1.50): a zero at x = -0.7517, and for x < 0 the function is
 *     ill-conditioned in its inner argument (see the forward's bound).
 * Subnormal true values count as exact when the result is the flushed zero (as the forward's).
 * Maximum errors in those units, measured (GCC 12, x86-64, the sweeps below with
 * CLNODE_TEST_FULL=1: every 64th float pattern, 4 million random doubles):
 *            relu  tanh  sigmoid  softplus  silu  gelu
 *   float    0     0.86  2.26     2.40      1.78  1.66
 *   double   0     0.88  2.42     2.40      1.81  1.74
 * (sigmoid' = e / (1 + e)^2 with e = e^-|x| and the square of 1 + e carried exactly; softplus' =
 * sigmoid from the same e: e's error, below 1 ulp, and three roundings.) The bounds below are
 * these rounded up. silu' and gelu' select their limits at +-inf (and gelu' its zero second term
 * where sigmoid(w) sigmoid(-w) is flushed), where the plain formulas give inf * 0. */
static const double grad_bound_f32[N_ACT] = {0, 0, 1.0, 2.75, 2.75, 2.0, 2.0};
static const double grad_bound_f64[N_ACT] = {0, 0, 1.0, 2.75, 2.75, 2.0, 2.0};
static const long double grad_floor[N_ACT] = {0, 0, 1.0L, 0, 0, 1.0998L, 1.1289L};

/* The derivatives in long double; c and a are gelu's constants in the state precision. */
static long double grad_ref(int act, long double x, long double c, long double a)
{
    switch (act) {
    case IDENTITY:
        return 1.0L;
    case RELU:
        return x > 0 ? 1.0L : 0.0L;
    case TANH: {
        long double t = expl(-2.0L * fabsl(x));
        return isinf(x) ? 0.0L : 4.0L * t / ((1.0L + t) * (1.0L + t));
    }
    case SIGMOID:
        return sigmoid_l(x) * sigmoid_l(-x);
    case SOFTPLUS:
        return sigmoid_l(x);
    case SILU: /* s(x) + x s(x) s(-x); 1 at +inf, 0 at -inf */
        return isinf(x) ? (x > 0 ? 1.0L : 0.0L) : sigmoid_l(x) * (1.0L + x * sigmoid_l(-x));
    default: { /* GELU: s(w) + x s(w) s(-w) w', w = 2 c (x + a x^3) */
        if (isinf(x))
            return x > 0 ? 1.0L : 0.0L;
        long double w = 2.0L * c * (x + a * (x * x * x));
        long double dw = 2.0L * c * (1.0L + 3.0L * a * (x * x));
        long double sw = sigmoid_l(w), q = sw * sigmoid_l(-w);
        return q == 0.0L ? sw : sw + x * q * dw;
    }
    }
}

typedef struct {
    double max[N_ACT];
    double at[N_ACT];
} grad_stats;

/* |got - ref| in units of max(ulp(ref), ulp(floor)), in the precision's ulps (f32 or not). */
static double grad_err(double got, long double ref, long double floor, int f32)
{
    double e = f32 ? ulps_f32((float)got, (double)ref) : ulps_f64(got, ref);
    if (floor > 0 && isfinite(e)) {
        long double u = f32 ? (long double)ulp_of_f32((double)ref) : ulp_of_f64(ref);
        long double uf = f32 ? (long double)ulp_of_f32((double)floor) : ulp_of_f64(floor);
        e = (double)((long double)e * u / (u > uf ? u : uf));
    }
    return e;
}

static void grad_add(grad_stats *s, int act, double e, double x)
{
    if (!(e <= s->max[act])) {
        s->max[act] = e;
        s->at[act] = x;
    }
}

static void grad_report(const grad_stats *s, const char *prec, const double *bound)
{
    for (int act = 0; act < N_ACT; act++)
        print_message("%s %s' max %.3f (bound %.2f; units: ulp of max(|ref|, %.4Lg)) at x = %.9g\n",
                      prec, fn_name[act], s->max[act], bound[act], grad_floor[act], s->at[act]);
    for (int act = 0; act < N_ACT; act++) {
        if (!(s->max[act] <= bound[act]))
            fail_msg("%s %s': %.3f at x = %.17g exceeds %.2f", prec, fn_name[act], s->max[act],
                     s->at[act], bound[act]);
    }
}

static void grad_check_f32(grad_stats *s, float x)
{
    const long double c = (float)0.7978845608028654, a = (float)0.044715;
    for (int act = 0; act < N_ACT; act++) {
        float g = act_grad_f32(act, x, act_f32(act, x));
        grad_add(s, act, grad_err(g, grad_ref(act, x, c, a), grad_floor[act], 1), x);
    }
}

static void grad_check_f64(grad_stats *s, double x)
{
    const long double c = 0.7978845608028654, a = 0.044715;
    for (int act = 0; act < N_ACT; act++) {
        double g = act_grad_f64(act, x, act_f64(act, x));
        grad_add(s, act, grad_err(g, grad_ref(act, x, c, a), grad_floor[act], 0), x);
    }
}

/* The special inputs of both sweeps: +-0, +-inf, NaN, subnormals, the extremes, the zeros. */
static const double grad_specials[] = {
    0.0,        -0.0,    INFINITY, -INFINITY, NAN,     0x1p-149, -0x1p-149, 0x1p-1074,
    -0x1p-1074, 1e-30,   -1e-30,   1e30,      -1e30,   3.4e38,   -3.4e38,   1e300,
    -1e300,     DBL_MAX, -DBL_MAX, -1.2785,   -0.7517, 1e-300,   -1e-300};

/* float: every 256th bit pattern in [-100, 100] (64th with CLNODE_TEST_FULL), and the specials. */
static void test_grad_sweep_f32(void **state)
{
    (void)state;
    grad_stats s;
    memset(&s, 0, sizeof s);
    const uint32_t step = full_run() ? 64 : 256;
    for (uint32_t sign = 0; sign <= 1; sign++)
        for (uint32_t b = 0; b <= 0x42C80000u; b += step)
            grad_check_f32(&s, f32_of_bits(b | sign << 31));
    for (size_t i = 0; i < sizeof grad_specials / sizeof grad_specials[0]; i++)
        grad_check_f32(&s, (float)grad_specials[i]);
    grad_report(&s, "f32", grad_bound_f32);
}

/* double: a million random values (4 million with CLNODE_TEST_FULL) in the ranges of
 * test_random_f64, and the specials. */
static void test_grad_random_f64(void **state)
{
    (void)state;
    grad_stats s;
    memset(&s, 0, sizeof s);
    const size_t total = (size_t)(full_run() ? 4 : 1) << 20;
    for (size_t i = 0; i < total; i++) {
        double u = uniform01(), x;
        switch (i % 4) {
        case 0:
            x = -40.0 + 80.0 * u;
            break;
        case 1:
            x = -2.0 + 4.0 * u;
            break;
        case 2:
            x = ldexp(1.0 + uniform01(), (int)(u * 70.0) - 60) * (splitmix64() & 1 ? -1 : 1);
            break;
        default:
            x = -760.0 + 1480.0 * u;
            break;
        }
        grad_check_f64(&s, x);
    }
    for (size_t i = 0; i < sizeof grad_specials / sizeof grad_specials[0]; i++)
        grad_check_f64(&s, grad_specials[i]);
    grad_report(&s, "f64", grad_bound_f64);
}

/* The exact values at the special inputs, in both precisions. */
static void test_grad_specials(void **state)
{
    (void)state;
    /* {act, x, |act'(x)|} */
    static const struct {
        int act;
        double x, want;
    } cases[] = {
        {RELU, 0.0, 0.0},         {RELU, -0.0, 0.0},         {RELU, 1e-30, 1.0},
        {RELU, INFINITY, 1.0},    {RELU, -INFINITY, 0.0},    {TANH, 0.0, 1.0},
        {TANH, -0.0, 1.0},        {TANH, INFINITY, 0.0},     {TANH, -INFINITY, 0.0},
        {TANH, 1e30, 0.0},        {SIGMOID, 0.0, 0.25},      {SIGMOID, -0.0, 0.25},
        {SIGMOID, INFINITY, 0.0}, {SIGMOID, -INFINITY, 0.0}, {SIGMOID, -1e30, 0.0},
        {SOFTPLUS, 0.0, 0.5},     {SOFTPLUS, INFINITY, 1.0}, {SOFTPLUS, -INFINITY, 0.0},
        {SOFTPLUS, 1e30, 1.0},    {SILU, 0.0, 0.5},          {SILU, -0.0, 0.5},
        {SILU, INFINITY, 1.0},    {SILU, -INFINITY, 0.0},    {SILU, 1e30, 1.0},
        {SILU, -1e30, 0.0},       {GELU, 0.0, 0.5},          {GELU, -0.0, 0.5},
        {GELU, INFINITY, 1.0},    {GELU, -INFINITY, 0.0},    {GELU, 1e30, 1.0},
        {GELU, -1e30, 0.0},       {IDENTITY, NAN, 1.0},      {IDENTITY, INFINITY, 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int act = cases[i].act;
        const float xf = (float)cases[i].x;
        const double xd = cases[i].x;
        const double gf = act_grad_f32(act, xf, act_f32(act, xf));
        const double gd = act_grad_f64(act, xd, act_f64(act, xd));
        if (!(fabs(gf) == cases[i].want && fabs(gd) == cases[i].want))
            fail_msg("%s'(%g): f32 %g, f64 %g, expected %g", fn_name[act], xd, gf, gd,
                     cases[i].want);
    }
    /* NaN propagates, but relu's derivative, as jax.nn.relu's rule, is 0 there */
    for (int act = RELU; act < N_ACT; act++) {
        const double gf = act_grad_f32(act, NAN, act_f32(act, NAN));
        const double gd = act_grad_f64(act, NAN, act_f64(act, NAN));
        if (act == RELU ? !(gf == 0.0 && gd == 0.0) : !(isnan(gf) && isnan(gd)))
            fail_msg("%s'(NaN): f32 %g, f64 %g", fn_name[act], gf, gd);
    }
    /* subnormal inputs give the derivative at 0 */
    static const double at0[N_ACT] = {1.0, 0.0, 1.0, 0.25, 0.5, 0.5, 0.5};
    for (int act = 0; act < N_ACT; act++) {
        EXPECT_SAME(act_grad_f32(act, -0x1p-149f, act_f32(act, -0x1p-149f)), at0[act]);
        EXPECT_SAME(act_grad_f64(act, -0x1p-1074, act_f64(act, -0x1p-1074)), at0[act]);
    }
}

/* Each derivative against a central difference of the activation itself, in double: step
 * h = 2^-17 max(1, |x|) (truncation ~h^2 times the third derivative, rounding ~eps/h: both below
 * 1e-9), bound 1e-8 max(1, |act'|). relu is skipped within 2h of its kink. */
static void test_grad_central_difference(void **state)
{
    (void)state;
    for (int i = 0; i < 40000; i++) {
        const double x = i < 20000 ? -12.0 + 24.0 * uniform01() : -3.0 + 6.0 * uniform01();
        const double h = ldexp(fmax(1.0, fabs(x)), -17);
        for (int act = 0; act < N_ACT; act++) {
            if (act == RELU && fabs(x) <= 2 * h)
                continue;
            const double fd = (act_f64(act, x + h) - act_f64(act, x - h)) / (2 * h);
            const double g = act_grad_f64(act, x, act_f64(act, x));
            if (!(fabs(fd - g) <= 1e-8 * fmax(1.0, fabs(g))))
                fail_msg("%s'(%.17g) = %.17g, central difference %.17g", fn_name[act], x, g, fd);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specials_f32),
        cmocka_unit_test(test_specials_f64),
        cmocka_unit_test(test_array_matches_scalar),
        cmocka_unit_test(test_sweep_f32),
        cmocka_unit_test(test_random_f64),
        cmocka_unit_test(test_exhaustive_softplus_f32),
        cmocka_unit_test(test_softplus_tail),
        cmocka_unit_test(test_grad_specials),
        cmocka_unit_test(test_grad_sweep_f32),
        cmocka_unit_test(test_grad_random_f64),
        cmocka_unit_test(test_grad_central_difference),
    };
    return cmocka_run_group_tests_name("activation", tests, NULL, NULL);
}
