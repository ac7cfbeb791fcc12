/* test_grad_conformance.c - gradient conformance: a device's reverse pass has the host's bits.
 *
 * Every case is solved with keep_tape on the host and on DEVICE, and each solution goes back on
 * both (clnode_gradient_compute on a host context and on a DEVICE context); the four gradients
 * (y0's, the inputs' and every parameter's) must be the same bytes, and the device's forward the
 * host's. The cases:
 *   - the reference matrix of the conformance suite: the cases of tests/data/diffrax's seed and
 *     tanh64 files (methods, tolerances, saves at ts and at steps; forward in time) of at most
 *     REF_MAX_STEPS attempts, fp32 and fp64, with cotangents from the LCG;
 *   - MLPs of every activation with biases, a time input, conditioning inputs and an output scale
 *     (one value per component, one value, none), every method (euler at constant steps), saved
 *     at t0, ts and t1, at steps, or at t1 alone (SSAL tableaux then skip the last stage's MLP),
 *     checkpoint_every 1 and 3, batches of 1, 37 and 70 with per-trajectory end times (step
 *     counts that differ inside each block) and per-trajectory save times, fp32 and fp64;
 *   - the same backward in time (t1 < t0), every method and save;
 *   - the tf32 mode in fp32 (the host's and OpenCL's TF32 emulation: the same bits; CUDA's tensor
 *     cores compute other bits and are not compared);
 *   - the forward with compaction on and off;
 *   - batches of 150 and 300, in one group and in groups of at most 2 blocks (the context's
 *     test setting rev_max_blocks), so that the device's groups begin and end inside them, with
 *     the weight sums in the one kernel and by the GEMM (the setting rev_sums);
 *   - trajectories stopped at max_steps beside finished ones;
 *   - the products in the device's own kernels with the element-wise work inside them at every
 *     batch, and in its GEMM beside them at small ones (the setting rev_fused);
 *   - first steps chosen by the solver (dt0_auto): every adaptive method, forwards and
 *     backwards, batches of 1 and 37, fp32 and fp64;
 * and the errors: a device too small for a block of the batch (the setting rev_memory) is
 * refused naming checkpoint_every, with nothing in *out.
 *
 * Usage: test_grad_conformance [DEVICE] (default "opencl:pocl"); absent: 77, or a failure where
 * CLNODE_REQUIRE_DEVICES names it. For a slow device (Oclgrind) taken in parts:
 *   CLNODE_GRAD_TESTS=mlps,tf32  runs those tests alone;
 *   CLNODE_GRAD_SHARD=I/N        runs the cases whose index is I modulo N (N processes, the whole);
 *   CLNODE_GRAD_PROGRESS=1       names each case on stderr with its seconds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/internal.h" /* the context's test settings */
#include "clnode.h"
#include "test_device.h"
#include "test_problem.h"
#include "test_reference.h"
#include "test_util.h"

static const char *g_device = "opencl:pocl";
static clnode_context *g_ctx;  /* the context a check runs on (assert_ok's messages) */
static clnode_context *g_host; /* "host" */
static clnode_context *g_dev;  /* DEVICE */
static int g_cuda;             /* DEVICE is a CUDA device (tf32: its tensor cores) */
static size_t g_cases, g_values;
static size_t g_methods;                    /* the built-in methods (clnode_method_at) */
static unsigned long g_case_index;          /* the cases met, run or not (CLNODE_GRAD_SHARD) */
static unsigned long g_shard, g_shards = 1; /* this process runs case k where k % N == I */
static int g_progress;                      /* CLNODE_GRAD_PROGRESS */
static int g_dt0_auto;                      /* the MLP cases choose their first steps */

/* Seconds on the monotonic clock (CLNODE_GRAD_PROGRESS). */
static double test_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One solve's gradient as bytes: y0's, the inputs', every parameter's. */
typedef struct grad_bytes {
    unsigned char *p;
    size_t n;
} grad_bytes;

