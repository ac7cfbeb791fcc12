/* test_sensitivity.c - the sensitivity baseline, the verdicts against it and the precision
 * certificate (clnode/precision.h), with the device rows solved on the device named by the first
 * argument ("host", "opencl", ...; absent: 77). The baselines always run on the host.
 *
 * Oracles: the seed problem in strict fp32 agrees with its baseline on every device (the device
 * is bit-identical to the host, or differs by rounding) and in emulated TF32 is far beyond it (the
 * seed's failure); the tanh 4 -> 32 -> 4 model with weights of standard deviation 3 and 6
 * (tests/data/models/tanh4x32.safetensors) is ill-conditioned in fp32 at rtol 1e-3 over
 * [0, 50] and not in fp64 (measured: fp32 spread 1.2, 109-220 steps; fp64 spread 3.8e-2,
 * 103-124 steps), so its device rows are not blamed; a linear ODE dy/dt = -y (a problem whose
 * controller decisions are far from every threshold) has a zero step-count spread and a
 * reference that matches exp(-t); perturbations are reproducible from the seed. */
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
#include "test_device.h"
#include "test_util.h"

#ifndef CLN_SOURCE_ROOT
#define CLN_SOURCE_ROOT "."
#endif

static const char *g_device = "host";
static clnode_context *g_ctx;

#define N_TS 11
static double g_ts[N_TS];

/* A problem saving 11 equally spaced times over [t0, t1], as clnode-compare compares (its batch
 * and y0 still to set). */
static clnode_problem set_times(const clnode_solve_options *o)
{
    for (int k = 0; k < N_TS; ++k)
        g_ts[k] = k + 1 == N_TS ? o->t1 : o->t0 + (o->t1 - o->t0) * k / (N_TS - 1);
    clnode_problem p = test_problem(0, NULL);
    p.save_ts = g_ts;
    p.n_save_ts = N_TS;
    return p;
}

/* Solves `copies` copies of y0 (batch x dim) on the device and judges every trajectory against
 * the baseline: the largest deviation, the step range, success, and the verdict. */
static void solve_and_judge(const clnode_sensitivity *b, const clnode_model *m,
                            const clnode_solve_options *o, const clnode_problem *p, size_t copies,
                            clnode_judgement *j, double *dev_out)
{
    const size_t batch = p->batch;
    const double *y0 = p->y0;
    const size_t N = clnode_model_dim(m), B = batch * copies;
    double *y = malloc(B * N * sizeof *y);
    assert_non_null(y);
    for (size_t k = 0; k < copies; ++k)
        memcpy(y + k * batch * N, y0, batch * N * sizeof *y);
    clnode_solution *sol = NULL;
    clnode_problem all = *p; /* the copies, with p's save times */
    all.batch = B;
    all.y0 = y;
    assert_ok(clnode_solve(g_ctx, m, o, &all, &sol));
    double dev = 0;
    long lo = -1, hi = -1;
    int success = 1;
    for (size_t i = 0; i < B; ++i) {
        double d;
        int complete;
        assert_ok(clnode_sensitivity_deviation(b, sol, i, i % batch, &d, &complete));
        double d_strict;
        assert_ok(clnode_sensitivity_deviation(b, sol, i, i % batch, &d_strict, NULL));
        assert_true(complete ? d_strict == d : d_strict == INFINITY);
        if (!(d <= dev))
            dev = d;
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(sol, i, &st));
        if (lo < 0 || st.num_steps < lo)
            lo = st.num_steps;
        if (st.num_steps > hi)
            hi = st.num_steps;
        success &= st.result == CLNODE_RESULT_SUCCESS;
    }
    assert_ok(clnode_sensitivity_judge(b, CLNODE_SENSITIVITY_ALL, dev, lo, hi, success, j));
    printf("  %s %s B=%zu: %ld-%ld steps, deviation %.3e: %s: %s\n",
           clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_precision), B, lo, hi, dev,
           clnode_verdict_name(j->verdict), j->text);
    if (dev_out)
        *dev_out = dev;
    clnode_solution_destroy(&sol);
    free(y);
}

