/* sensitivity.c - the sensitivity baseline of a problem, verdicts against it and the precision
 * certificate of a run (clnode/precision.h). Built on clnode_solve only: every solve here is an
 * ordinary strict host solve, the perturbed copies of a trajectory riding in one batch (a
 * trajectory's bits do not depend on its batch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "clnode/precision.h"
#include "solver/options.h"

struct clnode_sensitivity {
    size_t batch, dim;
    clnode_precision precision;
    double rtol, atol;
    clnode_sensitivity_options o;
    size_t k64;            /* perturbed float64 solves per trajectory (0 or K) */
    clnode_solution *ref;  /* float64: batch x (1 + k64); rows k * batch + i */
    clnode_solution *work; /* working precision, batch x (1 + K); NULL when it is float64 */
    clnode_sensitivity_stats *stats; /* batch + 1: the last is CLNODE_SENSITIVITY_ALL */
};

struct clnode_certificate {
    clnode_certificate_summary summary;
    clnode_certificate_sample *samples;
};

/* ---- the random signs: splitmix64 (Steele, Lea, Flood 2014), one stream per (seed, trajectory,
 * perturbation), so a trajectory's perturbations do not depend on what else is in the batch ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t stream_state(uint64_t seed, uint64_t id, uint64_t k)
{
    uint64_t s = seed;
    uint64_t a = splitmix64(&s) ^ id;
    uint64_t b = splitmix64(&a) ^ k;
    return splitmix64(&b);
}

static double unit_roundoff(clnode_precision p)
{
    return p == CLNODE_FP64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
}

static double default_tolerance(double rtol, clnode_precision p)
{
    return 100.0 * fmax(rtol, 16.0 * unit_roundoff(p));
}

/* The first release's sizes of the structs a program passes or receives (clnode/common.h). */
#define CLN_SENS_OPTS_MIN CLN_END_OF(clnode_sensitivity_options, floor_ulps)
#define CLN_CERT_OPTS_MIN CLN_END_OF(clnode_certify_options, sensitivity)
#define CLN_SENS_STATS_MIN CLN_END_OF(clnode_sensitivity_stats, reference_success)
#define CLN_JUDGEMENT_MIN CLN_END_OF(clnode_judgement, text)
#define CLN_CERT_SUMMARY_MIN CLN_END_OF(clnode_certificate_summary, seconds)
#define CLN_CERT_SAMPLE_MIN CLN_END_OF(clnode_certificate_sample, within)

static void sensitivity_defaults(clnode_sensitivity_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->num_perturbations = 8;
    o->perturbation_ulps = 4.0;
    o->seed = 1;
    o->fp64_spread = 1;
    o->tolerance = 0.0;
    o->slack = 3.0;
    o->floor_ulps = 4.0;
}

CLN_DEFAULTS_SIZED(clnode_sensitivity_default_options_sized, clnode_sensitivity_options,
                   sensitivity_defaults)

static void certify_defaults(clnode_certify_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->fraction = 0.01;
    o->min_sample = 1;
    o->seed = 1;
    o->tolerance_rtol = 1.0;
    o->sensitivity = NULL; /* the sensitivity defaults with fp64_spread = 0 */
}

CLN_DEFAULTS_SIZED(clnode_certify_default_options_sized, clnode_certify_options, certify_defaults)

/* The program's sensitivity options (NULL: the defaults, with fp64_spread = 0 for a certificate)
 * as this library's full struct. Errors: a struct_size this library does not know. */
static clnode_status import_sopts(clnode_context *ctx, const clnode_sensitivity_options *in,
                                  int certify, clnode_sensitivity_options *full)
{
    sensitivity_defaults(full);
    if (!in)
        full->fp64_spread = !certify;
    return cln_struct_import(ctx, "clnode_sensitivity_options", in, CLN_SENS_OPTS_MIN, full,
                             sizeof *full);
}

/* Writes `size` bytes of the library's struct `full` (of `full_size` bytes, struct_size first) to
 * the program's `out`, struct_size set to what was written; CLNODE_ERR_INVALID_ARGUMENT for a size
 * this library does not know. */
static clnode_status fill_sized(void *out, size_t size, void *full, size_t min, size_t full_size)
{
    if (!out || cln_check_struct_size(NULL, "", size, min, full_size) != CLNODE_OK)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_struct_fill(out, size, full, full_size);
    return CLNODE_OK;
}

/* ---- the deviation measure ---- */

/* Largest max_j |a_j - r_j| / (max_j |r_j| + floor_abs) over n points of dim N; NaN counts as
 * +inf. */
