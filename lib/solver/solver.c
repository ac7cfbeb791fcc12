/* lib/solver/: the solve itself: method tableaux, options and the driver written once against
 * the backend interface. */
/* solver.c - the driver: one solve of a batch from t0 to t1, written once against the backend
 * interface (backend.h), in phases (clnode_solve at the end reads as their list): check (the
 * problem, the device, the tolerance guard), size, allocate, upload, begin, loop (the Runge-Kutta
 * stages and the per-trajectory step of cl/cln_step.h in groups of steps with one small read-back
 * per group, and the progress report), collect. Nothing is allocated while steps run; the saved
 * steps' rows grow between groups of steps, by doubling (cln_grow_steps). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "cln_layout.h"
#include "model/model.h"
#include "precision/probe_internal.h"
#include "solver/options.h"
#include "solver/solution.h"
#include "solver/tape.h"


/* The kernels' result codes (cl/cln_layout.h) are the public ones, and there are as many. */
_Static_assert(CLN_RESULT_SUCCESS == CLNODE_RESULT_SUCCESS, "CLN_RESULT_SUCCESS");
_Static_assert(CLN_RESULT_MAX_STEPS == CLNODE_RESULT_MAX_STEPS_REACHED, "CLN_RESULT_MAX_STEPS");
_Static_assert(CLN_RESULT_DT_MIN == CLNODE_RESULT_DT_MIN_REACHED, "CLN_RESULT_DT_MIN");
_Static_assert(CLN_RESULT_NONFINITE == CLNODE_RESULT_NONFINITE, "CLN_RESULT_NONFINITE");
_Static_assert(CLN_RESULT_PRECISION_FLOOR == CLNODE_RESULT_PRECISION_FLOOR,
               "CLN_RESULT_PRECISION_FLOOR");
#define CLN_X_COUNT(name, value, str) +1
enum {
    CLN_RESULT_COUNT = 0 CLNODE_RESULT_LIST(CLN_X_COUNT)
};
#undef CLN_X_COUNT
_Static_assert(CLN_RESULT_COUNT == CLN_RESULT_PRECISION_FLOOR + 1, "a result the kernels lack");

const char *clnode_result_name(clnode_result r)
{
    switch (r) {
#define CLN_X_NAME(name, value, str)                                                               \
    case name:                                                                                     \
        return str;
        CLNODE_RESULT_LIST(CLN_X_NAME)
#undef CLN_X_NAME
    }
    return "unknown";
}

size_t clnode_result_count(void)
{
    return CLN_RESULT_COUNT;
}

void clnode_solution_destroy(clnode_solution **ps)
{
    if (!ps || !*ps)
        return;
    clnode_solution *s = *ps;
    free(s->stats);
    free(s->y_final);
    free(s->first_ts);
    cln_tape_free(s->tape);
    for (int k = 0; k < 4; ++k) {
        free(s->count[k]);
        free(s->ts[k]);
        free(s->ys[k]);
    }
    free(s);
    *ps = NULL;
}

size_t clnode_solution_batch(const clnode_solution *s)
{
    return s->B;
}

size_t clnode_solution_dim(const clnode_solution *s)
{
    return s->N;
}

long clnode_solution_syncs(const clnode_solution *s)
{
    return s->syncs;
}

clnode_status clnode_solution_stats_sized(const clnode_solution *s, size_t traj,
                                          clnode_trajectory_stats *stats, size_t size)
{
    if (!s || !stats || traj >= s->B ||
        cln_check_struct_size(NULL, "", size, CLN_TRAJECTORY_STATS_MIN, sizeof *stats))
        return CLNODE_ERR_INVALID_ARGUMENT;
    clnode_trajectory_stats t = s->stats[traj];
    cln_struct_fill(stats, size, &t, sizeof t);
    return CLNODE_OK;
}

const double *clnode_solution_y_final(const clnode_solution *s, size_t traj)
{
    return s && traj < s->B ? s->y_final + traj * s->N : NULL;
}

clnode_status clnode_solution_saved(const clnode_solution *s, size_t traj, clnode_save_kind kind,
                                    size_t *n, const double **ts, const double **ys)
{
    if (!s || traj >= s->B || (unsigned)kind > CLNODE_SAVE_T1 || !n)
        return CLNODE_ERR_INVALID_ARGUMENT;
    const size_t cap = s->cap[kind];
    /* save_ts shared by trajectories with their own intervals: each reports its own run */
    const size_t first = kind == CLNODE_SAVE_TS && cap ? s->first_ts[traj] : 0;
    *n = s->count[kind] ? s->count[kind][traj] : 0;
    if (ts)
        *ts = cap ? s->ts[kind] + traj * cap + first : NULL;
    if (ys)
        *ys = cap ? s->ys[kind] + (traj * cap + first) * s->N : NULL;
    return CLNODE_OK;
}

size_t cln_solution_capacity(const clnode_solution *s, clnode_save_kind kind)
{
    return s && (unsigned)kind <= CLNODE_SAVE_T1 ? s->cap[kind] : 0;
}

/* ---- the problem of each trajectory ---- */

static double cln_t0(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->t0s ? p->t0s[b] : o->t0;
}

static double cln_t1(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->t1s ? p->t1s[b] : o->t1;
}

static double cln_dt0_of(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->dt0s ? p->dt0s[b] : o->dt0;
}

/* The direction shared by the batch: -1 when some trajectory integrates backwards, else +1 (a
 * mix is refused by cln_validate_problem). A trajectory with t0 == t1 takes no step whatever the
 * direction. */
static double cln_direction(const clnode_solve_options *o, const clnode_problem *p)
{
    const size_t n = p->t0s || p->t1s ? p->batch : 1;
    for (size_t b = 0; b < n; ++b)
        if (cln_t1(o, p, b) < cln_t0(o, p, b))
            return -1.0;
    return 1.0;
}

/* ---- validation ---- */

/* What each dense-output form reads besides y0, y1 and the k_i (cl/cln_step.h): whether it needs
 * the method's coefficients, and the number of stages its shape is written for (0: any). */
static const struct {
    int coeffs, stages;
} cln_dense_forms[] = {
    [CLNODE_INTERP_LINEAR] = {0, 0},     [CLNODE_INTERP_HERMITE] = {0, 0},
    [CLNODE_INTERP_MIDPOINT] = {1, 0},   [CLNODE_INTERP_TSIT5] = {1, 7},
    [CLNODE_INTERP_POLYNOMIAL] = {1, 0},
};

/* The method descriptor fits the kernels: stage count and dense-output form. */
static clnode_status cln_validate_method(clnode_context *ctx, const clnode_method *m)
{
    CLN_CHECK(ctx, m, CLNODE_ERR_INVALID_ARGUMENT, "no method");
    /* every field is read from the descriptor itself: it has them all */
    if (cln_check_struct_size(ctx, "clnode_method", m->struct_size, sizeof *m, sizeof *m))
        return CLNODE_ERR_INVALID_ARGUMENT;
    CLN_CHECK(ctx, m->stages >= 1 && m->stages <= CLN_MAX_STAGES, CLNODE_ERR_INVALID_ARGUMENT,
              "method %s has %d stages (1 to %d supported)", m->name, m->stages, CLN_MAX_STAGES);
    const unsigned form = (unsigned)m->interpolation;
    const size_t nforms = sizeof cln_dense_forms / sizeof cln_dense_forms[0];
    CLN_CHECK(ctx, form < nforms, CLNODE_ERR_INVALID_ARGUMENT,
              "method %s: unknown interpolation %d", m->name, (int)m->interpolation);
    CLN_CHECK(ctx, !cln_dense_forms[form].coeffs || m->dense, CLNODE_ERR_INVALID_ARGUMENT,
              "method %s: interpolation %d needs dense-output coefficients", m->name, (int)form);
    CLN_CHECK(ctx, !cln_dense_forms[form].stages || cln_dense_forms[form].stages == m->stages,
              CLNODE_ERR_INVALID_ARGUMENT,
              "method %s: interpolation %d does not fit a tableau of %d stages", m->name, (int)form,
              m->stages);
    return CLNODE_OK;
}


/* " (trajectory b)" where the problem is per trajectory, else "": the suffix of a message that
 * names a trajectory's interval or first step. */
static void cln_traj_who(char *who, size_t n, int per_traj, size_t b)
{
    who[0] = '\0';
    if (per_traj)
        snprintf(who, n, " (trajectory %zu)", b);
}
/* Precision, GEMM mode, guard, the interval and the step budget. */
static clnode_status cln_validate_problem(clnode_context *ctx, const clnode_solve_options *o,
                                          const clnode_problem *p)
{
    const size_t batch = p->batch;
    CLN_CHECK(ctx, batch >= 1 && batch <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.batch = %zu is out of range (1 to %d)", batch, INT32_MAX);
    CLN_CHECK(ctx, p->y0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.y0 is NULL: no initial states for %zu trajectories", batch);
    clnode_status st = cln_validate_options(ctx, o, 0);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, !o->dt0_auto || !o->constant_step, CLNODE_ERR_INVALID_ARGUMENT,
              "dt0_auto chooses the first step of the PID controller: constant steps need dt0");
    if (cln_check_gemm_mode(ctx, o->precision, o->gemm_precision) != CLNODE_OK)
        return CLNODE_ERR_INVALID_ARGUMENT;
    const int per_traj = p->t0s || p->t1s || p->dt0s;
    const double dir = cln_direction(o, p);
    for (size_t b = 0; b < (per_traj ? p->batch : 1); ++b) {
        const double t0 = cln_t0(o, p, b), t1 = cln_t1(o, p, b), dt0 = cln_dt0_of(o, p, b);
        char who[48];
        cln_traj_who(who, sizeof who, per_traj, b);
        CLN_CHECK(ctx, !o->dt0_auto || dt0 == 0.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "dt0 = %g%s with dt0_auto: the first step is chosen, give none (dt0 = 0)", dt0,
                  who);
        CLN_CHECK(ctx, isfinite(t0) && isfinite(t1), CLNODE_ERR_INVALID_ARGUMENT,
                  "t0 = %g and t1 = %g must be finite%s", t0, t1, who);
        CLN_CHECK(ctx, isfinite(dt0), CLNODE_ERR_INVALID_ARGUMENT, "dt0 = %g must be finite%s", dt0,
                  who);
        CLN_CHECK(ctx, (t1 - t0) * dt0 >= 0.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "dt0 = %g has the wrong sign for integrating from t0 = %g to t1 = %g%s", dt0, t0,
                  t1, who);
        CLN_CHECK(ctx, dir * (t1 - t0) >= 0.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "t0 = %g to t1 = %g%s integrates %s, other trajectories %s: one solve has one "
                  "direction of integration",
                  t0, t1, who, dir > 0 ? "backwards" : "forwards",
                  dir > 0 ? "forwards" : "backwards");
        CLN_CHECK(ctx, !o->constant_step || dt0 != 0.0 || t0 == t1, CLNODE_ERR_INVALID_ARGUMENT,
                  "constant steps need a non-zero dt0%s", who);
    }
    return CLNODE_OK;
}

/* The step-size controller's options (adaptive solves), or dt0 (constant steps). */
static clnode_status cln_validate_controller(clnode_context *ctx, const clnode_solve_options *o)
{
    if (o->constant_step)
        return CLNODE_OK; /* dt0 is checked with the interval (cln_validate_problem) */
    CLN_CHECK(ctx, o->method->adaptive, CLNODE_ERR_INVALID_ARGUMENT,
              "method %s has no error estimate: use constant steps", o->method->name);
    const clnode_status st = cln_validate_options(ctx, o, 1);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, !(o->dtmin > 0.0 && o->dtmax > 0.0 && o->dtmin > o->dtmax),
              CLNODE_ERR_INVALID_ARGUMENT, "dtmin = %g exceeds dtmax = %g", o->dtmin, o->dtmax);
    return CLNODE_OK;
}

