/* clnode/solver.h - solving a batch of initial value problems dy/dt = MLP(y) from t0 to t1.
 *
 * Semantics follow diffrax 0.7.2 (diffeqsolve + PIDController + SaveAt) under jax.vmap: every
 * trajectory of a batch has its own step sizes, accept/reject decisions, controller history and
 * counters; a finished or failed trajectory is frozen and does not disturb the others.
 */
#ifndef CLNODE_SOLVER_H
#define CLNODE_SOLVER_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/method.h"
#include "clnode/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Progress callback, called between groups of steps (never per step) when a solve has run for
 * about a second or more. `fraction` is the smallest fraction of [t0, t1] covered by any active
 * trajectory. Return 0 to continue, non-zero to cancel (clnode_solve then returns
 * CLNODE_ERR_CANCELLED). */
typedef int (*clnode_progress_fn)(void *user, size_t active, size_t batch, double fraction,
                                  long steps_taken);

/* Cancellation callback, polled between groups of steps from the first group on (on the host after
 * every step, on devices after every read-back of the active count), so that even a short solve
 * can be interrupted. It runs on the thread that called
 * clnode_solve and must be cheap (read a flag). Return 0 to continue, non-zero to stop:
 * clnode_solve then returns CLNODE_ERR_CANCELLED, stores nothing and leaves the context usable. */
typedef int (*clnode_cancel_fn)(void *user);

/* What a solve does about a tolerance below what the device's arithmetic resolves. */
typedef enum clnode_precision_guard {
    /* Before the solve, compare rtol with the unit roundoff u measured by the GEMM probe of
     * (device, precision, GEMM mode) (clnode/probe.h; run once per context and cached): warn
     * through the logger when rtol < CLNODE_GUARD_FACTOR u. While it runs, end a trajectory
     * whose error estimate is stuck at the rounding floor with CLNODE_RESULT_PRECISION_FLOOR,
     * and log one warning per solve naming the device, the GEMM mode and the count. */
    CLNODE_GUARD_WARN = 0,
    /* As WARN, but refuse the solve (CLNODE_ERR_PRECISION) instead of warning before it. */
    CLNODE_GUARD_REFUSE = 1,
    /* No probe, no check, no floor detection: exactly diffrax's step sequence, whatever the
     * arithmetic does. */
    CLNODE_GUARD_OFF = 2,
} clnode_precision_guard;

/* rtol below this many unit roundoffs u of the GEMM is below what the arithmetic resolves: the
 * guard warns (or refuses) when rtol < CLNODE_GUARD_FACTOR u (doc/precision.md says how the factor
 * was chosen; test_probe.c:test_guard checks the bound in fp32 strict). */
#define CLNODE_GUARD_FACTOR 16.0

/* The largest max_steps (the kernels count attempts in 32-bit integers): max_steps lies in
 * [1, CLNODE_MAX_STEPS_LIMIT] = [1, 2147483647], whatever is saved. */
#define CLNODE_MAX_STEPS_LIMIT 2147483647L

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_solve_default_options or clnode_solve_seed_options, then change what you need. */
typedef struct clnode_solve_options {
    size_t struct_size; /* sizeof(clnode_solve_options) where the program was compiled: set by the
                           defaults functions; the library reads only the fields it covers */
    const clnode_method *method; /* default clnode_method_tsit5 */
    clnode_precision precision;  /* default CLNODE_FP32 */
    clnode_gemm_mode gemm_mode;  /* default CLNODE_GEMM_STRICT */
    double t0;                   /* default 0 */
    double t1;                   /* default 1; t1 < t0 integrates backwards */
    double dt0;        /* first step size, same sign as t1 - t0; 0 (default) means 0.01 * sign,
                          what diffrax 0.7.2 uses for dt0=None */
    int constant_step; /* 0 (default): PID controller; 1: constant steps of dt0 */
    double rtol;       /* default 1e-3 */
    double atol;       /* default 1e-6 */
    double pcoeff;     /* default 0 */
    double icoeff;     /* default 1 */
    double dcoeff;     /* default 0 */
    double dtmin;      /* default 0: none; otherwise a positive lower bound on |dt| */
    double dtmax;      /* default 0: none; otherwise a positive upper bound on |dt| */
    int force_dtmin;   /* default 1: at dtmin, accept the step anyway; 0: end with dt_min_reached */
    double factormin;  /* default 0.2 */
    double factormax;  /* default 10 */
    double safety;     /* default 0.9 */
    long max_steps;    /* default 4096: attempts (accepted + rejected) per trajectory, in
                          [1, CLNODE_MAX_STEPS_LIMIT] */
    int save_t0;       /* default 0: save (t0, y0) */
    int save_t1;       /* default 1: save (t1, y(t1)) */
    int save_steps;    /* default 0: save the end of every accepted step (memory: as many
                          points per trajectory as the longest trajectory saves, not max_steps;
                          see clnode_solve) */
    clnode_progress_fn progress; /* default NULL */
    void *progress_user;
    clnode_precision_guard precision_guard; /* default CLNODE_GUARD_WARN */
    clnode_cancel_fn cancel;                /* default NULL: never cancelled */
    void *cancel_user;

    int compact; /* default 1: trajectories that have finished (or failed) leave the batch's
                    matrix products: every few groups of steps the rows still running are
                    gathered at the front of the batch, so that the cost of a solve follows its
                    running trajectories. Results, step counts and the order of the solution do
                    not change (rows are independent). 0: every row stays in every product to
                    the end (for comparisons). */
} clnode_solve_options;

