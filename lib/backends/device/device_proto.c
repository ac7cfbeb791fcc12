/* device_proto.c - the kernel protocol of the device backends over their launch tables
 * (device_proto.h): the guards, the per-solve state and its z_ready protocol. */
#include "backends/device/device_proto.h"
#include "cln_layout.h"

#include <stdint.h>
#include <stdlib.h>

/* The per-solve state (sd->be_data) of a device backend. */
typedef struct cln_dev_solve {
    void *state; /* the backend's (cln_dev_launch.solve_begin) */
    int z_ready; /* the stage whose argument Z holds; -1: none (device_proto.h) */
} cln_dev_solve;

static const cln_dev_launch *dev_launch(const cln_backend *be)
{
    return ((const cln_dev_backend *)(const void *)be)->launch;
}

void *cln_dev_state(const cln_solve_dev *sd)
{
    const cln_dev_solve *ds = sd->be_data;
    return ds ? ds->state : NULL;
}

int cln_dev_block_fits(size_t size, size_t esize, size_t off, size_t rows, size_t cols, size_t ld)
{
    size_t last, end, bytes;
    if (rows == 0 || cols == 0)
        return 1;
    return cln_mul_size(rows - 1, ld, &last) && cln_add_size(last, cols, &end) &&
           cln_add_size(end, off, &end) && cln_mul_size(end, esize, &bytes) && bytes <= size;
}

clnode_status cln_dev_gemm_check(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode,
                                 size_t m, size_t n, size_t k, const cln_buf *A, size_t a_off,
                                 size_t lda, const cln_buf *Bm, size_t b_off, size_t ldb,
                                 const cln_buf *C, size_t c_off, size_t ldc, int *nothing)
{
    clnode_context *ctx = be->ctx;
    *nothing = 1;
    const clnode_status st = cln_check_gemm_mode(ctx, prec, mode);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, be->ops->supports(be, prec),
              prec == CLNODE_FP64 ? CLNODE_ERR_NO_FP64 : CLNODE_ERR_UNSUPPORTED,
              "device %s cannot multiply in %s", be->device_name, clnode_precision_name(prec));
    if (m == 0 || n == 0)
        return CLNODE_OK;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    size_t (*size)(const cln_buf *) = dev_launch(be)->buf_size;
    CLN_CHECK(ctx, lda >= k && ldb >= k && ldc >= n, CLNODE_ERR_INTERNAL,
              "GEMM %zu x %zu x %zu: leading dimensions %zu, %zu, %zu shorter than their rows", m,
              n, k, lda, ldb, ldc);
    CLN_CHECK(ctx,
              cln_dev_block_fits(size(A), es, a_off, m, k, lda) &&
                  cln_dev_block_fits(size(Bm), es, b_off, n, k, ldb) &&
                  cln_dev_block_fits(size(C), es, c_off, m, n, ldc),
              CLNODE_ERR_INTERNAL, "GEMM %zu x %zu x %zu reaches past its buffers", m, n, k);
    *nothing = 0;
    return CLNODE_OK;
}

/* The checks every m x n block op makes: inside a solve, an INT32 block inside buffer C. */
static clnode_status dev_block_check(cln_backend *be, const cln_solve_dev *sd, const char *op,
                                     const cln_buf *C, size_t c_off, size_t ldc, size_t m, size_t n)
{
    clnode_context *ctx = be->ctx;
    CLN_CHECK(ctx, sd->be_data, CLNODE_ERR_INTERNAL, "%s outside a solve", op);
    CLN_CHECK(ctx, m <= INT32_MAX && n <= INT32_MAX && ldc >= n, CLNODE_ERR_INVALID_ARGUMENT,
              "%s block %zu x %zu (ldc %zu) is out of range", op, m, n, ldc);
    CLN_CHECK(ctx, cln_dev_block_fits(dev_launch(be)->buf_size(C), sd->esize, c_off, m, n, ldc),
              CLNODE_ERR_INTERNAL, "%s block %zu x %zu reaches past its buffer", op, m, n);
    return CLNODE_OK;
}

static int dev_act_known(int act)
{
    return act >= 0 && act <= CLNODE_ACT_GELU;
}

void cln_dev_solve_end(cln_backend *be, cln_solve_dev *sd)
{
    cln_dev_solve *ds = sd->be_data;
    if (ds)
        dev_launch(be)->state_free(ds->state);
    free(ds);
    sd->be_data = NULL;
}

