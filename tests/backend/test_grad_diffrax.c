/* test_grad_diffrax.c - clnode's reverse pass (clnode_gradient_compute) against jax.grad of the
 * real diffrax 0.7.2, on the host.
 *
 * Oracle: tests/data/diffrax/grad-<fp64|fp32>.npz, written by `scripts/make_reference.py
 * --only-grad` (the members and their columns: GRAD_MEMBERS, GRAD_CASE_COLS and GRAD_TRAJ_COLS
 * there). Each case is a batch of 2 to 4 trajectories of a small model (2 -> 16 -> 16 -> 2,
 * tests/data/models/grad-*.safetensors: every activation and final activation, time and
 * conditioning inputs, no output scale, a scalar or one per component) under one method
 * (tsit5, dopri5, dopri8, bosh3, heun, euler), PID or constant steps, one interval or each
 * trajectory its own t0, t1 and dt0, forwards or backwards, saving t0, ts (shared or one row per
 * trajectory), the step ends and t1 alone or together, one case with trajectories that stop at
 * max_steps. The loss is L = sum(cot * ys) over the saved points, cot a fixed random cotangent
 * in clnode's saved-points layout (batch x slots x dim, slots the most points of any trajectory).
 *
 * Per case: the solve (keep_tape = 1) must take the reference's steps, its step ends bit for bit
 * (they were clnode's own when the data was made; otherwise the data is stale: regenerate it), and
 * its saved values must agree with diffrax's at those steps (FWD_BOUND_*: the reference is the
 * same computation). Then, per array (y0, inputs, each layer's weight and bias, out_scale), the
 * normwise relative error ||g - ref|| / ||ref||:
 * (a) fp64 within BOUND_STEPTO of jax.grad through diffrax with StepTo(ts=<clnode's step ends>);
 * (b) fp64 within BOUND_ADAPTIVE of jax.grad through diffrax's own adaptive solve, in the cases
 *     where diffrax's step counts are clnode's for every trajectory and its accepted step ends
 *     lie within STEP_END_PREMISE of clnode's (equal counts are not equal step ends: diffrax's
 *     agree with clnode's to 1e-7 - 4e-7 in time where the error estimate is not rounding noise,
 *     which moves the gradient by up to ~1e-8; the line prints how far apart they are);
 * (c) the cases whose counts differ, or whose step ends lie farther apart (dopri8 at rtol 1e-8,
 *     where the error estimate is partly rounding noise: diffrax's own step ends move by 3e-6
 *     between a vmapped solve and one trajectory alone), are held to (a) only; their line still
 *     prints (b)'s figure;
 * fp32: ||g_clnode32 - g64|| <= FP32_FACTOR ||g_diffrax32 - g64||, g64 the float64 StepTo gradient
 *     at clnode float32's step ends and g_diffrax32 diffrax float32's own (StepTo at those ends),
 *     with an absolute floor of FP32_FLOOR ||g64|| (arrays that are exactly zero: a dead relu).
 * One line per case with the worst relative error of (a) and (b) (and, for (b), how far in time
 * diffrax's own accepted step ends are from clnode's: member dx_step_ends), then the worst case
 * of each rule. */
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
#include "clnode/gradient.h"
#include "npy.h"
#include "npz.h"
#include "test_device.h"
#include "test_problem.h"

#ifndef CLN_SOURCE_ROOT
#error "CLN_SOURCE_ROOT must name the source tree"
#endif

#define BOUND_STEPTO 1e-11
#define BOUND_ADAPTIVE 1e-7
#define STEP_END_PREMISE 4e-7
#define FP32_FACTOR 4.0
#define FP32_FLOOR 1e-12
/* clnode's saved values against diffrax's at the same steps, relative to their norm */
#define FWD_BOUND_FP64 1e-12
#define FWD_BOUND_FP32 1e-4

static const char *g_device = "host";
static clnode_context *g_ctx;
static int g_stopped; /* trajectories that ended with max_steps_reached, in the file checked */

