/* test_dt0.c - the automatic first step (clnode_solve_options.dt0_auto, cl/cln_dt0.h), run once
 * per device like the conformance suite: the device is the first argument ("host",
 * "opencl:pocl", "cuda", "opencl:oclgrind"); a device that is absent skips (77).
 *
 * Oracles:
 *   - the peers' own selections, tests/data/peers/dt0-fp64.json (scripts/reference_dt0.py):
 *     torchode's per sample and torchdiffeq's per trajectory, in float64, over methods (orders),
 *     tolerances, scales of y0 (zero y0 too) and of the field, forwards and backwards, a model
 *     taking t: to 1e-12 relative, widened where the step is ill-conditioned (f1 - f0 cancels:
 *     the file's kappa) by 8 eps kappa / p; torchdiffeq only where torchode's cap of h0 at
 *     |t1 - t0| did not act (the peers differ there, and clnode follows torchode);
 *   - the host backend bit for bit (on the other devices), and on every device the same solve at
 *     batch 1 and 37, with compaction on and off: first step, counts, final state;
 *   - a solve given the selected first steps as dt0s: the same steps and bits, two evaluations
 *     fewer (one for FSAL methods), and with keep_tape the same gradient bytes (the selected step
 *     is held: clnode/gradient.h);
 *   - the dtmin/dtmax clip, and the refusals (a dt0 with dt0_auto, constant steps).
 * CLNODE_DT0_TESTS=name,... runs only those tests (the Oclgrind suite runs "bits" alone). */
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
#include <json-c/json.h>

#include "clnode.h"
#include "test_device.h"
#include "test_problem.h"
#include "test_util.h"

#ifndef CLN_SOURCE_ROOT
#error "CLN_SOURCE_ROOT must name the source tree"
#endif

static const char *g_device = "host";
static clnode_context *g_ctx;

static double jd(json_object *o, const char *key)
{
    return json_object_get_double(json_object_object_get(o, key));
}

/* A model of the peers' file: a tanh MLP with biases, identity last layer, scale s. */
static clnode_model *peer_model(clnode_context *ctx, json_object *jm, double scale)
{
    json_object *js = json_object_object_get(jm, "sizes"),
                *jw = json_object_object_get(jm, "weights"),
                *jb = json_object_object_get(jm, "biases");
    const size_t L = json_object_array_length(jw);
    assert_true(L <= 4);
    size_t sizes[5];
    double *w[4] = {0}, *bv[4] = {0};
    for (size_t l = 0; l <= L; ++l)
        sizes[l] = (size_t)json_object_get_int(json_object_array_get_idx(js, l));
    for (size_t l = 0; l < L; ++l) {
        json_object *rows = json_object_array_get_idx(jw, l),
                    *bias = json_object_array_get_idx(jb, l);
        w[l] = malloc(sizes[l] * sizes[l + 1] * sizeof(double));
        bv[l] = malloc(sizes[l + 1] * sizeof(double));
        assert_true(w[l] && bv[l]);
        for (size_t i = 0; i < sizes[l + 1]; ++i) {
            json_object *row = json_object_array_get_idx(rows, i);
            for (size_t j = 0; j < sizes[l]; ++j)
                w[l][i * sizes[l] + j] = json_object_get_double(json_object_array_get_idx(row, j));
            bv[l][i] = json_object_get_double(json_object_array_get_idx(bias, i));
        }
    }
    const double *ws[4] = {w[0], w[1], w[2], w[3]}, *bs[4] = {bv[0], bv[1], bv[2], bv[3]};
    clnode_model_desc d = test_mlp_desc(L, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.time_input = json_object_get_boolean(json_object_object_get(jm, "time_input"));
    d.out_scale = &scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(ctx, &d, &m));
    for (size_t l = 0; l < L; ++l) {
        free(w[l]);
        free(bv[l]);
    }
    return m;
}

