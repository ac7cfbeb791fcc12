/* test_opencl_faults.c - what the OpenCL backend does when the driver fails: a kernel build that
 * fails, a device lost in the middle of a solve (every later command fails), a buffer the device
 * cannot allocate (before the first step, or while the saved steps grow), a device without
 * cl_khr_fp64. Each must give the documented status with a
 * message naming the failed call, no solution, no leak (the suite also runs under ASan), and a
 * context that solves correctly again once the driver recovers. Runs on PoCL, found by name (a
 * simulator registered ahead of it is never taken); skipped (77) without it.
 *
 * The faults are injected by interposition: this program defines clBuildProgram,
 * clEnqueueNDRangeKernel, clEnqueueReadBuffer, clCreateBuffer and clGetDeviceInfo, which the
 * dynamic linker binds for libclnode and CLBlast ahead of the ICD loader's; each forwards to the
 * loader's (dlsym RTLD_NEXT) unless its fault is armed. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "clnode.h"
#include "test_problem.h"
#include "test_device.h"
#include "test_opencl_find.h"

/* ---- the injected faults ---- */

typedef enum fault_kind {
    FAULT_NONE,
    FAULT_BUILD,   /* clBuildProgram fails for options containing g_fault.match */
    FAULT_ENQUEUE, /* clEnqueueNDRangeKernel fails from the countdown on (lost device) */
    FAULT_READ,    /* clEnqueueReadBuffer fails from the countdown on */
    FAULT_BUFFER,  /* clCreateBuffer fails from the countdown on */
    FAULT_NO_FP64, /* the device reports neither cl_khr_fp64 nor a double FP config */
} fault_kind;

static struct {
    fault_kind kind;
    long countdown; /* calls that still succeed before the fault fires */
    cl_int code;
    const char *match; /* FAULT_BUILD: "-DCLN_PRECISION" (clnode's program), "" (any, CLBlast's) */
    long fired;        /* failed calls */
} g_fault;

static void arm(fault_kind kind, long countdown, cl_int code)
{
    g_fault.kind = kind;
    g_fault.countdown = countdown;
    g_fault.code = code;
    g_fault.match = "";
    g_fault.fired = 0;
}

/* Whether the call of `kind` fails now; once fired it keeps failing (a lost device stays lost). */
static int fires(fault_kind kind)
{
    if (g_fault.kind != kind)
        return 0;
    if (g_fault.countdown > 0) {
        g_fault.countdown--;
        return 0;
    }
    g_fault.fired++;
    return 1;
}

static void *real_fn(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "dlsym(RTLD_NEXT, %s) failed: %s\n", name, dlerror());
        abort(); /* the test cannot run at all */
    }
    return f;
}

/* Function pointers and data pointers do not convert in ISO C; through memcpy they do on every
 * platform dlsym exists on. */
#define REAL(type, name, var)                                                                      \
    type var;                                                                                      \
    do {                                                                                           \
        void *p_ = real_fn(name);                                                                  \
        memcpy(&var, &p_, sizeof var);                                                             \
    } while (0)

typedef cl_int (*build_fn)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void(CL_CALLBACK *)(cl_program, void *), void *);
CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program program, cl_uint num_devices,
                                               const cl_device_id *device_list, const char *options,
                                               void(CL_CALLBACK *pfn_notify)(cl_program, void *),
                                               void *user_data)
{
    if (g_fault.kind == FAULT_BUILD && strstr(options ? options : "", g_fault.match) &&
        fires(FAULT_BUILD))
        return g_fault.code;
    REAL(build_fn, "clBuildProgram", f);
    return f(program, num_devices, device_list, options, pfn_notify, user_data);
}

typedef cl_int (*ndrange_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                             const size_t *, cl_uint, const cl_event *, cl_event *);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel,
                                                       cl_uint work_dim, const size_t *offset,
                                                       const size_t *global, const size_t *local,
                                                       cl_uint num_events, const cl_event *wait,
                                                       cl_event *event)
{
    if (fires(FAULT_ENQUEUE))
        return g_fault.code;
    REAL(ndrange_fn, "clEnqueueNDRangeKernel", f);
    return f(queue, kernel, work_dim, offset, global, local, num_events, wait, event);
}

typedef cl_int (*read_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                          const cl_event *, cl_event *);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue queue, cl_mem buffer,
                                                    cl_bool blocking, size_t offset, size_t size,
                                                    void *ptr, cl_uint num_events,
                                                    const cl_event *wait, cl_event *event)
{
    if (fires(FAULT_READ))
        return g_fault.code;
    REAL(read_fn, "clEnqueueReadBuffer", f);
    return f(queue, buffer, blocking, offset, size, ptr, num_events, wait, event);
}