static grad_bytes gradient_of(clnode_context *ctx, const clnode_model *m, const clnode_solution *s,
                              size_t slots, const double *cot)
{
    g_ctx = ctx;
    clnode_gradient *g = NULL;
    assert_ok(clnode_gradient_compute(ctx, m, NULL, s, slots, cot, &g));
    const size_t B = clnode_solution_batch(s), N = clnode_solution_dim(s);
    const size_t nin = clnode_model_num_inputs(m);
    size_t np = 0;
    const double *gp = clnode_gradient_params(g, &np);
    grad_bytes out = {malloc((B * (N + nin) + np) * sizeof(double)), 0};
    assert_non_null(out.p);
    memcpy(out.p, clnode_gradient_y0(g), B * N * sizeof(double));
    out.n = B * N * sizeof(double);
    if (nin) {
        memcpy(out.p + out.n, clnode_gradient_inputs(g), B * nin * sizeof(double));
        out.n += B * nin * sizeof(double);
    }
    memcpy(out.p + out.n, gp, np * sizeof(double));
    out.n += np * sizeof(double);
    clnode_gradient_destroy(&g);
    return out;
}

/* Fails unless a and b are the same bytes, naming the first value that differs. */
static void same_bytes(const grad_bytes *a, const grad_bytes *b, const char *what, const char *how)
{
    if (a->n != b->n)
        fail_msg("%s: %s: %zu bytes against %zu", what, how, b->n, a->n);
    for (size_t i = 0; i < a->n; i += sizeof(double)) {
        double x, y;
        memcpy(&x, a->p + i, sizeof x);
        memcpy(&y, b->p + i, sizeof y);
        if (memcmp(&x, &y, sizeof x) != 0)
            fail_msg("%s: %s: value %zu of %zu is %a, the host's %a", what, how, i / sizeof(double),
                     a->n / sizeof(double), y, x);
    }
}

/* The forward's saved values and counts of trajectory b on the host and the device agree, and
 * every trajectory took steps to its end or to max_steps (no case is vacuous). */
static void same_forward(const clnode_solution *h, const clnode_solution *d, const char *what)
{
    const size_t B = clnode_solution_batch(h), N = clnode_solution_dim(h);
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats sh, sd;
        assert_int_equal(clnode_solution_stats(h, b, &sh), CLNODE_OK);
        assert_int_equal(clnode_solution_stats(d, b, &sd), CLNODE_OK);
        if (sh.num_steps < 1 ||
            (sh.result != CLNODE_RESULT_SUCCESS && sh.result != CLNODE_RESULT_MAX_STEPS_REACHED))
            fail_msg("%s: trajectory %zu: %ld steps, %s", what, b, sh.num_steps,
                     clnode_result_name(sh.result));
        if (sh.num_steps != sd.num_steps || sh.result != sd.result ||
            memcmp(clnode_solution_y_final(h, b), clnode_solution_y_final(d, b),
                   N * sizeof(double)) != 0)
            fail_msg("%s: trajectory %zu's forward differs on %s (%ld steps, the host %ld)", what,
                     b, g_device, sd.num_steps, sh.num_steps);
    }
}

/* The largest number of points a trajectory of s saved. */
static size_t most_points(const clnode_solution *s)
{
    size_t slots = 0;
    for (size_t b = 0; b < clnode_solution_batch(s); ++b) {
        const size_t P = clnode_solution_points(s, b);
        slots = P > slots ? P : slots;
    }
    return slots;
}

/* One case on both devices: the host's gradient of the host's tape is the reference; the device's
 * of its own tape, the device's of the host's tape and the host's of the device's tape must equal
 * it. `compact`: the device's forward is solved with compaction on and off, both reversed. */
