/* test_solve_device.c - clnode_solve_device (clnode/device_solve.h) on PoCL: y0, the inputs and
 * the save times in the caller's cl_mem buffers (at an offset), the results written into the
 * caller's buffers, on a context adopting the caller's queue (clnode_context_create_opencl).
 * Oracle: clnode_solve of the same problem from host arrays on the same context, bit for bit
 * (saved values, states at t1, every statistic), fp32 and fp64, B = 1, 3 and 37, saves at a
 * shared list, per-trajectory lists and t1, the seed model and a model with time input,
 * conditioning inputs and an output scale; the same on the host backend with host pointers; the
 * layout of the saved points (ys's unreached slots and the times array) against
 * clnode_solution_rows with trajectories that stop before the last save times; every refusal
 * with its message; and every list of save times clnode_solve refuses (not finite, out of order,
 * outside the interval; shared and per trajectory; fp32 and fp64), refused from the caller's
 * arrays on PoCL and on the host backend with clnode_solve's message for the same host arrays.
 * Skipped (77) without PoCL. */
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
#include "clnode/opencl.h"
#include "test_device.h"
#include "test_problem.h"
#include "test_opencl_find.h"

#include "test_device_arrays.h" /* g_ctx (PoCL), g_host and the caller's arrays */

/* The model with time input, two conditioning inputs and an output scale (N = 3). */
static clnode_model *forms_model(clnode_context *ctx)
{
    clnode_model *m = test_forms_model(ctx, CLNODE_ACT_TANH, 0.7);
    assert_non_null(m);
    return m;
}

static clnode_model *seed_model(clnode_context *ctx)
{
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    return m;
}

