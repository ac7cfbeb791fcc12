/* test_oclgrind.c - the device code under a checker: a small conformance subset solved on
 * Oclgrind (an independent OpenCL implementation that simulates a device and checks every memory
 * access) and on the host, which must agree bit for bit. The seed model from t0 = 0 to t1 = 0.1
 * (two steps: a checked step costs tens of seconds), fp32 at batch 2 and fp64 at batch 3 (3 leaves
 * part of every work-group idle), saving every step and three interpolated times, so that every
 * kernel of cl/clnode.cl that a strict solve runs is exercised, dense output included (with a list
 * of save times shared by the batch, and with each trajectory its own, fp32 at batch 3). The saved
 * steps start with room for one point (the contexts' test setting steps_cap_first), so that their
 * growth runs too: the rectangular copy to larger buffers and the finish kernel's new arguments.
 * Then the seed model with an output scale of one value per component, fp32 at batch 2: the
 * scale's own pass and the fused last-layer pass with a scale.
 *
 * Then the first steps chosen by the solver (dt0_auto, cl/cln_dt0.h: its kernel, the probe's
 * bare field), fp64 at batch 3 (forward only: its tape is any solve's, and going back through it
 * on the simulator takes four minutes; test_dt0 and the gradient conformance suite reverse such
 * solves on PoCL). CLNODE_OCLGRIND_ONLY=dt0 runs that case alone; CLNODE_OCLGRIND_ONLY=0, 1 or 2
 * runs one case of the first three alone (fp32 at batch 2, fp64 at batch 3, the save times per
 * trajectory), forward and reverse.
 *
 * Every one of those solves keeps its tape and goes back through the reverse pass on the
 * simulator (cl/cln_reverse_kernels.h), against the host's gradient bit for bit: fp64 at batch 3
 * recomputing its steps from every second state (checkpoint_every 2: the group kernels), the save
 * times per trajectory with the weight sums by the GEMM (the gathers, CLBlast, the additions), the
 * others in the one kernel, the scale's sums; the products of the fp64 case by the backend's GEMM
 * with the element-wise kernels beside them, the others' in the pass's own kernels with that work
 * inside them (cln_rev_gemm_act, cln_rev_gemm_delta); and a small model taking t and two
 * conditioning inputs with an output scale of one value (the inputs' and the time column's
 * kernels), whose solve goes forwards through the tangent pass too (cl/cln_tangent_kernels.h: two
 * directions of y0, the inputs and every parameter, the scale's included; the dense output's and
 * t1's points), against the host's tangents bit for bit. CLNODE_OCLGRIND_ONLY=forms runs that
 * model's case alone.
 * A solve from and into buffers of the device's cl_context (clnode_solve_device, fp32 batch 2,
 * at an offset) against clnode_solve's bits; CLNODE_OCLGRIND_ONLY=device runs it alone. The
 * reverse pass from and into such buffers (clnode_gradient_compute_device, fp32 batch 2, the
 * cotangents at an offset) against clnode_gradient_compute's bits;
 * CLNODE_OCLGRIND_ONLY=device-gradient runs it alone.
 *
 * The checks themselves (--check-api --data-races --uninitialized, as the environment variables
 * OCLGRIND_CHECK_API, OCLGRIND_DATA_RACES, OCLGRIND_UNINITIALIZED) and the count of reports are
 * done by tests/backend/oclgrind_check.py, which runs this program.
 *
 * Usage: test_oclgrind [DEVICE] (default "opencl:oclgrind"); absent: 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clnode.h"
#include "test_problem.h"
#include "backends/opencl/opencl_internal.h" /* the device's cl_context and queue */
#include "core/internal.h"                   /* the contexts' test settings */
#include "test_device.h"

#define N_TS 3
#define MAX_BATCH 3

static const double g_ts[N_TS] = {0.01, 0.05, 0.09};
static long g_every = 1; /* the solves' checkpoint_every */
static int g_auto;       /* the solves choose their first steps (dt0_auto) */
/* each trajectory its own save times (clnode_problem.save_ts_per_trajectory) */
static const double g_rows[MAX_BATCH * N_TS] = {0.0, 0.02, 0.07, 0.03, 0.03, 0.1, 0.01, 0.06, 0.08};

static double now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clnode_context *context_on(const char *device)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = device;
    clnode_context *ctx = NULL;
    return clnode_context_create(&co, &ctx) == CLNODE_OK ? ctx : NULL;
}

