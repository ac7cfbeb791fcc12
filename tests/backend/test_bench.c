/* test_bench.c - the public bare GEMM loop (clnode/bench.h) on the device named by the first
 * argument ("host", "opencl"; absent: 77): it runs, takes longer for more evaluations, waits for
 * the device exactly once (none on the host, where nothing needs waiting for), leaves the
 * context usable, and refuses what a solve refuses. The bare vector-field loop likewise, where
 * the device has it (the host), and is refused as unsupported elsewhere. The commands a device
 * enqueued (clnode_context_launches), counted exactly for the GEMM loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"
#include "test_device.h"

static clnode_context *g_ctx;
static clnode_model *g_model;

static void test_loop_runs(void **state)
{
    (void)state;
    double t_few = -1, t_many = -1;
    long syncs = -1;
    /* a first loop builds what the device compiles (on a cold PoCL cache, longer than 2000
     * evaluations take afterwards), so that the two timed loops differ only in their counts */
    assert_int_equal(clnode_bench_gemm_loop(g_ctx, g_model, 64, 2, CLNODE_FP32, CLNODE_GEMM_STRICT,
                                            NULL, NULL),
                     CLNODE_OK);
    assert_int_equal(clnode_bench_gemm_loop(g_ctx, g_model, 64, 2, CLNODE_FP32, CLNODE_GEMM_STRICT,
                                            &t_few, &syncs),
                     CLNODE_OK);
    assert_int_equal(clnode_bench_gemm_loop(g_ctx, g_model, 64, 2000, CLNODE_FP32,
                                            CLNODE_GEMM_STRICT, &t_many, &syncs),
                     CLNODE_OK);
    printf("%s: 2 evals %.3g s, 2000 evals %.3g s, %ld syncs\n", clnode_context_backend(g_ctx),
           t_few, t_many, syncs);
    assert_true(t_few > 0 && t_many > t_few);
    assert_int_equal(syncs, strcmp(clnode_context_backend(g_ctx), "host") == 0 ? 0 : 1);
    /* tf32 in fp32, and a batch that OpenBLAS pads */
    assert_int_equal(
        clnode_bench_gemm_loop(g_ctx, g_model, 3, 5, CLNODE_FP32, CLNODE_GEMM_TF32, NULL, NULL),
        CLNODE_OK);
    /* the context still solves */
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    const double y0[10] = {0};
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(g_ctx, g_model, &o, TEST_PROBLEM(1, y0), &s), CLNODE_OK);
    clnode_trajectory_stats st;
    assert_int_equal(clnode_solution_stats(s, 0, &st), CLNODE_OK);
    assert_int_equal(st.num_steps, 12);
    clnode_solution_destroy(&s);
}

static void test_loop_refuses(void **state)
{
    (void)state;
    double t = 0;
    assert_int_equal(
        clnode_bench_gemm_loop(g_ctx, g_model, 0, 5, CLNODE_FP32, CLNODE_GEMM_STRICT, &t, NULL),
        CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        clnode_bench_gemm_loop(g_ctx, g_model, 4, 0, CLNODE_FP32, CLNODE_GEMM_STRICT, &t, NULL),
        CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        clnode_bench_gemm_loop(g_ctx, NULL, 4, 5, CLNODE_FP32, CLNODE_GEMM_STRICT, &t, NULL),
        CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        clnode_bench_gemm_loop(g_ctx, g_model, 4, 5, CLNODE_FP64, CLNODE_GEMM_TF32, &t, NULL),
        CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "tf32"));
}

/* The bare vector-field loop: on the host (ordered GEMM) it runs in both precisions and takes
 * longer for more evaluations; a device without it says so. */