static void run_case(clnode_model *mh, clnode_model *md, const clnode_solve_options *o,
                     const clnode_problem *p, uint32_t seed, const char *what)
{
    const unsigned long index = g_case_index++;
    if (index % g_shards != g_shard)
        return;
    const double started = test_seconds();
    g_ctx = g_host;
    clnode_solution *sh = NULL, *sd = NULL;
    assert_ok(clnode_solve(g_host, mh, o, p, &sh));
    g_ctx = g_dev;
    assert_ok(clnode_solve(g_dev, md, o, p, &sd));
    same_forward(sh, sd, what);
    const size_t B = p->batch, N = clnode_solution_dim(sh), slots = most_points(sh);
    double *cot = malloc((B * slots * N + 1) * sizeof(double));
    assert_non_null(cot);
    for (size_t i = 0; i < B * slots * N; ++i)
        cot[i] = test_lcg(&seed);
    grad_bytes ref = gradient_of(g_host, mh, sh, slots, cot);
    grad_bytes dd = gradient_of(g_dev, md, sd, slots, cot);
    same_bytes(&ref, &dd, what, "the device's tape, reversed on the device");
    grad_bytes dh = gradient_of(g_dev, mh, sh, slots, cot);
    same_bytes(&ref, &dh, what, "the host's tape, reversed on the device");
    grad_bytes hd = gradient_of(g_host, md, sd, slots, cot);
    same_bytes(&ref, &hd, what, "the device's tape, reversed on the host");
    g_cases++;
    g_values += ref.n / sizeof(double);
    free(ref.p);
    free(dd.p);
    free(dh.p);
    free(hd.p);
    free(cot);
    clnode_solution_destroy(&sh);
    clnode_solution_destroy(&sd);
    if (g_progress)
        fprintf(stderr, "case %lu: %s: %.1f s\n", index, what, test_seconds() - started);
}

/* The reference cases taken: those of at most REF_MAX_STEPS attempts in all (384 of the 480:
 * every method at each save, heun in 16 of its 96 cases; the others, 80 of heun's and 16 of
 * bosh3's at 1e-6, take 251 to 8192 steps, each of which costs a device thousands of kernel
 * launches to go back through: the MLP cases take heun too, test_stopped_early max_steps;
 * the files hold no case backward in time, test_backward does). */
#define REF_MAX_STEPS 250
static size_t g_ref_long; /* the reference cases left out */

static long ref_steps(json_object *cs)
{
    json_object *trajs = json_object_object_get(cs, "trajectories");
    long n = 0;
    for (size_t b = 0; b < json_object_array_length(trajs); ++b)
        n += json_object_get_int(
            json_object_object_get(json_object_array_get_idx(trajs, b), "num_steps"));
    return n;
}

/* Every case of one reference file (its model on both devices). */
static void run_reference(const char *file, clnode_precision prec)
{
    char model_path[1024];
    json_object *root = open_reference(file, model_path, sizeof model_path);
    clnode_model *mh = NULL, *md = NULL;
    g_ctx = g_host;
    assert_ok(clnode_model_load_safetensors(g_host, model_path, &mh));
    g_ctx = g_dev;
    assert_ok(clnode_model_load_safetensors(g_dev, model_path, &md));
    const size_t N = clnode_model_dim(mh);
    json_object *cases = json_object_object_get(root, "cases");
    for (size_t c = 0; c < json_object_array_length(cases); ++c) {
        json_object *cs = json_object_array_get_idx(cases, c);
        if (ref_steps(cs) > REF_MAX_STEPS) {
            g_ref_long++;
            continue;
        }
        ref_case rc;
        load_case(cs, N, prec, &rc);
        rc.o.keep_tape = 1;
        rc.o.precision_guard = CLNODE_GUARD_OFF;
        char what[128];
        snprintf(what, sizeof what, "%s case %zu (%s, save %s)", file, c, rc.method, rc.save);
        run_case(mh, md, &rc.o, &rc.p, 100u + (uint32_t)c, what);
        free(rc.y0);
    }
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
    json_object_put(root);
}

