/* test_forms_diffrax.c - the forms of diffrax's neural ODE and latent ODE examples against the real
 * diffrax 0.7.2, on one device (argv[1], default "host"; 77 when it is absent).
 *
 * Oracle: tests/data/diffrax/forms-<fp64|fp32>.json, written by
 * `scripts/make_reference.py --only-forms`; the vector field is f(t, y) = out_scale * mlp(y)
 * (softplus inside, tanh last) with the scale a tensor of the model file: a scalar
 * (node2x64s.safetensors, latent16.safetensors) or one value per component (node2x64v). The cases:
 * - neural_ode: the neural ODE example's solve, Tsit5 with PIDController(1e-3, 1e-6) and a tighter
 *   tolerance, SaveAt(ts) on 100 times in [0, 10] or SaveAt(steps), jax.vmap over y0;
 * - latent_decoder: the latent ODE example's decoder, constant steps of 0.4 (forwards and
 *   backwards), jax.vmap over (y0, ts) with every trajectory its own row of save times and its
 *   interval [ts[0], ts[-1]], five methods;
 * - pid_rows: those rows under the PID controller;
 * - constant_vmap: constant steps with each trajectory its own y0, t0, t1 and step, one shared list
 *   (SaveAt t1, ts and steps), five methods, forwards and backwards.
 * clnode solves each case as one batch, with t0s, t1s and dt0s, and the rows of save times as
 * save_ts_per_trajectory.
 *
 * fp64 (check_fp64): every trajectory with diffrax's result, exact step counts (attempts,
 * accepted, rejected) and saved times, the dense output (SaveAt ts, t1) and the last saved states
 * within FP64_BOUND = 1e-10 of diffrax's, relative to the state's magnitude (as
 * test_conformance.c's diffrax parity measures it); the ends of accepted steps within that test's
 * 1e-6, and exactly diffrax's with constant steps. fp32: test_forms_pid_fp32 and
 * test_forms_constant_fp32. Both: on a device other than the host, every trajectory bit for bit
 * the host's; and every trajectory of a batch bit for bit the same trajectory solved alone (its
 * row of save times as a shared list). One line per case, with both step counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "clnode.h"
#include "test_problem.h"
#include "test_device.h"
#include "test_solution.h"

#ifndef CLN_SOURCE_ROOT
#error "CLN_SOURCE_ROOT must name the source tree"
#endif

static const char *g_device = "host";
static clnode_context *g_ctx;
static clnode_context *g_host; /* the host, on another device: the bits to agree with */

/* fp64: saved states and step ends against diffrax's, relative to the state's magnitude */
#define FP64_BOUND 1e-10
/* fp64: the ends of accepted steps (SaveAt steps) in time and value (see check_fp64) */
#define STEP_END_BOUND 1e-6
/* fp32: how much further from diffrax's fp64 solution clnode's fp32 last saved states may be than
 * diffrax's own fp32 ones (test_forms_pid_fp32) */
#define FP32_FACTOR 4.0
/* fp32 with constant steps: every saved state against diffrax's fp32 one (test_forms_constant_fp32)
 */
#define FP32_CONSTANT_BOUND 1e-4
#define MAX_MODELS 4

typedef struct tally {
    int trajs, exact, within2, worst_diff;
    double max_rel_dense; /* saved states at requested times (SaveAt ts, t1) */
    double max_rel_steps; /* saved states at the ends of accepted steps (SaveAt steps) */
    double max_rel_t;     /* the times of those ends */
    double max_rel_final; /* the last saved state, whatever the steps */
    int times_differ;     /* saved times of SaveAt(ts) not diffrax's own */
    /* fp32: the last saved states' largest deviation from diffrax's fp64 solution of the same
     * problem, clnode's and diffrax's own fp32 one's */
    double max_rel_final_vs64, diffrax_rel_final_vs64;
} tally;

/* One case of a reference file: what diffrax was given. */
typedef struct fcase {
    const char *form, *model, *method, *controller, *direction, *save;
    int rows; /* each trajectory its own save times */
    double rtol, atol;
    long max_steps;
    size_t B, T;
    double *t0s, *t1s, *dt0s, *y0, *ts; /* ts: T values, or B x T with rows */
} fcase;

/* The models of a reference file, loaded in one context. */
typedef struct model_set {
    size_t n;
    const char *name[MAX_MODELS];
    clnode_model *m[MAX_MODELS];
} model_set;

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("reference data: no \"%s\"", key);
    return v;
}

