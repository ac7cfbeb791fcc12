/* test_host_isa.c - the host's kernel sets give the same bits: every ISA of the ordered GEMM this
 * machine runs ("host:portable", "host:avx2", "host:avx512") solves
 *   - the conformance suite's reference matrix: every case of tests/data/diffrax's seed and
 *     tanh64 files (methods, tolerances, saves at ts and at steps, forward and backward), fp32
 *     and fp64, at the references' batches of one and two (the row kernels);
 *   - MLPs of every activation at batches of 1, 37 and 64 (the GEMM's 6- and 4-row tiles, the
 *     rows they leave, partial vectors of columns), fp32 and fp64, saved at ts and at steps;
 *   - the reverse pass: the gradients of y0 and of every parameter of those MLPs' solves;
 * and every output (results, step counts, final states, saved times and states, gradients) is
 * compared byte for byte with host:portable, whose C fma() loops are the oracle of the FMA bits.
 * An ISA this machine cannot run is said ("AVX-512 not verified on this machine") and is not a
 * failure; its device string must then be refused naming the ISA. An unknown ISA ("host:avx1024")
 * is refused naming the string. */
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
#include "test_device.h"
#include "test_problem.h"
#include "test_reference.h"
#include "test_util.h"

enum {
    NISA = 3
};
static const struct {
    const char *spec, *label, *feature;
} isas[NISA] = {
    {"host:portable", "portable", NULL},
    {"host:avx2", "AVX2", "AVX2"},
    {"host:avx512", "AVX-512", "AVX-512F"},
};

static clnode_context *g_ctx;            /* the context a check runs on (assert_ok's messages) */
static clnode_context *ctxs[NISA];       /* NULL: the ISA does not run here */
static char why_not[NISA][TEST_LOG_MSG]; /* why not, from the context's creation */

/* Every output of one ISA, appended in the order the runs made them. */
typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* Trajectory b's outputs: its result and step counts, its final state, its saved points of
 * `kind` (times and states). */
static void put_traj(bytes *out, const clnode_solution *s, size_t b, size_t N,
                     clnode_save_kind kind)
{
    clnode_trajectory_stats st;
    assert_int_equal(clnode_solution_stats(s, b, &st), CLNODE_OK);
    const long counts[5] = {(long)st.result, st.num_steps, st.num_accepted, st.num_rejected,
                            st.num_rhs_evals};
    put(out, counts, sizeof counts);
    put(out, &st.t_final, sizeof st.t_final);
    put(out, clnode_solution_y_final(s, b), N * sizeof(double));
    size_t n = 0;
    const double *ts = NULL, *ys = NULL;
    assert_ok(clnode_solution_saved(s, b, kind, &n, &ts, &ys));
    put(out, &n, sizeof n);
    put(out, ts, n * sizeof(double));
    put(out, ys, n * N * sizeof(double));
}

/* Every case of one reference file on context `ctx`, into out; returns the cases run. */
static size_t run_reference(clnode_context *ctx, const char *file, clnode_precision prec,
                            bytes *out)
{
    g_ctx = ctx;
    char model_path[1024];
    json_object *root = open_reference(file, model_path, sizeof model_path);
    clnode_model *m = NULL;
    assert_ok(clnode_model_load_safetensors(ctx, model_path, &m));
    const size_t N = clnode_model_dim(m);
    json_object *cases = json_object_object_get(root, "cases");
    const size_t nc = json_object_array_length(cases);
    for (size_t c = 0; c < nc; ++c) {
        ref_case rc;
        load_case(json_object_array_get_idx(cases, c), N, prec, &rc);
        clnode_solution *s = NULL;
        assert_ok(clnode_solve(ctx, m, &rc.o, &rc.p, &s));
        const clnode_save_kind kind =
            strcmp(rc.save, "ts") == 0 ? CLNODE_SAVE_TS : CLNODE_SAVE_STEPS;
        for (size_t b = 0; b < rc.B; ++b)
            put_traj(out, s, b, N, kind);
        clnode_solution_destroy(&s);
        free(rc.y0);
    }
    clnode_model_destroy(&m);
    json_object_put(root);
    return nc;
}

