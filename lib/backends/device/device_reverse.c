/* device_reverse.c - the per-step reverse operations of the device backends (device_reverse.h),
 * which lib/solver/reverse_schedule.c runs: a group of blocks at a time, its trajectories ordered
 * by their steps, every reverse step as the host's
 * (lib/backends/host/host_reverse.inc) through cl/cln_reverse_kernels.h's kernels and the
 * backend's ordered GEMM. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/device/device_reverse_internal.h"

_Static_assert(CLN_REV_BLOCK == CLNODE_GRADIENT_BLOCK, "one block size on every backend");

const char *const cln_rev_kernel_names[CLN_RK_COUNT] = {
    "cln_rev_zero",      "cln_rev_inputs",   "cln_rev_group",      "cln_rev_begin",
    "cln_rev_act",       "cln_rev_y1",       "cln_rev_events",     "cln_rev_delta",
    "cln_rev_arg",       "cln_rev_wsum",     "cln_rev_finish",     "cln_rev_gather",
    "cln_rev_wadd",      "cln_rev_bsum",     "cln_rev_ssum",       "cln_rev_act_next",
    "cln_rev_delta_arg", "cln_rev_gemm_act", "cln_rev_gemm_delta", "cln_tan_begin",
    "cln_tan_stage",     "cln_tan_terms",    "cln_tan_layer",      "cln_tan_out",
    "cln_tan_y1",        "cln_tan_points",   "cln_tan_dense",      "cln_nonfinite_rows",
    "cln_bad_save_ts",   "cln_rev_scatter"};

static const cln_rev_ops dr_ops;

/* ---- sizes and memory ---- */

/* The job's sizes into d. */
static void dr_dims(dev_rev *d, const cln_rev_job *job)
{
    const cln_iconsts *KI = job->KI;
    d->N = (size_t)KI->N;
    d->ldz = (size_t)KI->ldz;
    d->S = (size_t)KI->stages;
    d->S1 = d->S - (CLN_REV_SKIP_LAST(KI->ssal, KI->n_ts) ? 1 : 0);
    d->nl = job->num_layers;
    d->n_in = job->n_in;
    d->ns = job->scale ? job->scale_n : 0;
    d->every = job->every;
    d->slots = job->slots;
    d->n_ts = (size_t)KI->n_ts;
    d->ts_stride = (size_t)KI->ts_stride;
    d->time_input = KI->time_input;
    d->ntheta = job->ntheta;
    d->maxw = d->ldz;
    d->E = cln_rev_seg_len(job);
    d->sumw = 0;
    for (size_t l = 0; l < d->nl; ++l) {
        d->in[l] = job->sizes[l];
        d->out[l] = job->sizes[l + 1];
        d->woff[l] = d->sumw;
        d->sumw += d->out[l];
        d->maxw = d->in[l] > d->maxw ? d->in[l] : d->maxw;
        d->maxw = d->out[l] > d->maxw ? d->out[l] : d->maxw;
    }
}

/* The elements of each scratch buffer for `rows` rows and `gb` blocks (0 for none). */
static void dr_scratch_sizes(const dev_rev *d, size_t rows, size_t gb, size_t n[DR_NBUF])
{
    const size_t S = d->S, N = d->N, nin = d->n_in ? d->n_in : 1;
    n[DR_JOB] = CLN_RJ_SIZE;
    n[DR_RL] = rows * CLN_RL_W;
    n[DR_RT] = rows * CLN_RT_W;
    n[DR_BR] = gb * CLN_REV_BLOCK;
    n[DR_Y] = rows * N;
    n[DR_SEG] = d->every > 1 ? rows * d->E * N : 1;
    n[DR_Z] = S * rows * d->ldz;
    n[DR_F] = n[DR_KB] = S * rows * N;
    n[DR_P] = n[DR_O] = S * d->sumw * rows;
    n[DR_G] = rows * d->maxw;
    n[DR_YB0] = n[DR_YB1] = n[DR_YBAR] = rows * N;
    n[DR_CB] = n[DR_INP] = rows * nin;
    n[DR_TH] = gb * (d->ntheta ? d->ntheta : 1);
    n[DR_NR] = gb;
    n[DR_DT] = n[DR_XT] = d->by_gemm ? gb * d->maxw * d->kmax : 1;
    n[DR_GS] = d->by_gemm ? gb * d->maxw * d->maxw : 1;
}

/* Bytes of scratch buffer `which` of n elements (the integer tables are int64_t). */
static size_t dr_bytes(const dev_rev *d, int which, size_t n)
{
    const int ints = which == DR_JOB || which == DR_RL || which == DR_BR || which == DR_NR;
    return n * (ints ? sizeof(int64_t) : d->es);
}

/* The bytes of blocks [k0, k0 + nk)'s slices of the job, each into sl (DS_*). */
void dr_slice_bytes(const dev_rev *d, size_t k0, size_t nk, size_t sl[DS_N])
{
    const cln_rev_job *job = d->job;
    const size_t b0 = k0 * CLN_REV_BLOCK;
    const size_t b1 = (k0 + nk) * CLN_REV_BLOCK < job->B ? (k0 + nk) * CLN_REV_BLOCK : job->B;
    sl[DS_TAU] = (job->off_t[b1] - job->off_t[b0]) * d->es;
    sl[DS_YS] = (job->off_y[b1] - job->off_y[b0]) * d->N * d->es;
    sl[DS_EV] = (job->off_ev[b1] - job->off_ev[b0]) * sizeof(cln_rev_event);
    sl[DS_COT] = (b1 - b0) * d->slots * d->N * d->es;
    sl[DS_TS] = (d->ts_stride ? (b1 - b0) : 1) * d->n_ts * d->es;
}

/* Whether groups of gb blocks fit: their scratch and largest slices within `budget` bytes, no
 * buffer over max_buffer. *need: the bytes of the largest group. */
