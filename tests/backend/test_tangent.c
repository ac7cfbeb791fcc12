/* test_tangent.c - forward mode (clnode/tangent.h) on the host against oracles that need no
 * other software:
 *   - the adjoint identity <cot, J v> = <J^T cot, v> against clnode's own reverse pass
 *     (clnode_gradient_compute) on random directions of y0, the conditioning inputs and every
 *     parameter (the output scale included), for every method, with the values saved at t0, at
 *     SaveAt ts (the dense output), at the steps and at t1, adaptive and constant steps, forwards
 *     and backwards in time, checkpoint_every 1 and 3, each trajectory its own t1 (one of no
 *     step), stopped at max_steps: to 1e-13 relative in fp64 (relative to the sum of the
 *     magnitudes of the inner product's terms), 1e-6 in fp32; and for a one-layer model without
 *     bias, inputs or scale along parameter directions alone, in fp64 and in tf32 (1e-2);
 *   - central finite differences of whole constant-step solves (their steps do not move with the
 *     parameters) along a random direction, for six methods (every dense-output form), every
 *     hidden activation but relu, forwards and backwards in time;
 *   - the bits: a trajectory's tangents alone and in a batch of 300 (adaptive, fp32 and fp64),
 *     every direction alone against all together and against chunks of two (max_bytes), 1, 2 and
 *     4 threads, checkpoint_every 1 and 8; a solution kept on opencl:pocl against a host solve's;
 *   - the solve's own results: the same bits after the tangent pass, and the same as a solve that
 *     kept no tape;
 *   - the errors: no tape, another model, too few slots, NaN and infinite directions named, an
 *     fp32 overflow, NULL arguments, ndir 0, max_bytes below one direction, a cancel, the
 *     devices without a tangent pass.
 * argv[1] is the device (meson passes "host"). */
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

#include "test_device.h"
#include "test_expect.h"
#include "test_problem.h"
#include "test_util.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

/* ------------------------------------------------------------------------ the model */

/* An MLP [y, t, c] -> H -> N with biases and a per-component output scale, every parameter in one
 * array in clnode_gradient_params' order (W0, b0, W1, b1, scale). */
enum {
    TN = 3,
    TK = 2,
    TH = 7,
    TIN = TN + 1 + TK,
    TW0 = TH * TIN,
    TW1 = TN * TH,
    TP = TW0 + TH + TW1 + TN + TN,
    TB = 300,
    TD = 3,
    TTS = 3,
};

typedef struct {
    double theta[TP], y0[TB * TN], inputs[TB * TK];
    double dy0[TD * TB * TN], dinputs[TD * TB * TK], dparams[TD * TP];
} tan_data;

static tan_data g_data;

static void data_init(void)
{
    uint32_t x = 4049u;
    for (size_t i = 0; i < TP; ++i)
        g_data.theta[i] = 0.5 * test_lcg(&x);
    for (size_t i = TP - TN; i < TP; ++i)
        g_data.theta[i] = 0.8 + 0.2 * test_lcg(&x); /* the scale */
    for (size_t i = 0; i < TB * TN; ++i)
        g_data.y0[i] = test_lcg(&x);
    for (size_t i = 0; i < TB * TK; ++i)
        g_data.inputs[i] = 0.5 * test_lcg(&x);
    for (size_t i = 0; i < TD * TB * TN; ++i)
        g_data.dy0[i] = test_lcg(&x);
    for (size_t i = 0; i < TD * TB * TK; ++i)
        g_data.dinputs[i] = test_lcg(&x);
    for (size_t i = 0; i < TD * TP; ++i)
        g_data.dparams[i] = test_lcg(&x);
}

static clnode_model *tan_model(clnode_context *ctx, const double *theta, clnode_activation act)
{
    size_t sizes[3] = {TIN, TH, TN};
    const double *ws[2] = {theta, theta + TW0 + TH}, *bs[2] = {theta + TW0, theta + TW0 + TH + TW1};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = act;
    d.time_input = 1;
    d.num_inputs = TK;
    d.out_scale = theta + TP - TN;
    d.out_scale_size = TN;
    clnode_model *m = NULL;
    if (clnode_model_create(ctx, &d, &m) != CLNODE_OK)
        fail_msg("model: %s", clnode_context_last_error(ctx));
    return m;
}

/* ------------------------------------------------------------------------ the cases */

/* What a solve saves and how it steps. */
typedef struct {
    const char *method;
    clnode_activation act;
    int constant, backward, ts, steps, t0, every;
    clnode_precision prec;
    int odd; /* 1: each trajectory its own t1, one of them t0 (no step); 2: max_steps 2 */
} tan_case;

/* The end times of the odd case 1: a trajectory of no step between two others. */
static const double odd_t1s[3] = {1.0, 0.0, 0.6};

static const double ts_fwd[TTS] = {0.21, 0.5, 0.93};
static const double ts_bwd[TTS] = {0.93, 0.5, 0.21};