/* Where two ISAs' outputs first differ, or that they agree; fails on a difference. */
static void compare(const bytes *out, const char *what, size_t runs)
{
    for (int i = 1; i < NISA; ++i) {
        if (!ctxs[i])
            continue;
        size_t at = 0;
        const size_t n = out[i].n < out[0].n ? out[i].n : out[0].n;
        while (at < n && out[i].p[at] == out[0].p[at])
            ++at;
        if (at < n || out[i].n != out[0].n)
            fail_msg("%s: %s and %s differ from byte %zu of %zu (%zu runs)", what, isas[i].spec,
                     isas[0].spec, at, out[0].n, runs);
        print_message("  %s: %s = %s, %zu runs, %zu bytes bit-identical\n", what, isas[i].spec,
                      isas[0].spec, runs, out[0].n);
    }
}

static void free_all(bytes *out)
{
    for (int i = 0; i < NISA; ++i)
        free(out[i].p);
}

/* The reference matrix of the conformance suite, fp32 and fp64. */
static void test_reference_matrix(void **state)
{
    (void)state;
    static const char *const files[2][2] = {{"seed-fp32.json", "tanh64-fp32.json"},
                                            {"seed-fp64.json", "tanh64-fp64.json"}};
    for (int p = 0; p < 2; ++p) {
        bytes out[NISA] = {{0}};
        size_t runs = 0;
        for (int i = 0; i < NISA; ++i)
            for (int f = 0; f < 2 && ctxs[i]; ++f) {
                const size_t r =
                    run_reference(ctxs[i], files[p][f], p ? CLNODE_FP64 : CLNODE_FP32, &out[i]);
                runs = i == 0 ? runs + r : runs;
            }
        compare(out, p ? "reference matrix fp64" : "reference matrix fp32", runs);
        free_all(out);
    }
}

/* A 3 -> 40 -> 40 -> 3 MLP with activation `act` and biases, its weights from the LCG (scaled to
 * keep the field moderate). */
static clnode_model *mlp_model(clnode_context *ctx, clnode_activation act)
{
    enum {
        D = 3,
        H = 40
    };
    static double w0[H * D], w1[H * H], w2[D * H], b0[H], b1[H], b2[D];
    uint32_t x = 12345u + (uint32_t)act;
    double *arrays[6] = {w0, w1, w2, b0, b1, b2};
    const size_t lens[6] = {H * D, H * H, D * H, H, H, D};
    for (int a = 0; a < 6; ++a)
        for (size_t j = 0; j < lens[a]; ++j)
            arrays[a][j] = (a == 1 ? 0.25 : 0.5) * test_lcg(&x);
    size_t sizes[4] = {D, H, H, D};
    const double *ws[3] = {w0, w1, w2}, *bs[3] = {b0, b1, b2};
    clnode_model_desc d = test_mlp_desc(3, sizes, ws, bs);
    d.activation = act;
    clnode_model *m = NULL;
    g_ctx = ctx;
    assert_ok(clnode_model_create(ctx, &d, &m));
    return m;
}

/* One solve of an MLP on ctx: batch B from LCG states, saved at ts (and at steps when
 * `steps`), with a tape; its outputs and, for ts saves, its gradients into out. */
static void run_mlp(clnode_context *ctx, const clnode_model *m, clnode_precision prec, size_t B,
                    int steps, bytes *out)
{
    g_ctx = ctx;
    const size_t N = clnode_model_dim(m);
    double *y0 = malloc(B * N * sizeof(double));
    assert_non_null(y0);
    uint32_t x = 777u + (uint32_t)B;
    for (size_t j = 0; j < B * N; ++j)
        y0[j] = test_lcg(&x);
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    o.t0 = 0.0;
    o.t1 = 1.5;
    o.rtol = prec == CLNODE_FP64 ? 1e-8 : 1e-5;
    o.atol = o.rtol;
    o.save_steps = steps;
    o.keep_tape = !steps;
    double ts[4] = {0.25, 0.5, 1.0, 1.5};
    clnode_problem pb = test_problem(B, y0);
    pb.save_ts = ts;
    pb.n_save_ts = 4;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(ctx, m, &o, &pb, &s));
    for (size_t b = 0; b < B; ++b)
        put_traj(out, s, b, N, steps ? CLNODE_SAVE_STEPS : CLNODE_SAVE_TS);
    if (!steps) {
        size_t slots = 0;
        assert_ok(clnode_save_slots(ctx, &o, &pb, &slots));
        double *cot = malloc(B * slots * N * sizeof(double));
        assert_non_null(cot);
        for (size_t j = 0; j < B * slots * N; ++j)
            cot[j] = test_lcg(&x);
        clnode_gradient *g = NULL;
        assert_ok(clnode_gradient_compute(ctx, m, NULL, s, slots, cot, &g));
        size_t np = 0;
        const double *gp = clnode_gradient_params(g, &np);
        put(out, clnode_gradient_y0(g), B * N * sizeof(double));
        put(out, gp, np * sizeof(double));
        clnode_gradient_destroy(&g);
        free(cot);
    }
    clnode_solution_destroy(&s);
    free(y0);
}