static int dr_fits(const dev_rev *d, size_t gb, size_t budget, size_t max_buffer, size_t *need)
{
    const size_t nb = (d->job->B + CLN_REV_BLOCK - 1) / CLN_REV_BLOCK;
    const size_t rows = gb * CLN_REV_BLOCK < d->job->B ? gb * CLN_REV_BLOCK : d->job->B;
    size_t n[DR_NBUF], scratch = 0, largest = 0;
    dr_scratch_sizes(d, rows, gb, n);
    for (size_t l = 0; l < d->nl; ++l) /* the weights and their transposes */
        scratch += 2 * d->in[l] * d->out[l] * d->es;
    for (int i = 0; i < DR_NBUF; ++i) {
        const size_t b = dr_bytes(d, i, n[i]);
        scratch += b;
        largest = b > largest ? b : largest;
    }
    *need = 0;
    for (size_t k0 = 0; k0 < nb; k0 += gb) {
        size_t sl[DS_N], total = scratch;
        dr_slice_bytes(d, k0, nb - k0 < gb ? nb - k0 : gb, sl);
        for (int i = 0; i < DS_N; ++i) {
            total += sl[i];
            largest = sl[i] > largest ? sl[i] : largest;
        }
        *need = total > *need ? total : *need;
    }
    return *need <= budget && largest <= max_buffer;
}

/* Blocks per group: as many as fit in half of the device's memory (at most DR_MAX_GROUP). */
static clnode_status dr_choose_group(dev_rev *d)
{
    size_t total = 0, max_buffer = 0, need = 0;
    d->L->memory(d->be, &total, &max_buffer);
    const cln_test_settings *ts = &d->be->ctx->test;
    if (ts->rev_memory)
        total = max_buffer = ts->rev_memory;
    const size_t budget = total ? total / 2 : SIZE_MAX, cap = max_buffer ? max_buffer : SIZE_MAX;
    const size_t nb = (d->job->B + CLN_REV_BLOCK - 1) / CLN_REV_BLOCK;
    const size_t most =
        ts->rev_max_blocks && ts->rev_max_blocks < DR_MAX_GROUP ? ts->rev_max_blocks : DR_MAX_GROUP;
    size_t gb = nb < most ? nb : most;
    while (gb > 1 && !dr_fits(d, gb, budget, cap, &need))
        gb /= 2;
    CLN_CHECK(d->be->ctx, dr_fits(d, gb, budget, cap, &need), CLNODE_ERR_DEVICE_MEMORY,
              "the reverse pass on %s needs %zu bytes for a block of %zu trajectories (their kept "
              "states, cotangents and scratch), more than half of its %zu bytes of memory or a "
              "buffer over the largest it allocates (%zu): keep fewer states (a larger "
              "checkpoint_every) or run the reverse pass on the host",
              d->be->device_name, need, d->job->B < CLN_REV_BLOCK ? d->job->B : CLN_REV_BLOCK,
              total, max_buffer);
    d->gb = gb;
    d->rows = gb * CLN_REV_BLOCK < d->job->B ? gb * CLN_REV_BLOCK : d->job->B;
    return CLNODE_OK;
}

/* ---- buffers ---- */

clnode_status dr_alloc(dev_rev *d, size_t bytes, cln_buf **out)
{
    return d->be->ops->buf_alloc(d->be, bytes ? bytes : d->es, out);
}

clnode_status dr_write(dev_rev *d, cln_buf *b, size_t bytes, const void *src)
{
    return bytes ? d->be->ops->buf_write(d->be, b, 0, bytes, src) : CLNODE_OK;
}

/* Host room for `bytes` (grow-only). */
clnode_status dr_host(dev_rev *d, size_t bytes)
{
    if (bytes <= d->host_cap)
        return CLNODE_OK;
    unsigned char *p = realloc(d->host, bytes);
    CLN_CHECK(d->be->ctx, p, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes for the reverse pass", bytes);
    d->host = p;
    d->host_cap = bytes;
    return CLNODE_OK;
}

/* n values of the job's precision from doubles, in d->host. */
static clnode_status dr_reals(dev_rev *d, const double *src, size_t n)
{
    clnode_status st = dr_host(d, n * d->es);
    for (size_t i = 0; st == CLNODE_OK && i < n; ++i) {
        if (d->prec == CLNODE_FP32)
            ((float *)(void *)d->host)[i] = (float)src[i];
        else
            ((double *)(void *)d->host)[i] = src[i];
    }
    return st;
}

/* The model (weights, their transposes, biases, scale) and the solve's constants, uploaded. */
static clnode_status dr_model(dev_rev *d)
{
    const cln_rev_job *job = d->job;
    const size_t es = d->es, nK = sizeof(CLN_CONSTS_STRUCT(double)) / sizeof(double);
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, dr_alloc(d, nK * es, &d->K));
    CLN_TRY(st, dr_write(d, d->K, nK * es, job->K));
    for (size_t l = 0; l < d->nl; ++l) {
        const size_t n = d->out[l], k = d->in[l];
        CLN_TRY(st, dr_alloc(d, n * k * es, &d->W[l]));
        CLN_TRY(st, dr_write(d, d->W[l], n * k * es, job->W[l]));
        CLN_TRY(st, dr_host(d, n * k * es));
        for (size_t j = 0; j < n; ++j) /* W^T (k x n): the transposed product's B */
            for (size_t c = 0; c < k; ++c)
                memcpy(d->host + (c * n + j) * es,
                       (const unsigned char *)job->W[l] + (j * k + c) * es, es);
        CLN_TRY(st, dr_alloc(d, n * k * es, &d->WT[l]));
        CLN_TRY(st, dr_write(d, d->WT[l], n * k * es, d->host));
        if (job->bias[l]) {
            CLN_TRY(st, dr_alloc(d, n * es, &d->bias[l]));
            CLN_TRY(st, dr_write(d, d->bias[l], n * es, job->bias[l]));
        }
    }
    if (d->ns) {
        CLN_TRY(st, dr_alloc(d, d->ns * es, &d->scale));
        CLN_TRY(st, dr_write(d, d->scale, d->ns * es, job->scale));
    }
fail:
    return st;
}

