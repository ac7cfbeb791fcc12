/* device_tangent.c - the per-step tangent operations of the device backends (device_tangent.h),
 * which lib/solver/tangent_schedule.c runs: a group of blocks at a time on the reverse pass's
 * recomputation of the steps (device_reverse.c: its group, rows, model and primal kernels), every
 * step's tangents as the host's (lib/backends/host/host_tangent.inc) through
 * cl/cln_tangent_kernels.h's kernels and the backend's ordered GEMM. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/device/device_reverse_internal.h"
#include "backends/device/device_tangent.h"

/* The tangent scratch of a group (cl/cln_tangent_kernels.h), Rd = rows x nd tangent rows. */
enum {
    DT_Y1,  /* rows x N: y_{n+1} (swapped with the reverse pass's Y at each step) */
    DT_YD,  /* Rd x N: the tangents of y_n */
    DT_YD1, /* Rd x N: of y_{n+1} */
    DT_ZD,  /* S x Rd x ldz */
    DT_FD,  /* S x Rd x N */
    DT_G,   /* Rd x maxw, twice: a layer's input's and output's tangents */
    DT_GIN,
    DT_T,   /* rows x maxw: a direction's dW h */
    DT_DP,  /* nd x ntheta: the parameters' directions */
    DT_EVI, /* rows: the next event of each row (int64) */
    DT_OUT, /* Rd x slots x N */
    DT_NBUF
};

typedef struct dev_tan {
    dev_rev *d; /* the reverse pass's state of the job's model and tape (cln_dev_rev_begin) */
    const cln_rev_ops *rev;
    const cln_tan_job *job;
    size_t nd, Rd;
    cln_buf *buf[DT_NBUF];
} dev_tan;

static const cln_tan_ops dt_ops;

/* The elements of each tangent buffer. */
static void dt_sizes(const dev_tan *t, size_t n[DT_NBUF])
{
    const dev_rev *d = t->d;
    const size_t Rd = t->Rd, N = d->N;
    n[DT_Y1] = d->rows * N;
    n[DT_YD] = n[DT_YD1] = Rd * N;
    n[DT_ZD] = d->S * Rd * d->ldz;
    n[DT_FD] = d->S * Rd * N;
    n[DT_G] = n[DT_GIN] = Rd * d->maxw;
    n[DT_T] = d->rows * d->maxw;
    n[DT_DP] = t->nd * (d->ntheta ? d->ntheta : 1);
    n[DT_EVI] = d->rows;
    n[DT_OUT] = Rd * d->slots * N;
}

static size_t dt_bytes(const dev_tan *t, int which, size_t n)
{
    return n * (which == DT_EVI ? sizeof(int64_t) : t->d->es);
}

void cln_dev_tan_end(cln_backend *be, void *state)
{
    dev_tan *t = state;
    if (!t)
        return;
    for (int i = 0; i < DT_NBUF; ++i)
        be->ops->buf_free(be, t->buf[i]);
    cln_dev_rev_end(be, t->d);
    free(t);
}

/* The tangent buffers, the parameters' directions uploaded; a group whose tangent rows do not fit
 * beside the reverse pass's scratch is an error naming the bytes. */
static clnode_status dt_scratch(dev_tan *t)
{
    dev_rev *d = t->d;
    size_t n[DT_NBUF], need = 0, largest = 0, total = 0, max_buffer = 0;
    dt_sizes(t, n);
    for (int i = 0; i < DT_NBUF; ++i) {
        const size_t b = dt_bytes(t, i, n[i]);
        need += b;
        largest = b > largest ? b : largest;
    }
    d->L->memory(d->be, &total, &max_buffer);
    const cln_test_settings *ts = &d->be->ctx->test;
    if (ts->rev_memory)
        total = max_buffer = ts->rev_memory;
    CLN_CHECK(d->be->ctx, (!total || need <= total / 4) && (!max_buffer || largest <= max_buffer),
              CLNODE_ERR_DEVICE_MEMORY,
              "the tangent pass on %s needs %zu bytes for %zu directions of %zu trajectories, more "
              "than a quarter of its %zu bytes of memory or a buffer over the largest it "
              "allocates (%zu): take fewer directions at a time (a smaller max_bytes) or run the "
              "tangent pass on the host",
              d->be->device_name, need, t->nd, d->rows, total, max_buffer);
    clnode_status st = CLNODE_OK;
    for (int i = 0; i < DT_NBUF; ++i)
        CLN_TRY(st, dr_alloc(d, dt_bytes(t, i, n[i]), &t->buf[i]));
    if (t->job->dparams)
        CLN_TRY(st, dr_write(d, t->buf[DT_DP], t->nd * d->ntheta * d->es, t->job->dparams));
fail:
    return st;
}