static clnode_solution *solve(clnode_context *ctx, const clnode_model *m, clnode_precision prec,
                              size_t batch, int rows)
{
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    o.precision = prec;
    o.t1 = 0.1;
    o.save_steps = 1;
    /* as many attempts as the solve takes: the driver enqueues steps in groups, and steps
     * enqueued after every trajectory froze still run their GEMMs (a waste a simulator feels) */
    o.max_steps = 2;
    pb.save_ts = rows ? g_rows : g_ts;
    pb.n_save_ts = N_TS;
    pb.save_ts_per_trajectory = rows;
    /* the precision guard's probes run GEMMs of their own, not the solver's kernels: off, to
     * keep the simulated run short (the conformance suites cover the guard) */
    o.precision_guard = CLNODE_GUARD_OFF;
    o.keep_tape = 1; /* the same bits (the reverse pass's checks below) */
    o.checkpoint_every = g_every;
    if (g_auto) {
        o.dt0 = 0.0;
        o.dt0_auto = 1;
    }
    double y0[MAX_BATCH * 10];
    for (size_t i = 0; i < batch * 10; ++i)
        y0[i] = 0.1 * (double)(i % 10) - 0.05 * (double)(i / 10); /* rows differ */
    clnode_solution *s = NULL;
    if (clnode_solve(ctx, m, &o, test_batch(&pb, batch, y0), &s) != CLNODE_OK) {
        printf("FAIL: solve on %s: %s\n", clnode_context_device(ctx),
               clnode_context_last_error(ctx));
        return NULL;
    }
    return s;
}

/* Same steps and the same bits in everything saved; prints the first difference. */
static int same(const clnode_solution *a, const clnode_solution *b, const char *what)
{
    const size_t B = clnode_solution_batch(a), N = clnode_solution_dim(a);
    for (size_t t = 0; t < B; ++t) {
        clnode_trajectory_stats sa, sb;
        clnode_solution_stats(a, t, &sa);
        clnode_solution_stats(b, t, &sb);
        if (sa.result != sb.result || sa.num_steps != sb.num_steps ||
            sa.num_accepted != sb.num_accepted || sa.num_rhs_evals != sb.num_rhs_evals ||
            memcmp(&sa.first_step, &sb.first_step, sizeof(double)) != 0) {
            printf("FAIL: %s trajectory %zu: %s after %ld steps, host %s after %ld\n", what, t,
                   clnode_result_name(sa.result), sa.num_steps, clnode_result_name(sb.result),
                   sb.num_steps);
            return 0;
        }
        for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_T1; ++k) {
            size_t na, nb;
            const double *ta, *tb, *ya, *yb;
            clnode_solution_saved(a, t, (clnode_save_kind)k, &na, &ta, &ya);
            clnode_solution_saved(b, t, (clnode_save_kind)k, &nb, &tb, &yb);
            if (na != nb || (na && (memcmp(ta, tb, na * sizeof(double)) != 0 ||
                                    memcmp(ya, yb, na * N * sizeof(double)) != 0))) {
                printf("FAIL: %s trajectory %zu: saved points of kind %d differ from the host's\n",
                       what, t, k);
                return 0;
            }
        }
    }
    return 1;
}

/* The most points a trajectory of s saved: the slots of its rows. */
static size_t max_points(const clnode_solution *s)
{
    size_t slots = 0;
    for (size_t b = 0; b < clnode_solution_batch(s); ++b)
        slots = clnode_solution_points(s, b) > slots ? clnode_solution_points(s, b) : slots;
    return slots;
}

/* The reverse pass of sd (solved on dev) on dev against that of sh (the same problem solved on the
 * host) on the host, cotangents of a fixed pattern: every value of the gradient bit-identical. */