/* The case's solve on ctx from host arrays and from the caller's arrays: the same bits. */
static void run_case(clnode_context *ctx, int on_host, const device_case *c)
{
    clnode_model *m = c->forms ? forms_model(ctx) : seed_model(ctx);
    const size_t B = c->B, N = clnode_model_dim(m), k = clnode_model_num_inputs(m);
    const size_t es = c->prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t ts_n = c->nt * (c->per_traj ? B : 1);
    double *y0 = NULL, *in = NULL, *ts = malloc((ts_n + 1) * sizeof *ts);
    clnode_solve_options o;
    case_values(c->prec, c->forms, c->save_t1, B, N, k, &y0, &in, &o);
    assert_non_null(ts);
    for (size_t r = 0; r < (c->per_traj ? B : 1); ++r)
        for (size_t j = 0; j < c->nt; ++j) /* inside [0, t1], increasing, row r its own */
            ts[r * c->nt + j] =
                in_prec(c->prec, o.t1 *
                                     ((double)(j + 1) / (double)(c->nt + 1) +
                                      (c->per_traj ? 0.01 * (double)(r % 7) : 0.0)) *
                                     0.9);
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.inputs = k ? in : NULL;
    p.save_ts = c->nt ? ts : NULL;
    p.n_save_ts = c->nt;
    p.save_ts_per_trajectory = c->per_traj;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(ctx, m, &o, &p, &s));

    case_arrays ca;
    clnode_device_problem dp;
    case_arrays_make(on_host, c->prec, &p, N, k, c->save_t1, &ca, &dp);
    clnode_trajectory_stats *st = calloc(B, sizeof *st);
    size_t *saved = calloc(B, sizeof *saved);
    assert_true(st && saved);
    assert_ok(clnode_solve_device(ctx, m, &o, &dp, st, saved));

    unsigned char *out = malloc((B * c->nt * N + B * N + 1) * es);
    assert_non_null(out);
    long steps = 0;
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats h;
        assert_ok(clnode_solution_stats(s, b, &h));
        assert_int_equal(st[b].result, h.result);
        assert_int_equal(st[b].num_steps, h.num_steps);
        assert_int_equal(st[b].num_accepted, h.num_accepted);
        assert_int_equal(st[b].num_rejected, h.num_rejected);
        assert_int_equal(st[b].num_rhs_evals, h.num_rhs_evals);
        assert_memory_equal(&st[b].t_final, &h.t_final, sizeof h.t_final);
        assert_memory_equal(&st[b].first_step, &h.first_step, sizeof h.first_step);
        steps += h.num_steps;
    }
    assert_true(steps >= (long)B); /* every trajectory stepped */
    if (c->nt) {
        arr_read(&ca.ys, out);
        for (size_t b = 0; b < B; ++b) {
            size_t n = 0;
            const double *hys = NULL;
            assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, NULL, &hys));
            assert_int_equal(n, c->nt);
            assert_int_equal(saved[b], n);
            for (size_t i = 0; i < n * N; ++i) {
                const double v = from_bytes(c->prec, out, b * c->nt * N + i);
                assert_memory_equal(&v, &hys[i], sizeof v);
            }
        }
    }
    if (c->save_t1) {
        arr_read(&ca.y1, out);
        for (size_t b = 0; b < B; ++b) {
            const double *yf = clnode_solution_y_final(s, b);
            for (size_t n = 0; n < N; ++n) {
                const double v = from_bytes(c->prec, out, b * N + n);
                assert_memory_equal(&v, &yf[n], sizeof v);
                assert_true(v != y0[b * N + n]); /* it moved */
            }
        }
    }
    /* keep_tape: the solution given back is clnode_solve's with its tape, byte for byte */
    clnode_solution *kept = NULL, *hk = NULL;
    o.keep_tape = 1;
    dp.kept = &kept;
    assert_ok(clnode_solve(ctx, m, &o, &p, &hk));
    assert_ok(clnode_solve_device(ctx, m, &o, &dp, NULL, NULL));
    assert_non_null(kept);
    size_t n1 = 0, n2 = 0;
    assert_ok(clnode_solution_tape_export(ctx, m, hk, NULL, 0, &n1));
    assert_ok(clnode_solution_tape_export(ctx, m, kept, NULL, 0, &n2));
    assert_int_equal(n1, n2);
    unsigned char *e1 = malloc(n1), *e2 = malloc(n2);
    assert_true(e1 && e2);
    assert_ok(clnode_solution_tape_export(ctx, m, hk, e1, n1, &n1));
    assert_ok(clnode_solution_tape_export(ctx, m, kept, e2, n2, &n2));
    /* every byte but the checksum (24..32) and the count of waits for the device (144..152,
     * clnode_solution_syncs: the device solve also reads its flags and its statistics) */
    assert_memory_equal(e1, e2, 24);
    assert_memory_equal(e1 + 32, e2 + 32, 144 - 32);
    assert_memory_equal(e1 + 152, e2 + 152, n1 - 152);
    assert_true(clnode_solution_syncs(kept) > 0 || on_host);
    free(e1);
    free(e2);
    clnode_solution_destroy(&kept);
    clnode_solution_destroy(&hk);
    free(out);
    free(st);
    free(saved);
    case_arrays_free(&ca);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    free(y0);
    free(in);
    free(ts);
}

static void test_opencl_same_bits(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; ++i)
        run_case(g_ctx, 0, &g_cases[i]);
}

static void test_host_same_bits(void **state)
{
    (void)state;
    clnode_context *keep = g_ctx;
    g_ctx = g_host; /* assert_ok names its error */
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; ++i)
        run_case(g_host, 1, &g_cases[i]);
    g_ctx = keep;
}

/* The layout of the saved points when trajectories stop before the last save times (a shared
 * list, a short t1 per trajectory): ys's unreached slots +inf and the times array (ts) the save
 * times reached then +inf; without save times, ts the times where each trajectory stopped. Oracle:
 * clnode_solution_rows of clnode_solve's solution, bit for bit, in the solve's precision. */
