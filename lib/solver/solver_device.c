/* solver_device.c - a solve from and into the caller's device arrays (clnode/device_solve.h):
 * the driver's phases (solver.c) with the batch-sized arrays copied on the device, the save times
 * and y0's and the inputs' finiteness checked by kernels, and the results copied into the caller's
 * arrays. */
#include "clnode/device_solve.h"
#include "core/fpenv.h"

#include "solver/solver_internal.h"

#define CLN_DEVICE_PROBLEM_MIN CLN_END_OF(clnode_device_problem, y1)

static void device_problem_defaults(clnode_device_problem *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
}

CLN_DEFAULTS_SIZED(clnode_device_problem_default_sized, clnode_device_problem,
                   device_problem_defaults)

/* The caller's arrays adopted by the backend for one solve (released with it). */
typedef struct cln_dev_arrays {
    cln_buf *y0, *inputs, *save_ts, *ys, *y1, *ts, *flag;
    cln_buf *pad; /* a row of +inf: the unreached save times' values and times */
} cln_dev_arrays;

/* What a solve from device arrays refuses besides clnode_solve's checks (Phase 0). */
static clnode_status cln_device_refusals(clnode_context *ctx, const clnode_model *model,
                                         const clnode_solve_options *o,
                                         const clnode_device_problem *dp, const clnode_problem *p)
{
    const cln_backend *be = ctx->backend;
    CLN_CHECK(ctx, be->ops->buf_adopt && be->ops->nonfinite_rows && be->ops->bad_save_ts,
              CLNODE_ERR_UNSUPPORTED, "clnode_solve_device: %s (backend %s) takes no device arrays",
              be->device_name, be->ops->name);
    CLN_CHECK(ctx, dp->y0.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem.y0 is NULL: no initial states for %zu trajectories",
              dp->batch);
    const size_t k = model->num_inputs;
    CLN_CHECK(ctx, k == 0 || dp->inputs.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "the model takes %zu conditioning inputs: pass them as the problem's inputs "
              "(clnode_device_problem.inputs, batch x %zu values)",
              k, k);
    CLN_CHECK(ctx, k > 0 || !dp->inputs.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "conditioning inputs were given (clnode_device_problem.inputs), but the model "
              "takes none");
    const size_t nt = dp->n_save_ts;
    CLN_CHECK(ctx, (nt > 0) == (dp->save_ts.handle != NULL), CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem: n_save_ts = %zu but save_ts is %s", nt,
              dp->save_ts.handle ? "given" : "NULL");
    CLN_CHECK(ctx, nt == 0 || dp->ys.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem.ys is NULL: no array for the values at the %zu save times",
              nt);
    CLN_CHECK(ctx, !o->save_t1 || dp->y1.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem.y1 is NULL: no array for the states at t1 (save_t1)");
    CLN_CHECK(ctx, !dp->ts.handle || nt > 0 || o->save_t1, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem.ts is given, but there are neither save times nor "
              "save_t1: no saved points have times");
    CLN_CHECK(ctx, !o->save_t0, CLNODE_ERR_UNSUPPORTED,
              "clnode_solve_device: save_t0 is not saved (y0 is the caller's array already)");
    CLN_CHECK(ctx, !o->save_steps, CLNODE_ERR_UNSUPPORTED,
              "clnode_solve_device: save_steps (the saved steps) live in host memory: use "
              "clnode_solve");
    CLN_CHECK(ctx, !o->keep_tape == !dp->kept, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_problem.kept is %s with keep_tape = %d: the tape's solution goes "
              "there with keep_tape, and only then",
              dp->kept ? "given" : "NULL", o->keep_tape);
    if (nt == 0)
        return CLNODE_OK;
    CLN_CHECK(ctx, cln_direction(o, p) > 0, CLNODE_ERR_UNSUPPORTED,
              "clnode_solve_device: save times on the device with a backward integration (t1 < "
              "t0): use clnode_solve");
    const int per_traj = p->t0s || p->t1s;
    for (size_t b = 0; b < (per_traj ? p->batch : 1); ++b)
        CLN_CHECK(ctx, cln_t0(o, p, b) != cln_t1(o, p, b), CLNODE_ERR_UNSUPPORTED,
                  "clnode_solve_device: t0 = t1 = %g (trajectory %zu) with save times on the "
                  "device: use clnode_solve",
                  cln_t0(o, p, b), b);
    return CLNODE_OK;
}

/* One caller's array of n elements of esize bytes, adopted (NULL handle: none). */
static clnode_status cln_adopt(cln_run *r, const clnode_device_array *a, size_t n, size_t esize,
                               const char *what, cln_buf **out)
{
    *out = NULL;
    if (!a->handle)
        return CLNODE_OK;
    size_t bytes;
    CLN_CHECK(r->ctx, cln_mul_size(n, esize, &bytes), CLNODE_ERR_INVALID_ARGUMENT,
              "%s: %zu values overflow", what, n);
    return r->be->ops->buf_adopt(r->be, a->handle, a->offset, bytes, what, out);
}

/* The caller's arrays into the solve's buffers on the device (Phase 3 of a host solve writes
 * them from the host): y0 into Y, the inputs into their columns of Z, the save times into TS
 * (the padding rows of a per-trajectory list repeat the last row, as the host path writes). */
static clnode_status cln_device_inputs(cln_run *r, const clnode_device_problem *dp,
                                       cln_dev_arrays *a)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t es = sd->esize, B = sd->Breal, N = sd->N, k = r->model->num_inputs;
    const size_t nt = dp->n_save_ts, ts_rows = dp->save_ts_per_trajectory ? B : 1;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cln_adopt(r, &dp->y0, B * N, es, "clnode_device_problem.y0", &a->y0));
    CLN_TRY(st, cln_adopt(r, &dp->inputs, B * k, es, "clnode_device_problem.inputs", &a->inputs));
    CLN_TRY(st, cln_adopt(r, &dp->save_ts, ts_rows * nt, es, "clnode_device_problem.save_ts",
                          &a->save_ts));
    CLN_TRY(st, cln_adopt(r, &dp->ys, B * nt * N, es, "clnode_device_problem.ys", &a->ys));
    if (r->o->save_t1)
        CLN_TRY(st, cln_adopt(r, &dp->y1, B * N, es, "clnode_device_problem.y1", &a->y1));
    CLN_TRY(st, cln_adopt(r, &dp->ts, B * (nt ? nt : 1), es, "clnode_device_problem.ts", &a->ts));
    CLN_TRY(st, be->ops->copy_rows(be, sd->Y, 0, B * N * es, a->y0, dp->y0.offset, B * N * es,
                                   B * N * es, 1));
    if (k)
        CLN_TRY(st, be->ops->copy_rows(be, sd->Z, (sd->ldz - k) * es, sd->ldz * es, a->inputs,
                                       dp->inputs.offset, k * es, k * es, B));
    if (nt) {
        const size_t row = nt * es;
        CLN_TRY(st, be->ops->copy_rows(be, sd->TS, 0, ts_rows * row, a->save_ts, dp->save_ts.offset,
                                       ts_rows * row, ts_rows * row, 1));
        for (size_t b = B; dp->save_ts_per_trajectory && b < sd->B; ++b)
            CLN_TRY(st, be->ops->copy_rows(be, sd->TS, b * row, row, a->save_ts,
                                           dp->save_ts.offset + (B - 1) * row, row, row, 1));
    }
