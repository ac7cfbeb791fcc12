/* tape.h - building what a kept solve holds for the reverse pass (lib/solver/tape.c). */
#ifndef CLN_TAPE_H
#define CLN_TAPE_H

#include "solver/solution.h"

/* What the driver knows of a kept solve besides its solution. */
typedef struct cln_tape_src {
    clnode_precision prec;
    clnode_gemm_mode gemm_mode;
    const clnode_method *method;
    const clnode_model *model;
    const char *backend;
    int tf32_kind; /* cln_tf32_kind of the backend's ops */
    double dir;
    const double *K;       /* the solve's cln_consts, as doubles */
    const cln_iconsts *KI; /* and its cln_iconsts */
    size_t every;          /* checkpoint_every */
    const clnode_problem *p;
    const double *tau0; /* B: each trajectory's start as tau, in the state precision */
    const size_t *ts_first, *ts_count; /* B each: the run of save times each trajectory saved
                                          (clnode_solution's); NULL without save times */
    double (*round)(clnode_precision, double); /* a value rounded to the state precision */
} cln_tape_src;

/* The tape of a solve of B trajectories of dimension N, in the caller's order: trajectory b took
 * steps[b] accepted steps, ending at ts[b * ts_cap + m] (t), and its kept states (one per
 * checkpoint group but the first, whose start is y0: the states after steps
 * M - (ceil(M / every) - 1 - j) every - 1, j = 0, 1 ...) are at kept[(kept_off[b] + j) N ...];
 * the step each saved time belongs to is recorded in it (cln_tape.ts_step). */
clnode_status cln_tape_build(clnode_context *ctx, const cln_tape_src *src, size_t B, size_t N,
                             const size_t *steps, const double *ts, size_t ts_cap,
                             const double *kept, const size_t *kept_off, cln_tape **out);

/* Whether sol kept a tape, of `model` (the same object): else CLNODE_ERR_INVALID_ARGUMENT with a
 * message that begins with fn. */
clnode_status cln_tape_check(clnode_context *ctx, const char *fn, const clnode_model *model,
                             const clnode_solution *sol);

/* The bytes of tape t (clnode_solution_kept_bytes), from its offsets and sizes, in *out; 0 on
 * overflow. */
int cln_tape_bytes(const cln_tape *t, size_t *out);

/* The step each trajectory's saved times belong to (cln_tape.ts_step, allocated here), from the
 * tape's step ends and save times and each trajectory's run of saved times [first[b], first[b] +
 * count[b]) (first NULL: from 0), by the rule the solve saved them with (CLN_TS_STEP_LOOP): a
 * kept solve records them when it ends, an imported tape when it is read. 0 when out of memory;
 * nothing to do without save times. */
int cln_tape_ts_steps(cln_tape *t, const size_t *first, const size_t *count);

#endif /* CLN_TAPE_H */
