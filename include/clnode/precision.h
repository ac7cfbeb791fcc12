/* clnode/precision.h - is it the ODE or the hardware? The sensitivity baseline of a problem, the
 * verdict of a solve against it, and the precision certificate of a run.
 *
 * A solve in floating point is one sample of what rounding allows. Some problems barely notice
 * (the seed problem: its spread is far below the tolerance, test_sensitivity.c:test_seed); others
 * amplify every rounding (a tanh MLP with large weights over a long interval: ill-conditioned in
 * fp32, test_sensitivity.c:test_ill_conditioned; doc/precision.md gives the figures). To tell a
 * device whose arithmetic is at fault from a problem that is intrinsically sensitive, clnode
 * measures the problem's own sensitivity on the host reference and judges every other solve
 * against it:
 *
 *   baseline   the problem solved on the host (ordered strict GEMM) in float64 (the reference)
 *              and in the working precision, unperturbed and K times with the initial state
 *              perturbed by  k u max(|y0_i|, atol / rtol)  per component (u the working
 *              precision's unit roundoff, random signs from a seeded generator: reproducible).
 *              Relative to the controller's scale because a few ulps of y0 = 0 are subnormal
 *              and change nothing. Its spread is the range of step counts and the largest
 *              deviation of the saved values from the reference among those solves.
 *   deviation  max over the saved points (the save_ts times and t1, else the final state) of
 *              max_j |y_j - ref_j| / (max_j |ref_j| + atol / rtol), the measure clnode-compare
 *              uses for every row; +inf when points are missing (a trajectory that ended early)
 *              or not finite.
 *   verdict    a solve within `slack` times the spread (and its steps near the baseline's
 *              range) agrees: it differs from the reference no more than rounding-size
 *              perturbations of the problem itself do. Beyond that, the device's arithmetic
 *              changes the solution: N times the problem's own spread, the spread floored at
 *              a few u so that the ratio is never infinite. A problem whose own spread exceeds
 *              the tolerance is ill-conditioned at that precision: no device can be judged,
 *              and the baseline says whether float64 is not.
 *   certificate  after a solve on any device, a seeded random sample of its trajectories is
 *              re-solved as a baseline (host, fp64 reference plus the working precision's
 *              perturbed solves); the run is certified when every sampled trajectory is within
 *              its band or within tolerance_rtol x rtol of its float64 solve.
 *
 * Everything here is built on clnode_solve: the baseline's solves are ordinary host solves (one
 * batch per precision: the perturbed copies ride in the same batch, which changes none of their
 * bits), so its cost is (K + 1) working-precision solves plus 1 (or K + 1) float64 solves per
 * trajectory. Thread-safety: as the context passed in. All functions are blocking.
 */
#ifndef CLNODE_PRECISION_H
#define CLNODE_PRECISION_H

#include <stdint.h>

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/model.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_sensitivity_default_options, then change what you need. */
typedef struct clnode_sensitivity_options {
    size_t struct_size;       /* set by clnode_sensitivity_default_options */
    int num_perturbations;    /* K: perturbed solves per precision; default 8 */
    double perturbation_ulps; /* k: size of each perturbation in units of u; default 4 */
    uint64_t seed;            /* the perturbations' random signs; default 1 */
    int fp64_spread;          /* 1 (default): also K perturbed float64 solves, to say whether
                                 float64 is well-conditioned where the working precision is not;
                                 0: the float64 reference only */
    double tolerance;         /* largest deviation a well-conditioned problem may show; 0 (default):
                                 100 max(rtol, 16 u), the rule of clnode-compare */
    double slack;      /* a solve agrees up to slack x the spread; default 3 (the spread is the
                          largest of K + 1 samples, not a bound) */
    double floor_ulps; /* the spread used in ratios is at least floor_ulps x u; default 4 */
} clnode_sensitivity_options;

/* Fills `opts` with the documented defaults, struct_size included. A macro: it passes the size of
 * the struct the program was compiled with. */
#define clnode_sensitivity_default_options(opts)                                                   \
    clnode_sensitivity_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_sensitivity_default_options_sized(clnode_sensitivity_options *opts,
                                                         size_t struct_size);

typedef struct clnode_sensitivity clnode_sensitivity;

/* Trajectory index meaning "all trajectories of the baseline together". */
#define CLNODE_SENSITIVITY_ALL ((size_t)-1)

