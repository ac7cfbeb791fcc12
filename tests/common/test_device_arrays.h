/* test_device_arrays.h - the caller's arrays of the tests of the device-array entry points
 * (clnode/device_solve.h, clnode/device_gradient.h): values in a solve's precision as bytes, and
 * an array that is a cl_mem of the test's OpenCL context (g_cctx, its queue g_q: the including
 * file defines both before it includes this) or a host block, PAD bytes of 0xAB before it and
 * one after it. */
#ifndef TEST_DEVICE_ARRAYS_H
#define TEST_DEVICE_ARRAYS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "clnode/opencl.h"

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

#endif /* TEST_DEVICE_ARRAYS_H */
