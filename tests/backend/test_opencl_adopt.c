/* test_opencl_adopt.c - clnode inside an application that owns its OpenCL context and queue:
 * the solve runs on the caller's queue and gives the host's steps and bits; the caller's objects
 * survive the clnode context; a queue that does not fit is refused. Runs on PoCL, found by name
 * (a simulator registered ahead of it is never taken); skipped (77) without it. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"
#include "clnode/opencl.h"
#include "test_device.h"
#include "test_opencl_find.h"
#include "test_adopt.h"

static cl_platform_id g_plat;
static cl_device_id g_dev;

/* The reference counts of the caller's queue and context once the driver has let go of them:
 * a driver may drop the references its finished commands held a little after clFinish returns
 * (PoCL does so from its worker threads), so they are read again for up to two seconds until they
 * are (queue_want, ctx_want). Returns 1 when they got there; a reference clnode kept never goes. */
static int settled_refs(cl_command_queue q, cl_context cctx, cl_uint queue_want, cl_uint ctx_want)
{
    for (int i = 0; i < 200; ++i) {
        cl_uint qr = 0, cr = 0;
        if (clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof qr, &qr, NULL) != CL_SUCCESS ||
            clGetContextInfo(cctx, CL_CONTEXT_REFERENCE_COUNT, sizeof cr, &cr, NULL) != CL_SUCCESS)
            return 0;
        if (qr == queue_want && cr == ctx_want)
            return 1;
        const struct timespec ten_ms = {0, 10000000L};
        nanosleep(&ten_ms, NULL);
    }
    fprintf(stderr, "the caller's queue and context kept references after clnode let go\n");
    return 0;
}

static void test_adopt(void **state)
{
    (void)state;
    cl_int e;
    cl_context cctx = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    cl_command_queue q = clCreateCommandQueue(cctx, g_dev, 0, &e);
    assert_int_equal(e, CL_SUCCESS);

    clnode_context *ctx = NULL, *host = NULL;
    assert_int_equal(clnode_context_create_opencl(NULL, cctx, g_dev, q, &ctx), CLNODE_OK);
    assert_string_equal(clnode_context_backend(ctx), "opencl");
    clnode_context_options ho;
    clnode_context_default_options(&ho);
    ho.device = "host";
    assert_int_equal(clnode_context_create(&ho, &host), CLNODE_OK);
    clnode_solution *s = test_seed_solve(ctx, 2), *sh = test_seed_solve(host, 2);
    test_assert_same_seed(s, sh, 2);
    clnode_solution_destroy(&s);
    clnode_solution_destroy(&sh);
    clnode_context_destroy(&ctx);
    clnode_context_destroy(&host);

    /* the caller's objects are still the caller's: usable after clnode let go */
    cl_mem buf = clCreateBuffer(cctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    const int pattern = 7;
    assert_int_equal(clEnqueueFillBuffer(q, buf, &pattern, sizeof pattern, 0, 64, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clFinish(q), CL_SUCCESS);
    clReleaseMemObject(buf);
    /* clnode released what it retained: the queue is the caller's alone, and the context has the
     * caller's reference and its queue's */
    assert_int_equal(settled_refs(q, cctx, 1, 2), 1);
    clReleaseCommandQueue(q);
    clReleaseContext(cctx);
}

static void test_refusals(void **state)
{
    (void)state;
    cl_int e;
    cl_context cctx = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create_opencl(NULL, cctx, g_dev, NULL, &ctx),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    cl_command_queue_properties props = 0;
    assert_int_equal(clGetDeviceInfo(g_dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof props, &props, NULL),
                     CL_SUCCESS);
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
        cl_command_queue oq =
            clCreateCommandQueue(cctx, g_dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &e);
        assert_int_equal(e, CL_SUCCESS);
        assert_int_equal(clnode_context_create_opencl(NULL, cctx, g_dev, oq, &ctx),
                         CLNODE_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        clReleaseCommandQueue(oq);
    }
    clReleaseContext(cctx);
}

int main(void)
{
    if (!test_opencl_find("pocl", &g_plat, &g_dev)) {
        return test_device_absent("opencl:pocl", "no PoCL platform with a device");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopt),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
