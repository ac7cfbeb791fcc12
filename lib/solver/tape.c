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
    size_t yn, bytes, extra;
    const size_t ts_rows = t->ts_per_traj ? t->B : 1;
    if (!cln_mul_size(y, t->N, &yn) || !cln_add_size(a, yn, &bytes) ||
        !cln_mul_size(bytes, t->esize, &bytes) ||
        !cln_add_size(t->B * t->n_in, ts_rows * t->n_ts, &extra) ||
        !cln_add_size(bytes, extra * t->esize + 2 * (t->B + 1) * sizeof(size_t), &bytes))
        return 0;
    *ntau = a;
    *nys = yn;
    t->bytes = bytes;
    return 1;
}

/* Trajectory b's times and kept states from its saved steps (m-th at ts[m], ys[m * N]) and its
 * start (tau0, y0). */
static void cln_tape_fill(cln_tape *t, size_t b, double dir, double tau0, const double *y0,
                          const double *ts, const double *ys)
{
    const size_t M = t->off_t[b + 1] - t->off_t[b] - 1, N = t->N, es = t->esize;
    cln_tape_put(t->tau, es, t->off_t[b], tau0);
    for (size_t m = 0; m < M; ++m) /* the saved t is direction * tau: exact */
        cln_tape_put(t->tau, es, t->off_t[b] + m + 1, dir * ts[m]);
    const size_t groups = cln_tape_groups(M, t->every);
    for (size_t q = 0; q < groups; ++q) {
        const size_t n = M > (q + 1) * t->every ? M - (q + 1) * t->every : 0;
        const double *y = n == 0 ? y0 : ys + (n - 1) * N; /* the state after step n - 1 */
        for (size_t c = 0; c < N; ++c)
            cln_tape_put(t->ys, es, (t->off_y[b] + q) * N + c, y[c]);
    }
}

clnode_status cln_tape_build(clnode_context *ctx, const cln_tape_src *src, const clnode_solution *s,
                             cln_tape **out)
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
    t->B = s->B;
    t->N = s->N;
    t->n_in = src->model->num_inputs;
    t->n_ts = p->n_save_ts;
    t->ts_per_traj = p->save_ts_per_trajectory != 0;
    t->every = src->every;
    memcpy(t->K, src->K, sizeof t->K);
    t->KI = *src->KI;
    const size_t B = t->B, N = t->N, es = t->esize, cap = s->cap[CLNODE_SAVE_STEPS];
    const size_t ts_rows = t->ts_per_traj ? B : 1;
    size_t ntau = 0, nys = 0;
    t->off_t = malloc((B + 1) * sizeof *t->off_t);
    t->off_y = malloc((B + 1) * sizeof *t->off_y);
    int ok = t->off_t && t->off_y && cln_tape_size(t, s->count[CLNODE_SAVE_STEPS], &ntau, &nys);
    if (ok) {
        t->tau = malloc(ntau * es);
        t->ys = malloc((nys ? nys : 1) * es);
        t->inputs = t->n_in ? malloc(B * t->n_in * es) : NULL;
        t->ts = t->n_ts ? malloc(ts_rows * t->n_ts * es) : NULL;
        ok = t->tau && t->ys && (!t->n_in || t->inputs) && (!t->n_ts || t->ts);
    }
    if (!ok) {
        cln_tape_free(t);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the kept steps of %zu "
                        "trajectories", B);
    }
    for (size_t b = 0; b < B; ++b)
        cln_tape_fill(t, b, src->dir, src->tau0[b], p->y0 + b * N,
                      cap ? s->ts[CLNODE_SAVE_STEPS] + b * cap : NULL,
                      cap ? s->ys[CLNODE_SAVE_STEPS] + b * cap * N : NULL);
    for (size_t i = 0; i < B * t->n_in; ++i)
        cln_tape_put(t->inputs, es, i, p->inputs[i]);
    for (size_t i = 0; i < ts_rows * t->n_ts; ++i) /* as the solve uploaded them (tau, rounded) */
        cln_tape_put(t->ts, es, i, src->dir * src->round(src->prec, p->save_ts[i]));
    *out = t;
    return CLNODE_OK;
}

/* keep_tape: the tape from every trajectory's saved steps (cln_tape_build); without save_steps
 * the solution then lets them go, so that its points are those the options ask for. */
clnode_status cln_keep_tape(cln_run *r, clnode_solution *s)
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
                              .tf32_kind = (int)r->be->ops->tf32,
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