static double points_dev(const double *a, const double *r, size_t n, size_t N, double floor_abs)
{
    double dev = 0.0;
    for (size_t p = 0; p < n; ++p) {
        double num = 0.0, den = 0.0;
        for (size_t j = 0; j < N; ++j) {
            const double d = fabs(a[p * N + j] - r[p * N + j]);
            if (!(d <= num))
                num = isnan(d) ? INFINITY : d;
            den = fmax(den, fabs(r[p * N + j]));
        }
        const double rel = num / (den + floor_abs);
        if (!(rel <= dev))
            dev = isnan(rel) ? INFINITY : rel;
    }
    return dev;
}

/* Deviation of trajectory `is` of `s` from trajectory `ir` of `r`: the save_ts points both
 * reached (a trajectory that ended early saved a prefix of them) and, when both succeeded, the
 * final state. *complete: every point of each had its counterpart and both ended alike. */
static double traj_dev(const clnode_solution *s, size_t is, const clnode_solution *r, size_t ir,
                       size_t N, double floor_abs, int *complete)
{
    size_t n = 0, nr = 0;
    const double *ts, *ys, *tr, *yr;
    clnode_solution_saved(s, is, CLNODE_SAVE_TS, &n, &ts, &ys);
    clnode_solution_saved(r, ir, CLNODE_SAVE_TS, &nr, &tr, &yr);
    double dev = points_dev(ys, yr, n < nr ? n : nr, N, floor_abs);
    clnode_trajectory_stats a, b;
    clnode_solution_stats(s, is, &a);
    clnode_solution_stats(r, ir, &b);
    const int ea = a.result == CLNODE_RESULT_SUCCESS, eb = b.result == CLNODE_RESULT_SUCCESS;
    *complete = n == nr && ea == eb;
    if (ea && eb) {
        const double d = points_dev(clnode_solution_y_final(s, is), clnode_solution_y_final(r, ir),
                                    1, N, floor_abs);
        if (!(d <= dev))
            dev = d;
    }
    return dev;
}

/* ---- the baseline ---- */

static clnode_status check_sopts(clnode_context *ctx, const clnode_sensitivity_options *o)
{
    CLN_CHECK(ctx, o->num_perturbations >= 1 && o->num_perturbations <= 1000,
              CLNODE_ERR_INVALID_ARGUMENT,
              "sensitivity: num_perturbations must be in [1, 1000], not %d", o->num_perturbations);
    CLN_CHECK(ctx, o->perturbation_ulps > 0 && isfinite(o->perturbation_ulps),
              CLNODE_ERR_INVALID_ARGUMENT, "sensitivity: perturbation_ulps must be positive");
    CLN_CHECK(ctx, o->slack >= 1 && isfinite(o->slack), CLNODE_ERR_INVALID_ARGUMENT,
              "sensitivity: slack must be at least 1");
    CLN_CHECK(ctx, o->floor_ulps >= 0 && isfinite(o->floor_ulps), CLNODE_ERR_INVALID_ARGUMENT,
              "sensitivity: floor_ulps must be non-negative");
    CLN_CHECK(ctx, o->tolerance >= 0 && isfinite(o->tolerance), CLNODE_ERR_INVALID_ARGUMENT,
              "sensitivity: tolerance must be non-negative (0: the default rule)");
    return CLNODE_OK;
}

/* Copies y0 (batch x N) into copies 0 .. copies-1 of out (rows k * batch + i); copy k >= 1 is
 * perturbed by kulps u max(|y0_ij|, atol / rtol) with a random sign per component. */
static void perturbed_states(double *out, const double *y0, size_t batch, size_t N,
                             const size_t *ids, size_t copies, double kulps, double u,
                             double scale_floor, uint64_t seed)
{
    for (size_t k = 0; k < copies; ++k) {
        for (size_t i = 0; i < batch; ++i) {
            double *row = out + (k * batch + i) * N;
            const double *src = y0 + i * N;
            if (k == 0) {
                memcpy(row, src, N * sizeof *row);
                continue;
            }
            uint64_t st = stream_state(seed, ids ? ids[i] : i, k);
            uint64_t bits = 0;
            for (size_t j = 0; j < N; ++j) {
                if (j % 64 == 0)
                    bits = splitmix64(&st);
                const double sign = (bits >> (j % 64)) & 1 ? 1.0 : -1.0;
                row[j] = src[j] + sign * kulps * u * fmax(fabs(src[j]), scale_floor);
            }
        }
    }
}

static void stats_init(clnode_sensitivity_stats *s, const clnode_sensitivity *b)
{
    memset(s, 0, sizeof *s);
    s->precision = b->precision;
    s->unit_roundoff = unit_roundoff(b->precision);
    s->floor = b->o.floor_ulps * s->unit_roundoff;
    s->tolerance = b->o.tolerance > 0 ? b->o.tolerance : default_tolerance(b->rtol, b->precision);
    s->fp64_tolerance =
        b->o.tolerance > 0 ? b->o.tolerance : default_tolerance(b->rtol, CLNODE_FP64);
    s->has_fp64 = b->k64 > 0;
    s->ref_steps_min = s->steps_min = s->fp64_steps_min = -1;
    s->ref_steps_max = s->steps_max = s->fp64_steps_max = -1;
    s->reference_success = 1;
}

