/* bench.c - the bare loops of clnode/bench.h take the library's model: the GEMM and
 * vector-field loops hand the model's view (backends/model_view.h) to the backends' loops
 * (backends/bench.c), which check their arguments and run them; the VJP loop runs the reverse
 * pass's schedule (reverse_schedule.c) without a tape, on a job of one step per row. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/bench.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"
#include "solver/reverse_schedule.h"

clnode_status clnode_bench_gemm_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                     long evals, clnode_precision prec, clnode_gemm_mode mode,
                                     double *seconds, long *syncs)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_model_view v;
    return cln_bench_gemm_loop(ctx, m ? cln_model_view_of(m, &v) : NULL, batch, evals, prec, mode,
                               seconds, syncs);
}

clnode_status clnode_bench_mlp_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                    long evals, clnode_precision prec, double *seconds)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_model_view v;
    return cln_bench_mlp_loop(ctx, m ? cln_model_view_of(m, &v) : NULL, batch, evals, prec,
                              seconds);
}

/* A job of `B` rows of one step each, of `stages` stages through the model alone: no input,
 * scale or saved point, a zero tableau, fixed states; everything it points to owned here. */
typedef struct bv_job {
    cln_rev_job job;
    cln_iconsts KI;
    void *K, *params, *tau, *ys;
    size_t *off_t, *off_ev;
    double *cot, *ybar;
    cln_rev_event ev;
} bv_job;

static void bv_free(bv_job *bj)
{
    free(bj->K);
    free(bj->params);
    free(bj->tau);
    free(bj->ys);
    free(bj->off_t);
    free(bj->off_ev);
    free(bj->cot);
    free(bj->ybar);
}

static void bv_put(void *dst, size_t es, size_t i, double v)
{
    if (es == sizeof(float))
        ((float *)dst)[i] = (float)v;
    else
        ((double *)dst)[i] = v;
}