/* Every activation's MLP at batches 1, 37 and 64, fp32 and fp64, saved at ts (with gradients)
 * and at steps. */
static void test_mlps_and_gradients(void **state)
{
    (void)state;
    static const size_t batches[3] = {1, 37, 64};
    for (int p = 0; p < 2; ++p) {
        const clnode_precision prec = p ? CLNODE_FP64 : CLNODE_FP32;
        bytes out[NISA] = {{0}};
        size_t runs = 0;
        for (int i = 0; i < NISA; ++i) {
            if (!ctxs[i])
                continue;
            for (size_t a = 0; a < clnode_activation_count(); ++a) {
                clnode_model *m = mlp_model(ctxs[i], (clnode_activation)a);
                for (int bi = 0; bi < 3; ++bi)
                    for (int steps = 0; steps < 2; ++steps) {
                        run_mlp(ctxs[i], m, prec, batches[bi], steps, &out[i]);
                        runs += i == 0;
                    }
                clnode_model_destroy(&m);
            }
        }
        compare(out, p ? "MLPs and gradients fp64" : "MLPs and gradients fp32", runs);
        free_all(out);
    }
}

/* Each ISA's context names its kernels; one that does not run here was refused naming it. */
static void test_isas_named(void **state)
{
    (void)state;
    for (int i = 0; i < NISA; ++i) {
        if (ctxs[i]) {
            const char *dev = clnode_context_device(ctxs[i]);
            print_message("  %s: %s\n", isas[i].spec, dev);
            const char *name = i == 0 ? "portable" : i == 1 ? "AVX2+FMA" : "AVX-512";
            assert_non_null(strstr(dev, name));
        } else {
            print_message("  %s: %s\n", isas[i].spec, why_not[i]);
            assert_non_null(strstr(why_not[i], isas[i].spec));
            assert_non_null(strstr(why_not[i], isas[i].feature));
        }
    }
}

/* An ISA clnode has no kernels for is an unknown device string, refused naming it. */
static void test_unknown_isa(void **state)
{
    (void)state;
    char msg[TEST_LOG_MSG];
    clnode_context *ctx = NULL;
    assert_int_equal(test_context_logged("host:avx1024", msg, &ctx), CLNODE_ERR_NO_DEVICE);
    assert_null(ctx);
    print_message("  host:avx1024: %s\n", msg);
    assert_non_null(strstr(msg, "host:avx1024"));
    assert_non_null(strstr(msg, "host:avx512")); /* the forms it could have been */
}

int main(void)
{
    int missing = 0;
    for (int i = 0; i < NISA; ++i) {
        const clnode_status st = test_context_logged(isas[i].spec, why_not[i], &ctxs[i]);
        if (st == CLNODE_ERR_UNSUPPORTED) {
            printf("%s not verified on this machine: %s\n", isas[i].label, why_not[i]);
            ctxs[i] = NULL;
            ++missing;
        } else if (st != CLNODE_OK) {
            printf("cannot create a context on %s: %s: %s\n", isas[i].spec, clnode_status_name(st),
                   why_not[i]);
            return 1;
        } else {
            printf("%s: %s\n", isas[i].spec, clnode_context_device(ctxs[i]));
        }
    }
    if (!ctxs[0]) {
        printf("host:portable must run everywhere\n");
        return 1;
    }
    printf("ISAs compared with host:portable: %d of %d\n", NISA - 1 - missing, NISA - 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isas_named),
        cmocka_unit_test(test_unknown_isa),
        cmocka_unit_test(test_reference_matrix),
        cmocka_unit_test(test_mlps_and_gradients),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < NISA; ++i)
        clnode_context_destroy(&ctxs[i]);
    return failed;
}
