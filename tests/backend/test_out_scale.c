/* test_out_scale.c - the model's output scale f = s (.) MLP(.) (clnode_model_desc.out_scale) in
 * the forward solve, per device like the conformance suite (the device is the first argument;
 * absent: 77).
 *
 * Oracles: the analytic solution of y' = s (.) (W y) with W = -I, y(t) = y0 exp(-s t); a scale of
 * exactly 1 against no scale (the same bits: one multiplication by 1 changes nothing); every
 * trajectory alone against its row in a batch, with and without compaction; the host backend
 * (bit for bit, on every other device); a model that differs from the last solve's only by its
 * scale (the host keeps the last model's packed weights) against a fresh context; and the fp32
 * range of the scale, refused by name. */
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
#include "test_device.h"
#include "test_problem.h"
#include "test_solution.h"
#include "test_util.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

#define NB 5    /* trajectories of the batches */
#define NDIM 10 /* the seed model's dimension */

static int have_fp64(void)
{
    return clnode_context_supports(g_ctx, CLNODE_FP64);
}

static clnode_solution *solve_on(clnode_context *ctx, const clnode_model *m,
                                 const clnode_solve_options *o, const clnode_problem *p)
{
    clnode_solution *s = NULL;
    const clnode_status st = clnode_solve(ctx, m, o, p, &s);
    if (st != CLNODE_OK)
        fail_msg("solve on %s: %s: %s", clnode_context_device(ctx), clnode_status_name(st),
                 clnode_context_last_error(ctx));
    return s;
}

/* The seed model on ctx with the output scale s (n values; NULL: the seed model as it is). */
static clnode_model *seed_scaled(clnode_context *ctx, const double *s, size_t n)
{
    clnode_model *seed = NULL, *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &seed), CLNODE_OK);
    assert_int_equal(test_model_scaled(ctx, seed, s, n, &m), CLNODE_OK);
    clnode_model_destroy(&seed);
    return m;
}

/* The seed problem's options in precision p, saving every step and a few times (every kind of
 * saved point is compared). */
static void seed_options(clnode_solve_options *o, clnode_precision p, int compact)
{
    clnode_solve_seed_options(o);
    o->precision = p;
    o->t1 = 3.0;
    o->save_steps = 1;
    o->max_steps = 4096;
    o->compact = compact;
}

static const double g_ts[4] = {0.0, 0.7, 1.9, 3.0};

static void seed_y0(double *y0, size_t batch)
{
    for (size_t i = 0; i < batch * NDIM; ++i)
        y0[i] = 0.3 * sin(0.7 + (double)i); /* rows differ, so do their step counts */
}

/* y' = s (.) (W y) with W = -I: y(t) = y0 exp(-s t), a scalar and a per-component scale, fp64
 * (tight) and fp32 (loose); the same model without scale gives exp(-t). */
static void test_analytic(void **state)
{
    (void)state;
    enum {
        N = 3
    };
    const double W[N * N] = {-1, 0, 0, 0, -1, 0, 0, 0, -1}, y0[N] = {1.0, -2.0, 0.5};
    const double scalar[1] = {0.8}, per[N] = {0.5, 0.8, 1.25};
    const double *ws[1] = {W};
    size_t sizes[2] = {N, N};
    for (int form = 0; form < 3; ++form) {
        clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
        d.out_scale = form == 1 ? scalar : form == 2 ? per : NULL;
        d.out_scale_size = form == 1 ? 1 : form == 2 ? N : 0;
        clnode_model *m = NULL;
        assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
        for (int p = 0; p < 2; ++p) {
            if (p == 1 && !have_fp64())
                continue;
            clnode_solve_options o;
            clnode_solve_default_options(&o);
            o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
            o.t0 = 0.0;
            o.t1 = 2.0;
            o.dt0 = 0.01;
            o.rtol = p ? 1e-10 : 1e-6;
            o.atol = p ? 1e-12 : 1e-8;
            clnode_solution *s = solve_on(g_ctx, m, &o, TEST_PROBLEM(1, y0));
            const double *y = clnode_solution_y_final(s, 0);
            for (size_t j = 0; j < N; ++j) {
                const double sj = form == 1 ? scalar[0] : form == 2 ? per[j] : 1.0;
                assert_close(y[j], y0[j] * exp(-sj * o.t1), p ? 1e-8 : 1e-4, p ? 1e-10 : 1e-6);
            }
            clnode_solution_destroy(&s);
        }
        clnode_model_destroy(&m);
    }
}

