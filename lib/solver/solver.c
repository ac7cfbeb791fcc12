/* solver.c - the driver: one solve of a batch from t0 to t1, written once against the backend
 * interface (backend.h). It validates the problem, lays out the device buffers, runs the
 * Runge-Kutta stages and the per-trajectory step logic of cl/cln_step.h in groups of steps with
 * one small read-back per group, and collects the saved points at the end. Nothing is allocated
 * while steps run. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "cln_layout.h"
#include "precision/probe_internal.h"

extern const double cln_dopri5_cmid[7];
extern const double cln_dopri8_dense[14 * CLN_DENSE_COEFFS]; /* lib/solver/method.c */

struct clnode_solution {
    size_t B, N;
    long syncs;                     /* host-device synchronisations made by the solve */
    clnode_trajectory_stats *stats; /* B */
    double *y_final;                /* B x N */
    size_t cap[4];                  /* points per trajectory, per clnode_save_kind */
    size_t *count[4];               /* B each */
    double *ts[4];                  /* B x cap */
    double *ys[4];                  /* B x cap x N */
};

static const char *const cln_result_names[] = {"success", "max_steps_reached", "dt_min_reached",
                                               "nonfinite", "precision_floor"};

const char *clnode_result_name(clnode_result r)
{
    if ((unsigned)r < sizeof cln_result_names / sizeof cln_result_names[0])
        return cln_result_names[r];
    return "unknown";
}

void clnode_solve_seed_options(clnode_solve_options *o)
{
    clnode_solve_default_options(o);
    o->t0 = 0.0;
    o->t1 = 50.0;
    o->dt0 = 0.02;
    o->rtol = 1e-4;
    o->atol = 1e-6;
}

void clnode_solve_default_options(clnode_solve_options *o)
{
    memset(o, 0, sizeof *o);
    o->method = clnode_method_tsit5;
    o->precision = CLNODE_FP32;
    o->gemm_mode = CLNODE_GEMM_STRICT;
    o->t0 = 0.0;
    o->t1 = 1.0;
    o->dt0 = 0.0;
    o->constant_step = 0;
    o->rtol = 1e-3;
    o->atol = 1e-6;
    o->pcoeff = 0.0;
    o->icoeff = 1.0;
    o->dcoeff = 0.0;
    o->dtmin = 0.0;
    o->dtmax = 0.0;
    o->force_dtmin = 1;
    o->factormin = 0.2;
    o->factormax = 10.0;
    o->safety = 0.9;
    o->max_steps = 4096;
    o->save_t0 = 0;
    o->save_t1 = 1;
    o->save_steps = 0;
    o->save_ts = NULL;
    o->n_save_ts = 0;
    o->progress = NULL;
    o->progress_user = NULL;
    o->precision_guard = CLNODE_GUARD_WARN;
}

void clnode_solution_destroy(clnode_solution **ps)
{
    if (!ps || !*ps)
        return;
    clnode_solution *s = *ps;
    free(s->stats);
    free(s->y_final);
    for (int k = 0; k < 4; ++k) {
        free(s->count[k]);
        free(s->ts[k]);
        free(s->ys[k]);
    }
    free(s);
    *ps = NULL;
}

size_t clnode_solution_batch(const clnode_solution *s)
{
    return s->B;
}

size_t clnode_solution_dim(const clnode_solution *s)
{
    return s->N;
}

long clnode_solution_syncs(const clnode_solution *s)
{
    return s->syncs;
}

clnode_status clnode_solution_stats(const clnode_solution *s, size_t traj,
                                    clnode_trajectory_stats *stats)
{
    if (!s || !stats || traj >= s->B)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *stats = s->stats[traj];
    return CLNODE_OK;
}

const double *clnode_solution_y_final(const clnode_solution *s, size_t traj)
{
    return s && traj < s->B ? s->y_final + traj * s->N : NULL;
}

clnode_status clnode_solution_saved(const clnode_solution *s, size_t traj, clnode_save_kind kind,
                                    size_t *n, const double **ts, const double **ys)
{
    if (!s || traj >= s->B || (unsigned)kind > CLNODE_SAVE_T1 || !n)
        return CLNODE_ERR_INVALID_ARGUMENT;
    const size_t cap = s->cap[kind];
    *n = cap ? s->count[kind][traj] : 0;
    if (ts)
        *ts = cap ? s->ts[kind] + traj * cap : NULL;
    if (ys)
        *ys = cap ? s->ys[kind] + traj * cap * s->N : NULL;
    return CLNODE_OK;
}

/* ---- validation ---- */