/* Options of an adaptive fp64 solve with dt0_auto. */
static clnode_solve_options auto_options(const char *method, clnode_precision prec)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.method = clnode_method_by_name(method);
    assert_non_null(o.method);
    o.precision = prec;
    o.dt0 = 0.0;
    o.dt0_auto = 1;
    o.precision_guard = CLNODE_GUARD_OFF;
    return o;
}

static clnode_trajectory_stats stats_of(const clnode_solution *s, size_t b)
{
    clnode_trajectory_stats st;
    assert_int_equal(clnode_solution_stats(s, b, &st), CLNODE_OK);
    return st;
}

static double rel(double a, double b)
{
    return fabs(a - b) / fabs(b);
}

/* Every case of the peers' file in float64: clnode's first step against torchode's and
 * torchdiffeq's. */
static void test_peers(void **state)
{
    (void)state;
    if (!clnode_context_supports(g_ctx, CLNODE_FP64))
        skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peers/dt0-fp64.json", CLN_SOURCE_ROOT);
    json_object *root = json_object_from_file(path);
    if (!root)
        fail_msg("cannot read %s", path);
    json_object *models = json_object_object_get(root, "models"),
                *cases = json_object_object_get(root, "cases");
    size_t n_ode = 0, n_tdq = 0, n_wide = 0, n_over = 0; /* n_over: torchode's beyond 1e-12 */
    double max_ode = 0.0, max_tdq = 0.0;
    for (size_t k = 0; k < json_object_array_length(cases); ++k) {
        json_object *c = json_object_array_get_idx(cases, k);
        const char *method = json_object_get_string(json_object_object_get(c, "method"));
        clnode_model *m =
            peer_model(g_ctx,
                       json_object_object_get(
                           models, json_object_get_string(json_object_object_get(c, "model"))),
                       jd(c, "out_scale"));
        clnode_solve_options o = auto_options(method, CLNODE_FP64);
        o.rtol = jd(c, "rtol");
        o.atol = jd(c, "atol");
        o.t0 = jd(c, "t0");
        o.t1 = jd(c, "t1");
        o.max_steps = 1; /* the first step is chosen before it */
        json_object *jy = json_object_object_get(c, "y0");
        const size_t B = json_object_array_length(jy), N = clnode_model_dim(m);
        double y0[64];
        assert_true(B * N <= 64);
        for (size_t b = 0; b < B; ++b)
            for (size_t n = 0; n < N; ++n)
                y0[b * N + n] = json_object_get_double(
                    json_object_array_get_idx(json_object_array_get_idx(jy, b), n));
        const clnode_problem p = test_problem(B, y0);
        clnode_solution *s = NULL;
        assert_ok(clnode_solve(g_ctx, m, &o, &p, &s));
        const int order = json_object_get_int(json_object_object_get(c, "order"));
        assert_int_equal(order, o.method->order);
        for (size_t b = 0; b < B; ++b) {
            const double h = fabs(stats_of(s, b).first_step); /* the peers' are sizes */
            const double ode = json_object_get_double(
                json_object_array_get_idx(json_object_object_get(c, "torchode"), b));
            const double tdq = json_object_get_double(
                json_object_array_get_idx(json_object_object_get(c, "torchdiffeq"), b));
            const double kappa = json_object_get_double(
                json_object_array_get_idx(json_object_object_get(c, "kappa"), b));
            const int capped = json_object_get_boolean(
                json_object_array_get_idx(json_object_object_get(c, "capped"), b));
            const double tol = 1e-12 + 8.0 * DBL_EPSILON * kappa / order;
            n_wide += tol > 2e-12;
            if (!(rel(h, ode) <= tol))
                fail_msg("case %zu (%s, rtol %g, y0 x %g, field x %g, t0 %g, t1 %g, %s), "
                         "trajectory %zu: clnode's first step %.17g, torchode's %.17g (relative "
                         "%.3g > %.3g)",
                         k, method, o.rtol, jd(c, "y_scale"), jd(c, "out_scale"), o.t0, o.t1,
                         json_object_get_string(json_object_object_get(c, "model")), b, h, ode,
                         rel(h, ode), tol);
            max_ode = fmax(max_ode, rel(h, ode));
            n_over += rel(h, ode) > 1e-12;
            ++n_ode;
            if (!capped) {
                if (!(rel(h, tdq) <= tol))
                    fail_msg("case %zu, trajectory %zu: clnode's first step %.17g, torchdiffeq's "
                             "%.17g (relative %.3g > %.3g)",
                             k, b, h, tdq, rel(h, tdq), tol);
                max_tdq = fmax(max_tdq, rel(h, tdq));
                ++n_tdq;
            }
        }
        clnode_solution_destroy(&s);
        clnode_model_destroy(&m);
    }
    print_message("  %zu first steps against torchode (max relative %.3g; %zu beyond 1e-12), %zu "
                  "against torchdiffeq (max %.3g); %zu with a tolerance widened by their "
                  "condition\n",
                  n_ode, max_ode, n_over, n_tdq, max_tdq, n_wide);
    assert_true(n_tdq > n_ode / 2);
    json_object_put(root);
}