/* The baseline of one trajectory (or of all: ranges and maxima over them). Fields are only ever
 * appended (clnode/common.h); clnode_sensitivity_get passes the size. */
typedef struct clnode_sensitivity_stats {
    size_t struct_size;         /* the bytes the library wrote */
    clnode_precision precision; /* the working precision */
    double unit_roundoff;       /* u of the working precision (2^-24 or 2^-53) */
    long ref_steps_min;         /* steps of the float64 reference (a range over trajectories */
    long ref_steps_max;         /*   for CLNODE_SENSITIVITY_ALL) */
    long steps_min;             /* working precision: the unperturbed solve and the K perturbed */
    long steps_max;             /*   ones (per trajectory; over all for ..._ALL) */
    double spread;              /* their largest deviation from the float64 reference */
    double floor;               /* floor_ulps x u: the least spread used in a ratio */
    double tolerance;           /* the working precision's tolerance (see the options) */
    int ill_conditioned;        /* spread > tolerance, or a perturbed solve did not succeed
                                   where the reference did */
    int has_fp64;               /* 1 when the fields below were measured (fp64_spread) */
    long fp64_steps_min;        /* float64: the reference and K perturbed solves */
    long fp64_steps_max;
    double fp64_spread;
    double fp64_tolerance;
    int fp64_ill_conditioned;
    int reference_success; /* every float64 reference trajectory succeeded */
} clnode_sensitivity_stats;

/* Measures the sensitivity baseline of the problem->batch trajectories of `model` (clnode_problem:
 * y0, and the per-trajectory t0s, t1s, dt0s and inputs, which every perturbed copy of a
 * trajectory shares) with the solve options `opts` (their precision is the working precision; their
 * GEMM mode, precision guard and saving of steps and t0 are ignored: the baseline solves are
 * strict, unguarded (diffrax's step sequence: the problem's own), and save the save_ts times and
 * t1). The solves run on a host context of their own ("host": the ordered strict GEMM, the
 * reference of every comparison); `ctx` (any device) receives the error message. The options'
 * progress and cancel callbacks reach every solve (progress reports each solve's own batch: the
 * trajectories and their perturbed copies), and the cancel callback is also polled before each
 * solve starts: once it asks to stop, no solve starts and CLNODE_ERR_CANCELLED is returned. Errors:
 * those of clnode_context_create and clnode_solve (bad options, non-finite y0, out of memory,
 * CLNODE_ERR_CANCELLED), CLNODE_ERR_INVALID_ARGUMENT for NULL arguments, a problem with batch 0
 * or no y0 (the message names the field), bad options
 * (K < 1 or > 1000, k <= 0, slack < 1, floor_ulps < 0, tolerance < 0). Memory: the two solutions,
 * batch x (K + 1) trajectories each, kept until clnode_sensitivity_destroy. */
CLNODE_API clnode_status clnode_sensitivity_baseline(clnode_context *ctx, const clnode_model *model,
                                                     const clnode_solve_options *opts,
                                                     const clnode_problem *problem,
                                                     const clnode_sensitivity_options *sopts,
                                                     clnode_sensitivity **out);

/* Destroys a baseline and sets *b to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_sensitivity_destroy(clnode_sensitivity **b);

/* Number of trajectories of the baseline. */
CLNODE_API size_t clnode_sensitivity_batch(const clnode_sensitivity *b);

/* The baseline of trajectory `traj` (< batch) or of all (CLNODE_SENSITIVITY_ALL).
 * Returns CLNODE_ERR_INVALID_ARGUMENT when traj is out of range or *out is larger than this
 * library knows. A macro: it passes the size of the struct the program was compiled with to
 * clnode_sensitivity_get_sized, which writes only the fields it covers. */
#define clnode_sensitivity_get(b, traj, out)                                                       \
    clnode_sensitivity_get_sized((b), (traj), (out), sizeof *(out))
CLNODE_API clnode_status clnode_sensitivity_get_sized(const clnode_sensitivity *b, size_t traj,
                                                      clnode_sensitivity_stats *out,
                                                      size_t struct_size);

/* The float64 reference solution: its trajectories 0 .. batch-1 are the reference of the
 * baseline's trajectories (further trajectories, if any, are the perturbed float64 solves).
 * Owned by the baseline. */