static clnode_solve_options case_opts(const tan_case *c)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.method = clnode_method_by_name(c->method);
    o.precision = c->prec;
    o.t0 = c->backward ? 1.0 : 0.0;
    o.t1 = c->backward ? 0.0 : 1.0;
    o.constant_step = c->constant;
    o.dt0 = (c->backward ? -1 : 1) * (c->constant ? 0.125 : 0.05);
    o.rtol = c->prec == CLNODE_FP64 ? 1e-6 : 1e-4;
    o.atol = c->prec == CLNODE_FP64 ? 1e-8 : 1e-6;
    o.save_t0 = c->t0;
    o.save_steps = c->steps;
    o.save_t1 = 1;
    o.keep_tape = 1;
    o.checkpoint_every = c->every ? c->every : 1;
    if (c->odd == 2)
        o.max_steps = 2;
    return o;
}

static clnode_problem case_problem(const tan_case *c, size_t first, size_t B)
{
    clnode_problem p = test_problem(B, g_data.y0 + first * TN);
    p.inputs = g_data.inputs + first * TK;
    if (c->odd == 1 && first == 0 && B == 3)
        p.t1s = odd_t1s;
    if (c->ts) {
        p.save_ts = c->backward ? ts_bwd : ts_fwd;
        p.n_save_ts = TTS;
    }
    return p;
}

static clnode_tangent *tan_or_fail(clnode_context *ctx, const clnode_model *m,
                                   const clnode_tangent_options *o, const clnode_solution *s,
                                   size_t slots, size_t ndir, const double *dy0,
                                   const double *dinputs, const double *dparams)
{
    clnode_tangent *t = NULL;
    clnode_status st = clnode_tangent_compute(ctx, m, o, s, slots, ndir, dy0, dinputs, dparams, &t);
    if (st != CLNODE_OK)
        fail_msg("clnode_tangent_compute: %s: %s", clnode_status_name(st),
                 clnode_context_last_error(ctx));
    assert_non_null(t);
    assert_int_equal(clnode_tangent_directions(t), ndir);
    return t;
}

/* The directions of trajectories [first, first + B) of the data, direction-major: dy0 and
 * dinputs ndir x B rows (of the data's TB), dparams as they are. */
static void case_dirs(size_t first, size_t B, size_t ndir, double *dy0, double *dinputs)
{
    for (size_t d = 0; d < ndir; ++d) {
        memcpy(dy0 + d * B * TN, g_data.dy0 + (d * TB + first) * TN, B * TN * sizeof *dy0);
        memcpy(dinputs + d * B * TK, g_data.dinputs + (d * TB + first) * TK,
               B * TK * sizeof *dinputs);
    }
}

/* The tangents of trajectories [first, first + B) of case c on ctx (ndir directions), with
 * their slots in *slots; the solve in *sol when sol is not NULL. */
static clnode_tangent *case_tangent(clnode_context *ctx, const tan_case *c,
                                    const clnode_tangent_options *to, size_t first, size_t B,
                                    size_t ndir, size_t *slots, clnode_solution **sol)
{
    clnode_model *m = tan_model(ctx, g_data.theta, c->act);
    clnode_solve_options o = case_opts(c);
    clnode_problem p = case_problem(c, first, B);
    clnode_solution *s = test_solve_or_fail(ctx, m, &o, &p);
    assert_ok(clnode_save_slots(ctx, &o, &p, slots));
    double *dy0 = malloc(ndir * B * TN * sizeof *dy0);
    double *dc = malloc(ndir * B * TK * sizeof *dc);
    assert_non_null(dy0);
    assert_non_null(dc);
    case_dirs(first, B, ndir, dy0, dc);
    clnode_tangent *t = tan_or_fail(ctx, m, to, s, *slots, ndir, dy0, dc, g_data.dparams);
    free(dy0);
    free(dc);
    if (sol)
        *sol = s;
    else
        clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    return t;
}

/* ------------------------------------------------------------------------ the adjoint identity */

enum {
    AB = 3
};

/* <cot, J v_d> against <J^T cot, v_d> for each direction d of case c, B = AB trajectories.
 * Returns the worst relative difference (over the sum of |terms| of the left side). */
