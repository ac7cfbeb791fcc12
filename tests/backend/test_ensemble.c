/* test_ensemble.c - every trajectory its own problem (clnode_solve_options t0s, t1s, dt0s and
 * conditioning inputs), on one device (argv[1], default "host"; 77 when it is absent):
 *   - a batch of trajectories with their own intervals and first steps gives, trajectory by
 *     trajectory, the same steps and the same bits as solving each alone (forwards and
 *     backwards, fp32 and fp64, adaptive and constant steps), with the shared save times clipped
 *     to each trajectory's interval;
 *   - a model with conditioning inputs c solves y' = -y + c (analytic oracle c + (y0 - c) e^-t),
 *     with and without the time input, and each trajectory equals its solve alone;
 *   - the seed problem at batch 1000, 37, 2 and 1, and a wide model on every OpenBLAS thread
 *     count (host:openblas), give each trajectory the same steps and bits;
 *   - the refusals: mixed directions, missing or unexpected inputs, non-finite inputs, a
 *     per-trajectory dt0 of the wrong sign. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>

#include <clnode.h>
#include "test_device.h"
#include "test_util.h"
#include "test_problem.h"
#include "test_solution.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

static clnode_solution *solve(const clnode_model *m, const clnode_solve_options *o,
                              const clnode_problem *p)
{
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_ctx, m, o, p, &s));
    return s;
}

/* Trajectory b of `batch` and trajectory a0 of `alone` agree, bit for bit. */
static void assert_same_row(const clnode_solution *batch, size_t b, const clnode_solution *alone,
                            size_t a0)
{
    test_assert_same_row(batch, b, alone, a0, "in the batch against alone", 1);
}

static void assert_same_trajectory(const clnode_solution *batch, size_t b,
                                   const clnode_solution *alone)
{
    assert_same_row(batch, b, alone, 0);
}

/* Solves the batch of `o` (with t0s/t1s/dt0s/inputs), then every trajectory alone with its own
 * scalars, its inputs and the save times inside its interval; asserts they agree. */
static void check_against_alone(const clnode_model *m, const clnode_solve_options *o,
                                const clnode_problem *p)
{
    const size_t batch = p->batch;
    const double *y0 = p->y0;
    const size_t N = clnode_model_dim(m), k = clnode_model_num_inputs(m);
    clnode_solution *s = solve(m, o, p);
    double *ts = malloc((p->n_save_ts ? p->n_save_ts : 1) * sizeof(double));
    assert_non_null(ts);
    for (size_t b = 0; b < batch; ++b) {
        clnode_solve_options a = *o;
        clnode_problem apb = *p;
        apb.t0s = apb.t1s = apb.dt0s = NULL;
        a.t0 = p->t0s ? p->t0s[b] : o->t0;
        a.t1 = p->t1s ? p->t1s[b] : o->t1;
        a.dt0 = p->dt0s ? p->dt0s[b] : o->dt0;
        apb.inputs = k ? p->inputs + b * k : NULL;
        const double dir = a.t1 >= a.t0 ? 1.0 : -1.0;
        size_t n = 0;
        for (size_t j = 0; j < p->n_save_ts; ++j) {
            /* inside [t0, t1] as the solve compares them: in the state precision */
            const double t = p->save_ts[j];
            const double r = o->precision == CLNODE_FP32 ? (double)(float)t : t;
            const double r0 = o->precision == CLNODE_FP32 ? (double)(float)a.t0 : a.t0;
            const double r1 = o->precision == CLNODE_FP32 ? (double)(float)a.t1 : a.t1;
            if (dir * r >= dir * r0 && dir * r <= dir * r1)
                ts[n++] = t;
        }
        apb.save_ts = n ? ts : NULL;
        apb.n_save_ts = n;
        clnode_solution *one = solve(m, &a, test_batch(&apb, 1, y0 + b * N));
        assert_same_trajectory(s, b, one);
        clnode_solution_destroy(&one);
    }
    free(ts);
    clnode_solution_destroy(&s);
}

/* ---- per-trajectory intervals ---- */

#define NB 6

/* The seed model (10 -> 100 -> 100 -> 10, softplus) over six intervals of their own, forwards,
 * with the save times of a shared list clipped to each. */