/* The save times: one list shared by the batch (inside the one shared interval; per-trajectory
 * intervals clip it), or a row per trajectory, each inside its own trajectory's interval. */
static clnode_status cln_validate_save_ts(clnode_context *ctx, const clnode_solve_options *o,
                                          const clnode_problem *p)
{
    const size_t nt = p->n_save_ts;
    CLN_CHECK(ctx, p->save_ts_per_trajectory == 0 || p->save_ts_per_trajectory == 1,
              CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.save_ts_per_trajectory = %d: 0 (one list shared by the batch) or 1 "
              "(a list per trajectory)",
              p->save_ts_per_trajectory);
    CLN_CHECK(ctx, nt == 0 || p->save_ts, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.n_save_ts = %zu save times but clnode_problem.save_ts is NULL", nt);
    CLN_CHECK(ctx, nt <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.n_save_ts = %zu: too many save times", nt);
    size_t all;
    CLN_CHECK(ctx, !p->save_ts_per_trajectory || cln_mul_size(p->batch, nt, &all),
              CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem: %zu trajectories x n_save_ts = %zu save times overflow", p->batch,
              nt);
    const double dir = cln_direction(o, p);
    const int rows = p->save_ts_per_trajectory;
    const int shared = !rows && !p->t0s && !p->t1s; /* one list in one interval */
    for (size_t b = 0; b < (rows ? p->batch : 1); ++b) {
        const double *ts = p->save_ts + b * (rows ? nt : 0);
        const double t0 = cln_t0(o, p, b), t1 = cln_t1(o, p, b);
        char who[48] = "";
        if (rows)
            snprintf(who, sizeof who, " of trajectory %zu", b);
        for (size_t j = 0; j < nt; ++j) {
            const double t = ts[j];
            CLN_CHECK(ctx, isfinite(t), CLNODE_ERR_INVALID_ARGUMENT, "save time %zu%s is %g", j,
                      who, t);
            CLN_CHECK(ctx, !(shared || rows) || (dir * t >= dir * t0 && dir * t <= dir * t1),
                      CLNODE_ERR_INVALID_ARGUMENT,
                      "save time %zu%s (%g) lies outside %s[t0, t1] = [%g, %g]", j, who, t,
                      rows ? "its trajectory's interval " : "", t0, t1);
            CLN_CHECK(ctx, j == 0 || dir * t >= dir * ts[j - 1], CLNODE_ERR_INVALID_ARGUMENT,
                      "save times must be monotone in the direction of integration (time %zu%s "
                      "= %g after %g)",
                      j, who, t, ts[j - 1]);
        }
    }
    return CLNODE_OK;
}

/* The save times, then the initial states. */
static clnode_status cln_validate_inputs(clnode_context *ctx, const clnode_model *model,
                                         const clnode_solve_options *o, const clnode_problem *p)
{
    const size_t batch = p->batch;
    const double *y0 = p->y0;
    const clnode_status st = cln_validate_save_ts(ctx, o, p);
    if (st != CLNODE_OK)
        return st;
    const size_t N = clnode_model_dim(model);
    for (size_t i = 0; i < batch * N; ++i)
        CLN_CHECK(ctx, isfinite(y0[i]), CLNODE_ERR_NONFINITE_INPUT,
                  "y0 of trajectory %zu, component %zu is %g (initial states must be finite)",
                  i / N, i % N, y0[i]);
    const size_t k = model->num_inputs;
    CLN_CHECK(ctx, k == 0 || p->inputs, CLNODE_ERR_INVALID_ARGUMENT,
              "the model takes %zu conditioning inputs: pass them as the problem's inputs "
              "(clnode_problem.inputs, batch x %zu values)",
              k, k);
    CLN_CHECK(ctx, k > 0 || !p->inputs, CLNODE_ERR_INVALID_ARGUMENT,
              "conditioning inputs were given (clnode_problem.inputs), but the model takes none");
    for (size_t i = 0; i < batch * k; ++i)
        CLN_CHECK(ctx, isfinite(p->inputs[i]), CLNODE_ERR_NONFINITE_INPUT,
                  "conditioning input %zu of trajectory %zu is %g (inputs must be finite)", i % k,
                  i / k, p->inputs[i]);
    return CLNODE_OK;
}

/* ---- the values in the state precision ---- */

/* x rounded to the solve's precision (x inside the precision's range: cln_validate_range). */
static double cln_round(clnode_precision p, double x)
{
    return p == CLNODE_FP32 ? (double)(float)x : x;
}

/* The first step |dt0| of a trajectory in the state precision, after dtmin/dtmax clipping. */
static double cln_first_step(const clnode_solve_options *o, clnode_precision p, double dt0_in)
{
    double dt0 = dt0_in != 0.0 ? fabs(dt0_in) : 0.01; /* diffrax 0.7.2: dt0=None -> 0.01 */
    dt0 = cln_round(p, dt0);
    if (!o->constant_step && o->dtmax > 0.0 && dt0 > cln_round(p, o->dtmax))
        dt0 = cln_round(p, o->dtmax);
    if (!o->constant_step && o->dtmin > 0.0 && dt0 < cln_round(p, o->dtmin))
        dt0 = cln_round(p, o->dtmin);
    return dt0;
}

/* The first of v[0..n) beyond the float range, or n. */
static size_t cln_first_beyond_fp32(const double *v, size_t n)
{
    size_t i = 0;
    while (i < n && fabs(v[i]) < CLN_FP32_LIMIT)
        ++i;
    return i;
}

/* A scalar option the solve rounds to its precision, and whether it is used. */
typedef struct cln_named {
    const char *name;
    double v;
    int used;
} cln_named;

/* An fp32 solve: every value it rounds to float stays finite there (a finite double beyond
 * +-3.4e38 would become an infinity): the options' reals, the per-trajectory times, the save
 * times, y0, the conditioning inputs and the model's parameters. The first beyond is named, with
 * its index. */
static clnode_status cln_validate_range(clnode_context *ctx, const clnode_model *model,
                                        const clnode_solve_options *o, const clnode_problem *p)
{
    const size_t batch = p->batch;
    if (o->precision != CLNODE_FP32)
        return CLNODE_OK;
    static const char beyond[] = "beyond the fp32 range (|x| <= 3.40282347e+38: it would be "
                                 "infinite in this solve); solve in fp64";
    const int adaptive = !o->constant_step;
    const cln_named sc[] = {{"t0", o->t0, !p->t0s},
                            {"t1", o->t1, !p->t1s},
                            {"dt0", o->dt0, !p->dt0s},
                            {"rtol", o->rtol, adaptive},
                            {"atol", o->atol, adaptive},
                            {"dtmin", o->dtmin, adaptive},
                            {"dtmax", o->dtmax, adaptive},
                            {"pcoeff", o->pcoeff, adaptive},
                            {"icoeff", o->icoeff, adaptive},
                            {"dcoeff", o->dcoeff, adaptive},
                            {"factormax", o->factormax, adaptive}};
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; ++k)
        CLN_CHECK(ctx, !sc[k].used || fabs(sc[k].v) < CLN_FP32_LIMIT, CLNODE_ERR_INVALID_ARGUMENT,
                  "%s = %g is %s", sc[k].name, sc[k].v, beyond);
    const struct {
        const char *name, *index;
        const double *v;
        size_t n, row;
    } arr[] = {
        {"t0", "trajectory", p->t0s, p->t0s ? batch : 0, 1},
        {"t1", "trajectory", p->t1s, p->t1s ? batch : 0, 1},
        {"dt0", "trajectory", p->dt0s, p->dt0s ? batch : 0, 1},
        {"save time", "index", p->save_ts, p->n_save_ts * (p->save_ts_per_trajectory ? batch : 1),
         1},
        {"y0", "trajectory", p->y0, batch * clnode_model_dim(model), clnode_model_dim(model)},
        {"conditioning input", "trajectory", p->inputs, p->inputs ? batch * model->num_inputs : 0,
         model->num_inputs},
    };
    for (size_t k = 0; k < sizeof arr / sizeof arr[0]; ++k) {
        const size_t i = cln_first_beyond_fp32(arr[k].v, arr[k].n);
        if (i == arr[k].n)
            continue;
        if (arr[k].v == p->save_ts && p->save_ts_per_trajectory)
            return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                            "save time %zu of trajectory %zu is %g: %s", i % p->n_save_ts,
                            i / p->n_save_ts, arr[k].v[i], beyond);
        if (arr[k].row > 1)
            return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                            "%s of %s %zu, component %zu, is %g: %s", arr[k].name, arr[k].index,
                            i / arr[k].row, i % arr[k].row, arr[k].v[i], beyond);
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "%s of %s %zu is %g: %s", arr[k].name,
                        arr[k].index, i, arr[k].v[i], beyond);
    }
    if (!model->f32_over)
        return CLNODE_OK;
    char what[96];
    if (model->f32_scale)
        snprintf(what, sizeof what, "out_scale, element %zu", model->f32_index);
    else
        snprintf(what, sizeof what, "layer %zu %s, element %zu", model->f32_layer,
                 model->f32_bias ? "bias" : "weight", model->f32_index);
    if (model->f32_where[0])
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "the model's %s (%s) is %g: %s",
                        model->f32_where, what, model->f32_value, beyond);
    return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "the model's %s is %g: %s", what,
                    model->f32_value, beyond);
}