static clnode_status cln_validate(clnode_context *ctx, const clnode_model *model,
                                  const clnode_solve_options *o, size_t batch, const double *y0)
{
    CLN_CHECK(ctx, model, CLNODE_ERR_INVALID_ARGUMENT, "no model");
    CLN_CHECK(ctx, o->method, CLNODE_ERR_INVALID_ARGUMENT, "no method");
    CLN_CHECK(ctx, o->method->stages >= 1 && o->method->stages <= CLN_MAX_STAGES,
              CLNODE_ERR_INVALID_ARGUMENT, "method %s has %d stages (1 to %d supported)",
              o->method->name, o->method->stages, CLN_MAX_STAGES);
    {
        /* the dopri5 and dopri8 interpolants carry coefficients for those tableaux only */
        const clnode_interpolation in = o->method->interpolation;
        CLN_CHECK(ctx,
                  (in == CLNODE_INTERP_LINEAR || in == CLNODE_INTERP_HERMITE ||
                   in == CLNODE_INTERP_TSIT5 || in == CLNODE_INTERP_DOPRI5 ||
                   in == CLNODE_INTERP_DOPRI8) &&
                      (in != CLNODE_INTERP_TSIT5 || o->method->stages == 7) &&
                      (in != CLNODE_INTERP_DOPRI5 || o->method->stages == 7) &&
                      (in != CLNODE_INTERP_DOPRI8 || o->method->stages == 14),
                  CLNODE_ERR_INVALID_ARGUMENT,
                  "method %s: interpolation %d does not fit a tableau of %d stages",
                  o->method->name, (int)in, o->method->stages);
    }
    CLN_CHECK(ctx, batch >= 1 && batch <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "batch size %zu is out of range (1 to %d)", batch, INT32_MAX);
    CLN_CHECK(ctx, y0, CLNODE_ERR_INVALID_ARGUMENT, "no initial states");
    CLN_CHECK(ctx, o->precision == CLNODE_FP32 || o->precision == CLNODE_FP64,
              CLNODE_ERR_INVALID_ARGUMENT, "unknown precision %d", (int)o->precision);
    CLN_CHECK(ctx, o->gemm_mode == CLNODE_GEMM_STRICT || o->gemm_mode == CLNODE_GEMM_TF32,
              CLNODE_ERR_INVALID_ARGUMENT, "unknown GEMM mode %d", (int)o->gemm_mode);
    CLN_CHECK(ctx, !(o->gemm_mode == CLNODE_GEMM_TF32 && o->precision == CLNODE_FP64),
              CLNODE_ERR_INVALID_ARGUMENT, "the tf32 GEMM mode applies to fp32 solves only");
    CLN_CHECK(ctx,
              o->precision_guard == CLNODE_GUARD_WARN ||
                  o->precision_guard == CLNODE_GUARD_REFUSE ||
                  o->precision_guard == CLNODE_GUARD_OFF,
              CLNODE_ERR_INVALID_ARGUMENT, "unknown precision guard %d", (int)o->precision_guard);
    CLN_CHECK(ctx, isfinite(o->t0) && isfinite(o->t1), CLNODE_ERR_INVALID_ARGUMENT,
              "t0 = %g and t1 = %g must be finite", o->t0, o->t1);
    CLN_CHECK(ctx, isfinite(o->dt0), CLNODE_ERR_INVALID_ARGUMENT, "dt0 = %g must be finite",
              o->dt0);
    CLN_CHECK(ctx, (o->t1 - o->t0) * o->dt0 >= 0.0, CLNODE_ERR_INVALID_ARGUMENT,
              "dt0 = %g has the wrong sign for integrating from t0 = %g to t1 = %g", o->dt0, o->t0,
              o->t1);
    CLN_CHECK(ctx, o->max_steps >= 1 && o->max_steps <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "max_steps = %ld is out of range (1 to %d)", o->max_steps, INT32_MAX);
    if (o->constant_step) {
        CLN_CHECK(ctx, o->dt0 != 0.0 || o->t0 == o->t1, CLNODE_ERR_INVALID_ARGUMENT,
                  "constant steps need a non-zero dt0");
    } else {
        CLN_CHECK(ctx, o->method->adaptive, CLNODE_ERR_INVALID_ARGUMENT,
                  "method %s has no error estimate: use constant steps", o->method->name);
        CLN_CHECK(ctx, isfinite(o->rtol) && o->rtol > 0.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "rtol = %g must be positive and finite", o->rtol);
        CLN_CHECK(ctx, isfinite(o->atol) && o->atol > 0.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "atol = %g must be positive and finite", o->atol);
        CLN_CHECK(ctx, isfinite(o->pcoeff) && isfinite(o->icoeff) && isfinite(o->dcoeff),
                  CLNODE_ERR_INVALID_ARGUMENT, "pcoeff, icoeff and dcoeff must be finite");
        CLN_CHECK(ctx, o->factormin > 0.0 && o->factormin <= 1.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "factormin = %g must lie in (0, 1]", o->factormin);
        CLN_CHECK(ctx, o->factormax >= 1.0 && isfinite(o->factormax), CLNODE_ERR_INVALID_ARGUMENT,
                  "factormax = %g must be finite and at least 1", o->factormax);
        CLN_CHECK(ctx, o->safety > 0.0 && o->safety <= 1.0, CLNODE_ERR_INVALID_ARGUMENT,
                  "safety = %g must lie in (0, 1]", o->safety);
        CLN_CHECK(ctx, o->dtmin >= 0.0 && isfinite(o->dtmin), CLNODE_ERR_INVALID_ARGUMENT,
                  "dtmin = %g must be finite and non-negative (0: none)", o->dtmin);
        CLN_CHECK(ctx, o->dtmax >= 0.0 && isfinite(o->dtmax), CLNODE_ERR_INVALID_ARGUMENT,
                  "dtmax = %g must be finite and non-negative (0: none)", o->dtmax);
        CLN_CHECK(ctx, !(o->dtmin > 0.0 && o->dtmax > 0.0 && o->dtmin > o->dtmax),
                  CLNODE_ERR_INVALID_ARGUMENT, "dtmin = %g exceeds dtmax = %g", o->dtmin, o->dtmax);
    }
    CLN_CHECK(ctx, o->n_save_ts == 0 || o->save_ts, CLNODE_ERR_INVALID_ARGUMENT,
              "%zu save times but no array", o->n_save_ts);
    CLN_CHECK(ctx, o->n_save_ts <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT, "too many save times");
    const double dir = o->t1 >= o->t0 ? 1.0 : -1.0;
    for (size_t j = 0; j < o->n_save_ts; ++j) {
        const double t = o->save_ts[j];
        CLN_CHECK(ctx, isfinite(t) && dir * t >= dir * o->t0 && dir * t <= dir * o->t1,
                  CLNODE_ERR_INVALID_ARGUMENT,
                  "save time %zu (%g) lies outside [t0, t1] = [%g, %g]", j, t, o->t0, o->t1);
        CLN_CHECK(ctx, j == 0 || dir * t >= dir * o->save_ts[j - 1], CLNODE_ERR_INVALID_ARGUMENT,
                  "save times must be monotone in the direction of integration (time %zu = %g "
                  "after %g)",
                  j, t, o->save_ts[j - 1]);
    }
    const size_t N = clnode_model_dim(model);
    for (size_t i = 0; i < batch * N; ++i)
        CLN_CHECK(ctx, isfinite(y0[i]), CLNODE_ERR_NONFINITE_INPUT,
                  "y0 of trajectory %zu, component %zu is %g (initial states must be finite)",
                  i / N, i % N, y0[i]);
    return CLNODE_OK;
}