/* The group scratch, the host's tables of a group and the pass's constants (JOB). */
static clnode_status dr_scratch(dev_rev *d)
{
    size_t n[DR_NBUF];
    dr_scratch_sizes(d, d->rows, d->gb, n);
    clnode_status st = CLNODE_OK;
    for (int i = 0; i < DR_NBUF; ++i)
        CLN_TRY(st, dr_alloc(d, dr_bytes(d, i, n[i]), &d->buf[i]));
    d->traj = malloc(d->rows * sizeof *d->traj);
    d->M = calloc(d->rows, sizeof *d->M);
    d->nr = malloc(d->gb * sizeof *d->nr);
    d->hRL = calloc(n[DR_RL], sizeof *d->hRL);
    d->hBR = malloc(n[DR_BR] * sizeof *d->hBR);
    CLN_CHECK(d->be->ctx, d->traj && d->M && d->nr && d->hRL && d->hBR, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate the reverse pass's tables of %zu rows", d->rows);
    int64_t job[CLN_RJ_SIZE] = {0};
    job[CLN_RJ_BG] = (int64_t)d->rows;
    job[CLN_RJ_N] = (int64_t)d->N;
    job[CLN_RJ_LDZ] = (int64_t)d->ldz;
    job[CLN_RJ_S] = (int64_t)d->S;
    job[CLN_RJ_S1] = (int64_t)d->S1;
    job[CLN_RJ_NIN] = (int64_t)d->n_in;
    job[CLN_RJ_SSAL] = d->job->KI->ssal;
    job[CLN_RJ_DENSE] = d->job->KI->dense_form;
    job[CLN_RJ_TS_STRIDE] = (int64_t)d->ts_stride;
    job[CLN_RJ_SLOTS] = (int64_t)d->slots;
    job[CLN_RJ_EVERY] = (int64_t)d->every;
    job[CLN_RJ_SEG] = (int64_t)d->E;
    job[CLN_RJ_NS] = (int64_t)d->ns;
    job[CLN_RJ_SUMW] = (int64_t)d->sumw;
    job[CLN_RJ_NTHETA] = (int64_t)d->ntheta;
    job[CLN_RJ_TF32] = d->mode == CLNODE_GEMM_TF32;
    job[CLN_RJ_TIME] = d->time_input;
    CLN_TRY(st, dr_write(d, d->buf[DR_JOB], sizeof job, job));
fail:
    return st;
}

void cln_dev_rev_end(cln_backend *be, void *state)
{
    dev_rev *d = state;
    if (!d)
        return;
    cln_buf *bufs[2 + 3 * CLN_MAX_LAYERS + DR_NBUF + DS_N] = {d->K, d->scale};
    size_t n = 2;
    for (size_t l = 0; l < CLN_MAX_LAYERS; ++l) {
        bufs[n++] = d->W[l];
        bufs[n++] = d->WT[l];
        bufs[n++] = d->bias[l];
    }
    for (int i = 0; i < DR_NBUF; ++i)
        bufs[n++] = d->buf[i];
    for (int i = 0; i < DS_N; ++i)
        bufs[n++] = d->slice[i];
    for (size_t i = 0; i < n; ++i)
        be->ops->buf_free(be, bufs[i]);
    free(d->traj);
    free(d->M);
    free(d->nr);
    free(d->hRL);
    free(d->hBR);
    free(d->host);
    free(d);
}

clnode_status cln_dev_rev_begin(cln_backend *be, const cln_rev_job *job, void **state,
                                size_t *group, const cln_rev_ops **rev)
{
    clnode_context *ctx = be->ctx;
    *state = NULL;
    CLN_CHECK(ctx, be->ops->supports(be, job->prec),
              job->prec == CLNODE_FP64 ? CLNODE_ERR_NO_FP64 : CLNODE_ERR_UNSUPPORTED,
              "device %s cannot compute in %s", be->device_name, clnode_precision_name(job->prec));
    CLN_CHECK(ctx, job->B <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "the reverse pass of %zu trajectories on %s: its kernels take at most %d", job->B,
              be->device_name, INT32_MAX);
    CLN_CHECK(ctx, job->KI->stages >= 1 && job->KI->stages <= CLN_MAX_STAGES,
              CLNODE_ERR_INVALID_ARGUMENT, "the reverse pass of a method of %d stages (1 to %d)",
              job->KI->stages, CLN_MAX_STAGES);
    dev_rev *d = calloc(1, sizeof *d);
    CLN_CHECK(ctx, d, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the reverse pass");
    d->be = be;
    d->L = ((const cln_dev_backend *)(const void *)be)->launch;
    d->job = job;
    d->prec = job->prec;
    d->mode = job->gemm_mode;
    d->es = job->prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    d->yb1 = DR_YB1;
    dr_dims(d, job);
    d->kmax = d->S1 * CLN_REV_BLOCK;
    clnode_status st = CLNODE_OK;
    const int sums = ctx->test.rev_sums;
    d->by_gemm = sums ? sums == 2 : d->L->rev_sums_by_gemm; /* at most */
    CLN_TRY(st, dr_choose_group(d));
    /* the GEMM's gathers and per-block products pay off over a few blocks; a group of one to
     * three takes fewer launches through the one kernel */
    d->by_gemm = sums ? sums == 2 : d->L->rev_sums_by_gemm && d->gb >= DR_GEMM_BLOCKS;
    CLN_TRY(st, dr_model(d));
    CLN_TRY(st, dr_scratch(d));
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "reverse pass on %s: %zu trajectories in groups of %zu blocks (%zu rows)",
            be->device_name, job->B, d->gb, d->rows);
    *state = d;
    *group = d->gb;
    if (rev)
        *rev = &dr_ops;
    return CLNODE_OK;
fail:
    cln_dev_rev_end(be, d);
    return st;
}

/* ---- a group's rows and uploads ---- */

/* The run's rows in their order (traj, M, filled by the schedule): RL and BR of its nk blocks. */
void dr_tables(dev_rev *d, size_t b0, size_t Bg, size_t nk)
{
    const cln_rev_job *job = d->job;
    size_t fill[DR_MAX_GROUP] = {0};
    for (size_t i = 0; i < nk * CLN_REV_BLOCK; ++i)
        d->hBR[i] = -1;
    for (size_t p = 0; p < Bg; ++p) {
        const size_t r = d->traj[p], b = b0 + r, k = r / CLN_REV_BLOCK;
        int64_t *rl = d->hRL + p * CLN_RL_W;
        rl[CLN_RL_B] = (int64_t)r;
        rl[CLN_RL_M] = (int64_t)d->M[p];
        rl[CLN_RL_TAU] = (int64_t)(job->off_t[b] - job->off_t[b0]);
        rl[CLN_RL_YS] = (int64_t)(job->off_y[b] - job->off_y[b0]);
        rl[CLN_RL_EV] = (int64_t)(job->off_ev[b] - job->off_ev[b0]);
        rl[CLN_RL_NEV] = (int64_t)(job->off_ev[b + 1] - job->off_ev[b]);
        rl[CLN_RL_NLO] = 0;
        d->hBR[k * CLN_REV_BLOCK + fill[k]++] = (int64_t)p;
    }
}

/* Slice `which` of the job: `bytes` from src into the device (its buffer grown when short). */
clnode_status dr_slice(dev_rev *d, int which, size_t bytes, const void *src)
{
    if (bytes > d->slice_cap[which] || !d->slice[which]) {
        d->be->ops->buf_free(d->be, d->slice[which]);
        d->slice[which] = NULL;
        d->slice_cap[which] = 0;
        const clnode_status st = dr_alloc(d, bytes, &d->slice[which]);
        if (st != CLNODE_OK)
            return st;
        d->slice_cap[which] = bytes;
    }
    return src ? dr_write(d, d->slice[which], bytes, src) : CLNODE_OK;
}

/* The group's tables and its trajectories' part of the tape, events, cotangents, save times and
 * inputs, uploaded. */
static clnode_status dr_upload(dev_rev *d, size_t b0, size_t Bg, size_t k0, size_t nk)
{
    const cln_rev_job *job = d->job;
    const size_t es = d->es;
    size_t sl[DS_N];
    dr_slice_bytes(d, k0, nk, sl);
    const unsigned char *tau = job->tau, *ys = job->ys, *ts = job->ts;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, dr_write(d, d->buf[DR_RL], Bg * CLN_RL_W * sizeof(int64_t), d->hRL));
    CLN_TRY(st, dr_write(d, d->buf[DR_BR], nk * CLN_REV_BLOCK * sizeof(int64_t), d->hBR));
    CLN_TRY(st, dr_slice(d, DS_TAU, sl[DS_TAU], tau + job->off_t[b0] * es));
    CLN_TRY(st, dr_slice(d, DS_YS, sl[DS_YS], ys + job->off_y[b0] * d->N * es));
    CLN_TRY(st, dr_slice(d, DS_EV, sl[DS_EV], job->ev + job->off_ev[b0]));
    if (job->cot) {
        CLN_TRY(st, dr_reals(d, job->cot + b0 * d->slots * d->N, Bg * d->slots * d->N));
        CLN_TRY(st, dr_slice(d, DS_COT, sl[DS_COT], d->host));
    } else { /* the caller's device array: a copy on the device */
        const size_t bytes = Bg * d->slots * d->N * es;
        CLN_TRY(st, dr_slice(d, DS_COT, sl[DS_COT], NULL));
        if (bytes)
            CLN_TRY(st, d->be->ops->copy_rows(d->be, d->slice[DS_COT], 0, bytes, job->cot_dev,
                                              (job->cot_off + b0 * d->slots * d->N) * es, bytes,
                                              bytes, 1));
    }
    CLN_TRY(st,
            dr_slice(d, DS_TS, sl[DS_TS], ts ? ts + (d->ts_stride ? b0 * d->n_ts * es : 0) : NULL));
    if (d->n_in)
        CLN_TRY(st, dr_write(d, d->buf[DR_INP], Bg * d->n_in * es,
                             (const unsigned char *)job->inputs + b0 * d->n_in * es));
fail:
    return st;
}

