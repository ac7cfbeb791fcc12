/* test_fpenv.c - the library computes in IEEE 754's default environment whatever the caller's
 * thread was set to (lib/core/fpenv.h): a solve, its reverse pass and its tangent pass called with
 * subnormals flushed (x86's MXCSR FTZ and DAZ, AArch64's FPCR FZ: what XLA sets while a jitted
 * program runs, and torch.set_flush_denormal) give the bits of the same calls in the default
 * environment, on one thread and on two (the pool's workers inherit it from the call that starts
 * them), in fp32 and fp64; and the caller's environment is given back after each call. The model's
 * values pass through the subnormal range: an output layer of zero weights and a subnormal bias,
 * so that y grows from 0 through subnormal values, which a flushed solve reads as zero. argv[1] is
 * the device (meson passes "host"). */
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <xmmintrin.h>
#define FLUSH_BITS 0x8040u /* FTZ, DAZ */
static unsigned long long env_get(void)
{
    return _mm_getcsr() & ~0x3Fu; /* the control bits, not the exception flags */
}
static void env_set(unsigned long long v)
{
    _mm_setcsr((unsigned)v);
}
#elif defined(__aarch64__) && defined(__GNUC__)
#define FLUSH_BITS (1ull << 24) /* FZ */
static unsigned long long env_get(void)
{
    unsigned long long v;
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
    return v;
}
static void env_set(unsigned long long v)
{
    __asm__ volatile("msr fpcr, %0" : : "r"(v));
}
#endif

static const char *g_device = "host";

#ifdef FLUSH_BITS
/* 2 -> 8 -> 2 softplus: a first layer from the generator, the output layer's weights zero and
 * its bias `tiny` (subnormal in the solve's precision). */
static clnode_model *tiny_model(clnode_context *ctx, double tiny)
{
    const size_t sizes[3] = {2, 8, 2};
    double w0[16], b0[8], w1[16] = {0}, b1[2] = {tiny, -2 * tiny};
    uint32_t x = 11;
    for (size_t i = 0; i < 16; ++i)
        w0[i] = 0.7 * test_lcg(&x);
    for (size_t i = 0; i < 8; ++i)
        b0[i] = 0.1 * test_lcg(&x);
    const double *const W[2] = {w0, w1}, *const Bs[2] = {b0, b1};
    clnode_model_desc d = test_mlp_desc(2, sizes, W, Bs);
    d.activation = CLNODE_ACT_SOFTPLUS;
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(ctx, &d, &m), CLNODE_OK);
    return m;
}

/* The solve's ys, y0's and every parameter's gradient and one tangent, one array (*n values),
 * on a context of `threads` threads, the calls made in the environment `env`, which each call
 * must give back. */
static double *run_all(int threads, clnode_precision prec, unsigned long long env, size_t *n,
                       size_t *sub)
{
    clnode_context *ctx = NULL;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = g_device;
    co.num_threads = threads;
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    const double tiny = prec == CLNODE_FP32 ? 3e-39 : 3e-310;
    clnode_model *m = tiny_model(ctx, tiny);
    const size_t N = 2, B = 96;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.keep_tape = 1;
    o.t1 = 2.0;
    o.precision = prec;
    double y0[96 * 2];
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = i % 3 == 0 ? 0.0 : (double)(i % 5) * tiny;
    const double ts[4] = {0.25, 0.5, 1.0, 2.0};
    clnode_problem p = test_problem(B, y0);
    p.save_ts = ts;
    p.n_save_ts = 4;
    size_t T = 0;
    assert_int_equal(clnode_save_slots(ctx, &o, &p, &T), CLNODE_OK);
    double *cot = malloc(B * T * N * sizeof *cot);
    assert_non_null(cot);
    for (size_t i = 0; i < B * T * N; ++i)
        cot[i] = (double)(i % 7) * 1e-3;
    clnode_solution *s = NULL;
    clnode_gradient *g = NULL;
    clnode_tangent *tg = NULL;
    const unsigned long long before = env_get();
    env_set(env);
    const clnode_status s1 = clnode_solve(ctx, m, &o, &p, &s);
    const unsigned long long after_solve = env_get();
    const clnode_status s2 = s1 ? s1 : clnode_gradient_compute(ctx, m, NULL, s, T, cot, &g);
    const unsigned long long after_grad = env_get();
    const clnode_status s3 =
        s2 ? s2 : clnode_tangent_compute(ctx, m, NULL, s, T, 1, y0, NULL, NULL, &tg);
    const unsigned long long after_tan = env_get();
    env_set(before);
    assert_int_equal(s1, CLNODE_OK);
    assert_int_equal(s2, CLNODE_OK);
    assert_int_equal(s3, CLNODE_OK);
    if (after_solve != env || after_grad != env || after_tan != env)
        fail_msg("the caller's environment %#llx came back as %#llx (solve), %#llx (gradient), "
                 "%#llx (tangent)",
                 env, after_solve, after_grad, after_tan);
    size_t np = 0;
    const double *gp = clnode_gradient_params(g, &np);
    *n = B * T * N + B * N + np + B * T * N;
    double *out = malloc(*n * sizeof *out), *at = out;
    assert_non_null(out);
    assert_int_equal(clnode_solution_rows_f64(s, 0, B, T, NULL, at), CLNODE_OK);
    at += B * T * N;
    memcpy(at, clnode_gradient_y0(g), B * N * sizeof *out);
    at += B * N;
    memcpy(at, gp, np * sizeof *out);
    at += np;
    memcpy(at, clnode_tangent_values(tg), B * T * N * sizeof *out);
    /* the values a flushed solve would have lost: those of ys subnormal in its precision */
    const double smallest = prec == CLNODE_FP32 ? 1.1754943508222875e-38 : 2.2250738585072014e-308;
    *sub = 0;
    for (size_t i = 0; i < B * T * N; ++i)
        *sub += out[i] != 0 && out[i] < smallest && out[i] > -smallest;
    clnode_tangent_destroy(&tg);
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    free(cot);
    return out;
}

static void test_flushed_caller_same_bits(void **state)
{
    (void)state;
    const unsigned long long ieee = env_get() & ~(unsigned long long)FLUSH_BITS;
    for (int threads = 1; threads <= 2; ++threads)
        for (int q = 0; q < 2; ++q) {
            const clnode_precision prec = q ? CLNODE_FP64 : CLNODE_FP32;
            size_t n = 0, nf = 0, sub = 0, sub_f = 0;
            double *ref = run_all(threads, prec, ieee, &n, &sub);
            double *flushed = run_all(threads, prec, ieee | FLUSH_BITS, &nf, &sub_f);
            assert_int_equal(n, nf);
            assert_true(sub > 0); /* the case reaches the subnormal range */
            for (size_t i = 0; i < n; ++i)
                if (memcmp(&ref[i], &flushed[i], sizeof(double)) != 0)
                    fail_msg("%s, %d threads: value %zu is %.17g called with subnormals flushed, "
                             "%.17g in the default environment",
                             q ? "fp64" : "fp32", threads, i, flushed[i], ref[i]);
            free(ref);
            free(flushed);
        }
}
#endif

int main(int argc, char **argv)
{
    if (argc > 1)
        g_device = argv[1];
#ifndef FLUSH_BITS
    printf("SKIP: no flush-to-zero control on this architecture\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flushed_caller_same_bits),
    };
    return cmocka_run_group_tests_name("fpenv", tests, NULL, NULL);
#endif
}
