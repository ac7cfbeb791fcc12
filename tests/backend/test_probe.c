/* test_probe.c - the GEMM precision probes, the tf32 GEMM mode and the precision guard, run on
 * the device named by the first argument ("host", "opencl", "opencl:pocl", "cuda"; absent: 77).
 *
 * Oracles: emulated GEMMs injected into the probe's measurement (fp32, fp64, TF32 with RNE and
 * truncated inputs, bf16, bf16x3, 3xTF32, fp16) must be classified as what they emulate; the
 * device's strict fp32 GEMM as fp32, its tf32 mode as TF32-like and its fp64 GEMM as fp64; the
 * seed problem (the reason the library exists) keeps its step count across batch sizes in strict
 * mode and blows up or stops at the rounding floor in tf32; the guard refuses an impossible
 * tolerance when asked to. */
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

#include "clnode.h"
#include "test_problem.h"
#include "cln_tf32.h"
#include "precision/probe_internal.h"
#include "test_device.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

/* Messages the library logged at WARN or above since the last reset, and how many warnings of
 * each code (test_warning_codes resets those). */
static char g_log[8192];
static int g_warn_codes[CLNODE_LOG_PRECISION_FLOOR + 2]; /* the last: a code not in the list */
static void capture_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    (void)user;
    if (level == CLNODE_LOG_WARN)
        ++g_warn_codes[(unsigned)code <= CLNODE_LOG_PRECISION_FLOOR
                           ? code
                           : CLNODE_LOG_PRECISION_FLOOR + 1];
    if (level > CLNODE_LOG_WARN)
        return;
    const size_t used = strlen(g_log);
    snprintf(g_log + used, sizeof g_log - used, "%s\n", msg);
}

/* ---- emulated GEMMs ---- */

typedef enum emu_kind {
    EMU_FP32,       /* sequential fmaf: IEEE fp32 */
    EMU_FP64,       /* sequential fma: IEEE fp64 */
    EMU_TF32,       /* operands through cln_tf32_round (RNE), fp32 accumulation */
    EMU_TF32_TRUNC, /* operands truncated to 10 mantissa bits (raw mma without conversion) */
    EMU_BF16,       /* operands rounded to bf16 (8-bit significand), fp32 accumulation */
    EMU_BF16X3,     /* a = hi + lo in bf16; lo hi + hi lo + hi hi, fp32 accumulation */
    EMU_TF32X3,     /* a = big + small in TF32; small big + big small + big big (CUTLASS 3xTF32) */
    EMU_FP16,       /* operands and result in fp16 (11-bit significand, range 65504), fp32 sums */
} emu_kind;

static float bits_to_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float round_bf16(float x)
{
    const uint32_t u = f_to_bits(x);
    if ((u & 0x7F800000u) == 0x7F800000u)
        return x;
    return bits_to_f((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}

static float trunc_tf32(float x)
{
    return bits_to_f(f_to_bits(x) & 0xFFFFE000u);
}

/* x rounded to nearest-even with a p-bit significand, minimum normal exponent emin and largest
 * finite value maxv (overflow to inf). */
static float round_fmt(float x, int p, int emin, double maxv)
{
    if (x == 0.0f || !isfinite(x))
        return x;
    int e;
    frexp(x, &e);
    int lead = e - 1;
    if (lead < emin)
        lead = emin;
    const double q = ldexp(1.0, lead - (p - 1));
    const double r = nearbyint((double)x / q) * q;
    if (fabs(r) > maxv)
        return x < 0 ? -INFINITY : INFINITY;
    return (float)r;
}

static float round_fp16(float x)
{
    return round_fmt(x, 11, -14, 65504.0);
}

static clnode_status emu_gemm(void *user, clnode_precision prec, size_t m, size_t n, size_t k,
                              const void *Av, const void *Bv, void *Cv)
{
    const emu_kind kind = *(const emu_kind *)user;
    if (prec == CLNODE_FP64) {
        const double *A = Av, *B = Bv;
        double *C = Cv;
        for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < n; ++j) {
                double acc = 0.0;
                for (size_t kk = 0; kk < k; ++kk)
                    acc = fma(A[i * k + kk], B[j * k + kk], acc);
                C[i * n + j] = acc;
            }
        return CLNODE_OK;
    }
    const float *A = Av, *B = Bv;
    float *C = Cv;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (size_t kk = 0; kk < k; ++kk) {
                const float a = A[i * k + kk], b = B[j * k + kk];
                switch (kind) {
                case EMU_TF32:
                    acc = fmaf(cln_tf32_round(a), cln_tf32_round(b), acc);
                    break;
                case EMU_TF32_TRUNC:
                    acc = fmaf(trunc_tf32(a), trunc_tf32(b), acc);
                    break;
                case EMU_BF16:
                    acc = fmaf(round_bf16(a), round_bf16(b), acc);
                    break;
                case EMU_BF16X3: {
                    const float ah = round_bf16(a), al = round_bf16(a - ah);
                    const float bh = round_bf16(b), bl = round_bf16(b - bh);
                    acc = fmaf(al, bh, acc);
                    acc = fmaf(ah, bl, acc);
                    acc = fmaf(ah, bh, acc);
                    break;
                }
                case EMU_TF32X3: {
                    const float ab = cln_tf32_round(a), as = cln_tf32_round(a - ab);
                    const float bb = cln_tf32_round(b), bs = cln_tf32_round(b - bb);
                    acc = fmaf(as, bb, acc);
                    acc = fmaf(ab, bs, acc);
                    acc = fmaf(ab, bb, acc);
                    break;
                }
                case EMU_FP16:
                    acc = fmaf(round_fp16(a), round_fp16(b), acc);
                    break;
                default:
                    acc = fmaf(a, b, acc);
                    break;
                }
            }
            C[i * n + j] = kind == EMU_FP16 ? round_fp16(acc) : acc;
        }
    return CLNODE_OK;
}