/* A 10 -> 32 -> 10 tanh model taking t, with an output scale (30: a field fast enough to
 * reject). */
static clnode_model *lcg_model(clnode_context *ctx, double scale)
{
    enum {
        D = 10,
        H = 32
    };
    static double w0[H * (D + 1)], w1[D * H], b0[H], b1[D];
    uint32_t x = 77u;
    for (size_t i = 0; i < sizeof w0 / sizeof w0[0]; ++i)
        w0[i] = 0.5 * test_lcg(&x);
    for (size_t i = 0; i < sizeof w1 / sizeof w1[0]; ++i)
        w1[i] = 0.3 * test_lcg(&x);
    for (size_t i = 0; i < H; ++i)
        b0[i] = 0.2 * test_lcg(&x);
    for (size_t i = 0; i < D; ++i)
        b1[i] = 0.2 * test_lcg(&x);
    size_t sizes[3] = {D + 1, H, D};
    const double *ws[2] = {w0, w1}, *bs[2] = {b0, b1};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.time_input = 1;
    d.out_scale = &scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(ctx, &d, &m));
    return m;
}

enum {
    BIG = 37,
    DIM = 10
};

/* The batch of the bit tests: rows of their own y0 (row 4 zero) and interval, row 9 empty
 * (t0 == t1), forwards (dir 1) or backwards (-1). */
static void bit_problem(double dir, double *y0, double *t0s, double *t1s)
{
    uint32_t x = 5u;
    for (size_t i = 0; i < BIG * DIM; ++i)
        y0[i] = (i / DIM == 4) ? 0.0 : 3.0 * test_lcg(&x);
    for (size_t b = 0; b < BIG; ++b) {
        t0s[b] = dir * 0.25 * test_lcg(&x);
        t1s[b] = b == 9 ? t0s[b] : t0s[b] + dir * (1.0 + 0.5 * test_lcg(&x));
    }
}

/* Trajectory b of s equals trajectory r of ref: its counts, first step and final state. */
static void same_traj(const clnode_solution *ref, size_t r, const clnode_solution *s, size_t b,
                      const char *what)
{
    const clnode_trajectory_stats a = stats_of(ref, r), c = stats_of(s, b);
    if (a.result != c.result || a.num_steps != c.num_steps || a.num_rejected != c.num_rejected ||
        a.num_rhs_evals != c.num_rhs_evals ||
        memcmp(&a.first_step, &c.first_step, sizeof(double)) ||
        memcmp(clnode_solution_y_final(ref, r), clnode_solution_y_final(s, b),
               DIM * sizeof(double)))
        fail_msg("%s: trajectory %zu: first step %a, %ld steps (%ld rejected, %ld evaluations) "
                 "against %a, %ld (%ld, %ld)",
                 what, b, c.first_step, c.num_steps, c.num_rejected, c.num_rhs_evals, a.first_step,
                 a.num_steps, a.num_rejected, a.num_rhs_evals);
}