static double dbl_at(json_object *arr, size_t i)
{
    return json_object_get_double(json_object_array_get_idx(arr, i));
}

static const char *str_of(json_object *o, const char *key)
{
    return json_object_get_string(get(o, key));
}

/* The numbers of a JSON array, or of an array of equally long arrays row after row, in a new
 * allocation; *rows and *cols give the shape (rows 1 for a flat array). */
static double *read_matrix(json_object *arr, size_t *rows, size_t *cols)
{
    const size_t n = json_object_array_length(arr);
    assert_true(n > 0);
    const int nested = json_object_get_type(json_object_array_get_idx(arr, 0)) == json_type_array;
    *rows = nested ? n : 1;
    *cols = nested ? json_object_array_length(json_object_array_get_idx(arr, 0)) : n;
    double *out = malloc(*rows * *cols * sizeof(double));
    assert_non_null(out);
    for (size_t r = 0; r < *rows; ++r) {
        json_object *row = nested ? json_object_array_get_idx(arr, r) : arr;
        assert_int_equal(json_object_array_length(row), *cols);
        for (size_t j = 0; j < *cols; ++j)
            out[r * *cols + j] = dbl_at(row, j);
    }
    return out;
}

static double *read_vector(json_object *arr, size_t n)
{
    size_t rows, cols;
    double *v = read_matrix(arr, &rows, &cols);
    assert_int_equal(rows, 1);
    assert_int_equal(cols, n);
    return v;
}

static void load_fcase(json_object *cs, size_t N, fcase *fc)
{
    memset(fc, 0, sizeof *fc);
    fc->form = str_of(cs, "form");
    fc->model = str_of(cs, "model");
    fc->method = str_of(cs, "method");
    fc->controller = str_of(cs, "controller");
    fc->direction = str_of(cs, "direction");
    fc->save = str_of(cs, "save");
    fc->rows = json_object_get_boolean(get(cs, "ts_per_trajectory"));
    fc->max_steps = json_object_get_int(get(cs, "max_steps"));
    if (strcmp(fc->controller, "pid") == 0) {
        fc->rtol = json_object_get_double(get(cs, "rtol"));
        fc->atol = json_object_get_double(get(cs, "atol"));
    } else {
        assert_string_equal(fc->controller, "constant");
    }
    fc->B = json_object_array_length(get(cs, "trajectories"));
    size_t rows, cols;
    fc->y0 = read_matrix(get(cs, "y0"), &rows, &cols);
    assert_int_equal(rows, fc->B);
    assert_int_equal(cols, N);
    fc->t0s = read_vector(get(cs, "t0s"), fc->B);
    fc->t1s = read_vector(get(cs, "t1s"), fc->B);
    fc->dt0s = read_vector(get(cs, "dt0s"), fc->B);
    if (strcmp(fc->save, "ts") == 0) {
        fc->ts = read_matrix(get(cs, "save_ts"), &rows, &fc->T);
        assert_int_equal(rows, fc->rows ? fc->B : 1);
    }
}

static void free_fcase(fcase *fc)
{
    free(fc->y0);
    free(fc->t0s);
    free(fc->t1s);
    free(fc->dt0s);
    free(fc->ts);
}

/* Solves case fc in `ctx`: the whole batch (only = SIZE_MAX), or trajectory `only` alone with its
 * own interval, step and (row of) save times as a shared list. */
static clnode_solution *solve_fcase(clnode_context *ctx, const clnode_model *m, const fcase *fc,
                                    clnode_precision prec, size_t only)
{
    const size_t N = clnode_model_dim(m), b0 = only == SIZE_MAX ? 0 : only;
    clnode_solve_options o;
    clnode_problem pb = test_problem(only == SIZE_MAX ? fc->B : 1, fc->y0 + b0 * N);
    clnode_solve_default_options(&o);
    o.method = clnode_method_by_name(fc->method);
    assert_non_null(o.method);
    o.precision = prec;
    o.max_steps = fc->max_steps;
    o.precision_guard = CLNODE_GUARD_OFF; /* diffrax's steps, whatever the arithmetic does */
    o.constant_step = strcmp(fc->controller, "constant") == 0;
    if (!o.constant_step) {
        o.rtol = fc->rtol;
        o.atol = fc->atol;
    }
    pb.t0s = fc->t0s + b0;
    pb.t1s = fc->t1s + b0;
    pb.dt0s = fc->dt0s + b0;
    /* diffrax's SaveAt: exactly one kind of point */
    o.save_t1 = strcmp(fc->save, "t1") == 0;
    o.save_steps = strcmp(fc->save, "steps") == 0;
    if (fc->ts) {
        pb.save_ts = fc->ts + (fc->rows ? b0 * fc->T : 0);
        pb.n_save_ts = fc->T;
        pb.save_ts_per_trajectory = fc->rows && only == SIZE_MAX;
    }
    clnode_solution *s = NULL;
    const clnode_status st = clnode_solve(ctx, m, &o, &pb, &s);
    if (st != CLNODE_OK)
        fail_msg("%s %s %s %s: clnode_solve returned %s: %s", fc->form, fc->model, fc->method,
                 fc->direction, clnode_status_name(st), clnode_context_last_error(ctx));
    return s;
}