static void test_reference_matrix(void **state)
{
    (void)state;
    static const char *const files[2][2] = {{"seed-fp32.json", "tanh64-fp32.json"},
                                            {"seed-fp64.json", "tanh64-fp64.json"}};
    const size_t before = g_cases;
    for (int p = 0; p < 2; ++p) {
        if (p && !clnode_context_supports(g_dev, CLNODE_FP64))
            continue;
        for (int f = 0; f < 2; ++f)
            run_reference(files[p][f], p ? CLNODE_FP64 : CLNODE_FP32);
    }
    print_message("  reference matrix: %zu cases, 4 gradients each bit-identical (%zu cases of "
                  "more than %d steps left out)\n",
                  g_cases - before, g_ref_long, REF_MAX_STEPS);
}

/* The forms of the MLPs: a time input, conditioning inputs, an output scale of `ns` values. */
typedef struct form {
    int time_input;
    size_t n_in, ns;
} form;

/* A 3 -> 24 -> 24 -> 3 MLP (inputs and time added to the first layer) of activation act, with
 * biases, on ctx; weights from the LCG, the same for every context. */
static clnode_model *mlp_model(clnode_context *ctx, clnode_activation act, form f)
{
    enum {
        D = 3,
        H = 24
    };
    const size_t in = D + (size_t)f.time_input + f.n_in;
    static double w0[H * 8], w1[H * H], w2[D * H], b0[H], b1[H], b2[D], sc[D];
    uint32_t x = 4242u + (uint32_t)act;
    double *arrays[7] = {w0, w1, w2, b0, b1, b2, sc};
    const size_t lens[7] = {H * in, H * H, D * H, H, H, D, D};
    for (int a = 0; a < 7; ++a)
        for (size_t j = 0; j < lens[a]; ++j)
            arrays[a][j] = (a == 1 ? 0.3 : a == 6 ? 1.5 : 0.6) * test_lcg(&x);
    size_t sizes[4] = {in, H, H, D};
    const double *ws[3] = {w0, w1, w2}, *bs[3] = {b0, b1, b2};
    clnode_model_desc d = test_mlp_desc(3, sizes, ws, bs);
    d.activation = act;
    d.final_activation = act == CLNODE_ACT_RELU ? CLNODE_ACT_TANH : CLNODE_ACT_IDENTITY;
    d.time_input = f.time_input;
    d.num_inputs = f.n_in;
    d.out_scale = f.ns ? sc : NULL;
    d.out_scale_size = f.ns;
    clnode_model *m = NULL;
    g_ctx = ctx;
    assert_ok(clnode_model_create(ctx, &d, &m));
    return m;
}

/* What a case of the MLP matrix saves. */
enum {
    SAVE_TS, /* t0, ts (each trajectory its own row for odd cases) and t1 */
    SAVE_STEPS,
    SAVE_T1, /* t1 alone: SSAL tableaux skip the last stage's MLP */
    NSAVE
};

