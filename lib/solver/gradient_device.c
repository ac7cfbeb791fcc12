/* gradient_device.c - the reverse pass from and into the caller's device arrays
 * (clnode/device_gradient.h): the cotangents checked by a kernel, then gradient.c's pass with
 * the cotangents copied and the rows of the gradients scattered on the device (a backend whose
 * reverse pass takes device arrays: rev_device_arrays), or on the host's values converted to and
 * from double (the host backend); the parameters' and the scale's gradients written at the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "clnode/device_gradient.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"
#include "solver/gradient_job.h"
#include "solver/solution.h"
#include "solver/solver_internal.h"
#include "solver/tape.h"

#define CLN_DEVICE_GRADIENT_MIN CLN_END_OF(clnode_device_gradient, scale)

static const char FN[] = "clnode_gradient_compute_device";

static void device_gradient_defaults(clnode_device_gradient *g)
{
    memset(g, 0, sizeof *g);
    g->struct_size = sizeof *g;
}

CLN_DEFAULTS_SIZED(clnode_device_gradient_default_sized, clnode_device_gradient,
                   device_gradient_defaults)

/* The caller's arrays adopted by the backend for one pass (released with it), and the flags. */
typedef struct dg_arrays {
    cln_buf *cot, *y0, *inputs, *params, *scale, *flag;
} dg_arrays;

/* One caller's array of n values of es bytes, adopted (NULL handle: none). */
static clnode_status dg_adopt(clnode_context *ctx, const clnode_device_array *a, size_t n,
                              size_t es, const char *what, cln_buf **out)
{
    cln_backend *be = ctx->backend;
    *out = NULL;
    if (!a->handle)
        return CLNODE_OK;
    CLN_CHECK(ctx, a->offset % es == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: an offset of %zu bytes, not a multiple of the %zu bytes of a value", what,
              a->offset, es);
    size_t bytes;
    CLN_CHECK(ctx, cln_mul_size(n, es, &bytes), CLNODE_ERR_INVALID_ARGUMENT,
              "%s: %zu values overflow", what, n);
    return be->ops->buf_adopt(be, a->handle, a->offset, bytes, what, out);
}

/* The value of element i of the caller's array a (buffer buf) in the state precision. */
static clnode_status dg_value(clnode_context *ctx, cln_buf *buf, const clnode_device_array *a,
                              size_t i, size_t es, double *v)
{
    unsigned char raw[sizeof(double)];
    const clnode_status st =
        ctx->backend->ops->buf_read(ctx->backend, buf, a->offset + i * es, es, raw);
    float f;
    if (es == sizeof f)
        memcpy(&f, raw, sizeof f);
    else
        memcpy(v, raw, sizeof *v);
    if (es == sizeof f)
        *v = (double)f;
    return st;
}

/* The cotangents of every trajectory's points finite: cln_nonfinite_row over each trajectory's
 * row of the array (its first value that is not finite, padding slots included), one read of the
 * flags, and the first one inside a trajectory's points refused as clnode_gradient_compute
 * refuses it. */
static clnode_status dg_check_cot(clnode_context *ctx, const clnode_solution *sol,
                                  const clnode_device_gradient *g, dg_arrays *a)
{
    cln_backend *be = ctx->backend;
    const size_t B = sol->B, N = sol->N, es = sol->tape->esize, w = g->slots * N;
    if (!w)
        return CLNODE_OK; /* no slots: no points (cln_rev_check_slots) */
    int64_t *flag = malloc(B * sizeof *flag);
    clnode_status st =
        flag ? be->ops->buf_alloc(be, B * sizeof *flag, &a->flag)
             : cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the checks' flags");
    if (st == CLNODE_OK)
        st = be->ops->nonfinite_rows(be, sol->tape->prec, a->cot, g->cot.offset / es, w, w, B,
                                     a->flag);
    if (st == CLNODE_OK)
        st = be->ops->buf_read(be, a->flag, 0, B * sizeof *flag, flag);
    for (size_t b = 0; st == CLNODE_OK && b < B; ++b) {
        if (!flag[b] || (size_t)flag[b] > clnode_solution_points(sol, b) * N)
            continue;
        const size_t i = (size_t)flag[b] - 1;
        double v = 0.0;
        st = dg_value(ctx, a->cot, &g->cot, b * w + i, es, &v);
        if (st == CLNODE_OK)
            st = cln_rev_cot_fail(ctx, FN, b, i / N, i % N, v);
    }
    free(flag);
    return st;
}