/* t + dt differs from t in precision p (the sum as the kernels compute it). */
static int cln_advances(clnode_precision p, double t, double dt)
{
    if (p == CLNODE_FP32) {
        const float a = (float)t, s = a + (float)dt;
        return s != a;
    }
    return t + dt != t;
}

/* The solve's first step of a trajectory (cln_first_step) does not move its start in the state
 * precision: the option that sets that step is named. */
static clnode_status cln_fail_first_step(clnode_context *ctx, const clnode_solve_options *o,
                                         double t0, double dt0, const char *who)
{
    const clnode_precision p = o->precision;
    const char *pn = clnode_precision_name(p);
    const double base = cln_round(p, dt0 != 0.0 ? fabs(dt0) : 0.01);
    char what[96];
    if (!o->constant_step && o->dtmax > 0.0 && base > cln_round(p, o->dtmax))
        snprintf(what, sizeof what, "dtmax = %g", o->dtmax);
    else if (!o->constant_step && o->dtmin > 0.0 && base < cln_round(p, o->dtmin))
        snprintf(what, sizeof what, "dtmin = %g", o->dtmin);
    else if (dt0 != 0.0)
        snprintf(what, sizeof what, "dt0 = %g%s", dt0, who);
    else
        snprintf(what, sizeof what, "the first step 0.01 (dt0 = 0: none given%s)", who);
    if (cln_first_step(o, p, dt0) == 0.0)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                        "%s rounds to 0 in %s, so every step would have zero length: give a "
                        "larger step%s",
                        what, pn, p == CLNODE_FP32 ? ", or solve in fp64" : "");
    const double r0 = cln_round(p, t0);
    const double gap = p == CLNODE_FP32 ? (double)nextafterf((float)fabs(r0), INFINITY) - fabs(r0)
                                        : nextafter(fabs(r0), INFINITY) - fabs(r0);
    return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                    "%s does not move t0 = %.9g in %s (t0 + step rounds to t0: neighbouring %s "
                    "times are %g apart there), so every step would have zero length: give a "
                    "larger step%s",
                    what, t0, pn, pn, gap, p == CLNODE_FP32 ? ", or solve in fp64" : "");
}

/* In the state precision the problem does not collapse: t0 and t1 that differ as given stay
 * different, a positive dtmax stays positive, and the first step of a trajectory that has an
 * interval moves its start (see clnode_solve). Trajectory by trajectory with t0s, t1s, dt0s. */
static clnode_status cln_validate_collapse(clnode_context *ctx, const clnode_solve_options *o,
                                           const clnode_problem *pb)
{
    const clnode_precision p = o->precision;
    const char *pn = clnode_precision_name(p);
    CLN_CHECK(ctx, o->constant_step || !(o->dtmax > 0.0) || cln_round(p, o->dtmax) > 0.0,
              CLNODE_ERR_INVALID_ARGUMENT, "dtmax = %g rounds to 0 in %s: give a larger dtmax%s",
              o->dtmax, pn, p == CLNODE_FP32 ? ", or solve in fp64" : "");
    const int per_traj = pb->t0s || pb->t1s || pb->dt0s;
    const double dir = cln_direction(o, pb);
    for (size_t b = 0; b < (per_traj ? pb->batch : 1); ++b) {
        const double t0 = cln_t0(o, pb, b), t1 = cln_t1(o, pb, b), dt0 = cln_dt0_of(o, pb, b);
        char who[48];
        cln_traj_who(who, sizeof who, per_traj, b);
        const double r0 = cln_round(p, t0), r1 = cln_round(p, t1);
        CLN_CHECK(ctx, t0 == t1 || r0 != r1, CLNODE_ERR_INVALID_ARGUMENT,
                  "t0 = %.17g and t1 = %.17g%s differ, but in %s both are %.9g: the interval "
                  "would have no length%s",
                  t0, t1, who, pn, r0,
                  p == CLNODE_FP32 ? " (solve in fp64, or shift the times towards 0)" : "");
        if (r0 == r1 || o->dt0_auto)
            continue; /* no step, or a first step chosen during the solve */
        if (!cln_advances(p, dir * r0, cln_first_step(o, p, dt0)))
            return cln_fail_first_step(ctx, o, t0, dt0, who);
    }
    return CLNODE_OK;
}

static clnode_status cln_validate(clnode_context *ctx, const clnode_model *model,
                                  const clnode_solve_options *o, const clnode_problem *p)
{
    CLN_CHECK(ctx, model, CLNODE_ERR_INVALID_ARGUMENT, "no model");
    clnode_status st = cln_validate_method(ctx, o->method);
    if (st == CLNODE_OK)
        st = cln_validate_problem(ctx, o, p);
    if (st == CLNODE_OK)
        st = cln_validate_controller(ctx, o);
    if (st == CLNODE_OK)
        st = cln_validate_inputs(ctx, model, o, p);
    if (st == CLNODE_OK)
        st = cln_validate_range(ctx, model, o, p);
    if (st == CLNODE_OK)
        st = cln_validate_collapse(ctx, o, p);
    return st;
}

/* ---- precision-dependent conversions (set-up and read-back only) ---- */

/* Rounds `n` doubles to the solve's precision and writes them at element `off` of buf. */
static clnode_status cln_upload(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
                                const double *src, size_t n)
{
    if (n == 0)
        return CLNODE_OK;
    if (sd->prec == CLNODE_FP64) /* the values as they are: no staging */
        return be->ops->buf_write(be, buf, off * sizeof(double), n * sizeof(double), src);
    void *tmp = malloc(n * sd->esize);
    CLN_CHECK(be->ctx, tmp, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu staging bytes",
              n * sd->esize);
    float *t = tmp; /* in blocks of 4, which -O2 vectorises (the model's weights) */
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (size_t q = 0; q < 4; ++q)
            t[i + q] = (float)src[i + q];
    for (; i < n; ++i)
        t[i] = (float)src[i];
    clnode_status st = be->ops->buf_write(be, buf, off * sd->esize, n * sd->esize, tmp);
    free(tmp);
    return st;
}

/* Reads `n` elements from element `off` of buf into doubles. */
static clnode_status cln_download(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf,
                                  size_t off, double *dst, size_t n)
{
    if (n == 0)
        return CLNODE_OK;
    void *tmp = malloc(n * sd->esize);
    CLN_CHECK(be->ctx, tmp, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu staging bytes",
              n * sd->esize);
    clnode_status st = be->ops->buf_read(be, buf, off * sd->esize, n * sd->esize, tmp);
    for (size_t i = 0; st == CLNODE_OK && i < n; ++i)
        dst[i] = sd->prec == CLNODE_FP32 ? (double)((float *)tmp)[i] : ((double *)tmp)[i];
    free(tmp);
    return st;
}

/* diffrax's t1_clip_floor: t1 stepped 100 times towards -inf (0 maps to minus the smallest
 * normal), in the solve's precision. */
static double cln_clip_floor(clnode_precision p, double tau1)
{
    if (p == CLNODE_FP32) {
        float f = (float)tau1;
        for (int i = 0; i < 100; ++i)
            f = f == 0.0f ? -FLT_MIN : nextafterf(f, -INFINITY);
        return f;
    }
    double d = tau1;
    for (int i = 0; i < 100; ++i)
        d = d == 0.0 ? -DBL_MIN : nextafter(d, -INFINITY);
    return d;
}

/* ---- the solve ---- */

/* The layout structs of cl/cln_layout.h as the driver fills and reads them: in double, rounded
 * to the state precision member by member (as arrays of doubles, which they are laid out as). */
typedef CLN_CONSTS_STRUCT(double) cln_consts_d;
typedef CLN_RSTATE_STRUCT(double) cln_rstate_d;
#define CLN_CONSTS_REALS (sizeof(cln_consts_d) / sizeof(double))
#define CLN_RSTATE_REALS (sizeof(cln_rstate_d) / sizeof(double))
_Static_assert(sizeof(int) == sizeof(int32_t), "the layout's int structs hold 32-bit ints");
_Static_assert(sizeof(cln_consts_d) % sizeof(double) == 0, "cln_consts holds reals only");
_Static_assert(sizeof(cln_rstate_d) % sizeof(double) == 0, "cln_rstate holds reals only");
_Static_assert(CLN_MAX_STAGES == CLNODE_MAX_STAGES && CLN_DENSE_COEFFS == CLNODE_DENSE_COEFFS,
               "the layout holds any method the public header allows");
_Static_assert(CLN_DENSE_LINEAR == CLNODE_INTERP_LINEAR &&
                   CLN_DENSE_HERMITE == CLNODE_INTERP_HERMITE &&
                   CLN_DENSE_MIDPOINT == CLNODE_INTERP_MIDPOINT &&
                   CLN_DENSE_TSIT5 == CLNODE_INTERP_TSIT5 &&
                   CLN_DENSE_POLYNOMIAL == CLNODE_INTERP_POLYNOMIAL,
               "the kernels' dense-output forms are clnode_interpolation's");
_Static_assert(CLN_RESULT_SUCCESS == CLNODE_RESULT_SUCCESS &&
                   CLN_RESULT_MAX_STEPS == CLNODE_RESULT_MAX_STEPS_REACHED &&
                   CLN_RESULT_DT_MIN == CLNODE_RESULT_DT_MIN_REACHED &&
                   CLN_RESULT_NONFINITE == CLNODE_RESULT_NONFINITE &&
                   CLN_RESULT_PRECISION_FLOOR == CLNODE_RESULT_PRECISION_FLOOR,
               "the kernels' results are clnode_result's");

/* Trajectories whose time the progress report reads (one read-back of their state rows). */
#define CLN_PROGRESS_ROWS 64

typedef struct cln_run {
    clnode_context *ctx;
    cln_backend *be;
    const clnode_model *model;
    const clnode_solve_options *o;
    const clnode_problem *p; /* the batch, y0 and the per-trajectory data */
    const clnode_method *m;
    cln_solve_dev sd;
    size_t maxw;         /* the widest layer output: rows of H */
    double dir;          /* the direction of integration: tau = dir * t */
    void *progress_rows; /* staging for the progress read-back, allocated up front */
    int begun;           /* solve_begin succeeded */
    /* active-set compaction (cln_compact), with its staging allocated up front: */
    int compact;         /* the options ask for it and the backend can swap rows */
    size_t *perm;        /* Breal: the trajectory whose state row r holds */
    cln_istate *is_rows; /* Breal: the integer state rows read back to find the frozen ones */
    int32_t *pairs;      /* Breal: the row pairs to swap, (i, j) each */
    long compactions;    /* compactions made (statistics for the log) */
    /* the saved steps (save_steps): room for steps_cap points per trajectory, the row stride of
     * STT and STY (KI.steps_cap), grown as the solve takes steps (cln_grow_steps) */
    size_t steps_cap;
    int dev_steps;  /* the device saves every accepted step: save_steps, or keep_tape */
    cln_iconsts KI; /* the integer constants as uploaded to CI (written whole again on growth) */
} cln_run;