static clnode_solution *solve_on(clnode_context *ctx, const clnode_model *m,
                                 const clnode_solve_options *o, const clnode_problem *p)
{
    clnode_context *keep = g_ctx;
    g_ctx = ctx;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(ctx, m, o, p, &s));
    g_ctx = keep;
    return s;
}

/* Same bits: every method, fp32 and fp64, forwards and backwards; the device's batch of 37 with
 * compaction on and off and three of its rows alone against the host's batch. */
static void test_bits(void **state)
{
    (void)state;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    clnode_context *host = NULL;
    assert_int_equal(clnode_context_create(&co, &host), CLNODE_OK);
    clnode_model *mh = lcg_model(host, 30.0), *md = lcg_model(g_ctx, 30.0);
    static double y0[BIG * DIM], t0s[BIG], t1s[BIG];
    size_t cases = 0;
    for (size_t k = 0; clnode_method_at(k); ++k) {
        const clnode_method *me = clnode_method_at(k);
        if (!me->adaptive)
            continue;
        for (int pi = 0; pi < 2; ++pi) {
            const clnode_precision prec = pi ? CLNODE_FP64 : CLNODE_FP32;
            if (!clnode_context_supports(g_ctx, prec))
                continue;
            const double dir = (k + (size_t)pi) % 2 ? -1.0 : 1.0;
            bit_problem(dir, y0, t0s, t1s);
            clnode_solve_options o = auto_options(me->name, prec);
            o.rtol = pi && strcmp(me->name, "heun") != 0 ? 1e-7 : 1e-4;
            o.atol = 1e-7;
            o.max_steps = 20000;
            clnode_problem p = test_problem(BIG, y0);
            p.t0s = t0s;
            p.t1s = t1s;
            char what[96];
            snprintf(what, sizeof what, "%s fp%d %s", me->name, pi ? 64 : 32,
                     dir < 0 ? "backwards" : "forwards");
            clnode_solution *ref = solve_on(host, mh, &o, &p);
            for (size_t b = 0; b < BIG; ++b) { /* no vacuous row */
                const clnode_trajectory_stats st = stats_of(ref, b);
                if (st.result != CLNODE_RESULT_SUCCESS ||
                    !(b == 9 ? st.first_step == 0.0 && st.num_steps == 0
                             : dir * st.first_step > 0.0 && st.num_steps > 0))
                    fail_msg("%s: trajectory %zu: %s after %ld steps, first step %g", what, b,
                             clnode_result_name(st.result), st.num_steps, st.first_step);
            }
            for (int compact = 0; compact < 2; ++compact) {
                o.compact = compact;
                clnode_solution *s = solve_on(g_ctx, md, &o, &p);
                for (size_t b = 0; b < BIG; ++b)
                    same_traj(ref, b, s, b, what);
                clnode_solution_destroy(&s);
            }
            static const size_t alone[3] = {0, 4, 36};
            for (size_t a = 0; a < 3; ++a) {
                const size_t r = alone[a];
                clnode_problem p1 = test_problem(1, y0 + r * DIM);
                p1.t0s = t0s + r;
                p1.t1s = t1s + r;
                clnode_solution *s = solve_on(g_ctx, md, &o, &p1);
                same_traj(ref, r, s, 0, what);
                clnode_solution_destroy(&s);
            }
            clnode_solution_destroy(&ref);
            ++cases;
        }
    }
    print_message("  %zu cases: the host's bits at batch 1 and %d, compaction on and off\n", cases,
                  BIG);
    assert_true(cases >= 5);
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
    clnode_context_destroy(&host);
}