/* A scale of exactly 1, scalar or per component, gives the bits of no scale. */
static void test_unit_scale_same_bits(void **state)
{
    (void)state;
    double ones[NDIM], y0[NB * NDIM];
    for (int j = 0; j < NDIM; ++j)
        ones[j] = 1.0;
    seed_y0(y0, NB);
    clnode_model *plain = seed_scaled(g_ctx, NULL, 0);
    for (int form = 0; form < 2; ++form) {
        clnode_model *one = seed_scaled(g_ctx, ones, form ? NDIM : 1);
        for (int p = 0; p < 2; ++p) {
            if (p == 1 && !have_fp64())
                continue;
            clnode_solve_options o;
            clnode_problem pb = test_problem(0, NULL);
            seed_options(&o, p ? CLNODE_FP64 : CLNODE_FP32, 1);
            pb.save_ts = g_ts;
            pb.n_save_ts = 4;
            clnode_solution *a = solve_on(g_ctx, one, &o, test_batch(&pb, NB, y0));
            clnode_solution *b = solve_on(g_ctx, plain, &o, test_batch(&pb, NB, y0));
            for (size_t t = 0; t < NB; ++t)
                test_assert_same_row(a, t, b, t, "a scale of 1 against none", 1);
            clnode_solution_destroy(&a);
            clnode_solution_destroy(&b);
        }
        clnode_model_destroy(&one);
    }
    clnode_model_destroy(&plain);
}

/* The scales the comparisons below run: a scalar and one value per component. */
static void scales(double *scalar, double *per)
{
    scalar[0] = 0.8;
    for (int j = 0; j < NDIM; ++j)
        per[j] = 0.55 + 0.09 * j * (j % 2 ? -1 : 1);
}

/* A scaled model: every trajectory alone equals its row in a batch, with and without compaction,
 * fp32 and fp64, a scalar and a per-component scale; and the scale moves the solution (the
 * scaled solve differs from the unscaled one). */
static void test_alone_vs_batch(void **state)
{
    (void)state;
    double scalar[1], per[NDIM], y0[NB * NDIM];
    scales(scalar, per);
    seed_y0(y0, NB);
    clnode_model *plain = seed_scaled(g_ctx, NULL, 0);
    for (int form = 0; form < 2; ++form) {
        clnode_model *m = seed_scaled(g_ctx, form ? per : scalar, form ? NDIM : 1);
        for (int c = 0; c < 4; ++c) {
            const int p = c / 2, compact = c % 2;
            if (p == 1 && !have_fp64())
                continue;
            clnode_solve_options o;
            clnode_problem pb = test_problem(0, NULL);
            seed_options(&o, p ? CLNODE_FP64 : CLNODE_FP32, compact);
            pb.save_ts = g_ts;
            pb.n_save_ts = 4;
            clnode_solution *batch = solve_on(g_ctx, m, &o, test_batch(&pb, NB, y0));
            for (size_t t = 0; t < NB; ++t) {
                clnode_solution *alone = solve_on(g_ctx, m, &o, test_batch(&pb, 1, y0 + t * NDIM));
                test_assert_same_row(batch, t, alone, 0, "in the batch against alone", 1);
                clnode_solution_destroy(&alone);
            }
            clnode_solution *un = solve_on(g_ctx, plain, &o, test_batch(&pb, NB, y0));
            assert_true(memcmp(clnode_solution_y_final(un, 0), clnode_solution_y_final(batch, 0),
                               NDIM * sizeof(double)) != 0);
            clnode_solution_destroy(&un);
            clnode_solution_destroy(&batch);
        }
        clnode_model_destroy(&m);
    }
    clnode_model_destroy(&plain);
}

/* On a device other than the host: a scaled model gives the host's bits, batch 1 and NB,
 * compaction on and off, fp32 and fp64, both forms of the scale. */
static void test_same_bits_as_host(void **state)
{
    (void)state;
    if (strncmp(g_device, "host", 4) == 0)
        skip();
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    clnode_context *host = NULL;
    assert_int_equal(clnode_context_create(&co, &host), CLNODE_OK);
    double scalar[1], per[NDIM], y0[NB * NDIM];
    scales(scalar, per);
    seed_y0(y0, NB);
    for (int form = 0; form < 2; ++form) {
        clnode_model *m = seed_scaled(g_ctx, form ? per : scalar, form ? NDIM : 1);
        clnode_model *mh = seed_scaled(host, form ? per : scalar, form ? NDIM : 1);
        for (int c = 0; c < 8; ++c) {
            const int p = c / 4, compact = (c / 2) % 2;
            const size_t batch = c % 2 ? NB : 1;
            if (p == 1 && !have_fp64())
                continue;
            clnode_solve_options o;
            clnode_problem pb = test_problem(0, NULL);
            seed_options(&o, p ? CLNODE_FP64 : CLNODE_FP32, compact);
            pb.save_ts = g_ts;
            pb.n_save_ts = 4;
            clnode_solution *s = solve_on(g_ctx, m, &o, test_batch(&pb, batch, y0));
            clnode_solution *sh = solve_on(host, mh, &o, test_batch(&pb, batch, y0));
            for (size_t t = 0; t < batch; ++t)
                test_assert_same_row(s, t, sh, t, "on the device against the host", 1);
            clnode_solution_destroy(&s);
            clnode_solution_destroy(&sh);
        }
        clnode_model_destroy(&m);
        clnode_model_destroy(&mh);
    }
    clnode_context_destroy(&host);
}