typedef cl_mem (*create_buffer_fn)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size,
                                               void *host_ptr, cl_int *errcode_ret)
{
    if (fires(FAULT_BUFFER)) {
        if (errcode_ret)
            *errcode_ret = g_fault.code;
        return NULL;
    }
    REAL(create_buffer_fn, "clCreateBuffer", f);
    return f(context, flags, size, host_ptr, errcode_ret);
}

typedef cl_int (*device_info_fn)(cl_device_id, cl_device_info, size_t, void *, size_t *);
CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info param,
                                                size_t size, void *value, size_t *size_ret)
{
    REAL(device_info_fn, "clGetDeviceInfo", f);
    const cl_int e = f(device, param, size, value, size_ret);
    if (e != CL_SUCCESS || g_fault.kind != FAULT_NO_FP64 || !value)
        return e;
    if (param == CL_DEVICE_EXTENSIONS) { /* blank the name out, keeping the length */
        char *s = value, *hit;
        while ((hit = strstr(s, "cl_khr_fp64")) != NULL)
            memset(hit, ' ', strlen("cl_khr_fp64"));
        g_fault.fired++;
    } else if (param == CL_DEVICE_DOUBLE_FP_CONFIG && size >= sizeof(cl_device_fp_config)) {
        *(cl_device_fp_config *)value = 0;
    } else if ((param == CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE ||
                param == CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE) &&
               size >= sizeof(cl_uint)) {
        *(cl_uint *)value = 0;
    }
    return e;
}

/* After each test, also one that failed an assertion with a fault armed. */
static int disarm(void **state)
{
    (void)state;
    arm(FAULT_NONE, 0, CL_SUCCESS);
    return 0;
}

/* ---- solving ---- */

static clnode_context *opencl_context(void)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "opencl:pocl";
    clnode_context *ctx = NULL;
    const clnode_status st = clnode_context_create(&co, &ctx);
    if (st != CLNODE_OK)
        fail_msg("clnode_context_create(opencl:pocl): %s", clnode_status_name(st));
    return ctx;
}

/* The seed problem (12 steps at any batch on every device), batch 2. */
static clnode_status seed_solve(clnode_context *ctx, clnode_precision prec, clnode_solution **out)
{
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create_seed(ctx, &m);
    if (st != CLNODE_OK)
        return st;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = prec;
    const double y0[20] = {0};
    *out = NULL;
    st = clnode_solve(ctx, m, &o, TEST_PROBLEM(2, y0), out);
    clnode_model_destroy(&m);
    return st;
}

/* The seed model to t1 = 1000 saving every step (about 120 points), batch 2: the saved steps
 * outgrow their first rows (new buffers between groups of steps, several times) and are packed
 * into one more buffer at the end. */
static clnode_status steps_solve(clnode_context *ctx, clnode_solution **out)
{
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create_seed(ctx, &m);
    if (st != CLNODE_OK)
        return st;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 1000.0;
    o.save_steps = 1;
    const double y0[20] = {0};
    *out = NULL;
    st = clnode_solve(ctx, m, &o, TEST_PROBLEM(2, y0), out);
    clnode_model_destroy(&m);
    return st;
}

/* After the driver recovered: the same context solves the seed problem as always. */
static void assert_recovers(clnode_context *ctx, clnode_precision prec)
{
    arm(FAULT_NONE, 0, CL_SUCCESS);
    clnode_solution *s = NULL;
    const clnode_status st = seed_solve(ctx, prec, &s);
    if (st != CLNODE_OK)
        fail_msg("solve after recovery: %s: %s", clnode_status_name(st),
                 clnode_context_last_error(ctx));
    for (size_t b = 0; b < 2; ++b) {
        clnode_trajectory_stats t;
        assert_int_equal(clnode_solution_stats(s, b, &t), CLNODE_OK);
        assert_int_equal(t.result, CLNODE_RESULT_SUCCESS);
        assert_int_equal(t.num_steps, 12);
        assert_int_equal(t.num_accepted, 12);
    }
    clnode_solution_destroy(&s);
}

/* The failed solve: status `want` (or `alt`), no solution, a message naming `call`. */
static void assert_failed(clnode_context *ctx, clnode_status st, clnode_solution *s,
                          clnode_status want, clnode_status alt, const char *call)
{
    const char *msg = clnode_context_last_error(ctx);
    if (st != want && st != alt)
        fail_msg("status %s, expected %s or %s: %s", clnode_status_name(st),
                 clnode_status_name(want), clnode_status_name(alt), msg);
    assert_null(s);
    assert_non_null(msg);
    if (!strstr(msg, call))
        fail_msg("the message does not name %s: \"%s\"", call, msg);
    printf("  %s after %ld failed call(s): %s\n", clnode_status_name(st), g_fault.fired, msg);
}