clnode_status cln_dev_tan_begin(cln_backend *be, const cln_tan_job *job, void **state,
                                size_t *group, const cln_tan_ops **tan)
{
    *state = NULL;
    dev_tan *t = calloc(1, sizeof *t);
    CLN_CHECK(be->ctx, t, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the tangent pass");
    t->job = job;
    t->nd = job->ndir;
    void *rs = NULL;
    clnode_status st = cln_dev_rev_begin(be, job->rev, &rs, group, &t->rev);
    t->d = rs;
    if (st == CLNODE_OK) {
        t->Rd = t->d->rows * t->nd;
        st = dt_scratch(t);
    }
    if (st != CLNODE_OK) {
        cln_dev_tan_end(be, t);
        return st;
    }
    *state = t;
    if (tan)
        *tan = &dt_ops;
    return CLNODE_OK;
}

/* ---- the operations ---- */

static cln_buf *T_(const dev_tan *t, int which)
{
    return t->buf[which];
}

/* The run's rows (the rows op): the reverse pass's. */
static clnode_status dt_rows(void *run, size_t k0, size_t nk, size_t Bg, size_t **traj,
                             size_t **steps)
{
    dev_tan *t = run;
    return t->rev->rows(t->d, k0, nk, Bg, traj, steps);
}

/* Directions' rows of the job's array a (per direction `per` reals of B rows) for the run's rows
 * in their order, tangent row p nd + dd of `ld` values from column `col`, into d->host (zero where
 * a is NULL). */
static clnode_status dt_gather(dev_tan *t, const void *a, size_t per, size_t Bg, size_t ld,
                               size_t col, size_t copies, size_t copy_stride)
{
    dev_rev *d = t->d;
    const size_t es = d->es, b0 = d->k0 * CLN_REV_BLOCK, B = d->job->B;
    const size_t bytes = copies * copy_stride * es;
    clnode_status st = dr_host(d, bytes);
    if (st != CLNODE_OK)
        return st;
    memset(d->host, 0, bytes);
    for (size_t p = 0; a && p < Bg; ++p)
        for (size_t dd = 0; dd < t->nd; ++dd) {
            const unsigned char *src =
                (const unsigned char *)a + ((dd * B + b0 + d->traj[p]) * per) * es;
            for (size_t i = 0; i < copies; ++i)
                memcpy(d->host + (i * copy_stride + (p * t->nd + dd) * ld + col) * es, src,
                       per * es);
        }
    return CLNODE_OK;
}

/* The run's tables and its part of the tape, events and save times uploaded, the inputs' columns
 * of the stage arguments, the rows' state at step 0 and its tangents, the inputs' tangents in
 * their columns of the stage arguments' tangents, the events from the first, zero tangents of
 * the saved points (the setup op). */
static clnode_status dt_setup(void *run, size_t Bg)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    const cln_rev_job *job = d->job;
    const size_t b0 = d->k0 * CLN_REV_BLOCK, nk = d->nk, es = d->es, N = d->N;
    size_t sl[DS_N];
    dr_slice_bytes(d, d->k0, nk, sl);
    const unsigned char *tau = job->tau, *ys = job->ys, *ts = job->ts;
    clnode_status st = CLNODE_OK;
    dr_tables(d, b0, Bg, nk);
    CLN_TRY(st, dr_write(d, d->buf[DR_RL], Bg * CLN_RL_W * sizeof(int64_t), d->hRL));
    CLN_TRY(st, dr_slice(d, DS_TAU, sl[DS_TAU], tau + job->off_t[b0] * es));
    CLN_TRY(st, dr_slice(d, DS_YS, sl[DS_YS], ys + job->off_y[b0] * N * es));
    CLN_TRY(st, dr_slice(d, DS_EV, sl[DS_EV], job->ev + job->off_ev[b0]));
    CLN_TRY(st,
            dr_slice(d, DS_TS, sl[DS_TS], ts ? ts + (d->ts_stride ? b0 * d->n_ts * es : 0) : NULL));
    if (d->n_in) {
        CLN_TRY(st, dr_write(d, d->buf[DR_INP], Bg * d->n_in * es,
                             (const unsigned char *)job->inputs + b0 * d->n_in * es));
        CLN_TRY(st, DR_RUN(d, CLN_RK_INPUTS, 0, d->n_in, Bg, DR_BUF(B_(d, DR_JOB)),
                           DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_INP)), DR_BUF(B_(d, DR_Z))));
    }
    /* y0: the first kept state (the last group's) of a row that takes steps */
    CLN_TRY(st, dr_host(d, Bg * N * es));
    memset(d->host, 0, Bg * N * es);
    for (size_t p = 0; p < Bg; ++p)
        if (d->M[p] > 0) {
            const size_t b = b0 + d->traj[p], q = (d->M[p] + d->every - 1) / d->every - 1;
            memcpy(d->host + p * N * es, ys + (job->off_y[b] + q) * N * es, N * es);
        }
    CLN_TRY(st, dr_write(d, B_(d, DR_Y), Bg * N * es, d->host));
    CLN_TRY(st, dt_gather(t, t->job->dy0, N, Bg, N, 0, 1, Bg * t->nd * N));
    CLN_TRY(st, dr_write(d, T_(t, DT_YD), Bg * t->nd * N * es, d->host));
    CLN_TRY(st, dt_gather(t, t->job->dinputs, d->n_in, Bg, d->ldz, d->ldz - d->n_in, d->S,
                          t->Rd * d->ldz));
    CLN_TRY(st, dr_write(d, T_(t, DT_ZD), d->S * t->Rd * d->ldz * es, d->host));
    CLN_TRY(st, dr_host(d, Bg * sizeof(int64_t)));
    memset(d->host, 0, Bg * sizeof(int64_t));
    CLN_TRY(st, dr_write(d, T_(t, DT_EVI), Bg * sizeof(int64_t), d->host));
    CLN_TRY(st, dr_zero(d, T_(t, DT_OUT), Bg * t->nd * d->slots * N));