/* One MLP case: batch B, method, precision, what is saved, checkpoint_every, the GEMM mode. */
static void run_mlp_dir(clnode_model *mh, clnode_model *md, form f, size_t B,
                        const clnode_method *me, clnode_precision prec, int save, long every,
                        clnode_gemm_mode mode, uint32_t seed, double dir)
{
    const size_t N = 3;
    double *y0 = malloc(B * N * sizeof(double)), *t1s = malloc(B * sizeof(double));
    double *inputs = malloc((B * f.n_in + 1) * sizeof(double));
    double *rows = malloc(B * 3 * sizeof(double));
    assert_true(y0 && t1s && inputs && rows);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = test_lcg(&seed);
    for (size_t i = 0; i < B * f.n_in; ++i)
        inputs[i] = test_lcg(&seed);
    for (size_t b = 0; b < B; ++b) {
        t1s[b] = dir * (1.0 + 0.5 * test_lcg(&seed)); /* |t1| in [0.5, 1.5): step counts differ */
        for (int j = 0; j < 3; ++j)
            rows[b * 3 + (size_t)j] = t1s[b] * (0.2 + 0.3 * j);
    }
    const double ts[3] = {dir * 0.1, dir * 0.25, dir * 0.4};
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.method = me;
    o.precision = prec;
    o.gemm_precision = mode;
    o.t0 = 0.0;
    o.rtol = prec == CLNODE_FP64 ? 1e-7 : 1e-4;
    o.atol = 1e-6;
    o.keep_tape = 1;
    o.checkpoint_every = every;
    o.precision_guard = CLNODE_GUARD_OFF;
    o.constant_step = strcmp(me->name, "euler") == 0;
    o.dt0 = o.constant_step ? dir * 0.05 : 0.0;
    o.dt0_auto = g_dt0_auto && !o.constant_step;
    o.save_t0 = save == SAVE_TS;
    o.save_steps = save == SAVE_STEPS;
    clnode_problem p = test_problem(B, y0);
    p.t1s = t1s;
    p.inputs = f.n_in ? inputs : NULL;
    if (save == SAVE_TS) {
        p.save_ts_per_trajectory = (int)(seed & 1u);
        p.save_ts = p.save_ts_per_trajectory ? rows : ts;
        p.n_save_ts = 3;
    }
    char what[160];
    snprintf(what, sizeof what,
             "MLP %s, %s, B %zu, fp%d %s, save %d, every %ld, time %d, "
             "inputs %zu, scale %zu%s%s",
             clnode_activation_name(clnode_model_activation(mh)), me->name, B, (int)prec,
             clnode_gemm_mode_name(mode), save, every, f.time_input, f.n_in, f.ns,
             dir < 0 ? ", backward in time" : "", o.dt0_auto ? ", dt0_auto" : "");
    o.compact = (int)(seed >> 1 & 1u);
    run_case(mh, md, &o, &p, seed, what);
    if (B > 1 && seed % 4 == 1) { /* and the other way: the same tape */
        o.compact = !o.compact;
        run_case(mh, md, &o, &p, seed, what);
    }
    free(y0);
    free(t1s);
    free(inputs);
    free(rows);
}

/* One MLP case forward in time, from 0 to t1 in [0.5, 1.5). */
static void run_mlp(clnode_model *mh, clnode_model *md, form f, size_t B, const clnode_method *me,
                    clnode_precision prec, int save, long every, clnode_gemm_mode mode,
                    uint32_t seed)
{
    run_mlp_dir(mh, md, f, B, me, prec, save, every, mode, seed, 1.0);
}

/* Every activation and method, the forms, saves, checkpoints and batches, fp32 and fp64. */
static void test_mlps(void **state)
{
    (void)state;
    static const form forms[3] = {{1, 2, 3}, {0, 1, 1}, {0, 0, 0}};
    static const size_t batches[3] = {1, 37, 70};
    const size_t before = g_cases;
    size_t k = 0;
    for (size_t a = 0; a < clnode_activation_count(); ++a)
        for (size_t fi = 0; fi < 3; ++fi) {
            clnode_model *mh = mlp_model(g_host, (clnode_activation)a, forms[fi]);
            clnode_model *md = mlp_model(g_dev, (clnode_activation)a, forms[fi]);
            for (int save = 0; save < NSAVE; ++save, ++k) {
                const clnode_method *me = clnode_method_at(k % g_methods);
                const clnode_precision prec = k % 2 ? CLNODE_FP64 : CLNODE_FP32;
                if (prec == CLNODE_FP64 && !clnode_context_supports(g_dev, CLNODE_FP64))
                    continue;
                run_mlp(mh, md, forms[fi], batches[k % 3], me, prec, save, k % 4 == 3 ? 3 : 1,
                        CLNODE_GEMM_STRICT, 7u * (uint32_t)k + 1u);
            }
            clnode_model_destroy(&mh);
            clnode_model_destroy(&md);
        }
    print_message("  MLPs: %zu cases, 4 gradients each bit-identical\n", g_cases - before);
}

/* Backward in time (t1 < t0 = 0, negative save times and dt0): every method, each save, fp32 and
 * fp64, per-trajectory end times and save times, checkpoint_every 1 and 2. */
