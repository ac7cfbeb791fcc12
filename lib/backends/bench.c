/* bench.c - the bare GEMM loop of a device (clnode/bench.h): a solve's GEMMs without the solver,
 * through the backend's own GEMM op. */
#include <stdlib.h>
#include <time.h>

#include "backends/backend.h"
#include "clnode/bench.h"

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
static clnode_status bench_setup(cln_backend *be, const clnode_model *m, clnode_precision prec,
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
        void *w = bench_values(prec, n, m->weights[l]);
        CLN_CHECK(ctx, w, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the benchmark's weights");
        st = be->ops->buf_alloc(be, n * es, &b->W[l]);
        if (st == CLNODE_OK)
            st = be->ops->buf_write(be, b->W[l], 0, n * es, w);
        free(w);
    }
    return st;
}

clnode_status clnode_bench_gemm_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                     long evals, clnode_precision prec, clnode_gemm_mode mode,
                                     double *seconds, long *syncs)
{
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, m && batch >= 1 && evals >= 1, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_bench_gemm_loop: needs a model, batch >= 1 and evals >= 1");
    clnode_status st = cln_check_gemm_mode(ctx, prec, mode);
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    CLN_CHECK(ctx, be->ops->supports(be, prec),
              prec == CLNODE_FP64 ? CLNODE_ERR_NO_FP64 : CLNODE_ERR_UNSUPPORTED,
              "device %s cannot compute in %s", be->device_name, clnode_precision_name(prec));
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
