/* test_gradient_device.c - clnode_gradient_compute_device (clnode/device_gradient.h) on PoCL: the
 * cotangents in the caller's cl_mem buffer (at an offset), the gradients of y0, of the inputs and
 * of the parameters written into the caller's buffers, on a context adopting the caller's queue;
 * and on the host backend with host pointers. Oracle: clnode_gradient_compute of the same kept
 * solve with the same cotangents as host doubles on the same context, bit for bit, fp32 and fp64,
 * B = 1, 3 and 37 (two blocks), the seed model and a model with time input, conditioning inputs
 * and an output scale (its gradient in an array of its own), B = 37 also in groups of one block,
 * saves at a shared list, per-trajectory lists and t1, the cotangents' rows with a padding slot of
 * NaN (not read); a solve kept by clnode_solve_device; results not wanted left untouched; every
 * refusal with its message, a NaN and an infinite cotangent refused with clnode_gradient_compute's
 * words. Skipped (77) without PoCL. */
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
#include "core/internal.h" /* the context's test settings: groups of one block */
#include "test_device.h"
#include "test_opencl_find.h"
#include "test_problem.h"

#include "test_device_arrays.h" /* g_ctx (PoCL), g_host and the caller's arrays */

/* A kept solve of the case and its cotangents: slots = its points + 1 (a padding slot of NaN,
 * which is not read), the rest values in the solve's precision. */
typedef struct kept {
    clnode_model *m;
    clnode_solution *s;
    size_t B, N, k, slots, es, np, ns; /* np: the weights and biases, ns: the scale */
    double *cot;
} kept;

static kept kept_make(clnode_context *ctx, const device_case *c, int by_device, int on_host)
{
    kept r;
    memset(&r, 0, sizeof r);
    r.m = c->forms ? test_forms_model(ctx, CLNODE_ACT_TANH, 0.7) : NULL;
    if (!c->forms)
        assert_int_equal(clnode_model_create_seed(ctx, &r.m), CLNODE_OK);
    assert_non_null(r.m);
    const size_t B = r.B = c->B, N = r.N = clnode_model_dim(r.m);
    const size_t k = r.k = clnode_model_num_inputs(r.m);
    r.es = c->prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t ts_n = c->nt * (c->per_traj ? B : 1);
    double *y0 = NULL, *in = NULL, *ts = malloc((ts_n + 1) * sizeof *ts);
    clnode_solve_options o;
    case_values(c->prec, c->forms, c->save_t1, B, N, k, &y0, &in, &o);
    assert_non_null(ts);
    o.keep_tape = 1;
    o.checkpoint_every = 3;
    /* with a list per trajectory or no list, an interval per trajectory: trajectories of
     * different step counts, which the reverse pass orders (most first) */
    const int own_t1 = c->per_traj || c->nt == 0;
    double *t1s = malloc(B * sizeof *t1s);
    assert_non_null(t1s);
    for (size_t b = 0; b < B; ++b)
        t1s[b] = own_t1 ? o.t1 * (0.2 + 2.8 * (double)((b * 7) % 11) / 10.0) : o.t1;
    for (size_t q = 0; q < (c->per_traj ? B : 1); ++q)
        for (size_t j = 0; j < c->nt; ++j)
            ts[q * c->nt + j] =
                in_prec(c->prec, t1s[q] * 0.9 * (double)(j + 1) / (double)(c->nt + 1));
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.inputs = k ? in : NULL;
    p.save_ts = c->nt ? ts : NULL;
    p.n_save_ts = c->nt;
    p.save_ts_per_trajectory = c->per_traj;
    p.t1s = own_t1 ? t1s : NULL;
    if (!by_device) {
        assert_ok(clnode_solve(ctx, r.m, &o, &p, &r.s));
    } else { /* kept by clnode_solve_device from the caller's arrays */
        case_arrays ca;
        clnode_device_problem dp;
        case_arrays_make(on_host, c->prec, &p, N, k, c->save_t1, &ca, &dp);
        dp.t1s = p.t1s;
        dp.kept = &r.s;
        assert_ok(clnode_solve_device(ctx, r.m, &o, &dp, NULL, NULL));
        case_arrays_free(&ca);
    }
    assert_non_null(r.s);
    r.slots = c->nt + (c->save_t1 ? 1 : 0) + 1;
    r.cot = malloc(B * r.slots * N * sizeof *r.cot);
    assert_non_null(r.cot);
    for (size_t b = 0; b < B; ++b) {
        const size_t P = clnode_solution_points(r.s, b);
        assert_int_equal(P, r.slots - 1);
        for (size_t i = 0; i < r.slots * N; ++i)
            r.cot[b * r.slots * N + i] =
                i < P * N ? in_prec(c->prec, 0.5 * cos(0.37 * (double)(b * 131 + i)) + 0.1) : NAN;
    }
    clnode_gradient *g = NULL;
    assert_ok(clnode_gradient_compute(ctx, r.m, NULL, r.s, r.slots, r.cot, &g));
    clnode_gradient_params(g, &r.np);
    clnode_gradient_out_scale(g, &r.ns);
    r.np -= r.ns;
    clnode_gradient_destroy(&g);
    free(y0);
    free(in);
    free(ts);
    free(t1s);
    return r;
}