/* Fills `opts` with the documented defaults, struct_size included. A macro: it passes the size of
 * the struct the program was compiled with to clnode_solve_default_options_sized. */
#define clnode_solve_default_options(opts)                                                         \
    clnode_solve_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_solve_default_options_sized(clnode_solve_options *opts, size_t struct_size);

/* The defaults with the seed experiment's interval and tolerances: t in [0, 50], dt0 = 0.02,
 * rtol 1e-4, atol 1e-6 (tsit5, fp32) -- the problem of clnode_model_create_seed from y0 = 0, which
 * takes 12 steps at every batch size on every device (test_abi.c:test_old_program_solves,
 * test_opencl_faults.c, test_bench.c). A macro, as clnode_solve_default_options. */
#define clnode_solve_seed_options(opts) clnode_solve_seed_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_solve_seed_options_sized(clnode_solve_options *opts, size_t struct_size);

/* The problem a solve integrates: the batch, its initial states and the per-trajectory data,
 * passed beside the options (which configure how it is solved). Fields are only ever appended
 * (clnode/common.h): set the defaults (all NULL or 0) with clnode_problem_default, then set what
 * you need.
 * Ensembles: every trajectory its own problem, as jax.vmap over diffeqsolve's t0, t1, dt0 and
 * args would give. Each trajectory of a batch is solved exactly as it would be alone with its own
 * values (same steps, same bits). Per-trajectory intervals share ONE direction of integration:
 * t1s[b] - t0s[b] must not be negative for one trajectory and positive for another (t0s[b] ==
 * t1s[b] is allowed: no step). save_ts is one list shared by the batch, monotone in that
 * direction; a trajectory saves the times inside its own [t0, t1] and reports the others as
 * absent (clnode_solution_saved with CLNODE_SAVE_TS returns the times it saved, a contiguous run
 * of save_ts). Without t0s and t1s every save time must lie inside the options' [t0, t1]. */
typedef struct clnode_problem {
    size_t struct_size;    /* sizeof(clnode_problem) where the program was compiled: set by
                              clnode_problem_default; the library reads only the fields it covers */
    size_t batch;          /* trajectories, in [1, 2147483647] (test_abi.c checks the bounds) */
    const double *y0;      /* batch x dim initial states, row-major (converted to the state
                              precision) */
    const double *t0s;     /* default NULL: the options' t0 for every trajectory; else `batch` start
                              times */
    const double *t1s;     /* default NULL: the options' t1 for every trajectory; else `batch` end
                              times */
    const double *dt0s;    /* default NULL: the options' dt0 for every trajectory; else `batch`
                              first steps (0: 0.01 * sign, as the options' dt0; constant steps: the
                              step) */
    const double *inputs;  /* default NULL; batch x clnode_model_num_inputs(model) values,
                              row-major: each trajectory's conditioning inputs c (constant over
                              its solve; the network sees [y, c], or [y, t, c] with time input).
                              Required when the model has inputs, refused when it has none. */
    const double *save_ts; /* default NULL: n_save_ts times shared by the batch (SaveAt(ts=...)),
                              inside [t0, t1], monotone in the direction of integration, saved
                              through the dense output */
    size_t n_save_ts;
} clnode_problem;

