/* test_cuda_adopt.c - clnode inside an application that owns its CUDA stream
 * (clnode_context_create_cuda, clnode/cuda.h). Everywhere: the arguments are checked before CUDA
 * is touched, and where "cuda" cannot be opened (no library, no driver, no GPU) the adoption is
 * refused with the same status and a message that says why. With a GPU: a solve on the caller's
 * stream (the legacy default one, and a stream of the test's own) takes the host's steps and
 * gives its bits, and the caller's stream outlives the clnode context. */
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
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_no_cuda),
        cmocka_unit_test(test_absent_device),
        cmocka_unit_test(test_solve_on_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
