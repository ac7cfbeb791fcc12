/* test_device_arrays.h - what the tests of the device-array entry points (clnode/device_solve.h,
 * clnode/device_gradient.h) share: their contexts (on PoCL, an OpenCL context and queue of the
 * test's own, adopted; the host), values in a solve's precision as bytes, and the caller's
 * arrays: a cl_mem of the test's OpenCL context or a host block, PAD bytes of 0xAB before it
 * and one after it. */
#ifndef TEST_DEVICE_ARRAYS_H
#define TEST_DEVICE_ARRAYS_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "clnode/opencl.h"
#include "test_device.h"
#include "test_opencl_find.h"

static cl_device_id g_dev;
static cl_context g_cctx;
static cl_command_queue g_q;
static clnode_context *g_ctx;  /* adopting g_cctx and g_q */
static clnode_context *g_host; /* "host" */

/* Leading bytes before each array in its buffer: the arrays are at an offset. */
#define PAD 24

/* Values in the solve's precision, as doubles (what a host solve sees) and as their bytes (what
 * a device array holds). */
static double in_prec(clnode_precision p, double x)
{
    return p == CLNODE_FP32 ? (double)(float)x : x;
}

static void to_bytes(clnode_precision p, const double *v, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; ++i) {
        if (p == CLNODE_FP32) {
            const float f = (float)v[i];
            memcpy(out + i * sizeof f, &f, sizeof f);
        } else {
            memcpy(out + i * sizeof(double), &v[i], sizeof(double));
        }
    }
}

static double from_bytes(clnode_precision p, const unsigned char *in, size_t i)
{
    if (p == CLNODE_FP32) {
        float f;
        memcpy(&f, in + i * sizeof f, sizeof f);
        return (double)f;
    }
    double d;
    memcpy(&d, in + i * sizeof d, sizeof d);
    return d;
}

/* A caller's array: on OpenCL a cl_mem holding `bytes` after PAD bytes of 0xAB, on the host a
 * malloc'ed block with the same layout. */
typedef struct arr {
    cl_mem mem;
    unsigned char *host;
    size_t bytes;
} arr;

static arr arr_make(int on_host, const unsigned char *init, size_t bytes)
{
    arr a = {NULL, NULL, bytes};
    unsigned char *tmp = malloc(PAD + bytes + 1);
    assert_non_null(tmp);
    memset(tmp, 0xAB, PAD + bytes + 1);
    if (init)
        memcpy(tmp + PAD, init, bytes);
    if (on_host) {
        a.host = tmp;
        return a;
    }
    cl_int e;
    a.mem =
        clCreateBuffer(g_cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, PAD + bytes + 1, tmp, &e);
    assert_int_equal(e, CL_SUCCESS);
    free(tmp);
    return a;
}

static clnode_device_array arr_at(const arr *a)
{
    clnode_device_array d = {a->host ? (void *)a->host : (void *)a->mem, PAD};
    return d;
}

/* The array's bytes (after PAD) into out; the bytes around it still 0xAB. */
static void arr_read(const arr *a, unsigned char *out)
{
    unsigned char *all = a->host;
    if (!all) {
        all = malloc(PAD + a->bytes + 1);
        assert_non_null(all);
        assert_int_equal(
            clEnqueueReadBuffer(g_q, a->mem, CL_TRUE, 0, PAD + a->bytes + 1, all, 0, NULL, NULL),
            CL_SUCCESS);
    }
    for (size_t i = 0; i < PAD; ++i)
        assert_int_equal(all[i], 0xAB);
    assert_int_equal(all[PAD + a->bytes], 0xAB);
    memcpy(out, all + PAD, a->bytes);
    if (!a->host)
        free(all);
}

static void arr_free(arr *a)
{
    if (a->mem)
        clReleaseMemObject(a->mem);
    free(a->host);
    a->mem = NULL;
    a->host = NULL;
}

/* A case of the device-array tests, and the cases each runs: fp32 and fp64, B = 1, 3 and 37,
 * saves at a shared list, per-trajectory lists and t1, the seed model and the forms model. */
typedef struct device_case {
    clnode_precision prec;
    size_t B;
    int forms;    /* the forms model (time input, inputs, scale), else the seed model */
    size_t nt;    /* save times (0: none) */
    int per_traj; /* a list per trajectory */
    int save_t1;
} device_case;

static const device_case g_cases[] = {
    {CLNODE_FP32, 1, 0, 0, 0, 1},  {CLNODE_FP32, 3, 0, 5, 0, 1},  {CLNODE_FP32, 37, 1, 4, 1, 1},
    {CLNODE_FP32, 37, 0, 6, 0, 0}, {CLNODE_FP64, 1, 1, 3, 0, 1},  {CLNODE_FP64, 3, 1, 4, 1, 0},
    {CLNODE_FP64, 37, 0, 5, 0, 1}, {CLNODE_FP64, 37, 1, 0, 0, 1},
};