fail:
    return st;
}

/* The saved points after p steps (the points op). */
static clnode_status dt_points(void *run, size_t A, size_t p)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    return DR_RUN(d, CLN_RK_TAN_POINTS, 0, A, 1, DR_I32(A), DR_I64(p), DR_I64(t->nd),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(B_(d, DR_RL)), DR_BUF(d->slice[DS_EV]),
                  DR_BUF(T_(t, DT_EVI)), DR_BUF(T_(t, DT_YD)), DR_BUF(T_(t, DT_OUT)));
}

/* Each row's times of its step n and stage 0's argument (the begin op). */
static clnode_status dt_begin(void *run, size_t A, size_t n)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    return DR_RUN(d, CLN_RK_TAN_BEGIN, 0, d->N + (d->time_input ? 1 : 0), A, DR_I32(A), DR_I64(n),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_RL)),
                  DR_BUF(d->slice[DS_TAU]), DR_BUF(B_(d, DR_Y)), DR_BUF(B_(d, DR_RT)),
                  DR_BUF(B_(d, DR_Z)));
}

/* Stage i's argument and MLP (the stage op): the reverse pass's. */
static clnode_status dt_stage(void *run, size_t i, size_t A)
{
    dev_tan *t = run;
    return t->rev->stage(t->d, i, A);
}

/* Layer l's terms of the parameters' directions at stage i, rows [0, A): each direction's dW h
 * (the ordered GEMM on the primal rows) and db into g. */
