/* solver_internal.h - what the files of the solve share (not installed): the run of one solve
 * (cln_run), the layout structs as the driver fills them, and the functions one file defines for
 * another. The solve by concern:
 *   solver.c          the driver: the phases of a solve, the steps, the loop, clnode_solve
 *   solver_check.c    the problem checked (Phase 0), the values in the state precision
 *   solver_setup.c    the solve's buffers, its state rows and constants, the saved rows read back
 *   solver_save.c     the solution and its accessors, the saved steps' growth, the read-back
 *   solver_compact.c  active-set compaction, and the solution's rows put back in order
 *   solver_device.c   a solve from and into the caller's device arrays (clnode_solve_device)
 *   tape.c            the tape of a kept solve (keep_tape)
 */
#ifndef CLN_SOLVER_INTERNAL_H
#define CLN_SOLVER_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "cln_layout.h"
#include "model/model.h"
#include "precision/probe_internal.h"
#include "solver/options.h"
#include "solver/solution.h"
#include "solver/tape.h"

/* The layout structs of cl/cln_layout.h as the driver fills and reads them: in double, rounded
 * to the state precision member by member (as arrays of doubles, which they are laid out as). */
typedef CLN_CONSTS_STRUCT(double) cln_consts_d;
typedef CLN_RSTATE_STRUCT(double) cln_rstate_d;
#define CLN_CONSTS_REALS (sizeof(cln_consts_d) / sizeof(double))
#define CLN_RSTATE_REALS (sizeof(cln_rstate_d) / sizeof(double))
_Static_assert(sizeof(int) == sizeof(int32_t), "the layout's int structs hold 32-bit ints");
_Static_assert(sizeof(cln_consts_d) % sizeof(double) == 0, "cln_consts holds reals only");
_Static_assert(sizeof(cln_rstate_d) % sizeof(double) == 0, "cln_rstate holds reals only");
_Static_assert(CLN_MAX_STAGES == CLNODE_MAX_STAGES && CLN_DENSE_COEFFS == CLNODE_DENSE_COEFFS,
               "the layout holds any method the public header allows");
_Static_assert(CLN_DENSE_LINEAR == CLNODE_INTERP_LINEAR &&
                   CLN_DENSE_HERMITE == CLNODE_INTERP_HERMITE &&
                   CLN_DENSE_MIDPOINT == CLNODE_INTERP_MIDPOINT &&
                   CLN_DENSE_TSIT5 == CLNODE_INTERP_TSIT5 &&
                   CLN_DENSE_POLYNOMIAL == CLNODE_INTERP_POLYNOMIAL,
               "the kernels' dense-output forms are clnode_interpolation's");
_Static_assert(CLN_RESULT_SUCCESS == CLNODE_RESULT_SUCCESS &&
                   CLN_RESULT_MAX_STEPS == CLNODE_RESULT_MAX_STEPS_REACHED &&
                   CLN_RESULT_DT_MIN == CLNODE_RESULT_DT_MIN_REACHED &&
                   CLN_RESULT_NONFINITE == CLNODE_RESULT_NONFINITE &&
                   CLN_RESULT_PRECISION_FLOOR == CLNODE_RESULT_PRECISION_FLOOR,
               "the kernels' results are clnode_result's");

/* Trajectories whose time the progress report reads (one read-back of their state rows). */
#define CLN_PROGRESS_ROWS 64

typedef struct cln_run {
    clnode_context *ctx;
    cln_backend *be;
    const clnode_model *model;
    const clnode_solve_options *o;
    const clnode_problem *p; /* the batch, y0 and the per-trajectory data */
    const clnode_method *m;
    cln_solve_dev sd;
    size_t maxw;         /* the widest layer output: rows of H */
    double dir;          /* the direction of integration: tau = dir * t */
    void *progress_rows; /* staging for the progress read-back, allocated up front */
    int begun;           /* solve_begin succeeded */
    /* active-set compaction (cln_compact), with its staging allocated up front: */
    int compact;         /* the options ask for it and the backend can swap rows */
    size_t *perm;        /* Breal: the trajectory whose state row r holds */
    cln_istate *is_rows; /* Breal: the integer state rows read back to find the frozen ones */
    int32_t *pairs;      /* Breal: the row pairs to swap, (i, j) each */
    long compactions;    /* compactions made (statistics for the log) */
    /* the saved steps (save_steps): room for steps_cap points per trajectory, the row stride of
     * STT and STY (KI.steps_cap), grown as the solve takes steps (cln_grow_steps) */
    size_t steps_cap;
    int dev_steps;  /* the device saves every accepted step: save_steps, or keep_tape */
    cln_iconsts KI; /* the integer constants as uploaded to CI (written whole again on growth) */
} cln_run;

/* The saved steps' first capacity, when the solver chooses it: a few groups of steps (most
 * solves of a batch take tens of steps: room for them at once, and growth by doubling after). */