fail:
    return st;
}

/* n values of the caller's array a (its handle buf) into doubles (keep_tape: the tape holds
 * them); *out NULL when n is 0. */
static clnode_status cln_read_back(cln_run *r, cln_buf *buf, const clnode_device_array *a, size_t n,
                                   double **out)
{
    *out = NULL;
    if (!n)
        return CLNODE_OK;
    const size_t es = r->sd.esize;
    unsigned char *raw = malloc(n * es);
    *out = malloc(n * sizeof **out);
    clnode_status st = raw && *out ? r->be->ops->buf_read(r->be, buf, a->offset, n * es, raw)
                                   : cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                                              "cannot allocate the tape's %zu values", n);
    for (size_t i = 0; st == CLNODE_OK && i < n; ++i) {
        if (es == sizeof(float)) {
            float f;
            memcpy(&f, raw + i * es, es);
            (*out)[i] = (double)f;
        } else {
            memcpy(&(*out)[i], raw + i * es, es);
        }
    }
    free(raw);
    return st;
}

/* Flags written by a kernel into tmp (n of them) copied into block `at` of the flags. */
static clnode_status cln_flags_into(cln_run *r, cln_buf *flag, size_t at, cln_buf *tmp, size_t n)
{
    const size_t bytes = n * sizeof(int64_t);
    return r->be->ops->copy_rows(r->be, flag, at * sizeof(int64_t), bytes, tmp, 0, bytes, bytes, 1);
}