/* Models that differ only by their scale, solved in turn on one context (a backend that keeps
 * the last model's packed weights recognises the same weights), each give the bits of a solve
 * on a fresh context. */
static void test_scale_never_kept(void **state)
{
    (void)state;
    double scalar[1], per[NDIM], y0[NB * NDIM];
    scales(scalar, per);
    seed_y0(y0, NB);
    clnode_model *ms[3] = {seed_scaled(g_ctx, NULL, 0), seed_scaled(g_ctx, scalar, 1),
                           seed_scaled(g_ctx, per, NDIM)};
    clnode_solve_options o;
    seed_options(&o, CLNODE_FP32, 1);
    clnode_solution *ref[3];
    for (int k = 0; k < 3; ++k) { /* each on a context of its own */
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = g_device;
        clnode_context *fresh = NULL;
        assert_int_equal(clnode_context_create(&co, &fresh), CLNODE_OK);
        ref[k] = solve_on(fresh, ms[k], &o, TEST_PROBLEM(NB, y0));
        clnode_context_destroy(&fresh);
    }
    static const int order[7] = {0, 1, 2, 1, 0, 2, 0};
    for (int i = 0; i < 7; ++i) {
        clnode_solution *s = solve_on(g_ctx, ms[order[i]], &o, TEST_PROBLEM(NB, y0));
        for (size_t t = 0; t < NB; ++t)
            test_assert_same_row(s, t, ref[order[i]], t, "after another scale's solve", 1);
        clnode_solution_destroy(&s);
    }
    for (int k = 0; k < 3; ++k) {
        clnode_solution_destroy(&ref[k]);
        clnode_model_destroy(&ms[k]);
    }
}

/* A scale beyond the float range: an fp32 solve refuses the model naming the scale (and, for a
 * file, its tensor); fp64 solves it (y' = 1e300 (0 y + 1e-300) = 1: y(t1) = y0 + t1 - t0). */
static void test_scale_beyond_fp32(void **state)
{
    (void)state;
    const double W[1] = {0}, b[1] = {1e-300}, big[1] = {1e300}, y0[1] = {1.0};
    const double *ws[1] = {W}, *bs[1] = {b};
    size_t sizes[2] = {1, 1};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, bs);
    d.out_scale = big;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    const char *msg = clnode_context_last_error(g_ctx);
    assert_non_null(strstr(msg, "out_scale, element 0"));
    assert_non_null(strstr(msg, "1e+300"));
    clnode_model_destroy(&m);
    /* the same from a file: one F64 layer of weight 0 and bias 1e-300, out_scale 1e300 of
     * shape [] */
    static const char hdr[] = "{\"layers.0.weight\":{\"dtype\":\"F64\",\"shape\":[1,1],"
                              "\"data_offsets\":[0,8]},\"layers.0.bias\":{\"dtype\":\"F64\","
                              "\"shape\":[1],\"data_offsets\":[8,16]},\"out_scale\":{\"dtype\":"
                              "\"F64\",\"shape\":[],\"data_offsets\":[16,24]}}";
    unsigned char file[8 + sizeof hdr - 1 + 24];
    const uint64_t hl = sizeof hdr - 1;
    for (int i = 0; i < 8; ++i)
        file[i] = (unsigned char)(hl >> (8 * i));
    memcpy(file + 8, hdr, hl);
    const double wb[3] = {0, 1e-300, 1e300};
    memcpy(file + 8 + hl, wb, sizeof wb); /* little-endian hosts (as safetensors) */
    if (clnode_model_load_safetensors_memory(g_ctx, file, sizeof file, &m) != CLNODE_OK)
        fail_msg("load: %s", clnode_context_last_error(g_ctx));
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    msg = clnode_context_last_error(g_ctx);
    assert_non_null(strstr(msg, "tensor 'out_scale'"));
    assert_non_null(strstr(msg, "out_scale, element 0"));
    if (have_fp64()) {
        o.precision = CLNODE_FP64;
        s = solve_on(g_ctx, m, &o, TEST_PROBLEM(1, y0));
        clnode_trajectory_stats st;
        assert_int_equal(clnode_solution_stats(s, 0, &st), CLNODE_OK);
        assert_int_equal(st.result, CLNODE_RESULT_SUCCESS);
        assert_close(clnode_solution_y_final(s, 0)[0], 1.0 + o.t1 - o.t0, 1e-12, 1e-12);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&m);
}

static int setup(void **state)
{
    (void)state;
    return 0;
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "output scale", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_analytic),         cmocka_unit_test(test_unit_scale_same_bits),
        cmocka_unit_test(test_alone_vs_batch),   cmocka_unit_test(test_same_bits_as_host),
        cmocka_unit_test(test_scale_never_kept), cmocka_unit_test(test_scale_beyond_fp32),
    };
    const int failed = cmocka_run_group_tests(tests, setup, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