static void range_add(long *lo, long *hi, long v)
{
    if (*lo < 0 || v < *lo)
        *lo = v;
    if (v > *hi)
        *hi = v;
}

static void max_into(double *m, double v)
{
    if (!(v <= *m))
        *m = v;
}

/* Spread of the copies 0 .. copies-1 of trajectory i in `s` around reference row i; copy 0 of the
 * float64 set is the reference itself. */
static void copies_spread(const clnode_sensitivity *b, const clnode_solution *s, size_t i,
                          size_t copies, int ref_ok, long *lo, long *hi, double *spread, int *bad)
{
    const double floor_abs = b->atol / b->rtol;
    for (size_t k = 0; k < copies; ++k) {
        clnode_trajectory_stats st;
        clnode_solution_stats(s, k * b->batch + i, &st);
        range_add(lo, hi, st.num_steps);
        if (ref_ok && st.result != CLNODE_RESULT_SUCCESS)
            *bad = 1;
        int complete;
        const double d = traj_dev(s, k * b->batch + i, b->ref, i, b->dim, floor_abs, &complete);
        max_into(spread, complete ? d : INFINITY);
    }
}

static void compute_stats(clnode_sensitivity *b)
{
    const size_t K = (size_t)b->o.num_perturbations;
    clnode_sensitivity_stats *all = &b->stats[b->batch];
    stats_init(all, b);
    for (size_t i = 0; i < b->batch; ++i) {
        clnode_sensitivity_stats *s = &b->stats[i];
        stats_init(s, b);
        clnode_trajectory_stats rs;
        clnode_solution_stats(b->ref, i, &rs);
        const int ref_ok = rs.result == CLNODE_RESULT_SUCCESS;
        s->reference_success = ref_ok;
        s->ref_steps_min = s->ref_steps_max = rs.num_steps;
        int bad = 0, bad64 = 0;
        const clnode_solution *w = b->work ? b->work : b->ref;
        copies_spread(b, w, i, K + 1, ref_ok, &s->steps_min, &s->steps_max, &s->spread, &bad);
        if (b->k64)
            copies_spread(b, b->ref, i, b->k64 + 1, ref_ok, &s->fp64_steps_min, &s->fp64_steps_max,
                          &s->fp64_spread, &bad64);
        if (bad)
            s->spread = INFINITY;
        if (bad64)
            s->fp64_spread = INFINITY;
        s->ill_conditioned = !(s->spread <= s->tolerance);
        s->fp64_ill_conditioned = b->k64 && !(s->fp64_spread <= s->fp64_tolerance);

        all->reference_success &= s->reference_success;
        range_add(&all->ref_steps_min, &all->ref_steps_max, rs.num_steps);
        range_add(&all->steps_min, &all->steps_max, s->steps_min);
        range_add(&all->steps_min, &all->steps_max, s->steps_max);
        max_into(&all->spread, s->spread);
        if (b->k64) {
            range_add(&all->fp64_steps_min, &all->fp64_steps_max, s->fp64_steps_min);
            range_add(&all->fp64_steps_min, &all->fp64_steps_max, s->fp64_steps_max);
            max_into(&all->fp64_spread, s->fp64_spread);
        }
        all->ill_conditioned |= s->ill_conditioned;
        all->fp64_ill_conditioned |= s->fp64_ill_conditioned;
    }
}

void clnode_sensitivity_destroy(clnode_sensitivity **b)
{
    if (!b || !*b)
        return;
    clnode_solution_destroy(&(*b)->ref);
    clnode_solution_destroy(&(*b)->work);
    free((*b)->stats);
    free(*b);
    *b = NULL;
}

/* A host context for the reference solves, logging where `ctx` logs. */
static clnode_status host_context(clnode_context *ctx, clnode_context **host)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = ctx->log;
    co.log_user = ctx->log_user;
    co.log_level = ctx->log_level;
    clnode_status st = clnode_context_create(&co, host);
    if (st != CLNODE_OK)
        return cln_fail(ctx, st, "sensitivity: cannot open the host reference context");
    return CLNODE_OK;
}

/* CLNODE_ERR_CANCELLED when the caller's cancel callback asks to stop, polled before each piece
 * of work starts. */
static clnode_status check_cancel(clnode_context *ctx, const clnode_solve_options *o)
{
    CLN_CHECK(ctx, !o->cancel || !o->cancel(o->cancel_user), CLNODE_ERR_CANCELLED,
              "sensitivity: cancelled by the caller");
    return CLNODE_OK;
}

/* Solves on `host`, passing a failure's message on to `ctx`; none starts once the caller's cancel
 * callback asks to stop. */