static void test_intervals_forward(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m);
    static const double t0s[NB] = {0.0, 3.0, -2.0, 1.0, 7.5, 0.0};
    static const double t1s[NB] = {50.0, 20.0, 35.0, 5.0, 7.5, 12.25};
    static const double dt0s[NB] = {0.02, 0.1, 0.05, 0.0, 0.02, 1.5};
    static const double save_ts[] = {-2.0, -1.0, 0.0, 2.5, 5.0, 7.5, 10.0, 30.0, 45.0, 50.0};
    double y0[NB * 10];
    for (size_t i = 0; i < NB * N; ++i)
        y0[i] = 0.1 * sin(1.0 + (double)i);
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_seed_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        o.rtol = p ? 1e-6 : 1e-4;
        pb.t0s = t0s;
        pb.t1s = t1s;
        pb.dt0s = dt0s;
        o.save_t0 = 1;
        o.save_steps = 1;
        o.max_steps = 512;
        pb.save_ts = save_ts;
        pb.n_save_ts = sizeof save_ts / sizeof save_ts[0];
        check_against_alone(m, &o, test_batch(&pb, NB, y0));
        /* the clipping itself: trajectory 1 ([3, 20]) saves 5, 7.5, 10 and no other */
        clnode_solution *s = solve(m, &o, test_batch(&pb, NB, y0));
        size_t n;
        const double *ts, *ys;
        assert_ok(clnode_solution_saved(s, 1, CLNODE_SAVE_TS, &n, &ts, &ys));
        assert_int_equal(n, 3);
        assert_true(ts[0] == 5.0 && ts[1] == 7.5 && ts[2] == 10.0);
        /* trajectory 4 (t0 = t1 = 7.5): no step, the time 7.5 receives y0 */
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, 4, &st));
        assert_int_equal(st.num_steps, 0);
        assert_ok(clnode_solution_saved(s, 4, CLNODE_SAVE_TS, &n, &ts, &ys));
        assert_int_equal(n, 1);
        assert_true(ts[0] == 7.5);
        for (size_t c = 0; c < N; ++c)
            assert_true(ys[c] == (p ? y0[4 * N + c] : (double)(float)y0[4 * N + c]));
        /* every trajectory of the batch took the steps of its own interval, not all the same */
        clnode_trajectory_stats s0, s3;
        assert_ok(clnode_solution_stats(s, 0, &s0));
        assert_ok(clnode_solution_stats(s, 3, &s3));
        assert_true(s0.num_steps > s3.num_steps);
        assert_true(s0.t_final == 50.0 && s3.t_final == 5.0);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&m);
}

/* Backwards: every trajectory from its t0 down to its own t1 (one with t0 = t1), the save
 * times decreasing; constant steps with per-trajectory dt0 as well. */
static void test_intervals_backward_and_constant(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m);
    static const double t0s[NB] = {10.0, 4.0, 0.0, 6.0, 3.0, 8.0};
    static const double t1s[NB] = {0.0, -6.0, -9.5, 6.0, 1.0, 2.5};
    static const double dt0s[NB] = {-0.05, -0.5, -0.02, 0.0, 0.0, -0.25};
    static const double save_ts[] = {9.0, 6.0, 4.0, 2.0, 0.0, -5.0, -9.5};
    double y0[NB * 10];
    for (size_t i = 0; i < NB * N; ++i)
        y0[i] = 0.2 * cos(0.5 + (double)i);
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_seed_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        pb.t0s = t0s;
        pb.t1s = t1s;
        pb.dt0s = dt0s;
        o.save_t0 = 1;
        o.save_steps = 1;
        o.max_steps = 512;
        pb.save_ts = save_ts;
        pb.n_save_ts = sizeof save_ts / sizeof save_ts[0];
        check_against_alone(m, &o, test_batch(&pb, NB, y0));
        clnode_solution *s = solve(m, &o, test_batch(&pb, NB, y0));
        clnode_trajectory_stats st;
        for (size_t b = 0; b < NB; ++b) {
            assert_ok(clnode_solution_stats(s, b, &st));
            assert_true(st.t_final == t1s[b]);
            assert_int_equal(st.result, CLNODE_RESULT_SUCCESS);
        }
        size_t n;
        const double *ts, *ys;
        assert_ok(clnode_solution_saved(s, 2, CLNODE_SAVE_TS, &n, &ts, &ys)); /* [0, -9.5] */
        assert_int_equal(n, 3);
        assert_true(ts[0] == 0.0 && ts[1] == -5.0 && ts[2] == -9.5);
        clnode_solution_destroy(&s);
    }
    /* constant steps of each trajectory's own dt0 (no dt0 = 0 with constant steps) */
    static const double cdt0s[NB] = {-0.5, -1.0, -0.25, -1.0, -0.5, -0.75};
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    o.constant_step = 1;
    pb.t0s = t0s;
    pb.t1s = t1s;
    pb.dt0s = cdt0s;
    o.save_steps = 1;
    check_against_alone(m, &o, test_batch(&pb, NB, y0));
    clnode_solution *s = solve(m, &o, test_batch(&pb, NB, y0));
    clnode_trajectory_stats st;
    assert_ok(clnode_solution_stats(s, 0, &st)); /* 10 -> 0 by 0.5 */
    assert_int_equal(st.num_steps, 20);
    assert_ok(clnode_solution_stats(s, 5, &st)); /* 8 -> 2.5 by 0.75: 7 steps, the last clipped */
    assert_int_equal(st.num_steps, 8);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* Only t1 per trajectory (t0 and dt0 shared), a larger batch: the per-trajectory values reach
 * every row (the opencl backend runs its kernels over several work-groups). */