static int same_gradient(clnode_context *dev, const clnode_model *md, const clnode_solution *sd,
                         clnode_context *host, const clnode_model *mh, const clnode_solution *sh,
                         const char *what)
{
    const size_t B = clnode_solution_batch(sd), N = clnode_solution_dim(sd);
    const size_t slots = max_points(sd);
    double cot[MAX_BATCH * 16 * 10];
    if (B * slots * N > sizeof cot / sizeof cot[0])
        return printf("FAIL: %s: %zu cotangents\n", what, B * slots * N), 0;
    for (size_t i = 0; i < B * slots * N; ++i)
        cot[i] = 0.25 * (double)(i % 7) - 0.5;
    clnode_gradient *gd = NULL, *gh = NULL;
    const double t0 = now();
    const clnode_status st = clnode_gradient_compute(dev, md, NULL, sd, slots, cot, &gd);
    const double secs = now() - t0;
    int ok = st == CLNODE_OK &&
             clnode_gradient_compute(host, mh, NULL, sh, slots, cot, &gh) == CLNODE_OK;
    if (!ok)
        printf("FAIL: %s: the reverse pass: %s\n", what,
               clnode_context_last_error(st == CLNODE_OK ? host : dev));
    size_t np = 0, nin = clnode_model_num_inputs(md);
    const double *pd = ok ? clnode_gradient_params(gd, &np) : NULL;
    if (ok && (memcmp(clnode_gradient_y0(gd), clnode_gradient_y0(gh), B * N * sizeof(double)) ||
               memcmp(pd, clnode_gradient_params(gh, NULL), np * sizeof(double)) ||
               (nin && memcmp(clnode_gradient_inputs(gd), clnode_gradient_inputs(gh),
                              B * nin * sizeof(double))))) {
        printf("FAIL: %s: the gradient differs from the host's\n", what);
        ok = 0;
    }
    if (ok)
        printf("%s: its gradient (%zu parameters) bit-identical to the host's (%.0f s)\n", what, np,
               secs);
    clnode_gradient_destroy(&gd);
    clnode_gradient_destroy(&gh);
    return ok;
}

/* The tangent pass of sd on dev against that of sh on the host (cl/cln_tangent_kernels.h), two
 * directions of y0, the inputs and every parameter (np of them) of a fixed pattern: every tangent
 * bit-identical. */
static int same_tangent(clnode_context *dev, const clnode_model *md, const clnode_solution *sd,
                        clnode_context *host, const clnode_model *mh, const clnode_solution *sh,
                        size_t np, const char *what)
{
    enum {
        ND = 2
    };
    const size_t B = clnode_solution_batch(sd), N = clnode_solution_dim(sd);
    const size_t slots = max_points(sd), nin = clnode_model_num_inputs(md);
    double *dy0 = malloc(ND * B * N * sizeof *dy0), *dp = malloc(ND * np * sizeof *dp);
    double *dc = malloc(ND * B * (nin ? nin : 1) * sizeof *dc);
    int ok = dy0 && dp && dc;
    for (size_t i = 0; ok && i < ND * B * N; ++i)
        dy0[i] = 0.125 * (double)(i % 5) - 0.25;
    for (size_t i = 0; ok && i < ND * B * nin; ++i)
        dc[i] = 0.25 * (double)(i % 3) - 0.125;
    for (size_t i = 0; ok && i < ND * np; ++i)
        dp[i] = 0.0625 * (double)(i % 9) - 0.25;
    clnode_tangent *td = NULL, *th = NULL;
    const double t0 = now();
    const clnode_status st =
        ok ? clnode_tangent_compute(dev, md, NULL, sd, slots, ND, dy0, dc, dp, &td)
           : CLNODE_ERR_OUT_OF_MEMORY;
    const double secs = now() - t0;
    ok = st == CLNODE_OK &&
         clnode_tangent_compute(host, mh, NULL, sh, slots, ND, dy0, dc, dp, &th) == CLNODE_OK;
    if (!ok)
        printf("FAIL: %s: the tangent pass: %s\n", what,
               clnode_context_last_error(st == CLNODE_OK ? host : dev));
    if (ok && memcmp(clnode_tangent_values(td), clnode_tangent_values(th),
                     ND * B * slots * N * sizeof(double)) != 0) {
        printf("FAIL: %s: the tangents differ from the host's\n", what);
        ok = 0;
    }
    if (ok)
        printf("%s: its tangents (%d directions) bit-identical to the host's (%.0f s)\n", what, ND,
               secs);
    clnode_tangent_destroy(&td);
    clnode_tangent_destroy(&th);
    free(dy0);
    free(dp);
    free(dc);
    return ok;
}

/* A 3-dimensional MLP taking t and two conditioning inputs, with an output scale of one value
 * (the reverse pass's kernels of the inputs, the time column and the scale's one sum), on ctx. */
static clnode_model *forms_model(clnode_context *ctx)
{
    return test_forms_model(ctx, CLNODE_ACT_GELU, 0.75);
}