static void print_probe(const char *what, const clnode_probe_result *r)
{
    print_message("  %-22s identity %5ld mismatches (%4.1f bits), outer %5ld mismatches, random "
                  "%4.1f bits, range %s, subnormals %s -> %s (u = %.3g)\n",
                  what, r->identity_mismatches, r->identity_bits, r->outer_mismatches,
                  r->random_bits, r->range_ok ? "ok" : "overflows", r->denormals ? "kept" : "lost",
                  clnode_gemm_class_name(r->gemm_class), r->unit_roundoff);
}

static void test_injected(void **state)
{
    (void)state;
    static const struct {
        emu_kind kind;
        clnode_precision prec;
        const char *name;
        clnode_gemm_class want;
        double umax; /* the unit roundoff must be at most this (and more than umax / 4) */
    } cases[] = {
        {EMU_FP32, CLNODE_FP32, "fp32 (fmaf)", CLNODE_GEMM_CLASS_FP32, 0x1p-24},
        {EMU_FP64, CLNODE_FP64, "fp64 (fma)", CLNODE_GEMM_CLASS_FP64, 0x1p-53},
        {EMU_TF32, CLNODE_FP32, "tf32 (RNE inputs)", CLNODE_GEMM_CLASS_TF32, 0x1p-11},
        {EMU_TF32_TRUNC, CLNODE_FP32, "tf32 (truncated)", CLNODE_GEMM_CLASS_TF32, 0x1p-11},
        {EMU_BF16, CLNODE_FP32, "bf16", CLNODE_GEMM_CLASS_BF16, 0x1p-8},
        {EMU_BF16X3, CLNODE_FP32, "bf16x3", CLNODE_GEMM_CLASS_BF16X3, 0x1p-17},
        {EMU_TF32X3, CLNODE_FP32, "3xtf32", CLNODE_GEMM_CLASS_TF32X3, 0x1p-23},
        {EMU_FP16, CLNODE_FP32, "fp16", CLNODE_GEMM_CLASS_FP16, 0x1p-11},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        emu_kind kind = cases[i].kind;
        clnode_probe_result r;
        memset(&r, 0, sizeof r);
        assert_int_equal(cln_probe_measure(NULL, emu_gemm, &kind, cases[i].prec, &r), CLNODE_OK);
        print_probe(cases[i].name, &r);
        if (r.gemm_class != cases[i].want)
            fail_msg("%s classified as %s, expected %s", cases[i].name,
                     clnode_gemm_class_name(r.gemm_class), clnode_gemm_class_name(cases[i].want));
        assert_true(r.unit_roundoff <= cases[i].umax && r.unit_roundoff > cases[i].umax / 4);
        assert_int_equal(r.precision, cases[i].prec);
        const int full =
            cases[i].want == CLNODE_GEMM_CLASS_FP32 || cases[i].want == CLNODE_GEMM_CLASS_FP64;
        assert_int_equal(r.identity_exact, full);
        assert_int_equal(r.outer_exact, full);
        assert_int_equal(r.range_ok, kind != EMU_FP16);
        /* fp16's range ends at 2^-24: the subnormal probe underflows there */
        assert_int_equal(r.denormals, kind != EMU_FP16);
    }
}