/* clnode's own program fails to build; then (fresh context) the first of CLBlast's. */
static void test_build_failure(void **state)
{
    (void)state;
    clnode_context *ctx = opencl_context();
    arm(FAULT_BUILD, 0, CL_BUILD_PROGRAM_FAILURE);
    g_fault.match = "-DCLN_PRECISION";
    clnode_solution *s = NULL;
    clnode_status st = seed_solve(ctx, CLNODE_FP32, &s);
    assert_int_equal(g_fault.fired, 1);
    assert_failed(ctx, st, s, CLNODE_ERR_BUILD, CLNODE_ERR_BUILD, "clBuildProgram");
    assert_int_equal(clnode_context_last_native_error(ctx), CL_BUILD_PROGRAM_FAILURE);
    assert_recovers(ctx, CLNODE_FP32); /* the failed program was not cached */
    clnode_context_destroy(&ctx);

    /* CLBlast's programs are built (and cached by CLBlast) on its first GEMM of each shape class:
     * a failure there is a BLAS error naming the GEMM (CLBlast itself may print the driver's
     * message to stderr). */
    ctx = opencl_context();
    arm(FAULT_BUILD, 0, CL_BUILD_PROGRAM_FAILURE);
    s = NULL;
    st = seed_solve(ctx, CLNODE_FP32, &s);
    assert_true(g_fault.fired > 0);
    assert_failed(ctx, st, s, CLNODE_ERR_BLAS, CLNODE_ERR_BLAS, "CLBlast");
    assert_recovers(ctx, CLNODE_FP32);
    clnode_context_destroy(&ctx);
}

/* The device is lost after `after` successful kernel launches (CLBlast's included): every
 * later launch fails. Swept over the probe, the first steps and the middle of the solve. */
static void test_lost_device(void **state)
{
    (void)state;
    clnode_context *ctx = opencl_context();
    assert_recovers(ctx, CLNODE_FP32); /* programs built, probe cached: launches are the solve's */
    const long afters[] = {0, 1, 3, 10, 57, 200, 400, 100000};
    for (size_t i = 0; i < sizeof afters / sizeof afters[0]; ++i) {
        arm(FAULT_ENQUEUE, afters[i], CL_OUT_OF_RESOURCES);
        clnode_solution *s = NULL;
        const clnode_status st = seed_solve(ctx, CLNODE_FP32, &s);
        if (g_fault.fired == 0) { /* the solve launches fewer kernels than that */
            assert_int_equal(afters[i], 100000);
            assert_int_equal(st, CLNODE_OK);
            clnode_solution_destroy(&s);
            break;
        }
        /* CL_OUT_OF_RESOURCES maps to device memory; a CLBlast launch reports through CLBlast */
        assert_failed(ctx, st, s, CLNODE_ERR_DEVICE_MEMORY, CLNODE_ERR_BLAS, "CL_OUT_OF_RESOURCES");
        assert_int_equal(clnode_context_last_native_error(ctx), CL_OUT_OF_RESOURCES);
        assert_recovers(ctx, CLNODE_FP32);
    }
    /* a device that is gone: CL_DEVICE_NOT_AVAILABLE on the first launch of a fresh context */
    clnode_context *fresh = opencl_context();
    arm(FAULT_ENQUEUE, 0, CL_DEVICE_NOT_AVAILABLE);
    clnode_solution *s = NULL;
    const clnode_status st = seed_solve(fresh, CLNODE_FP32, &s);
    assert_failed(fresh, st, s, CLNODE_ERR_DEVICE, CLNODE_ERR_BLAS, "CL_DEVICE_NOT_AVAILABLE");
    assert_recovers(fresh, CLNODE_FP32);
    clnode_context_destroy(&fresh);
    clnode_context_destroy(&ctx);
}

/* The active-count read-back between groups of steps fails. */
static void test_read_failure(void **state)
{
    (void)state;
    clnode_context *ctx = opencl_context();
    assert_recovers(ctx, CLNODE_FP32);
    for (long after = 0; after < 3; ++after) {
        arm(FAULT_READ, after, CL_INVALID_COMMAND_QUEUE);
        clnode_solution *s = NULL;
        const clnode_status st = seed_solve(ctx, CLNODE_FP32, &s);
        assert_true(g_fault.fired > 0);
        assert_failed(ctx, st, s, CLNODE_ERR_DEVICE, CLNODE_ERR_DEVICE, "clEnqueueReadBuffer");
        assert_int_equal(clnode_context_last_native_error(ctx), CL_INVALID_COMMAND_QUEUE);
        assert_recovers(ctx, CLNODE_FP32);
    }
    clnode_context_destroy(&ctx);
}