static void print_baseline(const char *what, const clnode_sensitivity *b)
{
    clnode_sensitivity_stats s;
    assert_ok(clnode_sensitivity_get(b, CLNODE_SENSITIVITY_ALL, &s));
    printf("  baseline of %s: reference %ld steps; %s %ld-%ld steps, spread %.3e (tolerance "
           "%.2e)%s; fp64 %ld-%ld steps, spread %.3e%s\n",
           what, s.ref_steps_max, clnode_precision_name(s.precision), s.steps_min, s.steps_max,
           s.spread, s.tolerance, s.ill_conditioned ? " ILL-CONDITIONED" : "", s.fp64_steps_min,
           s.fp64_steps_max, s.fp64_spread, s.fp64_ill_conditioned ? " ILL-CONDITIONED" : "");
}

/* ---- the seed problem ---- */

static void test_seed(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    clnode_problem pb = set_times(&o);
    const double y0[10] = {0};
    clnode_sensitivity *b = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), NULL, &b));
    print_baseline("the seed problem", b);
    clnode_sensitivity_stats s;
    assert_ok(clnode_sensitivity_get(b, 0, &s));
    /* the reference takes diffrax's fp64 step count; fp32's 14 lies in the perturbed range;
     * perturbations of a few u change something (the spread is not zero) but far less than the
     * tolerance, in both precisions */
    assert_int_equal(s.ref_steps_min, 12);
    assert_true(s.steps_min <= 14 && 14 <= s.steps_max);
    assert_true(s.spread > 0 && s.spread < s.tolerance / 10);
    assert_true(s.has_fp64 && s.fp64_spread > 0 && s.fp64_spread < 1e-10);
    assert_false(s.ill_conditioned);
    assert_false(s.fp64_ill_conditioned);
    assert_true(s.reference_success);

    clnode_judgement j;
    /* strict fp32 on the device, batch 1 and 2: within the problem's own spread */
    o.gemm_precision = CLNODE_GEMM_STRICT;
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 1, &j, NULL);
    assert_int_equal(j.verdict, CLNODE_VERDICT_AGREES);
    assert_true(j.ratio <= 1.0);
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 2, &j, NULL);
    assert_int_equal(j.verdict, CLNODE_VERDICT_AGREES);

    /* emulated TF32, unguarded (it runs to t1 in ~149 steps): the device's arithmetic, far
     * beyond the spread; guarded, it stops at the rounding floor: beyond too */
    o.gemm_precision = CLNODE_GEMM_TF32;
    o.precision_guard = CLNODE_GUARD_OFF;
    double dev;
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 2, &j, &dev);
    assert_int_equal(j.verdict, CLNODE_VERDICT_BEYOND);
    assert_true(j.steps_beyond);
    assert_true(j.ratio > 3 && isfinite(j.ratio));
    assert_close(j.ratio, dev / s.spread, 0, 1e-12 * j.ratio);
    assert_non_null(strstr(j.text, "the device's arithmetic changes the solution"));
    o.precision_guard = CLNODE_GUARD_WARN;
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 1, &j, &dev);
    assert_int_equal(j.verdict, CLNODE_VERDICT_BEYOND);
    assert_false(j.success);
    assert_true(isfinite(j.ratio) && j.ratio > 3); /* as far as it ran (t = 42.5 of 50) */
    assert_non_null(strstr(j.text, "as far as it ran"));

    /* the fp64 rows are judged against the fp64 baseline */
    clnode_sensitivity *b64 = NULL;
    o.precision = CLNODE_FP64;
    o.gemm_precision = CLNODE_GEMM_STRICT;
    if (clnode_context_supports(g_ctx, CLNODE_FP64)) {
        assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), NULL, &b64));
        solve_and_judge(b64, m, &o, test_batch(&pb, 1, y0), 2, &j, NULL);
        assert_int_equal(j.verdict, CLNODE_VERDICT_AGREES);
    }
    clnode_sensitivity_destroy(&b64);
    clnode_sensitivity_destroy(&b);
    clnode_model_destroy(&m);
}

/* ---- an ill-conditioned problem ---- */

