/* solver_check.c - a solve's problem checked before anything is allocated (the method, the
 * precision, the interval, the controller, the save times, the initial states, the range of the
 * values in fp32, the first step), and the values in the state precision: each trajectory's
 * interval and first step, rounding, the uploads and read-backs of doubles. */
#include "solver/solver_internal.h"

/* ---- the problem of each trajectory ---- */

double cln_t0(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->t0s ? p->t0s[b] : o->t0;
}

double cln_t1(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->t1s ? p->t1s[b] : o->t1;
}

double cln_dt0_of(const clnode_solve_options *o, const clnode_problem *p, size_t b)
{
    return p->dt0s ? p->dt0s[b] : o->dt0;
}

/* The direction shared by the batch: -1 when some trajectory integrates backwards, else +1 (a
 * mix is refused by cln_validate_problem). A trajectory with t0 == t1 takes no step whatever the
 * direction. */
double cln_direction(const clnode_solve_options *o, const clnode_problem *p)
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
                                          const clnode_problem *p, int device)
{
    const size_t batch = p->batch;
    CLN_CHECK(ctx, batch >= 1 && batch <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.batch = %zu is out of range (1 to %d)", batch, INT32_MAX);
    CLN_CHECK(ctx, device || p->y0, CLNODE_ERR_INVALID_ARGUMENT,
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

clnode_status cln_save_time_fail(clnode_context *ctx, const clnode_solve_options *o,
                                 const clnode_problem *p, size_t b, size_t j, int why, double t,
                                 double before)
{
    const int rows = p->save_ts_per_trajectory;
    char who[48] = "";
    if (rows)
        snprintf(who, sizeof who, " of trajectory %zu", b);
    if (why == CLN_TS_NONFINITE)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "save time %zu%s is %g", j, who, t);
    if (why == CLN_TS_OUTSIDE)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                        "save time %zu%s (%g) lies outside %s[t0, t1] = [%g, %g]", j, who, t,
                        rows ? "its trajectory's interval " : "", cln_t0(o, p, b), cln_t1(o, p, b));
    return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT,
                    "save times must be monotone in the direction of integration (time %zu%s "
                    "= %g after %g)",
                    j, who, t, before);
}

/* The save times: one list shared by the batch (inside the one shared interval; per-trajectory
 * intervals clip it), or a row per trajectory, each inside its own trajectory's interval. */
static clnode_status cln_validate_save_ts(clnode_context *ctx, const clnode_solve_options *o,
                                          const clnode_problem *p, int device)
{
    const size_t nt = p->n_save_ts;
    CLN_CHECK(ctx, p->save_ts_per_trajectory == 0 || p->save_ts_per_trajectory == 1,
              CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.save_ts_per_trajectory = %d: 0 (one list shared by the batch) or 1 "
              "(a list per trajectory)",
              p->save_ts_per_trajectory);
    CLN_CHECK(ctx, nt == 0 || p->save_ts || device, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.n_save_ts = %zu save times but clnode_problem.save_ts is NULL", nt);
    CLN_CHECK(ctx, nt <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.n_save_ts = %zu: too many save times", nt);
    size_t all;
    CLN_CHECK(ctx, !p->save_ts_per_trajectory || cln_mul_size(p->batch, nt, &all),
              CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem: %zu trajectories x n_save_ts = %zu save times overflow", p->batch,
              nt);
    if (device)
        return CLNODE_OK; /* the times are the caller's device array */
    const double dir = cln_direction(o, p);
    const int rows = p->save_ts_per_trajectory;
    const int shared = !rows && !p->t0s && !p->t1s; /* one list in one interval */
    for (size_t b = 0; b < (rows ? p->batch : 1); ++b) {
        const double *ts = p->save_ts + b * (rows ? nt : 0);
        const double t0 = cln_t0(o, p, b), t1 = cln_t1(o, p, b);
        for (size_t j = 0; j < nt; ++j) {
            const double t = ts[j];
            const int why = !isfinite(t) ? CLN_TS_NONFINITE
                            : (shared || rows) && !(dir * t >= dir * t0 && dir * t <= dir * t1)
                                ? CLN_TS_OUTSIDE
                            : j > 0 && dir * t < dir * ts[j - 1] ? CLN_TS_DECREASING
                                                                 : 0;
            if (why)
                return cln_save_time_fail(ctx, o, p, b, j, why, t, j > 0 ? ts[j - 1] : 0.0);
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
    const clnode_status st = cln_validate_save_ts(ctx, o, p, 0);
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
double cln_round(clnode_precision p, double x)
{
    return p == CLNODE_FP32 ? (double)(float)x : x;
}

/* The first step |dt0| of a trajectory in the state precision, after dtmin/dtmax clipping. */
double cln_first_step(const clnode_solve_options *o, clnode_precision p, double dt0_in)
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
        /* a solve from device arrays: those are in the state precision already */
        const size_t i = arr[k].v ? cln_first_beyond_fp32(arr[k].v, arr[k].n) : arr[k].n;
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

clnode_status cln_validate(clnode_context *ctx, const clnode_model *model,
                           const clnode_solve_options *o, const clnode_problem *p, int device)
{
    CLN_CHECK(ctx, model, CLNODE_ERR_INVALID_ARGUMENT, "no model");
    clnode_status st = cln_validate_method(ctx, o->method);
    if (st == CLNODE_OK)
        st = cln_validate_problem(ctx, o, p, device);
    if (st == CLNODE_OK)
        st = cln_validate_controller(ctx, o);
    if (st == CLNODE_OK) /* the device arrays' values are not read: the save times' counts alone */
        st = device ? cln_validate_save_ts(ctx, o, p, 1) : cln_validate_inputs(ctx, model, o, p);
    if (st == CLNODE_OK)
        st = cln_validate_range(ctx, model, o, p);
    if (st == CLNODE_OK)
        st = cln_validate_collapse(ctx, o, p);
    return st;
}

/* ---- precision-dependent conversions (set-up and read-back only) ---- */

/* Rounds `n` doubles to the solve's precision and writes them at element `off` of buf. */
clnode_status cln_upload(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
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
clnode_status cln_download(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
                           double *dst, size_t n)
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
double cln_clip_floor(clnode_precision p, double tau1)
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