static void test_backward(void **state)
{
    (void)state;
    static const form f = {1, 1, 3};
    const size_t before = g_cases;
    clnode_model *mh = mlp_model(g_host, CLNODE_ACT_TANH, f);
    clnode_model *md = mlp_model(g_dev, CLNODE_ACT_TANH, f);
    for (size_t k = 0; k < g_methods; ++k) {
        const clnode_precision prec = k % 2 ? CLNODE_FP64 : CLNODE_FP32;
        if (prec == CLNODE_FP64 && !clnode_context_supports(g_dev, CLNODE_FP64))
            continue;
        run_mlp_dir(mh, md, f, k % 2 ? 37 : 9, clnode_method_at(k), prec, (int)(k % NSAVE),
                    1 + (long)(k % 2), CLNODE_GEMM_STRICT, 501u + 2u * (uint32_t)k, -1.0);
    }
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
    print_message("  backward in time: %zu cases bit-identical\n", g_cases - before);
}

/* First steps chosen by the solver (dt0_auto), held in the reverse pass as every step: every
 * adaptive method forwards and backwards, each save, batches of 1 and 37, fp32 and fp64. */
static void test_dt0_auto(void **state)
{
    (void)state;
    static const form f = {1, 1, 3};
    const size_t before = g_cases;
    clnode_model *mh = mlp_model(g_host, CLNODE_ACT_TANH, f);
    clnode_model *md = mlp_model(g_dev, CLNODE_ACT_TANH, f);
    g_dt0_auto = 1;
    for (size_t k = 0; k < 2 * g_methods; ++k) {
        const clnode_method *me = clnode_method_at(k % g_methods);
        const clnode_precision prec = k % 2 ? CLNODE_FP64 : CLNODE_FP32;
        if (!me->adaptive || (prec == CLNODE_FP64 && !clnode_context_supports(g_dev, CLNODE_FP64)))
            continue;
        run_mlp_dir(mh, md, f, k % 4 < 2 ? 37 : 1, me, prec, (int)(k % NSAVE), 1,
                    CLNODE_GEMM_STRICT, 601u + 2u * (uint32_t)k, k < g_methods ? 1.0 : -1.0);
    }
    g_dt0_auto = 0;
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
    print_message("  dt0_auto: %zu cases bit-identical\n", g_cases - before);
}

/* The tf32 mode (fp32): the TF32 emulation of the host and OpenCL in the forward's and the
 * reverse pass's products and weight sums. */
static void test_tf32(void **state)
{
    (void)state;
    if (g_cuda) {
        print_message("  %s computes tf32 on its tensor cores, the host emulates it: their tf32 "
                      "gradients are not compared\n",
                      g_device);
        return;
    }
    const size_t before = g_cases;
    static const form f = {1, 2, 3};
    for (size_t a = 0; a < clnode_activation_count(); a += 2) {
        clnode_model *mh = mlp_model(g_host, (clnode_activation)a, f);
        clnode_model *md = mlp_model(g_dev, (clnode_activation)a, f);
        run_mlp(mh, md, f, 37, clnode_method_tsit5, CLNODE_FP32, (int)(a % NSAVE), 1 + (long)a % 2,
                CLNODE_GEMM_TF32, 99u + (uint32_t)a);
        clnode_model_destroy(&mh);
        clnode_model_destroy(&md);
    }
    print_message("  tf32: %zu cases bit-identical\n", g_cases - before);
}

