/* test_compaction.c - active-set compaction (clnode_solve_options.compact) changes the cost of a
 * solve and nothing else, on one device (argv[1], default "host"; 77 when it is absent). Each
 * batch is solved with compaction on and off, and every trajectory must come back at the same
 * place with the same steps, result, final state and saved points (t0, save_ts dense output,
 * every step, t1), bit for bit, while the solve with compaction on did compact (the library's
 * debug log says so; required from batch 64 on, where the batch's rows outnumber the row
 * alignment of every backend) and the one with it off did not. The batches end their trajectories
 * at many different steps and in every way:
 *   - the seed model with per-trajectory end times (t1s; t0 == t1 too) and initial states, at
 *     batch sizes 1, 2, 7, 64 and 333, fp32 and fp64, tsit5 (FSAL) and heun (not), a step
 *     budget that some trajectories run out of (max_steps_reached);
 *   - a linear model whose growing component overflows at a time set by y0 (nonfinite), with
 *     per-trajectory start times and first steps;
 *   - a model with the time input and conditioning inputs (the inputs' columns move with their
 *     rows). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clnode.h>
#include "test_device.h"
#include "test_util.h"
#include "test_problem.h"
#include "test_solution.h"

static const char *g_device = "host";
static clnode_context *g_ctx;
static long g_compactions; /* "compaction:" debug messages since the last reset */

static void count_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    (void)code;
    (void)user;
    if (level == CLNODE_LOG_DEBUG && strncmp(message, "compaction:", 11) == 0)
        ++g_compactions;
}

/* Solves the batch with compaction on and off and compares them; returns the solution with
 * compaction (the caller destroys it) after checking that it compacted iff `expect` (-1: either).
 */
static clnode_solution *solve_both(const clnode_model *m, clnode_solve_options *o,
                                   const clnode_problem *p, int expect)
{
    const size_t batch = p->batch;
    clnode_solution *on = NULL, *off = NULL;
    o->compact = 0;
    g_compactions = 0;
    assert_ok(clnode_solve(g_ctx, m, o, p, &off));
    assert_int_equal(g_compactions, 0);
    o->compact = 1;
    assert_ok(clnode_solve(g_ctx, m, o, p, &on));
    if (expect >= 0 && (g_compactions > 0) != expect)
        fail_msg("batch %zu: %ld compactions, expected %s", batch, g_compactions,
                 expect ? "some" : "none");
    for (size_t b = 0; b < batch; ++b)
        test_assert_same_row(on, b, off, b, "compacted against not", 1);
    clnode_solution_destroy(&off);
    return on;
}

/* Which results a solution holds, as a bit mask of clnode_result values. */
static unsigned results_of(const clnode_solution *s)
{
    unsigned mask = 0;
    for (size_t b = 0; b < clnode_solution_batch(s); ++b) {
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, b, &st));
        mask |= 1u << st.result;
    }
    return mask;
}

/* The seed model: end times from 0 (no step) to 50, initial states around 0, every kind of saved
 * point, a budget of steps the longest trajectories run out of. */
static void test_seed_ensembles(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m);
    static const size_t batches[] = {1, 2, 7, 64, 333};
    static const double ends[] = {5, 50, 0, 12.5, 5, 30, 5, 2, 44, 5, 0.25};
    static const double ts[] = {0, 0.1, 2.5, 5, 5, 10, 25, 49.5, 50};
    const size_t nend = sizeof ends / sizeof ends[0];
    const clnode_method *methods[2] = {clnode_method_tsit5, clnode_method_heun};
    unsigned seen = 0;
    for (int prec = 0; prec < 2; ++prec) {
        if (prec == 1 && !clnode_context_supports(g_ctx, CLNODE_FP64))
            continue;
        for (int mi = 0; mi < 2; ++mi) {
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; ++bi) {
                const size_t B = batches[bi];
                double *y0 = malloc(B * N * sizeof *y0), *t1s = malloc(B * sizeof *t1s);
                assert_non_null(y0);
                assert_non_null(t1s);
                uint32_t x = 7u + (uint32_t)B;
                for (size_t i = 0; i < B * N; ++i)
                    y0[i] = 0.5 * test_lcg(&x);
                for (size_t b = 0; b < B; ++b)
                    t1s[b] = ends[(b * 7 + bi) % nend];
                clnode_solve_options o;
                clnode_problem pb = test_problem(0, NULL);
                clnode_solve_seed_options(&o);
                o.precision = prec ? CLNODE_FP64 : CLNODE_FP32;
                o.method = methods[mi];
                pb.t1s = t1s;
                o.save_t0 = 1;
                o.save_steps = 1;
                pb.save_ts = ts;
                pb.n_save_ts = sizeof ts / sizeof ts[0];
                o.max_steps = mi ? 120 : 24; /* the long ones run out (heun takes many more) */
                clnode_solution *s = solve_both(m, &o, test_batch(&pb, B, y0), B >= 64 ? 1 : -1);
                seen |= results_of(s);
                clnode_solution_destroy(&s);
                free(y0);
                free(t1s);
            }
        }
    }
    /* the batches did end trajectories both ways */
    assert_true(seen & (1u << CLNODE_RESULT_SUCCESS));
    assert_true(seen & (1u << CLNODE_RESULT_MAX_STEPS_REACHED));
    clnode_model_destroy(&m);
}