/* ---- the kernels of a reverse step ---- */

/* buf[0 .. n) = 0. */
clnode_status dr_zero(dev_rev *d, cln_buf *buf, size_t n)
{
    return DR_RUN(d, CLN_RK_ZERO, 0, n, 1, DR_BUF(buf), DR_I64(0), DR_I64(n));
}

/* Whether the products of rows [0, A) are the pass's own kernels with the element-wise work
 * beside them inside them (cln_dev_launch.rev_fused_rows; the test setting rev_fused): strict
 * GEMM mode only, whose products they compute with the same bits (tf32's go to the backend's
 * GEMM, which rounds its operands first). */
static int dr_fused(const dev_rev *d, size_t A)
{
    const int forced = d->be->ctx->test.rev_fused;
    if (d->mode != CLNODE_GEMM_STRICT || forced == 2)
        return 0;
    return forced == 1 || A <= d->L->rev_fused_rows;
}

/* Where stage i's layer l's P and O block starts. */
size_t dr_poff(const dev_rev *d, size_t i, size_t l)
{
    return (i * d->sumw + d->woff[l]) * d->rows;
}

/* Stage i's layer l recomputed on rows [0, A) in one launch (cln_rev_gemm_act_body): its product
 * of X (at x_off, leading dimension ldx) and W, its bias and activation into P and O, and for the
 * last layer f into F block i and, where stage i + 1 exists, that stage's argument (its N columns
 * and the time's). */
static clnode_status dr_gemm_act(dev_rev *d, size_t i, size_t l, size_t A, cln_buf *X, size_t x_off,
                                 size_t ldx)
{
    cln_buf *any = B_(d, DR_JOB);
    const size_t n = d->out[l];
    const int last = l + 1 == d->nl;
    const size_t nx = last && i + 1 < d->S ? n + (d->time_input ? 1 : 0) : n;
    d->be->gemms++;
    return DR_RUN(d, CLN_RK_GEMM_ACT, 0, nx, A, DR_I32(A), DR_I32(d->job->act[l]),
                  DR_I64(dr_poff(d, i, l)), DR_I64(n), DR_I64(last ? (long long)i : -1), DR_BUF(X),
                  DR_I64(x_off), DR_I64(ldx), DR_BUF(d->W[l]), DR_I64(d->in[l]),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(d->bias[l] ? d->bias[l] : any),
                  DR_I32(d->bias[l] != NULL), DR_BUF(d->scale ? d->scale : any),
                  DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_Y)), DR_BUF(B_(d, DR_P)),
                  DR_BUF(B_(d, DR_O)), DR_BUF(B_(d, DR_F)), DR_BUF(B_(d, DR_Z)));
}