/* The gradient bytes of a kept solve with cotangent 1 at every saved point. */
static double *grad_of(const clnode_model *m, const clnode_solution *s, size_t *n)
{
    const size_t B = clnode_solution_batch(s), N = clnode_solution_dim(s);
    size_t slots = 0;
    for (size_t b = 0; b < B; ++b)
        slots = clnode_solution_points(s, b) > slots ? clnode_solution_points(s, b) : slots;
    double *cot = malloc(B * slots * N * sizeof(double));
    assert_non_null(cot);
    uint32_t x = 9u;
    for (size_t i = 0; i < B * slots * N; ++i)
        cot[i] = test_lcg(&x);
    clnode_gradient *g = NULL;
    assert_ok(clnode_gradient_compute(g_ctx, m, NULL, s, slots, cot, &g));
    size_t np = 0;
    const double *gp = clnode_gradient_params(g, &np);
    double *out = malloc((B * N + np) * sizeof(double));
    assert_non_null(out);
    memcpy(out, clnode_gradient_y0(g), B * N * sizeof(double));
    memcpy(out + B * N, gp, np * sizeof(double));
    *n = B * N + np;
    clnode_gradient_destroy(&g);
    free(cot);
    return out;
}

/* The selection only sets dt0: the solve given its first steps as dt0s takes the same steps to
 * the same bits, with two evaluations fewer (one for FSAL methods, whose first step reuses the
 * selection's f0); with keep_tape both reverse to the same gradient bytes (the step is held). */
static void test_given_steps(void **state)
{
    (void)state;
    clnode_model *m = lcg_model(g_ctx, 30.0);
    static double y0[BIG * DIM], t0s[BIG], t1s[BIG], dt0s[BIG];
    for (size_t k = 0; clnode_method_at(k); ++k) {
        const clnode_method *me = clnode_method_at(k);
        if (!me->adaptive)
            continue;
        const clnode_precision prec =
            clnode_context_supports(g_ctx, CLNODE_FP64) ? CLNODE_FP64 : CLNODE_FP32;
        const double dir = k % 2 ? -1.0 : 1.0;
        bit_problem(dir, y0, t0s, t1s);
        clnode_solve_options o = auto_options(me->name, prec);
        o.rtol = 1e-5;
        o.keep_tape = 1;
        o.save_t0 = 1;
        clnode_problem p = test_problem(BIG, y0);
        p.t0s = t0s;
        p.t1s = t1s;
        clnode_solution *sa = NULL, *sg = NULL;
        assert_ok(clnode_solve(g_ctx, m, &o, &p, &sa));
        for (size_t b = 0; b < BIG; ++b)
            dt0s[b] = stats_of(sa, b).first_step; /* signed: backwards, negative */
        o.dt0_auto = 0;
        p.dt0s = dt0s;
        assert_ok(clnode_solve(g_ctx, m, &o, &p, &sg));
        for (size_t b = 0; b < BIG; ++b) {
            const clnode_trajectory_stats a = stats_of(sa, b), g = stats_of(sg, b);
            assert_int_equal(a.num_steps, g.num_steps);
            assert_int_equal(a.num_rejected, g.num_rejected);
            assert_true(a.first_step == g.first_step);
            assert_memory_equal(clnode_solution_y_final(sa, b), clnode_solution_y_final(sg, b),
                                DIM * sizeof(double));
            const long more = b == 9 ? 0 : me->fsal ? 1 : 2; /* row 9: t0 == t1 */
            if (a.num_rhs_evals != g.num_rhs_evals + more)
                fail_msg("%s, trajectory %zu: %ld evaluations with dt0_auto, %ld given the step",
                         me->name, b, a.num_rhs_evals, g.num_rhs_evals);
        }
        size_t na = 0, ng = 0;
        double *ga = grad_of(m, sa, &na), *gg = grad_of(m, sg, &ng);
        assert_int_equal(na, ng);
        assert_memory_equal(ga, gg, na * sizeof(double));
        free(ga);
        free(gg);
        clnode_solution_destroy(&sa);
        clnode_solution_destroy(&sg);
    }
    clnode_model_destroy(&m);
}

/* dtmax and dtmin clip the chosen step; a given dt0, dt0s or constant steps are refused; "auto"
 * is parsed for dt0 alone. */