static void test_ill_conditioned(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_load_safetensors(
        g_ctx, CLN_SOURCE_ROOT "/tests/data/models/tanh4x32.safetensors", &m));
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.t0 = 0;
    o.t1 = 50;
    o.rtol = 1e-3;
    o.atol = 1e-6;
    o.precision_guard = CLNODE_GUARD_OFF;
    clnode_problem pb = set_times(&o);
    const double y0[4] = {0.5, -0.3, 0.2, 0.1};
    clnode_sensitivity *b = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), NULL, &b));
    print_baseline("tanh 4-32-4", b);
    clnode_sensitivity_stats s;
    assert_ok(clnode_sensitivity_get(b, CLNODE_SENSITIVITY_ALL, &s));
    /* the problem's own step count moves by tens of steps under perturbations of a few u */
    assert_true(s.ill_conditioned);
    assert_true(s.spread > s.tolerance);
    assert_true(s.steps_max - s.steps_min >= 20);
    assert_false(s.fp64_ill_conditioned);
    assert_true(s.fp64_spread < s.fp64_tolerance);

    /* the device's strict fp32 solve is not blamed: the problem is, and fp64 is recommended */
    clnode_judgement j;
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 2, &j, NULL);
    assert_int_equal(j.verdict, CLNODE_VERDICT_ILL_CONDITIONED);
    assert_non_null(strstr(j.text, "no device is blamed"));
    assert_non_null(strstr(j.text, "fp64 is not"));
    clnode_sensitivity_destroy(&b);

    /* at rtol 1e-2 the step sequence itself is fragile: fp64 does not help (measured: fp64
     * spread 1.4, 124-195 steps), a tighter rtol does */
    o.rtol = 1e-2;
    o.atol = 1e-5;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), NULL, &b));
    print_baseline("tanh 4-32-4 at rtol 1e-2", b);
    assert_ok(clnode_sensitivity_get(b, 0, &s));
    assert_true(s.ill_conditioned && s.fp64_ill_conditioned);
    solve_and_judge(b, m, &o, test_batch(&pb, 1, y0), 1, &j, NULL);
    assert_int_equal(j.verdict, CLNODE_VERDICT_ILL_CONDITIONED);
    assert_non_null(strstr(j.text, "so is fp64"));
    assert_non_null(strstr(j.text, "tighten rtol"));
    clnode_sensitivity_destroy(&b);
    clnode_model_destroy(&m);
}

/* ---- a linear problem: dy/dt = -y ---- */

static clnode_model *linear_model(void)
{
    const size_t sizes[2] = {3, 3};
    const double w[9] = {-1, 0, 0, 0, -1, 0, 0, 0, -1};
    const double *ws[1] = {w};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    return m;
}

static void test_linear(void **state)
{
    (void)state;
    clnode_model *m = linear_model();
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.t1 = 5;
    o.rtol = 1e-3; /* at 1e-5 and below, fp32's own rounding moves the count by a step or two */
    o.atol = 1e-6;
    clnode_problem pb = set_times(&o);
    const double y0[6] = {1, 2, -0.5, 0.25, -3, 1};
    clnode_sensitivity *b = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 2, y0), NULL, &b));
    print_baseline("dy/dt = -y", b);
    for (size_t i = 0; i < 2; ++i) {
        clnode_sensitivity_stats s;
        assert_ok(clnode_sensitivity_get(b, i, &s));
        assert_int_equal(s.steps_min, s.steps_max); /* zero step-count spread */
        assert_int_equal(s.fp64_steps_min, s.fp64_steps_max);
        assert_int_equal(s.fp64_steps_min, s.ref_steps_min);
        assert_false(s.ill_conditioned);
        /* the reference solves the ODE: y(t1) = exp(-t1) y0 to the solver's tolerance */
        const double *yf = clnode_solution_y_final(clnode_sensitivity_reference(b), i);
        for (size_t c = 0; c < 3; ++c)
            assert_close(yf[c], exp(-5.0) * y0[i * 3 + c], 0,
                         10 * o.rtol * exp(-5.0) * fabs(y0[i * 3 + c]));
    }
    clnode_judgement j;
    solve_and_judge(b, m, &o, test_batch(&pb, 2, y0), 3, &j, NULL);
    assert_int_equal(j.verdict, CLNODE_VERDICT_AGREES);
    assert_false(j.steps_beyond);

    /* a spread of zero (or below a few u) is floored: the ratio is finite, never inf */
    clnode_sensitivity_stats s;
    assert_ok(clnode_sensitivity_get(b, 0, &s));
    assert_true(s.floor == 4.0 * ldexp(1.0, -24));
    assert_ok(clnode_sensitivity_judge(b, 0, 1e-3, s.steps_min, s.steps_max, 1, &j));
    assert_int_equal(j.verdict, CLNODE_VERDICT_BEYOND);
    assert_close(j.ratio, 1e-3 / fmax(s.spread, s.floor), 0, 1e-12 * j.ratio);
    assert_ok(clnode_sensitivity_judge(b, 0, 0.0, s.steps_min, s.steps_max, 1, &j));
    assert_int_equal(j.verdict, CLNODE_VERDICT_AGREES);
    assert_true(j.ratio == 0.0);
    /* steps well outside the range are beyond even with no deviation */
    assert_ok(clnode_sensitivity_judge(b, 0, 0.0, s.steps_max + 3, s.steps_max + 3, 1, &j));
    assert_int_equal(j.verdict, CLNODE_VERDICT_BEYOND);
    assert_true(j.steps_beyond);
    clnode_sensitivity_destroy(&b);
    clnode_model_destroy(&m);
}

