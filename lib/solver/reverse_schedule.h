/* reverse_schedule.h - the reverse pass's schedule, written once over the backends' per-step
 * reverse operations (cln_rev_ops, backend.h). */
#ifndef CLN_REVERSE_SCHEDULE_H
#define CLN_REVERSE_SCHEDULE_H

#include "backends/backend.h"

/* What a run of the schedule reads: the job and its backend's per-step operations. */
typedef struct cln_rev_plan {
    clnode_context *ctx;
    const cln_rev_job *job;
    const cln_rev_ops *ops;
    size_t seg_len; /* the steps of a checkpoint group: cln_rev_seg_len */
} cln_rev_plan;

/* Trajectories [b0, b0 + Bg) of a job in the order of clnode/gradient.h's blocks (most steps
 * first, equal steps by index): traj[p] (from b0) and its steps M[p]; 0 when out of memory. */
int cln_rev_order(const cln_rev_job *job, size_t b0, size_t Bg, size_t *traj, size_t *M);

/* The plan of a job on the per-step operations `ops` (rev_begin's). */
void cln_rev_plan_init(cln_rev_plan *p, clnode_context *ctx, const cln_rev_job *job,
                       const cln_rev_ops *ops);

/* The schedule (a cln_rev_run_fn; arg: a cln_rev_plan): blocks [k0, k0 + nk) of the job on
 * `run`, in clnode/gradient.h's order. Its trajectories ordered by their steps, most first (equal
 * steps by index), aligned at their last step: reverse step s takes the rows with more than s
 * steps, each at its step M - 1 - s; with checkpoint_every > 1 each group of steps is recomputed
 * forwards from its kept state when it begins; per step the state, the stages, the saved points,
 * the stages' vector-Jacobian products from the last, the weight sums; a row that is back at its
 * start is finished. */
clnode_status cln_rev_schedule(const void *arg, void *run, size_t k0, size_t nk);

/* The bare run of the schedule (clnode_bench_vjp_loop): a plan whose job has one step per
 * trajectory, and the times that step is repeated. */
typedef struct cln_rev_bare_plan {
    cln_rev_plan plan;
    long steps;
} cln_rev_bare_plan;

/* The schedule's reverse step without its tape's walk (a cln_rev_run_fn; arg: a
 * cln_rev_bare_plan): blocks [k0, k0 + nk) ordered and set up as cln_rev_schedule does, then
 * `steps` times the step of every row (its state, its stages, their vector-Jacobian products
 * from the last, the weight sums), then the blocks' sums; no saved point, no row finished. */
clnode_status cln_rev_bare(const void *arg, void *run, size_t k0, size_t nk);

#endif /* CLN_REVERSE_SCHEDULE_H */