static clnode_status bv_job_make(clnode_context *ctx, const cln_model_view *m, size_t B,
                                 size_t stages, clnode_precision prec, bv_job *bj)
{
    cln_rev_job *job = &bj->job;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    const size_t nK = sizeof(CLN_CONSTS_STRUCT(double)) / sizeof(double);
    const size_t N = m->sizes[m->num_layers];
    size_t at = 0;
    for (size_t l = 0; l < m->num_layers; ++l) {
        job->w_off[l] = at;
        at += m->sizes[l] * m->sizes[l + 1];
        job->b_off[l] = at;
        at += m->bias[l] ? m->sizes[l + 1] : 0;
    }
    job->ntheta = job->s_off = at;
    size_t nys = 0;
    const int sized = cln_mul_size(2 * B, N, &nys) && B < ((size_t)-1) / 2 - 1;
    bj->K = calloc(nK, es);
    bj->params = malloc((at ? at : 1) * es);
    bj->tau = sized ? malloc(2 * B * es) : NULL;
    bj->ys = sized ? malloc(nys * es) : NULL;
    bj->off_t = sized ? malloc((B + 1) * sizeof *bj->off_t) : NULL;
    bj->off_ev = sized ? calloc(B + 1, sizeof *bj->off_ev) : NULL;
    bj->cot = sized ? calloc(B * N, sizeof *bj->cot) : NULL;
    bj->ybar = sized ? calloc(B * N, sizeof *bj->ybar) : NULL;
    CLN_CHECK(ctx,
              bj->K && bj->params && bj->tau && bj->ys && bj->off_t && bj->off_ev && bj->cot &&
                  bj->ybar,
              CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the bare VJP loop's job of %zu rows", B);
    for (size_t l = 0; l < m->num_layers; ++l) {
        const size_t nw = m->sizes[l] * m->sizes[l + 1], nb = m->bias[l] ? m->sizes[l + 1] : 0;
        for (size_t i = 0; i < nw + nb; ++i)
            bv_put(bj->params, es, job->w_off[l] + i, i < nw ? m->W[l][i] : m->bias[l][i - nw]);
        job->W[l] = (unsigned char *)bj->params + job->w_off[l] * es;
        job->bias[l] = nb ? (unsigned char *)bj->params + job->b_off[l] * es : NULL;
        job->act[l] = m->act[l];
    }
    for (size_t b = 0; b <= B; ++b)
        bj->off_t[b] = 2 * b; /* one step each, every state kept */
    for (size_t b = 0; b < B; ++b) {
        bv_put(bj->tau, es, 2 * b, 0.0);
        bv_put(bj->tau, es, 2 * b + 1, 0.1);
    }
    for (size_t i = 0; i < nys; ++i)
        bv_put(bj->ys, es, i, 0.01 * (double)(i % 97));
    bj->KI.N = (int)N;
    bj->KI.ldz = (int)m->sizes[0];
    bj->KI.stages = (int)stages;
    job->prec = prec;
    job->gemm_mode = CLNODE_GEMM_STRICT;
    job->K = bj->K;
    job->KI = &bj->KI;
    job->num_layers = m->num_layers;
    job->sizes = m->sizes;
    job->B = B;
    job->every = 1;
    job->off_t = job->off_y = bj->off_t;
    job->tau = bj->tau;
    job->ys = bj->ys;
    job->ts = bj->tau;
    job->slots = 1;
    job->cot = bj->cot;
    job->off_ev = bj->off_ev;
    job->ev = &bj->ev;
    job->ybar = job->cbar = bj->ybar;
    return CLNODE_OK;
}

static double bv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The bare run of every group of blocks: one step (warm-up), then `steps` steps timed. */
static clnode_status bv_run(clnode_context *ctx, const bv_job *bj, long steps, double *seconds)
{
    cln_backend *be = ctx->backend;
    const cln_rev_job *job = &bj->job;
    const size_t nb = (job->B + CLNODE_GRADIENT_BLOCK - 1) / CLNODE_GRADIENT_BLOCK;
    const size_t es = job->prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    void *state = NULL, *sums = NULL;
    size_t group = 1, bytes = 0;
    const cln_rev_ops *rev = NULL;
    clnode_status st = be->ops->rev_begin(be, job, &state, &group, &rev);
    if (st != CLNODE_OK)
        goto fail;
    group = group < 1 ? 1 : group < nb ? group : nb;
    sums = cln_mul_size(group, job->ntheta ? job->ntheta : 1, &bytes) &&
                   cln_mul_size(bytes, es, &bytes)
               ? malloc(bytes)
               : NULL;
    CLN_CHECK(ctx, sums, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the sums of %zu blocks", group);
    cln_rev_bare_plan bp;
    cln_rev_plan_init(&bp.plan, ctx, job, rev);
    double t0 = 0;
    for (int timed = 0; timed < 2; ++timed) {
        bp.steps = timed ? steps : 1;
        t0 = bv_now();
        for (size_t b0 = 0; b0 < nb; b0 += group)
            CLN_TRY(st, be->ops->rev_each(be, state, b0, nb - b0 < group ? nb - b0 : group, sums,
                                          cln_rev_bare, &bp));
    }
    if (seconds)
        *seconds = bv_now() - t0;
fail:
    free(sums);
    if (state)
        be->ops->rev_end(be, state);
    return st;
}

clnode_status clnode_bench_vjp_loop(clnode_context *ctx, const clnode_model *model, size_t batch,
                                    long steps, int stages, clnode_precision prec, double *seconds)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, model && batch >= 1 && steps >= 1 && stages >= 1 && stages <= CLNODE_MAX_STAGES,
              CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_bench_vjp_loop: needs a model, batch >= 1, steps >= 1 and 1 <= stages <= %d",
              CLNODE_MAX_STAGES);
    const clnode_status pst = cln_check_device_precision(ctx, prec, CLNODE_GEMM_STRICT, "compute");
    if (pst != CLNODE_OK)
        return pst;
    cln_model_view v;
    const cln_model_view *m = cln_model_view_of(model, &v);
    CLN_CHECK(ctx, m->time_input == 0 && m->num_inputs == 0 && m->out_scale == NULL,
              CLNODE_ERR_UNSUPPORTED,
              "the bare VJP loop takes models of the state alone, without an output scale");
    CLN_CHECK(ctx, ctx->backend->ops->rev_begin, CLNODE_ERR_UNSUPPORTED,
              "%s has no reverse pass, so no bare VJP loop", ctx->backend->device_name);
    bv_job bj;
    memset(&bj, 0, sizeof bj);
    clnode_status st = bv_job_make(ctx, m, batch, (size_t)stages, prec, &bj);
    if (st == CLNODE_OK)
        st = bv_run(ctx, &bj, steps, seconds);
    bv_free(&bj);
    return st;
}