/* ---- reproducibility and argument checks ---- */

/* Per-trajectory intervals reach every perturbed copy of a trajectory and every sampled one: the
 * baseline's float64 reference of each trajectory takes the steps of that trajectory solved
 * alone in fp64 over its own interval, and a certificate of the batch is certified. */
static void test_per_trajectory_problem(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    const double y0[20] = {0}, t1s[2] = {5.0, 50.0};
    clnode_problem pb = test_problem(2, y0);
    pb.t1s = t1s;
    clnode_sensitivity *b = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, &pb, NULL, &b));
    for (size_t i = 0; i < 2; ++i) {
        clnode_solve_options a = o;
        a.precision = CLNODE_FP64;
        a.precision_guard = CLNODE_GUARD_OFF;
        a.t1 = t1s[i];
        clnode_solution *alone = NULL;
        assert_ok(clnode_solve(g_ctx, m, &a, TEST_PROBLEM(1, y0), &alone));
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(alone, 0, &st));
        clnode_sensitivity_stats s;
        assert_ok(clnode_sensitivity_get(b, i, &s));
        assert_int_equal(s.ref_steps_min, st.num_steps);
        assert_int_equal(s.ref_steps_max, st.num_steps);
        assert_true(s.reference_success && !s.ill_conditioned);
        clnode_solution_destroy(&alone);
    }
    clnode_sensitivity_destroy(&b);
    clnode_solution *sol = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, &pb, &sol));
    clnode_certify_options co;
    clnode_certify_default_options(&co);
    co.fraction = 1;
    clnode_certificate *c = NULL;
    assert_ok(clnode_certify(g_ctx, m, &o, &pb, sol, &co, &c));
    clnode_certificate_summary cs;
    assert_ok(clnode_certificate_get(c, &cs));
    assert_true(cs.certified && cs.num_sampled == 2);
    clnode_certificate_destroy(&c);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
}

/* Each trajectory its own save times (clnode_problem.save_ts_per_trajectory) reach every perturbed
 * copy and every sampled trajectory: rows that fit only their own trajectory's interval, a
 * baseline of every trajectory, and a certificate of a sample (not a prefix of the batch) that is
 * certified with every sampled trajectory reaching each of its own times. */