/* The rounding function of the tf32 mode (cl/cln_tf32.h) on its edge cases. */
static void test_tf32_rounding(void **state)
{
    (void)state;
    assert_true(cln_tf32_round(1.0f) == 1.0f);
    /* 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1; 1 + 3 2^-11 rounds up to 1 + 2^-9 */
    assert_true(cln_tf32_round(1.0f + 0x1p-11f) == 1.0f);
    assert_true(cln_tf32_round(1.0f + 0x1p-10f + 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(cln_tf32_round(1.0f + 0x1p-11f + 0x1p-23f) == 1.0f + 0x1p-10f);
    assert_true(cln_tf32_round(-1.0f - 0x1p-11f - 0x1p-23f) == -1.0f - 0x1p-10f);
    /* 1.1111111 -> 1.111328125 (JAX #14157) */
    assert_true(cln_tf32_round(1.1111111f) == 1.111328125f);
    assert_true(isinf(cln_tf32_round(INFINITY)) && cln_tf32_round(-INFINITY) < 0);
    assert_true(isnan(cln_tf32_round(NAN)));
    /* rounding up past FLT_MAX overflows to inf, as a format of fp32's range must */
    assert_true(isinf(cln_tf32_round(FLT_MAX)) && cln_tf32_round(-FLT_MAX) == -INFINITY);
    assert_true(cln_tf32_round(0x1.ffcp127f) == 0x1.ffcp127f);
    /* subnormals: fp32's exponent range with TF32's 10 bits, so the quantum is 2^-136 */
    assert_true(cln_tf32_round(0x1p-130f) == 0x1p-130f);
    assert_true(cln_tf32_round(0x1p-136f + 0x1p-149f) == 0x1p-136f);
    assert_true(cln_tf32_round(0x1p-140f) == 0.0f);
    assert_true(cln_tf32_round(-0.0f) == 0.0f && signbit(cln_tf32_round(-0.0f)));
}

static int have_fp64(void)
{
    return clnode_context_supports(g_ctx, CLNODE_FP64);
}

/* The device's own GEMM in each mode: strict fp32 -> fp32, tf32 -> TF32-like, fp64 -> fp64. */
static void test_device(void **state)
{
    (void)state;
    print_message("  device %s\n", clnode_context_device(g_ctx));
    clnode_probe_result r;
    assert_ok(clnode_probe_gemm(g_ctx, CLNODE_FP32, CLNODE_GEMM_STRICT, &r));
    print_probe("fp32 strict", &r);
    assert_int_equal(r.gemm_class, CLNODE_GEMM_CLASS_FP32);
    assert_int_equal(r.gemm_mode, CLNODE_GEMM_STRICT);
    assert_true(r.identity_exact && r.outer_exact && r.range_ok);
    assert_true(r.identity_bits == 24.0 && r.random_bits >= 20.0);
    assert_true(r.unit_roundoff == 0x1p-24);

    assert_ok(clnode_probe_gemm(g_ctx, CLNODE_FP32, CLNODE_GEMM_TF32, &r));
    print_probe("fp32 tf32", &r);
    assert_int_equal(r.gemm_mode, CLNODE_GEMM_TF32);
    if (strcmp(clnode_context_backend(g_ctx), "cuda") != 0) {
        /* an emulation: exactly what RNE TF32 inputs give */
        assert_int_equal(r.gemm_class, CLNODE_GEMM_CLASS_TF32);
        assert_true(r.identity_bits >= 10.9 && r.identity_bits <= 11.1);
        assert_int_equal(r.identity_mismatches, 2 * 64 * 100);
    } else {
        /* native: TF32 tensor cores from sm_80, full fp32 before (or with
         * NVIDIA_TF32_OVERRIDE=0) */
        assert_true(r.gemm_class == CLNODE_GEMM_CLASS_TF32 ||
                    r.gemm_class == CLNODE_GEMM_CLASS_FP32);
    }
    assert_true(r.range_ok);

    if (have_fp64()) {
        assert_ok(clnode_probe_gemm(g_ctx, CLNODE_FP64, CLNODE_GEMM_STRICT, &r));
        print_probe("fp64 strict", &r);
        assert_int_equal(r.gemm_class, CLNODE_GEMM_CLASS_FP64);
        assert_true(r.identity_bits == 53.0 && r.random_bits >= 46.0);
    } else {
        assert_int_equal(clnode_probe_gemm(g_ctx, CLNODE_FP64, CLNODE_GEMM_STRICT, &r),
                         CLNODE_ERR_NO_FP64);
    }
    assert_int_equal(clnode_probe_gemm(g_ctx, CLNODE_FP64, CLNODE_GEMM_TF32, &r),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_probe_gemm(g_ctx, CLNODE_FP32, (clnode_gemm_mode)7, &r),
                     CLNODE_ERR_INVALID_ARGUMENT);

    clnode_device_facts f;
    assert_ok(clnode_device_facts_get(g_ctx, &f));
    print_message("  facts: fp64 %d, fma %d, denormals %d, correctly rounded div/sqrt %d\n", f.fp64,
                  f.fma, f.denormals, f.correctly_rounded_div_sqrt);
    assert_int_equal(f.fp64, have_fp64());
    assert_true(f.fma >= -1 && f.fma <= 1 && f.denormals >= -1 && f.denormals <= 1);
    if (strcmp(clnode_context_backend(g_ctx), "host") == 0)
        assert_true(f.denormals == 1 && f.correctly_rounded_div_sqrt == 1);
}

/* ---- the seed problem ---- */

static void seed_options(clnode_solve_options *o, clnode_gemm_mode mode)
{
    clnode_solve_seed_options(o);
    o->gemm_precision = mode;
}

/* Strict: the same step count at batch 1 and 2, success. tf32 (emulated, or native on CUDA):
 * at least 3x the steps, or trajectories stopped at the rounding floor, with a warning naming
 * the device and the GEMM mode. */
static void test_seed_tf32(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[20] = {0};
    clnode_solve_options o;
    long strict_steps = -1;
    for (size_t batch = 1; batch <= 2; ++batch) {
        seed_options(&o, CLNODE_GEMM_STRICT);
        clnode_solution *s = NULL;
        assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(batch, y0), &s));
        for (size_t b = 0; b < batch; ++b) {
            clnode_trajectory_stats st;
            assert_ok(clnode_solution_stats(s, b, &st));
            assert_int_equal(st.result, CLNODE_RESULT_SUCCESS);
            if (strict_steps < 0)
                strict_steps = st.num_steps;
            assert_int_equal(st.num_steps, strict_steps);
        }
        clnode_solution_destroy(&s);
    }
    for (size_t batch = 1; batch <= 2; ++batch) {
        for (int guard = 0; guard < 2; ++guard) {
            seed_options(&o, CLNODE_GEMM_TF32);
            o.precision_guard = guard ? CLNODE_GUARD_OFF : CLNODE_GUARD_WARN;
            g_log[0] = '\0';
            clnode_solution *s = NULL;
            assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(batch, y0), &s));
            int floor_hit = 0;
            long most = 0;
            for (size_t b = 0; b < batch; ++b) {
                clnode_trajectory_stats st;
                assert_ok(clnode_solution_stats(s, b, &st));
                print_message("  seed tf32, batch %zu, guard %s: trajectory %zu %s after %ld "
                              "steps (%ld rejected), t = %g\n",
                              batch, guard ? "off" : "warn", b, clnode_result_name(st.result),
                              st.num_steps, st.num_rejected, st.t_final);
                floor_hit |= st.result == CLNODE_RESULT_PRECISION_FLOOR;
                most = st.num_steps > most ? st.num_steps : most;
                if (guard)
                    assert_int_not_equal(st.result, CLNODE_RESULT_PRECISION_FLOOR);
            }
            assert_true(floor_hit || most >= 3 * strict_steps);
            if (!guard) {
                /* the tolerance warning before the solve, naming the device and the mode */
                assert_non_null(strstr(g_log, "tf32"));
                assert_non_null(strstr(g_log, clnode_context_device(g_ctx)));
                if (floor_hit)
                    assert_non_null(strstr(g_log, "precision_floor"));
            } else {
                assert_null(strstr(g_log, "precision_floor"));
            }
            clnode_solution_destroy(&s);
        }
    }
    print_message("  seed strict: %ld steps at batch 1 and 2\n", strict_steps);
    clnode_model_destroy(&m);
}