/* A batch of 300 in groups of at most 2 blocks: the device's groups begin and end inside it. */
static void test_groups(void **state)
{
    (void)state;
    static const form f = {0, 1, 3};
    clnode_model *mh = mlp_model(g_host, CLNODE_ACT_SOFTPLUS, f);
    clnode_model *md = mlp_model(g_dev, CLNODE_ACT_SOFTPLUS, f);
    for (int way = 1; way <= 2; ++way) { /* the weight sums in the one kernel, by the GEMM */
        g_dev->test.rev_sums = way;
        g_dev->test.rev_max_blocks = 2;
        run_mlp(mh, md, f, 300, clnode_method_dopri5, CLNODE_FP32, SAVE_TS, 2, CLNODE_GEMM_STRICT,
                5u);
        g_dev->test.rev_max_blocks = 0;
        run_mlp(mh, md, f, 300, clnode_method_tsit5, CLNODE_FP64, SAVE_STEPS, 1, CLNODE_GEMM_STRICT,
                9u);
        if (!g_cuda) /* its tensor cores: not the host's tf32 */
            run_mlp(mh, md, f, 150, clnode_method_bosh3, CLNODE_FP32, SAVE_TS, 1, CLNODE_GEMM_TF32,
                    13u);
        g_dev->test.rev_sums = 0;
        print_message("  300 trajectories in groups of 2 blocks and in one group, the weight sums "
                      "%s: bit-identical\n",
                      way == 1 ? "in one kernel" : "by the GEMM");
    }
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
}

/* The reverse pass's products in the device's own kernels with the element-wise work inside them
 * (the setting rev_fused 1) at batches where the backend takes its GEMM (several blocks, rows
 * leaving one by one), and in the backend's GEMM with launches beside them (2) at batches where
 * it takes its own kernels: every activation, the forms, fp32 and fp64, checkpoint_every 1 and 3,
 * each save. */
static void test_fused(void **state)
{
    (void)state;
    static const form forms[3] = {{1, 2, 3}, {0, 1, 1}, {0, 0, 0}};
    const size_t before = g_cases;
    for (int way = 1; way <= 2; ++way) {
        g_dev->test.rev_fused = way;
        for (size_t a = 0; a < clnode_activation_count(); ++a) {
            const form f = forms[a % 3];
            const clnode_precision prec = a % 2 ? CLNODE_FP64 : CLNODE_FP32;
            if (prec == CLNODE_FP64 && !clnode_context_supports(g_dev, CLNODE_FP64))
                continue;
            clnode_model *mh = mlp_model(g_host, (clnode_activation)a, f);
            clnode_model *md = mlp_model(g_dev, (clnode_activation)a, f);
            run_mlp(mh, md, f, way == 1 ? (a % 2 ? 70 : 37) : (a % 2 ? 5 : 1),
                    clnode_method_at(a % g_methods), prec, (int)(a % NSAVE), a % 3 == 2 ? 3 : 1,
                    CLNODE_GEMM_STRICT, 601u + 3u * (uint32_t)a);
            clnode_model_destroy(&mh);
            clnode_model_destroy(&md);
        }
        g_dev->test.rev_fused = 0;
    }
    print_message("  products with their element-wise work inside them, at every batch, and "
                  "beside them: %zu cases bit-identical\n",
                  g_cases - before);
}

/* Trajectories that stop early (max_steps_reached) beside ones that succeed, in one batch: the
 * gradient of what was computed, as the host's. */
static void test_stopped_early(void **state)
{
    (void)state;
    static const form f = {1, 0, 1};
    clnode_model *mh = mlp_model(g_host, CLNODE_ACT_TANH, f);
    clnode_model *md = mlp_model(g_dev, CLNODE_ACT_TANH, f);
    enum {
        B = 40
    };
    double y0[B * 3], t1s[B];
    uint32_t x = 31u;
    for (size_t i = 0; i < B * 3; ++i)
        y0[i] = test_lcg(&x);
    for (size_t b = 0; b < B; ++b)
        t1s[b] = b % 3 ? 0.3 : 4.0; /* every third one runs out of steps */
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.rtol = 1e-6;
    o.atol = 1e-8;
    o.max_steps = 12;
    o.keep_tape = 1;
    o.save_steps = 1;
    o.precision_guard = CLNODE_GUARD_OFF;
    for (int p = 0; p < 2; ++p) {
        o.precision = p ? CLNODE_FP64 : CLNODE_FP32;
        clnode_problem pb = test_problem(B, y0);
        pb.t1s = t1s;
        run_case(mh, md, &o, &pb, 17u + (uint32_t)p, p ? "stopped early, fp64" : "stopped early");
    }
    clnode_model_destroy(&mh);
    clnode_model_destroy(&md);
    print_message("  trajectories stopped at max_steps beside finished ones: bit-identical\n");
}