static void test_save_rows_problem(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
#define NB 6
#define NT 3
    double y0[NB * 10], t1s[NB], ts[NB * NT];
    for (size_t b = 0; b < NB; ++b) {
        t1s[b] = 2.0 + 3.0 * (double)b;
        for (size_t j = 0; j < NT; ++j) /* beyond the shorter intervals: only its own fits */
            ts[b * NT + j] = t1s[b] * (double)(j + 1) / NT;
    }
    for (size_t i = 0; i < NB * 10; ++i)
        y0[i] = 0.05 * (double)(i % 7) - 0.15;
    clnode_problem pb = test_problem(NB, y0);
    pb.t1s = t1s;
    pb.save_ts = ts;
    pb.n_save_ts = NT;
    pb.save_ts_per_trajectory = 1;
    clnode_sensitivity *b = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, &pb, NULL, &b));
    for (size_t i = 0; i < NB; ++i) {
        clnode_sensitivity_stats s;
        assert_ok(clnode_sensitivity_get(b, i, &s));
        assert_true(s.reference_success && !s.ill_conditioned);
    }
    clnode_sensitivity_destroy(&b);
    clnode_solution *sol = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, &pb, &sol));
    clnode_certify_options co;
    clnode_certify_default_options(&co);
    co.fraction = 0.5;
    clnode_certificate *c = NULL;
    assert_ok(clnode_certify(g_ctx, m, &o, &pb, sol, &co, &c));
    clnode_certificate_summary cs;
    assert_ok(clnode_certificate_get(c, &cs));
    assert_true(cs.certified && cs.num_sampled == NB / 2);
    int skipped = 0; /* some sampled trajectory is not at its own index of the sample */
    for (size_t k = 0; k < cs.num_sampled; ++k) {
        clnode_certificate_sample p;
        assert_ok(clnode_certificate_sample_get(c, k, &p));
        assert_true(p.complete && p.within);
        skipped |= p.traj != k;
    }
    assert_true(skipped);
    clnode_certificate_destroy(&c);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
#undef NB
#undef NT
}