static clnode_status dt_param_terms(dev_tan *t, size_t i, size_t l, size_t A, cln_buf *g)
{
    dev_rev *d = t->d;
    cln_backend *be = d->be;
    const cln_rev_job *job = d->job;
    const size_t n = d->out[l], k = d->in[l];
    cln_buf *X = l ? B_(d, DR_O) : B_(d, DR_Z);
    const size_t x_off = l ? dr_poff(d, i, l - 1) : i * d->rows * d->ldz;
    const size_t ldx = l ? d->out[l - 1] : d->ldz;
    clnode_status st = CLNODE_OK;
    for (size_t dd = 0; dd < t->nd; ++dd) {
        const size_t th = dd * d->ntheta;
        CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, A, n, k, X, x_off, ldx, T_(t, DT_DP),
                                  th + job->w_off[l], k, T_(t, DT_T), 0, n));
        CLN_TRY(st, DR_RUN(d, CLN_RK_TAN_TERMS, 0, n, A, DR_I32(A), DR_I64(n), DR_I64(t->nd),
                           DR_I64(dd), DR_BUF(T_(t, DT_T)), DR_BUF(T_(t, DT_DP)),
                           DR_I64(job->bias[l] ? th + job->b_off[l] : 0),
                           DR_I32(job->bias[l] != NULL), DR_BUF(g)));
    }
fail:
    return st;
}

/* Stage i's tangents (the stage_jvp op): its argument's, then, where anything reads its f, the
 * MLP's Jacobian-vector product layer by layer (W dh of every direction in one ordered GEMM, the
 * parameters' terms, the activation's derivative), then the output scale's. */
static clnode_status dt_stage_jvp(void *run, size_t i, size_t A)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    cln_backend *be = d->be;
    const cln_rev_job *job = d->job;
    const size_t nd = t->nd, Rd = t->Rd;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, DR_RUN3(d, CLN_RK_TAN_STAGE, 0, d->N, nd, A, DR_I32(A), DR_I32(i), DR_I64(nd),
                        DR_I64(Rd), DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_RT)),
                        DR_BUF(T_(t, DT_YD)), DR_BUF(T_(t, DT_FD)), DR_BUF(T_(t, DT_ZD))));
    if (i + 1 == d->S && d->S1 < d->S) /* f of that stage is read by nothing */
        return CLNODE_OK;
    cln_buf *X = T_(t, DT_ZD), *g = T_(t, DT_G), *gin = T_(t, DT_GIN);
    size_t x_off = i * Rd * d->ldz, ldx = d->ldz;
    for (size_t l = 0; l < d->nl; ++l) {
        const size_t n = d->out[l];
        CLN_TRY(st, be->ops->gemm(be, d->prec, d->mode, A * nd, n, d->in[l], X, x_off, ldx, d->W[l],
                                  0, d->in[l], g, 0, n));
        if (t->job->dparams)
            CLN_TRY(st, dt_param_terms(t, i, l, A, g));
        CLN_TRY(st, DR_RUN3(d, CLN_RK_TAN_LAYER, job->act[l], n, nd, A, DR_I32(A),
                            DR_I32(job->act[l]), DR_I64(n), DR_I64(nd), DR_I64(dr_poff(d, i, l)),
                            DR_BUF(B_(d, DR_P)), DR_BUF(B_(d, DR_O)), DR_BUF(g)));
        X = g;
        x_off = 0;
        ldx = n;
        g = gin;
        gin = X;
    }
    CLN_TRY(st, DR_RUN3(d, CLN_RK_TAN_OUT, 0, d->N, nd, A, DR_I32(A), DR_I32(i), DR_I64(nd),
                        DR_I64(Rd), DR_I64(dr_poff(d, i, d->nl - 1)), DR_I64(d->ntheta),
                        DR_I64(job->s_off), DR_I32(t->job->dparams != NULL), DR_BUF(B_(d, DR_JOB)),
                        DR_BUF(X), DR_BUF(B_(d, DR_O)), DR_BUF(d->scale ? d->scale : B_(d, DR_JOB)),
                        DR_BUF(T_(t, DT_DP)), DR_BUF(T_(t, DT_FD))));
fail:
    return st;
}