/* The columns of the member "cases" (GRAD_CASE_COLS) and of "traj_counts" (GRAD_TRAJ_COLS). */
enum {
    C_NAME,
    C_MODEL,
    C_METHOD,
    C_CONSTANT,
    C_SAVE_T0,
    C_SAVE_TS,
    C_SAVE_STEPS,
    C_SAVE_T1,
    C_TS_ROWS,
    C_N_TS,
    C_BATCH,
    C_SLOTS,
    C_MAX_STEPS,
    C_TRAJ_OFF,
    C_Y0_OFF,
    C_IN_OFF,
    C_TS_OFF,
    C_COT_OFF,
    C_GRAD_OFF,
    C_GRAD_LEN,
    C_ADAPTIVE_OK,
    C_COLS
};
enum {
    T_RESULT,
    T_NUM_STEPS,
    T_NUM_ACCEPTED,
    T_ENDS_OFF,
    T_DX_STEPS,
    T_DX_ACCEPTED,
    T_DX_RESULT,
    T_COLS
};

#define MAX_MEMBERS CLN_NPZ_MAX_MEMBERS

/* One reference file: its members decoded to doubles. */
typedef struct gfile {
    size_t n;
    char name[MAX_MEMBERS][CLN_NPZ_MAX_NAME];
    double *data[MAX_MEMBERS];
    size_t rows[MAX_MEMBERS],
        cols[MAX_MEMBERS]; /* cols: the product of the shape after the first */
    size_t count[MAX_MEMBERS];
} gfile;