static void test_reproducible(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 10;
    clnode_problem pb = set_times(&o);
    const double y0[10] = {0};
    clnode_sensitivity_options so;
    clnode_sensitivity_default_options(&so);
    assert_int_equal(so.num_perturbations, 8);
    clnode_sensitivity *a = NULL, *b = NULL, *c = NULL;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), &so, &a));
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), &so, &b));
    so.seed = 12345;
    assert_ok(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), &so, &c));
    clnode_sensitivity_stats sa, sb, sc;
    assert_ok(clnode_sensitivity_get(a, 0, &sa));
    assert_ok(clnode_sensitivity_get(b, 0, &sb));
    assert_ok(clnode_sensitivity_get(c, 0, &sc));
    assert_memory_equal(&sa, &sb, sizeof sa); /* the same seed: the same bits */
    assert_true(sa.spread != sc.spread || sa.fp64_spread != sc.fp64_spread);
    /* the perturbed states really differ from y0 = 0 (relative to atol/rtol: not subnormal) */
    const clnode_solution *ref = clnode_sensitivity_reference(a);
    assert_int_equal(clnode_solution_batch(ref), 9);
    double d;
    assert_ok(clnode_sensitivity_deviation(a, ref, 1, 0, &d, NULL));
    assert_true(d > 0);
    assert_ok(clnode_sensitivity_deviation(a, ref, 0, 0, &d, NULL));
    assert_true(d == 0.0);

    clnode_sensitivity *x = NULL;
    so.num_perturbations = 0;
    assert_int_equal(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), &so, &x),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(x);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "num_perturbations"));
    assert_int_equal(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 0, y0), NULL, &x),
                     CLNODE_ERR_INVALID_ARGUMENT);
    o.rtol = -1;
    assert_int_equal(clnode_sensitivity_baseline(g_ctx, m, &o, test_batch(&pb, 1, y0), NULL, &x),
                     CLNODE_ERR_INVALID_ARGUMENT);
    clnode_judgement j;
    assert_int_equal(clnode_sensitivity_judge(a, 1, 0, 1, 1, 1, &j), CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_sensitivity_deviation(a, ref, 9, 0, &d, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
    clnode_sensitivity_destroy(&a);
    clnode_sensitivity_destroy(&b);
    clnode_sensitivity_destroy(&c);
    clnode_sensitivity_destroy(&c); /* NULL-safe */
    clnode_sensitivity_destroy(NULL);
    clnode_model_destroy(&m);
}

/* ---- the certificate ---- */

static double *random_states(size_t B, size_t N, uint64_t seed)
{
    double *y = malloc(B * N * sizeof *y);
    assert_non_null(y);
    uint64_t s = seed;
    for (size_t i = 0; i < B * N; ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        y[i] = ((double)(s >> 11) * 0x1p-53 - 0.5); /* in [-0.5, 0.5) */
    }
    return y;
}

static void test_certificate(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 20;
    const size_t B = 300, N = 10;
    double *y0 = random_states(B, N, 7);
    clnode_certify_options co;
    clnode_certify_default_options(&co);
    assert_true(co.struct_size == sizeof co && co.fraction == 0.01 && co.min_sample == 1 &&
                co.tolerance_rtol == 1.0 && co.sensitivity == NULL);
    co.fraction = 0.02;

    /* strict: certified; 6 distinct sampled trajectories in increasing order */
    clnode_solution *sol = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(B, y0), &sol));
    clnode_certificate *c = NULL, *c2 = NULL;
    assert_ok(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B, y0), sol, &co, &c));
    clnode_certificate_summary s;
    clnode_certificate_get(c, &s);
    printf("  strict: sampled %zu of %zu, max deviation %.3g rtol (spread %.3g rtol, tolerance "
           "%.3g rtol): %s, %.3f s\n",
           s.num_sampled, s.batch, s.max_deviation_rtol, s.max_spread_rtol, s.tolerance_rtol,
           s.certified ? "certified" : "NOT certified", s.seconds);
    assert_int_equal(s.num_sampled, 6);
    assert_true(s.certified);
    assert_int_equal(s.num_failed, 0);
    assert_true(s.max_deviation_rtol <= s.tolerance_rtol);
    assert_int_equal(s.num_ill_conditioned, 0);
    size_t prev = 0;
    for (size_t k = 0; k < s.num_sampled; ++k) {
        clnode_certificate_sample p;
        assert_ok(clnode_certificate_sample_get(c, k, &p));
        assert_true(k == 0 || p.traj > prev);
        assert_true(p.traj < B && p.within);
        assert_true(p.deviation_rtol <= s.max_deviation_rtol);
        prev = p.traj;
    }
    clnode_certificate_sample p;
    assert_int_equal(clnode_certificate_sample_get(c, s.num_sampled, &p),
                     CLNODE_ERR_INVALID_ARGUMENT);
    /* the same seed samples the same trajectories */
    assert_ok(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B, y0), sol, &co, &c2));
    for (size_t k = 0; k < s.num_sampled; ++k) {
        clnode_certificate_sample p1, p2;
        assert_ok(clnode_certificate_sample_get(c, k, &p1));
        assert_ok(clnode_certificate_sample_get(c2, k, &p2));
        assert_int_equal(p1.traj, p2.traj);
        assert_true(p1.deviation_rtol == p2.deviation_rtol);
    }
    clnode_certificate_destroy(&c2);
    clnode_certificate_destroy(&c);
    clnode_solution_destroy(&sol);

    /* TF32 (unguarded): not certified, every sample beyond band and tolerance */
    o.gemm_precision = CLNODE_GEMM_TF32;
    o.precision_guard = CLNODE_GUARD_OFF;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(B, y0), &sol));
    assert_ok(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B, y0), sol, &co, &c));
    clnode_certificate_get(c, &s);
    printf("  tf32: sampled %zu, max deviation %.3g rtol (spread %.3g rtol): %s\n", s.num_sampled,
           s.max_deviation_rtol, s.max_spread_rtol, s.certified ? "certified" : "NOT certified");
    assert_false(s.certified);
    assert_true(s.num_failed >= 1);
    assert_true(s.max_deviation_rtol > s.tolerance_rtol);
    clnode_certificate_destroy(&c);

    /* a tiny fraction still samples one trajectory; bad arguments are refused */
    co.fraction = 1e-9;
    assert_ok(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B, y0), sol, &co, &c));
    clnode_certificate_get(c, &s);
    assert_int_equal(s.num_sampled, 1);
    clnode_certificate_destroy(&c);
    co.fraction = 0;
    assert_int_equal(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B, y0), sol, &co, &c),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(c);
    co.fraction = 0.5;
    assert_int_equal(clnode_certify(g_ctx, m, &o, TEST_PROBLEM(B - 1, y0), sol, &co, &c),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "not of this problem"));
    clnode_certificate_destroy(&c);
    clnode_certificate_destroy(NULL);
    clnode_solution_destroy(&sol);
    free(y0);
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "sensitivity suite", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_ill_conditioned),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_certificate),
        cmocka_unit_test(test_per_trajectory_problem),
        cmocka_unit_test(test_save_rows_problem),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
