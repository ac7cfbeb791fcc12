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
    const double *K;        /* the solve's cln_consts, as doubles */
    const cln_iconsts *KI;  /* and its cln_iconsts */
    size_t every;           /* checkpoint_every */
    const clnode_problem *p;
    const double *tau0;     /* B: each trajectory's start as tau, in the state precision */
    double (*round)(clnode_precision, double); /* a value rounded to the state precision */
} cln_tape_src;

/* The tape of solution s, whose saved steps (s->count, ts, ys of CLNODE_SAVE_STEPS) hold every
 * accepted step of every trajectory, in the caller's order. */
clnode_status cln_tape_build(clnode_context *ctx, const cln_tape_src *src, const clnode_solution *s,
                             cln_tape **out);

#endif /* CLN_TAPE_H */