/* The saved steps' first capacity, when the solver chooses it: a few groups of steps (most
 * solves of a batch take tens of steps: room for them at once, and growth by doubling after). */
#define CLN_STEPS_CAP_FIRST 32

static clnode_status cln_alloc(cln_run *r, cln_buf **out, size_t n_elems, size_t esize)
{
    size_t bytes;
    CLN_CHECK(r->ctx, cln_mul_size(n_elems ? n_elems : 1, esize, &bytes), CLNODE_ERR_OUT_OF_MEMORY,
              "buffer of %zu elements overflows", n_elems);
    return r->be->ops->buf_alloc(r->be, bytes, out);
}

static void cln_release(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    if (r->begun)
        be->ops->solve_end(be, sd);
    for (size_t i = 0; i < CLN_MAX_LAYERS; ++i) {
        be->ops->buf_free(be, sd->W[i]);
        be->ops->buf_free(be, sd->bias[i]);
    }
    cln_buf **all[] = {&sd->Y,     &sd->F,   &sd->Z,   &sd->H[0],  &sd->H[1],
                       &sd->CR,    &sd->CI,  &sd->RS,  &sd->IS,    &sd->TS,
                       &sd->TSOUT, &sd->STT, &sd->STY, &sd->PAIRS, &sd->scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        be->ops->buf_free(be, *all[i]);
        *all[i] = NULL;
    }
    free(r->progress_rows);
    r->progress_rows = NULL;
    free(r->perm);
    free(r->is_rows);
    free(r->pairs);
    r->perm = NULL;
    r->is_rows = NULL;
    r->pairs = NULL;
}

/* One evaluation of the vector field for the batch's live rows: Z -> F block i. */
static clnode_status cln_rhs(cln_run *r, size_t i)
{
    return cln_mlp_layers(r->be, &r->sd, (int)i, 0);
}

/* Stage i and the vector field on it: fused where the backend offers it. */
static clnode_status cln_stage_rhs(cln_run *r, int i)
{
    cln_backend *be = r->be;
    if (be->ops->stage_rhs)
        return be->ops->stage_rhs(be, &r->sd, i);
    const clnode_status st = be->ops->stage(be, &r->sd, i);
    return st == CLNODE_OK ? cln_rhs(r, (size_t)i) : st;
}

/* One attempted step for every active trajectory: the stages, then cln_finish_traj. */
static clnode_status cln_step(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    clnode_status st = CLNODE_OK;
    /* FSAL methods start at stage 1: f(t, y) is kept from the last accepted step */
    for (size_t i = sd->first_stage; i < sd->stages && st == CLNODE_OK; ++i)
        st = cln_stage_rhs(r, (int)i);
    if (st == CLNODE_OK)
        st = be->ops->finish(be, sd);
    return st;
}

static double cln_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each trajectory's problem into its state row (tau0, tau1, clip_floor, dt0 in the state
 * precision; the rest zero, cln_init_traj fills it). Padding rows stay zero. */
static void cln_problem_rows(const cln_run *r, cln_rstate_d *rows)
{
    const clnode_solve_options *o = r->o;
    const clnode_precision p = r->sd.prec;
    memset(rows, 0, r->sd.B * sizeof *rows);
    double last_tau1 = 0.0, last_floor = 0.0;
    for (size_t b = 0; b < r->sd.Breal; ++b) {
        cln_rstate_d *rs = &rows[b];
        rs->tau0 = r->dir * cln_round(p, cln_t0(o, r->p, b));
        rs->tau1 = r->dir * cln_round(p, cln_t1(o, r->p, b));
        /* 100 ulp steps: computed again only when the end changes */
        if (b == 0 || rs->tau1 != last_tau1) {
            last_tau1 = rs->tau1;
            last_floor = cln_clip_floor(p, rs->tau1);
        }
        rs->clip_floor = last_floor;
        rs->dt0 = cln_first_step(o, p, cln_dt0_of(o, r->p, b));
    }
}

/* The method's descriptor into the constants: tableau, error weights, dense coefficients. */
static void cln_fill_method(const clnode_method *m, cln_consts_d *K)
{
    const int s = m->stages;
    for (int i = 0; i < s; ++i) {
        for (int j = 0; j < s; ++j)
            K->a[i][j] = m->a[i * s + j];
        K->b[i] = m->b[i];
        K->e[i] = m->b_error ? m->b_error[i] : 0.0;
        K->c[i] = m->c[i];
        for (int d = 0; m->dense && d < CLN_DENSE_COEFFS; ++d)
            K->dense[i][d] = m->dense[i * CLN_DENSE_COEFFS + d];
    }
}

/* The smallest rtol the arithmetic of the solve's (device, precision, GEMM mode) resolves,
 * CLNODE_GUARD_FACTOR u of the context's probe, or 0 when it was not probed (the guard off,
 * constant steps). The rounding-floor detector runs only below it: above it, an error estimate
 * that does not fall as the step shrinks is truncation error (a kink of relu, a discontinuity),
 * which the controller resolves with smaller steps, as diffrax's does, never rounding noise. */
static double cln_guard_bound(const clnode_context *ctx, const clnode_solve_options *o)
{
    const clnode_probe_result *pr = cln_probe_peek(ctx, o->precision, o->gemm_precision);
    return pr ? CLNODE_GUARD_FACTOR * pr->unit_roundoff : 0.0;
}

/* Per-solve constants, the reals in double (rounded to the state precision on upload). */
static void cln_fill_constants(const cln_run *r, cln_consts_d *K, cln_iconsts *KI)
{
    const clnode_solve_options *o = r->o;
    const clnode_method *m = r->m;
    const cln_solve_dev *sd = &r->sd;
    memset(K, 0, sizeof *K);
    memset(KI, 0, sizeof *KI);
    const double eo = (double)m->error_order;
    K->dir = r->dir;
    K->sqrt_n = sqrt((double)sd->N);
    /* the table's KERNEL options, by name into cln_consts */
#define CLN_CONST_KERNEL(name) K->name = o->name;
#define CLN_CONST_HOST(name)
#define CLN_X_CONST(ctype, name, type, where, def, min, max, flags, doc) CLN_CONST_##where(name)
    CLNODE_SOLVE_OPTION_LIST(CLN_X_CONST)
#undef CLN_X_CONST
#undef CLN_CONST_HOST
#undef CLN_CONST_KERNEL
    K->coeff1 = (o->icoeff + o->pcoeff + o->dcoeff) / eo;
    K->coeff2 = -(o->pcoeff + 2.0 * o->dcoeff) / eo;
    K->coeff3 = o->dcoeff / eo;
    cln_fill_method(m, K);
    KI->B = (int32_t)sd->B;
    KI->Breal = (int32_t)sd->Breal;
    KI->N = (int32_t)sd->N;
    KI->ldz = (int32_t)sd->ldz;
    KI->stages = m->stages;
    KI->fsal = m->fsal;
    KI->ssal = m->ssal;
    KI->adaptive = !o->constant_step;
    KI->dense_form = (int32_t)m->interpolation;
    KI->max_steps = (int32_t)o->max_steps;
    KI->has_dtmin = !o->constant_step && o->dtmin > 0.0;
    KI->has_dtmax = !o->constant_step && o->dtmax > 0.0;
    KI->force_dtmin = o->force_dtmin != 0;
    KI->save_steps = r->dev_steps;
    KI->steps_cap = (int32_t)r->steps_cap;
    KI->n_ts = (int32_t)r->p->n_save_ts;
    KI->ts_stride = r->p->save_ts_per_trajectory ? KI->n_ts : 0;
    KI->coeff1_zero = K->coeff1 == 0.0;
    KI->coeff2_zero = K->coeff2 == 0.0;
    KI->coeff3_zero = K->coeff3 == 0.0;
    KI->dt0_order = m->order > 0 ? m->order : 1;
    KI->time_input = r->model->time_input;
    KI->floor_detect = !o->constant_step && o->precision_guard != CLNODE_GUARD_OFF &&
                       o->rtol < cln_guard_bound(r->ctx, o);
}

/* The guard before a solve: rtol against the measured unit roundoff of the device's GEMM in the
 * solve's precision and mode (probed once per context). Warns, or refuses with
 * CLNODE_ERR_PRECISION, when rtol < CLNODE_GUARD_FACTOR u. */
static clnode_status cln_guard_tolerance(clnode_context *ctx, const clnode_solve_options *o)
{
    if (o->constant_step || o->precision_guard == CLNODE_GUARD_OFF)
        return CLNODE_OK;
    const clnode_probe_result *pr = NULL;
    const clnode_status st = cln_probe_cached(ctx, o->precision, o->gemm_precision, &pr);
    if (st != CLNODE_OK)
        return st;
    const double floor = CLNODE_GUARD_FACTOR * pr->unit_roundoff;
    if (o->rtol >= floor)
        return CLNODE_OK;
    if (o->precision_guard == CLNODE_GUARD_REFUSE)
        return cln_fail(ctx, CLNODE_ERR_PRECISION,
                        "rtol %g is below what %s resolves in %s with GEMM mode %s (measured %s, "
                        "unit roundoff %.3g; rtol must be at least %g u = %.3g)",
                        o->rtol, ctx->backend->device_name, clnode_precision_name(o->precision),
                        clnode_gemm_mode_name(o->gemm_precision), clnode_gemm_class_name(pr->gemm_class),
                        pr->unit_roundoff, CLNODE_GUARD_FACTOR, floor);
    cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_PRECISION_GUARD,
            "rtol %g is below what %s resolves in %s with GEMM mode %s (measured %s, unit "
            "roundoff %.3g; rtol should be at least %g u = %.3g): expect many more steps, or "
            "trajectories ending with precision_floor",
            o->rtol, ctx->backend->device_name, clnode_precision_name(o->precision),
            clnode_gemm_mode_name(o->gemm_precision), clnode_gemm_class_name(pr->gemm_class),
            pr->unit_roundoff, CLNODE_GUARD_FACTOR, floor);
    return CLNODE_OK;
}