static void test_t1_only_large_batch(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m), B = 37;
    double *y0 = calloc(B * N, sizeof(double));
    double *t1s = malloc(B * sizeof(double));
    assert_true(y0 && t1s);
    for (size_t b = 0; b < B; ++b)
        t1s[b] = 1.0 + 1.25 * (double)b;
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    pb.t1s = t1s;
    check_against_alone(m, &o, test_batch(&pb, B, y0));
    free(y0);
    free(t1s);
    clnode_model_destroy(&m);
}

static void test_interval_refusals(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[20] = {0};
    clnode_solution *s = NULL;
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    const double t1s[2] = {5.0, -5.0};
    pb.t1s = t1s;
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "one direction of integration"));
    assert_null(s);
    const double t1ok[2] = {5.0, 6.0}, dt0s[2] = {0.1, -0.1};
    pb.t1s = t1ok;
    pb.dt0s = dt0s;
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "wrong sign"));
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "(trajectory 1)"));
    const double t0bad[2] = {0.0, NAN};
    pb.dt0s = NULL;
    pb.t0s = t0bad;
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "must be finite (trajectory 1)"));
    /* save times not monotone in the shared direction */
    const double ts[2] = {3.0, 1.0};
    pb.t0s = NULL;
    pb.save_ts = ts;
    pb.n_save_ts = 2;
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "monotone"));
    clnode_model_destroy(&m);
}

/* ---- conditioning inputs ---- */

/* y' = -y + c in n components with n conditioning inputs: one linear layer [-I | I] on
 * [y, c], or [-I | 0 | I] on [y, t, c] with the time input. */
static clnode_model *decay_to_c(size_t n, int time_input)
{
    const size_t in = 2 * n + (time_input ? 1 : 0);
    double *W = calloc(n * in, sizeof(double));
    assert_non_null(W);
    for (size_t i = 0; i < n; ++i) {
        W[i * in + i] = -1.0;
        W[i * in + in - n + i] = 1.0;
    }
    size_t sizes[2] = {in, n};
    const double *ws[1] = {W};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    d.time_input = time_input;
    d.num_inputs = n;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    free(W);
    assert_int_equal(clnode_model_num_inputs(m), n);
    return m;
}

static void test_inputs_oracle_and_alone(void **state)
{
    (void)state;
    enum {
        B = 5,
        N = 3
    };
    static const double t1s[B] = {1.0, 2.0, 0.5, 3.0, 1.5};
    double y0[B * N], c[B * N];
    for (size_t i = 0; i < B * N; ++i) {
        y0[i] = 0.5 * sin((double)i);
        c[i] = 2.0 * cos(0.3 * (double)i) - 0.5;
    }
    for (int ti = 0; ti < 2; ++ti) {
        clnode_model *m = decay_to_c(N, ti);
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        o.precision = CLNODE_FP64;
        o.rtol = 1e-10;
        o.atol = 1e-12;
        pb.t1s = t1s;
        pb.inputs = c;
        o.save_steps = 1;
        clnode_solution *s = solve(m, &o, test_batch(&pb, B, y0));
        for (size_t b = 0; b < B; ++b) {
            const double *y = clnode_solution_y_final(s, b);
            for (size_t n = 0; n < N; ++n) {
                const double cc = c[b * N + n];
                const double want = cc + (y0[b * N + n] - cc) * exp(-t1s[b]);
                if (fabs(y[n] - want) > 1e-8)
                    fail_msg("trajectory %zu component %zu: %.17g, expected %.17g", b, n, y[n],
                             want);
            }
        }
        clnode_solution_destroy(&s);
        check_against_alone(m, &o, test_batch(&pb, B, y0));
        o.precision = CLNODE_FP32;
        o.rtol = 1e-5;
        o.atol = 1e-7;
        check_against_alone(m, &o, test_batch(&pb, B, y0));
        clnode_model_destroy(&m);
    }
}