/* The forms model's solve of two trajectories with their inputs, saved at ts and t1, kept. */
static clnode_solution *solve_forms(clnode_context *ctx, const clnode_model *m)
{
    static const double y0[6] = {0.1, -0.2, 0.3, 0.0, 0.5, -0.4}, in[4] = {0.3, -0.6, 1.0, 0.2};
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.t1 = 0.1;
    o.max_steps = 2;
    o.keep_tape = 1;
    o.precision_guard = CLNODE_GUARD_OFF;
    clnode_problem p = test_problem(2, y0);
    p.inputs = in;
    p.save_ts = g_ts;
    p.n_save_ts = N_TS;
    clnode_solution *s = NULL;
    return clnode_solve(ctx, m, &o, &p, &s) == CLNODE_OK ? s : NULL;
}

/* The reverse pass's kernels on the simulator: the forward's solves below, each gone back through
 * (the checkpointed recomputation, the weight sums by the GEMM, and the one kernel), and the
 * forms model's. */
static int reverse_forms(clnode_context *dev, clnode_context *host)
{
    clnode_model *md = forms_model(dev), *mh = forms_model(host);
    clnode_solution *sd = md ? solve_forms(dev, md) : NULL, *sh = mh ? solve_forms(host, mh) : NULL;
    int ok = sd && sh && same(sd, sh, "time, inputs and a scale");
    ok = ok && same_gradient(dev, md, sd, host, mh, sh, "time, inputs and a scale");
    /* its parameters: W0 8 x 6, b0 8, W1 3 x 8, b1 3, the scale */
    ok = ok && same_tangent(dev, md, sd, host, mh, sh, 8 * 6 + 8 + 3 * 8 + 3 + 1,
                            "time, inputs and a scale");
    clnode_solution_destroy(&sd);
    clnode_solution_destroy(&sh);
    clnode_model_destroy(&md);
    clnode_model_destroy(&mh);
    return ok;
}

/* clnode_gradient_compute_device on the simulator (fp32, batch 2, a kept solve with save times
 * and t1): the cotangents in a buffer of the device's cl_context at an offset (checked there by
 * cln_nonfinite_rows, copied per group), the gradients of y0 and the parameters written into
 * buffers there (cln_rev_scatter), under the checkers: the same bits as clnode_gradient_compute
 * of the same cotangents. */
static int device_gradient(clnode_context *dev, const clnode_model *md)
{
    enum {
        B = 2,
        N = 10,
        PAD = 4,
        SLOTS = N_TS + 1,
        NP = 16384 /* at least the seed model's parameters */
    };
    opencl_backend *ob = ocl(dev->backend);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 0.1;
    o.max_steps = 2;
    o.save_t1 = 1;
    o.keep_tape = 1;
    o.precision_guard = CLNODE_GUARD_OFF;
    double y0[B * N], cot[B * SLOTS * N];
    float cotf[PAD + B * SLOTS * N];
    static float out[B * N + NP];
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = (double)(float)(0.1 * (double)(i % 10) - 0.05 * (double)(i / 10));
    for (size_t i = 0; i < B * SLOTS * N; ++i) {
        cotf[PAD + i] = (float)(0.5 * cos(0.3 * (double)i));
        cot[i] = (double)cotf[PAD + i];
    }
    clnode_problem pb = test_problem(B, y0);
    pb.save_ts = g_ts;
    pb.n_save_ts = N_TS;
    clnode_solution *s = NULL;
    clnode_gradient *g = NULL;
    size_t np = 0;
    if (clnode_solve(dev, md, &o, &pb, &s) != CLNODE_OK ||
        clnode_gradient_compute(dev, md, NULL, s, SLOTS, cot, &g) != CLNODE_OK) {
        printf("FAIL: kept solve or its gradient: %s\n", clnode_context_last_error(dev));
        clnode_solution_destroy(&s);
        return 0;
    }
    clnode_gradient_params(g, &np);
    cl_int e[3];
    cl_mem mc = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof cotf,
                               cotf, &e[0]);
    memset(out, 0, sizeof out); /* written whole, so the checker sees them initialised */
    cl_mem my = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                               B * N * sizeof(float), out, &e[1]);
    cl_mem mp = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                               NP * sizeof(float), out, &e[2]);
    int ok = np <= NP && e[0] == CL_SUCCESS && e[1] == CL_SUCCESS && e[2] == CL_SUCCESS;
    clnode_device_gradient dg;
    clnode_device_gradient_default(&dg);
    dg.slots = SLOTS;
    dg.cot = (clnode_device_array){mc, PAD * sizeof(float)};
    dg.y0 = (clnode_device_array){my, 0};
    dg.params = (clnode_device_array){mp, 0};
    const double t0 = now();
    if (ok && clnode_gradient_compute_device(dev, md, NULL, s, &dg) != CLNODE_OK) {
        printf("FAIL: clnode_gradient_compute_device: %s\n", clnode_context_last_error(dev));
        ok = 0;
    }
    ok = ok &&
         clEnqueueReadBuffer(ob->queue, my, CL_TRUE, 0, B * N * sizeof(float), out, 0, NULL,
                             NULL) == CL_SUCCESS &&
         clEnqueueReadBuffer(ob->queue, mp, CL_TRUE, 0, np * sizeof(float), out + B * N, 0, NULL,
                             NULL) == CL_SUCCESS;
    for (size_t i = 0; ok && i < B * N; ++i)
        ok = (double)out[i] == clnode_gradient_y0(g)[i];
    for (size_t i = 0; ok && i < np; ++i)
        ok = (double)out[B * N + i] == clnode_gradient_params(g, NULL)[i];
    printf(ok ? "clnode_gradient_compute_device fp32 batch 2: every value bit-identical to "
                "clnode_gradient_compute's (%.0f s)\n"
              : "FAIL: clnode_gradient_compute_device differs from clnode_gradient_compute "
                "(%.0f s)\n",
           now() - t0);
    cl_mem all[3] = {mc, my, mp};
    for (int i = 0; i < 3; ++i)
        if (all[i])
            clReleaseMemObject(all[i]);
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    return ok;
}