static void run_layout(clnode_context *ctx, int on_host, clnode_precision prec, size_t nt)
{
    clnode_model *m = seed_model(ctx);
    const size_t B = 7, N = clnode_model_dim(m);
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t slots = nt ? nt : 1;
    double *y0 = malloc(B * N * sizeof *y0), t1s[7], ts[6];
    assert_true(y0 && nt <= 6);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = in_prec(prec, 0.25 * cos(0.9 * (double)i) + 0.1);
    for (size_t b = 0; b < B; ++b) /* 0.2 .. 1.0: the short ones stop before the last times */
        t1s[b] = 0.2 + 0.8 * (double)((3 * b) % B) / (double)(B - 1);
    for (size_t j = 0; j < nt; ++j)
        ts[j] = in_prec(prec, 0.15 + 0.8 * (double)j / (double)nt);
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    o.save_t1 = nt == 0;
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.t1s = t1s;
    p.save_ts = nt ? ts : NULL;
    p.n_save_ts = nt;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(ctx, m, &o, &p, &s));
    unsigned char *wt = malloc(B * slots * es), *wy = malloc(B * slots * N * es);
    unsigned char *gt = malloc(B * slots * es), *gy = malloc(B * slots * N * es);
    assert_true(wt && wy && gt && gy);
    if (prec == CLNODE_FP32)
        assert_ok(
            clnode_solution_rows_f32(s, 0, B, slots, (float *)(void *)wt, (float *)(void *)wy));
    else
        assert_ok(
            clnode_solution_rows_f64(s, 0, B, slots, (double *)(void *)wt, (double *)(void *)wy));

    unsigned char *bytes = malloc(B * N * sizeof(double));
    assert_non_null(bytes);
    to_bytes(prec, y0, B * N, bytes);
    arr ay0 = arr_make(on_host, bytes, B * N * es);
    to_bytes(prec, ts, nt, bytes);
    arr ats = arr_make(on_host, bytes, nt * es);
    arr ays = arr_make(on_host, NULL, B * slots * N * es),
        aout = arr_make(on_host, NULL, B * slots * es);
    clnode_device_problem dp;
    clnode_device_problem_default(&dp);
    dp.batch = B;
    dp.y0 = arr_at(&ay0);
    dp.t1s = t1s;
    if (nt) {
        dp.save_ts = arr_at(&ats);
        dp.n_save_ts = nt;
        dp.ys = arr_at(&ays);
    } else {
        dp.y1 = arr_at(&ays);
    }
    dp.ts = arr_at(&aout);
    size_t saved[7];
    assert_ok(clnode_solve_device(ctx, m, &o, &dp, NULL, saved));
    size_t short_ones = 0;
    for (size_t b = 0; b < B; ++b)
        short_ones += nt && saved[b] < nt;
    assert_true(!nt || (short_ones >= 2 && short_ones < B)); /* the case is what it claims */
    arr_read(&aout, gt);
    arr_read(&ays, gy);
    assert_memory_equal(gt, wt, B * slots * es);
    assert_memory_equal(gy, wy, B * slots * N * es);
    for (size_t b = 0; nt && b < B; ++b) /* and the padding is there: +inf after saved[b] */
        assert_true(saved[b] == nt || isinf(from_bytes(prec, gt, b * nt + saved[b])));
    free(wt);
    free(wy);
    free(gt);
    free(gy);
    free(bytes);
    free(y0);
    arr *all[] = {&ay0, &ats, &ays, &aout};
    for (size_t i = 0; i < 4; ++i)
        arr_free(all[i]);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

static void test_layout(void **state)
{
    (void)state;
    const clnode_precision precs[] = {CLNODE_FP32, CLNODE_FP64};
    clnode_context *keep = g_ctx;
    for (int on_host = 0; on_host < 2; ++on_host) {
        g_ctx = on_host ? g_host : keep; /* assert_ok names its error */
        for (size_t i = 0; i < 2; ++i) {
            run_layout(g_ctx, on_host, precs[i], 5);
            run_layout(g_ctx, on_host, precs[i], 0);
        }
    }
    g_ctx = keep;
}