/* A model with inputs and the seed's nonlinearity: 4 -> 32 -> 2 tanh on [y, t, c], c of 2; each
 * trajectory of a batch equals its solve alone (and the inputs matter). */
/* 5 -> 32 -> 2, tanh, on [y, t, c] with c of 2 inputs, fixed pseudo-random weights. */
static clnode_model *conditioned_mlp(clnode_context *ctx)
{
    enum {
        N = 2,
        K = 2,
        H = 32,
        IN = N + 1 + K
    };
    double W0[H * IN], b0[H], W1[N * H];
    uint32_t x = 12345u;
    for (size_t i = 0; i < H * IN; ++i) {
        W0[i] = 0.6 * test_lcg(&x);
    }
    for (size_t i = 0; i < H; ++i)
        b0[i] = 0.05 * (double)i - 0.8;
    for (size_t i = 0; i < N * H; ++i) {
        W1[i] = 0.3 * test_lcg(&x);
    }
    size_t sizes[3] = {IN, H, N};
    const double *ws[2] = {W0, W1};
    const double *bs[2] = {b0, NULL};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.time_input = 1;
    d.num_inputs = K;
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(ctx, &d, &m), CLNODE_OK);
    return m;
}

static void test_inputs_nonlinear(void **state)
{
    (void)state;
    enum {
        N = 2,
        K = 2,
        B = 9
    };
    clnode_model *m = conditioned_mlp(g_ctx);
    double y0[B * N], c[B * K], t1s[B], t0s[B];
    for (size_t b = 0; b < B; ++b) {
        y0[b * N] = 0.3;
        y0[b * N + 1] = -0.2;
        c[b * K] = 0.25 * (double)b - 1.0;
        c[b * K + 1] = b % 2 ? 0.5 : -0.5;
        t0s[b] = 0.1 * (double)b;
        t1s[b] = 4.0 + 0.5 * (double)b;
    }
    static const double save_ts[] = {0.5, 1.0, 2.0, 4.0, 6.0};
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        o.rtol = p ? 1e-7 : 1e-4;
        pb.inputs = c;
        pb.t0s = t0s;
        pb.t1s = t1s;
        pb.save_ts = save_ts;
        pb.n_save_ts = 5;
        o.save_steps = 1;
        check_against_alone(m, &o, test_batch(&pb, B, y0));
        /* the inputs matter: the same y0 and interval, other inputs, another final state */
        clnode_solve_options a = o;
        clnode_problem apb = pb;
        apb.t0s = apb.t1s = NULL;
        a.t0 = 0.0;
        a.t1 = 4.0;
        apb.save_ts = NULL;
        apb.n_save_ts = 0;
        apb.inputs = c;
        clnode_solution *s1 = solve(m, &a, test_batch(&apb, 1, y0));
        apb.inputs = c + K;
        clnode_solution *s2 = solve(m, &a, test_batch(&apb, 1, y0));
        assert_true(clnode_solution_y_final(s1, 0)[0] != clnode_solution_y_final(s2, 0)[0]);
        clnode_solution_destroy(&s1);
        clnode_solution_destroy(&s2);
    }
    clnode_model_destroy(&m);
}