/* ---- precision-dependent conversions (set-up and read-back only) ---- */

/* Rounds `n` doubles to the solve's precision and writes them at element `off` of buf. */
static clnode_status cln_upload(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf, size_t off,
                                const double *src, size_t n)
{
    if (n == 0)
        return CLNODE_OK;
    void *tmp = malloc(n * sd->esize);
    CLN_CHECK(be->ctx, tmp, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu staging bytes",
              n * sd->esize);
    for (size_t i = 0; i < n; ++i) {
        if (sd->prec == CLNODE_FP32)
            ((float *)tmp)[i] = (float)src[i];
        else
            ((double *)tmp)[i] = src[i];
    }
    clnode_status st = be->ops->buf_write(be, buf, off * sd->esize, n * sd->esize, tmp);
    free(tmp);
    return st;
}

/* Reads `n` elements from element `off` of buf into doubles. */
static clnode_status cln_download(cln_backend *be, const cln_solve_dev *sd, cln_buf *buf,
                                  size_t off, double *dst, size_t n)
{
    if (n == 0)
        return CLNODE_OK;
    void *tmp = malloc(n * sd->esize);
    CLN_CHECK(be->ctx, tmp, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu staging bytes",
              n * sd->esize);
    clnode_status st = be->ops->buf_read(be, buf, off * sd->esize, n * sd->esize, tmp);
    for (size_t i = 0; st == CLNODE_OK && i < n; ++i)
        dst[i] = sd->prec == CLNODE_FP32 ? (double)((float *)tmp)[i] : ((double *)tmp)[i];
    free(tmp);
    return st;
}

/* x rounded to the solve's precision. */
static double cln_round(clnode_precision p, double x)
{
    return p == CLNODE_FP32 ? (double)(float)x : x;
}

/* diffrax's t1_clip_floor: t1 stepped 100 times towards -inf (0 maps to minus the smallest
 * normal), in the solve's precision. */
static double cln_clip_floor(clnode_precision p, double tau1)
{
    if (p == CLNODE_FP32) {
        float f = (float)tau1;
        for (int i = 0; i < 100; ++i)
            f = f == 0.0f ? -FLT_MIN : nextafterf(f, -INFINITY);
        return f;
    }
    double d = tau1;
    for (int i = 0; i < 100; ++i)
        d = d == 0.0 ? -DBL_MIN : nextafter(d, -INFINITY);
    return d;
}

/* ---- the solve ---- */

typedef struct cln_run {
    clnode_context *ctx;
    cln_backend *be;
    const clnode_model *model;
    const clnode_solve_options *o;
    cln_solve_dev sd;
    int begun; /* solve_begin succeeded */
} cln_run;

