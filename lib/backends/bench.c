/* bench.c - the bare loops of a device (clnode/bench.h): a solve's GEMMs without the solver,
 * through the backend's own GEMM op; and its vector-field evaluations without the solver, through
 * the kernels a solve uses (the backend's rhs op). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "backends/bench.h"
#include "clnode/bench.h"
#include "cln_layout.h"

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The loop's buffers: the input H[0], two outputs H[1], H[2] to ping-pong between, the weights. */
typedef struct bench_bufs {
    cln_buf *H[3], *W[CLN_MAX_LAYERS];
} bench_bufs;

/* Host values of n elements in precision prec: from `src` (converted), or a fixed pattern. */
static void *bench_values(clnode_precision prec, size_t n, const double *src)
{
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    void *v = malloc((n ? n : 1) * es);
    for (size_t i = 0; v && i < n; ++i) {
        const double x = src ? src[i] : 0.01 * (double)(i % 97);
        if (prec == CLNODE_FP64)
            ((double *)v)[i] = x;
        else
            ((float *)v)[i] = (float)x;
    }
    return v;
}

/* Allocates and fills the buffers of the loop on `rows` rows. */
static clnode_status bench_setup(cln_backend *be, const cln_model_view *m, clnode_precision prec,
                                 size_t rows, bench_bufs *b)
{
    clnode_context *ctx = be->ctx;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    size_t width = 1, bytes = 0;
    for (size_t l = 0; l <= m->num_layers; ++l)
        width = m->sizes[l] > width ? m->sizes[l] : width;
    CLN_CHECK(ctx, cln_mul_size(rows, width, &bytes) && cln_mul_size(bytes, es, &bytes),
              CLNODE_ERR_INVALID_ARGUMENT, "batch %zu is too large", rows);
    for (int i = 0; i < 3; ++i) {
        const clnode_status st = be->ops->buf_alloc(be, bytes, &b->H[i]);
        if (st != CLNODE_OK)
            return st;
    }
    void *h = bench_values(prec, bytes / es, NULL);
    CLN_CHECK(ctx, h, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's input");
    clnode_status st = be->ops->buf_write(be, b->H[0], 0, bytes, h);
    free(h);
    for (size_t l = 0; st == CLNODE_OK && l < m->num_layers; ++l) {
        const size_t n = m->sizes[l] * m->sizes[l + 1];
        void *w = bench_values(prec, n, m->W[l]);
        CLN_CHECK(ctx, w, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's weights");
        st = be->ops->buf_alloc(be, n * es, &b->W[l]);
        if (st == CLNODE_OK)
            st = be->ops->buf_write(be, b->W[l], 0, n * es, w);
        free(w);
    }
    return st;
}

clnode_status cln_bench_gemm_loop(clnode_context *ctx, const cln_model_view *m, size_t batch,
                                  long evals, clnode_precision prec, clnode_gemm_mode mode,
                                  double *seconds, long *syncs)
{
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, m && batch >= 1 && evals >= 1, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_bench_gemm_loop: needs a model, batch >= 1 and evals >= 1");
    clnode_status st = cln_check_device_precision(ctx, prec, mode, "compute");
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    /* the rows a solve computes: the batch padded to the backend's alignment */
    const size_t align = be->row_align ? be->row_align : 1;
    CLN_CHECK(ctx, batch <= (size_t)-1 - align, CLNODE_ERR_INVALID_ARGUMENT, "batch too large");
    const size_t rows = (batch + align - 1) / align * align;
    bench_bufs b = {{NULL}, {NULL}};
    CLN_TRY(st, bench_setup(be, m, prec, rows, &b));
    const long syncs0 = be->syncs;
    const double t0 = bench_now();
    for (long e = 0; e < evals; ++e) {
        for (size_t l = 0; l < m->num_layers; ++l) {
            const size_t k = m->sizes[l], n = m->sizes[l + 1];
            cln_buf *in = l == 0 ? b.H[0] : b.H[1 + (l + 1) % 2], *out = b.H[1 + l % 2];
            CLN_TRY(st,
                    be->ops->gemm(be, prec, mode, rows, n, k, in, 0, k, b.W[l], 0, k, out, 0, n));
        }
    }
    double probe = 0; /* waits for the queue */
    CLN_TRY(st, be->ops->buf_read(be, b.H[1], 0, prec == CLNODE_FP64 ? sizeof(double) : 4, &probe));
    if (seconds)
        *seconds = bench_now() - t0;
    if (syncs)
        *syncs = be->syncs - syncs0;
fail:
    for (size_t l = 0; l < m->num_layers; ++l)
        be->ops->buf_free(be, b.W[l]);
    for (int i = 0; i < 3; ++i)
        be->ops->buf_free(be, b.H[i]);
    return st;
}

/* The model's output scale, if any, in sd as a solve puts it there. */
static clnode_status bench_scale_setup(cln_backend *be, const cln_model_view *m,
                                       clnode_precision prec, cln_solve_dev *sd)
{
    if (!m->out_scale)
        return CLNODE_OK;
    void *s = bench_values(prec, m->out_scale_n, m->out_scale);
    CLN_CHECK(be->ctx, s, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's scale");
    clnode_status st = be->ops->buf_alloc(be, m->out_scale_n * sd->esize, &sd->scale);
    if (st == CLNODE_OK)
        st = be->ops->buf_write(be, sd->scale, 0, m->out_scale_n * sd->esize, s);
    free(s);
    sd->scale_n = st == CLNODE_OK ? m->out_scale_n : 0;
    return st;
}

/* The per-solve buffers the backend's rhs op reads (backend.h), filled as a solve fills them:
 * the model in the solve's precision, Z from a fixed pattern of small values. */
static clnode_status bench_mlp_setup(cln_backend *be, const cln_model_view *m,
                                     clnode_precision prec, size_t rows, cln_solve_dev *sd)
{
    clnode_context *ctx = be->ctx;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    sd->prec = prec;
    sd->gemm_mode = CLNODE_GEMM_STRICT;
    sd->esize = es;
    sd->B = sd->Breal = sd->live = rows;
    sd->N = m->sizes[m->num_layers];
    sd->ldz = m->sizes[0];
    sd->stages = 1;
    sd->num_layers = m->num_layers;
    sd->sizes = m->sizes;
    size_t maxw = 1, zb, fb, hb;
    for (size_t l = 0; l < m->num_layers; ++l) {
        sd->act[l] = m->act[l];
        maxw = m->sizes[l + 1] > maxw ? m->sizes[l + 1] : maxw;
        sd->max_in = m->sizes[l] > sd->max_in ? m->sizes[l] : sd->max_in;
        const size_t w = m->sizes[l] * m->sizes[l + 1];
        sd->max_weights = w > sd->max_weights ? w : sd->max_weights;
    }
    CLN_CHECK(ctx,
              cln_mul_size(rows, sd->ldz * es, &zb) && cln_mul_size(rows, sd->N * es, &fb) &&
                  cln_mul_size(rows, maxw * es, &hb),
              CLNODE_ERR_INVALID_ARGUMENT, "batch %zu is too large", rows);
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, be->ops->buf_alloc(be, zb, &sd->Z));
    CLN_TRY(st, be->ops->buf_alloc(be, fb, &sd->F));
    CLN_TRY(st, be->ops->buf_alloc(be, hb, &sd->H[0]));
    CLN_TRY(st, be->ops->buf_alloc(be, hb, &sd->H[1]));
    CLN_TRY(st, be->ops->buf_alloc(be, sizeof(cln_iconsts), &sd->CI));
    /* the stage's buffers, not read (zeros), as large as a solve's */
    typedef CLN_CONSTS_STRUCT(double) consts_d;
    typedef CLN_RSTATE_STRUCT(double) rstate_d;
    CLN_TRY(st, be->ops->buf_alloc(be, fb, &sd->Y));
    CLN_TRY(st, be->ops->buf_alloc(be, sizeof(consts_d) / sizeof(double) * es, &sd->CR));
    CLN_TRY(st, be->ops->buf_alloc(be, rows * (sizeof(rstate_d) / sizeof(double)) * es, &sd->RS));
    CLN_TRY(st, be->ops->buf_alloc(be, rows * sizeof(cln_istate), &sd->IS));
    cln_iconsts KI;
    memset(&KI, 0, sizeof KI);
    KI.B = (int32_t)rows;
    KI.N = (int32_t)sd->N;
    KI.ldz = (int32_t)sd->ldz;
    CLN_TRY(st, be->ops->buf_write(be, sd->CI, 0, sizeof KI, &KI));
    void *z = bench_values(prec, zb / es, NULL);
    CLN_CHECK(ctx, z, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's input");
    st = be->ops->buf_write(be, sd->Z, 0, zb, z);
    free(z);
    for (size_t l = 0; st == CLNODE_OK && l < m->num_layers; ++l) {
        const size_t n = m->sizes[l] * m->sizes[l + 1];
        void *w = bench_values(prec, n, m->W[l]);
        CLN_CHECK(ctx, w, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's weights");
        st = be->ops->buf_alloc(be, n * es, &sd->W[l]);
        if (st == CLNODE_OK)
            st = be->ops->buf_write(be, sd->W[l], 0, n * es, w);
        free(w);
        if (st == CLNODE_OK && m->bias[l]) {
            void *b = bench_values(prec, m->sizes[l + 1], m->bias[l]);
            CLN_CHECK(ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's biases");
            st = be->ops->buf_alloc(be, m->sizes[l + 1] * es, &sd->bias[l]);
            if (st == CLNODE_OK)
                st = be->ops->buf_write(be, sd->bias[l], 0, m->sizes[l + 1] * es, b);
            free(b);
        }
    }
    if (st == CLNODE_OK)
        st = bench_scale_setup(be, m, prec, sd);
fail:
    return st;
}

clnode_status cln_bench_mlp_loop(clnode_context *ctx, const cln_model_view *m, size_t batch,
                                 long evals, clnode_precision prec, double *seconds)
{
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, m && batch >= 1 && batch <= INT32_MAX && evals >= 1, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_bench_mlp_loop: needs a model, 1 <= batch <= 2^31 - 1 and evals >= 1");
    const clnode_status pst = cln_check_device_precision(ctx, prec, CLNODE_GEMM_STRICT, "compute");
    if (pst != CLNODE_OK)
        return pst;
    cln_backend *be = ctx->backend;
    CLN_CHECK(ctx, be->ops->rhs, CLNODE_ERR_UNSUPPORTED, "device %s has no bare vector-field loop",
              be->device_name);
    CLN_CHECK(ctx, m->time_input == 0 && m->num_inputs == 0, CLNODE_ERR_UNSUPPORTED,
              "the bare vector-field loop takes models of the state alone");
    const size_t align = be->row_align ? be->row_align : 1;
    CLN_CHECK(ctx, batch <= (size_t)-1 - align, CLNODE_ERR_INVALID_ARGUMENT, "batch too large");
    cln_solve_dev sd;
    memset(&sd, 0, sizeof sd);
    int begun = 0;
    clnode_status st;
    CLN_TRY(st, bench_mlp_setup(be, m, prec, (batch + align - 1) / align * align, &sd));
    CLN_TRY(st, be->ops->solve_begin(be, &sd));
    begun = 1;
    CLN_TRY(st, be->ops->rhs(be, &sd)); /* the first evaluation warms the caches */
    double probe = 0;
    CLN_TRY(st, be->ops->buf_read(be, sd.F, 0, sd.esize, &probe));
    const double t0 = bench_now();
    for (long e = 0; e < evals; ++e)
        CLN_TRY(st, be->ops->rhs(be, &sd));
    CLN_TRY(st, be->ops->buf_read(be, sd.F, 0, sd.esize, &probe)); /* waits for the queue */
    if (seconds)
        *seconds = bench_now() - t0;
fail:
    if (begun)
        be->ops->solve_end(be, &sd);
    for (size_t l = 0; l < CLN_MAX_LAYERS; ++l) {
        be->ops->buf_free(be, sd.W[l]);
        be->ops->buf_free(be, sd.bias[l]);
    }
    cln_buf *all[] = {sd.Z, sd.F, sd.H[0], sd.H[1], sd.CI, sd.Y, sd.CR, sd.RS, sd.IS, sd.scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        be->ops->buf_free(be, all[i]);
    return st;
}