/* The guard before a solve: refuse asks for CLNODE_ERR_PRECISION, warn logs, off says nothing. */
static void test_guard(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[10] = {0};
    clnode_solve_options o;
    clnode_solution *s = NULL;

    seed_options(&o, CLNODE_GEMM_TF32);
    o.t1 = 1;
    o.rtol = 1e-6;
    o.precision_guard = CLNODE_GUARD_REFUSE;
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s), CLNODE_ERR_PRECISION);
    assert_null(s);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "tf32"));

    /* strict fp32 resolves rtol 1e-6 (16 u = 9.5e-7) */
    seed_options(&o, CLNODE_GEMM_STRICT);
    o.t1 = 1;
    o.rtol = 1e-6;
    o.precision_guard = CLNODE_GUARD_REFUSE;
    g_log[0] = '\0';
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s));
    clnode_solution_destroy(&s);
    assert_int_equal(g_log[0], '\0');
    /* but not 1e-7 */
    o.rtol = 1e-7;
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s), CLNODE_ERR_PRECISION);
    /* constant steps have no tolerance to guard */
    o.constant_step = 1;
    o.t1 = 0.1;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s));
    clnode_solution_destroy(&s);

    /* warn (the default): the solve runs, one warning */
    seed_options(&o, CLNODE_GEMM_STRICT);
    assert_int_equal(o.precision_guard, CLNODE_GUARD_WARN);
    o.t1 = 1;
    o.rtol = 1e-7;
    g_log[0] = '\0';
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s));
    clnode_solution_destroy(&s);
    assert_non_null(strstr(g_log, "rtol"));
    /* off: silence */
    o.precision_guard = CLNODE_GUARD_OFF;
    g_log[0] = '\0';
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s));
    clnode_solution_destroy(&s);
    assert_int_equal(g_log[0], '\0');
    /* an unknown guard value */
    o.precision_guard = (clnode_precision_guard)9;
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    clnode_model_destroy(&m);
}