static double adjoint_case(const tan_case *c)
{
    clnode_model *m = tan_model(g_ctx, g_data.theta, c->act);
    clnode_solve_options o = case_opts(c);
    clnode_problem p = case_problem(c, 0, AB);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    size_t slots = 0;
    assert_ok(clnode_save_slots(g_ctx, &o, &p, &slots));
    clnode_trajectory_stats st;
    assert_ok(clnode_solution_stats(s, 1, &st));
    if (c->odd == 1 && st.num_accepted != 0)
        fail_msg("trajectory 1 took %ld steps from t0 to t1 = t0", st.num_accepted);
    if (c->odd == 2 && st.result != CLNODE_RESULT_MAX_STEPS_REACHED)
        fail_msg("trajectory 1 did not stop at max_steps: %s", clnode_result_name(st.result));
    if (c->steps) /* the steps' capacity: what the solution holds */
        for (size_t b = 0; b < AB; ++b)
            slots = clnode_solution_points(s, b) > slots ? clnode_solution_points(s, b) : slots;
    const size_t nv = AB * slots * TN;
    double *cot = calloc(nv, sizeof *cot);
    assert_non_null(cot);
    uint32_t x = 99u;
    for (size_t b = 0; b < AB; ++b)
        for (size_t i = 0; i < clnode_solution_points(s, b) * TN; ++i)
            cot[b * slots * TN + i] = test_lcg(&x);
    double dy0[TD * AB * TN], dc[TD * AB * TK];
    case_dirs(0, AB, TD, dy0, dc);
    clnode_tangent *t = tan_or_fail(g_ctx, m, NULL, s, slots, TD, dy0, dc, g_data.dparams);
    clnode_gradient *g = NULL;
    assert_ok(clnode_gradient_compute(g_ctx, m, NULL, s, slots, cot, &g));
    const double *tv = clnode_tangent_values(t), *gp = clnode_gradient_params(g, NULL);
    double worst = 0;
    for (size_t d = 0; d < TD; ++d) {
        long double lhs = 0, mag = 0, rhs = 0;
        for (size_t i = 0; i < nv; ++i) {
            lhs += (long double)cot[i] * tv[d * nv + i];
            mag += fabsl((long double)cot[i] * tv[d * nv + i]);
        }
        for (size_t i = 0; i < AB * TN; ++i)
            rhs += (long double)clnode_gradient_y0(g)[i] * dy0[d * AB * TN + i];
        for (size_t i = 0; i < AB * TK; ++i)
            rhs += (long double)clnode_gradient_inputs(g)[i] * dc[d * AB * TK + i];
        for (size_t i = 0; i < TP; ++i)
            rhs += (long double)gp[i] * g_data.dparams[d * TP + i];
        const double rel = (double)(fabsl(lhs - rhs) / mag);
        const double bound = c->prec == CLNODE_FP64 ? 1e-13 : 1e-6;
        if (!(rel <= bound))
            fail_msg("%s %s%s%s%s%s fp%d direction %zu: <cot, J v> = %.17Lg, <J^T cot, v> = "
                     "%.17Lg, relative %.3g > %.0e",
                     c->method, clnode_activation_name(c->act), c->constant ? " constant" : "",
                     c->backward ? " backward" : "", c->ts ? " ts" : "", c->steps ? " steps" : "",
                     (int)c->prec, d, lhs, rhs, rel, bound);
        worst = fmax(worst, rel);
    }
    free(cot);
    clnode_gradient_destroy(&g);
    clnode_tangent_destroy(&t);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    return worst;
}

static void test_adjoint(void **state)
{
    (void)state;
    static const clnode_activation acts[] = {CLNODE_ACT_TANH, CLNODE_ACT_SOFTPLUS, CLNODE_ACT_SILU,
                                             CLNODE_ACT_GELU, CLNODE_ACT_SIGMOID,  CLNODE_ACT_RELU};
    size_t k = 0;
    for (size_t i = 0; clnode_method_at(i); ++i) {
        const clnode_method *meth = clnode_method_at(i);
        const int adaptive = strcmp(meth->name, "euler") != 0;
        /* {constant, backward, ts, steps, t0, every} */
        static const int shapes[][6] = {{0, 0, 1, 0, 1, 1},
                                        {0, 0, 0, 1, 0, 3},
                                        {1, 0, 1, 1, 1, 1},
                                        {0, 1, 1, 0, 0, 1},
                                        {1, 1, 1, 1, 1, 3}};
        for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; ++q)
            for (int f = 0; f < 2; ++f) {
                if (!adaptive && !shapes[q][0])
                    continue;
                tan_case c = {meth->name,
                              acts[k++ % 6],
                              shapes[q][0],
                              shapes[q][1],
                              shapes[q][2],
                              shapes[q][3],
                              shapes[q][4],
                              shapes[q][5],
                              f ? CLNODE_FP32 : CLNODE_FP64,
                              0};
                const double w = adjoint_case(&c);
                printf("adjoint %-6s %-8s fp%d %s%s%s%s%s every %d: relative %.2e\n", c.method,
                       clnode_activation_name(c.act), (int)c.prec,
                       c.constant ? "constant" : "adaptive", c.backward ? " backward" : "",
                       c.ts ? " ts" : "", c.steps ? " steps" : "", c.t0 ? " t0" : "", c.every, w);
            }
    }
    /* Each trajectory its own t1, one of no step (saved at t0, the steps and t1); stopped at
     * max_steps (saved at ts and t1: the points it reached). */
    for (int odd = 1; odd <= 2; ++odd)
        for (int f = 0; f < 2; ++f) {
            const tan_case c = {"tsit5",
                                CLNODE_ACT_TANH,
                                0,
                                0,
                                odd == 2,
                                odd == 1,
                                odd == 1,
                                1,
                                f ? CLNODE_FP32 : CLNODE_FP64,
                                odd};
            printf("adjoint tsit5 fp%d %s: relative %.2e\n", (int)c.prec,
                   odd == 1 ? "own t1 each, one of no step" : "stopped at max_steps 2",
                   adjoint_case(&c));
        }
}