/* A simulator is never the device a user gets without naming it: "opencl" and "opencl:cpu" take
 * another device, or none. */
/* clnode_solve_device on the simulator: y0 and the save times in buffers of the device's own
 * cl_context, the values at the save times and at t1 written into buffers there (fp32, batch 2,
 * the copies at an offset), and y0's finiteness kernel, under the checkers: the same bits as
 * clnode_solve of the same values. */
static int device_arrays(clnode_context *dev, const clnode_model *md)
{
    enum {
        B = 2,
        N = 10,
        PAD = 4
    };
    opencl_backend *ob = ocl(dev->backend);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 0.1;
    o.max_steps = 2;
    o.save_t1 = 1;
    o.precision_guard = CLNODE_GUARD_OFF;
    float y0f[PAD + B * N], tsf[PAD + N_TS], out[B * N_TS * N + B * N];
    double y0[B * N];
    for (size_t i = 0; i < B * N; ++i) {
        y0f[PAD + i] = (float)(0.1 * (double)(i % 10) - 0.05 * (double)(i / 10));
        y0[i] = (double)y0f[PAD + i];
    }
    for (size_t j = 0; j < N_TS; ++j)
        tsf[PAD + j] = (float)g_ts[j];
    double ts[N_TS];
    for (size_t j = 0; j < N_TS; ++j)
        ts[j] = (double)tsf[PAD + j];
    clnode_problem pb = test_problem(B, y0);
    pb.save_ts = ts;
    pb.n_save_ts = N_TS;
    clnode_solution *s = NULL;
    if (clnode_solve(dev, md, &o, &pb, &s) != CLNODE_OK) {
        printf("FAIL: solve: %s\n", clnode_context_last_error(dev));
        return 0;
    }
    cl_int e[4];
    cl_mem my0 = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof y0f,
                                y0f, &e[0]);
    cl_mem mts = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof tsf,
                                tsf, &e[1]);
    memset(out, 0, sizeof out); /* written whole, so the checker sees them initialised */
    cl_mem mys = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                B * N_TS * N * sizeof(float), out, &e[2]);
    cl_mem my1 = clCreateBuffer(ob->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                B * N * sizeof(float), out, &e[3]);
    int ok = e[0] == CL_SUCCESS && e[1] == CL_SUCCESS && e[2] == CL_SUCCESS && e[3] == CL_SUCCESS;
    clnode_device_problem dp;
    clnode_device_problem_default(&dp);
    dp.batch = B;
    dp.y0 = (clnode_device_array){my0, PAD * sizeof(float)};
    dp.save_ts = (clnode_device_array){mts, PAD * sizeof(float)};
    dp.n_save_ts = N_TS;
    dp.ys = (clnode_device_array){mys, 0};
    dp.y1 = (clnode_device_array){my1, 0};
    clnode_trajectory_stats st[B];
    size_t saved[B];
    if (ok && clnode_solve_device(dev, md, &o, &dp, st, saved) != CLNODE_OK) {
        printf("FAIL: clnode_solve_device: %s\n", clnode_context_last_error(dev));
        ok = 0;
    }
    ok = ok &&
         clEnqueueReadBuffer(ob->queue, mys, CL_TRUE, 0, B * N_TS * N * sizeof(float), out, 0, NULL,
                             NULL) == CL_SUCCESS &&
         clEnqueueReadBuffer(ob->queue, my1, CL_TRUE, 0, B * N * sizeof(float), out + B * N_TS * N,
                             0, NULL, NULL) == CL_SUCCESS;
    for (size_t b = 0; ok && b < B; ++b) {
        size_t n = 0;
        const double *hys = NULL;
        clnode_trajectory_stats h;
        clnode_solution_stats(s, b, &h);
        clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, NULL, &hys);
        ok = h.num_steps == st[b].num_steps && n == saved[b];
        for (size_t i = 0; ok && i < n * N; ++i)
            ok = (double)out[b * N_TS * N + i] == hys[i];
        for (size_t i = 0; ok && i < N; ++i)
            ok = (double)out[B * N_TS * N + b * N + i] == clnode_solution_y_final(s, b)[i];
        if (!ok)
            printf("FAIL: clnode_solve_device: trajectory %zu differs from clnode_solve's\n", b);
    }
    if (ok)
        printf("clnode_solve_device fp32 batch 2: every value bit-identical to clnode_solve's\n");
    cl_mem all[4] = {my0, mts, mys, my1};
    for (int i = 0; i < 4; ++i)
        if (all[i])
            clReleaseMemObject(all[i]);
    clnode_solution_destroy(&s);
    return ok;
}