/* clnode_solve_device's status, and its message containing `want`. */
static void expect(clnode_status got, clnode_status status, const char *want)
{
    if (got != status || !strstr(clnode_context_last_error(g_ctx), want))
        fail_msg("got %s (%s), want %s containing \"%s\"", clnode_status_name(got),
                 clnode_context_last_error(g_ctx), clnode_status_name(status), want);
}

static void test_refusals(void **state)
{
    (void)state;
    clnode_model *seed = seed_model(g_ctx), *forms = forms_model(g_ctx);
    const size_t B = 4, N = clnode_model_dim(seed), NF = clnode_model_dim(forms);
    assert_int_equal(NF, 3);
    float *y0 = malloc(B * N * sizeof *y0), in[4 * 2], ts[3] = {0.2f, 0.4f, 0.6f};
    assert_non_null(y0);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.01f * (float)i;
    for (size_t i = 0; i < 8; ++i)
        in[i] = 0.2f - 0.1f * (float)i;
    const size_t wide = N > NF ? N : NF;
    arr ay0 = arr_make(0, (const unsigned char *)y0, B * N * sizeof *y0);
    arr ain = arr_make(0, (const unsigned char *)in, sizeof in);
    arr ats = arr_make(0, (const unsigned char *)ts, sizeof ts);
    arr ays = arr_make(0, NULL, B * 3 * wide * sizeof(float));
    arr ay1 = arr_make(0, NULL, B * wide * sizeof(float));
    char msg[160];
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.save_t1 = 1;
    clnode_solve_options ob = o;
    clnode_device_problem good;
    clnode_device_problem_default(&good);
    good.batch = B;
    good.y0 = arr_at(&ay0);
    good.save_ts = arr_at(&ats);
    good.n_save_ts = 3;
    good.ys = arr_at(&ays);
    good.y1 = arr_at(&ay1);
    assert_ok(clnode_solve_device(g_ctx, seed, &o, &good, NULL, NULL));

    clnode_device_problem p = good;
    expect(clnode_solve_device(g_ctx, seed, &o, NULL, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem is NULL");
    p.struct_size = 3;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem");
    p = good;
    p.y0.handle = NULL;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "y0 is NULL");
    p = good;
    p.batch = 0;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "batch = 0");
    p = good;
    p.inputs = arr_at(&ain);
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "but the model takes none");
    expect(clnode_solve_device(g_ctx, forms, &o, &good, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "takes 2 conditioning inputs");
    p = good;
    p.save_ts.handle = NULL;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "n_save_ts = 3 but save_ts is NULL");
    p = good;
    p.n_save_ts = 0;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "n_save_ts = 0 but save_ts is given");
    p = good;
    p.ys.handle = NULL;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "ys is NULL");
    p = good;
    p.y1.handle = NULL;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "y1 is NULL");
    p = good;
    p.save_ts.handle = NULL;
    p.n_save_ts = 0;
    p.ts = arr_at(&ats);
    ob = o;
    ob.save_t1 = 0;
    expect(clnode_solve_device(g_ctx, seed, &ob, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem.ts is given, but there are neither save times nor save_t1");
    /* sizes: a batch larger than the buffers hold; an offset past the end */
    p = good;
    p.batch = 5;
    snprintf(msg, sizeof msg,
             "clnode_device_problem.y0: %zu bytes from byte 24 do not fit its buffer of %zu bytes",
             5 * N * sizeof(float), PAD + B * N * sizeof(float) + 1);
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT, msg);
    p = good;
    p.ys.offset = 1000;
    snprintf(msg, sizeof msg, "clnode_device_problem.ys: %zu bytes from byte 1000 do not fit",
             B * 3 * N * sizeof(float));
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT, msg);
    /* the wrong kind of array: a buffer of another OpenCL context (a handle that is no cl_mem at
     * all cannot be told: the ICD loader reads its dispatch table) */
    cl_int e;
    cl_context other = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 4096, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    p = good;
    p.y1.handle = foreign;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem.y1 is a buffer of another OpenCL context");
    clReleaseMemObject(foreign);
    clReleaseContext(other);
    /* precision: the arrays are the solve's; an fp64 solve reads 8 bytes a value */
    clnode_solve_options o64 = o;
    o64.precision = CLNODE_FP64;
    snprintf(msg, sizeof msg, "clnode_device_problem.y0: %zu bytes from byte 24 do not fit",
             B * N * sizeof(double));
    expect(clnode_solve_device(g_ctx, seed, &o64, &good, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           msg);
    /* what lives in host memory, and what the device's values cannot be checked for */
    ob = o;
    ob.save_t0 = 1;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_UNSUPPORTED,
           "save_t0");
    ob = o;
    ob.keep_tape = 1;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem.kept is NULL with keep_tape = 1");
    clnode_solution *kept = (clnode_solution *)&kept; /* not NULL: a refusal leaves it NULL */
    p = good;
    p.kept = &kept;
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "clnode_device_problem.kept is given with keep_tape = 0");
    assert_null(kept);
    ob = o;
    ob.save_steps = 1;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_UNSUPPORTED,
           "save_steps");
    ob = o;
    ob.t0 = 1.0;
    ob.t1 = 0.0;
    ob.dt0 = -0.02;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_UNSUPPORTED,
           "backward integration");
    ob = o;
    ob.t1 = 0.0;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_UNSUPPORTED,
           "t0 = t1 = 0");
    /* the options' own checks, as clnode_solve's */
    ob = o;
    ob.rtol = -1.0;
    expect(clnode_solve_device(g_ctx, seed, &ob, &good, NULL, NULL), CLNODE_ERR_INVALID_ARGUMENT,
           "rtol");

    /* non-finite y0 and inputs, found on the device and named */
    float *bad = malloc(B * N * sizeof *bad);
    assert_non_null(bad);
    memcpy(bad, y0, B * N * sizeof *bad);
    bad[2 * N + 1] = NAN;
    bad[2 * N + 3] = INFINITY;
    bad[3 * N + 0] = INFINITY;
    arr abad = arr_make(0, (const unsigned char *)bad, B * N * sizeof *bad);
    p = good;
    p.y0 = arr_at(&abad);
    expect(clnode_solve_device(g_ctx, seed, &o, &p, NULL, NULL), CLNODE_ERR_NONFINITE_INPUT,
           "y0 of trajectory 2, component 1 is nan (initial states must be finite)");
    float fy0[4 * 3], badin[4 * 2];
    for (size_t i = 0; i < 12; ++i)
        fy0[i] = 0.05f * (float)i;
    memcpy(badin, in, sizeof badin);
    badin[1 * 2 + 1] = -INFINITY;
    arr afy0 = arr_make(0, (const unsigned char *)fy0, sizeof fy0);
    arr abin = arr_make(0, (const unsigned char *)badin, sizeof badin);
    p = good;
    p.y0 = arr_at(&afy0);
    p.inputs = arr_at(&abin);
    expect(clnode_solve_device(g_ctx, forms, &o, &p, NULL, NULL), CLNODE_ERR_NONFINITE_INPUT,
           "conditioning input 1 of trajectory 1 is -inf (inputs must be finite)");
    p.inputs = arr_at(&ain); /* the same problem with finite inputs solves */
    assert_ok(clnode_solve_device(g_ctx, forms, &o, &p, NULL, NULL));
    /* after every refusal the context still solves, with the same bits as before */
    assert_ok(clnode_solve_device(g_ctx, seed, &o, &good, NULL, NULL));

    arr *all[] = {&ay0, &ain, &ats, &ays, &ay1, &abad, &afy0, &abin};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        arr_free(all[i]);
    free(y0);
    free(bad);
    clnode_model_destroy(&seed);
    clnode_model_destroy(&forms);
}