static void test_inputs_refusals(void **state)
{
    (void)state;
    clnode_model *m = decay_to_c(2, 0);
    double y0[4] = {0}, c[4] = {1, 2, 3, 4};
    clnode_solution *s = NULL;
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_default_options(&o);
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx),
                           "the model takes 2 conditioning inputs: pass them"));
    assert_null(s);
    c[3] = INFINITY;
    pb.inputs = c;
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 2, y0), &s),
                     CLNODE_ERR_NONFINITE_INPUT);
    assert_non_null(
        strstr(clnode_context_last_error(g_ctx), "conditioning input 1 of trajectory 1 is inf"));
    clnode_model_destroy(&m);
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    c[3] = 4.0;
    double y10[10] = {0};
    assert_int_equal(clnode_solve(g_ctx, m, &o, test_batch(&pb, 1, y10), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "the model takes none"));
    clnode_model_destroy(&m);
    /* the model-from-arrays API: the first layer's width must make room for the inputs */
    size_t sizes[2] = {3, 2};
    const double W[6] = {0};
    const double *ws[1] = {W};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    d.num_inputs = 2;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(
        strstr(clnode_context_last_error(g_ctx), "needs 4 inputs (state, 2 conditioning inputs)"));
    d.num_inputs = 1;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    clnode_model_destroy(&m);
}

/* The seed problem at batch 1000, 37, 2 and 1: every trajectory has the same steps and bits
 * whatever the batch and its row in it. The subsets sit at other rows modulo 16 than in the
 * large batch (host:openblas calls OpenBLAS on blocks of 16 rows; a row's place in a block once
 * changed its bits), in fp32 and fp64. */
static void test_batch_sizes_same_bits(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m), B = 1000;
    double *y0 = malloc(B * N * sizeof(double));
    assert_non_null(y0);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.5 * sin(0.37 * (double)i + 1.0);
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_solve_seed_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        clnode_solution *big = solve(m, &o, TEST_PROBLEM(B, y0));
        static const size_t first37 = 500; /* 500 % 16 = 4: rows 4.. of its block */
        clnode_solution *s37 = solve(m, &o, TEST_PROBLEM(37, y0 + first37 * N));
        for (size_t b = 0; b < 37; ++b)
            assert_same_row(big, first37 + b, s37, b);
        clnode_solution_destroy(&s37);
        clnode_solution *s2 =
            solve(m, &o, TEST_PROBLEM(2, y0 + 998 * N)); /* rows 6 and 7 of their block */
        assert_same_row(big, 998, s2, 0);
        assert_same_row(big, 999, s2, 1);
        clnode_solution_destroy(&s2);
        static const size_t ones[] = {0, 5, 6, 11, 12, 15, 517, 999};
        for (size_t i = 0; i < sizeof ones / sizeof ones[0]; ++i) {
            clnode_solution *s1 = solve(m, &o, TEST_PROBLEM(1, y0 + ones[i] * N));
            assert_same_row(big, ones[i], s1, 0);
            clnode_solution_destroy(&s1);
        }
        clnode_solution_destroy(&big);
    }
    free(y0);
    clnode_model_destroy(&m);
}

/* A wide model (4 -> 300 -> 300 -> 4, tanh): products large enough for OpenBLAS to share
 * between its threads. Each trajectory of a batch of 37 equals its solve alone, and on
 * host:openblas the bits do not depend on OpenBLAS's thread count (1 or 4). */
static void test_wide_model_batch(void **state)
{
    (void)state;
    enum {
        W = 300
    };
    static const size_t sizes[4] = {4, W, W, 4};
    double *w[3];
    for (size_t l = 0; l < 3; ++l) {
        const size_t n = sizes[l] * sizes[l + 1];
        w[l] = malloc(n * sizeof(double));
        assert_non_null(w[l]);
        for (size_t i = 0; i < n; ++i)
            w[l][i] = sin(1.3 * (double)i + (double)l) / sqrt((double)sizes[l]);
    }
    clnode_model_desc d = test_mlp_desc(3, sizes, (const double *const *)w, NULL);
    d.activation = CLNODE_ACT_TANH;
    d.final_activation = CLNODE_ACT_IDENTITY;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    const size_t N = 4, B = 37;
    double y0[37 * 4];
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.5 * sin(0.37 * (double)i + 1.0);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 2.0;
    check_against_alone(m, &o, TEST_PROBLEM(B, y0));
    if (strcmp(g_device, "host:openblas") == 0) {
        const int threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
        clnode_solution *one = solve(m, &o, TEST_PROBLEM(B, y0));
        openblas_set_num_threads(4);
        clnode_solution *four = solve(m, &o, TEST_PROBLEM(B, y0));
        openblas_set_num_threads(threads);
        for (size_t b = 0; b < B; ++b)
            assert_same_row(four, b, one, b);
        clnode_solution_destroy(&one);
        clnode_solution_destroy(&four);
    }
    clnode_model_destroy(&m);
    for (size_t l = 0; l < 3; ++l)
        free(w[l]);
}