/* Loads every model of the file's header into ctx, checking that the scale it read is the
 * header's (the float32 values of the file). */
static void load_models(clnode_context *ctx, json_object *root, model_set *ms)
{
    json_object *models = get(root, "models");
    ms->n = 0;
    json_object_object_foreach(models, name, spec)
    {
        assert_true(ms->n < MAX_MODELS);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", CLN_SOURCE_ROOT, str_of(spec, "file"));
        clnode_model *m = NULL;
        const clnode_status st = clnode_model_load_safetensors(ctx, path, &m);
        if (st != CLNODE_OK)
            fail_msg("cannot load %s: %s", path, clnode_context_last_error(ctx));
        json_object *scale = get(spec, "out_scale");
        size_t n = 0;
        const double *s = clnode_model_out_scale(m, &n);
        assert_non_null(s);
        assert_int_equal(n, json_object_array_length(scale));
        assert_string_equal(clnode_model_out_scale_dtype(m), "F32");
        for (size_t i = 0; i < n; ++i)
            assert_true(s[i] == dbl_at(scale, i));
        ms->name[ms->n] = name;
        ms->m[ms->n++] = m;
    }
}

static const clnode_model *model_named(const model_set *ms, const char *name)
{
    for (size_t i = 0; i < ms->n; ++i)
        if (strcmp(ms->name[i], name) == 0)
            return ms->m[i];
    fail_msg("reference data: no model \"%s\"", name);
    return NULL;
}

static void free_models(model_set *ms)
{
    for (size_t i = 0; i < ms->n; ++i)
        clnode_model_destroy(&ms->m[i]);
    ms->n = 0;
}

/* The largest deviation of the N-vector `y` from the reference row, relative to the row's
 * magnitude (components crossing zero are compared with the scale of the whole state). */
static double row_err(const double *y, json_object *row, size_t N)
{
    double scale = 0, worst = 0;
    for (size_t j = 0; j < N; ++j)
        scale = fmax(scale, fabs(dbl_at(row, j)));
    for (size_t j = 0; j < N; ++j)
        worst = fmax(worst, fabs(y[j] - dbl_at(row, j)) / fmax(scale, 1e-3));
    return worst;
}

/* The kind of saved point of the case's SaveAt. */
static clnode_save_kind kind_of(const fcase *fc)
{
    if (strcmp(fc->save, "ts") == 0)
        return CLNODE_SAVE_TS;
    return strcmp(fc->save, "steps") == 0 ? CLNODE_SAVE_STEPS : CLNODE_SAVE_T1;
}

/* Trajectory b of s against diffrax's trajectory `tr`: counts, result, saved times and states.
 * Returns the largest relative deviation of a saved state (where the step counts agree). */