/* Fills `p` with the defaults (every field 0 or NULL), struct_size included. A macro: it passes
 * the size of the struct the program was compiled with to clnode_problem_default_sized. */
#define clnode_problem_default(p) clnode_problem_default_sized((p), sizeof *(p))
CLNODE_API void clnode_problem_default_sized(clnode_problem *p, size_t struct_size);

/* Outcome of one trajectory. One list expands to the enum and the names (values 0 to
 * clnode_result_count() - 1, in this order). */
#define CLNODE_RESULT_LIST(X)                                                                      \
    X(CLNODE_RESULT_SUCCESS, 0, "success")                                                         \
    X(CLNODE_RESULT_MAX_STEPS_REACHED, 1, "max_steps_reached")                                     \
    /* only with force_dtmin = 0 */                                                                \
    X(CLNODE_RESULT_DT_MIN_REACHED, 2, "dt_min_reached")                                           \
    /* the vector field is not finite at the current state */                                      \
    X(CLNODE_RESULT_NONFINITE, 3, "nonfinite")                                                     \
    /* the error estimate is rounding noise: it rose while dt shrank, again and again (see         \
     * clnode_precision_guard) */                                                                  \
    X(CLNODE_RESULT_PRECISION_FLOOR, 4, "precision_floor")

typedef enum clnode_result {
#define CLNODE_X_ENUM(name, value, str) name = value,
    CLNODE_RESULT_LIST(CLNODE_X_ENUM)
#undef CLNODE_X_ENUM
} clnode_result;

/* The name of a result as the list above spells it ("success", ...); "unknown" otherwise. The
 * string is static. */
CLNODE_API const char *clnode_result_name(clnode_result result);

/* The number of results: every value from 0 to clnode_result_count() - 1 is one. */
CLNODE_API size_t clnode_result_count(void);

/* Fields are only ever appended (clnode/common.h); clnode_solution_stats passes the size. */
typedef struct clnode_trajectory_stats {
    clnode_result result;
    long num_steps; /* attempts: num_accepted + num_rejected */
    long num_accepted;
    long num_rejected;
    long num_rhs_evals; /* vector-field evaluations made for this trajectory */
    double t_final;     /* where the trajectory stopped (t1 on success) */
} clnode_trajectory_stats;

typedef struct clnode_solution clnode_solution;

/* Kinds of saved points. */
typedef enum clnode_save_kind {
    CLNODE_SAVE_T0 = 0,
    CLNODE_SAVE_TS = 1,
    CLNODE_SAVE_STEPS = 2,
    CLNODE_SAVE_T1 = 3,
} clnode_save_kind;