/* Stage i's layer l's transposed product on rows [0, A) in one launch (cln_rev_gemm_delta_body):
 * the cotangent of its input into G and, above the first layer, the delta of layer l - 1 into its
 * P. */
static clnode_status dr_gemm_delta(dev_rev *d, size_t i, size_t l, size_t A)
{
    const size_t n = d->out[l], k = d->in[l];
    d->be->gemms++;
    return DR_RUN(d, CLN_RK_GEMM_DELTA, 0, k, A, DR_I32(A), DR_I32(l ? d->job->act[l - 1] : 0),
                  DR_I32(i), DR_I64(dr_poff(d, i, l)), DR_I64(n), DR_I64(k), DR_BUF(d->WT[l]),
                  DR_I64(l ? (long long)dr_poff(d, i, l - 1) : -1), DR_BUF(B_(d, DR_JOB)),
                  DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_KB)), DR_BUF(B_(d, DR_G)),
                  DR_BUF(d->scale ? d->scale : B_(d, DR_JOB)), DR_BUF(B_(d, DR_P)),
                  DR_BUF(B_(d, DR_O)));
}

/* Stage i's MLP on rows [0, A): each layer's product into P, then P + bias and O = act(P), and
 * for the last layer f (times the scale) into F block i and, in the same launch, stage i + 1's
 * argument into Z where that stage exists. Where the pass takes its products (dr_fused), each
 * layer is one launch (dr_gemm_act). */
clnode_status dr_mlp(dev_rev *d, size_t i, size_t A)
{
    const cln_rev_job *job = d->job;
    cln_backend *be = d->be;
    cln_buf *X = B_(d, DR_Z), *any = B_(d, DR_JOB);
    size_t x_off = i * d->rows * d->ldz, ldx = d->ldz;
    const int fused = dr_fused(d, A);
    clnode_status st = CLNODE_OK;
    for (size_t l = 0; l < d->nl; ++l) {
        const size_t n = d->out[l], off = dr_poff(d, i, l);
        const int last = l + 1 == d->nl, act = job->act[l];
        const long long f_off = last ? (long long)(i * d->rows * d->N) : -1;
        cln_buf *bias = d->bias[l] ? d->bias[l] : any;
        if (fused) {
            CLN_TRY(st, dr_gemm_act(d, i, l, A, X, x_off, ldx));
            X = B_(d, DR_O);
            x_off = off;
            ldx = n;
            continue;
        }
        CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, A, n, d->in[l], X, x_off, ldx, d->W[l], 0,
                                  d->in[l], B_(d, DR_P), off, n));
        if (last && i + 1 < d->S) /* n is N */
            CLN_TRY(st, DR_RUN(d, CLN_RK_ACT_NEXT, 0, n + (d->time_input ? 1 : 0), A, DR_I32(A),
                               DR_I32(act), DR_I64(off), DR_I64(i + 1), DR_BUF(B_(d, DR_JOB)),
                               DR_BUF(d->K), DR_BUF(bias), DR_I32(d->bias[l] != NULL),
                               DR_BUF(d->scale ? d->scale : any), DR_BUF(B_(d, DR_RT)),
                               DR_BUF(B_(d, DR_Y)), DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O)),
                               DR_BUF(B_(d, DR_F)), DR_BUF(B_(d, DR_Z))));
        else
            CLN_TRY(st, DR_RUN(d, CLN_RK_ACT, act, n, A, DR_I32(A), DR_I32(act), DR_I64(off),
                               DR_I64(n), DR_I64(f_off), DR_BUF(B_(d, DR_JOB)), DR_BUF(bias),
                               DR_I32(d->bias[l] != NULL), DR_BUF(d->scale ? d->scale : any),
                               DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O)), DR_BUF(B_(d, DR_F))));
        X = B_(d, DR_O);
        x_off = off;
        ldx = n;
    }
fail:
    return st;
}

/* Stage i of the rows' steps, rows [0, A): its MLP where anything reads its f (the stage op). Its
 * argument is in Z already: stage 0's from the begin op's launch, each later one's from the
 * launch of the last layer of the stage before it (dr_mlp), the schedule taking the stages in
 * order after begin. */
static clnode_status dr_stage(void *run, size_t i, size_t A)
{
    dev_rev *d = run;
    if (i + 1 == d->S && d->S1 < d->S) /* f of that stage is read by nothing */
        return CLNODE_OK;
    return dr_mlp(d, i, A);
}

/* CLN_RK_BEGIN in `mode` for reverse step s, or sub-step j of group q (the begin op): the rows'
 * times and states, stage 0's argument and, for a reverse step, the run's blocks' rows still
 * going back (NR). */
static clnode_status dr_begin(void *run, size_t A, int mode, size_t s, size_t q, size_t j)
{
    dev_rev *d = run;
    const size_t nk = mode == CLN_REV_SUB ? 0 : d->nk;
    return DR_RUN(d, CLN_RK_BEGIN, 0, d->N + (d->time_input ? 1 : 0), A > nk ? A : nk, DR_I32(A),
                  DR_I32(nk), DR_I32(mode), DR_I64(s), DR_I64(q), DR_I64(j), DR_BUF(B_(d, DR_JOB)),
                  DR_BUF(d->K), DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_BR)),
                  DR_BUF(d->slice[DS_TAU]), DR_BUF(d->slice[DS_YS]), DR_BUF(B_(d, DR_SEG)),
                  DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_Y)), DR_BUF(B_(d, DR_Z)),
                  DR_BUF(B_(d, DR_NR)));
}