static clnode_status cln_alloc(cln_run *r, cln_buf **out, size_t n_elems, size_t esize)
{
    size_t bytes;
    CLN_CHECK(r->ctx, cln_mul_size(n_elems ? n_elems : 1, esize, &bytes), CLNODE_ERR_OUT_OF_MEMORY,
              "buffer of %zu elements overflows", n_elems);
    return r->be->ops->buf_alloc(r->be, bytes, out);
}

static void cln_release(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    if (r->begun)
        be->ops->solve_end(be, sd);
    for (size_t i = 0; i < CLN_MAX_LAYERS; ++i) {
        be->ops->buf_free(be, sd->W[i]);
        be->ops->buf_free(be, sd->bias[i]);
    }
    cln_buf **all[] = {&sd->Y,  &sd->F,  &sd->Z,  &sd->H[0],  &sd->H[1], &sd->CR, &sd->CI,
                       &sd->RS, &sd->IS, &sd->TS, &sd->TSOUT, &sd->STT,  &sd->STY};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        be->ops->buf_free(be, *all[i]);
        *all[i] = NULL;
    }
}

/* One evaluation of the vector field for the whole batch: Z -> F block i. */
static clnode_status cln_rhs(cln_run *r, size_t i)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    const size_t L = sd->num_layers;
    clnode_status st = CLNODE_OK;
    for (size_t l = 0; l < L && st == CLNODE_OK; ++l) {
        cln_buf *A = l == 0 ? sd->Z : sd->H[(l - 1) % 2];
        const int last = l + 1 == L;
        cln_buf *C = last ? sd->F : sd->H[l % 2];
        const size_t c_off = last ? i * sd->B * sd->N : 0;
        const size_t k = sd->sizes[l], n = sd->sizes[l + 1];
        st = be->ops->gemm(be, sd->prec, sd->gemm_mode, sd->B, n, k, A, 0, l == 0 ? sd->ldz : k,
                           sd->W[l], 0, k, C, c_off, n);
        if (st == CLNODE_OK && (sd->bias[l] || sd->act[l] != 0))
            st = be->ops->bias_act(be, sd, C, c_off, n, sd->B, n, sd->bias[l], sd->act[l]);
    }
    return st;
}

static clnode_status cln_step(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    const clnode_method *m = r->o->method;
    clnode_status st = CLNODE_OK;
    for (int i = 0; i < m->stages && st == CLNODE_OK; ++i) {
        if (i == 0 && m->fsal)
            continue; /* f(t, y) is kept from the last accepted step */
        st = be->ops->stage(be, sd, i);
        if (st == CLNODE_OK)
            st = cln_rhs(r, (size_t)i);
    }
    if (st == CLNODE_OK)
        st = be->ops->finish(be, sd);
    return st;
}

static double cln_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-solve constants, in double (rounded to the state precision on upload). */
static void cln_fill_constants(const cln_run *r, double dir, double tau0, double tau1, double dt0,
                               double *CR, int32_t *CI)
{
    const clnode_solve_options *o = r->o;
    const clnode_method *m = o->method;
    const cln_solve_dev *sd = &r->sd;
    const int s = m->stages;
    memset(CR, 0, CLN_CR_COUNT * sizeof(double));
    memset(CI, 0, CLN_CI_COUNT * sizeof(int32_t));
    const double eo = (double)m->error_order;
    const double coeff1 = (o->icoeff + o->pcoeff + o->dcoeff) / eo;
    const double coeff2 = -(o->pcoeff + 2.0 * o->dcoeff) / eo;
    const double coeff3 = o->dcoeff / eo;
    CR[CLN_CR_TAU1] = tau1;
    CR[CLN_CR_CLIP_FLOOR] = cln_clip_floor(sd->prec, tau1);
    CR[CLN_CR_RTOL] = o->rtol;
    CR[CLN_CR_ATOL] = o->atol;
    CR[CLN_CR_SAFETY] = o->safety;
    CR[CLN_CR_FACTORMIN] = o->factormin;
    CR[CLN_CR_FACTORMAX] = o->factormax;
    CR[CLN_CR_COEFF1] = coeff1;
    CR[CLN_CR_COEFF2] = coeff2;
    CR[CLN_CR_COEFF3] = coeff3;
    CR[CLN_CR_DTMIN] = o->dtmin;
    CR[CLN_CR_DTMAX] = o->dtmax;
    CR[CLN_CR_DIR] = dir;
    CR[CLN_CR_SQRT_N] = sqrt((double)sd->N);
    CR[CLN_CR_TAU0] = tau0;
    CR[CLN_CR_DT0] = dt0;
    for (int i = 0; i < s; ++i) {
        for (int j = 0; j < s; ++j)
            CR[CLN_CR_A + i * CLN_MAX_STAGES + j] = m->a[i * s + j];
        CR[CLN_CR_B + i] = m->b[i];
        CR[CLN_CR_E + i] = m->b_error ? m->b_error[i] : 0.0;
        CR[CLN_CR_C + i] = m->c[i];
        if (m->interpolation == CLNODE_INTERP_DOPRI5 && i < 7)
            CR[CLN_CR_CMID + i] = cln_dopri5_cmid[i];
        if (m->interpolation == CLNODE_INTERP_DOPRI8 && i < 14)
            for (int d = 0; d < CLN_DENSE_COEFFS; ++d)
                CR[CLN_CR_DENSE + i * CLN_DENSE_COEFFS + d] =
                    cln_dopri8_dense[i * CLN_DENSE_COEFFS + d];
    }
    CI[CLN_CI_B] = (int32_t)sd->B;
    CI[CLN_CI_BREAL] = (int32_t)sd->Breal;
    CI[CLN_CI_N] = (int32_t)sd->N;
    CI[CLN_CI_LDZ] = (int32_t)sd->ldz;
    CI[CLN_CI_STAGES] = s;
    CI[CLN_CI_FSAL] = m->fsal;
    CI[CLN_CI_SSAL] = m->ssal;
    CI[CLN_CI_ADAPTIVE] = !o->constant_step;
    CI[CLN_CI_INTERP] = (int32_t)m->interpolation;
    CI[CLN_CI_MAX_STEPS] = (int32_t)o->max_steps;
    CI[CLN_CI_HAS_DTMIN] = !o->constant_step && o->dtmin > 0.0;
    CI[CLN_CI_HAS_DTMAX] = !o->constant_step && o->dtmax > 0.0;
    CI[CLN_CI_FORCE_DTMIN] = o->force_dtmin != 0;
    CI[CLN_CI_SAVE_STEPS] = o->save_steps != 0;
    CI[CLN_CI_N_TS] = (int32_t)o->n_save_ts;
    CI[CLN_CI_COEFF1_ZERO] = coeff1 == 0.0;
    CI[CLN_CI_COEFF2_ZERO] = coeff2 == 0.0;
    CI[CLN_CI_COEFF3_ZERO] = coeff3 == 0.0;
    CI[CLN_CI_TIME_INPUT] = r->model->time_input;
    CI[CLN_CI_FLOOR_DETECT] = !o->constant_step && o->precision_guard != CLNODE_GUARD_OFF;
}