/* The checks on the device, their flags in blocks of a->flag: y0's finiteness (B), the inputs'
 * (B) and the save times' (a row per list: cln_bad_save_row), read back at once. */
static clnode_status cln_device_flags(cln_run *r, const clnode_device_problem *dp,
                                      cln_dev_arrays *a, size_t n_flags, int64_t *flag)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N, k = r->model->num_inputs, nt = dp->n_save_ts;
    const size_t ts_rows = dp->save_ts_per_trajectory ? B : 1;
    /* only a list in one interval or a list per trajectory lies inside one (as clnode_solve) */
    const int within = dp->save_ts_per_trajectory || (!dp->t0s && !dp->t1s);
    cln_buf *tmp = NULL;
    clnode_status st = cln_alloc(r, &a->flag, n_flags, sizeof(int64_t));
    if (st == CLNODE_OK && (k || nt))
        st = cln_alloc(r, &tmp, B, sizeof(int64_t));
    /* a block stays 0 where there is nothing to check (the buffer starts zeroed) */
    if (st == CLNODE_OK)
        st = be->ops->nonfinite_rows(be, sd->prec, sd->Y, 0, N, N, B, a->flag);
    if (st == CLNODE_OK && k)
        st = be->ops->nonfinite_rows(be, sd->prec, sd->Z, sd->ldz - k, sd->ldz, k, B, tmp);
    if (st == CLNODE_OK && k)
        st = cln_flags_into(r, a->flag, B, tmp, B);
    if (st == CLNODE_OK && nt)
        st = be->ops->bad_save_ts(be, sd->prec, sd->TS, dp->save_ts_per_trajectory ? nt : 0, nt,
                                  ts_rows, sd->RS, within, tmp);
    if (st == CLNODE_OK && nt)
        st = cln_flags_into(r, a->flag, 2 * B, tmp, ts_rows);
    if (st == CLNODE_OK)
        st = be->ops->buf_read(be, a->flag, 0, n_flags * sizeof *flag, flag);
    be->ops->buf_free(be, tmp);
    return st;
}

/* The first refused save time (flag: 4 j + why of each row, cln_bad_save_row), named as
 * clnode_solve names it, with its value and the one before it read back. */
static clnode_status cln_device_bad_save(cln_run *r, const clnode_device_problem *dp,
                                         cln_dev_arrays *a, const int64_t *flag, size_t rows)
{
    for (size_t b = 0; b < rows; ++b) {
        if (!flag[b])
            continue;
        const size_t j = (size_t)flag[b] / 4, first = j > 0 ? j - 1 : 0;
        clnode_device_array at = dp->save_ts;
        at.offset += (b * (dp->save_ts_per_trajectory ? dp->n_save_ts : 0) + first) * r->sd.esize;
        double *v = NULL;
        clnode_status st = cln_read_back(r, a->save_ts, &at, j + 1 - first, &v);
        if (st == CLNODE_OK)
            st = cln_save_time_fail(r->ctx, r->o, r->p, b, j, (int)(flag[b] % 4), v[j - first],
                                    v[0]);
        free(v);
        return st;
    }
    return CLNODE_OK;
}