/* Group q's kept states into SEG (the group op). */
static clnode_status dr_group_load(void *run, size_t A, size_t q)
{
    dev_rev *d = run;
    return DR_RUN(d, CLN_RK_GROUP, 0, d->N, A, DR_I32(A), DR_I64(q), DR_BUF(B_(d, DR_JOB)),
                  DR_BUF(B_(d, DR_RL)), DR_BUF(d->slice[DS_YS]), DR_BUF(B_(d, DR_SEG)));
}

/* y1 of sub-step j of group q into SEG (the y1 op). */
static clnode_status dr_y1(void *run, size_t A, size_t q, size_t j)
{
    dev_rev *d = run;
    return DR_RUN(d, CLN_RK_Y1, 0, d->N, A, DR_I32(A), DR_I64(q), DR_I64(j), DR_BUF(B_(d, DR_JOB)),
                  DR_BUF(d->K), DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_Y)),
                  DR_BUF(B_(d, DR_F)), DR_BUF(B_(d, DR_Z)), DR_BUF(B_(d, DR_SEG)));
}

/* The pending stage argument's transpose (d->arg >= 0) on its own launch, rows [0, A). */
static clnode_status dr_arg(dev_rev *d, size_t A)
{
    if (d->arg < 0)
        return CLNODE_OK;
    const size_t i = (size_t)d->arg;
    const int skip = d->arg_skip;
    d->arg = -1;
    return DR_RUN(d, CLN_RK_ARG, 0, skip ? d->N : d->ldz, A, DR_I32(A), DR_I32(i), DR_I32(skip),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_G)), DR_BUF(B_(d, d->yb1)),
                  DR_BUF(B_(d, DR_YB0 + DR_YB1 - d->yb1)), DR_BUF(B_(d, DR_KB)),
                  DR_BUF(B_(d, DR_CB)));
}

/* Stage i's cotangents for rows [0, A): the MLP's vector-Jacobian product layer by layer from the
 * last (deltas into P, the input cotangent through the transposed product into G; where the pass
 * takes its products, dr_fused, each product launch makes the delta of the layer below it,
 * dr_gemm_delta, so only the last layer's delta has a launch of its own), then the
 * stage argument's transpose (host_reverse.inc's rev_stage_vjp). The schedule takes the stages
 * from the last down to 0, so that the argument's transpose of stage i is left pending (d->arg)
 * and made by the launch of stage i - 1's last delta, which reads the k_{i-1} cotangent it
 * completes; stage 0's has a launch of its own. */
static clnode_status dr_stage_vjp(void *run, size_t i, size_t A)
{
    dev_rev *d = run;
    cln_backend *be = d->be;
    const int skip = i + 1 == d->S && d->S1 < d->S;
    clnode_status st = CLNODE_OK;
    if (d->arg >= 0 && (size_t)d->arg != i + 1) /* not the stage after this one: on its own */
        CLN_TRY(st, dr_arg(d, A));
    const int fused = dr_fused(d, A);
    for (size_t l = d->nl; !skip && l-- > 0;) {
        const size_t n = d->out[l], k = d->in[l], off = dr_poff(d, i, l);
        const int act = d->job->act[l];
        cln_buf *scale = d->scale ? d->scale : B_(d, DR_JOB);
        if (!fused || l + 1 == d->nl) {          /* else its delta is in the product above it */
            if (l + 1 == d->nl && d->arg >= 0) { /* n is N (<= ldz) */
                const int askip = d->arg_skip;
                d->arg = -1;
                CLN_TRY(st, DR_RUN(d, CLN_RK_DELTA_ARG, 0, askip ? d->N : d->ldz, A, DR_I32(A),
                                   DR_I32(act), DR_I32(i), DR_I64(off), DR_I32(askip),
                                   DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_RT)),
                                   DR_BUF(B_(d, DR_KB)), DR_BUF(B_(d, DR_G)), DR_BUF(scale),
                                   DR_BUF(B_(d, d->yb1)), DR_BUF(B_(d, DR_YB0 + DR_YB1 - d->yb1)),
                                   DR_BUF(B_(d, DR_CB)), DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O))));
            } else {
                CLN_TRY(st, DR_RUN(d, CLN_RK_DELTA, act, n, A, DR_I32(A), DR_I32(act), DR_I32(i),
                                   DR_I64(off), DR_I64(n), DR_I32(l + 1 == d->nl),
                                   DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_RT)),
                                   DR_BUF(B_(d, DR_KB)), DR_BUF(B_(d, DR_G)), DR_BUF(scale),
                                   DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O))));
            }
        }
        if (fused) {
            CLN_TRY(st, dr_gemm_delta(d, i, l, A));
            continue;
        }
        CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, A, k, n, B_(d, DR_P), off, n, d->WT[l], 0,
                                  n, B_(d, DR_G), 0, k));
    }
    CLN_TRY(st, dr_arg(d, A)); /* one the loop did not take (none where this stage has an MLP) */
    d->arg = (int)i;
    d->arg_skip = skip;
    if (i == 0)
        CLN_TRY(st, dr_arg(d, A));
fail:
    return st;
}

/* Gathers block by block the step's terms of one factor of layer l's weight sum (its deltas, or
 * its inputs) into buffer `dst` (cln_rev_gather_body). */
static clnode_status dr_gather(dev_rev *d, size_t nk, size_t l, int deltas, int dst)
{
    const size_t cols = deltas ? d->out[l] : d->in[l];
    const size_t off = deltas ? d->woff[l] * d->rows : l ? d->woff[l - 1] * d->rows : 0;
    const size_t stage = deltas || l ? d->sumw * d->rows : d->rows * d->ldz;
    const size_t ld = deltas ? d->out[l] : l ? d->out[l - 1] : d->ldz;
    return DR_RUN3(d, CLN_RK_GATHER, 0, cols, CLN_REV_BLOCK, nk, DR_I32(nk), DR_I64(cols),
                   DR_I64(off), DR_I64(stage), DR_I64(ld), DR_I64(d->kmax), DR_BUF(B_(d, DR_JOB)),
                   DR_BUF(B_(d, DR_NR)), DR_BUF(B_(d, DR_BR)),
                   DR_BUF(B_(d, deltas ? DR_P
                                : l    ? DR_O
                                       : DR_Z)),
                   DR_BUF(B_(d, dst)));
}