CLNODE_API const clnode_solution *clnode_sensitivity_reference(const clnode_sensitivity *b);

/* The deviation (see the top of this header) of trajectory `sol_traj` of `sol` from the float64
 * reference of baseline trajectory `traj`, over the save_ts points both reached and, when both
 * succeeded, their final states. `sol` must save the same save_ts times as the baseline's
 * problem. `complete` (may be NULL) receives 1 when every point had its counterpart and both
 * trajectories ended alike, 0 when one ended early: *out is then the deviation as far as both
 * ran (a device that failed late still gets a finite "N x the spread"), or +inf when `complete`
 * is NULL. Returns CLNODE_ERR_INVALID_ARGUMENT for an index out of range or a solution of
 * another dimension. */
CLNODE_API clnode_status clnode_sensitivity_deviation(const clnode_sensitivity *b,
                                                      const clnode_solution *sol, size_t sol_traj,
                                                      size_t traj, double *out, int *complete);

typedef enum clnode_verdict {
    CLNODE_VERDICT_AGREES = 0,          /* within the problem's own rounding sensitivity */
    CLNODE_VERDICT_BEYOND = 1,          /* the device's arithmetic changes the solution beyond it */
    CLNODE_VERDICT_ILL_CONDITIONED = 2, /* within it, but the problem's own spread exceeds the
                                           tolerance at this precision: no device is blamed */
} clnode_verdict;

/* "agrees", "beyond", "ill_conditioned" (or "unknown"). */
CLNODE_API const char *clnode_verdict_name(clnode_verdict v);

/* Fields are only ever appended (clnode/common.h); clnode_sensitivity_judge passes the size. */
typedef struct clnode_judgement {
    size_t struct_size; /* the bytes the library wrote */
    clnode_verdict verdict;
    double ratio;     /* deviation / max(spread, floor): "N x the problem's own spread"; finite
                         unless the deviation is not (a trajectory that ended early) */
    int steps_beyond; /* the steps lie outside the baseline's range widened by
                         max(2, its width) on each side */
    int success;      /* the trajectories judged all succeeded */
    char text[512];   /* one line: "agrees (within the problem's own rounding sensitivity:
                         ...)", "the device's arithmetic changes the solution: 11.3x the
                         problem's own fp32 spread ...", "the problem is ill-conditioned in
                         fp32 ..." */
} clnode_judgement;

/* Judges a solve of the baseline's problem (in the baseline's working precision) against the
 * baseline of trajectory `traj` (or CLNODE_SENSITIVITY_ALL): `deviation` from the reference (as
 * clnode_sensitivity_deviation measures it; the largest over the trajectories judged), their step
 * range [steps_min, steps_max] and whether they all succeeded. Pure computation.
 * Returns CLNODE_ERR_INVALID_ARGUMENT when traj is out of range, an argument is NULL or *out is
 * larger than this library knows. A macro, as clnode_sensitivity_get. */
#define clnode_sensitivity_judge(b, traj, deviation, steps_min, steps_max, success, out)           \
    clnode_sensitivity_judge_sized((b), (traj), (deviation), (steps_min), (steps_max), (success),  \
                                   (out), sizeof *(out))
CLNODE_API clnode_status clnode_sensitivity_judge_sized(const clnode_sensitivity *b, size_t traj,
                                                        double deviation, long steps_min,
                                                        long steps_max, int success,
                                                        clnode_judgement *out, size_t struct_size);

/* ---- the precision certificate of a run ---- */

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_certify_default_options, then change what you need. */
typedef struct clnode_certify_options {
    size_t struct_size;    /* set by clnode_certify_default_options */
    double fraction;       /* share of the trajectories re-solved; default 0.01 (at least 1) */
    size_t min_sample;     /* at least this many (capped at the batch); default 1 */
    uint64_t seed;         /* which trajectories; default 1 */
    double tolerance_rtol; /* a sampled trajectory within this many rtol of its float64 solve
                              is within tolerance whatever its band; default 1 (the accuracy the
                              solve asked for) */
    /* the sample's baseline; NULL (default): the defaults of clnode_sensitivity_options except
     * fp64_spread = 0 (a pointer, so that either struct grows at its end) */
    const clnode_sensitivity_options *sensitivity;
} clnode_certify_options;

/* Fills `opts` with the documented defaults, struct_size included. A macro, as
 * clnode_sensitivity_default_options. */
