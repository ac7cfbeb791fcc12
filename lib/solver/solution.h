/* solution.h - the solution object, shared by the driver that fills it (solver.c) and the
 * accessors that lay its points out (layout.c). */
#ifndef CLN_SOLUTION_H
#define CLN_SOLUTION_H

#include <stddef.h>

#include "clnode/solver.h"

struct clnode_solution {
    size_t B, N;
    double dir;                     /* the batch's direction of integration: +1 or -1 */
    long syncs;                     /* host-device synchronisations made by the solve */
    clnode_trajectory_stats *stats; /* B */
    double *y_final;                /* B x N */
    size_t cap[4];    /* points per trajectory, per clnode_save_kind: for the steps, the most
                         points a trajectory saved (rows are packed to it after the solve) */
    size_t *count[4]; /* B each, for every kind saved (NULL: not saved) */
    size_t *first_ts; /* B: index in save_ts of each trajectory's first saved time */
    double *ts[4];    /* B x cap */
    double *ys[4];    /* B x cap x N */
};

#endif /* CLN_SOLUTION_H */