/* y_{n+1} and its tangents (the y1 op): cln_y1 on the rows, then on their tangents. */
static clnode_status dt_y1(void *run, size_t A)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, DR_RUN3(d, CLN_RK_TAN_Y1, 0, d->N, 1, A, DR_I32(A), DR_I64(1), DR_I64(d->rows),
                        DR_I64(d->S1), DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_RT)),
                        DR_BUF(B_(d, DR_Y)), DR_BUF(B_(d, DR_F)), DR_BUF(B_(d, DR_Z)),
                        DR_BUF(T_(t, DT_Y1))));
    CLN_TRY(st, DR_RUN3(d, CLN_RK_TAN_Y1, 0, d->N, t->nd, A, DR_I32(A), DR_I64(t->nd),
                        DR_I64(t->Rd), DR_I64(d->S1), DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K),
                        DR_BUF(B_(d, DR_RT)), DR_BUF(T_(t, DT_YD)), DR_BUF(T_(t, DT_FD)),
                        DR_BUF(T_(t, DT_ZD)), DR_BUF(T_(t, DT_YD1))));
fail:
    return st;
}

/* The dense outputs inside each row's step n (the dense op). */
static clnode_status dt_dense(void *run, size_t A, size_t n)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    if (!d->n_ts)
        return CLNODE_OK;
    return DR_RUN(d, CLN_RK_TAN_DENSE, 0, A, 1, DR_I32(A), DR_I64(n), DR_I64(t->nd), DR_I64(d->S1),
                  DR_BUF(B_(d, DR_JOB)), DR_BUF(d->K), DR_BUF(B_(d, DR_RL)), DR_BUF(B_(d, DR_RT)),
                  DR_BUF(d->slice[DS_EV]), DR_BUF(d->slice[DS_TS]), DR_BUF(T_(t, DT_EVI)),
                  DR_BUF(T_(t, DT_YD)), DR_BUF(T_(t, DT_YD1)), DR_BUF(T_(t, DT_FD)),
                  DR_BUF(T_(t, DT_OUT)));
}

/* y_{n+1} and its tangents become the next step's state (the next op): the buffers swap. */
static clnode_status dt_next(void *run, size_t A)
{
    (void)A;
    dev_tan *t = run;
    cln_buf *y = t->d->buf[DR_Y], *yd = t->buf[DT_YD];
    t->d->buf[DR_Y] = t->buf[DT_Y1];
    t->buf[DT_Y1] = y;
    t->buf[DT_YD] = t->buf[DT_YD1];
    t->buf[DT_YD1] = yd;
    return CLNODE_OK;
}

/* The run's tangents read back into the job's result, in doubles (the results op). */
static clnode_status dt_results(void *run)
{
    dev_tan *t = run;
    dev_rev *d = t->d;
    const size_t b0 = d->k0 * CLN_REV_BLOCK, Bg = d->Bg, B = d->job->B, es = d->es;
    const size_t row = d->slots * d->N, nd = t->nd;
    clnode_status st = dr_host(d, Bg * nd * row * es);
    if (st == CLNODE_OK)
        st = d->be->ops->buf_read(d->be, T_(t, DT_OUT), 0, Bg * nd * row * es, d->host);
    for (size_t p = 0; st == CLNODE_OK && p < Bg; ++p)
        for (size_t dd = 0; dd < nd; ++dd) {
            double *o = t->job->out + (dd * B + b0 + d->traj[p]) * row;
            const size_t r0 = (p * nd + dd) * row;
            for (size_t c = 0; c < row; ++c)
                o[c] = es == sizeof(float) ? (double)((const float *)(void *)d->host)[r0 + c]
                                           : ((const double *)(void *)d->host)[r0 + c];
        }
    return st;
}

static const cln_tan_ops dt_ops = {
    .rows = dt_rows,
    .setup = dt_setup,
    .points = dt_points,
    .begin = dt_begin,
    .stage = dt_stage,
    .stage_jvp = dt_stage_jvp,
    .y1 = dt_y1,
    .dense = dt_dense,
    .next = dt_next,
    .results = dt_results,
};

clnode_status cln_dev_tan_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                               cln_rev_run_fn fn, const void *arg)
{
    dev_tan *t = state;
    CLN_CHECK(be->ctx, t && nblocks <= t->d->gb, CLNODE_ERR_INTERNAL,
              "tangent blocks %zu of at most %zu at a time", nblocks, t ? t->d->gb : 0);
    return nblocks ? fn(arg, t, block0, nblocks) : CLNODE_OK;
}
