/* test_cuda_adopt.c - clnode inside an application that owns its CUDA stream
 * (clnode_context_create_cuda, clnode/cuda.h). Everywhere: the arguments are checked before CUDA
 * is touched, and where "cuda" cannot be opened (no library, no driver, no GPU) the adoption is
 * refused with the same status and a message that says why. With a GPU: a solve on the caller's
 * stream (the legacy default one, and a stream of the test's own) takes the host's steps and
 * gives its bits, and the caller's stream outlives the clnode context; a solve from and into the
 * caller's device arrays (clnode_solve_device) gives clnode_solve's bits on the same context. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "clnode/cuda.h"
#include "test_device.h"
#include "test_problem.h"
#include "test_adopt.h"

static char g_why[TEST_LOG_MSG]; /* why "cuda:0" cannot be opened ("" where it can) */
static clnode_status g_cuda_st;  /* ... and its status */

/* clnode_context_create_cuda with its log messages kept in msg (emptied first). */
static clnode_status adopt_logged(int device, struct CUstream_st *stream, char *msg,
                                  clnode_context **ctx)
{
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.log = test_keep_last_log;
    o.log_user = msg;
    msg[0] = '\0';
    return clnode_context_create_cuda(&o, device, stream, ctx);
}

static void test_arguments(void **state)
{
    (void)state;
    char msg[TEST_LOG_MSG];
    assert_int_equal(clnode_context_create_cuda(NULL, 0, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT);
    clnode_context *ctx = (clnode_context *)&ctx; /* not NULL: the refusal must clear it */
    assert_int_equal(adopt_logged(-1, NULL, msg, &ctx), CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(msg, "clnode_context_create_cuda"));
    assert_non_null(strstr(msg, "-1 is negative"));
}

/* Where "cuda:0" cannot be opened, adopting device 0 fails as it does, saying why. */
static void test_no_cuda(void **state)
{
    (void)state;
    if (g_cuda_st == CLNODE_OK)
        skip();
    char msg[TEST_LOG_MSG];
    clnode_context *ctx = NULL;
    assert_int_equal(adopt_logged(0, NULL, msg, &ctx), g_cuda_st);
    assert_null(ctx);
    assert_int_equal(g_cuda_st, CLNODE_ERR_NO_DEVICE);
    fprintf(stderr, "refused as \"cuda:0\" is: %s\n", msg);
    /* the library's reason: a missing library ("cuda not available: cannot load ..."), or no
     * driver or device ("no CUDA device \"cuda:0\": ...") */
    assert_true(strstr(msg, "cuda not available: ") || strstr(msg, "no CUDA device \"cuda:0\""));
}

/* A device ordinal past the devices present is refused by name, with or without CUDA. */
static void test_absent_device(void **state)
{
    (void)state;
    char msg[TEST_LOG_MSG];
    clnode_context *ctx = NULL;
    assert_int_equal(adopt_logged(4096, NULL, msg, &ctx), CLNODE_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_true(strstr(msg, "cuda not available: ") || strstr(msg, "\"cuda:4096\""));
}

/* The runtime's stream functions, from the libcudart the library loads (a GPU is present). */
typedef int (*stream_create_fn)(struct CUstream_st **);
typedef int (*stream_fn)(struct CUstream_st *);

static void test_solve_on_stream(void **state)
{
    (void)state;
    if (g_cuda_st != CLNODE_OK)
        skip();
    clnode_context *ref_ctx = NULL;
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = "host";
    assert_int_equal(clnode_context_create(&o, &ref_ctx), CLNODE_OK);
    clnode_solution *ref = test_seed_solve(ref_ctx, 2);

    char msg[TEST_LOG_MSG];
    clnode_context *ctx = NULL;
    if (adopt_logged(0, NULL, msg, &ctx) != CLNODE_OK) /* the legacy default stream */
        fail_msg("adopting the default stream: %s", msg);
    clnode_solution *s = test_seed_solve(ctx, 2);
    test_assert_same_seed(s, ref, 2);
    clnode_solution_destroy(&s);
    clnode_context_destroy(&ctx);

    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!rt)
        rt = dlopen("libcudart.so", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(rt);
    stream_create_fn create = NULL;
    stream_fn query = NULL, destroy = NULL;
    void *sym[3] = {dlsym(rt, "cudaStreamCreate"), dlsym(rt, "cudaStreamQuery"),
                    dlsym(rt, "cudaStreamDestroy")};
    assert_true(sym[0] && sym[1] && sym[2]);
    memcpy(&create, &sym[0], sizeof create); /* ISO C has no cast between the two */
    memcpy(&query, &sym[1], sizeof query);
    memcpy(&destroy, &sym[2], sizeof destroy);
    struct CUstream_st *stream = NULL;
    assert_int_equal(create(&stream), 0);
    if (adopt_logged(0, stream, msg, &ctx) != CLNODE_OK)
        fail_msg("adopting a stream: %s", msg);
    s = test_seed_solve(ctx, 2);
    test_assert_same_seed(s, ref, 2);
    clnode_solution_destroy(&s);
    clnode_context_destroy(&ctx);
    /* the stream is still the caller's: valid and idle (cudaSuccess) after the context went */
    assert_int_equal(query(stream), 0);
    assert_int_equal(destroy(stream), 0);
    dlclose(rt);
    clnode_solution_destroy(&ref);
    clnode_context_destroy(&ref_ctx);
}

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);

/* With a GPU: y0 and the save times in cudaMalloc'ed memory, the values at the save times and
 * at t1 written there, on a context adopting the default stream: the same bits and statistics
 * as clnode_solve of the same values from host arrays on that context (fp32 and fp64, B = 3). */
static void test_solve_device_arrays(void **state)
{
    (void)state;
    if (g_cuda_st != CLNODE_OK)
        skip();
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!rt)
        rt = dlopen("libcudart.so", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(rt);
    malloc_fn dmalloc = NULL;
    free_fn dfree = NULL;
    memcpy_fn dcopy = NULL;
    void *sym[3] = {dlsym(rt, "cudaMalloc"), dlsym(rt, "cudaFree"), dlsym(rt, "cudaMemcpy")};
    assert_true(sym[0] && sym[1] && sym[2]);
    memcpy(&dmalloc, &sym[0], sizeof dmalloc);
    memcpy(&dfree, &sym[1], sizeof dfree);
    memcpy(&dcopy, &sym[2], sizeof dcopy);
    char msg[TEST_LOG_MSG];
    clnode_context *ctx = NULL;
    if (adopt_logged(0, NULL, msg, &ctx) != CLNODE_OK)
        fail_msg("adopting the default stream: %s", msg);
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const size_t B = 3, N = clnode_model_dim(m), T = 4;
    for (int prec = 0; prec < 2; ++prec) {
        const size_t es = prec ? sizeof(double) : sizeof(float);
        double y0[3 * 16], ts[4] = {0.1, 0.3, 0.6, 0.9};
        assert_true(N <= 16);
        for (size_t i = 0; i < B * N; ++i)
            y0[i] = prec ? 0.1 * (double)i - 0.4 : (double)(float)(0.1 * (double)i - 0.4);
        for (size_t j = 0; j < T && !prec; ++j)
            ts[j] = (double)(float)ts[j];
        clnode_solve_options o;
        clnode_solve_default_options(&o);
        o.precision = prec ? CLNODE_FP64 : CLNODE_FP32;
        o.save_t1 = 1;
        clnode_problem p = test_problem(B, y0);
        p.save_ts = ts;
        p.n_save_ts = T;
        clnode_solution *s = NULL;
        assert_int_equal(clnode_solve(ctx, m, &o, &p, &s), CLNODE_OK);
        unsigned char hy[3 * 16 * 8], hts[4 * 8], out[3 * 4 * 16 * 8];
        for (size_t i = 0; i < B * N; ++i) {
            const float f = (float)y0[i];
            memcpy(hy + i * es, prec ? (const void *)&y0[i] : (const void *)&f, es);
        }
        for (size_t j = 0; j < T; ++j) {
            const float f = (float)ts[j];
            memcpy(hts + j * es, prec ? (const void *)&ts[j] : (const void *)&f, es);
        }
        void *dy = NULL, *dts = NULL, *dys = NULL, *dy1 = NULL;
        assert_int_equal(dmalloc(&dy, B * N * es), 0);
        assert_int_equal(dmalloc(&dts, T * es), 0);
        assert_int_equal(dmalloc(&dys, B * T * N * es), 0);
        assert_int_equal(dmalloc(&dy1, B * N * es), 0);
        assert_int_equal(dcopy(dy, hy, B * N * es, 1), 0);
        assert_int_equal(dcopy(dts, hts, T * es, 1), 0);
        clnode_device_problem dp;
        clnode_device_problem_default(&dp);
        dp.batch = B;
        dp.y0.handle = dy;
        dp.save_ts.handle = dts;
        dp.n_save_ts = T;
        dp.ys.handle = dys;
        dp.y1.handle = dy1;
        clnode_trajectory_stats st[3];
        size_t saved[3];
        if (clnode_solve_device(ctx, m, &o, &dp, st, saved) != CLNODE_OK)
            fail_msg("clnode_solve_device: %s", clnode_context_last_error(ctx));
        assert_int_equal(dcopy(out, dys, B * T * N * es, 2), 0);
        for (size_t b = 0; b < B; ++b) {
            clnode_trajectory_stats h;
            assert_int_equal(clnode_solution_stats(s, b, &h), CLNODE_OK);
            assert_int_equal(st[b].num_steps, h.num_steps);
            assert_int_equal(st[b].num_accepted, h.num_accepted);
            assert_int_equal(saved[b], T);
            size_t n = 0;
            const double *hys = NULL;
            assert_int_equal(clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, NULL, &hys),
                             CLNODE_OK);
            for (size_t i = 0; i < n * N; ++i) {
                double v = 0.0;
                float f = 0.0f;
                if (prec)
                    memcpy(&v, out + (b * T * N + i) * es, es);
                else {
                    memcpy(&f, out + (b * T * N + i) * es, es);
                    v = (double)f;
                }
                assert_memory_equal(&v, &hys[i], sizeof v);
            }
        }
        assert_int_equal(dcopy(out, dy1, B * N * es, 2), 0);
        for (size_t b = 0; b < B; ++b)
            for (size_t n = 0; n < N; ++n) {
                double v = 0.0;
                float f = 0.0f;
                if (prec)
                    memcpy(&v, out + (b * N + n) * es, es);
                else {
                    memcpy(&f, out + (b * N + n) * es, es);
                    v = (double)f;
                }
                assert_memory_equal(&v, &clnode_solution_y_final(s, b)[n], sizeof v);
            }
        dfree(dy);
        dfree(dts);
        dfree(dys);
        dfree(dy1);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    dlclose(rt);
}

int main(void)
{
    clnode_context *ctx = NULL;
    g_cuda_st = test_context_logged("cuda:0", g_why, &ctx);
    clnode_context_destroy(&ctx);
    if (g_cuda_st != CLNODE_OK) {
        fprintf(stderr, "\"cuda:0\" cannot be opened here: %s\n", g_why);
        if (test_device_required("cuda"))
            return test_device_absent("cuda", g_why);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),           cmocka_unit_test(test_no_cuda),
        cmocka_unit_test(test_absent_device),       cmocka_unit_test(test_solve_on_stream),
        cmocka_unit_test(test_solve_device_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