static clnode_status host_solve(clnode_context *ctx, clnode_context *host,
                                const clnode_model *model, const clnode_solve_options *o,
                                const clnode_problem *p, clnode_solution **out)
{
    if (check_cancel(ctx, o) != CLNODE_OK)
        return CLNODE_ERR_CANCELLED;
    clnode_status st = clnode_solve(host, model, o, p, out);
    if (st != CLNODE_OK)
        return cln_fail(ctx, st, "sensitivity: the host %s reference solve failed: %s",
                        clnode_precision_name(o->precision), clnode_context_last_error(host));
    return CLNODE_OK;
}

/* The problem of rows rows[0 .. n-1] of `in`: its per-trajectory arrays (t0s, t1s, dt0s, the
 * k conditioning inputs of each row and, with save_ts_per_trajectory, its row of save times)
 * gathered into *arena (one allocation, freed by the caller; NULL when there is none to gather);
 * y0 stays the caller's to set. */
static clnode_status problem_rows(clnode_context *ctx, const clnode_problem *in, size_t k,
                                  const size_t *rows, size_t n, clnode_problem *out, double **arena)
{
    *out = *in;
    out->batch = n;
    *arena = NULL;
    const double *const src[5] = {in->t0s, in->t1s, in->dt0s, in->inputs,
                                  in->save_ts_per_trajectory ? in->save_ts : NULL};
    const size_t w[5] = {1, 1, 1, k, in->n_save_ts};
    size_t total = 0;
    for (int a = 0; a < 5; ++a) {
        size_t m;
        CLN_CHECK(ctx, !src[a] || (cln_mul_size(n, w[a], &m) && cln_add_size(total, m, &total)),
                  CLNODE_ERR_OUT_OF_MEMORY,
                  "sensitivity: the per-trajectory arrays of %zu trajectories overflow", n);
    }
    if (!total)
        return CLNODE_OK;
    double *buf = malloc(total * sizeof *buf);
    CLN_CHECK(ctx, buf, CLNODE_ERR_OUT_OF_MEMORY,
              "sensitivity: cannot allocate the per-trajectory arrays of %zu trajectories", n);
    const double **dst[5] = {&out->t0s, &out->t1s, &out->dt0s, &out->inputs, &out->save_ts};
    double *at = buf;
    for (int a = 0; a < 5; ++a) {
        if (!src[a])
            continue;
        for (size_t j = 0; j < n; ++j)
            memcpy(at + j * w[a], src[a] + rows[j] * w[a], w[a] * sizeof *at);
        *dst[a] = at;
        at += n * w[a];
    }
    *arena = buf;
    return CLNODE_OK;
}

/* The baseline's problem: `copies` copies of every trajectory of pb (row k * batch + i is a copy
 * of trajectory i; a prefix of it is the problem of fewer copies), the states in ys. */
static clnode_status copies_problem(clnode_context *ctx, const clnode_problem *pb, size_t k,
                                    size_t copies, const double *ys, clnode_problem *out,
                                    double **arena)
{
    size_t n;
    CLN_CHECK(ctx, cln_mul_size(pb->batch, copies, &n), CLNODE_ERR_OUT_OF_MEMORY,
              "sensitivity: batch %zu too large", pb->batch);
    size_t *rows = malloc(n * sizeof *rows);
    CLN_CHECK(ctx, rows, CLNODE_ERR_OUT_OF_MEMORY, "sensitivity: batch %zu too large", pb->batch);
    for (size_t r = 0; r < n; ++r)
        rows[r] = r % pb->batch;
    const clnode_status st = problem_rows(ctx, pb, k, rows, n, out, arena);
    free(rows);
    out->y0 = ys;
    return st;
}

