/* device_bench_vjp.c - the bare VJP loop on a device (cln_dev_bench_vjp, device_reverse.h;
 * clnode_bench_vjp_loop, clnode/bench.h): the reverse pass's kernels and products
 * (device_reverse.c) on a job of the model alone, without the solver, the tape or the cotangents.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/device/device_reverse_internal.h"

/* ---- the bare VJP loop (clnode_bench_vjp_loop) ---- */

/* A job of `batch` rows of `stages` stages through the model alone: no time, inputs, scale, tape
 * or cotangents; its constants and parameters (in the state precision) owned here. */
typedef struct dr_bench {
    cln_rev_job job;
    cln_iconsts KI;
    void *K, *params;
    size_t *off_t;
} dr_bench;

static void dr_bench_free(dr_bench *bj)
{
    free(bj->K);
    free(bj->params);
    free(bj->off_t);
}

static clnode_status dr_bench_job(cln_backend *be, const cln_model_view *m, size_t B, size_t stages,
                                  clnode_precision prec, dr_bench *bj)
{
    cln_rev_job *job = &bj->job;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    const size_t nK = sizeof(CLN_CONSTS_STRUCT(double)) / sizeof(double);
    size_t at = 0;
    for (size_t l = 0; l < m->num_layers; ++l) {
        job->w_off[l] = at;
        at += m->sizes[l] * m->sizes[l + 1];
        job->b_off[l] = at;
        at += m->bias[l] ? m->sizes[l + 1] : 0;
    }
    job->ntheta = job->s_off = at;
    bj->K = calloc(nK, es);
    bj->params = malloc(at * es);
    bj->off_t = malloc((B + 1) * sizeof *bj->off_t);
    CLN_CHECK(be->ctx, bj->K && bj->params && bj->off_t, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate the bare VJP loop's model");
    for (size_t l = 0; l < m->num_layers; ++l) {
        const size_t nw = m->sizes[l] * m->sizes[l + 1], nb = m->bias[l] ? m->sizes[l + 1] : 0;
        for (size_t i = 0; i < nw + nb; ++i) {
            const double v = i < nw ? m->W[l][i] : m->bias[l][i - nw];
            if (es == sizeof(float))
                ((float *)bj->params)[job->w_off[l] + i] = (float)v;
            else
                ((double *)bj->params)[job->w_off[l] + i] = v;
        }
        job->W[l] = (unsigned char *)bj->params + job->w_off[l] * es;
        job->bias[l] = nb ? (unsigned char *)bj->params + job->b_off[l] * es : NULL;
        job->act[l] = m->act[l];
    }
    for (size_t b = 0; b <= B; ++b)
        bj->off_t[b] = 2 * b; /* one step each: what the sums' rows read */
    bj->KI.N = (int)m->sizes[m->num_layers];
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
    job->off_t = job->off_y = job->off_ev = bj->off_t;
    return CLNODE_OK;
}

/* A group's rows for the loop: every row at its one step (hd 1, so f's cotangent is KB's), each
 * block its own rows in order, the stage arguments and cotangents of fixed values. */
static clnode_status dr_bench_group(dev_rev *d, size_t Bg, size_t nk)
{
    const size_t S = d->S, n = S * d->rows * (d->ldz > d->N ? d->ldz : d->N);
    clnode_status st = dr_host(d, (n > Bg * CLN_RT_W ? n : Bg * CLN_RT_W) * d->es);
    for (size_t i = 0; st == CLNODE_OK && i < n; ++i) {
        const double v = 0.01 * (double)(i % 97);
        if (d->prec == CLNODE_FP32)
            ((float *)(void *)d->host)[i] = (float)v;
        else
            ((double *)(void *)d->host)[i] = v;
    }
    for (size_t p = 0; p < Bg; ++p) {
        d->hRL[p * CLN_RL_W + CLN_RL_M] = 1;
        d->M[p] = 1; /* as RL says: the GEMMs' sizes */
        d->hBR[p] = (int64_t)p;
    }
    for (size_t p = Bg; p < nk * CLN_REV_BLOCK; ++p)
        d->hBR[p] = -1;
    CLN_TRY(st, dr_write(d, B_(d, DR_RL), Bg * CLN_RL_W * sizeof(int64_t), d->hRL));
    CLN_TRY(st, dr_write(d, B_(d, DR_BR), nk * CLN_REV_BLOCK * sizeof(int64_t), d->hBR));
    CLN_TRY(st, dr_write(d, B_(d, DR_Z), S * d->rows * d->ldz * d->es, d->host));
    CLN_TRY(st, dr_write(d, B_(d, DR_KB), S * d->rows * d->N * d->es, d->host));
    for (size_t p = 0; st == CLNODE_OK && p < Bg * CLN_RT_W; ++p) {
        const double rt = p % CLN_RT_W == CLN_RT_HD ? 1.0 : 0.0;
        if (d->prec == CLNODE_FP32)
            ((float *)(void *)d->host)[p] = (float)rt;
        else
            ((double *)(void *)d->host)[p] = rt;
    }
    CLN_TRY(st, dr_write(d, B_(d, DR_RT), Bg * CLN_RT_W * d->es, d->host));
    CLN_TRY(st, dr_zero(d, B_(d, DR_TH), nk * d->ntheta));
fail:
    return st;
}

/* One step of the loop over rows [0, A): every stage's forward recomputation, every stage back
 * through the layers (the deltas, the products but the first layer's, as the host's loop), the
 * step's weight and bias sums per block. */
static clnode_status dr_bench_step(dev_rev *d, size_t A, size_t nk)
{
    cln_backend *be = d->be;
    clnode_status st = CLNODE_OK;
    for (size_t i = 0; i < d->S; ++i)
        CLN_TRY(st, dr_mlp(d, i, A));
    for (size_t i = d->S; i-- > 0;)
        for (size_t l = d->nl; l-- > 0;) {
            const size_t n = d->out[l], k = d->in[l], off = dr_poff(d, i, l);
            const int act = d->job->act[l];
            CLN_TRY(st,
                    DR_RUN(d, CLN_RK_DELTA, act, n, A, DR_I32(A), DR_I32(act), DR_I32(i),
                           DR_I64(off), DR_I64(n), DR_I32(l + 1 == d->nl), DR_BUF(B_(d, DR_JOB)),
                           DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_KB)), DR_BUF(B_(d, DR_G)),
                           DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O))));
            if (l > 0)
                CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, A, k, n, B_(d, DR_P), off, n,
                                          d->WT[l], 0, n, B_(d, DR_G), 0, k));
        }
    CLN_TRY(st, dr_sums(d, 0, nk));