/* The element size es's precision, for the solver's conversions (cln_upload, cln_download). */
static cln_solve_dev dg_prec(size_t es)
{
    cln_solve_dev sd;
    memset(&sd, 0, sizeof sd);
    sd.prec = es == sizeof(float) ? CLNODE_FP32 : CLNODE_FP64;
    sd.esize = es;
    return sd;
}

/* n doubles v, rounded to the state precision (exactly: the reverse pass computed them in it),
 * into the caller's array a (buffer buf; NULL: not wanted). */
static clnode_status dg_write(clnode_context *ctx, cln_buf *buf, const clnode_device_array *a,
                              const double *v, size_t n, size_t es)
{
    const cln_solve_dev sd = dg_prec(es);
    return buf ? cln_upload(ctx->backend, &sd, buf, a->offset / es, v, n) : CLNODE_OK;
}

/* The host backend: the cotangents read into doubles (exactly), clnode_gradient_compute's pass,
 * the rows of the gradients of y0 and the inputs written back in the state precision. */
static clnode_status dg_host(clnode_context *ctx, const clnode_model *model,
                             const clnode_gradient_options *opts, const clnode_solution *sol,
                             const clnode_device_gradient *g, dg_arrays *a, clnode_gradient **res)
{
    const size_t n = sol->B * g->slots * sol->N, es = sol->tape->esize;
    const cln_solve_dev sd = dg_prec(es);
    double *cot = malloc((n ? n : 1) * sizeof *cot);
    clnode_status st =
        cot ? cln_download(ctx->backend, &sd, a->cot, g->cot.offset / es, cot, n)
            : cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu cotangents", n);
    if (st == CLNODE_OK)
        st = cln_rev_compute(ctx, model, opts, sol, g->slots, cot, 0, NULL, NULL, res);
    free(cot);
    if (st == CLNODE_OK)
        st = dg_write(ctx, a->y0, &g->y0, clnode_gradient_y0(*res), sol->B * sol->N, es);
    if (st == CLNODE_OK)
        st = dg_write(ctx, a->inputs, &g->inputs, clnode_gradient_inputs(*res),
                      sol->B * model->num_inputs, es);
    return st;
}

/* A device: the pass on the caller's arrays, and a read that waits for its last writes when no
 * write of the parameters or the scale (which waits) follows. */
static clnode_status dg_device(clnode_context *ctx, const clnode_model *model,
                               const clnode_gradient_options *opts, const clnode_solution *sol,
                               const clnode_device_gradient *g, dg_arrays *a, clnode_gradient **res)
{
    const size_t es = sol->tape->esize;
    const cln_rev_dev dev = {
        a->cot, a->y0, a->inputs, g->cot.offset / es, g->y0.offset / es, g->inputs.offset / es};
    clnode_status st = cln_rev_compute(ctx, model, opts, sol, g->slots, NULL, 0, NULL, &dev, res);
    if (st != CLNODE_OK || a->params || a->scale || (!a->y0 && !a->inputs))
        return st;
    double v;
    return a->y0 ? dg_value(ctx, a->y0, &g->y0, 0, es, &v)
                 : dg_value(ctx, a->inputs, &g->inputs, 0, es, &v);
}