static clnode_status baseline_run(clnode_context *ctx, const clnode_model *model,
                                  const clnode_solve_options *opts, const clnode_problem *pb,
                                  const size_t *ids, const clnode_sensitivity_options *sopts,
                                  clnode_sensitivity **out)
{
    clnode_status st = CLNODE_OK;
    clnode_context *host = NULL;
    double *ys = NULL, *arena = NULL;
    clnode_sensitivity *b = NULL;
    const size_t batch = pb->batch;
    const double *y0 = pb->y0;
    CLN_TRY(st, check_sopts(ctx, sopts));
    CLN_CHECK(ctx, opts->rtol > 0 && opts->atol > 0 && isfinite(opts->rtol / opts->atol),
              CLNODE_ERR_INVALID_ARGUMENT, "sensitivity: rtol and atol must be positive");
    b = calloc(1, sizeof *b);
    CLN_CHECK(ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a sensitivity baseline");
    b->batch = batch;
    b->dim = clnode_model_dim(model);
    b->precision = opts->precision == CLNODE_FP64 ? CLNODE_FP64 : CLNODE_FP32;
    b->rtol = opts->rtol;
    b->atol = opts->atol;
    b->o = *sopts;
    const size_t K = (size_t)sopts->num_perturbations;
    b->k64 = sopts->fp64_spread || b->precision == CLNODE_FP64 ? K : 0;
    size_t nstats, rows, elems;
    if (!cln_add_size(batch, 1, &nstats) || !cln_mul_size(batch, K + 1, &rows) ||
        !cln_mul_size(rows, b->dim, &elems) || !cln_mul_size(elems, sizeof(double), &elems)) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "sensitivity: batch %zu too large", batch);
        goto fail;
    }
    b->stats = calloc(nstats, sizeof *b->stats);
    ys = malloc(elems);
    if (!b->stats || !ys) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                      "cannot allocate %zu bytes of perturbed states", elems);
        goto fail;
    }
    CLN_TRY(st, check_cancel(ctx, opts));
    CLN_TRY(st, host_context(ctx, &host));
    clnode_problem copies; /* K + 1 copies of every trajectory; the reference solves a prefix */
    CLN_TRY(st,
            copies_problem(ctx, pb, clnode_model_num_inputs(model), K + 1, ys, &copies, &arena));

    /* the caller's progress and cancel callbacks reach the reference solves */
    clnode_solve_options o = *opts;
    o.gemm_precision = CLNODE_GEMM_STRICT;
    o.save_t0 = 0;
    o.save_steps = 0;
    o.save_t1 = 1;
    /* the problem's own step sequence, as diffrax takes it: the guard's floor detection judges
     * a device's arithmetic, which is what the baseline is compared with, not part of it */
    o.precision_guard = CLNODE_GUARD_OFF;
    const double scale_floor = opts->atol / opts->rtol;

    o.precision = CLNODE_FP64;
    perturbed_states(ys, y0, batch, b->dim, ids, b->k64 + 1, sopts->perturbation_ulps,
                     unit_roundoff(CLNODE_FP64), scale_floor, sopts->seed);
    copies.batch = batch * (b->k64 + 1);
    CLN_TRY(st, host_solve(ctx, host, model, &o, &copies, &b->ref));
    if (b->precision != CLNODE_FP64) {
        o.precision = b->precision;
        perturbed_states(ys, y0, batch, b->dim, ids, K + 1, sopts->perturbation_ulps,
                         unit_roundoff(b->precision), scale_floor, sopts->seed);
        copies.batch = batch * (K + 1);
        CLN_TRY(st, host_solve(ctx, host, model, &o, &copies, &b->work));
    }
    compute_stats(b);
    free(ys);
    free(arena);
    clnode_context_destroy(&host);
    *out = b;
    return CLNODE_OK;
fail:
    free(ys);
    free(arena);
    clnode_context_destroy(&host);
    clnode_sensitivity_destroy(&b);
    return st;
}

/* The caller's problem as this library's struct, with initial states for at least one
 * trajectory. */
static clnode_status import_problem(clnode_context *ctx, const char *who, const clnode_problem *in,
                                    clnode_problem *full)
{
    const clnode_status st = cln_problem_import(ctx, in, full);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, full->batch > 0, CLNODE_ERR_INVALID_ARGUMENT, "%s: clnode_problem.batch is 0",
              who);
    CLN_CHECK(ctx, full->y0, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: clnode_problem.y0 is NULL: no initial states for %zu trajectories", who,
              full->batch);
    return CLNODE_OK;
}

clnode_status clnode_sensitivity_baseline(clnode_context *ctx, const clnode_model *model,
                                          const clnode_solve_options *opts,
                                          const clnode_problem *problem,
                                          const clnode_sensitivity_options *sopts,
                                          clnode_sensitivity **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, model && opts && out, CLNODE_ERR_INVALID_ARGUMENT,
              "sensitivity: NULL model, options or out");
    clnode_problem pb;
    const clnode_status st = import_problem(ctx, "sensitivity", problem, &pb);
    if (st != CLNODE_OK)
        return st;
    clnode_sensitivity_options full;
    const clnode_status sst = import_sopts(ctx, sopts, 0, &full);
    if (sst != CLNODE_OK)
        return sst;
    return baseline_run(ctx, model, opts, &pb, NULL, &full, out);
}

size_t clnode_sensitivity_batch(const clnode_sensitivity *b)
{
    return b ? b->batch : 0;
}

clnode_status clnode_sensitivity_get_sized(const clnode_sensitivity *b, size_t traj,
                                           clnode_sensitivity_stats *out, size_t size)
{
    if (!b || (traj != CLNODE_SENSITIVITY_ALL && traj >= b->batch))
        return CLNODE_ERR_INVALID_ARGUMENT;
    clnode_sensitivity_stats s = b->stats[traj == CLNODE_SENSITIVITY_ALL ? b->batch : traj];
    return fill_sized(out, size, &s, CLN_SENS_STATS_MIN, sizeof s);
}

const clnode_solution *clnode_sensitivity_reference(const clnode_sensitivity *b)
{
    return b ? b->ref : NULL;
}

