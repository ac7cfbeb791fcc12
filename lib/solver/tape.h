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
    double (*round)(clnode_precision, double); /* a value rounded to the state precision */
} cln_tape_src;

/* The tape of a solve of B trajectories of dimension N, in the caller's order: trajectory b took
 * steps[b] accepted steps, ending at ts[b * ts_cap + m] (t), and its kept states (one per
 * checkpoint group but the first, whose start is y0: the states after steps
 * M - (ceil(M / every) - 1 - j) every - 1, j = 0, 1 ...) are at kept[(kept_off[b] + j) N ...]. */
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

#endif /* CLN_TAPE_H */
