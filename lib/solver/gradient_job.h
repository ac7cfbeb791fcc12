/* gradient_job.h - the pieces of the reverse pass's driver (gradient.c) that the tangent pass's
 * (tangent.c) shares: the checks of a kept solve, the job of its tape, model and saved points. */
#ifndef CLN_GRADIENT_JOB_H
#define CLN_GRADIENT_JOB_H

#include "backends/backend.h"
#include "solver/gradient_tree.h"

/* What the job points to that the driver allocates. */
typedef struct cln_rev_run {
    cln_rev_job job;
    void *K;
    void *params; /* every weight, bias and the scale in the state precision, one block */
    size_t *off_ev;
    cln_rev_event *ev;
} cln_rev_run;

/* Frees what r points to (not r). */
void cln_rev_run_free(cln_rev_run *r);

/* The solution kept a tape, of this model, and its tf32 products can be recomputed on ctx's
 * device; errors name the entry point fn. */
clnode_status cln_rev_check_tape(clnode_context *ctx, const clnode_model *model,
                                 const clnode_solution *sol, const char *fn);

/* The parameters' layout (clnode_gradient_params) into the job and g; returns their count. */
size_t cln_rev_layout(const clnode_model *m, cln_rev_job *job, clnode_gradient *g);

/* The job's tape, sizes and cotangents (cot may be NULL for a pass without them). */
void cln_rev_job_tape(const clnode_model *m, const clnode_solution *sol, size_t slots,
                      const double *cot, cln_rev_job *job);

/* The job's constants and parameters in the state precision (job->ntheta and its offsets set). */
clnode_status cln_rev_fill(clnode_context *ctx, const clnode_model *m, const clnode_solution *sol,
                           cln_rev_run *r);

/* Where each saved point of each trajectory is (cln_rev_event, in its row's order). */
clnode_status cln_rev_events(clnode_context *ctx, const clnode_solution *sol, size_t slots,
                             size_t **off_ev, cln_rev_event **ev);

/* Every trajectory's points fit in slots (errors name fn and count from trajectory first). */
clnode_status cln_rev_check_slots(clnode_context *ctx, const clnode_solution *sol, size_t slots,
                                  size_t first, const char *fn);

/* The refusal of a cotangent that is not finite (trajectory b, slot k, component n, value v),
 * named as clnode_gradient_compute names it, under the entry point fn. */
clnode_status cln_rev_cot_fail(clnode_context *ctx, const char *fn, size_t b, size_t k, size_t n,
                               double v);

/* The caller's device arrays of clnode_gradient_compute_device (lib/solver/gradient_device.c),
 * for a backend whose reverse pass takes them (rev_device_arrays): buffers and element
 * offsets (cln_rev_job's cot_dev ...). */
typedef struct cln_rev_dev {
    cln_buf *cot, *ybar, *cbar;
    size_t cot_off, ybar_off, cbar_off;
} cln_rev_dev;

/* The reverse pass of clnode_gradient_compute from trajectory `first` (a whole block), its tree
 * of block sums left in *runs (NULL: folded into the result's parameters); with dev, the
 * cotangents read from and the rows of y0's and the inputs' gradients written into the caller's
 * device arrays (cot NULL then: the caller checked them; the result's y0 and inputs unwritten). */
clnode_status cln_rev_compute(clnode_context *ctx, const clnode_model *model,
                              const clnode_gradient_options *opts, const clnode_solution *sol,
                              size_t slots, const double *cot, size_t first, cln_rev_tree *runs,
                              const cln_rev_dev *dev, clnode_gradient **out);

#endif /* CLN_GRADIENT_JOB_H */