static double compare_traj(const clnode_solution *s, size_t b, json_object *tr, const fcase *fc,
                           size_t N, tally *t)
{
    const long rs = json_object_get_int(get(tr, "num_steps"));
    const long ra = json_object_get_int(get(tr, "num_accepted"));
    const long rr = json_object_get_int(get(tr, "num_rejected"));
    clnode_trajectory_stats st;
    assert_ok(clnode_solution_stats(s, b, &st));
    assert_string_equal(clnode_result_name(st.result), str_of(tr, "result"));
    const int same = st.num_steps == rs && st.num_accepted == ra && st.num_rejected == rr;
    const int diff = (int)labs(st.num_steps - rs);
    t->trajs++;
    t->exact += same;
    t->within2 += diff <= 2;
    t->worst_diff = diff > t->worst_diff ? diff : t->worst_diff;
    if (!same)
        print_message("    traj %zu: clnode %ld (%ld/%ld) vs diffrax %ld (%ld/%ld)\n", b,
                      st.num_steps, st.num_accepted, st.num_rejected, rs, ra, rr);
    const clnode_save_kind kind = kind_of(fc);
    size_t n;
    const double *sts, *sys;
    assert_ok(clnode_solution_saved(s, b, kind, &n, &sts, &sys));
    json_object *rts = get(tr, "ts"), *rys = get(tr, "ys");
    const size_t nrows = json_object_array_length(rys);
    assert_true(nrows > 0 && json_object_array_length(rts) == nrows);
    if (n == 0)
        fail_msg("traj %zu: no saved point, diffrax %zu", b, nrows);
    t->max_rel_final = fmax(
        t->max_rel_final, row_err(sys + (n - 1) * N, json_object_array_get_idx(rys, nrows - 1), N));
    if (kind == CLNODE_SAVE_TS && n != nrows)
        fail_msg("traj %zu: %zu saved times, diffrax %zu", b, n, nrows);
    if (!same || n != nrows)
        return 0; /* other step sequences: only the final state compares */
    double worst = 0;
    for (size_t r = 0; r < nrows; ++r) {
        const double tref = dbl_at(rts, r);
        if (kind == CLNODE_SAVE_TS)
            t->times_differ += sts[r] != tref;
        else
            t->max_rel_t = fmax(t->max_rel_t, fabs(sts[r] - tref) / fmax(fabs(tref), 1e-3));
        worst = fmax(worst, row_err(sys + r * N, json_object_array_get_idx(rys, r), N));
    }
    if (kind == CLNODE_SAVE_STEPS)
        t->max_rel_steps = fmax(t->max_rel_steps, worst);
    else
        t->max_rel_dense = fmax(t->max_rel_dense, worst);
    return worst;
}

/* Every trajectory of s bit for bit as solved alone, and as on the host (another device). */
static void check_bits(const clnode_solution *s, const model_set *ms, const model_set *host_ms,
                       const fcase *fc, clnode_precision prec)
{
    const clnode_model *m = model_named(ms, fc->model);
    clnode_solution *h = NULL;
    if (g_host) {
        h = solve_fcase(g_host, model_named(host_ms, fc->model), fc, prec, SIZE_MAX);
        for (size_t b = 0; b < fc->B; ++b)
            test_assert_same_row(s, b, h, b, "this device against the host", 1);
        clnode_solution_destroy(&h);
    }
    for (size_t b = 0; b < fc->B; ++b) {
        clnode_solution *alone = solve_fcase(g_ctx, m, fc, prec, b);
        test_assert_same_row(s, b, alone, 0, "in its batch against alone", 1);
        clnode_solution_destroy(&alone);
    }
}

static json_object *open_file(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/diffrax/%s", CLN_SOURCE_ROOT, file);
    json_object *root = json_object_from_file(path);
    if (!root)
        fail_msg("cannot read %s", path);
    return root;
}

/* The last saved states of trajectory b, clnode's fp32 one (s) and diffrax's fp32 one (tr), against
 * diffrax's fp64 solution of the same problem (tr64: the inputs are float32 numbers in both). */
static void compare_vs64(const clnode_solution *s, size_t b, const fcase *fc, json_object *tr,
                         json_object *tr64, size_t N, tally *t)
{
    if (strcmp(str_of(tr64, "result"), "success") != 0 || strcmp(str_of(tr, "result"), "success"))
        return;
    json_object *rys = get(tr, "ys"), *rys64 = get(tr64, "ys");
    const size_t nr = json_object_array_length(rys), n64 = json_object_array_length(rys64);
    json_object *last64 = json_object_array_get_idx(rys64, n64 - 1);
    json_object *last32 = json_object_array_get_idx(rys, nr - 1);
    assert_true(dbl_at(get(tr, "ts"), nr - 1) == dbl_at(get(tr64, "ts"), n64 - 1));
    double d32[64];
    assert_true(N <= 64);
    for (size_t j = 0; j < N; ++j)
        d32[j] = dbl_at(last32, j);
    size_t n;
    const double *sts, *sys;
    assert_ok(clnode_solution_saved(s, b, kind_of(fc), &n, &sts, &sys));
    assert_true(n > 0);
    t->max_rel_final_vs64 = fmax(t->max_rel_final_vs64, row_err(sys + (n - 1) * N, last64, N));
    t->diffrax_rel_final_vs64 = fmax(t->diffrax_rel_final_vs64, row_err(d32, last64, N));
}

