/* test_bench.c - the public bare GEMM loop (clnode/bench.h) on the device named by the first
 * argument ("host", "opencl"; absent: 77): it runs, takes longer for more evaluations, waits for
 * the device exactly once (none on the host, where nothing needs waiting for), leaves the
 * context usable, and refuses what a solve refuses. The bare vector-field loop likewise, where
 * the device has it (the host), and is refused as unsupported elsewhere. */
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
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_model_destroy(&g_model);
    clnode_context_destroy(&g_ctx);
    return rc;
}