clnode_status cln_dev_solve_begin(cln_backend *be, cln_solve_dev *sd)
{
    const cln_dev_launch *L = dev_launch(be);
    clnode_context *ctx = be->ctx;
    CLN_CHECK(ctx, sd->B <= INT32_MAX && sd->ldz <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "batch %zu x %zu is too large for the %s kernels", sd->B, sd->ldz, L->api);
    cln_dev_solve *ds = calloc(1, sizeof *ds);
    CLN_CHECK(ctx, ds, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the %s solve state", L->api);
    ds->z_ready = -1;
    sd->be_data = ds; /* released by solve_end, or below on failure */
    const clnode_status st = L->solve_begin(be, sd, &ds->state);
    if (st != CLNODE_OK)
        cln_dev_solve_end(be, sd);
    return st;
}

clnode_status cln_dev_init(cln_backend *be, cln_solve_dev *sd)
{
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(be->ctx, ds, CLNODE_ERR_INTERNAL, "init outside a solve");
    ds->z_ready = -1;
    be->launches++;
    return dev_launch(be)->init(be, sd, ds->state);
}

/* The automatic first step's passes write Z (phase 0): no stage argument is ready after them. */
clnode_status cln_dev_dt0(cln_backend *be, cln_solve_dev *sd, int phase)
{
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(be->ctx, ds, CLNODE_ERR_INTERNAL, "dt0 outside a solve");
    ds->z_ready = -1;
    be->launches++;
    return dev_launch(be)->dt0(be, sd, ds->state, phase);
}

/* The stage and finish passes run over the live rows only (rows past them are frozen). */
clnode_status cln_dev_stage(cln_backend *be, cln_solve_dev *sd, int i)
{
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(be->ctx, ds, CLNODE_ERR_INTERNAL, "stage outside a solve");
    ds->z_ready = -1;
    be->launches++;
    return dev_launch(be)->stage(be, sd, ds->state, i);
}

clnode_status cln_dev_finish(cln_backend *be, cln_solve_dev *sd)
{
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(be->ctx, ds, CLNODE_ERR_INTERNAL, "finish outside a solve");
    ds->z_ready = -1;
    be->launches++;
    const clnode_status st = dev_launch(be)->finish(be, sd, ds->state);
    if (st == CLNODE_OK)
        ds->z_ready = (int)sd->first_stage;
    return st;
}

/* Stage i and the vector field on it (backend.h): the stage pass only when Z does not hold its
 * argument yet; the layer loop's last layer (last_layer_fused) leaves the next one's argument in
 * Z for every stage but the last. */
clnode_status cln_dev_stage_rhs(cln_backend *be, cln_solve_dev *sd, int i)
{
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(be->ctx, ds, CLNODE_ERR_INTERNAL, "stage_rhs outside a solve");
    clnode_status st = CLNODE_OK;
    if (ds->z_ready != i) {
        be->launches++;
        st = dev_launch(be)->stage(be, sd, ds->state, i);
    }
    ds->z_ready = -1;
    if (st == CLNODE_OK)
        st = cln_mlp_layers(be, sd, i, 1);
    return st;
}

/* The bare vector-field loop's evaluation (backend.h): F block 0 = MLP(Z), no stage. */
clnode_status cln_dev_rhs(cln_backend *be, cln_solve_dev *sd)
{
    CLN_CHECK(be->ctx, sd->be_data, CLNODE_ERR_INTERNAL, "rhs outside a solve");
    return cln_mlp_layers(be, sd, 0, 0);
}

clnode_status cln_dev_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                               size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    clnode_status st = dev_block_check(be, sd, "bias_act", C, c_off, ldc, m, n);
    if (st != CLNODE_OK || m == 0 || n == 0)
        return st;
    const cln_dev_launch *L = dev_launch(be);
    CLN_CHECK(be->ctx, !bias || cln_dev_block_fits(L->buf_size(bias), sd->esize, 0, 1, n, n),
              CLNODE_ERR_INTERNAL, "bias_act's bias is shorter than %zu", n);
    CLN_CHECK(be->ctx, dev_act_known(act), CLNODE_ERR_INTERNAL, "activation code %d", act);
    be->launches++;
    return L->bias_act(be, cln_dev_state(sd), C, c_off, ldc, m, n, bias, act);
}