/* The guard before a solve: rtol against the measured unit roundoff of the device's GEMM in the
 * solve's precision and mode (probed once per context). Warns, or refuses with
 * CLNODE_ERR_PRECISION, when rtol < CLNODE_GUARD_FACTOR u. */
static clnode_status cln_guard_tolerance(clnode_context *ctx, const clnode_solve_options *o)
{
    if (o->constant_step || o->precision_guard == CLNODE_GUARD_OFF)
        return CLNODE_OK;
    const clnode_probe_result *pr = NULL;
    const clnode_status st = cln_probe_cached(ctx, o->precision, o->gemm_mode, &pr);
    if (st != CLNODE_OK)
        return st;
    const double floor = CLNODE_GUARD_FACTOR * pr->unit_roundoff;
    if (o->rtol >= floor)
        return CLNODE_OK;
    if (o->precision_guard == CLNODE_GUARD_REFUSE)
        return cln_fail(ctx, CLNODE_ERR_PRECISION,
                        "rtol %g is below what %s resolves in %s with GEMM mode %s (measured %s, "
                        "unit roundoff %.3g; rtol must be at least %g u = %.3g)",
                        o->rtol, ctx->backend->device_name, clnode_precision_name(o->precision),
                        clnode_gemm_mode_name(o->gemm_mode), clnode_gemm_class_name(pr->gemm_class),
                        pr->unit_roundoff, CLNODE_GUARD_FACTOR, floor);
    cln_log(ctx, CLNODE_LOG_WARN,
            "rtol %g is below what %s resolves in %s with GEMM mode %s (measured %s, unit "
            "roundoff %.3g; rtol should be at least %g u = %.3g): expect many more steps, or "
            "trajectories ending with precision_floor",
            o->rtol, ctx->backend->device_name, clnode_precision_name(o->precision),
            clnode_gemm_mode_name(o->gemm_mode), clnode_gemm_class_name(pr->gemm_class),
            pr->unit_roundoff, CLNODE_GUARD_FACTOR, floor);
    return CLNODE_OK;
}

/* One warning per solve that ended trajectories at the rounding floor. */
static void cln_report_floor(clnode_context *ctx, const clnode_solve_options *o,
                             const clnode_solution *s)
{
    size_t hit = 0, first = 0;
    for (size_t b = s->B; b-- > 0;)
        if (s->stats[b].result == CLNODE_RESULT_PRECISION_FLOOR) {
            ++hit;
            first = b;
        }
    if (!hit)
        return;
    const int pi = o->precision == CLNODE_FP64, mi = o->gemm_mode == CLNODE_GEMM_TF32;
    char measured[96] = "";
    if (ctx->probe_done[pi][mi])
        snprintf(measured, sizeof measured, " (measured %s, unit roundoff %.3g)",
                 clnode_gemm_class_name(ctx->probe[pi][mi].gemm_class),
                 ctx->probe[pi][mi].unit_roundoff);
    cln_log(ctx, CLNODE_LOG_WARN,
            "precision_floor: %zu of %zu trajectories (the first: %zu, at t = %g) stopped with "
            "their error estimate at the rounding floor of %s in %s with GEMM mode %s%s: rtol %g "
            "is below what this arithmetic resolves; use GEMM mode strict, fp64, or a larger rtol",
            hit, s->B, first, s->stats[first].t_final, ctx->backend->device_name,
            clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_mode), measured,
            o->rtol);
}