/* The checks of the caller's arrays on the device (one read of their flags): the save times
 * first, as clnode_solve checks them, then y0 and the inputs finite; the first refused is named
 * as clnode_solve names it, with its value. */
static clnode_status cln_device_checks(cln_run *r, const clnode_device_problem *dp,
                                       cln_dev_arrays *a)
{
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N, k = r->model->num_inputs, es = sd->esize;
    const size_t n_flags = 2 * B + (dp->n_save_ts ? (dp->save_ts_per_trajectory ? B : 1) : 0);
    int64_t *flag = malloc(n_flags * sizeof *flag);
    clnode_status st =
        flag ? cln_device_flags(r, dp, a, n_flags, flag)
             : cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the checks' flags");
    if (st == CLNODE_OK)
        st = cln_device_bad_save(r, dp, a, flag + 2 * B, n_flags - 2 * B);
    if (st != CLNODE_OK)
        goto done;
    for (size_t half = 0; half < (k ? 2 : 1); ++half)
        for (size_t b = 0; b < B; ++b) {
            if (!flag[half * B + b])
                continue;
            const size_t n = (size_t)flag[half * B + b] - 1;
            const size_t width = half ? k : N;
            const clnode_device_array *arr = half ? &dp->inputs : &dp->y0;
            cln_buf *src = half ? a->inputs : a->y0;
            clnode_device_array at = *arr;
            at.offset += (b * width + n) * es;
            double *pv = NULL, v = NAN;
            if (cln_read_back(r, src, &at, 1, &pv) == CLNODE_OK)
                v = pv[0];
            free(pv);
            st = half ? cln_fail(r->ctx, CLNODE_ERR_NONFINITE_INPUT,
                                 "conditioning input %zu of trajectory %zu is %g (inputs must be "
                                 "finite)",
                                 n, b, v)
                      : cln_fail(r->ctx, CLNODE_ERR_NONFINITE_INPUT,
                                 "y0 of trajectory %zu, component %zu is %g (initial states must "
                                 "be finite)",
                                 b, n, v);
            goto done;
        }
done:
    free(flag);
    return st;
}

/* keep_tape: the solution with its tape, as clnode_solve collects it, from host copies of y0,
 * the inputs and the save times (read back from the caller's arrays). */
static clnode_status cln_device_kept(cln_run *r, const clnode_device_problem *dp, cln_dev_arrays *a,
                                     clnode_problem *p)
{
    const size_t B = r->sd.Breal, k = r->model->num_inputs;
    double *y0 = NULL, *in = NULL, *ts = NULL;
    clnode_status st = cln_read_back(r, a->y0, &dp->y0, B * r->sd.N, &y0);
    if (st == CLNODE_OK)
        st = cln_read_back(r, a->inputs, &dp->inputs, B * k, &in);
    if (st == CLNODE_OK)
        st = cln_read_back(r, a->save_ts, &dp->save_ts,
                           dp->n_save_ts * (dp->save_ts_per_trajectory ? B : 1), &ts);
    p->y0 = y0;
    p->inputs = in;
    p->save_ts = ts;
    if (st == CLNODE_OK)
        st = cln_collect(r, dp->kept);
    p->y0 = p->inputs = p->save_ts = NULL;
    free(y0);
    free(in);
    free(ts);
    return st;
}

/* The layout of the saved points (lib/solver/layout.c's, clnode_solution_rows'): the values at
 * the save times trajectory b did not reach (j >= nts[b]) +inf in its row of ys; the times (ts,
 * when given) the save times reached then +inf, or without save times each trajectory's
 * t_final. Written on the device: copies from the save times and from one row of +inf. */