static void kept_free(kept *r)
{
    clnode_solution_destroy(&r->s);
    clnode_model_destroy(&r->m);
    free(r->cot);
}

/* n values of the array a against the host doubles v, bit for bit (v holds values of the
 * solve's precision: the reverse pass computes in it). */
static void same_bits(clnode_precision prec, const arr *a, const double *v, size_t n)
{
    unsigned char *out = malloc(a->bytes + 1);
    assert_non_null(out);
    arr_read(a, out);
    for (size_t i = 0; i < n; ++i) {
        const double x = from_bytes(prec, out, i);
        if (memcmp(&x, &v[i], sizeof x) != 0)
            fail_msg("value %zu: %.17g from the device arrays, %.17g from host arrays", i, x, v[i]);
    }
    free(out);
}

/* The case's gradient from the caller's arrays against clnode_gradient_compute's. */
static void run_case(clnode_context *ctx, int on_host, const device_case *c, int by_device)
{
    kept r = kept_make(ctx, c, by_device, on_host);
    clnode_gradient *g = NULL;
    assert_ok(clnode_gradient_compute(ctx, r.m, NULL, r.s, r.slots, r.cot, &g));
    unsigned char *bytes = malloc(r.B * r.slots * r.N * r.es);
    assert_non_null(bytes);
    to_bytes(c->prec, r.cot, r.B * r.slots * r.N, bytes);
    arr acot = arr_make(on_host, bytes, r.B * r.slots * r.N * r.es);
    arr ay0 = arr_make(on_host, NULL, r.B * r.N * r.es);
    arr ain = arr_make(on_host, NULL, r.B * r.k * r.es);
    arr apar = arr_make(on_host, NULL, r.np * r.es);
    arr asc = arr_make(on_host, NULL, r.ns * r.es);
    clnode_device_gradient dg;
    clnode_device_gradient_default(&dg);
    dg.slots = r.slots;
    dg.cot = arr_at(&acot);
    dg.y0 = arr_at(&ay0);
    if (r.k)
        dg.inputs = arr_at(&ain);
    dg.params = arr_at(&apar);
    if (r.ns)
        dg.scale = arr_at(&asc);
    assert_ok(clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &dg));
    same_bits(c->prec, &ay0, clnode_gradient_y0(g), r.B * r.N);
    if (r.k)
        same_bits(c->prec, &ain, clnode_gradient_inputs(g), r.B * r.k);
    same_bits(c->prec, &apar, clnode_gradient_params(g, NULL), r.np);
    same_bits(c->prec, &asc, clnode_gradient_out_scale(g, NULL), r.ns);
    /* the parameters alone: the other arrays untouched (filled with 0xAB before) */
    arr_free(&ay0);
    ay0 = arr_make(on_host, NULL, r.B * r.N * r.es);
    arr_free(&apar);
    apar = arr_make(on_host, NULL, r.np * r.es);
    dg.y0.handle = NULL;
    dg.inputs.handle = NULL;
    dg.params = arr_at(&apar);
    assert_ok(clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &dg));
    same_bits(c->prec, &apar, clnode_gradient_params(g, NULL), r.np);
    unsigned char *raw = malloc(r.B * r.N * r.es);
    assert_non_null(raw);
    arr_read(&ay0, raw);
    for (size_t i = 0; i < r.B * r.N * r.es; ++i)
        assert_int_equal(raw[i], 0xAB);
    free(raw);
    arr *all[] = {&acot, &ay0, &ain, &apar, &asc};
    for (size_t i = 0; i < 5; ++i)
        arr_free(all[i]);
    free(bytes);
    clnode_gradient_destroy(&g);
    kept_free(&r);
}