/* Layer l's bias and output-scale sums (cln_rev_side_sums) ride on the one kernel's launch: the
 * extra input columns (x) that launch takes, and their offsets in a block's sum (-1: none). */
static size_t dr_side(const dev_rev *d, size_t l, long long *bth, long long *sth)
{
    *bth = d->job->bias[l] ? (long long)d->job->b_off[l] : -1;
    *sth = d->ns && l + 1 == d->nl ? (long long)d->job->s_off : -1;
    return *sth >= 0 ? 2 : *bth >= 0 ? 1 : 0;
}

/* Layer l's weight sums of the step through the GEMM: both factors gathered, one ordered product
 * per block still going back (its terms summed from zero in their order), each added to its
 * block's sum; then the layer's bias sums and (the last layer) the scale's, each a launch of its
 * own (the addition's kernel stays a plain one). */
static clnode_status dr_wsum_gemm(dev_rev *d, size_t nk, size_t l)
{
    const cln_rev_job *job = d->job;
    cln_backend *be = d->be;
    const size_t n = d->out[l], k = d->in[l], p_off = d->woff[l] * d->rows;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, dr_gather(d, nk, l, 1, DR_DT));
    CLN_TRY(st, dr_gather(d, nk, l, 0, DR_XT));
    for (size_t b = 0; b < nk; ++b)
        if (d->nr[b])
            CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, n, k, d->S1 * d->nr[b], B_(d, DR_DT),
                                      b * n * d->kmax, d->kmax, B_(d, DR_XT), b * k * d->kmax,
                                      d->kmax, B_(d, DR_GS), b * n * k, k));
    CLN_TRY(st, DR_RUN3(d, CLN_RK_WADD, 0, k, n, nk, DR_I32(nk), DR_I64(k), DR_I64(n),
                        DR_I64(job->w_off[l]), DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_NR)),
                        DR_BUF(B_(d, DR_GS)), DR_BUF(B_(d, DR_TH))));
    if (job->bias[l])
        CLN_TRY(st, DR_RUN(d, CLN_RK_BSUM, 0, n, nk, DR_I32(nk), DR_I64(n), DR_I64(p_off),
                           DR_I64(job->b_off[l]), DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_NR)),
                           DR_BUF(B_(d, DR_BR)), DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_TH))));
    if (d->ns && l + 1 == d->nl)
        CLN_TRY(st, DR_RUN(d, CLN_RK_SSUM, 0, d->ns, nk, DR_I32(nk), DR_I64(p_off),
                           DR_I64(job->s_off), DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_NR)),
                           DR_BUF(B_(d, DR_BR)), DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_KB)),
                           DR_BUF(B_(d, DR_O)), DR_BUF(B_(d, DR_TH))));
fail:
    return st;
}

/* Layer l's weight sums of the step in one kernel (cln_rev_wsum_body), with its bias and scale
 * sums. */
static clnode_status dr_wsum_kernel(dev_rev *d, size_t nk, size_t l)
{
    const size_t n = d->out[l], k = d->in[l], p_off = d->woff[l] * d->rows;
    const size_t x_off = l ? d->woff[l - 1] * d->rows : 0;
    const size_t x_stage = l ? d->sumw * d->rows : d->rows * d->ldz;
    long long bth = -1, sth = -1;
    const size_t side = dr_side(d, l, &bth, &sth);
    return DR_RUN3(d, CLN_RK_WSUM, 0, k + side, n, nk, DR_I32(nk), DR_I64(k), DR_I64(n),
                   DR_I64(p_off), DR_I64(x_off), DR_I64(x_stage),
                   DR_I64(l ? d->out[l - 1] : d->ldz), DR_I64(d->job->w_off[l]), DR_I64(bth),
                   DR_I64(sth), DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_NR)), DR_BUF(B_(d, DR_BR)),
                   DR_BUF(B_(d, DR_RT)), DR_BUF(B_(d, DR_KB)), DR_BUF(B_(d, DR_P)),
                   DR_BUF(B_(d, DR_O)), DR_BUF(B_(d, l ? DR_O : DR_Z)), DR_BUF(B_(d, DR_TH)));
}

/* The step's parameter sums of the group's nk blocks (weights, biases, scale), a launch per layer
 * (and the GEMMs): each block's rows still going back counted by the step's begin (NR), and here
 * for the GEMMs' sizes. */
clnode_status dr_sums(dev_rev *d, size_t s, size_t nk)
{
    clnode_status st = CLNODE_OK;
    for (size_t b = 0; d->by_gemm && b < nk; ++b) {
        size_t r = 0;
        while (r < CLN_REV_BLOCK && d->hBR[b * CLN_REV_BLOCK + r] >= 0 &&
               d->M[d->hBR[b * CLN_REV_BLOCK + r]] > s)
            ++r;
        d->nr[b] = r;
    }
    for (size_t l = 0; l < d->nl; ++l)
        CLN_TRY(st, d->by_gemm ? dr_wsum_gemm(d, nk, l) : dr_wsum_kernel(d, nk, l));
fail:
    return st;
}

/* The saved points at each row's step end, its dense outputs and y1's transpose (the events
 * op): from the cotangent of y_{n+1} (buffer d->yb1) into the other and KB. */
static clnode_status dr_events(void *run, size_t A, size_t s)
{
    dev_rev *d = run;
    const int yb0 = DR_YB0 + DR_YB1 - d->yb1;
    return DR_RUN(d, CLN_RK_EVENTS, 0, A, 1, DR_I32(A), DR_I64(s), DR_BUF(B_(d, DR_JOB)),
                  DR_BUF(d->K), DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_RT)), DR_BUF(d->slice[DS_EV]),
                  DR_BUF(d->slice[DS_COT]), DR_BUF(d->slice[DS_TS]), DR_BUF(B_(d, yb0)),
                  DR_BUF(B_(d, d->yb1)), DR_BUF(B_(d, DR_KB)));
}

/* The step's parameter sums of the run's blocks (the sums op). */
static clnode_status dr_step_sums(void *run, size_t A, size_t s)
{
    (void)A;
    dev_rev *d = run;
    return dr_sums(d, s, d->nk);
}