static void load_gfile(const char *file, gfile *f)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/tests/data/diffrax/%s", CLN_SOURCE_ROOT, file);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    const long size = ftell(fp);
    assert_true(size > 0);
    rewind(fp);
    unsigned char *img = malloc((size_t)size);
    assert_non_null(img);
    assert_int_equal(fread(img, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    cln_npz_entry e[MAX_MEMBERS];
    memset(f, 0, sizeof *f);
    if (cln_npz_parse(img, (size_t)size, e, &f->n, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    for (size_t i = 0; i < f->n; ++i) {
        cln_npy_header h;
        if (cln_npy_parse(e[i].data, e[i].size, &h, err, sizeof err) != 0)
            fail_msg("%s, member %s: %s", path, e[i].name, err);
        memcpy(f->name[i], e[i].name, sizeof f->name[i]);
        f->count[i] = h.count;
        f->rows[i] = h.ndim ? h.shape[0] : 1;
        f->cols[i] = f->rows[i] ? h.count / f->rows[i] : 0;
        f->data[i] = malloc((h.count ? h.count : 1) * sizeof(double));
        assert_non_null(f->data[i]);
        cln_npy_decode(e[i].data, &h, f->data[i]);
    }
    free(img);
}

static void free_gfile(gfile *f)
{
    for (size_t i = 0; i < f->n; ++i)
        free(f->data[i]);
    memset(f, 0, sizeof *f);
}

/* Member `name`, with at least `cols` columns per row when cols > 0 (exactly that many). */
static const double *member(const gfile *f, const char *name, size_t cols, size_t *count)
{
    for (size_t i = 0; i < f->n; ++i)
        if (strcmp(f->name[i], name) == 0) {
            if (cols)
                assert_int_equal(f->cols[i], cols);
            if (count)
                *count = f->count[i];
            return f->data[i];
        }
    fail_msg("reference data: no member \"%s\"", name);
    return NULL;
}

/* Row `i` of the member "names" (character codes, padded with zeros) into buf. */
static const char *name_at(const gfile *f, double idx, char *buf, size_t len)
{
    size_t count;
    const double *names = member(f, "names", 0, &count);
    size_t i = 0, row = 0, width = 0;
    for (size_t k = 0; k < f->n; ++k)
        if (strcmp(f->name[k], "names") == 0)
            width = f->cols[k], row = f->rows[k];
    assert_true(idx >= 0 && (size_t)idx < row);
    for (; i < width && names[(size_t)idx * width + i] != 0; ++i) {
        assert_true(i + 1 < len);
        buf[i] = (char)names[(size_t)idx * width + i];
    }
    buf[i] = '\0';
    return buf;
}

/* One case of a file, as the C side uses it. */
typedef struct gcase {
    char name[64], model[256], method[32];
    const double *col; /* its row of "cases" */
    size_t B, N, k, slots, n_ts, grad_len;
    const double *traj, *counts, *y0, *inputs, *save_ts, *cot, *g_stepto, *g_adaptive, *g64_stepto,
        *ys_stepto;
    double rtol, atol;
} gcase;

static void load_gcase(const gfile *f, size_t c, gcase *gc)
{
    memset(gc, 0, sizeof *gc);
    const double *cases = member(f, "cases", C_COLS, NULL), *tols = member(f, "tols", 2, NULL);
    gc->col = cases + c * C_COLS;
    name_at(f, gc->col[C_NAME], gc->name, sizeof gc->name);
    name_at(f, gc->col[C_MODEL], gc->model, sizeof gc->model);
    name_at(f, gc->col[C_METHOD], gc->method, sizeof gc->method);
    gc->rtol = tols[2 * c];
    gc->atol = tols[2 * c + 1];
    gc->B = (size_t)gc->col[C_BATCH];
    gc->slots = (size_t)gc->col[C_SLOTS];
    gc->n_ts = (size_t)gc->col[C_N_TS];
    gc->grad_len = (size_t)gc->col[C_GRAD_LEN];
    const size_t t0 = (size_t)gc->col[C_TRAJ_OFF], go = (size_t)gc->col[C_GRAD_OFF];
    gc->traj = member(f, "traj", 3, NULL) + 3 * t0;
    gc->counts = member(f, "traj_counts", T_COLS, NULL) + T_COLS * t0;
    gc->y0 = member(f, "y0", 0, NULL) + (size_t)gc->col[C_Y0_OFF];
    gc->inputs = member(f, "inputs", 0, NULL) + (size_t)gc->col[C_IN_OFF];
    gc->save_ts = member(f, "save_ts", 0, NULL) + (size_t)gc->col[C_TS_OFF];
    gc->cot = member(f, "cot", 0, NULL) + (size_t)gc->col[C_COT_OFF];
    gc->ys_stepto = member(f, "ys_stepto", 0, NULL) + (size_t)gc->col[C_COT_OFF];
    gc->g_stepto = member(f, "g_stepto", 0, NULL) + go;
    for (size_t i = 0; i < f->n; ++i) {
        if (strcmp(f->name[i], "g_adaptive") == 0)
            gc->g_adaptive = f->data[i] + go;
        if (strcmp(f->name[i], "g64_stepto") == 0)
            gc->g64_stepto = f->data[i] + go;
    }
}

/* Per-trajectory t0, t1, dt0 (member "traj": 3 columns) split into three arrays. */
typedef struct spans {
    double *t0s, *t1s, *dt0s;
} spans;

static clnode_solution *solve_gcase(const clnode_model *m, const gcase *gc, clnode_precision prec,
                                    int steps_only, spans *sp)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.method = clnode_method_by_name(gc->method);
    assert_non_null(o.method);
    o.precision = prec;
    o.max_steps = (long)gc->col[C_MAX_STEPS];
    o.precision_guard = CLNODE_GUARD_OFF;
    o.constant_step = gc->col[C_CONSTANT] != 0;
    if (!o.constant_step) {
        o.rtol = gc->rtol;
        o.atol = gc->atol;
    }
    clnode_problem pb = test_problem(gc->B, gc->y0);
    pb.t0s = sp->t0s;
    pb.t1s = sp->t1s;
    pb.dt0s = sp->dt0s;
    pb.inputs = gc->k ? gc->inputs : NULL;
    if (steps_only) {
        o.save_steps = 1;
    } else {
        o.keep_tape = 1;
        o.save_t0 = gc->col[C_SAVE_T0] != 0;
        o.save_t1 = gc->col[C_SAVE_T1] != 0;
        o.save_steps = gc->col[C_SAVE_STEPS] != 0;
        if (gc->col[C_SAVE_TS] != 0) {
            pb.save_ts = gc->save_ts;
            pb.n_save_ts = gc->n_ts;
            pb.save_ts_per_trajectory = gc->col[C_TS_ROWS] != 0;
        }
    }
    clnode_solution *s = NULL;
    const clnode_status st = clnode_solve(g_ctx, m, &o, &pb, &s);
    if (st != CLNODE_OK)
        fail_msg("%s: clnode_solve returned %s: %s", gc->name, clnode_status_name(st),
                 clnode_context_last_error(g_ctx));
    return s;
}

/* The solve takes the reference's steps: counts, results and every step end bit for bit. */
static void check_steps(const gfile *f, const clnode_model *m, const gcase *gc,
                        clnode_precision prec, spans *sp)
{
    const double *ends = member(f, "step_ends", 0, NULL);
    clnode_solution *s = solve_gcase(m, gc, prec, 1, sp);
    for (size_t b = 0; b < gc->B; ++b) {
        const double *tc = gc->counts + T_COLS * b;
        char result[64];
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, b, &st));
        name_at(f, tc[T_RESULT], result, sizeof result);
        if (strcmp(clnode_result_name(st.result), result) != 0 ||
            st.num_steps != (long)tc[T_NUM_STEPS] || st.num_accepted != (long)tc[T_NUM_ACCEPTED])
            fail_msg("%s trajectory %zu: clnode %s after %ld steps (%ld accepted), the reference "
                     "%s after %.0f (%.0f): regenerate the data (scripts/make_reference.py "
                     "--only-grad)",
                     gc->name, b, clnode_result_name(st.result), st.num_steps, st.num_accepted,
                     result, tc[T_NUM_STEPS], tc[T_NUM_ACCEPTED]);
        g_stopped += st.result == CLNODE_RESULT_MAX_STEPS_REACHED;
        size_t n;
        const double *ts, *ys;
        assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_STEPS, &n, &ts, &ys));
        assert_int_equal(n, (size_t)tc[T_NUM_ACCEPTED]);
        const double *ref = ends + (size_t)tc[T_ENDS_OFF];
        for (size_t i = 0; i < n; ++i)
            if (memcmp(&ts[i], &ref[i], sizeof(double)) != 0)
                fail_msg("%s trajectory %zu: step %zu ends at %.17g, the reference at %.17g: "
                         "regenerate the data (scripts/make_reference.py --only-grad)",
                         gc->name, b, i, ts[i], ref[i]);
    }
    clnode_solution_destroy(&s);
}

