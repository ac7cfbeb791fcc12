/* reverse_schedule.c - the reverse pass's schedule (reverse_schedule.h), the one statement of
 * the order of its steps on every backend. */
#include <stdlib.h>

#include "solver/reverse_schedule.h"

typedef struct rs_key {
    size_t M, r;
} rs_key;

/* Most steps first, equal steps by index (clnode/gradient.h's order of a block). */
static int rs_key_cmp(const void *a, const void *b)
{
    const rs_key *x = a, *y = b;
    if (x->M != y->M)
        return x->M > y->M ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

int cln_rev_order(const cln_rev_job *job, size_t b0, size_t Bg, size_t *traj, size_t *M)
{
    rs_key one[CLN_REV_BLOCK];
    rs_key *keys = Bg <= CLN_REV_BLOCK ? one : malloc(Bg * sizeof *keys);
    if (!keys)
        return 0;
    for (size_t r = 0; r < Bg; ++r) {
        keys[r].M = job->off_t[b0 + r + 1] - job->off_t[b0 + r] - 1;
        keys[r].r = r;
    }
    qsort(keys, Bg, sizeof *keys, rs_key_cmp);
    for (size_t p = 0; p < Bg; ++p) {
        traj[p] = keys[p].r;
        M[p] = keys[p].M;
    }
    if (keys != one)
        free(keys);
    return 1;
}

void cln_rev_plan_init(cln_rev_plan *p, clnode_context *ctx, const cln_rev_job *job,
                       const cln_rev_ops *ops)
{
    p->ctx = ctx;
    p->job = job;
    p->ops = ops;
    p->seg_len = cln_rev_seg_len(job);
}

/* Every stage of the rows' steps (their times and states set by begin), rows [0, A). */
static clnode_status rs_stages(const cln_rev_plan *p, void *run, size_t A)
{
    clnode_status st = CLNODE_OK;
    const size_t S = (size_t)p->job->KI->stages;
    for (size_t i = 0; i < S && st == CLNODE_OK; ++i)
        st = p->ops->stage(run, i, A);
    return st;
}

/* Group q of the steps begins at reverse step q every: its states recomputed forwards from its
 * kept one into the segment (rows whose group is shorter compute steps they do not keep). */
static clnode_status rs_recompute(const cln_rev_plan *p, void *run, size_t A, size_t q)
{
    const cln_rev_ops *ops = p->ops;
    const size_t E = p->seg_len;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ops->group(run, A, q));
    for (size_t j = 0; j + 1 < E; ++j) {
        CLN_TRY(st, ops->begin(run, A, CLN_REV_SUB, 0, q, j));
        CLN_TRY(st, rs_stages(p, run, A));
        CLN_TRY(st, ops->y1(run, A, q, j));
    }
fail:
    return st;
}

/* Reverse step s of rows [0, A): from the cotangent of each row's y_{n+1} to that of its y_n. */
static clnode_status rs_step(const cln_rev_plan *p, void *run, size_t A, size_t s)
{
    const cln_rev_ops *ops = p->ops;
    const size_t every = p->job->every, S = (size_t)p->job->KI->stages;
    clnode_status st = CLNODE_OK;
    if (every > 1 && s % every == 0)
        CLN_TRY(st, rs_recompute(p, run, A, s / every));
    CLN_TRY(st, ops->begin(run, A, every > 1 ? CLN_REV_SEG : CLN_REV_KEPT, s, 0, 0));
    CLN_TRY(st, rs_stages(p, run, A));
    CLN_TRY(st, ops->events(run, A, s));
    for (size_t i = S; i-- > 0;)
        CLN_TRY(st, ops->stage_vjp(run, i, A));
    CLN_TRY(st, ops->sums(run, A, s));
    CLN_TRY(st, ops->next(run, A));
fail:
    return st;
}

/* The run's Bg trajectories of blocks [k0, k0 + nk) in their order (*M: their steps), set up. */
static clnode_status rs_open(const cln_rev_plan *p, void *run, size_t k0, size_t nk, size_t *Bg,
                             size_t **M)
{
    const size_t b0 = k0 * CLN_REV_BLOCK, end = (k0 + nk) * CLN_REV_BLOCK;
    size_t *traj = NULL;
    clnode_status st = CLNODE_OK;
    *Bg = (end < p->job->B ? end : p->job->B) - b0;
    CLN_TRY(st, p->ops->rows(run, k0, nk, *Bg, &traj, M));
    CLN_CHECK(p->ctx, cln_rev_order(p->job, b0, *Bg, traj, *M), CLNODE_ERR_OUT_OF_MEMORY,
              "cannot order %zu trajectories", *Bg);
    CLN_TRY(st, p->ops->setup(run, *Bg));
fail:
    return st;
}

clnode_status cln_rev_schedule(const void *arg, void *run, size_t k0, size_t nk)
{
    const cln_rev_plan *p = arg;
    const cln_rev_ops *ops = p->ops;
    size_t Bg = 0, *M = NULL;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, rs_open(p, run, k0, nk, &Bg, &M));
    size_t A = Bg;
    while (A > 0 && M[A - 1] == 0) /* no step: the saved points of y0 alone */
        --A;
    CLN_TRY(st, ops->finish(run, A, Bg));
    for (size_t s = 0; A > 0; ++s) {
        CLN_TRY(st, rs_step(p, run, A, s));
        const size_t A0 = A;
        while (A > 0 && M[A - 1] == s + 1)
            --A;
        CLN_TRY(st, ops->finish(run, A, A0));
    }
    CLN_TRY(st, ops->results(run));
fail:
    return st;
}

clnode_status cln_rev_bare(const void *arg, void *run, size_t k0, size_t nk)
{
    const cln_rev_bare_plan *bp = arg;
    const cln_rev_plan *p = &bp->plan;
    const cln_rev_ops *ops = p->ops;
    size_t A = 0, *M = NULL;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, rs_open(p, run, k0, nk, &A, &M));
    for (long e = 0; e < bp->steps; ++e) { /* the last step of every row, again and again */
        CLN_TRY(st, ops->begin(run, A, CLN_REV_KEPT, 0, 0, 0));
        CLN_TRY(st, rs_stages(p, run, A));
        for (size_t i = (size_t)p->job->KI->stages; i-- > 0;)
            CLN_TRY(st, ops->stage_vjp(run, i, A));
        CLN_TRY(st, ops->sums(run, A, 0));
    }
    CLN_TRY(st, ops->results(run));
fail:
    return st;
}