/* A model of one layer without bias, time input, conditioning inputs or scale (the stage argument
 * is the state alone), directions of the parameters alone (dy0 and dinputs NULL), and the same
 * model's tf32 solve (fp32, the products' inputs rounded to TF32): the adjoint identity, within
 * 1e-13 in fp64 and, in tf32, within 1e-2 (both passes round their products' inputs to TF32, each
 * its own). */
static void test_adjoint_plain(void **state)
{
    (void)state;
    size_t sizes[2] = {TN, TN};
    const double *ws[1] = {g_data.theta};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    d.activation = CLNODE_ACT_TANH;
    d.final_activation = CLNODE_ACT_TANH;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    for (int tf32 = 0; tf32 < 2; ++tf32) {
        clnode_solve_options o;
        clnode_solve_default_options(&o);
        o.precision = tf32 ? CLNODE_FP32 : CLNODE_FP64;
        o.gemm_precision = tf32 ? CLNODE_GEMM_TF32 : CLNODE_GEMM_STRICT;
        o.rtol = tf32 ? 1e-3 : 1e-7;
        o.atol = tf32 ? 1e-5 : 1e-9;
        o.keep_tape = 1;
        clnode_problem p = test_problem(AB, g_data.y0);
        clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
        double cot[AB * TN];
        uint32_t x = 5u;
        for (size_t i = 0; i < AB * TN; ++i)
            cot[i] = test_lcg(&x);
        clnode_tangent *t = tan_or_fail(g_ctx, m, NULL, s, 1, 2, NULL, NULL, g_data.dparams);
        clnode_gradient *g = NULL;
        assert_ok(clnode_gradient_compute(g_ctx, m, NULL, s, 1, cot, &g));
        size_t np = 0;
        const double *gp = clnode_gradient_params(g, &np);
        assert_int_equal(np, TN * TN);
        for (size_t dir = 0; dir < 2; ++dir) {
            long double lhs = 0, mag = 0, rhs = 0;
            for (size_t i = 0; i < AB * TN; ++i) {
                lhs += (long double)cot[i] * clnode_tangent_values(t)[dir * AB * TN + i];
                mag += fabsl((long double)cot[i] * clnode_tangent_values(t)[dir * AB * TN + i]);
            }
            for (size_t i = 0; i < np; ++i)
                rhs += (long double)gp[i] * g_data.dparams[dir * np + i];
            const double rel = (double)(fabsl(lhs - rhs) / mag), bound = tf32 ? 1e-2 : 1e-13;
            printf("adjoint, one layer, no bias, %s, direction %zu: relative %.2e\n",
                   tf32 ? "tf32" : "fp64", dir, rel);
            if (!(rel <= bound))
                fail_msg("%s: <cot, J v> = %.17Lg, <J^T cot, v> = %.17Lg: relative %.3g > %.0e",
                         tf32 ? "tf32" : "fp64", lhs, rhs, rel, bound);
        }
        clnode_gradient_destroy(&g);
        clnode_tangent_destroy(&t);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&m);
}

/* ------------------------------------------------------------------------ finite differences */

/* The saved values of constant-step case c (fp64, AB trajectories, slots columns) at the data
 * moved by e along direction 0: y0 + e dy0, inputs + e dinputs, theta + e dparams. */
