/* test_grad_kept.c - the host keeps a reverse pass's packed weights and scratch for the next one
 * (lib/backends/host/host_rev.c): a series of reverse passes on one context, each of which may
 * take over what the one before it kept or must not, against the same pass on a context of its
 * own (which has nothing kept), bit for bit: models of one shape with other weights, another
 * shape, tf32 and strict, fp32 and fp64, checkpoint_every 1 and 3, batches of 1, 5 and 40.
 * argv[1] is the device (meson passes "host"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_device.h"
#include "test_problem.h"
#include "test_util.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

/* One pass of the series. */
typedef struct kept_case {
    size_t hidden; /* the model's hidden width */
    uint32_t seed; /* of its weights */
    clnode_precision prec;
    clnode_gemm_mode gemm;
    long every;
    size_t batch;
} kept_case;

/* A 3 -> hidden -> hidden -> 3 tanh MLP with biases, weights from `seed`. */
static clnode_model *kept_model(clnode_context *ctx, size_t hidden, uint32_t seed)
{
    const size_t sizes[4] = {3, hidden, hidden, 3};
    double *w[3], *b[3];
    for (size_t l = 0; l < 3; ++l) {
        w[l] = malloc(sizes[l] * sizes[l + 1] * sizeof(double));
        b[l] = malloc(sizes[l + 1] * sizeof(double));
        assert_non_null(w[l]);
        assert_non_null(b[l]);
        for (size_t i = 0; i < sizes[l] * sizes[l + 1]; ++i)
            w[l][i] = 0.9 * test_lcg(&seed) / (double)sizes[l];
        for (size_t i = 0; i < sizes[l + 1]; ++i)
            b[l][i] = 0.1 * test_lcg(&seed);
    }
    const double *const W[3] = {w[0], w[1], w[2]}, *const Bs[3] = {b[0], b[1], b[2]};
    clnode_model_desc d = test_mlp_desc(3, sizes, W, Bs);
    d.activation = CLNODE_ACT_TANH;
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(ctx, &d, &m), CLNODE_OK);
    for (size_t l = 0; l < 3; ++l) {
        free(w[l]);
        free(b[l]);
    }
    return m;
}

/* The case's kept solve and reverse pass on ctx: y0's, every weight's and bias's gradient, one
 * array (*n values). */
static double *kept_grad(clnode_context *ctx, const kept_case *c, size_t *n)
{
    clnode_model *m = kept_model(ctx, c->hidden, c->seed);
    const size_t N = 3, B = c->batch;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.keep_tape = 1;
    o.t1 = 4.0;
    o.precision = c->prec;
    o.gemm_precision = c->gemm;
    o.checkpoint_every = c->every;
    double *y0 = malloc(B * N * sizeof *y0);
    assert_non_null(y0);
    uint32_t x = 7;
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.5 * test_lcg(&x);
    const double ts[3] = {0.5, 1.25, 3.0};
    clnode_problem p = test_problem(B, y0);
    p.save_ts = ts;
    p.n_save_ts = 3;
    size_t slots = 0;
    assert_int_equal(clnode_save_slots(ctx, &o, &p, &slots), CLNODE_OK);
    double *cot = malloc(B * slots * N * sizeof *cot);
    assert_non_null(cot);
    for (size_t i = 0; i < B * slots * N; ++i)
        cot[i] = test_lcg(&x);
    clnode_solution *s = NULL;
    clnode_gradient *g = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, &p, &s), CLNODE_OK);
    assert_int_equal(clnode_gradient_compute(ctx, m, NULL, s, slots, cot, &g), CLNODE_OK);
    *n = B * N;
    for (size_t l = 0; l < 3; ++l)
        *n += clnode_model_layer_out(m, l) * (clnode_model_layer_in(m, l) + 1);
    double *out = malloc(*n * sizeof *out), *at = out;
    assert_non_null(out);
    memcpy(at, clnode_gradient_y0(g), B * N * sizeof *out);
    at += B * N;
    for (size_t l = 0; l < 3; ++l) {
        const size_t rows = clnode_model_layer_out(m, l), cols = clnode_model_layer_in(m, l);
        memcpy(at, clnode_gradient_weight(g, l), rows * cols * sizeof *out);
        at += rows * cols;
        memcpy(at, clnode_gradient_bias(g, l), rows * sizeof *out);
        at += rows;
    }
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    free(cot);
    free(y0);
    return out;
}

static void test_series_against_fresh(void **state)
{
    (void)state;
    const kept_case cases[] = {
        {24, 1, CLNODE_FP32, CLNODE_GEMM_STRICT, 1, 1},
        {24, 1, CLNODE_FP32, CLNODE_GEMM_STRICT, 1, 1}, /* the same: all taken over */
        {24, 2, CLNODE_FP32, CLNODE_GEMM_STRICT, 1, 1}, /* other weights, the same scratch */
        {24, 2, CLNODE_FP32, CLNODE_GEMM_TF32, 1, 1},   /* the same weights, tf32 */
        {24, 2, CLNODE_FP32, CLNODE_GEMM_STRICT, 3, 5}, /* other scratch */
        {16, 2, CLNODE_FP32, CLNODE_GEMM_STRICT, 3, 5}, /* another shape */
        {16, 2, CLNODE_FP64, CLNODE_GEMM_STRICT, 3, 5}, /* another precision */
        {16, 3, CLNODE_FP64, CLNODE_GEMM_STRICT, 3, 40},
        {16, 3, CLNODE_FP32, CLNODE_GEMM_STRICT, 3, 40},
        {24, 1, CLNODE_FP32, CLNODE_GEMM_STRICT, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        clnode_context *own = NULL;
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = g_device;
        assert_int_equal(clnode_context_create(&co, &own), CLNODE_OK);
        size_t n = 0, n_own = 0;
        double *series = kept_grad(g_ctx, &cases[k], &n);
        double *fresh = kept_grad(own, &cases[k], &n_own);
        assert_int_equal(n, n_own);
        for (size_t i = 0; i < n; ++i)
            if (memcmp(&series[i], &fresh[i], sizeof(double)) != 0)
                fail_msg("pass %zu of the series: gradient value %zu is %.17g, on a context of "
                         "its own %.17g",
                         k, i, series[i], fresh[i]);
        free(series);
        free(fresh);
        clnode_context_destroy(&own);
    }
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "grad-kept", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series_against_fresh),
    };
    const int rc = cmocka_run_group_tests_name("grad-kept", tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