/* A case's initial states and conditioning inputs (B x N and B x k values of its precision,
 * malloc'ed: *in has room for one value at least) and its options (the forms model's interval
 * [0, 0.5], the seed model's [0, 1]; the tolerances of its precision). */
static void case_values(clnode_precision prec, int forms, int save_t1, size_t B, size_t N, size_t k,
                        double **y0, double **in, clnode_solve_options *o)
{
    *y0 = malloc(B * N * sizeof **y0);
    *in = malloc((B * k + 1) * sizeof **in);
    assert_true(*y0 && *in);
    for (size_t i = 0; i < B * N; ++i)
        (*y0)[i] = in_prec(prec, 0.3 * sin(0.7 * (double)i + 0.1) + 0.05 * (double)(i % 5));
    for (size_t i = 0; i < B * k; ++i)
        (*in)[i] = in_prec(prec, 0.4 * cos(1.3 * (double)i));
    clnode_solve_default_options(o);
    o->precision = prec;
    o->t1 = forms ? 0.5 : 1.0;
    o->save_t1 = save_t1;
    o->rtol = prec == CLNODE_FP32 ? 1e-4 : 1e-7;
    o->atol = prec == CLNODE_FP32 ? 1e-6 : 1e-9;
}

/* A host problem's arrays as the caller's device arrays (on_host: host blocks, else cl_mem):
 * y0, the inputs and the save times with its values in precision prec, ys (with save times) and
 * y1 (with save_t1) to receive the results; *dp set to them and to p's batch and save times. */
typedef struct case_arrays {
    arr y0, in, ts, ys, y1;
} case_arrays;

static void case_arrays_make(int on_host, clnode_precision prec, const clnode_problem *p, size_t N,
                             size_t k, int save_t1, case_arrays *a, clnode_device_problem *dp)
{
    const size_t B = p->batch, nt = p->n_save_ts, ts_n = nt * (p->save_ts_per_trajectory ? B : 1);
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    unsigned char *bytes = malloc((B * N + B * k + ts_n + 1) * es);
    assert_non_null(bytes);
    to_bytes(prec, p->y0, B * N, bytes);
    a->y0 = arr_make(on_host, bytes, B * N * es);
    to_bytes(prec, p->inputs, k ? B * k : 0, bytes);
    a->in = arr_make(on_host, bytes, B * k * es);
    to_bytes(prec, p->save_ts, ts_n, bytes);
    a->ts = arr_make(on_host, bytes, ts_n * es);
    a->ys = arr_make(on_host, NULL, B * nt * N * es);
    a->y1 = arr_make(on_host, NULL, B * N * es);
    free(bytes);
    clnode_device_problem_default(dp);
    dp->batch = B;
    dp->y0 = arr_at(&a->y0);
    if (k)
        dp->inputs = arr_at(&a->in);
    if (nt) {
        dp->save_ts = arr_at(&a->ts);
        dp->ys = arr_at(&a->ys);
    }
    dp->n_save_ts = nt;
    dp->save_ts_per_trajectory = p->save_ts_per_trajectory;
    if (save_t1)
        dp->y1 = arr_at(&a->y1);
}

static void case_arrays_free(case_arrays *a)
{
    arr *all[] = {&a->y0, &a->in, &a->ts, &a->ys, &a->y1};
    for (size_t i = 0; i < 5; ++i)
        arr_free(all[i]);
}

/* The tests on PoCL's device through the caller's context and queue and on the host: 77 without
 * PoCL (cmocka's status otherwise). */
static int run_device_array_tests(const struct CMUnitTest *tests, size_t n)
{
    cl_platform_id plat;
    if (!test_opencl_find("pocl", &plat, &g_dev))
        return test_device_absent("opencl:pocl", "no PoCL platform with a device");
    cl_int e;
    g_cctx = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &e);
    if (e != CL_SUCCESS)
        return 1;
    g_q = clCreateCommandQueue(g_cctx, g_dev, 0, &e);
    if (e != CL_SUCCESS)
        return 1;
    clnode_context_options ho;
    clnode_context_default_options(&ho);
    ho.device = "host";
    if (clnode_context_create_opencl(NULL, g_cctx, g_dev, g_q, &g_ctx) != CLNODE_OK ||
        clnode_context_create(&ho, &g_host) != CLNODE_OK) {
        fprintf(stderr, "cannot create the contexts\n");
        return 1;
    }
    const int rc = _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    clnode_context_destroy(&g_host);
    clReleaseCommandQueue(g_q);
    clReleaseContext(g_cctx);
    return rc;
}

#endif /* TEST_DEVICE_ARRAYS_H */
