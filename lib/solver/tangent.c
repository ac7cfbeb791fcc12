/* tangent.c - forward mode (clnode/tangent.h): the checks, the directions in the state
 * precision, their chunks under max_bytes, and the backend's blocks of each chunk in groups
 * (cancel and progress between them) over the schedule of tangent_schedule.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"
#include "solver/gradient_job.h"
#include "solver/solution.h"
#include "solver/tangent_schedule.h"
#include "clnode/tangent.h"

struct clnode_tangent {
    size_t ndir;
    double *values; /* ndir x B x slots x N */
};

#define CLN_TAN_DEFAULT_BYTES ((size_t)256 << 20)

static void tangent_defaults(clnode_tangent_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

CLN_DEFAULTS_SIZED(clnode_tangent_default_options_sized, clnode_tangent_options, tangent_defaults)

void clnode_tangent_destroy(clnode_tangent **pt)
{
    if (!pt || !*pt)
        return;
    free((*pt)->values);
    free(*pt);
    *pt = NULL;
}

const double *clnode_tangent_values(const clnode_tangent *t)
{
    return t ? t->values : NULL;
}

size_t clnode_tangent_directions(const clnode_tangent *t)
{
    return t ? t->ndir : 0;
}

/* ---- the directions: checked, in the state precision ---- */

/* Value v of direction array `what` is finite (and, rounded to fp32, still finite); where names
 * its place. */
static clnode_status cln_tan_value(clnode_context *ctx, double v, int fp32, const char *what,
                                   size_t d, const char *where)
{
    CLN_CHECK(ctx, isfinite(v), CLNODE_ERR_NONFINITE_INPUT,
              "clnode_tangent_compute: %s of direction %zu, %s, is %g", what, d, where, v);
    CLN_CHECK(ctx, !fp32 || fabs(v) < CLN_FP32_LIMIT, CLNODE_ERR_NONFINITE_INPUT,
              "clnode_tangent_compute: %s of direction %zu, %s, is %.9g: it rounds to an fp32 "
              "infinity (from |x| >= %.9g), which this fp32 pass would carry",
              what, d, where, v, CLN_FP32_LIMIT);
    return CLNODE_OK;
}

/* A direction array of ndir x rows x per doubles (NULL: none, *out NULL) into *out in the state
 * precision, every value checked: named by direction, trajectory and component (per_traj), or
 * by direction and parameter. */
static clnode_status cln_tan_dir(clnode_context *ctx, const double *src, size_t ndir, size_t rows,
                                 size_t per, int per_traj, size_t esize, const char *what,
                                 void **out)
{
    *out = NULL;
    size_t n = 0, bytes = 0;
    const int fits =
        cln_mul_size(ndir, rows, &n) && cln_mul_size(n, per, &n) && cln_mul_size(n, esize, &bytes);
    if (!src || n == 0)
        return CLNODE_OK;
    *out = fits ? malloc(bytes) : NULL;
    CLN_CHECK(ctx, *out, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu directions of %s", ndir,
              what);
    for (size_t i = 0; i < n; ++i) {
        const double v = src[i];
        if (!isfinite(v) || (esize == sizeof(float) && fabs(v) >= CLN_FP32_LIMIT)) {
            char where[96];
            const size_t d = i / (rows * per), r = i / per % rows, c = i % per;
            if (per_traj)
                snprintf(where, sizeof where, "trajectory %zu, component %zu", r, c);
            else
                snprintf(where, sizeof where, "parameter %zu", c);
            return cln_tan_value(ctx, v, esize == sizeof(float), what, d, where);
        }
        if (esize == sizeof(float))
            ((float *)*out)[i] = (float)v;
        else
            ((double *)*out)[i] = v;
    }
    return CLNODE_OK;
}

/* ---- the chunks of directions ---- */

/* What a pass holds besides the reverse job: the directions in the state precision. */
typedef struct cln_tan_run {
    cln_rev_run r;
    void *dy0, *dinputs, *dparams;
} cln_tan_run;

static void cln_tan_run_free(cln_tan_run *t)
{
    cln_rev_run_free(&t->r);
    free(t->dy0);
    free(t->dinputs);
    free(t->dparams);
}

/* The scratch of one direction: a block's tangent rows (the states, the stages' arguments and
 * values, the layers' tangents) and the weights' directions. */
static size_t cln_tan_dir_bytes(const cln_rev_job *job, size_t esize)
{
    const size_t N = (size_t)job->KI->N, ldz = (size_t)job->KI->ldz;
    const size_t S = (size_t)job->KI->stages;
    size_t maxw = ldz, weights = 0;
    for (size_t l = 0; l < job->num_layers; ++l) {
        maxw = job->sizes[l + 1] > maxw ? job->sizes[l + 1] : maxw;
        weights += job->sizes[l] * (job->sizes[l + 1] + 16);
    }
    return (CLN_REV_BLOCK * (2 * N + S * (ldz + N) + 3 * maxw) + weights) * esize;
}

static double cln_tan_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Between groups of blocks: cancel, and progress at most once a second. */
static clnode_status cln_tan_between(clnode_context *ctx, const clnode_tangent_options *o,
                                     const cln_rev_job *job, size_t done, size_t d0, size_t ndir,
                                     double *last)
{
    if (o->cancel && o->cancel(o->cancel_user))
        return cln_fail(ctx, CLNODE_ERR_CANCELLED,
                        "tangent pass cancelled by the caller after %zu of %zu trajectories of "
                        "directions %zu of %zu",
                        done, job->B, d0, ndir);
    const double now = cln_tan_now();
    if (o->progress && now - *last >= 1.0) {
        *last = now;
        const double frac = ((double)d0 + (double)done / (double)job->B) / (double)ndir;
        if (o->progress(o->progress_user, job->B - done, job->B, frac,
                        (long)(job->off_t[done] - done)))
            return cln_fail(ctx, CLNODE_ERR_CANCELLED, "cancelled by the progress callback");
    }
    return CLNODE_OK;
}

/* Directions [d0, d0 + nd) through the backend, a group of blocks at a time. */
static clnode_status cln_tan_chunk(clnode_context *ctx, const clnode_tangent_options *o,
                                   const cln_tan_run *tr, size_t esize, size_t d0, size_t nd,
                                   size_t ndir, double *out)
{
    cln_backend *be = ctx->backend;
    const cln_rev_job *rj = &tr->r.job;
    const size_t B = rj->B, N = (size_t)rj->KI->N, n_in = rj->n_in;
    const unsigned char *dy = tr->dy0, *dc = tr->dinputs, *dp = tr->dparams;
    const cln_tan_job job = {
        .rev = rj,
        .ndir = nd,
        .dy0 = dy ? dy + d0 * B * N * esize : NULL,
        .dinputs = dc ? dc + d0 * B * n_in * esize : NULL,
        .dparams = dp ? dp + d0 * rj->ntheta * esize : NULL,
        .out = out + d0 * B * rj->slots * N,
    };
    void *state = NULL;
    size_t group = 1;
    const cln_tan_ops *ops = NULL;
    clnode_status st = be->ops->tan_begin(be, &job, &state, &group, &ops);
    const cln_tan_plan plan = {ctx, &job, ops};
    const size_t nb = (B + CLN_REV_BLOCK - 1) / CLN_REV_BLOCK;
    group = group < 1 ? 1 : group;
    double last = cln_tan_now();
    for (size_t b0 = 0; st == CLNODE_OK && b0 < nb; b0 += group) {
        const size_t cnt = nb - b0 < group ? nb - b0 : group;
        st = cln_tan_between(ctx, o, rj, b0 * CLN_REV_BLOCK, d0, ndir, &last);
        if (st == CLNODE_OK)
            st = be->ops->tan_each(be, state, b0, cnt, cln_tan_schedule, &plan);
    }
    be->ops->tan_end(be, state);
    return st;
}

/* ---- the entry point ---- */

static clnode_status cln_tan_check(clnode_context *ctx, const clnode_model *model,
                                   const clnode_solution *sol, size_t slots, size_t ndir)
{
    CLN_CHECK(ctx, ndir > 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_tangent_compute: ndir is 0 (at least one direction)");
    clnode_status st = cln_rev_check_tape(ctx, model, sol, "clnode_tangent_compute");
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, ctx->backend->ops->tan_begin, CLNODE_ERR_UNSUPPORTED,
              "clnode_tangent_compute: %s has no tangent pass yet (use the device \"host\")",
              ctx->backend->device_name);
    for (size_t b = 0; b < sol->B; ++b) {
        const size_t P = clnode_solution_points(sol, b);
        CLN_CHECK(ctx, P <= slots, CLNODE_ERR_INVALID_ARGUMENT,
                  "clnode_tangent_compute: trajectory %zu saved %zu points, more than the %zu "
                  "slots of the tangents' rows",
                  b, P, slots);
    }
    return CLNODE_OK;
}

/* The job and the directions in the state precision. */
static clnode_status cln_tan_prepare(clnode_context *ctx, const clnode_model *model,
                                     const clnode_solution *sol, size_t slots, size_t ndir,
                                     const double *dy0, const double *dinputs,
                                     const double *dparams, cln_tan_run *tr)
{
    cln_rev_job *job = &tr->r.job;
    const size_t es = sol->tape->esize;
    clnode_gradient lay;
    clnode_status st = CLNODE_OK;
    cln_rev_job_tape(model, sol, slots, NULL, job);
    job->ntheta = cln_rev_layout(model, job, &lay);
    CLN_TRY(st, cln_rev_fill(ctx, model, sol, &tr->r));
    CLN_TRY(st, cln_rev_events(ctx, sol, slots, &tr->r.off_ev, &tr->r.ev));
    job->off_ev = tr->r.off_ev;
    job->ev = tr->r.ev;
    CLN_TRY(st, cln_tan_dir(ctx, dy0, ndir, sol->B, sol->N, 1, es, "dy0", &tr->dy0));
    CLN_TRY(st, cln_tan_dir(ctx, model->num_inputs ? dinputs : NULL, ndir, sol->B,
                            model->num_inputs, 1, es, "dinputs", &tr->dinputs));
    CLN_TRY(st, cln_tan_dir(ctx, dparams, ndir, 1, job->ntheta, 0, es, "dparams", &tr->dparams));
fail:
    return st;
}

clnode_status clnode_tangent_compute(clnode_context *ctx, const clnode_model *model,
                                     const clnode_tangent_options *opts, const clnode_solution *sol,
                                     size_t slots, size_t ndir, const double *dy0,
                                     const double *dinputs, const double *dparams,
                                     clnode_tangent **out)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && out, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_tangent_compute: NULL context or out");
    *out = NULL;
    CLN_CHECK(ctx, model && sol, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_tangent_compute: NULL model or solution");
    clnode_tangent_options o;
    tangent_defaults(&o);
    clnode_status st =
        cln_struct_import(ctx, "clnode_tangent_options", opts,
                          CLN_END_OF(clnode_tangent_options, struct_size), &o, sizeof o);
    if (st == CLNODE_OK)
        st = cln_tan_check(ctx, model, sol, slots, ndir);
    if (st != CLNODE_OK)
        return st;
    cln_tan_run tr;
    memset(&tr, 0, sizeof tr);
    clnode_tangent *t = NULL;
    CLN_TRY(st, cln_tan_prepare(ctx, model, sol, slots, ndir, dy0, dinputs, dparams, &tr));
    const size_t es = sol->tape->esize, per = cln_tan_dir_bytes(&tr.r.job, es);
    const size_t bound = o.max_bytes ? o.max_bytes : CLN_TAN_DEFAULT_BYTES;
    if (per > bound) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                      "clnode_tangent_compute: one direction's scratch is %zu bytes, more than "
                      "max_bytes (%zu)",
                      per, bound);
        goto fail;
    }
    const size_t chunk = bound / per < ndir ? bound / per : ndir;
    size_t n = 0;
    t = calloc(1, sizeof *t);
    const int fits =
        cln_mul_size(ndir, sol->B, &n) && cln_mul_size(n, slots, &n) && cln_mul_size(n, sol->N, &n);
    if (t && fits)
        t->values = calloc(n ? n : 1, sizeof(double));
    if (!t || !t->values) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                      "cannot allocate the tangents of %zu "
                      "directions",
                      ndir);
        goto fail;
    }
    t->ndir = ndir;
    for (size_t d0 = 0; d0 < ndir; d0 += chunk)
        CLN_TRY(st, cln_tan_chunk(ctx, &o, &tr, es, d0, ndir - d0 < chunk ? ndir - d0 : chunk, ndir,
                                  t->values));
    cln_tan_run_free(&tr);
    *out = t;
    return CLNODE_OK;
fail:
    cln_tan_run_free(&tr);
    clnode_tangent_destroy(&t);
    return st;
}