static clnode_status cln_device_layout(cln_run *r, const clnode_device_problem *dp,
                                       cln_dev_arrays *a, const cln_istate *is,
                                       const double *t_final)
{
    cln_backend *be = r->be;
    const cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N, es = sd->esize, nt = dp->n_save_ts;
    const size_t row = nt * es, ts_row = dp->save_ts_per_trajectory ? row : 0;
    clnode_status st = CLNODE_OK;
    if (!nt) {
        /* save_t1 alone: one time per trajectory, in the solve's precision */
        unsigned char *t = a->ts ? malloc(B * es) : NULL;
        if (a->ts && !t)
            return cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the times");
        for (size_t b = 0; t && b < B; ++b) {
            const float f = (float)t_final[b];
            memcpy(t + b * es, es == sizeof f ? (const void *)&f : (const void *)&t_final[b], es);
        }
        if (t)
            st = be->ops->buf_write(be, a->ts, dp->ts.offset, B * es, t);
        free(t);
        return st;
    }
    size_t unreached = 0;
    for (size_t b = 0; b < B; ++b)
        unreached += (size_t)is[b].nts < nt;
    if (unreached) {
        double *inf = malloc(nt * N * sizeof *inf);
        st = inf ? cln_alloc(r, &a->pad, nt * N, es)
                 : cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a row of +inf");
        for (size_t i = 0; st == CLNODE_OK && i < nt * N; ++i)
            inf[i] = INFINITY;
        if (st == CLNODE_OK)
            st = cln_upload(be, sd, a->pad, 0, inf, nt * N);
        free(inf);
    }
    if (st == CLNODE_OK && a->ts && ts_row)
        st = be->ops->copy_rows(be, a->ts, dp->ts.offset, row, a->save_ts, dp->save_ts.offset, row,
                                row, B);
    for (size_t b = 0; st == CLNODE_OK && b < B; ++b) {
        const size_t n = (size_t)is[b].nts < nt ? (size_t)is[b].nts : nt;
        if (a->ts && !ts_row && n)
            st = be->ops->copy_rows(be, a->ts, dp->ts.offset + b * row, n * es, a->save_ts,
                                    dp->save_ts.offset, n * es, n * es, 1);
        if (n == nt || st != CLNODE_OK)
            continue;
        st = be->ops->copy_rows(be, a->ys, dp->ys.offset + (b * nt + n) * N * es, (nt - n) * N * es,
                                a->pad, 0, (nt - n) * N * es, (nt - n) * N * es, 1);
        if (st == CLNODE_OK && a->ts)
            st = be->ops->copy_rows(be, a->ts, dp->ts.offset + b * row + n * es, (nt - n) * es,
                                    a->pad, 0, (nt - n) * es, (nt - n) * es, 1);
    }
    return st;
}

/* The results into the caller's arrays, and the statistics to the host. */
static clnode_status cln_device_results(cln_run *r, const clnode_device_problem *dp,
                                        cln_dev_arrays *a, clnode_trajectory_stats *stats,
                                        size_t *saved, size_t stats_size)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N, es = sd->esize, nt = dp->n_save_ts;
    clnode_status st = CLNODE_OK;
    cln_rstate_d *rs = NULL;
    cln_istate *is = NULL;
    double *t_final = NULL;
    if (nt)
        CLN_TRY(st, be->ops->copy_rows(be, a->ys, dp->ys.offset, B * nt * N * es, sd->TSOUT, 0,
                                       B * nt * N * es, B * nt * N * es, 1));
    if (a->y1)
        CLN_TRY(st, be->ops->copy_rows(be, a->y1, dp->y1.offset, B * N * es, sd->Y, 0, B * N * es,
                                       B * N * es, 1));
    rs = calloc(B, sizeof *rs);
    is = calloc(B, sizeof *is);
    t_final = calloc(B, sizeof *t_final);
    if (!rs || !is || !t_final) {
        st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the final states");
        goto fail;
    }
    /* the read-backs wait for the copies before them on the queue */
    CLN_TRY(st, cln_download(be, sd, sd->RS, 0, (double *)(void *)rs, B * CLN_RSTATE_REALS));
    CLN_TRY(st, be->ops->buf_read(be, sd->IS, 0, B * sizeof *is, is));
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats t;
        cln_fill_stats(r, &t, &rs[b], &is[b]);
        t_final[b] = t.t_final;
        if (stats)
            cln_struct_fill((unsigned char *)stats + b * stats_size, stats_size, &t, sizeof t);
        if (saved)
            saved[b] = (size_t)is[b].nts;
    }
    CLN_TRY(st, cln_device_layout(r, dp, a, is, t_final));