/* One warning per solve that ended trajectories at the rounding floor. */
static void cln_report_floor(clnode_context *ctx, const clnode_solve_options *o,
                             const clnode_solution *s)
{
    size_t hit = 0, first = 0;
    for (size_t b = s->B; b-- > 0;)
        if (s->stats[b].result == CLNODE_RESULT_PRECISION_FLOOR) {
            ++hit;
            first = b;
        }
    if (!hit)
        return;
    const clnode_probe_result *pr = cln_probe_peek(ctx, o->precision, o->gemm_precision);
    char measured[96] = "", larger[64] = "a larger rtol";
    if (pr) {
        snprintf(measured, sizeof measured, " (measured %s, unit roundoff %.3g)",
                 clnode_gemm_class_name(pr->gemm_class), pr->unit_roundoff);
        snprintf(larger, sizeof larger, "a larger rtol (at least %.3g)",
                 CLNODE_GUARD_FACTOR * pr->unit_roundoff);
    }
    /* the advice: only what differs from this solve's arithmetic */
    char advice[160];
    if (o->gemm_precision == CLNODE_GEMM_TF32)
        snprintf(advice, sizeof advice, "use GEMM mode strict, or fp64, or %s", larger);
    else if (o->precision == CLNODE_FP32)
        snprintf(advice, sizeof advice, "use fp64, or %s", larger);
    else
        snprintf(advice, sizeof advice,
                 "use %s (fp64 with GEMM mode strict is the finest arithmetic clnode has)", larger);
    cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_PRECISION_FLOOR,
            "precision_floor: %zu of %zu trajectories (the first: %zu, at t = %g) stopped with "
            "their error estimate at the rounding floor of %s in %s with GEMM mode %s%s: rtol %g "
            "is below what this arithmetic resolves; %s",
            hit, s->B, first, s->stats[first].t_final, ctx->backend->device_name,
            clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_precision), measured,
            o->rtol, advice);
}

/* ---- reading the results back ---- */

/* The solution object with room for every saved point the options ask for: `steps` points per
 * trajectory for the saved steps (the most any trajectory saved). */
static clnode_status cln_solution_alloc(clnode_context *ctx, const clnode_solve_options *o,
                                        size_t n_save_ts, size_t B, size_t N, size_t steps,
                                        clnode_solution **out)
{
    clnode_solution *s = calloc(1, sizeof *s);
    CLN_CHECK(ctx, s, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution");
    s->B = B;
    s->N = N;
    s->cap[CLNODE_SAVE_T0] = o->save_t0 ? 1 : 0;
    s->cap[CLNODE_SAVE_TS] = n_save_ts;
    s->cap[CLNODE_SAVE_STEPS] = o->save_steps ? steps : 0;
    s->cap[CLNODE_SAVE_T1] = o->save_t1 ? 1 : 0;
    const int saved[4] = {o->save_t0, n_save_ts > 0, o->save_steps, o->save_t1};
    size_t bn, bc, bcn;
    s->stats = calloc(B, sizeof *s->stats);
    s->y_final = cln_mul_size(B, N, &bn) ? calloc(bn, sizeof(double)) : NULL;
    int ok = s->stats && s->y_final;
    for (int k = 0; k < 4 && ok; ++k) {
        if (!saved[k])
            continue;
        s->count[k] = calloc(B, sizeof(size_t));
        ok = s->count[k] != NULL;
        if (!s->cap[k] || !ok)
            continue; /* saved steps, none taken: counts only */
        const int fits = cln_mul_size(B, s->cap[k], &bc) && cln_mul_size(bc, N, &bcn);
        s->ts[k] = fits ? calloc(bc, sizeof(double)) : NULL;
        s->ys[k] = fits ? calloc(bcn, sizeof(double)) : NULL;
        ok = s->ts[k] && s->ys[k];
    }
    if (ok && s->cap[CLNODE_SAVE_TS]) {
        s->first_ts = calloc(B, sizeof(size_t));
        ok = s->first_ts != NULL;
    }
    if (!ok) {
        clnode_solution_destroy(&s);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution of %zu x %zu",
                        B, N);
    }
    *out = s;
    return CLNODE_OK;
}

/* Trajectory b's statistics and saved points from its final state rows (the y_final, dense
 * output and saved steps are already read back). */
static void cln_fill_trajectory(const cln_run *r, clnode_solution *s, size_t b,
                                const cln_rstate_d *rs, const cln_istate *is)
{
    const clnode_solve_options *o = r->o;
    const clnode_problem *p = r->p;
    const double *y0 = p->y0;
    const clnode_method *m = r->m;
    const clnode_precision prec = r->sd.prec;
    const size_t N = s->N;
    clnode_trajectory_stats *t = &s->stats[b];
    t->struct_size = sizeof *t;
    t->result = (clnode_result)is->result;
    t->num_steps = is->nsteps;
    t->num_accepted = is->nacc;
    t->num_rejected = is->nrej;
    const int steps = rs->tau0 < rs->tau1; /* t0 != t1 */
    /* dt0_auto: two evaluations more; an FSAL method's first step reuses the selection's f0 */
    const long sel = o->dt0_auto && steps ? 2 : 0;
    t->num_rhs_evals = m->fsal ? (sel ? sel : 1) + (long)(m->stages - 1) * t->num_steps
                               : sel + (long)m->stages * t->num_steps;
    t->first_step = steps ? r->dir * rs->dt0 : 0.0;
    t->t_final = r->dir * rs->t;
    if (s->cap[CLNODE_SAVE_T0]) {
        s->count[CLNODE_SAVE_T0][b] = 1;
        s->ts[CLNODE_SAVE_T0][b] = cln_round(prec, cln_t0(o, p, b));
        for (size_t n = 0; n < N; ++n)
            s->ys[CLNODE_SAVE_T0][b * N + n] = cln_round(prec, y0[b * N + n]);
    }
    if (s->cap[CLNODE_SAVE_TS]) {
        /* the run of the shared list inside this trajectory's interval starts at the first time
         * not before tau0, the comparison cln_save_dense makes (in tau, state precision); a row
         * of its own lies inside its interval (validated), so its run starts at 0 */
        const size_t nt = p->n_save_ts;
        const double *ts = p->save_ts + (p->save_ts_per_trajectory ? b * nt : 0);
        size_t first = 0;
        while (first < nt && r->dir * cln_round(prec, ts[first]) < rs->tau0)
            ++first;
        size_t end = (size_t)is->nts;
        if (cln_t0(o, p, b) == cln_t1(o, p, b)) { /* diffrax: every requested time receives y0 */
            end = first;
            while (end < nt && r->dir * cln_round(prec, ts[end]) <= rs->tau1)
                ++end;
            for (size_t j = first; j < end; ++j)
                memcpy(s->ys[CLNODE_SAVE_TS] + (b * nt + j) * N, s->y_final + b * N,
                       N * sizeof(double));
        }
        s->first_ts[b] = first;
        s->count[CLNODE_SAVE_TS][b] = end > first ? end - first : 0;
        for (size_t j = 0; j < nt; ++j)
            s->ts[CLNODE_SAVE_TS][b * nt + j] = cln_round(prec, ts[j]);
    }
    if (s->count[CLNODE_SAVE_STEPS])
        s->count[CLNODE_SAVE_STEPS][b] = (size_t)is->nsteps_saved;
    if (s->cap[CLNODE_SAVE_T1]) {
        s->count[CLNODE_SAVE_T1][b] = 1;
        s->ts[CLNODE_SAVE_T1][b] = t->t_final;
        memcpy(s->ys[CLNODE_SAVE_T1] + b * N, s->y_final + b * N, N * sizeof(double));
    }
}

/* Rows moved by compaction back to their trajectories, in place: row r of `a` (row_len values
 * each, n rows) holds the values of trajectory perm[r]; cycle by cycle, with one row of carry. */
static void cln_unpermute(double *a, size_t row_len, const size_t *perm, size_t n,
                          unsigned char *seen, double *carry)
{
    if (!row_len)
        return;
    memset(seen, 0, n);
    for (size_t r0 = 0; r0 < n; ++r0) {
        if (seen[r0] || perm[r0] == r0)
            continue;
        memcpy(carry, a + r0 * row_len, row_len * sizeof *a);
        for (size_t r = perm[r0]; r != r0; r = perm[r]) { /* carry holds the values of row r */
            double *row = a + r * row_len;
            for (size_t k = 0; k < row_len; ++k) {
                const double v = row[k];
                row[k] = carry[k];
                carry[k] = v;
            }
            seen[r] = 1;
        }
        memcpy(a + r0 * row_len, carry, row_len * sizeof *a);
        seen[r0] = 1;
    }
}

/* After compaction: every per-trajectory array of the solution read back so far (final states,
 * dense output, saved steps) in the caller's order. */
static clnode_status cln_unpermute_solution(const cln_run *r, clnode_solution *s)
{
    const size_t B = r->sd.Breal, N = r->sd.N;
    const size_t nts = s->cap[CLNODE_SAVE_TS], ms = s->cap[CLNODE_SAVE_STEPS];
    size_t len = N;
    len = nts * N > len ? nts * N : len;
    len = ms * N > len ? ms * N : len;
    unsigned char *seen = malloc(B);
    double *carry = malloc(len * sizeof *carry);
    if (!seen || !carry) {
        free(seen);
        free(carry);
        return cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the reordering");
    }
    cln_unpermute(s->y_final, N, r->perm, B, seen, carry);
    if (nts)
        cln_unpermute(s->ys[CLNODE_SAVE_TS], nts * N, r->perm, B, seen, carry);
    if (ms) {
        cln_unpermute(s->ts[CLNODE_SAVE_STEPS], ms, r->perm, B, seen, carry);
        cln_unpermute(s->ys[CLNODE_SAVE_STEPS], ms * N, r->perm, B, seen, carry);
    }
    free(seen);
    free(carry);
    return CLNODE_OK;
}

/* The saved steps into the solution, rows packed to its capacity (the most points any
 * trajectory saved, <= r->steps_cap): where the device rows are longer, they are packed first on
 * the device into a buffer of that size (copy_rows), so that what is read back and kept grows
 * with the longest trajectory's points, not with the capacity the solve grew to. */