/* Solves every case of `file` whose controller is `controller` ("pid" or "constant"), printing
 * one line per case, into t. With `file64` (for an fp32 file: the fp64 file of the same cases in
 * the same order), the last saved states are also compared with diffrax's fp64 ones. */
static void run_file(const char *file, const char *file64, const char *controller,
                     clnode_precision prec, tally *t)
{
    json_object *root = open_file(file), *root64 = file64 ? open_file(file64) : NULL;
    model_set ms, host_ms = {0};
    load_models(g_ctx, root, &ms);
    if (g_host)
        load_models(g_host, root, &host_ms);
    json_object *cases = get(root, "cases"), *cases64 = root64 ? get(root64, "cases") : NULL;
    const size_t nc = json_object_array_length(cases);
    assert_true(nc > 0);
    if (cases64)
        assert_int_equal(json_object_array_length(cases64), nc);
    for (size_t c = 0; c < nc; ++c) {
        json_object *cs = json_object_array_get_idx(cases, c);
        if (strcmp(str_of(cs, "controller"), controller) != 0)
            continue;
        json_object *trajs = get(cs, "trajectories"), *trajs64 = NULL;
        if (cases64) {
            json_object *cs64 = json_object_array_get_idx(cases64, c);
            const char *keys[] = {"form", "model", "method", "direction", "save"};
            for (size_t k = 0; k < sizeof keys / sizeof *keys; ++k)
                assert_string_equal(str_of(cs64, keys[k]), str_of(cs, keys[k]));
            trajs64 = get(cs64, "trajectories");
        }
        const clnode_model *m = model_named(&ms, str_of(cs, "model"));
        const size_t N = clnode_model_dim(m);
        fcase fc;
        load_fcase(cs, N, &fc);
        char tol[64] = "";
        if (strcmp(fc.controller, "pid") == 0)
            snprintf(tol, sizeof tol, " rtol %g", fc.rtol);
        print_message("  %s %s %s %s%s %s save %s%s:\n", fc.form, fc.model, fc.method,
                      fc.controller, tol, fc.direction, fc.save, fc.rows ? " (rows)" : "");
        clnode_solution *s = solve_fcase(g_ctx, m, &fc, prec, SIZE_MAX);
        char steps[256] = "", ref[256] = "";
        size_t ls = 0, lr = 0;
        double worst = 0;
        for (size_t b = 0; b < fc.B; ++b) {
            json_object *tr = json_object_array_get_idx(trajs, b);
            worst = fmax(worst, compare_traj(s, b, tr, &fc, N, t));
            if (trajs64)
                compare_vs64(s, b, &fc, tr, json_object_array_get_idx(trajs64, b), N, t);
            clnode_trajectory_stats st;
            assert_ok(clnode_solution_stats(s, b, &st));
            ls += (size_t)snprintf(steps + ls, sizeof steps - ls, "%s%ld", b ? "," : "",
                                   st.num_steps);
            lr += (size_t)snprintf(ref + lr, sizeof ref - lr, "%s%d", b ? "," : "",
                                   json_object_get_int(get(tr, "num_steps")));
            assert_true(ls < sizeof steps && lr < sizeof ref);
        }
        print_message("    clnode %s vs diffrax %s steps; saved states deviate by %.3g\n", steps,
                      ref, worst);
        check_bits(s, &ms, &host_ms, &fc, prec);
        clnode_solution_destroy(&s);
        free_fcase(&fc);
    }
    free_models(&ms);
    free_models(&host_ms);
    json_object_put(root);
    if (root64)
        json_object_put(root64);
}

static void report(const char *what, const tally *t)
{
    if (t->diffrax_rel_final_vs64 > 0)
        print_message("  %s: last saved states against diffrax's fp64 solution: clnode %.3g, "
                      "diffrax's own fp32 %.3g\n",
                      what, t->max_rel_final_vs64, t->diffrax_rel_final_vs64);
    print_message("  %s: %d/%d trajectories with diffrax's exact step counts, %d within 2 (worst "
                  "%d); max relative deviation where the counts agree: dense output (ts, t1) "
                  "%.3g, accepted-step ends %.3g in time and %.3g in value; last saved states "
                  "%.3g; %d saved times differ\n",
                  what, t->exact, t->trajs, t->within2, t->worst_diff, t->max_rel_dense,
                  t->max_rel_t, t->max_rel_steps, t->max_rel_final, t->times_differ);
}