fail:
    free(rs);
    free(is);
    free(t_final);
    return st;
}

clnode_status clnode_solve_device_sized(clnode_context *ctx, const clnode_model *model,
                                        const clnode_solve_options *opts,
                                        const clnode_device_problem *problem,
                                        clnode_trajectory_stats *stats, size_t *saved,
                                        size_t stats_size)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx, CLNODE_ERR_INVALID_ARGUMENT, "clnode_solve_device: NULL context");
    clnode_status st = CLNODE_OK;
    cln_run r;
    memset(&r, 0, sizeof r);
    cln_dev_arrays a;
    memset(&a, 0, sizeof a);
    if (stats)
        CLN_TRY(st, cln_check_struct_size(ctx, "clnode_trajectory_stats", stats_size,
                                          CLN_TRAJECTORY_STATS_MIN, sizeof *stats));
    clnode_solve_options full;
    CLN_TRY(st, cln_solve_options_import(ctx, opts, &full));
    opts = &full;
    clnode_device_problem dp;
    device_problem_defaults(&dp);
    CLN_CHECK(ctx, problem, CLNODE_ERR_INVALID_ARGUMENT,
              "no problem (clnode_device_problem is NULL)");
    CLN_TRY(st, cln_struct_import(ctx, "clnode_device_problem", problem, CLN_DEVICE_PROBLEM_MIN,
                                  &dp, sizeof dp));
    if (dp.kept)
        *dp.kept = NULL;
    /* the host's part of the problem: the batch, the intervals, the save times' count */
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = dp.batch;
    p.t0s = dp.t0s;
    p.t1s = dp.t1s;
    p.dt0s = dp.dt0s;
    p.n_save_ts = dp.n_save_ts;
    p.save_ts_per_trajectory = dp.save_ts_per_trajectory;
    CLN_TRY(st, cln_check(ctx, model, opts, &p, 1));
    CLN_TRY(st, cln_device_refusals(ctx, model, opts, &dp, &p));
    r.ctx = ctx;
    r.be = ctx->backend;
    r.model = model;
    r.o = opts;
    r.p = &p;
    r.m = opts->method;
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "solve from device arrays: %zu trajectories of dimension %zu on %s, %s in %s", p.batch,
            clnode_model_dim(model), r.be->device_name, opts->method->name,
            clnode_precision_name(opts->precision));
    CLN_TRY(st, cln_size(&r));
    r.compact = 0; /* the rows stay the caller's (compaction changes no bit) */
    CLN_TRY(st, cln_allocate(&r));
    CLN_TRY(st, cln_upload_model(&r));
    CLN_TRY(st, cln_device_inputs(&r, &dp, &a));
    CLN_TRY(st, cln_upload_rows(&r)); /* the intervals the save times are checked against */
    CLN_TRY(st, cln_device_checks(&r, &dp, &a));
    const long syncs0 = r.be->syncs;
    CLN_TRY(st, cln_begin(&r));
    CLN_TRY(st, cln_loop(&r));
    CLN_TRY(st, cln_device_results(&r, &dp, &a, stats, saved, stats_size));
    if (opts->keep_tape) {
        CLN_TRY(st, cln_device_kept(&r, &dp, &a, &p));
        (*dp.kept)->syncs = r.be->syncs - syncs0;
    }
fail:
    if (r.be) {
        cln_buf *all[] = {a.y0, a.inputs, a.save_ts, a.ys, a.y1, a.ts, a.flag, a.pad};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            r.be->ops->buf_free(r.be, all[i]);
        cln_release(&r);
    }
    return st;
}