/* A device too small for one block of the batch: refused naming the remedy, nothing in *out. */
static void test_too_small(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    g_ctx = g_dev;
    assert_ok(clnode_model_create_seed(g_dev, &m));
    double y0[10] = {0};
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.keep_tape = 1;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_dev, m, &o, TEST_PROBLEM(1, y0), &s));
    double cot[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    clnode_gradient *g = NULL;
    g_dev->test.rev_memory = 4096;
    const clnode_status st = clnode_gradient_compute(g_dev, m, NULL, s, 1, cot, &g);
    g_dev->test.rev_memory = 0;
    const char *msg = clnode_context_last_error(g_dev);
    print_message("  4096 bytes of device memory: %s: %s\n", clnode_status_name(st), msg);
    assert_int_equal(st, CLNODE_ERR_DEVICE_MEMORY);
    assert_null(g);
    assert_non_null(strstr(msg, "checkpoint_every"));
    assert_ok(clnode_gradient_compute(g_dev, m, NULL, s, 1, cot, &g)); /* and again with room */
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* `list` (names separated by commas) holds `name` whole. */
static int named(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *w = list; *w; w += strcspn(w, ",") + (w[strcspn(w, ",")] != '\0'))
        if (strcspn(w, ",") == n && strncmp(w, name, n) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const int dev_rc =
        test_device_open(argc, argv, &g_device, NULL, "gradient conformance", &g_dev);
    if (dev_rc != 0)
        return dev_rc;
    g_cuda = strcmp(clnode_context_backend(g_dev), "cuda") == 0;
    while (clnode_method_at(g_methods))
        ++g_methods;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    if (clnode_context_create(&co, &g_host) != CLNODE_OK) {
        printf("cannot create the host context\n");
        return 1;
    }
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_reference_matrix),
        cmocka_unit_test(test_mlps),
        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_tf32),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_stopped_early),
        cmocka_unit_test(test_too_small),
        cmocka_unit_test(test_dt0_auto),
        cmocka_unit_test(test_fused),
    };
    /* CLNODE_GRAD_TESTS: the tests to run, by name without "test_", separated by commas (a slow
     * device, Oclgrind, runs a part); unset: all */
    struct CMUnitTest tests[sizeof all / sizeof all[0]];
    size_t n = 0, words = 0;
    const char *only = getenv("CLNODE_GRAD_TESTS");
    if (only && !*only)
        only = NULL; /* set empty: all */
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (!only || named(only, all[i].name + strlen("test_")))
            tests[n++] = all[i];
    for (const char *w = only; w && *w; w += strcspn(w, ",") + (w[strcspn(w, ",")] != '\0'))
        ++words;
    const char *shard = getenv("CLNODE_GRAD_SHARD");
    g_progress = getenv("CLNODE_GRAD_PROGRESS") != NULL;
    int failed = 0;
    if (only && words != n) { /* every name given is a test's: a typo is not a pass of nothing */
        printf("CLNODE_GRAD_TESTS=%s: %zu names, %zu of them tests (reference_matrix, mlps, "
               "backward, tf32, groups, stopped_early, too_small, dt0_auto)\n",
               only, words, n);
        failed = 1;
    } else if (shard && (sscanf(shard, "%lu/%lu", &g_shard, &g_shards) != 2 || g_shards == 0 ||
                         g_shard >= g_shards)) {
        printf("CLNODE_GRAD_SHARD=%s: expected I/N with I < N\n", shard);
        failed = 1;
    } else {
        failed = _cmocka_run_group_tests("grad-conformance", tests, n, NULL, NULL);
        printf("%s: %zu cases, %zu gradient values, each the host's bits four ways\n", g_device,
               g_cases, g_values);
    }
    clnode_context_destroy(&g_dev);
    clnode_context_destroy(&g_host);
    return failed;
}