/* fp64: diffrax's exact step counts and saved times, the dense output (SaveAt ts and t1) and the
 * last saved states within FP64_BOUND; the ends of accepted steps within STEP_END_BOUND in time and
 * value, the bound of test_conformance.c's diffrax parity: where tanh saturates the field is
 * nearly constant, the error estimate a difference of nearly equal stages, and the controller's
 * step sizes agree with diffrax's to ~1e-8 (the neural ODE's steps); the dense output between
 * them agrees to ~1e-11. */
static tally check_fp64(const char *controller)
{
    if (!clnode_context_supports(g_ctx, CLNODE_FP64))
        skip();
    tally t = {0};
    run_file("forms-fp64.json", NULL, controller, CLNODE_FP64, &t);
    report(controller, &t);
    assert_true(t.trajs > 0);
    assert_int_equal(t.exact, t.trajs);
    assert_int_equal(t.times_differ, 0);
    assert_true(t.max_rel_dense <= FP64_BOUND);
    assert_true(t.max_rel_final <= FP64_BOUND);
    assert_true(t.max_rel_t <= STEP_END_BOUND);
    assert_true(t.max_rel_steps <= STEP_END_BOUND);
    return t;
}

/* The neural ODE example (scalar and per-component scales) and the latent rows under the PID
 * controller. */
static void test_forms_pid_fp64(void **state)
{
    (void)state;
    check_fp64("pid");
}

/* The latent ODE example's decoder (constant steps, each sample its own save times) and constant
 * steps with per-trajectory intervals and steps. */
static void test_forms_constant_fp64(void **state)
{
    (void)state;
    tally t = check_fp64("constant");
    assert_true(t.max_rel_t == 0.0); /* diffrax's step ends exactly */
}

/* fp32 under the PID controller: as in test_ensemble_diffrax.c, the step counts are partly decided
 * by rounding (diffrax's own fp32 counts differ from its fp64 ones on the same problems by up to
 * 2), so they are held to that test's fp32 shares, and the last saved states, which along
 * different step sequences differ by the method's own error, to accuracy: no further from
 * diffrax's fp64 solution than FP32_FACTOR times diffrax's own fp32 solution is. */
static void test_forms_pid_fp32(void **state)
{
    (void)state;
    tally t = {0};
    run_file("forms-fp32.json", "forms-fp64.json", "pid", CLNODE_FP32, &t);
    report("pid", &t);
    assert_true(t.trajs > 0);
    assert_true(t.exact * 100 >= t.trajs * 65);
    assert_true(t.within2 * 100 >= t.trajs * 90);
    assert_true(t.worst_diff <= 8);
    assert_int_equal(t.times_differ, 0);
    assert_true(t.max_rel_final_vs64 <= FP32_FACTOR * t.diffrax_rel_final_vs64 + 1e-6);
}

/* fp32 with constant steps: no controller decides them, so diffrax's exact step counts and step
 * ends (its rule for them is arithmetic on the times in the state precision), every saved state
 * within FP32_CONSTANT_BOUND of diffrax's fp32 one (the same steps: only the rounding of the
 * network's sums differs, 4e-6 here), and the last saved states as accurate as diffrax's own
 * fp32 ones (FP32_FACTOR). */
static void test_forms_constant_fp32(void **state)
{
    (void)state;
    tally t = {0};
    run_file("forms-fp32.json", "forms-fp64.json", "constant", CLNODE_FP32, &t);
    report("constant", &t);
    assert_true(t.trajs > 0);
    assert_int_equal(t.exact, t.trajs);
    assert_int_equal(t.times_differ, 0);
    assert_true(t.max_rel_t == 0.0);
    assert_true(t.max_rel_dense <= FP32_CONSTANT_BOUND);
    assert_true(t.max_rel_steps <= FP32_CONSTANT_BOUND);
    assert_true(t.max_rel_final_vs64 <= FP32_FACTOR * t.diffrax_rel_final_vs64 + 1e-6);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL,
                                        "the examples' forms against diffrax", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    if (strcmp(g_device, "host") != 0) {
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = "host";
        if (clnode_context_create(&co, &g_host) != CLNODE_OK) {
            printf("cannot create a host context\n");
            clnode_context_destroy(&g_ctx);
            return 1;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_pid_fp64),
        cmocka_unit_test(test_forms_constant_fp64),
        cmocka_unit_test(test_forms_pid_fp32),
        cmocka_unit_test(test_forms_constant_fp32),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_host);
    clnode_context_destroy(&g_ctx);
    return failed;
}