/* y' = W y with a component growing like e^(20 t) that overflows (the vector field turns
 * infinite, the trajectory ends nonfinite) at a time set by its initial value, and two decaying
 * ones; trajectories of their own start times and first steps. */
static void test_nonfinite_and_intervals(void **state)
{
    (void)state;
    const double W[9] = {20, 0, 0, 0.5, -1, 0, 0, 1, -0.5};
    size_t sizes[2] = {3, 3};
    const double *ws[1] = {W};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    enum {
        B = 97
    };
    double y0[B * 3], t0s[B], t1s[B], dt0s[B];
    uint32_t x = 99u;
    for (size_t b = 0; b < B; ++b) {
        /* y0[0] from 0 (never grows) and 1e29 (overflows in fp32 after about a hundred
         * steps) to 1e38 (at once) */
        y0[3 * b] = b % 11 == 0 ? 0.0 : pow(10.0, 28.0 + (double)(b % 11));
        y0[3 * b + 1] = test_lcg(&x);
        y0[3 * b + 2] = test_lcg(&x);
        t0s[b] = 0.25 * (double)(b % 3);
        t1s[b] = t0s[b] + (b % 5 == 0 ? 0.5 : 4.0 + (double)(b % 4));
        dt0s[b] = b % 2 ? 0.0 : 0.01 * (double)(1 + b % 3);
    }
    const double ts[4] = {0.3, 0.6, 1.0, 3.0};
    unsigned seen = 0;
    for (int prec = 0; prec < 2; ++prec) {
        if (prec == 1 && !clnode_context_supports(g_ctx, CLNODE_FP64))
            continue;
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        o.precision = prec ? CLNODE_FP64 : CLNODE_FP32;
        pb.t0s = t0s;
        pb.t1s = t1s;
        pb.dt0s = dt0s;
        pb.save_ts = ts;
        pb.n_save_ts = 4;
        o.save_steps = 1;
        o.max_steps = 400;
        clnode_solution *s = solve_both(m, &o, test_batch(&pb, B, y0), 1);
        seen |= results_of(s);
        clnode_solution_destroy(&s);
    }
    assert_true(seen & (1u << CLNODE_RESULT_SUCCESS));
    assert_true(seen & (1u << CLNODE_RESULT_NONFINITE));
    clnode_model_destroy(&m);
}

/* A model taking t and two conditioning inputs: the inputs' columns of the stage argument are
 * written once, so they must move with their trajectories. */
static void test_inputs_move(void **state)
{
    (void)state;
    enum {
        N = 2,
        K = 2,
        H = 16,
        IN = N + 1 + K,
        B = 150
    };
    double W0[H * IN], b0[H], W1[N * H];
    uint32_t x = 4242u;
    for (size_t i = 0; i < H * IN; ++i)
        W0[i] = 0.6 * test_lcg(&x);
    for (size_t i = 0; i < H; ++i)
        b0[i] = 0.05 * (double)i - 0.4;
    for (size_t i = 0; i < N * H; ++i)
        W1[i] = 0.3 * test_lcg(&x);
    size_t sizes[3] = {IN, H, N};
    const double *ws[2] = {W0, W1};
    const double *bs[2] = {b0, NULL};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.time_input = 1;
    d.num_inputs = K;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    double y0[B * N], in[B * K], t1s[B];
    for (size_t b = 0; b < B; ++b) {
        y0[N * b] = test_lcg(&x);
        y0[N * b + 1] = test_lcg(&x);
        in[K * b] = 2.0 * test_lcg(&x);
        in[K * b + 1] = 2.0 * test_lcg(&x);
        t1s[b] = b % 10 ? 1.0 : 10.0; /* 90% end early */
    }
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_default_options(&o);
    pb.t1s = t1s;
    pb.inputs = in;
    o.rtol = 1e-5;
    o.atol = 1e-7;
    clnode_solution *s = solve_both(m, &o, test_batch(&pb, B, y0), 1);
    assert_int_equal(results_of(s), 1u << CLNODE_RESULT_SUCCESS);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* The default is on, and the option is read. */
static void test_default_on(void **state)
{
    (void)state;
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    assert_int_equal(o.compact, 1);
    clnode_solve_seed_options(&o);
    assert_int_equal(o.compact, 1);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open_at(argc, argv, &g_device, count_log, CLNODE_LOG_DEBUG,
                                           "compaction", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_on),
        cmocka_unit_test(test_seed_ensembles),
        cmocka_unit_test(test_nonfinite_and_intervals),
        cmocka_unit_test(test_inputs_move),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