/* ||a - b|| / ||b|| over n values (||a|| when b is zero: then an absolute error). */
static double rel_err(const double *a, const double *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; ++i) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        r += b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

static double dist(const double *a, const double *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; ++i)
        d += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(d);
}

/* The arrays of a gradient: y0, inputs, then each layer's weight and bias, then out_scale; the
 * name, clnode's values, their offset in the reference's flat gradient and their count. */
#define MAX_ARRAYS 16
typedef struct garrays {
    size_t n;
    char name[MAX_ARRAYS][48];
    const double *val[MAX_ARRAYS];
    size_t off[MAX_ARRAYS], len[MAX_ARRAYS];
} garrays;

static void add_array(garrays *a, const char *name, const double *val, size_t off, size_t len)
{
    assert_true(a->n < MAX_ARRAYS);
    snprintf(a->name[a->n], sizeof a->name[a->n], "%s", name);
    a->val[a->n] = val;
    a->off[a->n] = off;
    a->len[a->n++] = len;
}

static garrays gradient_arrays(const clnode_gradient *g, const clnode_model *m, const gcase *gc)
{
    garrays a = {0};
    size_t off = 0, np = 0, ns = 0;
    add_array(&a, "y0", clnode_gradient_y0(g), off, gc->B * gc->N);
    off += gc->B * gc->N;
    if (gc->k) {
        add_array(&a, "inputs", clnode_gradient_inputs(g), off, gc->B * gc->k);
        off += gc->B * gc->k;
    }
    const size_t params_off = off;
    for (size_t l = 0; l < clnode_model_num_layers(m); ++l) {
        char name[48];
        const size_t in = clnode_model_layer_in(m, l), out = clnode_model_layer_out(m, l);
        snprintf(name, sizeof name, "layers.%zu.weight", l);
        add_array(&a, name, clnode_gradient_weight(g, l), off, out * in);
        off += out * in;
        snprintf(name, sizeof name, "layers.%zu.bias", l);
        add_array(&a, name, clnode_gradient_bias(g, l), off, out);
        off += out;
    }
    const double *s = clnode_gradient_out_scale(g, &ns);
    if (s) {
        add_array(&a, "out_scale", s, off, ns);
        off += ns;
    }
    assert_int_equal(off, gc->grad_len);
    const double *all = clnode_gradient_params(g, &np);
    assert_int_equal(np, gc->grad_len - params_off);
    for (size_t i = 0; i < a.n; ++i) {
        assert_non_null(a.val[i]);
        if (a.off[i] >= params_off) /* the flat parameters are the same values */
            assert_memory_equal(a.val[i], all + (a.off[i] - params_off), a.len[i] * sizeof(double));
    }
    return a;
}