/* Each of the solve's device buffers in turn cannot be allocated, those allocated before the
 * first step and those of the saved steps allocated while it runs. */
static void test_buffer_failure(void **state)
{
    (void)state;
    clnode_context *ctx = opencl_context();
    assert_recovers(ctx, CLNODE_FP32);
    for (long after = 0; after < 64; ++after) {
        arm(FAULT_BUFFER, after, CL_MEM_OBJECT_ALLOCATION_FAILURE);
        clnode_solution *s = NULL;
        const clnode_status st = seed_solve(ctx, CLNODE_FP32, &s);
        if (g_fault.fired == 0) { /* every buffer of the solve was tried */
            assert_true(after > 5);
            assert_int_equal(st, CLNODE_OK);
            clnode_solution_destroy(&s);
            break;
        }
        assert_failed(ctx, st, s, CLNODE_ERR_DEVICE_MEMORY, CLNODE_ERR_DEVICE_MEMORY,
                      "clCreateBuffer");
        assert_recovers(ctx, CLNODE_FP32);
    }
    /* the same while the solve runs: the saved steps' larger buffers, and their packing */
    arm(FAULT_NONE, 0, CL_SUCCESS);
    clnode_solution *ref = NULL;
    assert_int_equal(steps_solve(ctx, &ref), CLNODE_OK);
    size_t n_ref = 0;
    assert_int_equal(clnode_solution_saved(ref, 1, CLNODE_SAVE_STEPS, &n_ref, NULL, NULL),
                     CLNODE_OK);
    assert_true(n_ref > 64); /* past two doublings of the first 32 points */
    for (long after = 0; after < 128; ++after) {
        arm(FAULT_BUFFER, after, CL_MEM_OBJECT_ALLOCATION_FAILURE);
        clnode_solution *s = NULL;
        const clnode_status st = steps_solve(ctx, &s);
        if (g_fault.fired == 0) {
            assert_true(after > 8);
            assert_int_equal(st, CLNODE_OK);
            size_t n = 0;
            assert_int_equal(clnode_solution_saved(s, 1, CLNODE_SAVE_STEPS, &n, NULL, NULL),
                             CLNODE_OK);
            assert_int_equal(n, n_ref);
            clnode_solution_destroy(&s);
            break;
        }
        assert_failed(ctx, st, s, CLNODE_ERR_DEVICE_MEMORY, CLNODE_ERR_DEVICE_MEMORY,
                      "clCreateBuffer");
        assert_recovers(ctx, CLNODE_FP32);
    }
    clnode_solution_destroy(&ref);
    clnode_context_destroy(&ctx);
}

static void test_no_fp64(void **state)
{
    (void)state;
    arm(FAULT_NO_FP64, 0, CL_SUCCESS);
    clnode_context *ctx = opencl_context();
    assert_true(g_fault.fired > 0);
    assert_false(clnode_context_supports(ctx, CLNODE_FP64));
    assert_true(clnode_context_supports(ctx, CLNODE_FP32));
    clnode_solution *s = NULL;
    const clnode_status st = seed_solve(ctx, CLNODE_FP64, &s);
    assert_failed(ctx, st, s, CLNODE_ERR_NO_FP64, CLNODE_ERR_NO_FP64, "fp64");
    /* fp32 still solves on that device, with the fault still armed */
    s = NULL;
    assert_int_equal(seed_solve(ctx, CLNODE_FP32, &s), CLNODE_OK);
    clnode_trajectory_stats t;
    assert_int_equal(clnode_solution_stats(s, 0, &t), CLNODE_OK);
    assert_int_equal(t.num_steps, 12);
    clnode_solution_destroy(&s);
    clnode_context_destroy(&ctx);
    arm(FAULT_NONE, 0, CL_SUCCESS);
}

int main(void)
{
    /* The faults are counted from the first OpenCL call of a solve, probes included: a probe
     * result cached by an earlier process (lib/backends/probe_cache.c) would skip the probe's
     * GEMMs and move CLBlast's first build out of the solve under test. */
    setenv("CLNODE_PROBE_CACHE", "0", 1);
    cl_platform_id plat;
    cl_device_id dev;
    if (!test_opencl_find("pocl", &plat, &dev)) {
        return test_device_absent("opencl:pocl", "no PoCL platform with a device");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_build_failure, disarm),
        cmocka_unit_test_teardown(test_lost_device, disarm),
        cmocka_unit_test_teardown(test_read_failure, disarm),
        cmocka_unit_test_teardown(test_buffer_failure, disarm),
        cmocka_unit_test_teardown(test_no_fp64, disarm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
