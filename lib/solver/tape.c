/* tape.c - what a kept solve (keep_tape) holds for the reverse pass: each accepted step's end
 * time and the states at the starts of its groups of checkpoint_every steps (lib/solver/solution.h,
 * cln_tape), built from the saved steps once the solve has ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/model.h"
#include "solver/solution.h"
#include "solver/solver_internal.h"
#include "solver/tape.h"

void cln_tape_free(cln_tape *t)
{
    if (!t)
        return;
    free(t->off_t);
    free(t->off_y);
    free(t->tau);
    free(t->ys);
    free(t->inputs);
    free(t->ts);
    free(t->ts_step);
    free(t);
}

/* v rounded to the state precision into element i of a buffer of that precision. */
static void cln_tape_put(void *buf, size_t esize, size_t i, double v)
{
    if (esize == sizeof(float))
        ((float *)buf)[i] = (float)v;
    else
        ((double *)buf)[i] = v;
}

/* The groups of `every` steps of a trajectory of M steps, from the last: ceil(M / every). */
static size_t cln_tape_groups(size_t M, size_t every)
{
    return M / every + (M % every != 0);
}

clnode_status cln_tape_check(clnode_context *ctx, const char *fn, const clnode_model *model,
                             const clnode_solution *sol)
{
    const cln_tape *t = sol->tape;
    CLN_CHECK(ctx, t, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: the solution kept nothing for the reverse pass (solve with the option "
              "keep_tape = 1)",
              fn);
    CLN_CHECK(ctx, t->model == model && t->model_serial == model->serial,
              CLNODE_ERR_INVALID_ARGUMENT,
              "%s: the model is not the one the solution was solved with", fn);
    return CLNODE_OK;
}

int cln_tape_bytes(const cln_tape *t, size_t *out)
{
    const size_t a = t->off_t[t->B], y = t->off_y[t->B];
    size_t yn, bytes, extra;
    const size_t ts_rows = t->ts_per_traj ? t->B : 1;
    if (!cln_mul_size(y, t->N, &yn) || !cln_add_size(a, yn, &bytes) ||
        !cln_mul_size(bytes, t->esize, &bytes) ||
        !cln_add_size(t->B * t->n_in, ts_rows * t->n_ts, &extra) ||
        !cln_add_size(bytes, extra * t->esize + 2 * (t->B + 1) * sizeof(size_t), &bytes) ||
        !cln_add_size(bytes, t->B * t->n_ts * sizeof(int32_t), &bytes))
        return 0;
    *out = bytes;
    return 1;
}

/* The offsets of every trajectory's times and kept states, and the bytes of the whole tape;
 * 0 on overflow. */
static int cln_tape_size(cln_tape *t, const size_t *steps, size_t *ntau, size_t *nys)
{
    size_t a = 0, y = 0;
    for (size_t b = 0; b < t->B; ++b) {
        t->off_t[b] = a;
        t->off_y[b] = y;
        if (!cln_add_size(a, steps[b] + 1, &a) ||
            !cln_add_size(y, cln_tape_groups(steps[b], t->every), &y))
            return 0;
    }
    t->off_t[t->B] = a;
    t->off_y[t->B] = y;
    if (!cln_mul_size(y, t->N, nys) || !cln_tape_bytes(t, &t->bytes))
        return 0;
    *ntau = a;
    return 1;
}

/* Trajectory b's times and kept states from its saved times (m-th at ts[m]), its kept states
 * (cln_tape_kept: the states after steps n - 1 for the group starts n > 0, in increasing n, at
 * kept[0], kept[N] ...) and its start (tau0, y0). */
static void cln_tape_fill(cln_tape *t, size_t b, double dir, double tau0, const double *y0,
                          const double *ts, const double *kept)
{
    const size_t M = t->off_t[b + 1] - t->off_t[b] - 1, N = t->N, es = t->esize;
    cln_tape_put(t->tau, es, t->off_t[b], tau0);
    for (size_t m = 0; m < M; ++m) /* the saved t is direction * tau: exact */
        cln_tape_put(t->tau, es, t->off_t[b] + m + 1, dir * ts[m]);
    const size_t groups = cln_tape_groups(M, t->every);
    for (size_t q = 0; q < groups; ++q) {
        const size_t n = M > (q + 1) * t->every ? M - (q + 1) * t->every : 0;
        const double *y = n == 0 ? y0 : kept + (groups - 2 - q) * N; /* the state after n - 1 */
        for (size_t c = 0; c < N; ++c)
            cln_tape_put(t->ys, es, (t->off_y[b] + q) * N + c, y[c]);
    }
}

double cln_tape_real(const cln_tape *t, const void *buf, size_t i)
{
    return t->esize == sizeof(float) ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
}

/* The step each of trajectory b's saved times belongs to (ts_step's row b), from its run of
 * saved times [first, first + count) and its steps' ends, in tau and the state precision as the
 * solve compared them: each step in turn takes the times by its end (CLN_TS_STEP_LOOP), the last
 * step those that remain, as the solve saved them in it. */
static void cln_tape_ts_row(cln_tape *t, size_t b, size_t first, size_t count)
{
    const size_t M = t->off_t[b + 1] - t->off_t[b] - 1;
    const size_t row = t->ts_per_traj ? b * t->n_ts : 0, end = first + count;
    int32_t *step = t->ts_step + b * t->n_ts;
    for (size_t j = 0; j < t->n_ts; ++j)
        step[j] = -1;
    if (M == 0)
        return; /* its saved times hold y0 and belong to no step */
    size_t j = first;
    for (size_t n = 0; n + 1 < M; ++n) {
        const double tn = cln_tape_real(t, t->tau, t->off_t[b] + n + 1);
        CLN_TS_STEP_LOOP(j, end, cln_tape_real(t, t->ts, row + j), tn)
        step[j] = (int32_t)n;
    }
    for (; j < end; ++j)
        step[j] = (int32_t)(M - 1);
}

int cln_tape_ts_steps(cln_tape *t, const size_t *first, const size_t *count)
{
    if (!t->n_ts)
        return 1;
    t->ts_step = malloc(t->B * t->n_ts * sizeof *t->ts_step);
    if (!t->ts_step)
        return 0;
    for (size_t b = 0; b < t->B; ++b)
        cln_tape_ts_row(t, b, first ? first[b] : 0, count[b]);
    return 1;
}

/* The kept states of a trajectory of M steps: one per group but the first (whose start is y0),
 * ceil(M / every) - 1; the first of them is the state after step
 * M - (ceil(M / every) - 1) every - 1, and each next one `every` steps later. */
static size_t cln_tape_kept(size_t M, size_t every, size_t *first)
{
    const size_t g = cln_tape_groups(M, every);
    if (g < 2)
        return 0;
    *first = M - (g - 1) * every - 1;
    return g - 1;
}

clnode_status cln_tape_build(clnode_context *ctx, const cln_tape_src *src, size_t B, size_t N,
                             const size_t *steps, const double *ts, size_t ts_cap,
                             const double *kept, const size_t *kept_off, cln_tape **out)
{
    const clnode_problem *p = src->p;
    cln_tape *t = calloc(1, sizeof *t);
    CLN_CHECK(ctx, t, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the kept steps");
    t->prec = src->prec;
    t->gemm_mode = src->gemm_mode;
    t->esize = src->prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    t->method = src->method;
    t->model = src->model;
    t->model_serial = src->model->serial;
    snprintf(t->backend, sizeof t->backend, "%s", src->backend);
    t->tf32_kind = src->tf32_kind;
    t->B = B;
    t->N = N;
    t->n_in = src->model->num_inputs;
    t->n_ts = p->n_save_ts;
    t->ts_per_traj = p->save_ts_per_trajectory != 0;
    t->every = src->every;
    memcpy(t->K, src->K, sizeof t->K);
    t->KI = *src->KI;
    const size_t es = t->esize;
    const size_t ts_rows = t->ts_per_traj ? B : 1;
    size_t ntau = 0, nys = 0;
    t->off_t = malloc((B + 1) * sizeof *t->off_t);
    t->off_y = malloc((B + 1) * sizeof *t->off_y);
    int ok = t->off_t && t->off_y && cln_tape_size(t, steps, &ntau, &nys);
    if (ok) {
        t->tau = malloc(ntau * es);
        t->ys = malloc((nys ? nys : 1) * es);
        t->inputs = t->n_in ? malloc(B * t->n_in * es) : NULL;
        t->ts = t->n_ts ? malloc(ts_rows * t->n_ts * es) : NULL;
        ok = t->tau && t->ys && (!t->n_in || t->inputs) && (!t->n_ts || t->ts);
    }
    if (!ok) {
        cln_tape_free(t);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate the kept steps of %zu "
                        "trajectories",
                        B);
    }
    for (size_t b = 0; b < B; ++b)
        cln_tape_fill(t, b, src->dir, src->tau0[b], p->y0 + b * N, ts ? ts + b * ts_cap : NULL,
                      kept ? kept + kept_off[b] * N : NULL);
    for (size_t i = 0; i < B * t->n_in; ++i)
        cln_tape_put(t->inputs, es, i, p->inputs[i]);
    for (size_t i = 0; i < ts_rows * t->n_ts; ++i) /* as the solve uploaded them (tau, rounded) */
        cln_tape_put(t->ts, es, i, src->dir * src->round(src->prec, p->save_ts[i]));
    if (!cln_tape_ts_steps(t, src->ts_first, src->ts_count)) {
        cln_tape_free(t);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate the saved times' steps of %zu trajectories", B);
    }
    *out = t;
    return CLNODE_OK;
}

/* Every row's kept states (cln_tape_kept), gathered on the device from the saved steps into one
 * buffer of `total` states (row after row, one copy_rows each) and read back into kept. */
static clnode_status cln_tape_gather(cln_run *r, const cln_istate *is, size_t total, double *kept)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t N = sd->N, es = sd->esize, every = (size_t)r->o->checkpoint_every;
    cln_buf *packed = NULL;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cln_alloc(r, &packed, total * N, es));
    size_t at = 0;
    for (size_t row = 0; row < sd->Breal; ++row) {
        size_t first = 0;
        const size_t n = cln_tape_kept((size_t)is[row].nsteps_saved, every, &first);
        if (n)
            CLN_TRY(st, be->ops->copy_rows(be, packed, at * N * es, N * es, sd->STY,
                                           (row * r->steps_cap + first) * N * es, every * N * es,
                                           N * es, n));
        at += n;
    }
    CLN_TRY(st, cln_download(be, sd, packed, 0, kept, total * N));
    cln_log(r->ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "kept tape: %zu states of %zu trajectories read back (checkpoint_every %zu)", total,
            sd->Breal, every);