/* Regression: the precision_floor warning of an fp64 strict solve advised "use GEMM mode strict,
 * fp64", what it already ran. Its advice names only what differs from the solve's arithmetic: in
 * fp32 strict, fp64 or a larger rtol; in fp64 strict, a larger rtol. The seed problem far below
 * the unit roundoff (fp32 at rtol 1e-9, fp64 at 1e-18) stops at the floor on the host. */
static void test_floor_advice(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[10] = {0};
    for (int f64 = 0; f64 < 2; ++f64) {
        if (f64 && !have_fp64())
            break;
        clnode_solve_options o;
        seed_options(&o, CLNODE_GEMM_STRICT);
        o.precision = f64 ? CLNODE_FP64 : CLNODE_FP32;
        o.rtol = o.atol = f64 ? 1e-18 : 1e-9;
        o.max_steps = 100000;
        g_log[0] = '\0';
        clnode_solution *s = NULL;
        assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s));
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, 0, &st));
        clnode_solution_destroy(&s);
        print_message("  %s strict at rtol %g: %s after %ld steps\n", f64 ? "fp64" : "fp32", o.rtol,
                      clnode_result_name(st.result), st.num_steps);
        if (strcmp(clnode_context_backend(g_ctx), "host") == 0)
            assert_int_equal(st.result, CLNODE_RESULT_PRECISION_FLOOR);
        if (st.result != CLNODE_RESULT_PRECISION_FLOOR)
            continue;
        const char *w = strstr(g_log, "precision_floor:");
        assert_non_null(w);
        assert_non_null(strstr(w, "a larger rtol (at least"));
        assert_null(strstr(w, "use GEMM mode strict"));
        if (f64)
            assert_null(strstr(w, "fp64, or"));
        else
            assert_non_null(strstr(w, "use fp64, or a larger rtol"));
    }
    clnode_model_destroy(&m);
}

/* One trajectory from y0 solved with o, the warnings counted afresh (g_warn_codes): its stats,
 * and its final state into yf (n values) unless yf is NULL. */
static clnode_trajectory_stats solve_counted(const clnode_model *m, const clnode_solve_options *o,
                                             const double *y0, double *yf, size_t n)
{
    memset(g_warn_codes, 0, sizeof g_warn_codes);
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_ctx, m, o, TEST_PROBLEM(1, y0), &s));
    clnode_trajectory_stats st;
    assert_ok(clnode_solution_stats(s, 0, &st));
    if (yf) {
        const double *y = clnode_solution_y_final(s, 0);
        assert_non_null(y);
        memcpy(yf, y, n * sizeof *yf);
    }
    clnode_solution_destroy(&s);
    return st;
}