/* The checks made before anything is adopted. */
static clnode_status dg_refusals(clnode_context *ctx, const clnode_model *model,
                                 const clnode_solution *sol, const clnode_device_gradient *g)
{
    const cln_backend *be = ctx->backend;
    clnode_status st = cln_rev_check_tape(ctx, model, sol, FN);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, be->ops->rev_begin && be->ops->buf_adopt && be->ops->nonfinite_rows,
              CLNODE_ERR_UNSUPPORTED, "%s: %s (backend %s) takes no device arrays", FN,
              be->device_name, be->ops->name);
    CLN_CHECK(ctx, g->cot.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_gradient.cot is NULL: no cotangents for %zu trajectories", sol->B);
    CLN_CHECK(ctx, model->num_inputs > 0 || !g->inputs.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_gradient.inputs is given, but the model takes no conditioning "
              "inputs");
    CLN_CHECK(ctx, model->out_scale || !g->scale.handle, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_device_gradient.scale is given, but the model has no output scale");
    return cln_rev_check_slots(ctx, sol, g->slots, 0, FN);
}

clnode_status clnode_gradient_compute_device(clnode_context *ctx, const clnode_model *model,
                                             const clnode_gradient_options *opts,
                                             const clnode_solution *sol,
                                             const clnode_device_gradient *g)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx, CLNODE_ERR_INVALID_ARGUMENT, "%s: NULL context", FN);
    CLN_CHECK(ctx, model && sol && g, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: NULL model, solution or clnode_device_gradient", FN);
    clnode_device_gradient dg;
    device_gradient_defaults(&dg);
    clnode_gradient_options o;
    clnode_status st = cln_struct_import(ctx, "clnode_device_gradient", g, CLN_DEVICE_GRADIENT_MIN,
                                         &dg, sizeof dg);
    if (st == CLNODE_OK)
        st = cln_gradient_options_import(ctx, opts, &o);
    if (st == CLNODE_OK)
        st = dg_refusals(ctx, model, sol, &dg);
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    const size_t B = sol->B, N = sol->N, es = sol->tape->esize;
    dg_arrays a;
    memset(&a, 0, sizeof a);
    clnode_gradient *res = NULL;
    clnode_gradient shape; /* the parameters' layout: the weights and biases, then the scale */
    cln_rev_job layout;
    const size_t n_all = cln_rev_layout(model, &layout, &shape), n_params = shape.s_off;
    size_t cells = 0;
    CLN_CHECK(ctx, cln_mul_size(B, dg.slots, &cells) && cln_mul_size(cells, N, &cells),
              CLNODE_ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu cotangents overflow", FN, B,
              dg.slots, N);
    CLN_TRY(st, dg_adopt(ctx, &dg.cot, cells, es, "clnode_device_gradient.cot", &a.cot));
    CLN_TRY(st, dg_adopt(ctx, &dg.y0, B * N, es, "clnode_device_gradient.y0", &a.y0));
    CLN_TRY(st, dg_adopt(ctx, &dg.inputs, B * model->num_inputs, es,
                         "clnode_device_gradient.inputs", &a.inputs));
    CLN_TRY(st,
            dg_adopt(ctx, &dg.params, n_params, es, "clnode_device_gradient.params", &a.params));
    CLN_TRY(st, dg_adopt(ctx, &dg.scale, n_all - n_params, es, "clnode_device_gradient.scale",
                         &a.scale));
    CLN_TRY(st, dg_check_cot(ctx, sol, &dg, &a));
    CLN_TRY(st, be->ops->rev_device_arrays ? dg_device(ctx, model, &o, sol, &dg, &a, &res)
                                           : dg_host(ctx, model, &o, sol, &dg, &a, &res));
    CLN_TRY(st,
            dg_write(ctx, a.params, &dg.params, clnode_gradient_params(res, NULL), n_params, es));
    CLN_TRY(st, dg_write(ctx, a.scale, &dg.scale, clnode_gradient_params(res, NULL) + n_params,
                         n_all - n_params, es));
fail:
    clnode_gradient_destroy(&res);
    cln_buf *all[] = {a.cot, a.y0, a.inputs, a.params, a.scale, a.flag};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        be->ops->buf_free(be, all[i]);
    return st;
}