fail:
    return st;
}

static double dr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* `steps` steps of every group (after one step of each, to build and warm the kernels), timed to
 * the queue's end (a read-back). */
static clnode_status dr_bench_run(dev_rev *d, long steps, double *seconds)
{
    const size_t nb = (d->job->B + CLN_REV_BLOCK - 1) / CLN_REV_BLOCK;
    clnode_status st = CLNODE_OK;
    double t0 = 0;
    for (int timed = 0; timed < 2 && st == CLNODE_OK; ++timed) {
        for (size_t k0 = 0; k0 < nb && st == CLNODE_OK; k0 += d->gb) {
            const size_t nk = nb - k0 < d->gb ? nb - k0 : d->gb;
            const size_t end = (k0 + nk) * CLN_REV_BLOCK;
            const size_t Bg = (end < d->job->B ? end : d->job->B) - k0 * CLN_REV_BLOCK;
            st = dr_bench_group(d, Bg, nk);
            if (st == CLNODE_OK && timed && k0 == 0)
                st = d->be->ops->buf_read(d->be, B_(d, DR_TH), 0, d->es, d->host);
            if (timed && k0 == 0)
                t0 = dr_now();
            for (long e = 0; st == CLNODE_OK && e < (timed ? steps : 1); ++e)
                st = dr_bench_step(d, Bg, nk);
        }
        if (st == CLNODE_OK)
            st = d->be->ops->buf_read(d->be, B_(d, DR_TH), 0, d->es, d->host);
    }
    *seconds = dr_now() - t0;
    return st;
}

clnode_status cln_dev_bench_vjp(cln_backend *be, const cln_model_view *model, size_t batch,
                                long steps, size_t stages, clnode_precision prec, double *seconds)
{
    dr_bench bj;
    memset(&bj, 0, sizeof bj);
    void *state = NULL;
    size_t group = 0;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, dr_bench_job(be, model, batch, stages, prec, &bj));
    CLN_TRY(st, cln_dev_rev_begin(be, &bj.job, &state, &group, NULL));
    CLN_TRY(st, dr_bench_run(state, steps, seconds));
fail:
    cln_dev_rev_end(be, state);
    dr_bench_free(&bj);
    return st;
}