/* Allocates the solution and reads every result back (one transfer per buffer). */
static clnode_status cln_collect(cln_run *r, const double *y0, double dir, clnode_solution **out)
{
    clnode_context *ctx = r->ctx;
    const clnode_solve_options *o = r->o;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, Bpad = sd->B, N = sd->N;
    const clnode_method *m = o->method;
    clnode_status st = CLNODE_OK;
    double *rs = NULL;
    int32_t *is = NULL;
    clnode_solution *s = calloc(1, sizeof *s);
    CLN_CHECK(ctx, s, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution");
    s->B = B;
    s->N = N;
    s->cap[CLNODE_SAVE_T0] = o->save_t0 ? 1 : 0;
    s->cap[CLNODE_SAVE_TS] = o->n_save_ts;
    s->cap[CLNODE_SAVE_STEPS] = o->save_steps ? (size_t)o->max_steps : 0;
    s->cap[CLNODE_SAVE_T1] = o->save_t1 ? 1 : 0;
    s->stats = calloc(B, sizeof *s->stats);
    s->y_final = calloc(B * N, sizeof(double));
    rs = malloc(B * CLN_RS_COUNT * sizeof(double));
    is = malloc(B * CLN_IS_COUNT * sizeof(int32_t));
    if (!s->stats || !s->y_final || !rs || !is) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution of %zu x %zu", B,
                      N);
        goto fail;
    }
    for (int k = 0; k < 4; ++k) {
        if (!s->cap[k])
            continue;
        s->count[k] = calloc(B, sizeof(size_t));
        s->ts[k] = calloc(B * s->cap[k], sizeof(double));
        s->ys[k] = calloc(B * s->cap[k] * N, sizeof(double));
        if (!s->count[k] || !s->ts[k] || !s->ys[k]) {
            st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu saved points",
                          B * s->cap[k]);
            goto fail;
        }
    }
    /* rows past Breal are padding: only the first B rows of each buffer are read */
    (void)Bpad;
    CLN_TRY(st, cln_download(r->be, sd, sd->RS, 0, rs, B * CLN_RS_COUNT));
    CLN_TRY(st, r->be->ops->buf_read(r->be, sd->IS, 0, B * CLN_IS_COUNT * sizeof(int32_t), is));
    CLN_TRY(st, cln_download(r->be, sd, sd->Y, 0, s->y_final, B * N));
    if (s->cap[CLNODE_SAVE_TS])
        CLN_TRY(st,
                cln_download(r->be, sd, sd->TSOUT, 0, s->ys[CLNODE_SAVE_TS], B * o->n_save_ts * N));
    if (s->cap[CLNODE_SAVE_STEPS]) {
        CLN_TRY(st, cln_download(r->be, sd, sd->STT, 0, s->ts[CLNODE_SAVE_STEPS],
                                 B * (size_t)o->max_steps));
        CLN_TRY(st, cln_download(r->be, sd, sd->STY, 0, s->ys[CLNODE_SAVE_STEPS],
                                 B * (size_t)o->max_steps * N));
    }
    for (size_t b = 0; b < B; ++b) {
        const int32_t *ib = is + b * CLN_IS_COUNT;
        clnode_trajectory_stats *t = &s->stats[b];
        t->result = (clnode_result)ib[CLN_IS_RESULT];
        t->num_steps = ib[CLN_IS_NSTEPS];
        t->num_accepted = ib[CLN_IS_NACC];
        t->num_rejected = ib[CLN_IS_NREJ];
        t->num_rhs_evals =
            m->fsal ? 1 + (long)(m->stages - 1) * t->num_steps : (long)m->stages * t->num_steps;
        t->t_final = dir * rs[b * CLN_RS_COUNT + CLN_RS_T];
        if (s->cap[CLNODE_SAVE_T0]) {
            s->count[CLNODE_SAVE_T0][b] = 1;
            s->ts[CLNODE_SAVE_T0][b] = cln_round(sd->prec, o->t0);
            for (size_t n = 0; n < N; ++n)
                s->ys[CLNODE_SAVE_T0][b * N + n] = cln_round(sd->prec, y0[b * N + n]);
        }
        if (s->cap[CLNODE_SAVE_TS]) {
            size_t nts = (size_t)ib[CLN_IS_NTS];
            if (o->t0 == o->t1) { /* diffrax: every requested time receives y0 */
                nts = o->n_save_ts;
                for (size_t j = 0; j < nts; ++j)
                    memcpy(s->ys[CLNODE_SAVE_TS] + (b * nts + j) * N, s->y_final + b * N,
                           N * sizeof(double));
            }
            s->count[CLNODE_SAVE_TS][b] = nts;
            for (size_t j = 0; j < o->n_save_ts; ++j)
                s->ts[CLNODE_SAVE_TS][b * o->n_save_ts + j] = cln_round(sd->prec, o->save_ts[j]);
        }
        if (s->cap[CLNODE_SAVE_STEPS])
            s->count[CLNODE_SAVE_STEPS][b] = (size_t)ib[CLN_IS_NSTEPS_SAVED];
        if (s->cap[CLNODE_SAVE_T1]) {
            s->count[CLNODE_SAVE_T1][b] = 1;
            s->ts[CLNODE_SAVE_T1][b] = t->t_final;
            memcpy(s->ys[CLNODE_SAVE_T1] + b * N, s->y_final + b * N, N * sizeof(double));
        }
    }
    free(rs);
    free(is);
    *out = s;
    return CLNODE_OK;
