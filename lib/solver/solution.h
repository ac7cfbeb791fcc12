/* solution.h - the solution object, shared by the driver that fills it (solver.c,
 * solver_save.c) and the accessors that lay its points out (layout.c). */
#ifndef CLN_SOLUTION_H
#define CLN_SOLUTION_H

#include <stddef.h>
#include <stdint.h>

#include "clnode/solver.h"
#include "cln_layout.h"

/* What a solve with keep_tape holds for the reverse pass (lib/solver/gradient.c), in the state
 * precision (esize bytes a value), trajectory by trajectory in the caller's order: trajectory b's
 * M_b = off_t[b + 1] - off_t[b] - 1 accepted steps end at tau[off_t[b] + m + 1] (tau =
 * direction * t; tau[off_t[b]] is its start), and its states at the starts of the steps
 * max(0, M_b - (q + 1) every), q = 0 .. ceil(M_b / every) - 1, are ys[(off_y[b] + q) N ...]: the
 * first state of each group of `every` steps counted from the last step (the reverse pass goes
 * through a group from its kept state). */
typedef struct cln_tape {
    clnode_precision prec;
    clnode_gemm_mode gemm_mode;
    size_t esize;
    const clnode_method *method;
    const void *model;               /* the model solved (identity only) */
    unsigned long long model_serial; /* and its serial */
    char backend[16];                /* the forward's backend (cln_backend_ops.name) */
    int tf32_kind;                   /* and its GEMM's tf32 kind (cln_tf32_kind, backend.h) */
    size_t B, N, n_in, n_ts, every;
    int ts_per_traj;
    double K[sizeof(CLN_CONSTS_STRUCT(double)) / sizeof(double)]; /* the solve's cln_consts */
    cln_iconsts KI;                                                /* and cln_iconsts */
    size_t *off_t, *off_y; /* B + 1 each */
    void *tau, *ys;
    void *inputs; /* B x n_in: each trajectory's conditioning inputs; NULL without */
    void *ts;     /* the save times as tau: n_ts, or B x n_ts with ts_per_traj; NULL without */
    /* B x n_ts: the step (0 .. M_b - 1) whose dense output saved trajectory b's point at save
     * time j, recorded with the tape (the rule of CLN_TS_STEP_LOOP), -1 for a time it did not
     * save or a trajectory of no step; NULL without save times. The reverse pass reads it. */
    int32_t *ts_step;
    size_t bytes; /* clnode_solution_kept_bytes */
} cln_tape;

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
    cln_tape *tape;   /* keep_tape: what the reverse pass needs; NULL otherwise */
};

/* Frees a tape (accepts NULL). */
void cln_tape_free(cln_tape *t);

/* Element i of a buffer of the tape's state precision (tau, ys, ts ...), as a double. */
double cln_tape_real(const cln_tape *t, const void *buf, size_t i);

/* The points per trajectory a solution has room for, per clnode_save_kind (0 for a kind not
 * saved; for CLNODE_SAVE_STEPS the largest count any trajectory saved; solver_save.c). */
size_t cln_solution_capacity(const clnode_solution *s, clnode_save_kind kind);

#endif /* CLN_SOLUTION_H */