/* The worst relative error of any array against ref (the flat reference gradient), and its name. */
static double worst_rel(const garrays *a, const double *ref, const char **which)
{
    double worst = 0;
    for (size_t i = 0; i < a->n; ++i) {
        const double e = rel_err(a->val[i], ref + a->off[i], a->len[i]);
        if (!(e <= worst)) { /* NaN counts as the worst */
            worst = e;
            *which = a->name[i];
        }
    }
    return worst;
}

/* The worst case of a rule. */
typedef struct worst {
    double v;
    char where[192];
} worst;

static void note_worst(worst *w, double v, const gcase *gc, const char *array)
{
    if (!(v <= w->v)) {
        w->v = v;
        snprintf(w->where, sizeof w->where, "%s %s", gc->name, array);
    }
}

/* The loaded model of a case, its dimensions in gc, the cotangent's slots checked against the
 * solution's points. */
static clnode_model *load_model(gcase *gc)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CLN_SOURCE_ROOT, gc->model);
    clnode_model *m = NULL;
    if (clnode_model_load_safetensors(g_ctx, path, &m) != CLNODE_OK)
        fail_msg("cannot load %s: %s", path, clnode_context_last_error(g_ctx));
    gc->N = clnode_model_dim(m);
    gc->k = clnode_model_num_inputs(m);
    return m;
}

static spans split_spans(const gcase *gc)
{
    spans sp = {malloc(gc->B * sizeof(double)), malloc(gc->B * sizeof(double)),
                malloc(gc->B * sizeof(double))};
    assert_true(sp.t0s && sp.t1s && sp.dt0s);
    for (size_t b = 0; b < gc->B; ++b) {
        sp.t0s[b] = gc->traj[3 * b];
        sp.t1s[b] = gc->traj[3 * b + 1];
        sp.dt0s[b] = gc->traj[3 * b + 2];
    }
    return sp;
}

static void free_spans(spans *sp)
{
    free(sp->t0s);
    free(sp->t1s);
    free(sp->dt0s);
}

/* The saved values of s (gc->slots slots) against diffrax's at the same steps. */
static double check_forward(const clnode_solution *s, const gcase *gc)
{
    size_t most = 0;
    for (size_t b = 0; b < gc->B; ++b)
        most = clnode_solution_points(s, b) > most ? clnode_solution_points(s, b) : most;
    if (most != gc->slots)
        fail_msg("%s: %zu saved points at most, the reference %zu", gc->name, most, gc->slots);
    const size_t n = gc->B * gc->slots * gc->N;
    double *ys = malloc(n * sizeof(double));
    assert_non_null(ys);
    assert_ok(clnode_solution_rows_f64(s, 0, gc->B, gc->slots, NULL, ys));
    for (size_t b = 0; b < gc->B; ++b) /* padding: +inf in clnode's rows, 0 in the reference's */
        for (size_t i = clnode_solution_points(s, b) * gc->N; i < gc->slots * gc->N; ++i)
            ys[b * gc->slots * gc->N + i] = 0.0;
    const double e = rel_err(ys, gc->ys_stepto, n);
    free(ys);
    return e;
}

