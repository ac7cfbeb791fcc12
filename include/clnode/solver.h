/* clnode/solver.h - solving a batch of initial value problems dy/dt = MLP(y) from t0 to t1.
 *
 * Semantics follow diffrax 0.7.2 (diffeqsolve + PIDController + SaveAt) under jax.vmap: every
 * trajectory of a batch has its own step sizes, accept/reject decisions, controller history and
 * counters; a finished or failed trajectory is frozen and does not disturb the others.
 */
#ifndef CLNODE_SOLVER_H
#define CLNODE_SOLVER_H

#include <float.h>

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
     * through the logger when rtol < CLNODE_GUARD_FACTOR u. Such a solve, while it runs, ends a
     * trajectory whose error estimate is stuck at the rounding floor with
     * CLNODE_RESULT_PRECISION_FLOOR, and logs one warning per solve naming the device, the GEMM
     * mode, the count and the bound; at rtol >= CLNODE_GUARD_FACTOR u no trajectory ends so (an
     * error estimate that does not fall as the step shrinks is then truncation error, at a kink
     * of relu for instance, and the solve follows diffrax's steps). */
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

/* The solve options, one table. Each row X(ctype, name, type, where, default, min, max, flags,
 * doc) is a field `ctype name` of clnode_solve_options and an entry of the library's option
 * table (clnode_solve_option_at below), from which the library sets the defaults, validates the
 * values and fills the step arithmetic's constants, and from which the tools take their long
 * options and --help and the Python package its keywords. Rows are only ever appended.
 * type: CLNODE_OPTION_<type> (clnode_option_type). where: KERNEL for a constant of the step
 * arithmetic (cl/cln_step.h reads it from cln_consts, a member of the same name, in the state
 * precision; flag CLNODE_OPTION_KERNEL), HOST for one the driver reads. default: the value
 * (REAL, INTEGER, BOOLEAN), the enum value (CHOICE) or the index in clnode_method_at (METHOD).
 * [min, max]: the valid values of a REAL or INTEGER option, an end excluded with
 * CLNODE_OPTION_MIN_OPEN / MAX_OPEN; a REAL option is finite. flags: CLNODE_OPTION_* below.
 * constant_step is diffrax 0.7.2's ConstantStepSize: n = ceil((t1 - t0) / nextafter(dt0)) steps
 * (in the direction of integration, in the state precision), the first of dt0, step k >= 2 ending
 * at t0 + (t1 - t0) (k / n) (one fused multiply-add, as diffrax computes it) and step n at t1. */
#define CLNODE_SOLVE_OPTION_LIST(X)                                                                \
    X(const clnode_method *, method, METHOD, HOST, 0, 0, 0, 0,                                     \
      "Runge-Kutta method")                                                                        \
    X(clnode_precision, precision, CHOICE, HOST, CLNODE_FP32, 0, 0, 0,                             \
      "state and time precision")                                                                  \
    X(clnode_gemm_mode, gemm_precision, CHOICE, HOST, CLNODE_GEMM_STRICT, 0, 0, 0,                 \
      "precision of the MLP's matrix products: strict (IEEE in the state precision) or tf32 "      \
      "(10-bit mantissa inputs, fp32 accumulation; native on CUDA, emulated elsewhere)")           \
    X(double, t0, REAL, HOST, 0.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_PROBLEM,                       \
      "start of the interval")                                                                     \
    X(double, t1, REAL, HOST, 1.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_PROBLEM,                       \
      "end of the interval; t1 < t0 integrates backwards")                                         \
    X(double, dt0, REAL, HOST, 0.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_PROBLEM,                      \
      "first step, of the sign of t1 - t0 (constant steps: the step); 0: 0.01, what diffrax "      \
      "0.7.2's dt0=None gives (its PIDController chooses, but the wrapped terms diffeqsolve "      \
      "passes make it return 0.01); auto: chosen per trajectory (dt0_auto)")                       \
    X(int, constant_step, BOOLEAN, HOST, 0, 0, 1, 0,                                               \
      "constant steps of dt0 instead of the PID controller")                                       \
    X(double, rtol, REAL, KERNEL, 1e-3, 0.0, DBL_MAX,                                              \
      CLNODE_OPTION_MIN_OPEN | CLNODE_OPTION_CONTROLLER,                                           \
      "relative tolerance")                                                                        \
    X(double, atol, REAL, KERNEL, 1e-6, 0.0, DBL_MAX,                                              \
      CLNODE_OPTION_MIN_OPEN | CLNODE_OPTION_CONTROLLER,                                           \
      "absolute tolerance")                                                                        \
    X(double, pcoeff, REAL, HOST, 0.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_CONTROLLER,                \
      "proportional coefficient of the PID controller")                                            \
    X(double, icoeff, REAL, HOST, 1.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_CONTROLLER,                \
      "integral coefficient of the PID controller")                                                \
    X(double, dcoeff, REAL, HOST, 0.0, -DBL_MAX, DBL_MAX, CLNODE_OPTION_CONTROLLER,                \
      "derivative coefficient of the PID controller")                                              \
    X(double, dtmin, REAL, KERNEL, 0.0, 0.0, DBL_MAX, CLNODE_OPTION_CONTROLLER,                    \
      "lower bound on |dt|; 0: none")                                                              \
    X(double, dtmax, REAL, KERNEL, 0.0, 0.0, DBL_MAX, CLNODE_OPTION_CONTROLLER,                    \
      "upper bound on |dt|; 0: none")                                                              \
    X(int, force_dtmin, BOOLEAN, HOST, 1, 0, 1, CLNODE_OPTION_CONTROLLER,                          \
      "at dtmin, accept the step anyway; off: end the trajectory with dt_min_reached")             \
    X(double, factormin, REAL, KERNEL, 0.2, 0.0, 1.0,                                              \
      CLNODE_OPTION_MIN_OPEN | CLNODE_OPTION_CONTROLLER,                                           \
      "smallest factor of a step size change")                                                     \
    X(double, factormax, REAL, KERNEL, 10.0, 1.0, DBL_MAX, CLNODE_OPTION_CONTROLLER,               \
      "largest factor of a step size change")                                                      \
    X(double, safety, REAL, KERNEL, 0.9, 0.0, 1.0,                                                 \
      CLNODE_OPTION_MIN_OPEN | CLNODE_OPTION_CONTROLLER,                                           \
      "safety factor of the step size controller")                                                 \
    X(long, max_steps, INTEGER, HOST, 4096, 1, CLNODE_MAX_STEPS_LIMIT, 0,                          \
      "attempts (accepted + rejected steps) per trajectory")                                       \
    X(int, save_t0, BOOLEAN, HOST, 0, 0, 1, CLNODE_OPTION_SAVE,                                    \
      "save (t0, y0)")                                                                             \
    X(int, save_t1, BOOLEAN, HOST, 1, 0, 1, CLNODE_OPTION_SAVE,                                    \
      "save (t1, y(t1))")                                                                          \
    X(int, save_steps, BOOLEAN, HOST, 0, 0, 1, CLNODE_OPTION_SAVE,                                 \
      "save the end of every accepted step")                                                       \
    X(clnode_precision_guard, precision_guard, CHOICE, HOST, CLNODE_GUARD_WARN, 0, 0, 0,           \
      "a tolerance below what the device's GEMM resolves: warn, refuse the solve, or off "         \
      "(diffrax's steps whatever the arithmetic does)")                                            \
    X(int, compact, BOOLEAN, HOST, 1, 0, 1, CLNODE_OPTION_SAME_BITS,                               \
      "finished trajectories leave the batch's matrix products (results do not change)")          \
    X(int, keep_tape, BOOLEAN, HOST, 0, 0, 1, CLNODE_OPTION_SAME_BITS,                             \
      "keep what the reverse pass needs (clnode/gradient.h): every accepted step's end time and "  \
      "the state at every checkpoint_every-th step")                                               \
    X(long, checkpoint_every, INTEGER, HOST, 1, 1, CLNODE_MAX_STEPS_LIMIT,                         \
      CLNODE_OPTION_SAME_BITS,                                                                     \
      "with keep_tape: keep the state of every k-th step (from the last) and recompute the "       \
      "others in the reverse pass, with the same bits")                                            \
    X(int, dt0_auto, BOOLEAN, HOST, 0, 0, 1, 0,                                                    \
      "choose each trajectory's first step from two field evaluations, as torchode and "           \
      "torchdiffeq do (Hairer, Norsett & Wanner's estimate with the method's order, rtol, atol, "  \
      "dtmin, dtmax); needs dt0 = 0 and the PID controller")

/* Option flags (clnode_option_info.flags, the flags column of CLNODE_SOLVE_OPTION_LIST). */
#define CLNODE_OPTION_MIN_OPEN 1u   /* min itself is not valid */
#define CLNODE_OPTION_MAX_OPEN 2u   /* max itself is not valid */
#define CLNODE_OPTION_CONTROLLER 4u /* the PID controller's: read (and validated) only by
                                       adaptive solves; a field of diffrax's PIDController */
#define CLNODE_OPTION_KERNEL 8u     /* `where` is KERNEL: a constant of the step arithmetic */
#define CLNODE_OPTION_PROBLEM 16u   /* a value of the problem, which clnode_problem may give per
                                       trajectory; validated with each trajectory's interval */
#define CLNODE_OPTION_SAVE 32u      /* what is saved (diffrax's SaveAt) */
#define CLNODE_OPTION_SAME_BITS 64u /* how the work is done: no value of it changes a bit of the
                                       results */

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_solve_default_options or clnode_solve_seed_options, then change what you need. The
 * table's options follow the callbacks, so that a row appended to the table is a field appended
 * to the struct. */
typedef struct clnode_solve_options {
    size_t struct_size; /* sizeof(clnode_solve_options) where the program was compiled: set by the
                           defaults functions; the library reads only the fields it covers */
    clnode_progress_fn progress; /* default NULL */
    void *progress_user;
    clnode_cancel_fn cancel; /* default NULL: never cancelled */
    void *cancel_user;
#define CLNODE_X_FIELD(ctype, name, type, where, def, min, max, flags, doc) ctype name;
    CLNODE_SOLVE_OPTION_LIST(CLNODE_X_FIELD)
#undef CLNODE_X_FIELD
} clnode_solve_options;

/* The kinds of option (clnode_option_info.type). */
typedef enum clnode_option_type {
    CLNODE_OPTION_REAL = 0,    /* a double */
    CLNODE_OPTION_INTEGER = 1, /* a long (or int) */
    CLNODE_OPTION_BOOLEAN = 2, /* an int, 0 or 1 */
    CLNODE_OPTION_CHOICE = 3,  /* an enum: one of the named values choice_names / choice_values */
    CLNODE_OPTION_METHOD = 4,  /* a const clnode_method *: one of clnode_method_at(i), by name */
} clnode_option_type;

/* One entry of the option table, static and owned by the library. Fields are only ever appended:
 * a field ends before struct_size when this library has it. */
typedef struct clnode_option_info {
    size_t struct_size; /* sizeof(clnode_option_info) where the library was compiled */
    const char *name;   /* the field's name: "rtol" */
    clnode_option_type type;
    unsigned flags;       /* CLNODE_OPTION_* */
    double default_value; /* as the table's default column; METHOD: index in clnode_method_at */
    double min, max;      /* REAL and INTEGER: the valid range (flags say which ends are open) */
    const char *doc;      /* one line */
    size_t n_choices;     /* CHOICE: the named values */
    const char *const *choice_names;
    const int *choice_values;
} clnode_option_info;

/* The number of options, and option i (NULL when i >= the count), in the table's order. */
CLNODE_API size_t clnode_solve_option_count(void);
CLNODE_API const clnode_option_info *clnode_solve_option_at(size_t i);
/* The option called `name`, or NULL. */
CLNODE_API const clnode_option_info *clnode_solve_option_find(const char *name);

/* Sets option `name` of opts to `value` (REAL, INTEGER, BOOLEAN: the number; CHOICE: the enum
 * value; METHOD: the index in clnode_method_at). Returns CLNODE_ERR_INVALID_ARGUMENT, opts
 * unchanged and a message naming the option and what it takes in `message` (when not NULL; at
 * most `size` bytes with the terminating NUL) for an unknown name, a value outside the option's
 * range or not an integer where an integer is needed. Thread-safe; needs no context. */
CLNODE_API clnode_status clnode_solve_option_set(clnode_solve_options *opts, const char *name,
                                                 double value, char *message, size_t size);
/* As clnode_solve_option_set, from text: a number (REAL, INTEGER; C syntax, the whole text), 0/1,
 * yes/no, true/false, on/off (BOOLEAN), or the name of a choice or of a method. dt0 also takes
 * "auto": dt0 = 0 and dt0_auto = 1 (a number for dt0 leaves dt0_auto as it is). */
CLNODE_API clnode_status clnode_solve_option_parse(clnode_solve_options *opts, const char *name,
                                                   const char *text, char *message,
                                                   size_t size);
/* The value of option `name` as clnode_solve_option_set takes it. CLNODE_ERR_INVALID_ARGUMENT
 * for an unknown name. */
CLNODE_API clnode_status clnode_solve_option_get(const clnode_solve_options *opts,
                                                 const char *name, double *value);
/* The value of option `name` as text that clnode_solve_option_parse reads back to the same value
 * (%.17g for reals, the name of a choice or method). CLNODE_ERR_INVALID_ARGUMENT for an unknown
 * name or a buffer too small. */
CLNODE_API clnode_status clnode_solve_option_format(const clnode_solve_options *opts,
                                                    const char *name, char *text, size_t size);

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
 * of save_ts). Without t0s and t1s every save time must lie inside the options' [t0, t1].
 * With save_ts_per_trajectory every trajectory has its own row of n_save_ts save times instead,
 * inside its own interval. */
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
                              through the dense output; batch x n_save_ts values with
                              save_ts_per_trajectory */
    size_t n_save_ts;
    int save_ts_per_trajectory; /* 0 (default): save_ts is one list of n_save_ts times shared
          by the batch (clipped to each trajectory's interval, as above); 1: save_ts holds
          batch x n_save_ts values row-major, row b trajectory b's own list (jax.vmap over
          SaveAt(ts=...)): each row finite, monotone in the direction of integration and inside
          that trajectory's own [t0, t1] (refused otherwise, naming trajectory and index). Every
          trajectory then saves its whole row, and is solved exactly as it would be alone with
          its row as a shared list (same steps, same bits). Other values are refused. */
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
    size_t struct_size; /* the bytes the library wrote */
    clnode_result result;
    long num_steps; /* attempts: num_accepted + num_rejected */
    long num_accepted;
    long num_rejected;
    long num_rhs_evals; /* vector-field evaluations made for this trajectory (with dt0_auto, the
                           selection's two included; an FSAL method's first step reuses its f0) */
    double t_final;     /* where the trajectory stopped (t1 on success) */
    double first_step;  /* the dt0 of its first attempt, given or chosen (dt0_auto), signed as
                           the direction of integration (negative backwards: given back as dt0
                           it is the same solve), after the dtmin/dtmax clip and before the
                           clip to the interval, in the state precision; 0 when t0 == t1 (no
                           step) */
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
 * non-finite, dt0 of the wrong sign, save_ts outside [t0, t1] or not monotone (per-trajectory
 * rows: outside the trajectory's own interval), save_ts_per_trajectory other than 0 or 1, euler
 * with the PID controller, a struct_size this library does not know, per-trajectory intervals in
 * both directions, conditioning inputs missing or not expected, max_steps outside [1,
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
 *   long interval ends the trajectory with max_steps_reached, as diffrax's does. A first step
 *   chosen by the solver (dt0_auto) is not known before the solve: it is not checked, and one
 *   that does not move t0 ends its trajectory with max_steps_reached too.
 * dt0_auto: dt0 (and dt0s) must be 0 and the controller the PID one (CLNODE_ERR_INVALID_ARGUMENT
 * otherwise); each trajectory's first step is chosen from two evaluations of the field
 * (cl/cln_dt0.h, doc/first-step.md), counted in its num_rhs_evals and reported as its
 * first_step. */
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
 * if traj is out of range or the solution was imported from a tape, which holds no states
 * (clnode_solution_tape_import). */
CLNODE_API const double *clnode_solution_y_final(const clnode_solution *sol, size_t traj);

/* Saved points of one kind for trajectory `traj`: *n points, times in *ts and states (n x dim,
 * row-major) in *ys, valid for the life of the solution (NULL may come with *n = 0). Points that
 * were requested but never reached (a trajectory that failed early) are absent: *n counts only
 * the points written.
 * CLNODE_SAVE_TS with per-trajectory intervals (t0s, t1s): the save times inside the
 * trajectory's own interval, a contiguous run of save_ts (*ts points at its first). With
 * save_ts_per_trajectory: the trajectory's own row (the times it reached, from its first). A
 * solution imported from a tape (clnode_solution_tape_import) gives the times and *ys NULL.
 * Returns CLNODE_ERR_INVALID_ARGUMENT if traj is out of range. */
CLNODE_API clnode_status clnode_solution_saved(const clnode_solution *sol, size_t traj,
                                               clnode_save_kind kind, size_t *n, const double **ts,
                                               const double **ys);

/* ---- the saved points in diffrax's layout ----
 *
 * Every trajectory has the same number of slots T (clnode_save_slots). Its row holds, from slot
 * 0: (t0, y0) with save_t0; the save times it reached and, with save_steps, the end of every
 * accepted step, merged in the direction of integration (a save time equal to a step's end time
 * comes first); with save_t1 and without save_steps, the point where the trajectory stopped (t1
 * on success, the last point reached when it failed: diffrax's _save_t1); then padding, +inf in
 * both times and states (diffrax fills its times with direction * inf in its normalised time,
 * which it returns multiplied by direction: +inf). A trajectory that fails early therefore has
 * its points packed from slot 0, its stop point right after its last saved point, and more
 * padding. With save_steps the last step is the stop point, so t1 is not saved twice.
 * A shared list of save times with per-trajectory intervals (t0s, t1s): a trajectory saves the
 * run of it inside its own interval, save_ts[first .. first + n) (clnode_solution_ts_index).
 * Per-trajectory save times (save_ts_per_trajectory: a batch x n array, as jax.vmap over
 * SaveAt(ts=...) gives) read the same way: n, the row length, counts in T, and `first` indexes
 * the trajectory's own row. */

/* The slots T of every trajectory's row from the options and the problem alone (nothing is
 * solved; only the problem's n_save_ts is read, and problem may be NULL: no save times): save_t0
 * + n_save_ts + (save_steps ? max_steps : 0) + (save_t1 && !save_steps), diffrax's size of
 * SaveAt(t0, ts, steps=True, t1). With save_steps most rows hold far fewer points than T; a
 * consumer that does not need diffrax's shapes may keep only the most points of any trajectory
 * (clnode_solution_points) as its slots. ctx may be NULL (no message then). Returns
 * CLNODE_ERR_INVALID_ARGUMENT (opts or slots NULL, a struct_size this library does not know,
 * max_steps outside [1, CLNODE_MAX_STEPS_LIMIT], save_ts NULL with n_save_ts > 0). */
CLNODE_API clnode_status clnode_save_slots(clnode_context *ctx, const clnode_solve_options *opts,
                                           const clnode_problem *problem, size_t *slots);

/* How many slots of trajectory traj's row hold points (the rest is padding); 0 if sol is NULL
 * or traj out of range. */
CLNODE_API size_t clnode_solution_points(const clnode_solution *sol, size_t traj);

/* Rows [first, first + count) of the layout, `slots` slots each: ts (count x slots) and ys
 * (count x slots x dim), row-major; either may be NULL to skip it. The f32 variant converts each
 * stored double to float as a C cast does. Returns CLNODE_ERR_INVALID_ARGUMENT (nothing written)
 * if sol is NULL, the range is outside the batch, a trajectory of the range has more points
 * than `slots` (clnode_solution_points; rows are never truncated), or ys is not NULL for a
 * solution imported from a tape, which holds no states (clnode_solution_tape_import). */
CLNODE_API clnode_status clnode_solution_rows_f64(const clnode_solution *sol, size_t first,
                                                  size_t count, size_t slots, double *ts,
                                                  double *ys);
CLNODE_API clnode_status clnode_solution_rows_f32(const clnode_solution *sol, size_t first,
                                                  size_t count, size_t slots, float *ts, float *ys);

/* The kind of each point of trajectory traj's row: kinds[k] for the first
 * clnode_solution_points(sol, traj) slots (the others are not written). Returns
 * CLNODE_ERR_INVALID_ARGUMENT if sol or kinds is NULL, traj is out of range, or the trajectory has
 * more points than `slots`. */
CLNODE_API clnode_status clnode_solution_kinds(const clnode_solution *sol, size_t traj,
                                               size_t slots, clnode_save_kind *kinds);

/* The index in save_ts of trajectory traj's first saved time, in *first: its CLNODE_SAVE_TS
 * points are the save times save_ts[first .. first + n) (n from clnode_solution_saved), the
 * first not before its t0 in the direction of integration; 0 when the solve has no save times.
 * With save_ts_per_trajectory the index is into the trajectory's own row (save_ts + traj x
 * n_save_ts), and 0: every time of the row lies inside its interval.
 * Returns CLNODE_ERR_INVALID_ARGUMENT if sol or first is NULL or traj is out of range. */
CLNODE_API clnode_status clnode_solution_ts_index(const clnode_solution *sol, size_t traj,
                                                  size_t *first);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_SOLVER_H */