/* A list of save times clnode_solve refuses, B = 3 trajectories of the seed model on [0, 1]. */
typedef struct bad_ts {
    double ts[3 * 4]; /* 4 times: one shared list, or a row per trajectory */
    int per_traj;
    int t1s;    /* per-trajectory intervals: t1 = 1, 0.6, 1 */
    int bad_y0; /* y0 not finite as well: the save times are named first, as clnode_solve does */
} bad_ts;

/* c's refusal by clnode_solve from host arrays and by clnode_solve_device from the caller's
 * arrays on ctx: the same status and the same message. */
static void run_bad_ts(clnode_context *ctx, int on_host, clnode_precision prec, const bad_ts *c)
{
    clnode_model *m = seed_model(ctx);
    const size_t B = 3, N = clnode_model_dim(m), nt = 4, ts_n = nt * (c->per_traj ? B : 1);
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    double y0[3 * 16], ts[3 * 4], t1s[3] = {1.0, 0.6, 1.0};
    assert_true(N <= 16);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = in_prec(prec, 0.1 * (double)(i % 7) - 0.2);
    if (c->bad_y0)
        y0[N + 1] = NAN;
    for (size_t i = 0; i < ts_n; ++i)
        ts[i] = in_prec(prec, c->ts[i]);
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    o.save_t1 = 0;
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.save_ts = ts;
    p.n_save_ts = nt;
    p.save_ts_per_trajectory = c->per_traj;
    p.t1s = c->t1s ? t1s : NULL;
    clnode_solution *s = NULL;
    const clnode_status hs = clnode_solve(ctx, m, &o, &p, &s);
    char want[512];
    snprintf(want, sizeof want, "%s", clnode_context_last_error(ctx));

    unsigned char bytes[3 * 16 * sizeof(double)];
    to_bytes(prec, y0, B * N, bytes);
    arr ay0 = arr_make(on_host, bytes, B * N * es);
    to_bytes(prec, ts, ts_n, bytes);
    arr ats = arr_make(on_host, bytes, ts_n * es);
    arr ays = arr_make(on_host, NULL, B * nt * N * es);
    clnode_device_problem dp;
    clnode_device_problem_default(&dp);
    dp.batch = B;
    dp.y0 = arr_at(&ay0);
    dp.save_ts = arr_at(&ats);
    dp.n_save_ts = nt;
    dp.save_ts_per_trajectory = c->per_traj;
    dp.t1s = p.t1s;
    dp.ys = arr_at(&ays);
    const clnode_status ds = clnode_solve_device(ctx, m, &o, &dp, NULL, NULL);
    if (hs != CLNODE_ERR_INVALID_ARGUMENT || ds != hs ||
        strcmp(clnode_context_last_error(ctx), want) != 0)
        fail_msg("clnode_solve: %s (%s); clnode_solve_device: %s (%s)", clnode_status_name(hs),
                 want, clnode_status_name(ds), clnode_context_last_error(ctx));
    assert_null(s);
    arr_free(&ay0);
    arr_free(&ats);
    arr_free(&ays);
    clnode_model_destroy(&m);
}

