/* tangent_schedule.c - the tangent pass's schedule (tangent_schedule.h), the one statement of
 * the order of its steps on every backend. */
#include "solver/tangent_schedule.h"
#include "solver/reverse_schedule.h"

/* Step n of rows [0, A): from y_n and its tangents to y_{n+1} and theirs. */
static clnode_status ts_step(const cln_tan_plan *p, void *run, size_t A, size_t n)
{
    const cln_tan_ops *ops = p->ops;
    const size_t S = (size_t)p->job->rev->KI->stages;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ops->begin(run, A, n));
    for (size_t i = 0; i < S; ++i) {
        CLN_TRY(st, ops->stage(run, i, A));
        CLN_TRY(st, ops->stage_jvp(run, i, A));
    }
    CLN_TRY(st, ops->y1(run, A));
    CLN_TRY(st, ops->dense(run, A, n));
    CLN_TRY(st, ops->next(run, A));
fail:
    return st;
}

clnode_status cln_tan_schedule(const void *arg, void *run, size_t k0, size_t nk)
{
    const cln_tan_plan *p = arg;
    const cln_tan_ops *ops = p->ops;
    const cln_rev_job *job = p->job->rev;
    const size_t b0 = k0 * CLN_REV_BLOCK, end = (k0 + nk) * CLN_REV_BLOCK;
    const size_t Bg = (end < job->B ? end : job->B) - b0;
    size_t *traj = NULL, *M = NULL;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, ops->rows(run, k0, nk, Bg, &traj, &M));
    CLN_CHECK(p->ctx, cln_rev_order(job, b0, Bg, traj, M), CLNODE_ERR_OUT_OF_MEMORY,
              "cannot order %zu trajectories", Bg);
    CLN_TRY(st, ops->setup(run, Bg));
    size_t A = Bg;
    for (size_t n = 0; A > 0; ++n) {
        CLN_TRY(st, ops->points(run, A, n));
        while (A > 0 && M[A - 1] == n) /* its steps are done: y_n was its last point */
            --A;
        if (A > 0)
            CLN_TRY(st, ts_step(p, run, A, n));
    }
    CLN_TRY(st, ops->results(run));
fail:
    return st;
}