/* On a device other than the host: the per-trajectory problems of the tests above give the
 * host's steps and bits (the promise of the conformance suite, for ensembles). */
static void test_same_bits_as_host(void **state)
{
    (void)state;
    if (strncmp(g_device, "host", 4) == 0)
        skip();
    clnode_context *host = NULL;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    assert_int_equal(clnode_context_create(&co, &host), CLNODE_OK);
    clnode_model *m = NULL, *mh = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    assert_int_equal(clnode_model_create_seed(host, &mh), CLNODE_OK);
    const size_t N = clnode_model_dim(m);
    static const double t0s[NB] = {0.0, 3.0, -2.0, 1.0, 7.5, 0.0};
    static const double t1s[NB] = {50.0, 20.0, 35.0, 5.0, 7.5, 12.25};
    static const double dt0s[NB] = {0.02, 0.1, 0.05, 0.0, 0.02, 1.5};
    static const double save_ts[] = {-2.0, 0.0, 2.5, 10.0, 45.0};
    double y0[NB * 10];
    for (size_t i = 0; i < NB * N; ++i)
        y0[i] = 0.1 * sin(1.0 + (double)i);
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_seed_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        pb.t0s = t0s;
        pb.t1s = t1s;
        pb.dt0s = dt0s;
        o.save_steps = 1;
        o.max_steps = 512;
        pb.save_ts = save_ts;
        pb.n_save_ts = 5;
        clnode_solution *s = solve(m, &o, test_batch(&pb, NB, y0)), *sh = NULL;
        assert_int_equal(clnode_solve(host, mh, &o, test_batch(&pb, NB, y0), &sh), CLNODE_OK);
        for (size_t b = 0; b < NB; ++b)
            assert_same_row(s, b, sh, b);
        clnode_solution_destroy(&s);
        clnode_solution_destroy(&sh);
    }
    clnode_model_destroy(&m);
    clnode_model_destroy(&mh);
    /* conditioning inputs with the time input, per-trajectory intervals */
    m = conditioned_mlp(g_ctx);
    mh = conditioned_mlp(host);
    enum {
        B2 = 7
    };
    double y2[B2 * 2], c[B2 * 2], t1c[B2];
    for (size_t b = 0; b < B2; ++b) {
        y2[2 * b] = 0.1 * (double)b;
        y2[2 * b + 1] = -0.3;
        c[2 * b] = 0.3 * (double)b - 1.0;
        c[2 * b + 1] = b % 3 ? 0.25 : -0.75;
        t1c[b] = 2.0 + (double)b;
    }
    for (int p = 0; p < 2; ++p) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        o.rtol = p ? 1e-7 : 1e-4;
        pb.t1s = t1c;
        pb.inputs = c;
        o.save_steps = 1;
        clnode_solution *s = solve(m, &o, test_batch(&pb, B2, y2)), *sh = NULL;
        assert_int_equal(clnode_solve(host, mh, &o, test_batch(&pb, B2, y2), &sh), CLNODE_OK);
        for (size_t b = 0; b < B2; ++b)
            assert_same_row(s, b, sh, b);
        clnode_solution_destroy(&s);
        clnode_solution_destroy(&sh);
    }
    clnode_model_destroy(&m);
    clnode_model_destroy(&mh);
    clnode_context_destroy(&host);
}

static int setup(void **state)
{
    (void)state;
    return 0;
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "ensembles", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intervals_forward),
        cmocka_unit_test(test_intervals_backward_and_constant),
        cmocka_unit_test(test_t1_only_large_batch),
        cmocka_unit_test(test_batch_sizes_same_bits),
        cmocka_unit_test(test_wide_model_batch),
        cmocka_unit_test(test_interval_refusals),
        cmocka_unit_test(test_inputs_oracle_and_alone),
        cmocka_unit_test(test_inputs_nonlinear),
        cmocka_unit_test(test_inputs_refusals),
        cmocka_unit_test(test_same_bits_as_host),
    };
    const int failed = cmocka_run_group_tests(tests, setup, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