/* Solves case c of f with the tape, checks its steps and forward, computes its gradient. */
static clnode_gradient *gradient_of(const gfile *f, size_t c, clnode_precision prec, gcase *gc,
                                    clnode_model **m, double *fwd)
{
    load_gcase(f, c, gc);
    *m = load_model(gc);
    spans sp = split_spans(gc);
    check_steps(f, *m, gc, prec, &sp);
    clnode_solution *s = solve_gcase(*m, gc, prec, 0, &sp);
    *fwd = check_forward(s, gc);
    clnode_gradient *g = NULL;
    const clnode_status st = clnode_gradient_compute(g_ctx, *m, NULL, s, gc->slots, gc->cot, &g);
    if (st != CLNODE_OK)
        fail_msg("%s: clnode_gradient_compute returned %s: %s", gc->name, clnode_status_name(st),
                 clnode_context_last_error(g_ctx));
    clnode_solution_destroy(&s);
    free_spans(&sp);
    return g;
}

/* Whether diffrax's own solve took clnode's step counts (attempts and accepted) everywhere. */
static int same_counts(const gcase *gc)
{
    for (size_t b = 0; b < gc->B; ++b) {
        const double *tc = gc->counts + T_COLS * b;
        if (tc[T_DX_STEPS] != tc[T_NUM_STEPS] || tc[T_DX_ACCEPTED] != tc[T_NUM_ACCEPTED])
            return 0;
    }
    return 1;
}

/* The largest distance in time of diffrax's own accepted step ends (member dx_step_ends) from
 * clnode's, over the case's trajectories (where the counts agree). */
static double step_end_distance(const gfile *f, const gcase *gc)
{
    const double *cl = member(f, "step_ends", 0, NULL), *dx = member(f, "dx_step_ends", 0, NULL);
    double d = 0;
    for (size_t b = 0; b < gc->B; ++b) {
        const double *tc = gc->counts + T_COLS * b;
        const size_t off = (size_t)tc[T_ENDS_OFF], n = (size_t)tc[T_NUM_ACCEPTED];
        for (size_t i = 0; i < n; ++i)
            d = fmax(d, fabs(dx[off + i] - cl[off + i]));
    }
    return d;
}

/* (a), (b) and (c) in float64 over every case of grad-fp64.npz. */
static void test_grad_fp64(void **state)
{
    (void)state;
    gfile f;
    load_gfile("grad-fp64.npz", &f);
    size_t ncases;
    member(&f, "cases", C_COLS, &ncases);
    ncases /= C_COLS;
    assert_true(ncases > 0);
    worst wa = {0, ""}, wb = {0, ""}, wf = {0, ""};
    g_stopped = 0;
    int failed = 0, held_b = 0;
    for (size_t c = 0; c < ncases; ++c) {
        gcase gc;
        clnode_model *m;
        double fwd;
        clnode_gradient *g = gradient_of(&f, c, CLNODE_FP64, &gc, &m, &fwd);
        garrays a = gradient_arrays(g, m, &gc);
        const char *arr_a = "", *arr_b = "";
        const double ea = worst_rel(&a, gc.g_stepto, &arr_a);
        assert_non_null(gc.g_adaptive);
        const int counts_b = same_counts(&gc) && isfinite(gc.g_adaptive[0]);
        assert_int_equal(counts_b, gc.col[C_ADAPTIVE_OK] != 0);
        const double eb = counts_b ? worst_rel(&a, gc.g_adaptive, &arr_b) : NAN;
        const double dt = counts_b ? step_end_distance(&f, &gc) : NAN;
        const int use_b = counts_b && dt <= STEP_END_PREMISE;
        char steps[128] = "";
        size_t len = 0;
        for (size_t b = 0; b < gc.B; ++b)
            len += (size_t)snprintf(steps + len, sizeof steps - len, "%s%.0f/%.0f", b ? "," : "",
                                    gc.counts[T_COLS * b + T_NUM_ACCEPTED],
                                    gc.counts[T_COLS * b + T_DX_ACCEPTED]);
        char btext[128] = "step counts differ: (a) only";
        if (counts_b)
            snprintf(btext, sizeof btext, "%.3g (%s), diffrax's step ends %.2g away%s", eb, arr_b,
                     dt, use_b ? "" : ", beyond the rule's premise: (a) only");
        print_message("  %-24s %-6s accepted clnode/diffrax %s: forward %.2g; (a) %.3g (%s); "
                      "(b) %s\n",
                      gc.name, gc.method, steps, fwd, ea, arr_a, btext);
        note_worst(&wf, fwd, &gc, "saved values");
        note_worst(&wa, ea, &gc, arr_a);
        if (use_b) {
            char where[96];
            snprintf(where, sizeof where, "%s, step ends %.2g away", arr_b, dt);
            note_worst(&wb, eb, &gc, where);
            held_b++;
        }
        const int over =
            !(fwd <= FWD_BOUND_FP64) || !(ea <= BOUND_STEPTO) || (use_b && !(eb <= BOUND_ADAPTIVE));
        if (over)
            print_message("    %s FAILS: forward %.3g (bound %g), (a) %.3g (bound %g), (b) %.3g "
                          "(bound %g)\n",
                          gc.name, fwd, FWD_BOUND_FP64, ea, BOUND_STEPTO, eb, BOUND_ADAPTIVE);
        failed += over;
        clnode_gradient_destroy(&g);
        clnode_model_destroy(&m);
    }
    print_message("  worst: forward %.3g (%s); (a) %.3g (%s); (b) %.3g (%s) over %d of %zu cases\n",
                  wf.v, wf.where, wa.v, wa.where, wb.v, wb.where, held_b, ncases);
    free_gfile(&f);
    assert_true(held_b > 0);
    assert_true(g_stopped > 0); /* the gradient of trajectories that stopped early is checked */
    assert_int_equal(failed, 0);
}

