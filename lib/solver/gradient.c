/* gradient.c - reverse mode (clnode/gradient.h): the checks, where each saved point's cotangent
 * enters (cln_rev_event), the backend's blocks in groups (cancel and progress between them) and
 * the fixed tree over the blocks' parameter sums. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "cln_layout.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"
#include "solver/gradient_job.h"
#include "solver/gradient_tree.h"
#include "solver/reverse_schedule.h"
#include "solver/solution.h"
#include "solver/tape.h"

/* The reverse pass's defaults: no progress, never cancelled. */
static void gradient_defaults(clnode_gradient_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

CLN_DEFAULTS_SIZED(clnode_gradient_default_options_sized, clnode_gradient_options,
                   gradient_defaults)

clnode_status cln_gradient_options_import(clnode_context *ctx, const clnode_gradient_options *in,
                                          clnode_gradient_options *full)
{
    gradient_defaults(full);
    return cln_struct_import(ctx, "clnode_gradient_options", in,
                             CLN_END_OF(clnode_gradient_options, struct_size), full, sizeof *full);
}

size_t clnode_solution_kept_bytes(const clnode_solution *sol)
{
    return sol && sol->tape ? sol->tape->bytes : 0;
}

void clnode_gradient_destroy(clnode_gradient **pg)
{
    if (!pg || !*pg)
        return;
    free((*pg)->y0);
    free((*pg)->inputs);
    free((*pg)->params);
    free(*pg);
    *pg = NULL;
}

const double *clnode_gradient_y0(const clnode_gradient *g)
{
    return g ? g->y0 : NULL;
}

const double *clnode_gradient_inputs(const clnode_gradient *g)
{
    return g ? g->inputs : NULL;
}

const double *clnode_gradient_weight(const clnode_gradient *g, size_t layer)
{
    return g && layer < g->L ? g->params + g->w_off[layer] : NULL;
}

const double *clnode_gradient_bias(const clnode_gradient *g, size_t layer)
{
    return g && layer < g->L && g->has_bias[layer] ? g->params + g->b_off[layer] : NULL;
}

const double *clnode_gradient_out_scale(const clnode_gradient *g, size_t *n)
{
    if (n)
        *n = g ? g->scale_n : 0;
    return g && g->scale_n ? g->params + g->s_off : NULL;
}

const double *clnode_gradient_params(const clnode_gradient *g, size_t *n)
{
    if (n)
        *n = g ? g->nparams : 0;
    return g ? g->params : NULL;
}

/* ---- the checks ---- */

clnode_status cln_rev_check_tape(clnode_context *ctx, const clnode_model *model,
                                 const clnode_solution *sol, const char *fn)
{
    const clnode_status st = cln_tape_check(ctx, fn, model, sol);
    if (st != CLNODE_OK)
        return st;
    const cln_tape *t = sol->tape;
    const cln_backend *be = ctx->backend;
    /* The reverse pass recomputes the forward's products: in tf32 mode the host and OpenCL
     * emulate TF32 with the same bits, CUDA runs its tensor cores (the ops' tf32 kind). */
    const int tape_native = t->tf32_kind == CLN_TF32_TENSOR_CORES;
    const int here_native = be->ops->tf32 == CLN_TF32_TENSOR_CORES;
    CLN_CHECK(ctx, t->gemm_mode != CLNODE_GEMM_TF32 || tape_native == here_native,
              CLNODE_ERR_UNSUPPORTED,
              "%s: a tf32 solve kept on %s, recomputed on %s: %s, so this pass would not "
              "recompute the steps the solve took (use the kind of device that solved it)",
              fn, t->backend, be->device_name,
              tape_native ? "CUDA's TF32 tensor cores are not the TF32 emulation of the host and "
                            "OpenCL"
                          : "the TF32 emulation of the host and OpenCL is not CUDA's tensor cores");
    return CLNODE_OK;
}

clnode_status cln_rev_check_slots(clnode_context *ctx, const clnode_solution *sol, size_t slots,
                                  size_t first, const char *fn)
{
    for (size_t b = 0; b < sol->B; ++b) {
        const size_t P = clnode_solution_points(sol, b);
        CLN_CHECK(ctx, P <= slots, CLNODE_ERR_INVALID_ARGUMENT,
                  "%s: trajectory %zu saved %zu points, more than the %zu slots of the "
                  "cotangents' rows",
                  fn, first + b, P, slots);
    }
    return CLNODE_OK;
}

clnode_status cln_rev_cot_fail(clnode_context *ctx, const char *fn, size_t b, size_t k, size_t n,
                               double v)
{
    return cln_fail(ctx, CLNODE_ERR_NONFINITE_INPUT,
                    "%s: the cotangent of trajectory %zu, slot %zu, component %zu is %g", fn, b, k,
                    n, v);
}

/* slots holds every trajectory's points, and the cotangents of the points are finite, also once
 * rounded to the state precision (an fp32 tape rounds each one to float: a finite double beyond
 * +-3.4e38 would enter the reverse pass as an infinity). */
static clnode_status cln_rev_check_cot(clnode_context *ctx, const clnode_solution *sol,
                                       size_t slots, const double *cot, size_t first)
{
    static const char fn[] = "clnode_gradient_compute";
    const size_t N = sol->N;
    const int fp32 = sol->tape->esize == sizeof(float);
    const clnode_status st = cln_rev_check_slots(ctx, sol, slots, first, fn);
    if (st != CLNODE_OK)
        return st;
    for (size_t b = 0; b < sol->B; ++b) {
        const size_t P = clnode_solution_points(sol, b);
        for (size_t k = 0; k < P; ++k)
            for (size_t n = 0; n < N; ++n) {
                const double v = cot[(b * slots + k) * N + n];
                if (!isfinite(v))
                    return cln_rev_cot_fail(ctx, fn, first + b, k, n, v);
                CLN_CHECK(ctx, !fp32 || fabs(v) < CLN_FP32_LIMIT, CLNODE_ERR_NONFINITE_INPUT,
                          "clnode_gradient_compute: the cotangent of trajectory %zu, slot %zu, "
                          "component %zu is %.9g: it rounds to an fp32 infinity (from |x| >= "
                          "%.9g, FLT_MAX plus half an ulp), which this fp32 reverse pass would "
                          "carry",
                          first + b, k, n, v, CLN_FP32_LIMIT);
            }
    }
    return CLNODE_OK;
}

/* ---- where the cotangents enter ---- */

/* Trajectory b's events from its row's kinds: the state after p steps for t0 (0), the k-th saved
 * step (k + 1) and the stop (M); a save time in the step the tape recorded for it (ts_step), or
 * y0 itself for a trajectory of no step. */
static size_t cln_rev_traj_events(const clnode_solution *sol, size_t b,
                                  const clnode_save_kind *kinds, size_t P, cln_rev_event *ev)
{
    const cln_tape *t = sol->tape;
    const size_t M = t->off_t[b + 1] - t->off_t[b] - 1;
    size_t first = 0, steps = 0, j = 0;
    clnode_solution_ts_index(sol, b, &first);
    for (size_t k = 0; k < P; ++k) {
        cln_rev_event e = {CLN_REV_POINT, 0, 0, (int32_t)k};
        if (kinds[k] == CLNODE_SAVE_STEPS) {
            e.step = (int32_t)++steps;
        } else if (kinds[k] == CLNODE_SAVE_T1) {
            e.step = (int32_t)M;
        } else if (kinds[k] == CLNODE_SAVE_TS && M > 0) {
            const size_t jj = first + j++;
            e.kind = CLN_REV_DENSE;
            e.step = t->ts_step[b * t->n_ts + jj];
            e.j = (int32_t)jj;
        } else if (kinds[k] == CLNODE_SAVE_TS) {
            ++j;
        }
        ev[k] = e;
    }
    return P;
}

clnode_status cln_rev_events(clnode_context *ctx, const clnode_solution *sol, size_t slots,
                             size_t **off_ev, cln_rev_event **ev)
{
    const size_t B = sol->B;
    size_t total = 0;
    *off_ev = malloc((B + 1) * sizeof **off_ev);
    CLN_CHECK(ctx, *off_ev, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the cotangents' events");
    for (size_t b = 0; b < B; ++b) {
        (*off_ev)[b] = total;
        total += clnode_solution_points(sol, b);
    }
    (*off_ev)[B] = total;
    *ev = malloc((total ? total : 1) * sizeof **ev);
    clnode_save_kind *kinds = malloc((slots ? slots : 1) * sizeof *kinds);
    if (!*ev || !kinds) {
        free(kinds);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the cotangents' events");
    }
    for (size_t b = 0; b < B; ++b) {
        const size_t P = (*off_ev)[b + 1] - (*off_ev)[b];
        if (P)
            clnode_solution_kinds(sol, b, slots, kinds);
        cln_rev_traj_events(sol, b, kinds, P, *ev + (*off_ev)[b]);
    }
    free(kinds);
    return CLNODE_OK;
}

/* ---- the job: the model and the solve's constants in the state precision ---- */

void cln_rev_run_free(cln_rev_run *r)
{
    free(r->K);
    free(r->params);
    free(r->off_ev);
    free(r->ev);
}

static void cln_rev_put(void *buf, size_t esize, size_t i, double v)
{
    if (esize == sizeof(float))
        ((float *)buf)[i] = (float)v;
    else
        ((double *)buf)[i] = v;
}

/* The parameters' layout (clnode_gradient_params) into the job and the result. */
size_t cln_rev_layout(const clnode_model *m, cln_rev_job *job, clnode_gradient *g)
{
    size_t at = 0;
    for (size_t l = 0; l < m->num_layers; ++l) {
        job->w_off[l] = g->w_off[l] = at;
        at += m->sizes[l] * m->sizes[l + 1];
        g->has_bias[l] = m->biases[l] != NULL;
        job->b_off[l] = g->b_off[l] = at;
        at += m->biases[l] ? m->sizes[l + 1] : 0;
    }
    job->s_off = g->s_off = at;
    g->scale_n = m->out_scale ? m->out_scale_n : 0;
    return at + g->scale_n;
}

/* The job's constants and parameters, rounded to the state precision as the solve rounded
 * them (cln_upload: a C cast). */
clnode_status cln_rev_fill(clnode_context *ctx, const clnode_model *m, const clnode_solution *sol,
                           cln_rev_run *r)
{
    const cln_tape *t = sol->tape;
    cln_rev_job *job = &r->job;
    const size_t es = t->esize, nK = sizeof t->K / sizeof t->K[0];
    r->K = malloc(nK * es);
    r->params = malloc((job->ntheta ? job->ntheta : 1) * es);
    CLN_CHECK(ctx, r->K && r->params, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate the reverse pass's parameters");
    for (size_t i = 0; i < nK; ++i)
        cln_rev_put(r->K, es, i, t->K[i]);
    for (size_t l = 0; l < m->num_layers; ++l) {
        const size_t nw = m->sizes[l] * m->sizes[l + 1];
        for (size_t i = 0; i < nw; ++i)
            cln_rev_put(r->params, es, job->w_off[l] + i, m->weights[l][i]);
        for (size_t i = 0; m->biases[l] && i < m->sizes[l + 1]; ++i)
            cln_rev_put(r->params, es, job->b_off[l] + i, m->biases[l][i]);
        job->W[l] = (unsigned char *)r->params + job->w_off[l] * es;
        job->bias[l] = m->biases[l] ? (unsigned char *)r->params + job->b_off[l] * es : NULL;
        job->act[l] = (int)(l + 1 == m->num_layers ? m->final_activation : m->activation);
    }
    for (size_t i = 0; i < (m->out_scale ? m->out_scale_n : 0); ++i)
        cln_rev_put(r->params, es, job->s_off + i, m->out_scale[i]);
    job->scale = m->out_scale ? (unsigned char *)r->params + job->s_off * es : NULL;
    job->scale_n = m->out_scale ? m->out_scale_n : 0;
    job->K = r->K;
    return CLNODE_OK;
}

void cln_rev_job_tape(const clnode_model *m, const clnode_solution *sol, size_t slots,
                      const double *cot, cln_rev_job *job)
{
    const cln_tape *t = sol->tape;
    job->prec = t->prec;
    job->gemm_mode = t->gemm_mode;
    job->KI = &t->KI;
    job->num_layers = m->num_layers;
    job->sizes = m->sizes;
    job->n_in = m->num_inputs;
    job->B = t->B;
    job->every = t->every;
    job->off_t = t->off_t;
    job->off_y = t->off_y;
    job->tau = t->tau;
    job->ys = t->ys;
    job->inputs = t->inputs;
    job->ts = t->ts;
    job->slots = slots;
    job->cot = cot;
}

/* ---- the blocks and their tree ---- */

/* The fixed tree over the blocks' sums (gradient_tree.h), fed in block order: a stack of the
 * sums of aligned power-of-two runs of blocks, merged as a binary counter (the run [lo, hi) is
 * the sum of its first half and its second, sizes 2^k each); at the end the runs are added from
 * the last. From block 0 every two runs of equal size on top are halves of an aligned run; from
 * another block the alignment is what stops a merge. */

static void cln_rev_add(size_t es, size_t n, void *acc, const void *x)
{
    if (es == sizeof(float))
        for (size_t i = 0; i < n; ++i)
            ((float *)acc)[i] += ((const float *)x)[i];
    else
        for (size_t i = 0; i < n; ++i)
            ((double *)acc)[i] += ((const double *)x)[i];
}

clnode_status cln_rev_tree_init(clnode_context *ctx, cln_rev_tree *tr, size_t esize, size_t n,
                                size_t first_block, size_t nblocks)
{
    size_t bits = 0;
    while (bits < 64 && (nblocks >> bits) != 0)
        ++bits;
    memset(tr, 0, sizeof *tr);
    tr->esize = esize;
    tr->n = n;
    tr->next = first_block;
    tr->cap = 2 * bits + 2; /* the maximal runs of any range of nblocks, and one pushed */
    tr->start = malloc(tr->cap * sizeof *tr->start);
    tr->size = malloc(tr->cap * sizeof *tr->size);
    tr->level = malloc(tr->cap * n * esize);
    if (!tr->start || !tr->size || !tr->level) {
        cln_rev_tree_free(tr);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the blocks' tree");
    }
    return CLNODE_OK;
}

void cln_rev_tree_free(cln_rev_tree *tr)
{
    free(tr->start);
    free(tr->size);
    free(tr->level);
    tr->start = tr->size = NULL;
    tr->level = NULL;
    tr->top = tr->cap = 0;
}

void *cln_rev_tree_level(const cln_rev_tree *tr, size_t k)
{
    return (unsigned char *)tr->level + k * tr->n * tr->esize;
}

int cln_rev_tree_fits(const cln_rev_tree *tr, size_t start, size_t size)
{
    return start == tr->next && size && (size & (size - 1)) == 0 && start % size == 0 &&
           tr->top < tr->cap;
}

void cln_rev_tree_push(cln_rev_tree *tr, const void *sum, size_t size)
{
    memcpy(cln_rev_tree_level(tr, tr->top), sum, tr->n * tr->esize);
    tr->start[tr->top] = tr->next;
    tr->size[tr->top++] = size;
    tr->next += size;
    while (tr->top >= 2 && tr->size[tr->top - 1] == tr->size[tr->top - 2] &&
           tr->start[tr->top - 2] % (2 * tr->size[tr->top - 2]) == 0) {
        cln_rev_add(tr->esize, tr->n, cln_rev_tree_level(tr, tr->top - 2),
                    cln_rev_tree_level(tr, tr->top - 1));
        tr->size[tr->top - 2] *= 2;
        --tr->top;
    }
}

void cln_rev_tree_fold(cln_rev_tree *tr)
{
    for (size_t k = tr->top; k-- > 1;) {
        cln_rev_add(tr->esize, tr->n, cln_rev_tree_level(tr, k - 1), cln_rev_tree_level(tr, k));
        tr->size[k - 1] += tr->size[k];
    }
    tr->top = tr->top ? 1 : 0;
}

static double cln_rev_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Blocks `done` .. end of group handed over: cancel, and progress at most once a second. */
static clnode_status cln_rev_between(clnode_context *ctx, const clnode_gradient_options *o,
                                     const cln_rev_job *job, size_t blocks_done, double *last)
{
    const size_t done =
        blocks_done * CLNODE_GRADIENT_BLOCK < job->B ? blocks_done * CLNODE_GRADIENT_BLOCK : job->B;
    if (o->cancel && done < job->B && o->cancel(o->cancel_user))
        return cln_fail(ctx, CLNODE_ERR_CANCELLED,
                        "reverse pass cancelled by the caller after %zu of %zu trajectories", done,
                        job->B);
    const double now = cln_rev_now();
    if (o->progress && done < job->B && now - *last >= 1.0) {
        *last = now;
        const long steps = (long)(job->off_t[done] - done);
        if (o->progress(o->progress_user, job->B - done, job->B, (double)done / (double)job->B,
                        steps))
            return cln_fail(ctx, CLNODE_ERR_CANCELLED, "cancelled by the progress callback");
    }
    return CLNODE_OK;
}

/* Every block through the backend, `group` at a time (cancel and progress are looked at between
 * groups), their sums into the tree. */
static clnode_status cln_rev_blocks(clnode_context *ctx, const clnode_gradient_options *o,
                                    const cln_rev_job *job, void *state, size_t group,
                                    const cln_rev_ops *rev, cln_rev_tree *tr)
{
    cln_backend *be = ctx->backend;
    cln_rev_plan plan;
    cln_rev_plan_init(&plan, ctx, job, rev);
    const size_t nb = (job->B + CLNODE_GRADIENT_BLOCK - 1) / CLNODE_GRADIENT_BLOCK;
    const size_t es = tr->esize, n = job->ntheta ? job->ntheta : 1;
    group = group < 1 ? 1 : group < nb ? group : nb ? nb : 1;
    size_t bytes = 0;
    void *sums =
        cln_mul_size(group, n, &bytes) && cln_mul_size(bytes, es, &bytes) ? malloc(bytes) : NULL;
    CLN_CHECK(ctx, sums, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the sums of %zu blocks", group);
    clnode_status st = CLNODE_OK;
    double last = cln_rev_now();
    for (size_t b0 = 0; b0 < nb && st == CLNODE_OK; b0 += group) {
        const size_t cnt = nb - b0 < group ? nb - b0 : group;
        st = be->ops->rev_each(be, state, b0, cnt, sums, cln_rev_schedule, &plan);
        for (size_t k = 0; st == CLNODE_OK && k < cnt; ++k)
            cln_rev_tree_push(tr, (unsigned char *)sums + k * n * es, 1);
        if (st == CLNODE_OK)
            st = cln_rev_between(ctx, o, job, b0 + cnt, &last);
    }
    free(sums);
    return st;
}

/* ---- the entry point ---- */

clnode_status cln_gradient_alloc(clnode_context *ctx, const clnode_model *m, size_t B,
                                 clnode_gradient **out)
{
    clnode_gradient *g = calloc(1, sizeof *g);
    CLN_CHECK(ctx, g, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the gradient");
    cln_rev_job layout;
    g->B = B;
    g->N = m->sizes[m->num_layers];
    g->n_in = m->num_inputs;
    g->L = m->num_layers;
    g->nparams = cln_rev_layout(m, &layout, g);
    const size_t ny = g->B * g->N, nc = g->B * g->n_in;
    g->y0 = calloc(ny ? ny : 1, sizeof(double));
    g->inputs = g->n_in ? calloc(nc ? nc : 1, sizeof(double)) : NULL;
    g->params = calloc(g->nparams ? g->nparams : 1, sizeof(double));
    if (!g->y0 || (g->n_in && !g->inputs) || !g->params) {
        clnode_gradient_destroy(&g);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the gradient of %zu x %zu",
                        B, m->sizes[m->num_layers]);
    }
    *out = g;
    return CLNODE_OK;
}

static clnode_status cln_rev_result(clnode_context *ctx, const clnode_model *m,
                                    const clnode_solution *sol, cln_rev_run *r,
                                    clnode_gradient **out)
{
    const clnode_status st = cln_gradient_alloc(ctx, m, sol->B, out);
    if (st != CLNODE_OK)
        return st;
    r->job.ntheta = cln_rev_layout(m, &r->job, *out);
    r->job.ybar = (*out)->y0;
    r->job.cbar = (*out)->inputs;
    return CLNODE_OK;
}

/* The reverse pass proper, on a job that is ready: the backend's blocks into the tree from block
 * first_block. runs NULL: the tree folded into theta; else *runs gets the tree, unfolded. */
static clnode_status cln_rev_run_job(clnode_context *ctx, const clnode_gradient_options *o,
                                     const cln_tape *t, cln_rev_job *job, clnode_gradient *g,
                                     size_t first_block, cln_rev_tree *runs)
{
    cln_backend *be = ctx->backend;
    cln_rev_tree own, *tr = runs ? runs : &own;
    const size_t nb = (job->B + CLNODE_GRADIENT_BLOCK - 1) / CLNODE_GRADIENT_BLOCK;
    clnode_status st =
        cln_rev_tree_init(ctx, tr, t->esize, job->ntheta ? job->ntheta : 1, first_block, nb);
    if (st != CLNODE_OK)
        return st;
    void *state = NULL;
    size_t group = 1;
    const cln_rev_ops *rev = NULL;
    st = be->ops->rev_begin(be, job, &state, &group, &rev);
    if (st == CLNODE_OK)
        st = cln_rev_blocks(ctx, o, job, state, group, rev, tr);
    be->ops->rev_end(be, state);
    if (!runs) {
        cln_rev_tree_fold(tr);
        const float *f32 = t->esize == sizeof(float) ? tr->level : NULL;
        const double *f64 = tr->level;
        for (size_t i = 0; st == CLNODE_OK && i < job->ntheta; ++i)
            g->params[i] = f32 ? (double)f32[i] : f64[i];
    }
    if (!runs || st != CLNODE_OK)
        cln_rev_tree_free(tr);
    return st;
}

/* clnode_gradient_compute (runs NULL, first 0), cln_gradient_chunk and, with dev (cot NULL: the
 * caller checked the cotangents), clnode_gradient_compute_device. */
clnode_status cln_rev_compute(clnode_context *ctx, const clnode_model *model,
                              const clnode_gradient_options *opts, const clnode_solution *sol,
                              size_t slots, const double *cot, size_t first, cln_rev_tree *runs,
                              const cln_rev_dev *dev, clnode_gradient **out)
{
    clnode_gradient_options o;
    clnode_status st = cln_gradient_options_import(ctx, opts, &o);
    if (st != CLNODE_OK)
        return st;
    st = cln_rev_check_tape(ctx, model, sol, "clnode_gradient_compute");
    if (st == CLNODE_OK && !ctx->backend->ops->rev_begin)
        st = cln_fail(ctx, CLNODE_ERR_UNSUPPORTED,
                      "clnode_gradient_compute: %s has no reverse pass (the host, OpenCL and CUDA "
                      "devices have one)",
                      ctx->backend->device_name);
    if (st == CLNODE_OK && cot)
        st = cln_rev_check_cot(ctx, sol, slots, cot, first);
    if (st != CLNODE_OK)
        return st;
    cln_rev_run r;
    memset(&r, 0, sizeof r);
    clnode_gradient *g = NULL;
    cln_rev_job_tape(model, sol, slots, cot, &r.job);
    CLN_TRY(st, cln_rev_result(ctx, model, sol, &r, &g));
    if (dev) { /* the caller's device arrays instead of the host's */
        r.job.cot_dev = dev->cot;
        r.job.cot_off = dev->cot_off;
        r.job.ybar_dev = dev->ybar;
        r.job.ybar_off = dev->ybar_off;
        r.job.cbar_dev = dev->cbar;
        r.job.cbar_off = dev->cbar_off;
        r.job.ybar = r.job.cbar = NULL;
    }
    CLN_TRY(st, cln_rev_fill(ctx, model, sol, &r));
    CLN_TRY(st, cln_rev_events(ctx, sol, slots, &r.off_ev, &r.ev));
    r.job.off_ev = r.off_ev;
    r.job.ev = r.ev;
    CLN_TRY(st,
            cln_rev_run_job(ctx, &o, sol->tape, &r.job, g, first / CLNODE_GRADIENT_BLOCK, runs));
    cln_rev_run_free(&r);
    *out = g;
    return CLNODE_OK;
fail:
    cln_rev_run_free(&r);
    clnode_gradient_destroy(&g);
    return st;
}

clnode_status clnode_gradient_compute(clnode_context *ctx, const clnode_model *model,
                                      const clnode_gradient_options *opts,
                                      const clnode_solution *sol, size_t slots, const double *cot,
                                      clnode_gradient **out)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && out, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_compute: NULL context or out");
    *out = NULL;
    CLN_CHECK(ctx, model && sol && cot, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_compute: NULL model, solution or cotangents");
    return cln_rev_compute(ctx, model, opts, sol, slots, cot, 0, NULL, NULL, out);
}

clnode_status cln_gradient_chunk(clnode_context *ctx, const clnode_model *model,
                                 const clnode_gradient_options *opts, const clnode_solution *sol,
                                 size_t slots, const double *cot, size_t first, cln_rev_tree *runs,
                                 clnode_gradient **out)
{
    *out = NULL;
    CLN_CHECK(ctx, first % CLNODE_GRADIENT_BLOCK == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "the reverse pass of a chunk from trajectory %zu: a chunk starts at a whole block "
              "(a multiple of CLNODE_GRADIENT_BLOCK, %d)",
              first, CLNODE_GRADIENT_BLOCK);
    return cln_rev_compute(ctx, model, opts, sol, slots, cot, first, runs, NULL, out);
}