#define CLN_STEPS_CAP_FIRST 32

/* ---- solver_check.c ---- */

/* Trajectory b's start, end and first step as given (the problem's per-trajectory arrays, else
 * the options'), and the batch's direction: -1 when some trajectory integrates backwards, else
 * +1. */
double cln_t0(const clnode_solve_options *o, const clnode_problem *p, size_t b);
double cln_t1(const clnode_solve_options *o, const clnode_problem *p, size_t b);
double cln_dt0_of(const clnode_solve_options *o, const clnode_problem *p, size_t b);
double cln_direction(const clnode_solve_options *o, const clnode_problem *p);
/* x rounded to the solve's precision; the first step |dt0| of a trajectory in the state precision,
 * after dtmin/dtmax clipping. */
double cln_round(clnode_precision p, double x);
double cln_first_step(const clnode_solve_options *o, clnode_precision p, double dt0_in);
/* Every check of the problem before anything is allocated (Phase 0 with the guard). device: a
 * solve from device arrays (solver_device.c), whose p holds no arrays but the host's
 * per-trajectory times: the values of y0, the inputs and the save times are not read. */
clnode_status cln_validate(clnode_context *ctx, const clnode_model *model,
                           const clnode_solve_options *o, const clnode_problem *p, int device);
/* `n` doubles rounded to the solve's precision to element `off` of buf; `n` elements from element
 * `off` of buf into doubles. */
clnode_status cln_upload(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
                         const double *src, size_t n);
clnode_status cln_download(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
                           double *dst, size_t n);
/* diffrax's t1_clip_floor: t1 stepped 100 times towards -inf. */
double cln_clip_floor(clnode_precision p, double tau1);

/* ---- solver.c: the phases, which solver_device.c runs too ---- */

/* Phase 0 (device: the problem's arrays are the caller's device arrays, not read), 1 (sizes),
 * 2 (buffers), 3 (the model and constants; the state rows), 4 (begin) and 5 (the loop). */
clnode_status cln_check(clnode_context *ctx, const clnode_model *model,
                        const clnode_solve_options *o, const clnode_problem *p, int device);
/* The refusal of save time j (of trajectory b's row with save_ts_per_trajectory; b 0 for a
 * shared list), t, for `why` (cl/cln_layout.h: CLN_TS_*; `before` the time before it), as
 * clnode_solve words it. */
clnode_status cln_save_time_fail(clnode_context *ctx, const clnode_solve_options *o,
                                 const clnode_problem *p, size_t b, size_t j, int why, double t,
                                 double before);
clnode_status cln_size(cln_run *r);
clnode_status cln_allocate(cln_run *r);
clnode_status cln_upload_model(cln_run *r);
clnode_status cln_upload_rows(cln_run *r);
clnode_status cln_begin(cln_run *r);
clnode_status cln_loop(cln_run *r);

/* ---- solver_setup.c ---- */

/* A buffer of the solve (released by cln_release with every other). */
clnode_status cln_alloc(cln_run *r, cln_buf **out, size_t n_elems, size_t esize);
void cln_release(cln_run *r);
/* Each trajectory's problem into its state row, and the per-solve constants. */
void cln_problem_rows(const cln_run *r, cln_rstate_d *rows);
void cln_fill_constants(const cln_run *r, cln_consts_d *K, cln_iconsts *KI);
/* The first `cap` points of every row of a saved-steps buffer (STT: width 1, STY: width N) into
 * dst (Breal x cap x width doubles, device row order), packed on the device first. */
clnode_status cln_download_rows(cln_run *r, cln_buf *src, size_t width, size_t cap, double *dst);

/* ---- solver_save.c ---- */

/* Phase 6: the solution, every result read back; the saved steps' growth between two groups of
 * steps. */
clnode_status cln_collect(cln_run *r, clnode_solution **out);
/* A trajectory's statistics from its final state rows. */
void cln_fill_stats(const cln_run *r, clnode_trajectory_stats *t, const cln_rstate_d *rs,
                    const cln_istate *is);
clnode_status cln_grow_steps(cln_run *r, long it, long group);

/* ---- solver_compact.c ---- */

/* After compaction, the solution's rows back to their trajectories; compaction of the active
 * rows between two groups of steps. */
clnode_status cln_unpermute_solution(const cln_run *r, clnode_solution *s);
clnode_status cln_compact(cln_run *r, size_t active);

/* ---- tape.c ---- */

/* keep_tape: the tape from every trajectory's saved steps, thinned on the device before they are
 * read back (is: the integer state rows in device row order; steps: the most steps a row saved). */
clnode_status cln_keep_tape(cln_run *r, clnode_solution *s, const cln_istate *is, size_t steps);

#endif /* CLN_SOLVER_INTERNAL_H */
