/* lib/solver/: the solve itself: method tableaux, options and the driver written once against
 * the backend interface. */
/* solver.c - the driver: one solve of a batch from t0 to t1, written once against the backend
 * interface (backend.h), in phases (clnode_solve at the end reads as their list): check (the
 * problem, the device, the tolerance guard), size, allocate, upload, begin, loop (the Runge-Kutta
 * stages and the per-trajectory step of cl/cln_step.h in groups of steps with one small read-back
 * per group, and the progress report), collect. Nothing is allocated while steps run; the saved
 * steps' rows grow between groups of steps, by doubling (cln_grow_steps). The other files of the
 * solve by concern: solver_internal.h. */
#include "core/fpenv.h"
#include "solver/solver_internal.h"

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

/* ---- the solve ---- */

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
                        clnode_gemm_mode_name(o->gemm_precision),
                        clnode_gemm_class_name(pr->gemm_class), pr->unit_roundoff,
                        CLNODE_GUARD_FACTOR, floor);
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

/* ---- the phases of a solve ---- */

/* Phase 0: the problem is valid and the device can solve it (precision; the tolerance against
 * the measured precision of its GEMM). */
clnode_status cln_check(clnode_context *ctx, const clnode_model *model,
                        const clnode_solve_options *o, const clnode_problem *p, int device)
{
    const clnode_status st = cln_validate(ctx, model, o, p, device);
    if (st != CLNODE_OK)
        return st;
    const clnode_status pst =
        cln_check_device_precision(ctx, o->precision, o->gemm_precision, "solve");
    if (pst != CLNODE_OK)
        return pst;
    return cln_guard_tolerance(ctx, o);
}

/* Phase 1: the sizes of every buffer and the interval in tau (nothing allocated). */
clnode_status cln_size(cln_run *r)
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
clnode_status cln_allocate(cln_run *r)
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

/* Phase 3, the part every solve uploads from the host: the model and the constants. */
clnode_status cln_upload_model(cln_run *r)
{
    const clnode_model *model = r->model;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    clnode_status st = CLNODE_OK;
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
fail:
    return st;
}

/* Phase 3, each trajectory's state row (its interval and first step). */
clnode_status cln_upload_rows(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_rstate_d *rows = malloc(sd->B * sizeof *rows);
    CLN_CHECK(r->ctx, rows, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the trajectories' rows");
    cln_problem_rows(r, rows);
    const clnode_status st = cln_upload(r->be, sd, sd->RS, 0, (const double *)(const void *)rows,
                                        sd->B * CLN_RSTATE_REALS);
    free(rows);
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
    double *tsbuf = NULL, *zrows = NULL;
    clnode_status st = cln_upload_model(r);
    if (st != CLNODE_OK)
        return st;
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
    CLN_TRY(st, cln_upload_rows(r));
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
clnode_status cln_begin(cln_run *r)
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

/* Phase 5: groups of steps with one read-back of the active count per group, until every
 * trajectory is frozen (or max_steps attempts were enqueued), compacting the live rows as
 * trajectories freeze; a progress report at most once a second. Allocates nothing, except when
 * the saved steps need longer rows (cln_grow_steps, between groups, O(log steps) times). */
clnode_status cln_loop(cln_run *r)
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
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
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
    st = cln_check(ctx, model, opts, problem, 0);
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