/* The two warnings a program acts on carry their codes (clnode_log_code), whatever their wording:
 * the guard's before a solve (PRECISION_GUARD), the floor's after it (PRECISION_FLOOR); other
 * messages are GENERAL, and the guard off says nothing. The seed problem in fp32 strict at rtol
 * 1e-9 (below 16 u = 9.5e-7) is warned of and, on the host, stops at the floor. */
static void test_warning_codes(void **state)
{
    (void)state;
    assert_string_equal(clnode_log_code_name(CLNODE_LOG_GENERAL), "general");
    assert_string_equal(clnode_log_code_name(CLNODE_LOG_PRECISION_GUARD), "precision_guard");
    assert_string_equal(clnode_log_code_name(CLNODE_LOG_PRECISION_FLOOR), "precision_floor");
    assert_string_equal(clnode_log_code_name((clnode_log_code)99), "unknown");
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[10] = {0};
    clnode_solve_options o;
    seed_options(&o, CLNODE_GEMM_STRICT);
    o.rtol = o.atol = 1e-9;
    o.max_steps = 100000;
    for (int guard = 0; guard < 2; ++guard) {
        o.precision_guard = guard ? CLNODE_GUARD_OFF : CLNODE_GUARD_WARN;
        const clnode_trajectory_stats st = solve_counted(m, &o, y0, NULL, 0);
        const int floor = st.result == CLNODE_RESULT_PRECISION_FLOOR;
        if (!guard && strcmp(clnode_context_backend(g_ctx), "host") == 0)
            assert_true(floor);
        assert_int_equal(g_warn_codes[CLNODE_LOG_PRECISION_GUARD], guard ? 0 : 1);
        assert_int_equal(g_warn_codes[CLNODE_LOG_PRECISION_FLOOR], guard ? 0 : floor);
        assert_int_equal(g_warn_codes[CLNODE_LOG_GENERAL], 0);
        assert_int_equal(g_warn_codes[CLNODE_LOG_PRECISION_FLOOR + 1], 0);
    }
    clnode_model_destroy(&m);
}

/* Regression: the floor detection ended trajectories at rtol far above 16 u, where an error
 * estimate that rises while the step shrinks is truncation error: tanh4x32 (large weights) in
 * fp64 at rtol 1e-3 stopped with precision_floor at t = 8.7 after 70 steps, its warning advising
 * an rtol "of at least 1.78e-15". Above the bound the guard must leave the solve as the guard off
 * does (same steps, same bits), with no warning. */
static void test_no_floor_above_bound(void **state)
{
    (void)state;
    if (!have_fp64())
        skip();
    clnode_model *m = NULL;
    assert_ok(clnode_model_load_safetensors(
        g_ctx, CLN_SOURCE_ROOT "/tests/data/models/tanh4x32.safetensors", &m));
    const double y0[4] = {0.5, -0.3, 0.2, 0.1};
    double yf[2][4];
    long steps[2];
    for (int guard = 0; guard < 2; ++guard) {
        clnode_solve_options o;
        clnode_solve_default_options(&o);
        o.precision = CLNODE_FP64;
        o.t1 = 50;
        o.dt0 = 0.01;
        o.rtol = 1e-3;
        o.atol = 1e-6;
        o.precision_guard = guard ? CLNODE_GUARD_OFF : CLNODE_GUARD_WARN;
        const clnode_trajectory_stats st = solve_counted(m, &o, y0, yf[guard], 4);
        print_message("  tanh4x32 fp64 rtol 1e-3, guard %s: %s after %ld steps, t = %g\n",
                      guard ? "off" : "warn", clnode_result_name(st.result), st.num_steps,
                      st.t_final);
        assert_int_equal(st.result, CLNODE_RESULT_SUCCESS);
        assert_int_equal(g_warn_codes[CLNODE_LOG_PRECISION_FLOOR], 0);
        assert_int_equal(g_warn_codes[CLNODE_LOG_PRECISION_GUARD], 0);
        steps[guard] = st.num_steps;
    }
    assert_int_equal(steps[0], steps[1]);
    assert_memory_equal(yf[0], yf[1], sizeof yf[0]);
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, capture_log, "probe suite", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_injected),      cmocka_unit_test(test_tf32_rounding),
        cmocka_unit_test(test_device),        cmocka_unit_test(test_seed_tf32),
        cmocka_unit_test(test_guard),         cmocka_unit_test(test_floor_advice),
        cmocka_unit_test(test_warning_codes), cmocka_unit_test(test_no_floor_above_bound),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
