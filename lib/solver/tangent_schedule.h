/* tangent_schedule.h - the tangent pass's schedule, written once over the backends' per-step
 * tangent operations (cln_tan_ops, backend.h). */
#ifndef CLN_TANGENT_SCHEDULE_H
#define CLN_TANGENT_SCHEDULE_H

#include "backends/backend.h"

/* What a run of the schedule reads: the chunk's job and its backend's per-step operations. */
typedef struct cln_tan_plan {
    clnode_context *ctx;
    const cln_tan_job *job;
    const cln_tan_ops *ops;
} cln_tan_plan;

/* The schedule (a cln_rev_run_fn; arg: a cln_tan_plan): blocks [k0, k0 + nk) of the job on
 * `run`. Its trajectories ordered by their steps, most first (equal steps by index: the reverse
 * pass's order), aligned at their first step: step n takes the rows with more than n steps, from
 * y_n (y0 from the tape) to y_{n+1}; per step the saved points of y_n, the times, the stages in
 * order each followed by its tangents, y_{n+1} and its tangents, the dense outputs inside the
 * step; a row whose steps are done has its last saved points and leaves. Every row's tangents
 * are its own: the order of the rows changes none of their bits. */
clnode_status cln_tan_schedule(const void *arg, void *run, size_t k0, size_t nk);

#endif /* CLN_TANGENT_SCHEDULE_H */