static clnode_status cln_collect_steps(cln_run *r, clnode_solution *s)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N, es = sd->esize, cap = s->cap[CLNODE_SAVE_STEPS];
    if (!cap)
        return CLNODE_OK;
    if (cap == r->steps_cap) {
        clnode_status st = cln_download(be, sd, sd->STT, 0, s->ts[CLNODE_SAVE_STEPS], B * cap);
        if (st == CLNODE_OK)
            st = cln_download(be, sd, sd->STY, 0, s->ys[CLNODE_SAVE_STEPS], B * cap * N);
        return st;
    }
    cln_buf *packed = NULL; /* holds the times, then the states */
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cln_alloc(r, &packed, B * cap * N, es));
    CLN_TRY(st, be->ops->copy_rows(be, packed, 0, cap * es, sd->STT, 0, r->steps_cap * es, cap * es,
                                   B));
    CLN_TRY(st, cln_download(be, sd, packed, 0, s->ts[CLNODE_SAVE_STEPS], B * cap));
    CLN_TRY(st, be->ops->copy_rows(be, packed, 0, cap * N * es, sd->STY, 0, r->steps_cap * N * es,
                                   cap * N * es, B));
    CLN_TRY(st, cln_download(be, sd, packed, 0, s->ys[CLNODE_SAVE_STEPS], B * cap * N));
fail:
    be->ops->buf_free(be, packed);
    return st;
}

/* keep_tape: the tape from every trajectory's saved steps (cln_tape_build); without save_steps
 * the solution then lets them go, so that its points are those the options ask for. */