/* The cotangent of y_n becomes that of y_{n+1} (the next op): the buffers swap. */
static clnode_status dr_next(void *run, size_t A)
{
    (void)A;
    dev_rev *d = run;
    d->yb1 = DR_YB0 + DR_YB1 - d->yb1;
    return CLNODE_OK;
}

/* Rows [from, to) are back at their start: their points at y0, their cotangents of y0 (the
 * finish op). */
static clnode_status dr_finish(void *run, size_t from, size_t to)
{
    dev_rev *d = run;
    return DR_RUN(d, CLN_RK_FINISH, 0, to - from, 1, DR_I64(from), DR_I64(to),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_RL)), DR_BUF(d->slice[DS_EV]),
                  DR_BUF(d->slice[DS_COT]), DR_BUF(B_(d, d->yb1)), DR_BUF(B_(d, DR_YBAR)));
}

/* The group's rows of w values in src (in the order of the positions) into the caller's array
 * dst from element off (NULL: not wanted). */
static clnode_status dr_scatter(dev_rev *d, cln_buf *dst, size_t off, size_t w, cln_buf *src)
{
    if (!dst || !w)
        return CLNODE_OK;
    return DR_RUN(d, CLN_RK_SCATTER, 0, w, d->Bg, DR_I64(w), DR_I64(d->Bg), DR_I64(off),
                  DR_BUF(B_(d, DR_RL)), DR_BUF(src), DR_BUF(dst));
}

/* The group's results: its blocks' sums read back into theta, its rows of ybar and cbar read
 * back (or scattered into the caller's device arrays). */
static clnode_status dr_results(void *run)
{
    dev_rev *d = run;
    const cln_rev_job *job = d->job;
    const size_t b0 = d->k0 * CLN_REV_BLOCK, Bg = d->Bg, nk = d->nk;
    void *theta = d->theta;
    cln_backend *be = d->be;
    const size_t N = d->N, n_in = d->n_in, es = d->es;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, be->ops->buf_read(be, B_(d, DR_TH), 0, nk * d->ntheta * es, theta));
    if (!job->ybar) { /* the caller's device arrays: the rows scattered on the device */
        CLN_TRY(st, dr_scatter(d, job->ybar_dev, job->ybar_off + b0 * N, N, B_(d, DR_YBAR)));
        CLN_TRY(st, dr_scatter(d, job->cbar_dev, job->cbar_off + b0 * n_in, n_in, B_(d, DR_CB)));
        return CLNODE_OK;
    }
    CLN_TRY(st, dr_host(d, Bg * (N > n_in ? N : n_in) * es));
    CLN_TRY(st, be->ops->buf_read(be, B_(d, DR_YBAR), 0, Bg * N * es, d->host));
    for (size_t p = 0; p < Bg; ++p)
        for (size_t c = 0; c < N; ++c)
            job->ybar[(b0 + d->traj[p]) * N + c] =
                es == sizeof(float) ? (double)((const float *)(void *)d->host)[p * N + c]
                                    : ((const double *)(void *)d->host)[p * N + c];
    if (n_in) {
        CLN_TRY(st, be->ops->buf_read(be, B_(d, DR_CB), 0, Bg * n_in * es, d->host));
        for (size_t p = 0; p < Bg; ++p)
            for (size_t q = 0; q < n_in; ++q)
                job->cbar[(b0 + d->traj[p]) * n_in + q] =
                    es == sizeof(float) ? (double)((const float *)(void *)d->host)[p * n_in + q]
                                        : ((const double *)(void *)d->host)[p * n_in + q];
    }
fail:
    return st;
}

/* The run's rows (the rows op): blocks [k0, k0 + nk), Bg trajectories, ordered by the
 * schedule into traj and M. */
static clnode_status dr_rows(void *run, size_t k0, size_t nk, size_t Bg, size_t **traj,
                             size_t **steps)
{
    dev_rev *d = run;
    d->k0 = k0;
    d->nk = nk;
    d->Bg = Bg;
    *traj = d->traj;
    *steps = d->M;
    return CLNODE_OK;
}

/* The run's tables, its part of the job uploaded, zero sums and cotangents, the inputs' columns
 * of the stage arguments (the setup op). */
static clnode_status dr_setup(void *run, size_t Bg)
{
    dev_rev *d = run;
    const size_t b0 = d->k0 * CLN_REV_BLOCK, nk = d->nk;
    clnode_status st = CLNODE_OK;
    dr_tables(d, b0, Bg, nk);
    CLN_TRY(st, dr_upload(d, b0, Bg, d->k0, nk));
    d->yb1 = DR_YB1;
    d->arg = -1;
    CLN_TRY(st, dr_zero(d, B_(d, DR_TH), nk * d->ntheta));
    CLN_TRY(st, dr_zero(d, B_(d, DR_YB1), Bg * d->N));
    CLN_TRY(st, dr_zero(d, B_(d, DR_CB), Bg * d->n_in));
    CLN_TRY(st, DR_RUN(d, CLN_RK_INPUTS, 0, d->n_in, Bg, DR_BUF(B_(d, DR_JOB)),
                       DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_INP)), DR_BUF(B_(d, DR_Z))));
fail:
    return st;
}

static const cln_rev_ops dr_ops = {
    .rows = dr_rows,
    .setup = dr_setup,
    .group = dr_group_load,
    .begin = dr_begin,
    .stage = dr_stage,
    .y1 = dr_y1,
    .events = dr_events,
    .stage_vjp = dr_stage_vjp,
    .sums = dr_step_sums,
    .next = dr_next,
    .finish = dr_finish,
    .results = dr_results,
};

clnode_status cln_dev_rev_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                               void *theta, cln_rev_run_fn fn, const void *arg)
{
    dev_rev *d = state;
    CLN_CHECK(be->ctx, d && nblocks <= d->gb, CLNODE_ERR_INTERNAL,
              "reverse blocks %zu of at most %zu at a time", nblocks, d ? d->gb : 0);
    d->theta = theta;
    return nblocks ? fn(arg, d, block0, nblocks) : CLNODE_OK;
}