clnode_status clnode_sensitivity_deviation(const clnode_sensitivity *b, const clnode_solution *sol,
                                           size_t sol_traj, size_t traj, double *out, int *complete)
{
    if (!b || !sol || !out || traj >= b->batch || sol_traj >= clnode_solution_batch(sol) ||
        clnode_solution_dim(sol) != b->dim)
        return CLNODE_ERR_INVALID_ARGUMENT;
    int all = 1;
    *out = traj_dev(sol, sol_traj, b->ref, traj, b->dim, b->atol / b->rtol, &all);
    if (complete)
        *complete = all;
    else if (!all)
        *out = INFINITY;
    return CLNODE_OK;
}

const char *clnode_verdict_name(clnode_verdict v)
{
    switch (v) {
    case CLNODE_VERDICT_AGREES:
        return "agrees";
    case CLNODE_VERDICT_BEYOND:
        return "beyond";
    case CLNODE_VERDICT_ILL_CONDITIONED:
        return "ill_conditioned";
    }
    return "unknown";
}

static void judge(const clnode_sensitivity *b, const clnode_sensitivity_stats s, double deviation,
                  long steps_min, long steps_max, int success, clnode_judgement *out);

clnode_status clnode_sensitivity_judge_sized(const clnode_sensitivity *b, size_t traj,
                                             double deviation, long steps_min, long steps_max,
                                             int success, clnode_judgement *out, size_t size)
{
    clnode_sensitivity_stats s;
    if (!out || clnode_sensitivity_get(b, traj, &s) != CLNODE_OK)
        return CLNODE_ERR_INVALID_ARGUMENT;
    clnode_judgement j;
    memset(&j, 0, sizeof j);
    judge(b, s, deviation, steps_min, steps_max, success, &j);
    return fill_sized(out, size, &j, CLN_JUDGEMENT_MIN, sizeof j);
}

/* The verdict of a solve against the baseline stats s (of b), into the zeroed *out. */
static void judge(const clnode_sensitivity *b, const clnode_sensitivity_stats s, double deviation,
                  long steps_min, long steps_max, int success, clnode_judgement *out)
{
    const char *pn = clnode_precision_name(s.precision);
    const double band = fmax(s.spread, s.floor);
    out->ratio = isnan(deviation) ? INFINITY : deviation / band;
    out->success = success;
    const long w = s.steps_max - s.steps_min > 2 ? s.steps_max - s.steps_min : 2;
    out->steps_beyond = steps_min < s.steps_min - w || steps_max > s.steps_max + w;
    const int within =
        out->ratio <= b->o.slack && !out->steps_beyond && (success || !s.reference_success);
    if (within && !s.ill_conditioned) {
        out->verdict = CLNODE_VERDICT_AGREES;
        snprintf(out->text, sizeof out->text,
                 "agrees (within the problem's own rounding sensitivity: %.2gx its %s spread)",
                 out->ratio, pn);
        return;
    }
    if (within) {
        out->verdict = CLNODE_VERDICT_ILL_CONDITIONED;
        char fp64[160] = "";
        if (s.precision != CLNODE_FP64 && s.has_fp64 && !s.fp64_ill_conditioned)
            snprintf(fp64, sizeof fp64, "; fp64 is not (spread %.2e, %ld-%ld steps): solve in fp64",
                     s.fp64_spread, s.fp64_steps_min, s.fp64_steps_max);
        else if (s.precision != CLNODE_FP64 && s.has_fp64)
            snprintf(fp64, sizeof fp64,
                     "; so is fp64 (spread %.2e): tighten rtol or shorten the interval",
                     s.fp64_spread);
        else if (s.precision == CLNODE_FP64)
            snprintf(fp64, sizeof fp64, ": tighten rtol or shorten the interval");
        snprintf(out->text, sizeof out->text,
                 "the problem is ill-conditioned in %s (its own spread %.2e exceeds the "
                 "tolerance %.2e; %ld-%ld steps under perturbations of %g u), no device is "
                 "blamed%s",
                 pn, s.spread, s.tolerance, s.steps_min, s.steps_max, b->o.perturbation_ulps, fp64);
        return;
    }
    out->verdict = CLNODE_VERDICT_BEYOND;
    if (!success && s.reference_success && isfinite(out->ratio))
        snprintf(out->text, sizeof out->text,
                 "the device's arithmetic changes the solution: %.3gx the problem's own %s spread "
                 "(%.2e) "
                 "as far as it ran, then trajectories did not succeed where the problem's own "
                 "perturbed solves did (%ld-%ld steps against %ld-%ld)",
                 out->ratio, pn, band, steps_min, steps_max, s.steps_min, s.steps_max);
    else if (!success && s.reference_success)
        snprintf(
            out->text, sizeof out->text,
            "the device's arithmetic changes the solution: trajectories did not succeed where the "
            "problem's own perturbed %s solves did (%ld-%ld steps against %ld-%ld)",
            pn, steps_min, steps_max, s.steps_min, s.steps_max);
    else if (!isfinite(out->ratio))
        snprintf(out->text, sizeof out->text,
                 "the device's arithmetic changes the solution: saved points missing or not finite "
                 "(%ld-%ld steps against %ld-%ld)",
                 steps_min, steps_max, s.steps_min, s.steps_max);
    else
        snprintf(out->text, sizeof out->text,
                 "the device's arithmetic changes the solution: %.3gx the problem's own %s spread "
                 "(%.2e; %ld-%ld steps against %ld-%ld)",
                 out->ratio, pn, band, steps_min, steps_max, s.steps_min, s.steps_max);
}