static int not_simulator(const char *spec)
{
    clnode_context *c = context_on(spec);
    const int ok = !c || !strstr(clnode_context_device(c), "Oclgrind");
    if (!ok)
        printf("FAIL: \"%s\" chose the simulator %s\n", spec, clnode_context_device(c));
    else
        printf("\"%s\": %s\n", spec, c ? clnode_context_device(c) : "no device (refused)");
    clnode_context_destroy(&c);
    return ok;
}

int main(int argc, char **argv)
{
    const char *device = argc > 1 ? argv[1] : "opencl:oclgrind";
    clnode_context *dev = context_on(device), *host = context_on("host");
    if (!dev) {
        clnode_context_destroy(&host);
        return test_device_absent(device, "no context on it");
    }
    printf("device: %s\n", clnode_context_device(dev));
    dev->test.steps_cap_first = 1; /* one growth before the first step (max_steps = 2) */
    if (host)
        host->test.steps_cap_first = 1;
    clnode_model *md = NULL, *mh = NULL;
    const char *only = getenv("CLNODE_OCLGRIND_ONLY");
    const int dt0_only = only && strcmp(only, "dt0") == 0;
    const int forms_only = only && strcmp(only, "forms") == 0;
    const int device_only = only && strcmp(only, "device") == 0;
    const int grad_only = only && strcmp(only, "device-gradient") == 0;
    const int one_case = only && only[0] >= '0' && only[0] <= '2' && !only[1] ? only[0] - '0' : -1;
    const int all = !dt0_only && !forms_only && !device_only && !grad_only && one_case < 0;
    if (only && *only && !dt0_only && !forms_only && !device_only && !grad_only && one_case < 0) {
        printf("CLNODE_OCLGRIND_ONLY=%s: the cases it names are dt0, forms, device, "
               "device-gradient, 0, 1 and 2\n",
               only);
        clnode_context_destroy(&dev);
        clnode_context_destroy(&host);
        return 1;
    }
    int ok = dt0_only || (not_simulator("opencl") && not_simulator("opencl:cpu"));
    ok = ok && host && clnode_model_create_seed(dev, &md) == CLNODE_OK &&
         clnode_model_create_seed(host, &mh) == CLNODE_OK;
    /* fp32 and fp64, batch 2 and a batch that leaves work-items idle, each at least once; then a
     * save time list per trajectory (the dense output reading its own row) */
    const clnode_precision precs[3] = {CLNODE_FP32, CLNODE_FP64, CLNODE_FP32};
    const size_t batches[3] = {2, MAX_BATCH, MAX_BATCH};
    const int first = dt0_only || forms_only || device_only || grad_only ? 3
                      : one_case >= 0                                    ? one_case
                                                                         : 0;
    for (int c = first; c < (one_case >= 0 ? one_case + 1 : 3) && ok; ++c) {
        char what[64];
        snprintf(what, sizeof what, "%s batch %zu%s", clnode_precision_name(precs[c]), batches[c],
                 c == 2 ? ", save times per trajectory" : "");
        g_every = c == 1 ? 2 : 1;             /* the states of a group recomputed */
        dev->test.rev_sums = c == 2 ? 2 : 1;  /* the weight sums by the GEMM, or the one kernel */
        dev->test.rev_fused = c == 1 ? 2 : 0; /* the products by the GEMM, or the pass's own */
        const double t0 = now();
        clnode_solution *sd = solve(dev, md, precs[c], batches[c], c == 2);
        const double secs = now() - t0;
        clnode_solution *sh = sd ? solve(host, mh, precs[c], batches[c], c == 2) : NULL;
        ok = sd && sh && same(sd, sh, what);
        if (ok) {
            clnode_trajectory_stats st;
            clnode_solution_stats(sd, 0, &st);
            printf("%s: %ld steps, every saved point bit-identical to the host (%.0f s)\n", what,
                   st.num_steps, secs);
        }
        ok = ok && same_gradient(dev, md, sd, host, mh, sh, what);
        dev->test.rev_sums = 0;
        dev->test.rev_fused = 0;
        g_every = 1;
        clnode_solution_destroy(&sd);
        clnode_solution_destroy(&sh);
    }
    /* the same model with an output scale per component (the scale's kernels) */
    double scale[10];
    for (int j = 0; j < 10; ++j)
        scale[j] = 0.5 + 0.1 * j;
    clnode_model *sdm = NULL, *shm = NULL;
    ok = ok && (!all || (test_model_scaled(dev, md, scale, 10, &sdm) == CLNODE_OK &&
                         test_model_scaled(host, mh, scale, 10, &shm) == CLNODE_OK));
    if (ok && all) {
        const double t0 = now();
        clnode_solution *sd = solve(dev, sdm, CLNODE_FP32, 2, 0);
        const double secs = now() - t0;
        clnode_solution *sh = sd ? solve(host, shm, CLNODE_FP32, 2, 0) : NULL;
        ok = sd && sh && same(sd, sh, "fp32 batch 2, output scale per component");
        if (ok)
            printf("fp32 batch 2 with an output scale: every saved point bit-identical to the "
                   "host (%.0f s)\n",
                   secs);
        ok = ok && same_gradient(dev, sdm, sd, host, shm, sh, "fp32 batch 2, output scale");
        clnode_solution_destroy(&sd);
        clnode_solution_destroy(&sh);
    }
    clnode_model_destroy(&sdm);
    clnode_model_destroy(&shm);
    ok = ok && (!(all || forms_only) || reverse_forms(dev, host));
    ok = ok && (!(all || device_only) || device_arrays(dev, md));
    ok = ok && (!(all || grad_only) || device_gradient(dev, md));
    if (ok && one_case < 0 && !forms_only && !device_only &&
        !grad_only) { /* the first steps chosen by the solver */
        g_auto = 1;
        const double t0 = now();
        clnode_solution *sd = solve(dev, md, CLNODE_FP64, MAX_BATCH, 0);
        const double secs = now() - t0;
        clnode_solution *sh = sd ? solve(host, mh, CLNODE_FP64, MAX_BATCH, 0) : NULL;
        ok = sd && sh && same(sd, sh, "dt0_auto fp64 batch 3");
        if (ok) {
            clnode_trajectory_stats st;
            clnode_solution_stats(sd, 0, &st);
            printf("dt0_auto fp64 batch 3: first step %.17g, %ld steps, every saved point "
                   "bit-identical to the host (%.0f s)\n",
                   st.first_step, st.num_steps, secs);
        }
        g_auto = 0;
        clnode_solution_destroy(&sd);
        clnode_solution_destroy(&sh);
    }
    clnode_model_destroy(&md);
    clnode_model_destroy(&mh);
    clnode_context_destroy(&dev);
    clnode_context_destroy(&host);
    return ok ? 0 : 1;
}