clnode_status cln_dev_out_scale(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                                size_t ldc, size_t m, size_t n)
{
    CLN_CHECK(be->ctx, sd->scale, CLNODE_ERR_INTERNAL, "out_scale outside a scaled solve");
    clnode_status st = dev_block_check(be, sd, "out_scale", C, c_off, ldc, m, n);
    if (st != CLNODE_OK || m == 0 || n == 0)
        return st;
    const cln_dev_launch *L = dev_launch(be);
    CLN_CHECK(be->ctx,
              sd->scale_n <= INT32_MAX && cln_dev_block_fits(L->buf_size(sd->scale), sd->esize, 0,
                                                             1, sd->scale_n, sd->scale_n),
              CLNODE_ERR_INTERNAL, "out_scale's scale is shorter than %zu", sd->scale_n);
    be->launches++;
    return L->out_scale(be, sd, cln_dev_state(sd), C, c_off, ldc, m, n);
}

/* The last layer's bias + activation on F block i (when the generic loop would apply it: a
 * bias or an activation other than the identity), its output scale and the argument of stage
 * i + 1, in one cln_bias_act_stage launch (backend.h: last_layer_fused). */
clnode_status cln_dev_last_layer_fused(cln_backend *be, cln_solve_dev *sd, int i)
{
    clnode_context *ctx = be->ctx;
    cln_dev_solve *ds = sd->be_data;
    CLN_CHECK(ctx, ds && i >= 0 && (size_t)i + 1 < sd->stages && sd->live <= INT32_MAX,
              CLNODE_ERR_INTERNAL, "last_layer_fused of stage %d outside a solve", i);
    const cln_dev_launch *L = dev_launch(be);
    const size_t last = sd->num_layers - 1;
    cln_buf *bias = sd->bias[last];
    const int act = sd->act[last];
    CLN_CHECK(ctx, !bias || cln_dev_block_fits(L->buf_size(bias), sd->esize, 0, 1, sd->N, sd->N),
              CLNODE_ERR_INTERNAL, "the last layer's bias is shorter than %zu", sd->N);
    CLN_CHECK(ctx, dev_act_known(act), CLNODE_ERR_INTERNAL, "activation code %d", act);
    const int apply = bias != NULL || act != CLNODE_ACT_IDENTITY;
    be->launches++;
    const clnode_status st = L->bias_act_stage(be, sd, ds->state, i, bias, act, apply);
    if (st == CLNODE_OK)
        ds->z_ready = i + 1;
    return st;
}

clnode_status cln_dev_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active)
{
    CLN_CHECK(be->ctx, sd->be_data, CLNODE_ERR_INTERNAL, "count_active outside a solve");
    long n = -1;
    be->syncs++;
    be->launches++;
    const clnode_status st = dev_launch(be)->count(be, sd, cln_dev_state(sd), &n);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(be->ctx, n >= 0 && (size_t)n <= sd->B, CLNODE_ERR_INTERNAL,
              "active count %ld out of range (batch %zu)", n, sd->B);
    *active = (size_t)n;
    return CLNODE_OK;
}

/* Compaction (backend.h): cln_swap_rows over (word of the row, pair). */
clnode_status cln_dev_swap_rows(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off,
                                size_t stride, size_t len, size_t npairs)
{
    clnode_context *ctx = be->ctx;
    CLN_CHECK(ctx, sd->be_data, CLNODE_ERR_INTERNAL, "swap_rows outside a solve");
    if (npairs == 0 || len == 0)
        return CLNODE_OK;
    const cln_dev_launch *L = dev_launch(be);
    CLN_CHECK(ctx,
              off % 4 == 0 && stride % 4 == 0 && len % 4 == 0 && len <= stride &&
                  npairs <= INT32_MAX / 2 && 2 * npairs * sizeof(int32_t) <= L->buf_size(sd->PAIRS),
              CLNODE_ERR_INTERNAL, "swap_rows of %zu pairs of %zu bytes at %zu", npairs, len, off);
    be->launches++;
    return L->swap(be, sd, cln_dev_state(sd), buf, off / 4, stride / 4, len / 4, npairs);
}