fail:
    be->ops->buf_free(be, packed);
    return st;
}

/* keep_tape: the tape (cln_tape_build) from the step times and, of the saved steps' states, only
 * those at the starts of the checkpoint groups, thinned on the device before they are read back:
 * what is read back and kept follows checkpoint_every. is: the integer state rows in device row
 * order; steps: the most steps a row saved. */
clnode_status cln_keep_tape(cln_run *r, clnode_solution *s, const cln_istate *is, size_t steps)
{
    const size_t B = r->sd.Breal, N = r->sd.N, every = (size_t)r->o->checkpoint_every;
    const int own_ts = s->cap[CLNODE_SAVE_STEPS] == 0; /* no save_steps: the times read here */
    size_t total = 0, nts;
    double *tau0 = malloc(B * sizeof *tau0);
    size_t *count = malloc(B * sizeof *count), *koff = malloc(B * sizeof *koff);
    double *ts_rows = NULL, *ts = NULL, *kept = NULL;
    clnode_status st = CLNODE_OK;
    if (!tau0 || !count || !koff || !cln_mul_size(B, steps, &nts))
        goto oom;
    for (size_t row = 0; row < B; ++row) { /* device row order: trajectory perm[row] */
        const size_t b = r->compactions ? r->perm[row] : row, M = (size_t)is[row].nsteps_saved;
        size_t first = 0;
        count[b] = M;
        koff[b] = total;
        total += cln_tape_kept(M, every, &first);
    }
    if (own_ts && nts) {
        ts_rows = malloc(nts * sizeof *ts_rows);
        ts = malloc(nts * sizeof *ts);
        if (!ts_rows || !ts)
            goto oom;
        CLN_TRY(st, cln_download_rows(r, r->sd.STT, 1, steps, ts_rows));
        for (size_t row = 0; row < B; ++row)
            memcpy(ts + (r->compactions ? r->perm[row] : row) * steps, ts_rows + row * steps,
                   steps * sizeof *ts);
    }
    if (total) {
        size_t kn;
        kept = cln_mul_size(total, N, &kn) ? malloc(kn * sizeof *kept) : NULL;
        if (!kept)
            goto oom;
        CLN_TRY(st, cln_tape_gather(r, is, total, kept));
    }
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
                              .tf32_kind = (int)r->be->ops->tf32,
                              .dir = r->dir,
                              .K = (const double *)(const void *)&K,
                              .KI = &KI,
                              .every = every,
                              .p = r->p,
                              .tau0 = tau0,
                              .ts_first = s->first_ts,
                              .ts_count = s->count[CLNODE_SAVE_TS],
                              .round = cln_round};
    st = cln_tape_build(r->ctx, &src, B, N, count, own_ts ? ts : s->ts[CLNODE_SAVE_STEPS],
                        own_ts ? steps : s->cap[CLNODE_SAVE_STEPS], kept, koff, &s->tape);
    goto fail;
oom:
    st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the kept steps");
fail:
    free(tau0);
    free(count);
    free(koff);
    free(ts_rows);
    free(ts);
    free(kept);
    return st;
}