/* float32: clnode's distance to the float64 StepTo gradient at most FP32_FACTOR times diffrax
 * float32's own, per array. */
static void test_grad_fp32(void **state)
{
    (void)state;
    gfile f;
    load_gfile("grad-fp32.npz", &f);
    size_t ncases;
    member(&f, "cases", C_COLS, &ncases);
    ncases /= C_COLS;
    assert_true(ncases > 0);
    worst wr = {0, ""}, wf = {0, ""};
    int failed = 0;
    for (size_t c = 0; c < ncases; ++c) {
        gcase gc;
        clnode_model *m;
        double fwd;
        clnode_gradient *g = gradient_of(&f, c, CLNODE_FP32, &gc, &m, &fwd);
        garrays a = gradient_arrays(g, m, &gc);
        assert_non_null(gc.g64_stepto);
        double ratio = 0;
        const char *which = "";
        for (size_t i = 0; i < a.n; ++i) {
            const double *g64 = gc.g64_stepto + a.off[i];
            const double d_cl = dist(a.val[i], g64, a.len[i]);
            const double d_dx = dist(gc.g_stepto + a.off[i], g64, a.len[i]);
            double norm = 0;
            for (size_t j = 0; j < a.len[i]; ++j)
                norm += g64[j] * g64[j];
            const double bound = FP32_FACTOR * d_dx + FP32_FLOOR * sqrt(norm);
            const double r = d_cl / (bound > 0 ? bound : 1e-300);
            if (!(r <= ratio)) {
                ratio = r;
                which = a.name[i];
            }
            if (!(d_cl <= bound)) {
                print_message("    %s %s FAILS: clnode's distance %.3g, diffrax float32's %.3g\n",
                              gc.name, a.name[i], d_cl, d_dx);
                failed++;
            }
        }
        print_message("  %-24s %-6s forward %.2g; clnode's distance / (4 x diffrax float32's) "
                      "%.3g (%s)\n",
                      gc.name, gc.method, fwd, ratio, which);
        note_worst(&wf, fwd, &gc, "saved values");
        note_worst(&wr, ratio, &gc, which);
        if (!(fwd <= FWD_BOUND_FP32)) {
            print_message("    %s FAILS: forward %.3g (bound %g)\n", gc.name, fwd, FWD_BOUND_FP32);
            failed++;
        }
        clnode_gradient_destroy(&g);
        clnode_model_destroy(&m);
    }
    print_message("  worst: forward %.3g (%s); distance ratio %.3g (%s)\n", wf.v, wf.where, wr.v,
                  wr.where);
    free_gfile(&f);
    assert_int_equal(failed, 0);
}

int main(int argc, char **argv)
{
    const int dev_rc =
        test_device_open(argc, argv, &g_device, NULL, "gradients against diffrax", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_fp64),
        cmocka_unit_test(test_grad_fp32),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return failed;
}