/* ---- the certificate ---- */

void clnode_certificate_destroy(clnode_certificate **cert)
{
    if (!cert || !*cert)
        return;
    free((*cert)->samples);
    free(*cert);
    *cert = NULL;
}

clnode_status clnode_certificate_get_sized(const clnode_certificate *cert,
                                           clnode_certificate_summary *out, size_t size)
{
    clnode_certificate_summary s;
    if (cert)
        s = cert->summary;
    else
        memset(&s, 0, sizeof s);
    return fill_sized(out, size, &s, CLN_CERT_SUMMARY_MIN, sizeof s);
}

clnode_status clnode_certificate_sample_get_sized(const clnode_certificate *cert, size_t k,
                                                  clnode_certificate_sample *out, size_t size)
{
    if (!cert || k >= cert->summary.num_sampled)
        return CLNODE_ERR_INVALID_ARGUMENT;
    clnode_certificate_sample s = cert->samples[k];
    return fill_sized(out, size, &s, CLN_CERT_SAMPLE_MIN, sizeof s);
}

static int cmp_size(const void *a, const void *b)
{
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* How many trajectories a certificate re-solves: the fraction of the batch, at least min_sample
 * and 1, at most the batch. */
static size_t certify_sample_size(const clnode_certify_options *copts, size_t batch)
{
    size_t n = (size_t)ceil(copts->fraction * (double)batch);
    if (n < copts->min_sample)
        n = copts->min_sample;
    if (n < 1)
        n = 1;
    return n > batch ? batch : n;
}

/* The first n of a seeded random permutation of 0..batch-1 (a partial Fisher-Yates shuffle), in
 * increasing order, into idx (room for batch). */
static void certify_pick(uint64_t seed, size_t batch, size_t n, size_t *idx)
{
    for (size_t i = 0; i < batch; ++i)
        idx[i] = i;
    uint64_t rng = stream_state(seed, (uint64_t)batch, 0);
    for (size_t i = 0; i < n; ++i) {
        const size_t j = i + (size_t)(splitmix64(&rng) % (uint64_t)(batch - i));
        const size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    qsort(idx, n, sizeof *idx, cmp_size);
}

/* Sample k (trajectory traj of the run `sol`) against its baseline in b: fills *p and adds it to
 * the summary *sm. */
static void certify_judge_sample(const clnode_sensitivity *b, size_t k, size_t traj,
                                 const clnode_solution *sol, double rtol, double tolerance_rtol,
                                 clnode_certificate_sample *p, clnode_certificate_summary *sm)
{
    clnode_sensitivity_stats s;
    clnode_sensitivity_get(b, k, &s);
    clnode_trajectory_stats ts;
    clnode_solution_stats(sol, traj, &ts);
    double dev = INFINITY;
    int complete = 0;
    clnode_sensitivity_deviation(b, sol, traj, k, &dev, &complete);
    const int success = ts.result == CLNODE_RESULT_SUCCESS;
    clnode_judgement j;
    clnode_sensitivity_judge(b, k, dev, ts.num_steps, ts.num_steps, success, &j);
    p->traj = traj;
    p->deviation_rtol = dev / rtol;
    p->spread_rtol = s.spread / rtol;
    p->steps = ts.num_steps;
    p->steps_min = s.steps_min;
    p->steps_max = s.steps_max;
    /* a trajectory that ended early where its reference did not is never within */
    p->complete = complete;
    p->within =
        (complete || !s.reference_success) &&
        (j.verdict != CLNODE_VERDICT_BEYOND || p->deviation_rtol <= tolerance_rtol);
    sm->num_ill_conditioned += s.ill_conditioned;
    if (k == 0 || !(p->deviation_rtol <= sm->max_deviation_rtol)) {
        sm->worst_traj = traj;
        sm->max_deviation_rtol = isnan(p->deviation_rtol) ? INFINITY : p->deviation_rtol;
    }
    max_into(&sm->max_spread_rtol, p->spread_rtol);
    if (!p->within) {
        sm->certified = 0;
        sm->num_failed++;
    }
}

/* The program's certify options (NULL: the defaults) and the sensitivity options they point at as
 * this library's full structs. Errors: a struct_size this library does not know. */
static clnode_status import_copts(clnode_context *ctx, const clnode_certify_options *in,
                                  clnode_certify_options *full, clnode_sensitivity_options *sfull)
{
    certify_defaults(full);
    const clnode_status cst =
        cln_struct_import(ctx, "clnode_certify_options", in, CLN_CERT_OPTS_MIN, full, sizeof *full);
    if (cst != CLNODE_OK)
        return cst;
    const clnode_status st = import_sopts(ctx, full->sensitivity, 1, sfull);
    full->sensitivity = sfull;
    return st;
}

/* The solution is of the problem (batch trajectories of dimension N) and the options are valid. */
static clnode_status certify_check(clnode_context *ctx, const clnode_solution *sol, size_t batch,
                                   size_t N, const clnode_certify_options *copts)
{
    CLN_CHECK(ctx, clnode_solution_batch(sol) == batch && clnode_solution_dim(sol) == N,
              CLNODE_ERR_INVALID_ARGUMENT,
              "certify: the solution (batch %zu, dim %zu) is not of this problem (batch %zu, dim "
              "%zu)",
              clnode_solution_batch(sol), clnode_solution_dim(sol), batch, N);
    CLN_CHECK(ctx, copts->fraction > 0 && copts->fraction <= 1, CLNODE_ERR_INVALID_ARGUMENT,
              "certify: fraction must be in (0, 1], not %g", copts->fraction);
    CLN_CHECK(ctx, copts->tolerance_rtol >= 0 && isfinite(copts->tolerance_rtol),
              CLNODE_ERR_INVALID_ARGUMENT, "certify: tolerance_rtol must be non-negative");
    return CLNODE_OK;
}

clnode_status clnode_certify(clnode_context *ctx, const clnode_model *model,
                             const clnode_solve_options *opts, const clnode_problem *problem,
                             const clnode_solution *sol, const clnode_certify_options *copts,
                             clnode_certificate **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, model && opts && sol && out, CLNODE_ERR_INVALID_ARGUMENT,
              "certify: NULL model, options, solution or out");
    clnode_problem pb;
    clnode_status st = import_problem(ctx, "certify", problem, &pb);
    if (st != CLNODE_OK)
        return st;
    const size_t batch = pb.batch;
    const size_t N = clnode_model_dim(model);
    clnode_certify_options cfull;
    clnode_sensitivity_options sfull;
    if ((st = import_copts(ctx, copts, &cfull, &sfull)) != CLNODE_OK ||
        (st = certify_check(ctx, sol, batch, N, &cfull)) != CLNODE_OK)
        return st;
    copts = &cfull;
    const double t_start = now_seconds();

    const size_t n = certify_sample_size(copts, batch);

    size_t *idx = NULL;
    double *ys = NULL, *arena = NULL;
    clnode_sensitivity *b = NULL;
    clnode_certificate *c = calloc(1, sizeof *c);
    size_t bytes;
    idx = malloc(batch * sizeof *idx);
    ys = cln_mul_size(n, N, &bytes) && cln_mul_size(bytes, sizeof(double), &bytes) ? malloc(bytes)
                                                                                   : NULL;
    if (c)
        c->samples = calloc(n, sizeof *c->samples);
    if (!c || !idx || !ys || !c->samples) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "certify: cannot allocate the sample of %zu",
                      n);
        goto fail;
    }
    certify_pick(copts->seed, batch, n, idx);
    for (size_t k = 0; k < n; ++k)
        memcpy(ys + k * N, pb.y0 + idx[k] * N, N * sizeof(double));
    clnode_problem sample; /* the sampled trajectories' rows of the problem */
    CLN_TRY(st, problem_rows(ctx, &pb, clnode_model_num_inputs(model), idx, n, &sample, &arena));
    sample.y0 = ys;
    CLN_TRY(st, check_sopts(ctx, &sfull));
    CLN_TRY(st, baseline_run(ctx, model, opts, &sample, idx, &sfull, &b));

    clnode_certificate_summary *sm = &c->summary;
    sm->batch = batch;
    sm->num_sampled = n;
    sm->rtol = opts->rtol;
    sm->tolerance_rtol = copts->tolerance_rtol;
    sm->certified = 1;
    for (size_t k = 0; k < n; ++k)
        certify_judge_sample(b, k, idx[k], sol, opts->rtol, copts->tolerance_rtol, &c->samples[k],
                             sm);
    clnode_sensitivity_destroy(&b);
    free(idx);
    free(ys);
    free(arena);
    sm->seconds = now_seconds() - t_start;
    *out = c;
    return CLNODE_OK;
fail:
    clnode_sensitivity_destroy(&b);
    free(idx);
    free(ys);
    free(arena);
    clnode_certificate_destroy(&c);
    return st;
}