static void fd_values(const tan_case *c, double e, size_t slots, double *out)
{
    double theta[TP], y0[AB * TN], in[AB * TK];
    for (size_t i = 0; i < TP; ++i)
        theta[i] = g_data.theta[i] + e * g_data.dparams[i];
    for (size_t i = 0; i < AB * TN; ++i)
        y0[i] = g_data.y0[i] + e * g_data.dy0[i];
    for (size_t i = 0; i < AB * TK; ++i)
        in[i] = g_data.inputs[i] + e * g_data.dinputs[i];
    clnode_model *m = tan_model(g_ctx, theta, c->act);
    clnode_solve_options o = case_opts(c);
    o.keep_tape = 0;
    clnode_problem p = case_problem(c, 0, AB);
    p.y0 = y0;
    p.inputs = in;
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    assert_ok(clnode_solution_rows_f64(s, 0, AB, slots, NULL, out));
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

static void test_finite_differences(void **state)
{
    (void)state;
    static const struct {
        const char *method;
        clnode_activation act;
    } cases[] = {{"tsit5", CLNODE_ACT_TANH},    {"dopri5", CLNODE_ACT_SOFTPLUS},
                 {"bosh3", CLNODE_ACT_SIGMOID}, {"heun", CLNODE_ACT_SILU},
                 {"dopri8", CLNODE_ACT_GELU},   {"euler", CLNODE_ACT_TANH}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const tan_case c = {cases[k].method, cases[k].act, 1, k % 2, 1, 0, 1, 1, CLNODE_FP64, 0};
        size_t slots = 0;
        clnode_tangent *t = case_tangent(g_ctx, &c, NULL, 0, AB, 1, &slots, NULL);
        const size_t nv = AB * slots * TN;
        double *up = malloc(nv * sizeof *up), *down = malloc(nv * sizeof *down);
        assert_non_null(up);
        assert_non_null(down);
        const double h = 1e-6;
        fd_values(&c, h, slots, up);
        fd_values(&c, -h, slots, down);
        const double *tv = clnode_tangent_values(t);
        double tmax = 0, worst = 0;
        for (size_t i = 0; i < nv; ++i)
            tmax = fmax(tmax, fabs(tv[i]));
        assert_true(tmax > 0);
        for (size_t i = 0; i < nv; ++i) {
            const double fd = (up[i] - down[i]) / (2 * h);
            const double err = fabs(fd - tv[i]) / tmax;
            worst = fmax(worst, err);
            if (!(err <= 1e-7))
                fail_msg("%s %s: value %zu: tangent %.15g, central difference %.15g (%.3g of the "
                         "largest)",
                         c.method, clnode_activation_name(c.act), i, tv[i], fd, err);
        }
        printf("finite differences %-6s %-8s%s: worst %.2e of the largest tangent (bound 1e-7)\n",
               c.method, clnode_activation_name(c.act), c.backward ? " backward" : "", worst);
        free(up);
        free(down);
        clnode_tangent_destroy(&t);
    }
}

/* ------------------------------------------------------------------------ the bits */

/* Direction d of trajectories [a_first, a_first + count) of a (a_B trajectories) against those
 * of b's directions db (b_B trajectories, from b_first): the same bits, or fail naming what. */
static void bits_same(const clnode_tangent *a, size_t a_B, size_t a_first, size_t da,
                      const clnode_tangent *b, size_t b_B, size_t b_first, size_t db, size_t count,
                      size_t slots, const char *what)
{
    const size_t row = slots * TN;
    const double *x = clnode_tangent_values(a) + (da * a_B + a_first) * row;
    const double *y = clnode_tangent_values(b) + (db * b_B + b_first) * row;
    for (size_t i = 0; i < count * row; ++i)
        if (memcmp(&x[i], &y[i], sizeof x[i]) != 0)
            fail_msg("%s: value %zu: %.17g against %.17g", what, i, x[i], y[i]);
}

static void test_bits_batch(void **state)
{
    (void)state;
    for (int f = 0; f < 2; ++f) {
        const tan_case c = {
            "tsit5", CLNODE_ACT_TANH, 0, 0, 1, 0, 1, 1, f ? CLNODE_FP32 : CLNODE_FP64, 0};
        size_t slots = 0, s1 = 0;
        clnode_tangent *all = case_tangent(g_ctx, &c, NULL, 0, TB, TD, &slots, NULL);
        static const size_t picks[] = {0, 31, 32, 157, 299};
        for (size_t i = 0; i < sizeof picks / sizeof picks[0]; ++i) {
            clnode_tangent *one = case_tangent(g_ctx, &c, NULL, picks[i], 1, TD, &s1, NULL);
            assert_int_equal(s1, slots);
            for (size_t d = 0; d < TD; ++d) {
                char what[96];
                snprintf(what, sizeof what, "fp%d trajectory %zu direction %zu alone", (int)c.prec,
                         picks[i], d);
                bits_same(all, TB, picks[i], d, one, 1, 0, d, 1, slots, what);
            }
            clnode_tangent_destroy(&one);
        }
        printf("fp%d: tangents of 5 trajectories alone = in a batch of %d (%d directions)\n",
               (int)c.prec, TB, TD);
        clnode_tangent_destroy(&all);
    }
}

/* The bytes of one direction's scratch, from the message of max_bytes 1. */
static size_t dir_bytes(const clnode_model *m, const clnode_solution *s, size_t slots)
{
    clnode_tangent_options to;
    clnode_tangent_default_options(&to);
    to.max_bytes = 1;
    clnode_tangent *t = NULL;
    assert_int_equal(clnode_tangent_compute(g_ctx, m, &to, s, slots, 1, g_data.dy0, NULL, NULL, &t),
                     CLNODE_ERR_OUT_OF_MEMORY);
    assert_null(t);
    size_t bytes = 0;
    const char *msg = strstr(clnode_context_last_error(g_ctx), "scratch is ");
    assert_non_null(msg);
    assert_int_equal(sscanf(msg, "scratch is %zu bytes", &bytes), 1);
    return bytes;
}

/* Every direction alone, all together and in chunks of two (max_bytes): the same bits. */
static void test_bits_directions(void **state)
{
    (void)state;
    for (int f = 0; f < 2; ++f) {
        const tan_case c = {
            "dopri5", CLNODE_ACT_GELU, 0, 0, 1, 1, 0, 1, f ? CLNODE_FP32 : CLNODE_FP64, 0};
        enum {
            B = 40
        };
        size_t slots = 0;
        clnode_solution *s = NULL;
        clnode_tangent *all = case_tangent(g_ctx, &c, NULL, 0, B, TD, &slots, &s);
        clnode_model *m = tan_model(g_ctx, g_data.theta, c.act);
        clnode_solution_destroy(&s); /* another model object: solve again with this one */
        clnode_solve_options o = case_opts(&c);
        clnode_problem p = case_problem(&c, 0, B);
        s = test_solve_or_fail(g_ctx, m, &o, &p);
        double dy0[TD * B * TN], dc[TD * B * TK];
        case_dirs(0, B, TD, dy0, dc);
        clnode_tangent_options to;
        clnode_tangent_default_options(&to);
        to.max_bytes = 2 * dir_bytes(m, s, slots) + 1;
        clnode_tangent *pairs = tan_or_fail(g_ctx, m, &to, s, slots, TD, dy0, dc, g_data.dparams);
        bits_same(all, B, 0, 0, pairs, B, 0, 0, B * TD, slots, "chunks of two directions");
        for (size_t d = 0; d < TD; ++d) {
            clnode_tangent *one = tan_or_fail(g_ctx, m, NULL, s, slots, 1, dy0 + d * B * TN,
                                              dc + d * B * TK, g_data.dparams + d * TP);
            char what[64];
            snprintf(what, sizeof what, "fp%d direction %zu alone", (int)c.prec, d);
            bits_same(all, B, 0, d, one, B, 0, 0, B, slots, what);
            clnode_tangent_destroy(&one);
        }
        printf("fp%d: %d directions together = alone = in chunks of two\n", (int)c.prec, TD);
        clnode_tangent_destroy(&pairs);
        clnode_tangent_destroy(&all);
        clnode_solution_destroy(&s);
        clnode_model_destroy(&m);
    }
}

/* 1, 2 and 4 threads; checkpoint_every 1 and 8: the same bits. */
static void test_bits_threads_checkpoints(void **state)
{
    (void)state;
    for (int f = 0; f < 2; ++f) {
        tan_case c = {"tsit5", CLNODE_ACT_SILU, 0, 0, 1, 1, 1, 1, f ? CLNODE_FP32 : CLNODE_FP64, 0};
        enum {
            B = 70
        };
        size_t slots = 0, s2 = 0;
        clnode_tangent *ref = case_tangent(g_ctx, &c, NULL, 0, B, TD, &slots, NULL);
        static const int threads[] = {1, 2, 4};
        for (size_t k = 0; k < 3; ++k) {
            clnode_context_options co;
            clnode_context_default_options(&co);
            co.device = "host";
            co.num_threads = threads[k];
            clnode_context *ctx = NULL;
            assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
            clnode_tangent *t = case_tangent(ctx, &c, NULL, 0, B, TD, &s2, NULL);
            char what[64];
            snprintf(what, sizeof what, "fp%d at %d threads", (int)c.prec, threads[k]);
            bits_same(ref, B, 0, 0, t, B, 0, 0, B * TD, slots, what);
            clnode_tangent_destroy(&t);
            clnode_context_destroy(&ctx);
        }
        c.every = 8;
        clnode_tangent *t8 = case_tangent(g_ctx, &c, NULL, 0, B, TD, &s2, NULL);
        bits_same(ref, B, 0, 0, t8, B, 0, 0, B * TD, slots, "checkpoint_every 8");
        clnode_tangent_destroy(&t8);
        printf("fp%d: the same bits at 1, 2 and 4 threads and checkpoint_every 1 and 8\n",
               (int)c.prec);
        clnode_tangent_destroy(&ref);
    }
}

/* A solution kept on opencl:pocl (strict GEMM: the host's bits), its tangents on the host: the
 * bits of the host solve's, fp32 and fp64. */
static void test_pocl_solution(void **state)
{
    (void)state;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "opencl:pocl";
    clnode_context *cl = NULL;
    if (clnode_context_create(&co, &cl) != CLNODE_OK) {
        printf("opencl:pocl: not here, not tried\n");
        return;
    }
    for (int f = 0; f < 2; ++f) {
        const tan_case c = {
            "dopri5", CLNODE_ACT_TANH, 0, 0, 1, 1, 1, 1, f ? CLNODE_FP32 : CLNODE_FP64, 0};
        enum {
            B = 37
        };
        size_t slots = 0, s2 = 0;
        clnode_tangent *ref = case_tangent(g_ctx, &c, NULL, 0, B, TD, &slots, NULL);
        clnode_model *m = tan_model(g_ctx, g_data.theta, c.act);
        clnode_solve_options o = case_opts(&c);
        clnode_problem p = case_problem(&c, 0, B);
        clnode_solution *s = test_solve_or_fail(cl, m, &o, &p);
        for (size_t b = 0; b < B; ++b)
            s2 = clnode_solution_points(s, b) > s2 ? clnode_solution_points(s, b) : s2;
        assert_true(s2 <= slots);
        double dy0[TD * B * TN], dc[TD * B * TK];
        case_dirs(0, B, TD, dy0, dc);
        clnode_tangent *t = tan_or_fail(g_ctx, m, NULL, s, slots, TD, dy0, dc, g_data.dparams);
        bits_same(ref, B, 0, 0, t, B, 0, 0, B * TD, slots, "kept on opencl:pocl");
        printf("fp%d: a solve kept on opencl:pocl, its tangents on the host: the host solve's "
               "bits\n",
               (int)c.prec);
        clnode_tangent_destroy(&t);
        clnode_tangent_destroy(&ref);
        clnode_solution_destroy(&s);
        clnode_model_destroy(&m);
    }
    clnode_context_destroy(&cl);
}

/* ------------------------------------------------------------------------ the solve's results */

/* The saved values of a kept solve: the same bits after the tangent pass as before it, and the
 * same as those of the solve without a tape. */
static void test_solve_unchanged(void **state)
{
    (void)state;
    const tan_case c = {"tsit5", CLNODE_ACT_TANH, 0, 0, 1, 1, 1, 1, CLNODE_FP64, 0};
    enum {
        B = 40
    };
    clnode_model *m = tan_model(g_ctx, g_data.theta, c.act);
    clnode_solve_options o = case_opts(&c);
    clnode_problem p = case_problem(&c, 0, B);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    o.keep_tape = 0;
    clnode_solution *bare = test_solve_or_fail(g_ctx, m, &o, &p);
    size_t slots = 0;
    for (size_t b = 0; b < B; ++b)
        slots = clnode_solution_points(s, b) > slots ? clnode_solution_points(s, b) : slots;
    double *before = calloc(B * slots * TN, sizeof *before);
    double *after = calloc(B * slots * TN, sizeof *after);
    double *plain = calloc(B * slots * TN, sizeof *plain);
    assert_non_null(before);
    assert_non_null(after);
    assert_non_null(plain);
    assert_ok(clnode_solution_rows_f64(s, 0, B, slots, NULL, before));
    double dy0[TD * B * TN], dc[TD * B * TK];
    case_dirs(0, B, TD, dy0, dc);
    clnode_tangent *t = tan_or_fail(g_ctx, m, NULL, s, slots, TD, dy0, dc, g_data.dparams);
    assert_ok(clnode_solution_rows_f64(s, 0, B, slots, NULL, after));
    assert_ok(clnode_solution_rows_f64(bare, 0, B, slots, NULL, plain));
    assert_memory_equal(before, after, B * slots * TN * sizeof *before);
    assert_memory_equal(before, plain, B * slots * TN * sizeof *before);
    printf("the solve's saved values: the same bits before and after the tangent pass, and "
           "without a tape\n");
    free(before);
    free(after);
    free(plain);
    clnode_tangent_destroy(&t);
    clnode_solution_destroy(&bare);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* ------------------------------------------------------------------------ the errors */

static int cancel_now(void *user)
{
    (void)user;
    return 1;
}

/* The errors of the solve's shape: no tape, another model, too few slots, NULLs, ndir 0. */
static void test_errors_shape(void **state)
{
    (void)state;
    const tan_case c = {"tsit5", CLNODE_ACT_TANH, 1, 0, 1, 0, 0, 1, CLNODE_FP64, 0};
    clnode_model *m = tan_model(g_ctx, g_data.theta, c.act);
    clnode_solve_options o = case_opts(&c);
    clnode_problem p = case_problem(&c, 0, AB);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    const size_t slots = TTS + 1;
    const double *dy = g_data.dy0;
    clnode_tangent *t = NULL;
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, m, NULL, s, slots - 1, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "slots", "slots too small");
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, m, NULL, s, slots, 0, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "ndir", "ndir 0");
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, NULL, NULL, s, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "NULL", "NULL model");
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, m, NULL, NULL, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "NULL", "NULL solution");
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, m, NULL, s, slots, 1, dy, NULL, NULL, NULL),
                      CLNODE_ERR_INVALID_ARGUMENT, "NULL", "NULL out");
    assert_int_equal(clnode_tangent_compute(NULL, m, NULL, s, slots, 1, dy, NULL, NULL, &t),
                     CLNODE_ERR_INVALID_ARGUMENT);
    clnode_model *other = tan_model(g_ctx, g_data.theta, c.act); /* equal, another object */
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, other, NULL, s, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "model", "another model");
    clnode_model_destroy(&other);
    o.keep_tape = 0;
    clnode_solution *bare = test_solve_or_fail(g_ctx, m, &o, &p);
    test_expect_error(g_ctx,
                      clnode_tangent_compute(g_ctx, m, NULL, bare, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_INVALID_ARGUMENT, "keep_tape", "no tape");
    clnode_solution_destroy(&bare);
    clnode_tangent_options to;
    clnode_tangent_default_options(&to);
    to.max_bytes = 1000;
    test_expect_error(g_ctx, clnode_tangent_compute(g_ctx, m, &to, s, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_OUT_OF_MEMORY, "bytes", "max_bytes below one direction");
    to.max_bytes = 0;
    to.cancel = cancel_now;
    test_expect_error(g_ctx, clnode_tangent_compute(g_ctx, m, &to, s, slots, 1, dy, NULL, NULL, &t),
                      CLNODE_ERR_CANCELLED, "cancelled", "a cancel");
    assert_null(t);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* The errors of the directions (named by direction, trajectory and component, or parameter) and
 * of the devices. */
static void test_errors_values(void **state)
{
    (void)state;
    for (int f = 0; f < 2; ++f) {
        const tan_case c = {
            "tsit5", CLNODE_ACT_TANH, 1, 0, 1, 0, 0, 1, f ? CLNODE_FP32 : CLNODE_FP64, 0};
        clnode_model *m = tan_model(g_ctx, g_data.theta, c.act);
        clnode_solve_options o = case_opts(&c);
        clnode_problem p = case_problem(&c, 0, AB);
        clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
        const size_t slots = TTS + 1;
        double dy0[2 * AB * TN], dc[2 * AB * TK], dp[2 * TP];
        case_dirs(0, AB, 2, dy0, dc);
        memcpy(dp, g_data.dparams, sizeof dp);
        clnode_tangent *t = NULL;
        dy0[(AB + 2) * TN + 1] = NAN;
        test_expect_error(
            g_ctx, clnode_tangent_compute(g_ctx, m, NULL, s, slots, 2, dy0, dc, dp, &t),
            CLNODE_ERR_NONFINITE_INPUT, "dy0 of direction 1, trajectory 2, component 1", "NaN dy0");
        dy0[(AB + 2) * TN + 1] = 0;
        dc[1] = -INFINITY;
        test_expect_error(g_ctx,
                          clnode_tangent_compute(g_ctx, m, NULL, s, slots, 2, dy0, dc, dp, &t),
                          CLNODE_ERR_NONFINITE_INPUT,
                          "dinputs of direction 0, trajectory 0, component 1", "infinite dinputs");
        dc[1] = 0;
        dp[TP + 5] = f ? 1e39 : NAN;
        test_expect_error(g_ctx,
                          clnode_tangent_compute(g_ctx, m, NULL, s, slots, 2, dy0, dc, dp, &t),
                          CLNODE_ERR_NONFINITE_INPUT, "dparams of direction 1, parameter 5",
                          f ? "fp32 overflow of dparams" : "NaN dparams");
        assert_null(t);
        clnode_solution_destroy(&s);
        clnode_model_destroy(&m);
    }
    static const char *const devices[] = {"host:openblas", "opencl:pocl"};
    for (size_t k = 0; k < 2; ++k) {
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = devices[k];
        clnode_context *ctx = NULL;
        if (clnode_context_create(&co, &ctx) != CLNODE_OK) {
            printf("%s: not here, not tried\n", devices[k]);
            continue;
        }
        const tan_case c = {"tsit5", CLNODE_ACT_TANH, 1, 0, 1, 0, 0, 1, CLNODE_FP64, 0};
        clnode_model *m = tan_model(ctx, g_data.theta, c.act);
        clnode_solve_options o = case_opts(&c);
        clnode_problem p = case_problem(&c, 0, AB);
        clnode_solution *s = test_solve_or_fail(ctx, m, &o, &p);
        clnode_tangent *t = NULL;
        test_expect_error(
            ctx, clnode_tangent_compute(ctx, m, NULL, s, TTS + 1, 1, g_data.dy0, NULL, NULL, &t),
            CLNODE_ERR_UNSUPPORTED, k ? "\"host\"" : "ordered GEMM", devices[k]);
        assert_null(t);
        clnode_solution_destroy(&s);
        clnode_model_destroy(&m);
        clnode_context_destroy(&ctx);
    }
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "tangent", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    data_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adjoint),
        cmocka_unit_test(test_adjoint_plain),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_bits_batch),
        cmocka_unit_test(test_bits_directions),
        cmocka_unit_test(test_bits_threads_checkpoints),
        cmocka_unit_test(test_pocl_solution),
        cmocka_unit_test(test_solve_unchanged),
        cmocka_unit_test(test_errors_shape),
        cmocka_unit_test(test_errors_values),
    };
    const int rc = cmocka_run_group_tests_name("tangent", tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