static void test_opencl_same_bits(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; ++i)
        run_case(g_ctx, 0, &g_cases[i], i % 2);
    /* a group of one block at a time: B = 37 in two groups, the second's cotangents and rows
     * from trajectory 32 of the caller's arrays */
    g_ctx->test.rev_max_blocks = 1;
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; ++i)
        if (g_cases[i].B > CLNODE_GRADIENT_BLOCK)
            run_case(g_ctx, 0, &g_cases[i], i % 2);
    g_ctx->test.rev_max_blocks = 0;
}

static void test_host_same_bits(void **state)
{
    (void)state;
    clnode_context *keep = g_ctx;
    g_ctx = g_host; /* assert_ok names its error */
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; ++i)
        run_case(g_host, 1, &g_cases[i], i % 2);
    g_ctx = keep;
}

/* A refusal: the status, and the context's message containing `what`. */
static void refused(clnode_context *ctx, clnode_status got, clnode_status want, const char *what)
{
    if (got != want)
        fail_msg("%s: got %s (%s), not %s", what, clnode_status_name(got),
                 clnode_context_last_error(ctx), clnode_status_name(want));
    if (!strstr(clnode_context_last_error(ctx), what))
        fail_msg("the message \"%s\" does not name \"%s\"", clnode_context_last_error(ctx), what);
}

/* A non-finite cotangent at trajectory b, slot j, component n: refused as
 * clnode_gradient_compute refuses it (the same message after the function's name). */
static void bad_cot(clnode_context *ctx, int on_host, kept *r, clnode_precision prec, size_t b,
                    size_t j, size_t n, double v)
{
    const size_t at = (b * r->slots + j) * r->N + n;
    const double keep = r->cot[at];
    r->cot[at] = v;
    clnode_gradient *g = NULL;
    assert_int_equal(clnode_gradient_compute(ctx, r->m, NULL, r->s, r->slots, r->cot, &g),
                     CLNODE_ERR_NONFINITE_INPUT);
    char host_msg[512];
    snprintf(host_msg, sizeof host_msg, "%s", clnode_context_last_error(ctx));
    unsigned char *bytes = malloc(r->B * r->slots * r->N * r->es);
    assert_non_null(bytes);
    to_bytes(prec, r->cot, r->B * r->slots * r->N, bytes);
    arr acot = arr_make(on_host, bytes, r->B * r->slots * r->N * r->es);
    arr apar = arr_make(on_host, NULL, r->np * r->es);
    clnode_device_gradient dg;
    clnode_device_gradient_default(&dg);
    dg.slots = r->slots;
    dg.cot = arr_at(&acot);
    dg.params = arr_at(&apar);
    assert_int_equal(clnode_gradient_compute_device(ctx, r->m, NULL, r->s, &dg),
                     CLNODE_ERR_NONFINITE_INPUT);
    const char *dev_msg = clnode_context_last_error(ctx);
    assert_string_equal(strchr(dev_msg, ':'), strchr(host_msg, ':'));
    assert_non_null(strstr(dev_msg, "clnode_gradient_compute_device: the cotangent of trajectory"));
    unsigned char *raw = malloc(r->np * r->es);
    assert_non_null(raw);
    arr_read(&apar, raw); /* nothing written */
    for (size_t i = 0; i < r->np * r->es; ++i)
        assert_int_equal(raw[i], 0xAB);
    free(raw);
    arr_free(&acot);
    arr_free(&apar);
    free(bytes);
    r->cot[at] = keep;
}