static clnode_status cln_keep_tape(cln_run *r, clnode_solution *s)
{
    const size_t B = r->sd.Breal;
    double *tau0 = malloc(B * sizeof *tau0);
    CLN_CHECK(r->ctx, tau0, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the kept steps");
    for (size_t b = 0; b < B; ++b) /* as cln_problem_rows */
        tau0[b] = r->dir * cln_round(r->sd.prec, cln_t0(r->o, r->p, b));
    cln_consts_d K;
    cln_iconsts KI;
    cln_fill_constants(r, &K, &KI);
    const cln_tape_src src = {.prec = r->sd.prec,
                              .gemm_mode = r->sd.gemm_mode,
                              .method = r->m,
                              .model = r->model,
                              .backend = r->be->ops->name,
                              .dir = r->dir,
                              .K = (const double *)(const void *)&K,
                              .KI = &KI,
                              .every = (size_t)r->o->checkpoint_every,
                              .p = r->p,
                              .tau0 = tau0,
                              .round = cln_round};
    const clnode_status st = cln_tape_build(r->ctx, &src, s, &s->tape);
    free(tau0);
    if (st == CLNODE_OK && !r->o->save_steps) {
        free(s->count[CLNODE_SAVE_STEPS]);
        free(s->ts[CLNODE_SAVE_STEPS]);
        free(s->ys[CLNODE_SAVE_STEPS]);
        s->count[CLNODE_SAVE_STEPS] = NULL;
        s->ts[CLNODE_SAVE_STEPS] = NULL;
        s->ys[CLNODE_SAVE_STEPS] = NULL;
        s->cap[CLNODE_SAVE_STEPS] = 0;
    }
    return st;
}

/* Phase 6: allocates the solution and reads every result back (one transfer per buffer; rows
 * past Breal are padding and are not read), in the caller's order of trajectories. */
static clnode_status cln_collect(cln_run *r, clnode_solution **out)
{
    const clnode_solve_options *o = r->o;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N;
    clnode_solution *s = NULL;
    clnode_status st = CLNODE_OK;
    cln_rstate_d *rs = calloc(B, sizeof *rs);
    cln_istate *is = calloc(B, sizeof *is);
    if (!rs || !is) {
        st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the final states");
        goto fail;
    }
    CLN_TRY(st, cln_download(be, sd, sd->RS, 0, (double *)(void *)rs, B * CLN_RSTATE_REALS));
    CLN_TRY(st, be->ops->buf_read(be, sd->IS, 0, B * sizeof *is, is));
    size_t steps = 0; /* the most points a trajectory saved */
    for (size_t row = 0; r->dev_steps && row < B; ++row)
        if ((size_t)is[row].nsteps_saved > steps)
            steps = (size_t)is[row].nsteps_saved;
    if (steps > r->steps_cap) {
        st = cln_fail(r->ctx, CLNODE_ERR_INTERNAL,
                      "a trajectory saved %zu steps, but the rows had room for %zu", steps,
                      r->steps_cap);
        goto fail;
    }
    clnode_solve_options held = *o; /* a kept solve reads every step back, for its tape */
    held.save_steps = r->dev_steps;
    CLN_TRY(st, cln_solution_alloc(r->ctx, &held, r->p->n_save_ts, B, N, steps, &s));
    s->dir = r->dir;
    CLN_TRY(st, cln_download(be, sd, sd->Y, 0, s->y_final, B * N));
    if (s->cap[CLNODE_SAVE_TS])
        CLN_TRY(st,
                cln_download(be, sd, sd->TSOUT, 0, s->ys[CLNODE_SAVE_TS], B * r->p->n_save_ts * N));
    CLN_TRY(st, cln_collect_steps(r, s));
    if (r->compactions)
        CLN_TRY(st, cln_unpermute_solution(r, s));
    for (size_t row = 0; row < B; ++row) /* trajectory perm[row]'s state rows */
        cln_fill_trajectory(r, s, r->compactions ? r->perm[row] : row, &rs[row], &is[row]);
    if (o->keep_tape)
        CLN_TRY(st, cln_keep_tape(r, s));
    free(rs);
    free(is);
    *out = s;
    return CLNODE_OK;
fail:
    free(rs);
    free(is);
    clnode_solution_destroy(&s);
    return st;
}

/* ---- the phases of a solve ---- */

/* Phase 0: the problem is valid and the device can solve it (precision; the tolerance against
 * the measured precision of its GEMM). */
static clnode_status cln_check(clnode_context *ctx, const clnode_model *model,
                               const clnode_solve_options *o, const clnode_problem *p)
{
    const clnode_status st = cln_validate(ctx, model, o, p);
    if (st != CLNODE_OK)
        return st;
    const clnode_status pst = cln_check_device_precision(ctx, o->precision, o->gemm_precision, "solve");
    if (pst != CLNODE_OK)
        return pst;
    return cln_guard_tolerance(ctx, o);
}

/* Phase 1: the sizes of every buffer and the interval in tau (nothing allocated). */
static clnode_status cln_size(cln_run *r)
{
    const size_t batch = r->p->batch;
    const clnode_solve_options *o = r->o;
    const clnode_model *model = r->model;
    cln_solve_dev *sd = &r->sd;
    sd->prec = o->precision;
    sd->gemm_mode = o->gemm_precision;
    sd->esize = o->precision == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t align = r->be->row_align ? r->be->row_align : 1;
    CLN_CHECK(r->ctx, batch <= (size_t)-1 / 2 - align, CLNODE_ERR_OUT_OF_MEMORY,
              "batch %zu is too large", batch);
    sd->Breal = batch;
    sd->B = (batch + align - 1) / align * align;
    sd->live = sd->B;
    r->compact = o->compact && r->be->ops->swap_rows;
    r->dev_steps = o->save_steps || o->keep_tape;
    sd->N = clnode_model_dim(model);
    sd->ldz = sd->N + (model->time_input ? 1 : 0) + model->num_inputs;
    sd->stages = (size_t)r->m->stages;
    sd->first_stage = r->m->fsal ? 1 : 0;
    sd->num_layers = model->num_layers;
    sd->sizes = model->sizes;
    sd->model_serial = model->serial;
    r->maxw = 1;
    sd->max_in = sd->max_weights = 0;
    for (size_t l = 0; l < model->num_layers; ++l) {
        sd->act[l] =
            (int)(l + 1 == model->num_layers ? model->final_activation : model->activation);
        if (model->sizes[l + 1] > r->maxw)
            r->maxw = model->sizes[l + 1];
        if (model->sizes[l] > sd->max_in)
            sd->max_in = model->sizes[l];
        if (model->sizes[l] * model->sizes[l + 1] > sd->max_weights)
            sd->max_weights = model->sizes[l] * model->sizes[l + 1];
    }

    /* times in the direction-normalised variable tau = dir * t (per trajectory: cln_problem_rows)
     */
    r->dir = cln_direction(o, r->p);

    /* every batch-sized buffer of cln_allocate fits size_t (their products are not checked
     * again there) */
    size_t bn, fsz, bz, bw, brs;
    const size_t blocks = sd->stages < 2 ? 2 : sd->stages; /* dt0_auto uses two (cln_allocate) */
    CLN_CHECK(r->ctx,
              cln_mul_size(sd->B, sd->N, &bn) && cln_mul_size(bn, blocks, &fsz) &&
                  cln_mul_size(sd->B, sd->ldz, &bz) && cln_mul_size(sd->B, r->maxw, &bw) &&
                  cln_mul_size(sd->B, CLN_RSTATE_REALS, &brs),
              CLNODE_ERR_OUT_OF_MEMORY, "batch %zu x dimension %zu is too large", sd->B, sd->N);
    return CLNODE_OK;
}

/* Phase 2: every buffer of the solve, once; nothing is allocated after this phase until the
 * results are read back, except the saved steps' longer rows (cln_grow_steps, O(log steps) times
 * between groups of steps). */
static clnode_status cln_allocate(cln_run *r)
{
    const clnode_solve_options *o = r->o;
    const clnode_model *model = r->model;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->B, N = sd->N, es = sd->esize;
    clnode_status st = CLNODE_OK;
    for (size_t l = 0; l < model->num_layers; ++l) {
        CLN_TRY(st, cln_alloc(r, &sd->W[l], model->sizes[l] * model->sizes[l + 1], es));
        if (model->biases[l])
            CLN_TRY(st, cln_alloc(r, &sd->bias[l], model->sizes[l + 1], es));
    }
    if (model->out_scale) {
        CLN_TRY(st, cln_alloc(r, &sd->scale, model->out_scale_n, es));
        sd->scale_n = model->out_scale_n;
    }
    /* the saved steps start with room for a few groups of steps and grow with the steps taken
     * (cln_grow_steps), never past max_steps */
    if (r->dev_steps) {
        const size_t group = r->be->group_steps > 0 ? (size_t)r->be->group_steps : 1;
        size_t first = r->ctx->test.steps_cap_first;
        if (!first)
            first = CLN_STEPS_CAP_FIRST > 2 * group ? CLN_STEPS_CAP_FIRST : 2 * group;
        r->steps_cap = first < (size_t)o->max_steps ? first : (size_t)o->max_steps;
    }
    size_t tsout = 0, steps_t = 0, steps_y = 0, ts_in = 0;
    CLN_CHECK(r->ctx,
              cln_mul_size(B * N, r->p->n_save_ts, &tsout) &&
                  cln_mul_size(r->p->save_ts_per_trajectory ? B : 1, r->p->n_save_ts, &ts_in) &&
                  cln_mul_size(B, r->steps_cap, &steps_t) && cln_mul_size(steps_t, N, &steps_y),
              CLNODE_ERR_OUT_OF_MEMORY, "the saved points do not fit in memory");
    CLN_TRY(st, cln_alloc(r, &sd->Y, B * N, es));
    /* dt0_auto keeps f0 in block 1 while the probe's field goes into block 0 (cl/cln_dt0.h) */
    const size_t blocks = o->dt0_auto && sd->stages < 2 ? 2 : sd->stages;
    CLN_TRY(st, cln_alloc(r, &sd->F, B * N * blocks, es));
    CLN_TRY(st, cln_alloc(r, &sd->Z, B * sd->ldz, es));
    CLN_TRY(st, cln_alloc(r, &sd->H[0], B * r->maxw, es));
    CLN_TRY(st, cln_alloc(r, &sd->H[1], B * r->maxw, es));
    CLN_TRY(st, cln_alloc(r, &sd->CR, CLN_CONSTS_REALS, es));
    CLN_TRY(st, cln_alloc(r, &sd->CI, 1, sizeof(cln_iconsts)));
    CLN_TRY(st, cln_alloc(r, &sd->RS, B * CLN_RSTATE_REALS, es));
    CLN_TRY(st, cln_alloc(r, &sd->IS, B, sizeof(cln_istate)));
    CLN_TRY(st, cln_alloc(r, &sd->TS, ts_in, es)); /* a row per trajectory: padding rows too */
    CLN_TRY(st, cln_alloc(r, &sd->TSOUT, tsout, es));
    CLN_TRY(st, cln_alloc(r, &sd->STT, steps_t, es));
    CLN_TRY(st, cln_alloc(r, &sd->STY, steps_y, es));
    if (o->progress) {
        r->progress_rows = malloc(CLN_PROGRESS_ROWS * CLN_RSTATE_REALS * es);
        CLN_CHECK(r->ctx, r->progress_rows, CLNODE_ERR_OUT_OF_MEMORY,
                  "cannot allocate the progress read-back");
    }
    CLN_TRY(st, cln_alloc(r, &sd->PAIRS, r->compact ? sd->Breal : 0, sizeof(int32_t)));
    if (r->compact) {
        r->perm = malloc(sd->Breal * sizeof *r->perm);
        r->is_rows = malloc(sd->Breal * sizeof *r->is_rows);
        r->pairs = malloc(sd->Breal * sizeof *r->pairs);
        CLN_CHECK(r->ctx, r->perm && r->is_rows && r->pairs, CLNODE_ERR_OUT_OF_MEMORY,
                  "cannot allocate the compaction's staging");
        for (size_t b = 0; b < sd->Breal; ++b)
            r->perm[b] = b;
    }
fail:
    return st;
}

/* Phase 3: the model, the constants, the save times and y0 to the device (padding rows of Y
 * stay zero). */
static clnode_status cln_upload_problem(cln_run *r)
{
    const clnode_problem *p = r->p;
    const clnode_model *model = r->model;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    clnode_status st = CLNODE_OK;
    double *tsbuf = NULL, *zrows = NULL;
    cln_rstate_d *rows = NULL;
    /* a backend that still holds this model's packed weights does not read W and bias */
    const int kept = be->ops->model_kept && be->ops->model_kept(be, sd);
    for (size_t l = 0; l < model->num_layers && !kept; ++l) {
        CLN_TRY(st, cln_upload(be, sd, sd->W[l], 0, model->weights[l],
                               model->sizes[l] * model->sizes[l + 1]));
        if (model->biases[l])
            CLN_TRY(st, cln_upload(be, sd, sd->bias[l], 0, model->biases[l], model->sizes[l + 1]));
    }
    /* the output scale at every solve, kept model or not (backend.h: never kept) */
    if (sd->scale)
        CLN_TRY(st, cln_upload(be, sd, sd->scale, 0, model->out_scale, model->out_scale_n));
    {
        cln_consts_d K;
        double flat[CLN_CONSTS_REALS];
        cln_fill_constants(r, &K, &r->KI);
        memcpy(flat, &K, sizeof flat);
        CLN_TRY(st, cln_upload(be, sd, sd->CR, 0, flat, CLN_CONSTS_REALS));
        CLN_TRY(st, be->ops->buf_write(be, sd->CI, 0, sizeof r->KI, &r->KI));
    }
    if (p->n_save_ts) {
        /* one list, or a row per trajectory; the padding rows (never stepped) repeat the last */
        const size_t nt = p->n_save_ts, rows = p->save_ts_per_trajectory ? sd->B : 1;
        tsbuf = malloc(rows * nt * sizeof(double));
        if (!tsbuf) {
            st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the save times");
            goto fail;
        }
        for (size_t i = 0; i < rows * nt; ++i) {
            const size_t b = i / nt < sd->Breal ? i / nt : sd->Breal - 1;
            const double t = p->save_ts[(p->save_ts_per_trajectory ? b * nt : 0) + i % nt];
            tsbuf[i] = r->dir * cln_round(sd->prec, t);
        }
        CLN_TRY(st, cln_upload(be, sd, sd->TS, 0, tsbuf, rows * nt));
    }
    CLN_TRY(st, cln_upload(be, sd, sd->Y, 0, p->y0, sd->Breal * sd->N));
    rows = malloc(sd->B * sizeof *rows);
    if (!rows) {
        st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the trajectories' rows");
        goto fail;
    }
    cln_problem_rows(r, rows);
    CLN_TRY(st, cln_upload(be, sd, sd->RS, 0, (const double *)(const void *)rows,
                           sd->B * CLN_RSTATE_REALS));
    if (model
            ->num_inputs) { /* the inputs' columns of Z, written once (cln_stage_elem skips them) */
        const size_t k = model->num_inputs, c0 = sd->ldz - k;
        zrows = calloc(sd->B * sd->ldz, sizeof *zrows);
        if (!zrows) {
            st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the inputs");
            goto fail;
        }
        for (size_t b = 0; b < sd->Breal; ++b)
            memcpy(zrows + b * sd->ldz + c0, p->inputs + b * k, k * sizeof *zrows);
        CLN_TRY(st, cln_upload(be, sd, sd->Z, 0, zrows, sd->B * sd->ldz));
    }
fail:
    free(tsbuf);
    free(rows);
    free(zrows);
    return st;
}

/* dt0_auto: each trajectory's first step (cl/cln_dt0.h) after cln_init_traj, which it then runs
 * again with that step. f0 = f(t0, y0) is stage 0 of the first attempt, into F block 0 (where an
 * FSAL method's first step finds it); f1, at the probe, goes into block 0 too while f0 waits in
 * block 1: through the backend's bare field (the rhs op: the kernels of stage_rhs without the
 * stage; the driver's layer loop where there is none), over every live row. */
static clnode_status cln_select_dt0(cln_run *r)
{
    cln_backend *be = r->be;
    clnode_status st = cln_stage_rhs(r, 0);
    if (st == CLNODE_OK)
        st = be->ops->dt0(be, &r->sd, 0);
    if (st == CLNODE_OK)
        st = be->ops->rhs ? be->ops->rhs(be, &r->sd) : cln_rhs(r, 0);
    if (st == CLNODE_OK)
        st = be->ops->dt0(be, &r->sd, 1);
    if (st == CLNODE_OK)
        st = be->ops->init(be, &r->sd);
    return st;
}

/* Phase 4: the backend's per-solve set-up, the initial state of every trajectory (with dt0_auto,
 * its first step chosen) and, for FSAL methods, f(t0, y0) (reused as the first stage of the first
 * step; dt0_auto computed it already). */
static clnode_status cln_begin(cln_run *r)
{
    cln_backend *be = r->be;
    clnode_status st = be->ops->solve_begin(be, &r->sd);
    if (st != CLNODE_OK)
        return st;
    r->begun = 1;
    st = be->ops->init(be, &r->sd);
    if (st == CLNODE_OK && r->o->dt0_auto)
        st = cln_select_dt0(r);
    else if (st == CLNODE_OK && r->m->fsal)
        st = cln_stage_rhs(r, 0);
    return st;
}

/* The progress report: the earliest time among the first CLN_PROGRESS_ROWS trajectories (one
 * read-back into the staging allocated up front), then the callback; non-zero from it cancels. */
static clnode_status cln_progress(cln_run *r, size_t active, long steps)
{
    cln_solve_dev *sd = &r->sd;
    const size_t rows = sd->Breal < CLN_PROGRESS_ROWS ? sd->Breal : CLN_PROGRESS_ROWS;
    const size_t reals = rows * CLN_RSTATE_REALS;
    const clnode_status st =
        r->be->ops->buf_read(r->be, sd->RS, 0, reals * sd->esize, r->progress_rows);
    if (st != CLNODE_OK)
        return st;
    double frac = 1.0;
    for (size_t b = 0; b < rows; ++b) {
        const size_t i = b * CLN_RSTATE_REALS;
        double v[3];
        const size_t at[3] = {offsetof(cln_rstate_d, t), offsetof(cln_rstate_d, tau0),
                              offsetof(cln_rstate_d, tau1)};
        for (int q = 0; q < 3; ++q) {
            const size_t e = i + at[q] / sizeof(double);
            v[q] = sd->prec == CLNODE_FP32 ? (double)((const float *)r->progress_rows)[e]
                                           : ((const double *)r->progress_rows)[e];
        }
        const double span = v[2] - v[1];
        const double f = span > 0 ? (v[0] - v[1]) / span : 1.0;
        if (f < frac)
            frac = f;
    }
    if (r->o->progress(r->o->progress_user, active, sd->Breal, frac, steps))
        return cln_fail(r->ctx, CLNODE_ERR_CANCELLED, "cancelled by the progress callback");
    return CLNODE_OK;
}

/* The saved steps' growth, between two groups of steps (where the loop has just waited for the
 * device, or before the first group). Each attempted step saves at most one point per trajectory,
 * so after `it` attempts no row holds more than `it` points, and room for min(max_steps, it +
 * group) points per row covers the next group. When the rows are shorter, STT and STY are
 * replaced by buffers with rows twice as long (at least that long, at most max_steps): every
 * trajectory's points are copied to the new rows on the device (copy_rows, frozen rows too; no
 * round trip through the host), the old buffers freed, the capacity written into KI and the
 * backend's kernels pointed at the new buffers (solve_rebind). Doubling keeps the growths to
 * O(log steps) per solve and the copies to O(points) in all, and the memory follows the longest
 * trajectory instead of max_steps. Never called per step. */
static clnode_status cln_grow_steps(cln_run *r, long it, long group)
{
    const clnode_solve_options *o = r->o;
    const size_t ms = (size_t)o->max_steps;
    size_t need = (size_t)it + (size_t)group;
    need = need < ms ? need : ms;
    if (!r->dev_steps || r->steps_cap >= need)
        return CLNODE_OK;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t old = r->steps_cap, es = sd->esize, N = sd->N;
    size_t cap = old <= ms / 2 ? 2 * old : ms;
    cap = cap > need ? cap : need;
    size_t nt, ny;
    CLN_CHECK(
        r->ctx, cln_mul_size(sd->B, cap, &nt) && cln_mul_size(nt, N, &ny), CLNODE_ERR_OUT_OF_MEMORY,
        "the saved steps of %zu trajectories, %zu points each, do not fit in memory", sd->B, cap);
    clnode_status st = CLNODE_OK;
    cln_buf *stt = NULL, *sty = NULL;
    CLN_TRY(st, cln_alloc(r, &stt, nt, es));
    CLN_TRY(st, cln_alloc(r, &sty, ny, es));
    /* rows past Breal are padding and never save */
    CLN_TRY(st,
            be->ops->copy_rows(be, stt, 0, cap * es, sd->STT, 0, old * es, old * es, sd->Breal));
    CLN_TRY(st, be->ops->copy_rows(be, sty, 0, cap * N * es, sd->STY, 0, old * N * es, old * N * es,
                                   sd->Breal));
    cln_buf *t = sd->STT; /* the new buffers in, the old ones freed below */
    sd->STT = stt;
    stt = t;
    t = sd->STY;
    sd->STY = sty;
    sty = t;
    r->steps_cap = cap;
    /* the whole struct: a checker such as Oclgrind tracks a buffer's initialised bytes from the
     * last host store that covers it */
    r->KI.steps_cap = (int32_t)cap;
    CLN_TRY(st, be->ops->buf_write(be, sd->CI, 0, sizeof r->KI, &r->KI));
    if (be->ops->solve_rebind)
        CLN_TRY(st, be->ops->solve_rebind(be, sd));
    cln_log(r->ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "saved steps: room for %zu points per trajectory (was %zu) after %ld steps", cap, old,
            it);
fail:
    be->ops->buf_free(be, stt);
    be->ops->buf_free(be, sty);
    return st;
}

/* A per-trajectory buffer as compaction moves it: rows `stride` bytes apart from byte `off`, of
 * which the first `len` are moved. */
typedef struct cln_row_move {
    cln_buf *buf;
    size_t off, stride, len; /* bytes */
} cln_row_move;

/* Active-set compaction, at a point where the loop has just waited for the device (the active
 * count): when a quarter or more of the live rows [0, live) are frozen, their integer state rows
 * are read back, each frozen row among the first `active` is swapped with a running row after
 * them (every per-trajectory buffer: state, stage derivatives, stage argument with the
 * conditioning inputs, each trajectory's own save times when it has them, saved points; the saved
 * steps' rows at their current capacity), and live
 * drops to `active` rounded up to the backend's row alignment. Rows are independent in every pass
 * and product, so no trajectory's arithmetic changes; r->perm records where each trajectory went,
 * and cln_collect puts the results back in the caller's order. Allocates nothing. */
static clnode_status cln_compact(cln_run *r, size_t active)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t align = be->row_align ? be->row_align : 1, live = sd->live;
    if (!r->compact || active == 0 || live - active < live / 4 ||
        (active + align - 1) / align * align >= live)
        return CLNODE_OK;
    /* running trajectories only ever move down, so rows from Breal on (padding) never hold one */
    const size_t rows = live < sd->Breal ? live : sd->Breal;
    clnode_status st = be->ops->buf_read(be, sd->IS, 0, rows * sizeof(cln_istate), r->is_rows);
    if (st != CLNODE_OK)
        return st;
    size_t lo = 0, hi = rows, np = 0;
    int nts = 0, nsaved = 0; /* the most points written in a swapped row, per kind */
    for (;;) {
        while (lo < hi && !r->is_rows[lo].done)
            ++lo; /* the first frozen row */
        while (hi > lo && r->is_rows[hi - 1].done)
            --hi; /* after the last running row */
        if (hi == lo)
            break;
        const size_t j = hi - 1, t = r->perm[lo];
        for (int q = 0; q < 2; ++q) {
            const cln_istate *is = &r->is_rows[q ? j : lo];
            nts = is->nts > nts ? is->nts : nts;
            nsaved = is->nsteps_saved > nsaved ? is->nsteps_saved : nsaved;
        }
        r->pairs[2 * np] = (int32_t)lo;
        r->pairs[2 * np + 1] = (int32_t)j;
        ++np;
        r->perm[lo] = r->perm[j];
        r->perm[j] = t;
        r->is_rows[lo].done = 0;
        r->is_rows[j].done = 1;
    }
    /* lo: the running trajectories, now rows [0, lo) (the count read at the same wait) */
    CLN_CHECK(r->ctx, lo == active, CLNODE_ERR_INTERNAL,
              "compaction found %zu running trajectories, the count %zu", lo, active);
    if (np) {
        const size_t es = sd->esize, N = sd->N;
        CLN_TRY(st, be->ops->buf_write(be, sd->PAIRS, 0, 2 * np * sizeof(int32_t), r->pairs));
        const size_t ms = r->steps_cap, nt = r->p->n_save_ts;
        cln_row_move moves[4 + CLN_MAX_STAGES + 4];
        size_t nm = 0;
        moves[nm++] = (cln_row_move){sd->Y, 0, N * es, N * es};
        moves[nm++] = (cln_row_move){sd->Z, 0, sd->ldz * es, sd->ldz * es};
        moves[nm++] = (cln_row_move){sd->RS, 0, CLN_RSTATE_REALS * es, CLN_RSTATE_REALS * es};
        moves[nm++] = (cln_row_move){sd->IS, 0, sizeof(cln_istate), sizeof(cln_istate)};
        for (size_t i = 0; i < sd->stages; ++i) /* FSAL methods carry block 0 to the next step */
            moves[nm++] = (cln_row_move){sd->F, i * sd->B * N * es, N * es, N * es};
        /* the saved points: only the part of the rows written so far */
        if (nt)
            moves[nm++] = (cln_row_move){sd->TSOUT, 0, nt * N * es, (size_t)nts * N * es};
        if (nt && r->p->save_ts_per_trajectory) /* each trajectory's own save times */
            moves[nm++] = (cln_row_move){sd->TS, 0, nt * es, nt * es};
        if (r->dev_steps) {
            moves[nm++] = (cln_row_move){sd->STT, 0, ms * es, (size_t)nsaved * es};
            moves[nm++] = (cln_row_move){sd->STY, 0, ms * N * es, (size_t)nsaved * N * es};
        }
        for (size_t k = 0; k < nm; ++k)
            CLN_TRY(st, be->ops->swap_rows(be, sd, moves[k].buf, moves[k].off, moves[k].stride,
                                           moves[k].len, np));
    }
    cln_log(r->ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "compaction: %zu of %zu live rows running, %zu swapped", active, live, np);
    sd->live = (active + align - 1) / align * align;
    ++r->compactions;
fail:
    return st;
}