/* The saved steps' growth (backend.h): one rectangular copy, enqueued like a kernel. */
clnode_status cln_dev_copy_rows(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                                cln_buf *src, size_t src_off, size_t src_stride, size_t len,
                                size_t rows)
{
    if (rows == 0 || len == 0)
        return CLNODE_OK;
    const cln_dev_launch *L = dev_launch(be);
    CLN_CHECK(be->ctx,
              dst != src && cln_rows_fit(L->buf_size(dst), dst_off, dst_stride, len, rows) &&
                  cln_rows_fit(L->buf_size(src), src_off, src_stride, len, rows),
              CLNODE_ERR_INTERNAL, "copy_rows of %zu rows of %zu bytes out of range", rows, len);
    be->launches++;
    return L->copy(be, dst, dst_off, dst_stride, src, src_off, src_stride, len, rows);
}

/* A solve from device arrays (backend.h: nonfinite_rows): cln_nonfinite_rows over the rows,
 * through the launch of the reverse pass's kernels (built once per precision as they are). */
clnode_status cln_dev_nonfinite_rows(cln_backend *be, clnode_precision prec, cln_buf *X, size_t off,
                                     size_t ld, size_t cols, size_t rows, cln_buf *FLAG)
{
    if (rows == 0 || cols == 0)
        return CLNODE_OK;
    const cln_dev_launch *L = dev_launch(be);
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    CLN_CHECK(be->ctx,
              rows <= INT32_MAX && cols <= ld &&
                  cln_dev_block_fits(L->buf_size(X), es, off, rows, cols, ld) &&
                  rows <= L->buf_size(FLAG) / sizeof(int64_t),
              CLNODE_ERR_INTERNAL, "nonfinite_rows of %zu rows of %zu values out of range", rows,
              cols);
    const cln_dev_arg args[6] = {{CLN_ARG_I64, NULL, (long long)rows},
                                 {CLN_ARG_I64, NULL, (long long)cols},
                                 {CLN_ARG_I64, NULL, (long long)ld},
                                 {CLN_ARG_I64, NULL, (long long)off},
                                 {CLN_ARG_BUF, X, 0},
                                 {CLN_ARG_BUF, FLAG, 0}};
    const size_t n[3] = {rows, 1, 1};
    be->launches++;
    return L->rev_launch(be, prec, CLN_RK_NONFINITE, 0, args, 6, n);
}

/* A solve from device arrays (backend.h: bad_save_ts): cln_bad_save_ts over the rows of save
 * times, through the launch of the reverse pass's kernels. */
clnode_status cln_dev_bad_save_ts(cln_backend *be, clnode_precision prec, cln_buf *TS, size_t ld,
                                  size_t cols, size_t rows, cln_buf *RS, int within, cln_buf *FLAG)
{
    if (rows == 0 || cols == 0)
        return CLNODE_OK;
    const cln_dev_launch *L = dev_launch(be);
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t rs_row = sizeof(CLN_RSTATE_STRUCT(double)) / sizeof(double) * es;
    CLN_CHECK(be->ctx,
              rows <= INT32_MAX && (ld == 0 || cols <= ld) &&
                  cln_dev_block_fits(L->buf_size(TS), es, 0, rows, cols, ld) &&
                  rows <= L->buf_size(RS) / rs_row && rows <= L->buf_size(FLAG) / sizeof(int64_t),
              CLNODE_ERR_INTERNAL, "bad_save_ts of %zu rows of %zu save times out of range", rows,
              cols);
    const cln_dev_arg args[7] = {{CLN_ARG_I64, NULL, (long long)rows},
                                 {CLN_ARG_I64, NULL, (long long)cols},
                                 {CLN_ARG_I64, NULL, (long long)ld},
                                 {CLN_ARG_I64, NULL, within ? 1 : 0},
                                 {CLN_ARG_BUF, TS, 0},
                                 {CLN_ARG_BUF, RS, 0},
                                 {CLN_ARG_BUF, FLAG, 0}};
    const size_t n[3] = {rows, 1, 1};
    be->launches++;
    return L->rev_launch(be, prec, CLN_RK_BAD_SAVE_TS, 0, args, 7, n);
}

/* The saved steps grew (backend.h): cln_finish's two last arguments again. */
clnode_status cln_dev_solve_rebind(cln_backend *be, cln_solve_dev *sd)
{
    CLN_CHECK(be->ctx, sd->be_data, CLNODE_ERR_INTERNAL, "solve_rebind outside a solve");
    return dev_launch(be)->rebind(be, sd, cln_dev_state(sd));
}