static void refusals_on(clnode_context *ctx, int on_host, clnode_precision prec)
{
    const device_case c = {prec, 37, 0, 3, 0, 1};
    kept r = kept_make(ctx, &c, 0, on_host);
    bad_cot(ctx, on_host, &r, prec, 0, 0, 0, NAN);
    bad_cot(ctx, on_host, &r, prec, 36, 3, 2, -INFINITY);
    bad_cot(ctx, on_host, &r, prec, 5, 1, r.N - 1, NAN);
    bad_cot(ctx, on_host, &r, prec, 2, r.slots - 2, r.N - 1, INFINITY); /* its last point's last */
    unsigned char *bytes = malloc(r.B * r.slots * r.N * r.es);
    assert_non_null(bytes);
    to_bytes(prec, r.cot, r.B * r.slots * r.N, bytes);
    arr acot = arr_make(on_host, bytes, r.B * r.slots * r.N * r.es);
    arr ay0 = arr_make(on_host, NULL, r.B * r.N * r.es);
    clnode_device_gradient dg;
    clnode_device_gradient_default(&dg);
    dg.slots = r.slots;
    dg.cot = arr_at(&acot);
    dg.y0 = arr_at(&ay0);
    refused(ctx, clnode_gradient_compute_device(ctx, NULL, NULL, r.s, &dg),
            CLNODE_ERR_INVALID_ARGUMENT, "NULL model, solution or clnode_device_gradient");
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, NULL, &dg),
            CLNODE_ERR_INVALID_ARGUMENT, "NULL model, solution or clnode_device_gradient");
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, NULL),
            CLNODE_ERR_INVALID_ARGUMENT, "NULL model, solution or clnode_device_gradient");
    assert_int_equal(clnode_gradient_compute_device(NULL, r.m, NULL, r.s, &dg),
                     CLNODE_ERR_INVALID_ARGUMENT);
    clnode_device_gradient bad = dg;
    bad.cot.handle = NULL;
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
            CLNODE_ERR_INVALID_ARGUMENT, "clnode_device_gradient.cot is NULL");
    bad = dg;
    bad.inputs = dg.y0; /* the seed model takes no inputs */
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
            CLNODE_ERR_INVALID_ARGUMENT, "the model takes no conditioning inputs");
    bad = dg;
    bad.scale = dg.y0; /* nor an output scale */
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
            CLNODE_ERR_INVALID_ARGUMENT, "the model has no output scale");
    bad = dg;
    bad.slots = r.slots - 2;
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
            CLNODE_ERR_INVALID_ARGUMENT, "trajectory 0 saved 4 points, more than the 3 slots");
    bad = dg;
    bad.y0.offset += 1;
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
            CLNODE_ERR_INVALID_ARGUMENT, "clnode_device_gradient.y0: an offset of");
    bad = dg;
    bad.struct_size = 0; /* never given its defaults */
    assert_int_equal(clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
                     CLNODE_ERR_INVALID_ARGUMENT);
    if (!on_host) { /* OpenCL can tell a buffer's size */
        bad = dg;
        bad.cot.offset += r.es;
        refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, r.s, &bad),
                CLNODE_ERR_INVALID_ARGUMENT, "clnode_device_gradient.cot");
    }
    /* a solution that kept no tape */
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    clnode_problem p;
    clnode_problem_default(&p);
    double y0[64] = {0.1};
    p.batch = 1;
    p.y0 = y0;
    clnode_solution *plain = NULL;
    assert_ok(clnode_solve(ctx, r.m, &o, &p, &plain));
    refused(ctx, clnode_gradient_compute_device(ctx, r.m, NULL, plain, &dg),
            CLNODE_ERR_INVALID_ARGUMENT, "keep_tape");
    clnode_solution_destroy(&plain);
    arr_free(&acot);
    arr_free(&ay0);
    free(bytes);
    kept_free(&r);
}

static void test_refusals(void **state)
{
    (void)state;
    refusals_on(g_ctx, 0, CLNODE_FP32);
    refusals_on(g_ctx, 0, CLNODE_FP64);
    clnode_context *keep = g_ctx;
    g_ctx = g_host;
    refusals_on(g_host, 1, CLNODE_FP32);
    refusals_on(g_host, 1, CLNODE_FP64);
    g_ctx = keep;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opencl_same_bits),
        cmocka_unit_test(test_host_same_bits),
        cmocka_unit_test(test_refusals),
    };
    return run_device_array_tests(tests, sizeof tests / sizeof tests[0]);
}