static void test_mlp_loop(void **state)
{
    (void)state;
    double t_few = -1, t_many = -1;
    const clnode_status st = clnode_bench_mlp_loop(g_ctx, g_model, 3, 2, CLNODE_FP32, &t_few);
    const char *be = clnode_context_backend(g_ctx);
    if (strcmp(be, "host") != 0 && strcmp(be, "opencl") != 0) { /* the backends with the loop */
        assert_int_equal(st, CLNODE_ERR_UNSUPPORTED);
        assert_non_null(strstr(clnode_context_last_error(g_ctx), "vector-field loop"));
        return;
    }
    assert_int_equal(st, CLNODE_OK);
    assert_int_equal(clnode_bench_mlp_loop(g_ctx, g_model, 3, 4000, CLNODE_FP32, &t_many),
                     CLNODE_OK);
    printf("%s: MLP loop, 2 evals %.3g s, 4000 evals %.3g s\n", clnode_context_backend(g_ctx),
           t_few, t_many);
    assert_true(t_few > 0 && t_many > t_few);
    assert_int_equal(clnode_bench_mlp_loop(g_ctx, g_model, 70, 3, CLNODE_FP64, NULL), CLNODE_OK);
    assert_int_equal(clnode_bench_mlp_loop(g_ctx, g_model, 0, 5, CLNODE_FP32, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_bench_mlp_loop(g_ctx, g_model, 4, 0, CLNODE_FP32, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_bench_mlp_loop(g_ctx, NULL, 4, 5, CLNODE_FP32, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
}

/* clnode_context_launches: the bare GEMM loop enqueues exactly evals x layers GEMMs and nothing
 * else on a device, none on the host; a reverse pass enqueues GEMMs and element-wise kernels on a
 * device, the same counts for the same gradient again, and nothing on the host. On PoCL, the
 * reverse pass of one trajectory of the seed model (tsit5 saved at t1: 6 stages go back, the SSAL
 * last one's MLP skipped; 12 steps) takes its products in its own kernels with the element-wise
 * work beside them inside them (one row: device_proto.h's rev_fused_rows), and enqueues per
 * reverse step 2 products per stage and layer (its recomputation with the bias and activation,
 * the last layer's also making the next stage's argument; its transpose with the delta of the
 * layer below) and stages + 3 + layers element-wise kernels: the step's begin (its state, stage
 * 0's argument, the blocks' rows), the saved points, each stage's last layer's delta (with the
 * transpose of the stage argument above it), stage 0's argument transpose and one sum kernel per
 * layer (weights, bias and scale); and 3 for the pass (zero sums and cotangents, the row's
 * finish). */
static void reverse_counts(long *launches, long *gemms)
{
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.keep_tape = 1;
    const double y0[10] = {0.1, 0.2};
    double cot[10] = {1, -1, 0.5};
    clnode_solution *s = NULL;
    clnode_gradient *g = NULL;
    assert_int_equal(clnode_solve(g_ctx, g_model, &o, TEST_PROBLEM(1, y0), &s), CLNODE_OK);
    long g0 = -1;
    const long l0 = clnode_context_launches(g_ctx, &g0);
    assert_int_equal(clnode_gradient_compute(g_ctx, g_model, NULL, s, 1, cot, &g), CLNODE_OK);
    *launches = clnode_context_launches(g_ctx, gemms) - l0;
    *gemms -= g0;
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
}

static void test_launches(void **state)
{
    (void)state;
    const int host = strcmp(clnode_context_backend(g_ctx), "host") == 0;
    const long layers = (long)clnode_model_num_layers(g_model), evals = 5;
    long g0 = -1, g1 = -1;
    const long l0 = clnode_context_launches(g_ctx, &g0);
    assert_true(l0 >= 0 && g0 >= 0 && g0 <= l0);
    assert_int_equal(clnode_bench_gemm_loop(g_ctx, g_model, 64, evals, CLNODE_FP32,
                                            CLNODE_GEMM_STRICT, NULL, NULL),
                     CLNODE_OK);
    const long l1 = clnode_context_launches(g_ctx, &g1);
    assert_int_equal(l1 - l0, host ? 0 : evals * layers);
    assert_int_equal(g1 - g0, host ? 0 : evals * layers);
    assert_int_equal(clnode_context_launches(g_ctx, NULL), l1);
    long rl[2], rg[2];
    reverse_counts(&rl[0], &rg[0]);
    reverse_counts(&rl[1], &rg[1]);
    printf("%s: a reverse pass of 1 trajectory: %ld launches, %ld GEMMs\n",
           clnode_context_backend(g_ctx), rl[0], rg[0]);
    assert_int_equal(rl[1], rl[0]);
    assert_int_equal(rg[1], rg[0]);
    if (host) {
        assert_int_equal(rl[0], 0);
        assert_int_equal(rg[0], 0);
    } else {
        const long steps = 12, stages = 6;
        assert_int_equal(rg[0], steps * 2 * stages * layers);
        assert_int_equal(rl[0] - rg[0], 3 + steps * (stages + 3 + layers));
    }
}

int main(int argc, char **argv)
{
    const char *device = "host";
    const int dev_rc = test_device_open(argc, argv, &device, NULL, NULL, &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    if (clnode_model_create_seed(g_ctx, &g_model) != CLNODE_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_runs),
        cmocka_unit_test(test_loop_refuses),
        cmocka_unit_test(test_mlp_loop),
        cmocka_unit_test(test_launches),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_model_destroy(&g_model);
    clnode_context_destroy(&g_ctx);
    return rc;
}