/* Every list clnode_solve refuses is refused from the caller's arrays with its message, found
 * on the device (PoCL) and by the same check on the host backend, fp32 and fp64: a NaN, +inf
 * and -inf, a decreasing list, a time outside the interval (the shared list's, a trajectory's
 * own), the first bad time of the first bad row named with its value. */
static void test_bad_save_ts(void **state)
{
    (void)state;
    const double nan = NAN, inf = INFINITY;
    const bad_ts cases[] = {
        {{0.1, 0.3, nan, 0.8}, 0, 0, 0},
        {{0.1, inf, 0.5, 0.8}, 0, 0, 0},
        {{-inf, 0.3, 0.5, 0.8}, 0, 0, 0},
        {{0.1, 0.5, 0.4, 0.8}, 0, 0, 0},
        {{0.1, 0.5, 0.9, 1.25}, 0, 0, 0},
        {{0.1, 0.5, 0.9, 0.85}, 0, 0, 1},
        {{0.1, 0.2, 0.3, 0.4, 0.1, 0.3, 0.5, 0.7, 0.1, 0.2, 0.3, 0.4}, 1, 1, 0},
        {{0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4, nan, 0.2, 0.3, 0.4}, 1, 0, 0},
        {{0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.5, 0.4}, 1, 0, 0},
        {{0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 1.5, 0.1, 0.2, 0.5, 0.4}, 1, 0, 1},
    };
    const clnode_precision precs[] = {CLNODE_FP32, CLNODE_FP64};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        for (size_t q = 0; q < 2; ++q) {
            run_bad_ts(g_ctx, 0, precs[q], &cases[i]);
            run_bad_ts(g_host, 1, precs[q], &cases[i]);
        }
    /* the messages themselves (clnode_solve's wording) */
    run_bad_ts(g_ctx, 0, CLNODE_FP32, &cases[6]);
    assert_string_equal(clnode_context_last_error(g_ctx),
                        "save time 3 of trajectory 1 (0.7) lies outside its trajectory's "
                        "interval [t0, t1] = [0, 0.6]");
    run_bad_ts(g_ctx, 0, CLNODE_FP64, &cases[3]);
    assert_string_equal(clnode_context_last_error(g_ctx),
                        "save times must be monotone in the direction of integration (time 2 "
                        "= 0.4 after 0.5)");
    /* a shared list with per-trajectory intervals is clipped to each, not refused */
    clnode_model *m = seed_model(g_ctx);
    const size_t N = clnode_model_dim(m);
    float y0[3 * 16], ts[4] = {0.1f, 0.5f, 0.7f, 0.9f};
    const double t1s[3] = {1.0, 0.6, 1.0};
    for (size_t i = 0; i < 3 * N; ++i)
        y0[i] = 0.01f * (float)i;
    arr ay0 = arr_make(0, (const unsigned char *)y0, 3 * N * sizeof(float));
    arr ats = arr_make(0, (const unsigned char *)ts, sizeof ts);
    arr ays = arr_make(0, NULL, 3 * 4 * N * sizeof(float));
    clnode_device_problem dp;
    clnode_device_problem_default(&dp);
    dp.batch = 3;
    dp.y0 = arr_at(&ay0);
    dp.save_ts = arr_at(&ats);
    dp.n_save_ts = 4;
    dp.t1s = t1s;
    dp.ys = arr_at(&ays);
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.save_t1 = 0;
    size_t saved[3];
    assert_ok(clnode_solve_device(g_ctx, m, &o, &dp, NULL, saved));
    assert_int_equal(saved[0], 4);
    assert_int_equal(saved[1], 2);
    /* the interval in the solve's precision: t1 = 0.1 is 0.1f in fp32, and a last save time of
     * 0.1f (above the double 0.1, which clnode_solve's host list would hold instead) is t1 */
    const float at_t1[4] = {0.025f, 0.05f, 0.075f, 0.1f};
    arr at1 = arr_make(0, (const unsigned char *)at_t1, sizeof at_t1);
    dp.save_ts = arr_at(&at1);
    dp.t1s = NULL;
    o.t1 = 0.1;
    assert_ok(clnode_solve_device(g_ctx, m, &o, &dp, NULL, saved));
    for (size_t b = 0; b < 3; ++b)
        assert_int_equal(saved[b], 4);
    arr_free(&at1);
    arr_free(&ay0);
    arr_free(&ats);
    arr_free(&ays);
    clnode_model_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opencl_same_bits), cmocka_unit_test(test_host_same_bits),
        cmocka_unit_test(test_layout),           cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_save_ts),
    };
    return run_device_array_tests(tests, sizeof tests / sizeof tests[0]);
}