#define clnode_certify_default_options(opts)                                                       \
    clnode_certify_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_certify_default_options_sized(clnode_certify_options *opts,
                                                     size_t struct_size);

typedef struct clnode_certificate clnode_certificate;

/* Fields are only ever appended (clnode/common.h); clnode_certificate_get passes the size. */
typedef struct clnode_certificate_summary {
    size_t struct_size;         /* the bytes the library wrote */
    int certified;              /* every sampled trajectory within its band or the tolerance */
    size_t batch;               /* trajectories of the run */
    size_t num_sampled;         /* trajectories re-solved */
    size_t num_failed;          /* sampled trajectories beyond both band and tolerance */
    size_t num_ill_conditioned; /* sampled trajectories whose own spread exceeds the
                                   sensitivity tolerance (certified: the device is not at fault,
                                   but the problem is sensitive at this precision) */
    double rtol;
    double max_deviation_rtol; /* largest deviation of a sampled trajectory from its float64
                                  solve, in units of rtol (+inf: one ended early) */
    size_t worst_traj;         /* the run's trajectory that showed it */
    double max_spread_rtol;    /* largest baseline spread of the sample, in units of rtol */
    double tolerance_rtol;     /* the options' tolerance_rtol */
    double seconds;            /* wall time the certificate took */
} clnode_certificate_summary;

/* Fields are only ever appended (clnode/common.h); clnode_certificate_sample_get passes the
 * size. */
typedef struct clnode_certificate_sample {
    size_t struct_size;        /* the bytes the library wrote */
    size_t traj;               /* index in the run */
    double deviation_rtol;     /* from its float64 solve, in units of rtol */
    double spread_rtol;        /* its baseline spread, in units of rtol */
    long steps;                /* of the run */
    long steps_min, steps_max; /* of its baseline */
    int complete;              /* it reached every saved point its float64 solve did */
    int within; /* complete, and within slack x spread (and the step range) or the tolerance */
} clnode_certificate_sample;

/* Certifies a finished solve: `sol` is what clnode_solve(any context, model, opts, problem)
 * returned. A seeded sample of ceil(fraction x batch) trajectories (at least min_sample) is
 * re-solved on a host context as a baseline (clnode_sensitivity_baseline) and each sampled
 * trajectory of `sol` is compared with its float64 solve. Cost: with the defaults, per sampled
 * trajectory 9 working-precision solves and 1 float64 solve, in two batched host solves. `ctx`
 * receives error messages. The re-solves take the options' progress and cancel callbacks as
 * clnode_sensitivity_baseline does: none starts once cancel asks to stop (CLNODE_ERR_CANCELLED).
 * Errors: as clnode_sensitivity_baseline; CLNODE_ERR_INVALID_ARGUMENT when `sol` does not match
 * the problem's batch and the model's dimension, or for fraction outside (0, 1]. */
CLNODE_API clnode_status clnode_certify(clnode_context *ctx, const clnode_model *model,
                                        const clnode_solve_options *opts,
                                        const clnode_problem *problem, const clnode_solution *sol,
                                        const clnode_certify_options *copts,
                                        clnode_certificate **out);

/* Destroys a certificate and sets *cert to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_certificate_destroy(clnode_certificate **cert);

/* The summary (all zero for a NULL certificate). Returns CLNODE_ERR_INVALID_ARGUMENT when out is
 * NULL or *out is larger than this library knows. A macro, as clnode_sensitivity_get. */
#define clnode_certificate_get(cert, out) clnode_certificate_get_sized((cert), (out), sizeof *(out))
CLNODE_API clnode_status clnode_certificate_get_sized(const clnode_certificate *cert,
                                                      clnode_certificate_summary *out,
                                                      size_t struct_size);

/* Sample k (< num_sampled, in increasing trajectory order). Returns CLNODE_ERR_INVALID_ARGUMENT
 * when k is out of range or *out is larger than this library knows. A macro, as
 * clnode_sensitivity_get. */
#define clnode_certificate_sample_get(cert, k, out)                                                \
    clnode_certificate_sample_get_sized((cert), (k), (out), sizeof *(out))
CLNODE_API clnode_status clnode_certificate_sample_get_sized(const clnode_certificate *cert,
                                                             size_t k,
                                                             clnode_certificate_sample *out,
                                                             size_t struct_size);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_PRECISION_H */