static void test_bounds_and_refusals(void **state)
{
    (void)state;
    clnode_model *m = lcg_model(g_ctx, 30.0);
    static double y0[BIG * DIM], t0s[BIG], t1s[BIG];
    bit_problem(1.0, y0, t0s, t1s);
    clnode_solve_options o = auto_options("tsit5", CLNODE_FP32);
    o.t0 = 0.0;
    o.t1 = 1.0;
    const clnode_problem p = test_problem(1, y0);
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, &p, &s));
    const double h = stats_of(s, 0).first_step;
    clnode_solution_destroy(&s);
    assert_true(h > 1e-4 && h < 0.5);
    o.dtmax = 0.5 * h;
    assert_ok(clnode_solve(g_ctx, m, &o, &p, &s));
    assert_true(stats_of(s, 0).first_step == (double)(float)(0.5 * h));
    clnode_solution_destroy(&s);
    o.dtmax = 0.0;
    o.dtmin = 2.0 * h;
    assert_ok(clnode_solve(g_ctx, m, &o, &p, &s));
    assert_true(stats_of(s, 0).first_step == (double)(float)(2.0 * h));
    clnode_solution_destroy(&s);
    o.dtmin = 0.0;
    o.dt0 = 0.1;
    assert_int_equal(clnode_solve(g_ctx, m, &o, &p, &s), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "dt0_auto"));
    assert_null(s);
    o.dt0 = 0.0;
    const double dt0s[1] = {0.1};
    clnode_problem pd = p;
    pd.dt0s = dt0s;
    assert_int_equal(clnode_solve(g_ctx, m, &o, &pd, &s), CLNODE_ERR_INVALID_ARGUMENT);
    o.constant_step = 1;
    assert_int_equal(clnode_solve(g_ctx, m, &o, &p, &s), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "dt0_auto"));
    char msg[256];
    clnode_solve_options q;
    clnode_solve_default_options(&q);
    q.dt0 = 0.3;
    assert_int_equal(clnode_solve_option_parse(&q, "dt0", "auto", msg, sizeof msg), CLNODE_OK);
    assert_true(q.dt0 == 0.0 && q.dt0_auto == 1);
    assert_int_equal(clnode_solve_option_parse(&q, "rtol", "auto", msg, sizeof msg),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_solve_option_parse(&q, "dt0", "0.25", msg, sizeof msg), CLNODE_OK);
    assert_true(q.dt0 == 0.25 && q.dt0_auto == 1);
    clnode_model_destroy(&m);
    /* a field whose scaled norm overflows (d1 = inf, so h0 = 0 and d2 = 0 / 0): the fallback */
    if (!clnode_context_supports(g_ctx, CLNODE_FP64))
        return;
    m = lcg_model(g_ctx, 1e300);
    clnode_solve_options f = auto_options("dopri5", CLNODE_FP64);
    f.t1 = 1.0;
    f.max_steps = 3;
    assert_ok(clnode_solve(g_ctx, m, &f, &p, &s));
    assert_true(stats_of(s, 0).first_step == 1e-6);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* Whether CLNODE_DT0_TESTS (unset or empty: every test) names `name`. */
static int wanted(const char *name)
{
    const char *list = getenv("CLNODE_DT0_TESTS");
    if (!list || !*list)
        return 1;
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "dt0_auto", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_peers),
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_given_steps),
        cmocka_unit_test(test_bounds_and_refusals),
    };
    static const char *const names[] = {"peers", "bits", "given_steps", "bounds"};
    struct CMUnitTest tests[4];
    size_t n = 0;
    for (size_t i = 0; i < 4; ++i)
        if (wanted(names[i]))
            tests[n++] = all[i];
    if (n == 0) {
        printf("CLNODE_DT0_TESTS=%s names no test (peers, bits, given_steps, bounds)\n",
               getenv("CLNODE_DT0_TESTS"));
        clnode_context_destroy(&g_ctx);
        return 1;
    }
    const int failed = _cmocka_run_group_tests("dt0_auto", tests, n, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