fail:
    free(rs);
    free(is);
    clnode_solution_destroy(&s);
    return st;
}

clnode_status clnode_solve(clnode_context *ctx, const clnode_model *model,
                           const clnode_solve_options *opts, size_t batch, const double *y0,
                           clnode_solution **out)
{
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && out, CLNODE_ERR_INVALID_ARGUMENT, "clnode_solve: NULL context or out");
    *out = NULL;
    clnode_solve_options defaults;
    if (!opts) {
        clnode_solve_default_options(&defaults);
        opts = &defaults;
    }
    clnode_status st = cln_validate(ctx, model, opts, batch, y0);
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    if (!be->ops->supports(be, opts->precision))
        return cln_fail(
            ctx, opts->precision == CLNODE_FP64 ? CLNODE_ERR_NO_FP64 : CLNODE_ERR_UNSUPPORTED,
            "device %s cannot solve in %s", be->device_name,
            clnode_precision_name(opts->precision));
    st = cln_guard_tolerance(ctx, opts);
    if (st != CLNODE_OK)
        return st;

    cln_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.be = be;
    r.model = model;
    r.o = opts;
    cln_solve_dev *sd = &r.sd;
    const clnode_method *m = opts->method;
    sd->prec = opts->precision;
    sd->gemm_mode = opts->gemm_mode;
    sd->esize = opts->precision == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t align = be->row_align ? be->row_align : 1;
    sd->Breal = batch;
    sd->B = (batch + align - 1) / align * align;
    sd->N = clnode_model_dim(model);
    sd->ldz = sd->N + (model->time_input ? 1 : 0);
    sd->stages = (size_t)m->stages;
    sd->num_layers = model->num_layers;
    sd->sizes = model->sizes;
    size_t maxw = 1;
    sd->max_in = sd->max_weights = 0;
    for (size_t l = 0; l < model->num_layers; ++l) {
        sd->act[l] =
            (int)(l + 1 == model->num_layers ? model->final_activation : model->activation);
        if (model->sizes[l + 1] > maxw)
            maxw = model->sizes[l + 1];
        if (model->sizes[l] > sd->max_in)
            sd->max_in = model->sizes[l];
        if (model->sizes[l] * model->sizes[l + 1] > sd->max_weights)
            sd->max_weights = model->sizes[l] * model->sizes[l + 1];
    }

    /* times in the direction-normalised variable tau = dir * t, in the state precision */
    const double dir = opts->t1 >= opts->t0 ? 1.0 : -1.0;
    const double tau0 = dir * cln_round(sd->prec, opts->t0);
    const double tau1 = dir * cln_round(sd->prec, opts->t1);
    double dt0 = opts->dt0 != 0.0 ? fabs(opts->dt0) : 0.01; /* diffrax 0.7.2: dt0=None -> 0.01 */
    dt0 = cln_round(sd->prec, dt0);
    if (!opts->constant_step && opts->dtmax > 0.0 && dt0 > cln_round(sd->prec, opts->dtmax))
        dt0 = cln_round(sd->prec, opts->dtmax);
    if (!opts->constant_step && opts->dtmin > 0.0 && dt0 < cln_round(sd->prec, opts->dtmin))
        dt0 = cln_round(sd->prec, opts->dtmin);

    const size_t B = sd->B, N = sd->N, L = model->num_layers;
    size_t bn, fsz;
    if (!cln_mul_size(B, N, &bn) || !cln_mul_size(bn, sd->stages, &fsz))
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "batch %zu x dimension %zu is too large", B,
                        N);
    double *tsbuf = NULL;
    for (size_t l = 0; l < L; ++l) {
        CLN_TRY(st, cln_alloc(&r, &sd->W[l], model->sizes[l] * model->sizes[l + 1], sd->esize));
        CLN_TRY(st, cln_upload(be, sd, sd->W[l], 0, model->weights[l],
                               model->sizes[l] * model->sizes[l + 1]));
        if (model->biases[l]) {
            CLN_TRY(st, cln_alloc(&r, &sd->bias[l], model->sizes[l + 1], sd->esize));
            CLN_TRY(st, cln_upload(be, sd, sd->bias[l], 0, model->biases[l], model->sizes[l + 1]));
        }
    }
    CLN_TRY(st, cln_alloc(&r, &sd->Y, bn, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->F, fsz, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->Z, B * sd->ldz, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->H[0], B * maxw, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->H[1], B * maxw, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->CR, CLN_CR_COUNT, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->CI, CLN_CI_COUNT, sizeof(int32_t)));
    CLN_TRY(st, cln_alloc(&r, &sd->RS, B * CLN_RS_COUNT, sd->esize));
    CLN_TRY(st, cln_alloc(&r, &sd->IS, B * CLN_IS_COUNT, sizeof(int32_t)));
    CLN_TRY(st, cln_alloc(&r, &sd->TS, opts->n_save_ts, sd->esize));
    {
        size_t tsout = 0, steps_t = 0, steps_y = 0;
        if (!cln_mul_size(bn, opts->n_save_ts, &tsout) ||
            !cln_mul_size(B, opts->save_steps ? (size_t)opts->max_steps : 0, &steps_t) ||
            !cln_mul_size(steps_t, N, &steps_y)) {
            st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "the saved points do not fit in memory");
            goto fail;
        }
        CLN_TRY(st, cln_alloc(&r, &sd->TSOUT, tsout, sd->esize));
        CLN_TRY(st, cln_alloc(&r, &sd->STT, steps_t, sd->esize));
        CLN_TRY(st, cln_alloc(&r, &sd->STY, steps_y, sd->esize));
    }

    {
        double CR[CLN_CR_COUNT];
        int32_t CI[CLN_CI_COUNT];
        cln_fill_constants(&r, dir, tau0, tau1, dt0, CR, CI);
        CLN_TRY(st, cln_upload(be, sd, sd->CR, 0, CR, CLN_CR_COUNT));
        CLN_TRY(st, be->ops->buf_write(be, sd->CI, 0, sizeof CI, CI));
    }
    if (opts->n_save_ts) {
        tsbuf = malloc(opts->n_save_ts * sizeof(double));
        if (!tsbuf) {
            st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the save times");
            goto fail;
        }
        for (size_t j = 0; j < opts->n_save_ts; ++j)
            tsbuf[j] = dir * cln_round(sd->prec, opts->save_ts[j]);
        CLN_TRY(st, cln_upload(be, sd, sd->TS, 0, tsbuf, opts->n_save_ts));
        free(tsbuf);
        tsbuf = NULL;
    }
    CLN_TRY(st, cln_upload(be, sd, sd->Y, 0, y0, batch * N)); /* padding rows stay zero */

    const long syncs0 = be->syncs;
    CLN_TRY(st, be->ops->solve_begin(be, sd));
    r.begun = 1;
    CLN_TRY(st, be->ops->init(be, sd));
    if (m->fsal) { /* f(t0, y0), reused as the first stage of the first step */
        CLN_TRY(st, be->ops->stage(be, sd, 0));
        CLN_TRY(st, cln_rhs(&r, 0));
    }

    {
        const double start = cln_now();
        double last_report = start;
        const long group = be->group_steps > 0 ? be->group_steps : 1;
        size_t active = batch;
        long it = 0;
        CLN_TRY(st, be->ops->count_active(be, sd, &active));
        while (active > 0 && it < opts->max_steps) {
            for (long g = 0; g < group && it < opts->max_steps; ++g, ++it)
                CLN_TRY(st, cln_step(&r));
            CLN_TRY(st, be->ops->count_active(be, sd, &active));
            if (opts->progress && active > 0) {
                const double now = cln_now();
                if (now - last_report >= 1.0) {
                    last_report = now;
                    double tmin = tau1;
                    double rs4[CLN_RS_COUNT];
                    /* one trajectory's time is enough for a progress figure on large batches;
                     * read the first active one cheaply: scan at most 64 rows */
                    for (size_t b = 0; b < B && b < 64; ++b) {
                        CLN_TRY(st,
                                cln_download(be, sd, sd->RS, b * CLN_RS_COUNT, rs4, CLN_RS_COUNT));
                        if (rs4[CLN_RS_T] < tmin)
                            tmin = rs4[CLN_RS_T];
                    }
                    const double span = tau1 - tau0;
                    const double frac = span > 0 ? (tmin - tau0) / span : 1.0;
                    if (opts->progress(opts->progress_user, active, batch, frac, it)) {
                        st = cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "cancelled");
                        goto fail;
                    }
                }
            }
        }
    }
    CLN_TRY(st, cln_collect(&r, y0, dir, out));
    (*out)->syncs = be->syncs - syncs0;
    cln_report_floor(ctx, opts, *out);
    cln_release(&r);
    return CLNODE_OK;
fail:
    free(tsbuf);
    cln_release(&r);
    return st;
}