/* Solves the problem->batch trajectories of `model` from problem->y0 with the options `opts`
 * (NULL: the defaults) on the context's device.
 * Returns CLNODE_OK when the solve ran, even if some trajectories did not succeed (see their
 * stats); *out then holds the solution. Errors (nothing is stored in *out):
 * CLNODE_ERR_INVALID_ARGUMENT (a bad problem: NULL, no y0, batch out of range, save times
 * counted but not given, a struct_size this library does not know; bad options: rtol/atol <= 0 or
 * non-finite, dt0 of the wrong sign, save_ts outside [t0, t1] or not monotone, euler with the PID
 * controller, a struct_size this library does not know, per-trajectory intervals in both
 * directions, conditioning inputs missing or not expected, max_steps outside [1,
 * CLNODE_MAX_STEPS_LIMIT], values that do not mean what they say in the state precision (below),
 * ...; the message says which, and names the trajectory or index), CLNODE_ERR_NONFINITE_INPUT
 * (NaN/Inf in y0 or the conditioning inputs), CLNODE_ERR_UNSUPPORTED / CLNODE_ERR_NO_FP64
 * (precision or GEMM mode not available on the device), CLNODE_ERR_PRECISION (rtol below what the
 * device's GEMM resolves, with precision_guard = CLNODE_GUARD_REFUSE), CLNODE_ERR_OUT_OF_MEMORY,
 * CLNODE_ERR_DEVICE_MEMORY, CLNODE_ERR_DEVICE (a failed driver call: the message names it,
 * clnode_context_last_native_error has its code), CLNODE_ERR_BLAS, CLNODE_ERR_BUILD (the device's
 * compiler rejected the kernels; the build log goes to the logger). After any of these the context
 * stays usable: nothing of a failed solve is cached. Blocking. Memory: O(batch x (dim x stages +
 * widths + saved points)), allocated once, except the saved steps (save_steps): room for a few
 * groups of steps per trajectory at first, doubled on the device between groups of steps when the
 * longest trajectory could outgrow it (at most max_steps points), so their memory follows the steps
 * actually taken (at most about twice the most attempts of a trajectory); the solution keeps as
 * many points per trajectory as the longest trajectory saved (clnode_solution_saved). A large
 * max_steps costs nothing up front. The first adaptive solve of a (precision, GEMM mode) on a
 * context also runs the GEMM probe (a few small GEMMs) unless precision_guard is CLNODE_GUARD_OFF.
 * Values in the state precision: the solve rounds its inputs to the state precision, and refuses
 * (CLNODE_ERR_INVALID_ARGUMENT) the problems that rounding would change into another:
 * - fp32: a finite value beyond the float range (|x| >= 2^128 - 2^103, which rounds to an
 *   infinity) among t0, t1, dt0 (scalars or t0s, t1s, dt0s), the save times, y0, the conditioning
 *   inputs, the model's parameters (named by layer, element and, for a loaded file, tensor) and,
 *   for adaptive solves, rtol, atol, dtmin, dtmax, pcoeff, icoeff, dcoeff, factormax;
 * - t0 != t1 as given but equal once rounded (t0 == t1 as given stays a valid solve of no step);
 * - a positive dtmax that rounds to 0 (adaptive solves);
 * - a trajectory with t0 != t1 whose first step does not move t0: dt0 (0.01 when dt0 = 0;
 *   adaptive solves clip it to [dtmin, dtmax] first) rounded to the state precision and added to
 *   t0 in it gives t0 again. The step after a zero-length step has zero length too (the
 *   controller scales the step just taken), so such a solve would spend max_steps attempts
 *   without moving. The rule reads the first step only: a step that stops moving t later in a
 *   long interval ends the trajectory with max_steps_reached, as diffrax's does. */
CLNODE_API clnode_status clnode_solve(clnode_context *ctx, const clnode_model *model,
                                      const clnode_solve_options *opts,
                                      const clnode_problem *problem, clnode_solution **out);

/* Destroys a solution and sets *sol to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_solution_destroy(clnode_solution **sol);

CLNODE_API size_t clnode_solution_batch(const clnode_solution *sol);
CLNODE_API size_t clnode_solution_dim(const clnode_solution *sol);

/* How many times the solve waited for the device (reading the active count between groups of
 * steps, the frozen trajectories' flags when it compacts the batch (clnode_solve_options.compact),
 * and the results at the end); 0 on the host, where nothing needs waiting for. */
CLNODE_API long clnode_solution_syncs(const clnode_solution *sol);

/* Statistics of trajectory `traj` (< batch). Returns CLNODE_ERR_INVALID_ARGUMENT if out of range
 * or if *stats is larger than this library knows. A macro: it passes the size of the struct the
 * program was compiled with to clnode_solution_stats_sized, which writes only the fields it
 * covers. */
#define clnode_solution_stats(sol, traj, stats)                                                    \
    clnode_solution_stats_sized((sol), (traj), (stats), sizeof *(stats))
CLNODE_API clnode_status clnode_solution_stats_sized(const clnode_solution *sol, size_t traj,
                                                     clnode_trajectory_stats *stats,
                                                     size_t struct_size);

/* The final state of trajectory `traj` (dim values, valid for the life of the solution), or NULL
 * if traj is out of range. */
CLNODE_API const double *clnode_solution_y_final(const clnode_solution *sol, size_t traj);

/* Saved points of one kind for trajectory `traj`: *n points, times in *ts and states (n x dim,
 * row-major) in *ys, valid for the life of the solution (NULL may come with *n = 0). Points that
 * were requested but never reached (a trajectory that failed early) are absent: *n counts only
 * the points written.
 * CLNODE_SAVE_TS with per-trajectory intervals (t0s, t1s): the save times inside the
 * trajectory's own interval, a contiguous run of save_ts (*ts points at its first). Returns
 * CLNODE_ERR_INVALID_ARGUMENT if traj is out of range. */
CLNODE_API clnode_status clnode_solution_saved(const clnode_solution *sol, size_t traj,
                                               clnode_save_kind kind, size_t *n, const double **ts,
                                               const double **ys);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_SOLVER_H */