/* Phase 5: groups of steps with one read-back of the active count per group, until every
 * trajectory is frozen (or max_steps attempts were enqueued), compacting the live rows as
 * trajectories freeze; a progress report at most once a second. Allocates nothing, except when
 * the saved steps need longer rows (cln_grow_steps, between groups, O(log steps) times). */
static clnode_status cln_loop(cln_run *r)
{
    cln_backend *be = r->be;
    const clnode_solve_options *o = r->o;
    const long group = be->group_steps > 0 ? be->group_steps : 1;
    double last_report = cln_now();
    size_t active = r->sd.Breal;
    long it = 0;
    clnode_status st = be->ops->count_active(be, &r->sd, &active);
    while (st == CLNODE_OK && active > 0 && it < o->max_steps) {
        st = cln_grow_steps(r, it, group);
        if (st == CLNODE_OK && be->ops->steps) { /* the backend orders the group's work */
            const long n = o->max_steps - it < group ? o->max_steps - it : group;
            st = be->ops->steps(be, &r->sd, n);
            it += n;
        } else {
            for (long g = 0; g < group && it < o->max_steps && st == CLNODE_OK; ++g, ++it)
                st = cln_step(r);
        }
        if (st == CLNODE_OK)
            st = be->ops->count_active(be, &r->sd, &active);
        if (st == CLNODE_OK && it < o->max_steps)
            st = cln_compact(r, active);
        if (st == CLNODE_OK && o->cancel && active > 0 && o->cancel(o->cancel_user))
            st = cln_fail(r->ctx, CLNODE_ERR_CANCELLED, "cancelled by the caller after %ld steps",
                          it);
        if (st == CLNODE_OK && o->progress && active > 0) {
            const double now = cln_now();
            if (now - last_report >= 1.0) {
                last_report = now;
                st = cln_progress(r, active, it);
            }
        }
    }
    return st;
}

clnode_status clnode_solve(clnode_context *ctx, const clnode_model *model,
                           const clnode_solve_options *opts, const clnode_problem *problem,
                           clnode_solution **out)
{
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && out, CLNODE_ERR_INVALID_ARGUMENT, "clnode_solve: NULL context or out");
    *out = NULL;
    clnode_solve_options full; /* the program's options, as this library's struct */
    clnode_status st = cln_solve_options_import(ctx, opts, &full);
    if (st != CLNODE_OK)
        return st;
    opts = &full;
    clnode_problem pfull; /* the program's problem, as this library's struct */
    st = cln_problem_import(ctx, problem, &pfull);
    if (st != CLNODE_OK)
        return st;
    problem = &pfull;
    st = cln_check(ctx, model, opts, problem);
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "solve: %zu trajectories of dimension %zu on %s, %s in %s", problem->batch,
            clnode_model_dim(model), be->device_name, opts->method->name,
            clnode_precision_name(opts->precision));
    cln_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.be = be;
    r.model = model;
    r.o = opts;
    r.p = problem;
    r.m = opts->method;
    st = cln_size(&r);
    if (st != CLNODE_OK)
        return st;
    CLN_TRY(st, cln_allocate(&r));
    CLN_TRY(st, cln_upload_problem(&r));
    const long syncs0 = be->syncs;
    CLN_TRY(st, cln_begin(&r));
    CLN_TRY(st, cln_loop(&r));
    CLN_TRY(st, cln_collect(&r, out));
    (*out)->syncs = be->syncs - syncs0;
    cln_report_floor(ctx, opts, *out);
    cln_release(&r);
    return CLNODE_OK;
fail:
    cln_release(&r);
    return st;
}
