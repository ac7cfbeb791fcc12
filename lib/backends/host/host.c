/* lib/backends/host/: the host CPU backend: the ordered GEMM (AVX-512, AVX2, portable) or
 * OpenBLAS, and the cl/ arithmetic in vectorised C loops. */
/* host.c - the host backend: the shared arithmetic of cl/ in C loops, and GEMMs either
 * ordered (lib/backends/host/host_gemm.c: every element summed in order with fma, as CLBlast's
 * kernels do; the default device "host") or through OpenBLAS ("host:openblas"). It is also the
 * float64 reference every other backend is compared with.
 *
 * With the ordered GEMM in strict mode a stage and the vector field on it run as one fused pass
 * (host_mlp.inc) on weights packed once per model (kept between solves of the same model), the
 * rows the GEMM's tiles leave (a batch of one, say) on the row kernels of host_gemv.c. Rows are
 * shared between the threads of the backend's pool (host_pool.c) when a pass has enough work to
 * pay for the hand-off; a small batch runs inline on the caller's thread. No element's arithmetic
 * depends on the split. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <unistd.h>

#include "backends/host/host_gemm.h"
#include "backends/host/host_gemv.h"
#include "backends/host/host_math.h"
#include "backends/host/host_mlp.h"
#include "backends/host/host_pool.h"
#include "backends/host/host_reverse.h"
#include "backends/registry.h"
#include "cln_layout.h"

_Static_assert(CLN_HOST_MLP_MAX_LAYERS == CLN_MAX_LAYERS, "host_mlp.h sizes its arrays so");

/* Work (multiply-adds, or elements for the element-wise passes) below which a part of a pass is
 * not handed to another thread: a condition-variable hand-off costs some microseconds, and on a
 * busy machine a woken thread may wait much longer for a core. */
#define CLN_HOST_PART_FMAS ((size_t)1 << 20)
#define CLN_HOST_PART_ELEMS ((size_t)1 << 16)
#define CLN_HOST_PART_ROWS 64
/* The fused pass and whole steps hand another thread at least one row block: at the seed
 * model's ~72k multiply-adds a row a step, 24 rows are ~100 us of work, against a hand-off of a
 * few microseconds now that the pool's threads watch for the next job (host_pool.c). Two threads
 * took a batch of 48 in 1.5 ms where one took 2.4. */
#define CLN_HOST_FUSED_PART_ROWS CLN_HOST_MLP_ROWS
/* Parts split the rows at multiples of the GEMM's row tile. */
#define CLN_HOST_PART_ALIGN 6

/* Models whose weights and biases take up to this many bytes are kept packed between solves. */
#define CLN_HOST_KEEP_BYTES ((size_t)64 << 20)

struct cln_buf {
    size_t size;
    unsigned char *p;
};

/* Rows of every OpenBLAS call (see host_gemm). */
#define CLN_HOST_ROWS 16
/* Multiply-adds up to which OpenBLAS runs a GEMM on the calling thread (its SMP_THRESHOLD_MIN
 * 65536 times its default GEMM_MULTITHREAD_THRESHOLD 4). */
#define CLN_HOST_BLAS_SERIAL ((size_t)65536 * 4)

typedef struct host_backend {
    cln_backend base;
    int openblas;     /* 1: OpenBLAS in blocks of CLN_HOST_ROWS rows; 0: ordered GEMM */
    cln_gemm_isa isa; /* kernel of the ordered GEMM */
    void *scratch;    /* the transposed B of the ordered GEMM (TF32-rounded in tf32 mode) */
    size_t scratch_cap;
    void *scratch_a; /* tf32 mode: A rounded to TF32 */
    size_t scratch_a_cap;
    void *scratch_c; /* OpenBLAS: one block of C, column-major */
    size_t scratch_c_cap;
    cln_pool *pool;            /* the threads of every pass (1: all inline) */
    struct host_claim *claims; /* whole steps: one counter of claimed blocks per part */
    struct host_solve *kept;   /* the last solve's packed model, for the next solve of that model */
} host_backend;

/* The next unclaimed row block of one part's rows (host_steps), on a cache line of its own. */
typedef struct host_claim {
    _Alignas(64) atomic_size_t next;
} host_claim;

/* Per-solve state (sd->be_data): the fused pass's packed model and activation scratch. At the end
 * of a solve it is kept by the backend, and the next solve takes it over when its model is the
 * same (precision, shapes, activations, and the same model object by its serial, whose upload the
 * driver then skips, or the weights and biases byte for byte, compared with the copy in src): a
 * series of small solves of one model packs it once. */
typedef struct host_solve {
    cln_host_mlp mlp;
    void *packed;           /* every layer's packed weights */
    cln_gemv_panel *panels; /* every layer's row-kernel panels */
    void *H;                /* per thread: 2 x CLN_HOST_MLP_ROWS x mlp.ldh elements */
    size_t h_elems;         /* from one thread's scratch to the next (CLN_HOST_SCRATCH) */
    size_t fmas_per_row;    /* multiply-adds of one row through the MLP */
    clnode_precision prec;
    unsigned long evals; /* fused passes so far: their parity orders the row kernels' panels */
    unsigned long long serial; /* the model's serial (cln_solve_dev.model_serial), 0: unknown */
    void *src; /* every layer's weights, then its bias if any, as the solve uploaded them; NULL:
                  not kept (larger than CLN_HOST_KEEP_BYTES) */
    int complete;
} host_solve;

/* The packed model's blocks (each layer's GEMM weights, row-kernel panels and bias) start on a
 * cache line: a 32- or 64-byte vector load from them never straddles two lines (malloc aligns to
 * 16 bytes: half the AVX2 loads of a panel did, and a pass over weights held in L1 took ~40%
 * longer so in isolation; no difference was measurable in a whole solve). */
#define CLN_HOST_LINE 64

/* n elements of esize bytes rounded up to whole cache lines, in elements; 0 on overflow. */
static size_t host_line_elems(size_t n, size_t esize)
{
    const size_t per = CLN_HOST_LINE / esize;
    return n > (size_t)-1 - per ? 0 : (n + per - 1) / per * per;
}

/* Each thread's activation scratch starts on a page, in a region of its own rounded up to
 * CLN_HOST_SCRATCH bytes with CLN_HOST_SCRATCH more between it and the next thread's. With the
 * scratch of two threads back to back, or 4.5 KiB apart, the second thread's fused pass took
 * 12-30% more CPU time than the first's on the same rows (B = 4096, two threads, an AMD EPYC
 * whose cores have their own L1 and L2; most likely the first core's prefetchers running past
 * the end of its scratch into lines the second core is writing), and every step waited for it:
 * 117-122 ms a solve, against 105-106 ms with 12 KiB or more between them. */
#define CLN_HOST_PAGE 4096
#define CLN_HOST_SCRATCH 32768

/* bytes (> 0) of zeros aligned to `align` (a power of two, at least a cache line); NULL when out
 * of memory (or asked for none). */
static void *host_zalloc(size_t bytes, size_t align)
{
    if (bytes == 0 || bytes > (size_t)-1 - align)
        return NULL;
    bytes = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

static void host_solve_free(host_solve *hs)
{
    if (hs) {
        free(hs->packed);
        free(hs->panels);
        free(hs->H);
        free(hs->src);
        free(hs);
    }
}

static void host_destroy(cln_backend *be)
{
    host_backend *hb = (host_backend *)be;
    host_solve_free(hb->kept);
    cln_pool_destroy(hb->pool);
    free(hb->claims);
    free(hb->scratch);
    free(hb->scratch_a);
    free(hb->scratch_c);
    free(hb);
}

/* Makes a grow-only GEMM scratch hold `bytes`; it grows only when a larger product is first seen
 * (solve_begin sizes both for the whole model, so steps never allocate). */
static clnode_status host_grow(host_backend *hb, void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return CLNODE_OK;
    void *p = realloc(*buf, bytes);
    CLN_CHECK(hb->base.ctx, p, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes of GEMM scratch", bytes);
    *buf = p;
    *cap = bytes;
    return CLNODE_OK;
}

static clnode_status host_scratch(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch, &hb->scratch_cap, bytes);
}

static clnode_status host_scratch_a(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch_a, &hb->scratch_a_cap, bytes);
}

static int host_supports(const cln_backend *be, clnode_precision prec)
{
    (void)be;
    return prec == CLNODE_FP32 || prec == CLNODE_FP64;
}

static clnode_status host_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out)
{
    *out = NULL;
    cln_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    /* calloc: unused parts of the save buffers read back as zeros, never as garbage */
    b->p = calloc(bytes ? bytes : 1, 1);
    if (!b->p) {
        free(b);
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on the host",
                        bytes);
    }
    b->size = bytes;
    *out = b;
    return CLNODE_OK;
}

static void host_buf_free(cln_backend *be, cln_buf *b)
{
    (void)be;
    if (b)
        free(b->p);
    free(b);
}

static clnode_status host_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes,
                                    const void *src)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer write out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(b->p + off, src, bytes);
    return CLNODE_OK;
}

static clnode_status host_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer read out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(dst, b->p + off, bytes);
    return CLNODE_OK;
}

#define HOST_F32(buf, off) ((float *)(void *)(buf)->p + (off))
#define HOST_F64(buf, off) ((double *)(void *)(buf)->p + (off))

/* Row `rows * part / parts` rounded to the nearest multiple of CLN_HOST_PART_ALIGN (at most
 * rows). */
static size_t host_part_edge(size_t rows, size_t part, size_t parts)
{
    const size_t q = CLN_HOST_PART_ALIGN, e = (rows * part / parts + q / 2) / q * q;
    return part == 0 ? 0 : part >= parts || e > rows ? rows : e;
}

/* Row range of one part of a pass over `rows` rows: even shares split at multiples of the GEMM's
 * row tile (at multiples of the 24-row block, a batch of 64 went 24 + 40 and took as long as 40
 * rows on one thread). */
static void host_part_rows(size_t rows, size_t part, size_t parts, size_t *r0, size_t *r1)
{
    *r0 = host_part_edge(rows, part, parts);
    *r1 = host_part_edge(rows, part + 1, parts);
}

/* One ordered product on packed B, its rows shared between the pool's threads. */
typedef struct host_gemm_job {
    cln_gemm_isa isa;
    int f64;
    size_t m, n, k, lda, ldw, ldc;
    const void *A, *Wt;
    void *C;
} host_gemm_job;

static void host_gemm_part(void *arg, size_t part, size_t parts)
{
    const host_gemm_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->m, part, parts, &r0, &r1);
    if (j->f64)
        cln_gemm_packed_f64(j->isa, r1 - r0, j->n, j->k, (const double *)j->A + r0 * j->lda, j->lda,
                            j->Wt, j->ldw, (double *)j->C + r0 * j->ldc, j->ldc);
    else
        cln_gemm_packed_f32(j->isa, r1 - r0, j->n, j->k, (const float *)j->A + r0 * j->lda, j->lda,
                            j->Wt, j->ldw, (float *)j->C + r0 * j->ldc, j->ldc);
}

/* OpenBLAS rounds a row differently depending on the number of rows of the call (its
 * small-matrix and edge kernels sum in other orders), and, in a row-major call, on the row's
 * place in it: the rows are the columns of OpenBLAS's column-major product, which its driver
 * hands to the kernel in chunks summed in different orders (on Zen: rows 0-5, 6-11 and 12-15
 * of a 16-row call, measured). Both would make a trajectory's bits depend on its place in the
 * batch. Every call therefore has exactly CLN_HOST_ROWS rows, and the rows are the kernel's
 * M dimension (its vector lanes, every lane summed alike): OpenBLAS writes the block
 * column-major (scratch_c), transposed into C here. */
static clnode_status host_gemm_openblas(host_backend *hb, clnode_precision prec, size_t m, size_t n,
                                        size_t k, const void *A, size_t lda, const void *W,
                                        size_t ldb, void *C, size_t ldc)
{
    const size_t esize = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    CLN_CHECK(hb->base.ctx, m % CLN_HOST_ROWS == 0, CLNODE_ERR_INTERNAL,
              "host GEMM with %zu rows (not a multiple of %d)", m, CLN_HOST_ROWS);
    size_t cbytes;
    CLN_CHECK(hb->base.ctx, cln_mul_size(n, CLN_HOST_ROWS * esize, &cbytes),
              CLNODE_ERR_OUT_OF_MEMORY, "GEMM of %zu columns is too large", n);
    const clnode_status cs = host_grow(hb, &hb->scratch_c, &hb->scratch_c_cap, cbytes);
    if (cs != CLNODE_OK)
        return cs;
    /* OpenBLAS shares a larger product between its threads, and a thread's part of the rows
     * is then summed in another order: the columns go in panels small enough to run on the
     * calling thread (OpenBLAS's default threshold), so the bits do not depend on its thread
     * count either (a panel of one column with k above CLN_HOST_BLAS_SERIAL / CLN_HOST_ROWS
     * may still be shared). A panel's columns are the same for every block. */
    size_t panel = CLN_HOST_BLAS_SERIAL / CLN_HOST_ROWS / (k ? k : 1);
    if (panel == 0)
        panel = 1;
    for (size_t r = 0; r < m; r += CLN_HOST_ROWS) {
        if (prec == CLNODE_FP32) {
            float *t = hb->scratch_c, *c = (float *)C + r * ldc;
            for (size_t j = 0; j < n; j += panel)
                cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, CLN_HOST_ROWS,
                            (blasint)(n - j < panel ? n - j : panel), (blasint)k, 1.0f,
                            (const float *)A + r * lda, (blasint)lda, (const float *)W + j * ldb,
                            (blasint)ldb, 0.0f, t + j * CLN_HOST_ROWS, CLN_HOST_ROWS);
            for (size_t i = 0; i < CLN_HOST_ROWS; ++i)
                for (size_t j = 0; j < n; ++j)
                    c[i * ldc + j] = t[j * CLN_HOST_ROWS + i];
        } else {
            double *t = hb->scratch_c, *c = (double *)C + r * ldc;
            for (size_t j = 0; j < n; j += panel)
                cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, CLN_HOST_ROWS,
                            (blasint)(n - j < panel ? n - j : panel), (blasint)k, 1.0,
                            (const double *)A + r * lda, (blasint)lda, (const double *)W + j * ldb,
                            (blasint)ldb, 0.0, t + j * CLN_HOST_ROWS, CLN_HOST_ROWS);
            for (size_t i = 0; i < CLN_HOST_ROWS; ++i)
                for (size_t j = 0; j < n; ++j)
                    c[i * ldc + j] = t[j * CLN_HOST_ROWS + i];
        }
    }
    return CLNODE_OK;
}

static clnode_status host_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode,
                               size_t m, size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda,
                               cln_buf *Bm, size_t b_off, size_t ldb, cln_buf *C, size_t c_off,
                               size_t ldc)
{
    const clnode_status gm = cln_check_gemm_mode(be->ctx, prec, mode);
    if (gm != CLNODE_OK)
        return gm;
    if (m == 0 || n == 0)
        return CLNODE_OK;
    host_backend *hb = (host_backend *)be;
    const int tf32 = mode == CLNODE_GEMM_TF32;
    const size_t esize = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    if (!hb->openblas || tf32) {
        /* scratch: B packed (ordered GEMM) or B rounded (OpenBLAS tf32), and A rounded */
        const size_t ldw = hb->openblas ? n : cln_gemm_packed_ld(n, esize);
        size_t bytes, abytes = 0;
        CLN_CHECK(be->ctx,
                  cln_mul_size(ldw, k ? k : 1, &bytes) && cln_mul_size(bytes, esize, &bytes),
                  CLNODE_ERR_OUT_OF_MEMORY, "GEMM of %zu x %zu is too large", n, k);
        CLN_CHECK(be->ctx,
                  !tf32 ||
                      (cln_mul_size(m, k ? k : 1, &abytes) && cln_mul_size(abytes, esize, &abytes)),
                  CLNODE_ERR_OUT_OF_MEMORY, "GEMM of %zu x %zu is too large", m, k);
        clnode_status st = host_scratch(hb, bytes);
        if (st == CLNODE_OK && tf32)
            st = host_scratch_a(hb, abytes);
        if (st != CLNODE_OK)
            return st;
    }
    if (!hb->openblas) {
        host_gemm_job j = {.isa = hb->isa,
                           .f64 = prec == CLNODE_FP64,
                           .m = m,
                           .n = n,
                           .k = k,
                           .lda = lda,
                           .ldw = cln_gemm_packed_ld(n, esize),
                           .ldc = ldc,
                           .Wt = hb->scratch};
        if (tf32) {
            cln_gemm_pack_tf32(n, k, HOST_F32(Bm, b_off), ldb, hb->scratch, j.ldw);
            cln_tf32_round_rows(m, k, HOST_F32(A, a_off), lda, hb->scratch_a, k);
            j.A = hb->scratch_a;
            j.lda = k;
            j.C = HOST_F32(C, c_off);
        } else if (prec == CLNODE_FP32) {
            cln_gemm_pack_f32(n, k, HOST_F32(Bm, b_off), ldb, hb->scratch, j.ldw);
            j.A = HOST_F32(A, a_off);
            j.C = HOST_F32(C, c_off);
        } else {
            cln_gemm_pack_f64(n, k, HOST_F64(Bm, b_off), ldb, hb->scratch, j.ldw);
            j.A = HOST_F64(A, a_off);
            j.C = HOST_F64(C, c_off);
        }
        const size_t parts =
            cln_pool_parts(hb->pool, m, n * (k ? k : 1), CLN_HOST_PART_FMAS, CLN_HOST_PART_ROWS);
        cln_pool_run(hb->pool, parts, host_gemm_part, &j);
        return CLNODE_OK;
    }
    const void *a =
        prec == CLNODE_FP32 ? (const void *)HOST_F32(A, a_off) : (const void *)HOST_F64(A, a_off);
    const void *w =
        prec == CLNODE_FP32 ? (const void *)HOST_F32(Bm, b_off) : (const void *)HOST_F64(Bm, b_off);
    size_t lda_ = lda, ldb_ = ldb;
    if (tf32) { /* OpenBLAS on TF32-rounded copies: fp32 accumulation in OpenBLAS's order */
        cln_tf32_round_rows(m, k, HOST_F32(A, a_off), lda, hb->scratch_a, k);
        cln_tf32_round_rows(n, k, HOST_F32(Bm, b_off), ldb, hb->scratch, k);
        a = hb->scratch_a;
        w = hb->scratch;
        lda_ = ldb_ = k;
    }
    return host_gemm_openblas(
        hb, prec, m, n, k, a, lda_, w, ldb_,
        prec == CLNODE_FP32 ? (void *)HOST_F32(C, c_off) : (void *)HOST_F64(C, c_off), ldc);
}

/* Bias + activation on an m x n block, its rows shared between the pool's threads. */
typedef struct host_act_job {
    cln_gemm_isa isa;
    int f64;
    void *C;
    size_t ldc, m, n;
    const void *bias;
    int act;
    const void *scale; /* non-NULL: the output scale pass (scale_n values) instead */
    size_t scale_n;
} host_act_job;

static void host_act_part(void *arg, size_t part, size_t parts)
{
    const host_act_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->m, part, parts, &r0, &r1);
    if (j->scale && j->f64)
        cln_host_out_scale_f64(j->isa, (double *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n,
                               j->scale, j->scale_n);
    else if (j->scale)
        cln_host_out_scale_f32(j->isa, (float *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->scale,
                               j->scale_n);
    else if (j->f64)
        cln_host_bias_act_f64(j->isa, (double *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->bias,
                              j->act);
    else
        cln_host_bias_act_f32(j->isa, (float *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->bias,
                              j->act);
}

static clnode_status host_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                                   size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    host_backend *hb = (host_backend *)be;
    const int f64 = sd->prec == CLNODE_FP64;
    host_act_job j = {.isa = hb->isa,
                      .f64 = f64,
                      .C = f64 ? (void *)HOST_F64(C, c_off) : (void *)HOST_F32(C, c_off),
                      .ldc = ldc,
                      .m = m,
                      .n = n,
                      .bias = bias ? (const void *)bias->p : NULL,
                      .act = act};
    cln_pool_run(hb->pool, cln_pool_parts(hb->pool, m, n, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_act_part, &j);
    return CLNODE_OK;
}

static clnode_status host_out_scale(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                                    size_t ldc, size_t m, size_t n)
{
    host_backend *hb = (host_backend *)be;
    const int f64 = sd->prec == CLNODE_FP64;
    host_act_job j = {.isa = hb->isa,
                      .f64 = f64,
                      .C = f64 ? (void *)HOST_F64(C, c_off) : (void *)HOST_F32(C, c_off),
                      .ldc = ldc,
                      .m = m,
                      .n = n,
                      .scale = sd->scale->p,
                      .scale_n = sd->scale_n};
    cln_pool_run(hb->pool, cln_pool_parts(hb->pool, m, n, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_act_part, &j);
    return CLNODE_OK;
}

static void host_solve_end(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (hs && hs->complete && hs->src) { /* kept for the next solve (host_kept_fits) */
        host_solve_free(hb->kept);
        hb->kept = hs;
    } else {
        host_solve_free(hs);
    }
    sd->be_data = NULL;
}

/* Whether the kept packed model has this solve's precision, layers and activations. */
static int host_kept_shape(const host_solve *hs, const cln_solve_dev *sd)
{
    const cln_host_mlp *mlp = &hs->mlp;
    if (hs->prec != sd->prec || mlp->layers != sd->num_layers)
        return 0;
    for (size_t l = 0; l < mlp->layers; ++l)
        if (mlp->in[l] != sd->sizes[l] || mlp->out[l] != sd->sizes[l + 1] ||
            mlp->act[l] != sd->act[l] || (mlp->bias[l] != NULL) != (sd->bias[l] != NULL))
            return 0;
    return 1;
}

/* Whether the kept packed model is this solve's: the same model (its serial: a model never
 * changes), or the same shape and weights and biases byte for byte (another model object with
 * the same values, e.g. the benchmarks' copy). */
static int host_kept_fits(const host_solve *hs, const cln_solve_dev *sd)
{
    if (!host_kept_shape(hs, sd))
        return 0;
    if (sd->model_serial != 0 && hs->serial == sd->model_serial)
        return 1;
    const cln_host_mlp *mlp = &hs->mlp;
    const unsigned char *src = hs->src;
    for (size_t l = 0; l < mlp->layers; ++l) {
        const size_t wb = mlp->in[l] * mlp->out[l] * sd->esize, bb = mlp->out[l] * sd->esize;
        if (memcmp(src, sd->W[l]->p, wb) != 0)
            return 0;
        src += wb;
        if (sd->bias[l]) {
            if (memcmp(src, sd->bias[l]->p, bb) != 0)
                return 0;
            src += bb;
        }
    }
    return 1;
}

/* backend.h: the kept model is this solve's by its serial, and solve_begin will take it (the
 * fused pass: the ordered GEMM in strict mode), so the driver need not upload the weights. */
static int host_model_kept(cln_backend *be, const cln_solve_dev *sd)
{
    const host_backend *hb = (const host_backend *)be;
    return !hb->openblas && sd->gemm_mode == CLNODE_GEMM_STRICT && hb->kept &&
           sd->model_serial != 0 && hb->kept->serial == sd->model_serial &&
           host_kept_shape(hb->kept, sd);
}

/* Takes over the last solve's packed model when it is this solve's (host_kept_fits): 1 if so. */
static int host_fused_take_kept(host_backend *hb, cln_solve_dev *sd)
{
    if (!hb->kept || !host_kept_fits(hb->kept, sd))
        return 0;
    if (sd->model_serial != 0) /* the same values: this model's next solve skips its upload */
        hb->kept->serial = sd->model_serial;
    sd->be_data = hb->kept;
    hb->kept = NULL;
    return 1;
}

/* Adds layer l's packed elements to *total: its weights, its padded bias and the row kernels'
 * panels (wide <= ldw), each rounded up to whole lines. 0 when a size overflows. */
static int host_layer_elems(const host_backend *hb, const cln_solve_dev *sd,
                            const cln_host_mlp *mlp, size_t l, size_t *total)
{
    size_t e = 0;
    const int fits = cln_mul_size(mlp->in[l] ? mlp->in[l] : 1, mlp->ldw[l], &e);
    /* the weights, the bias, the row kernels' panels */
    const size_t parts[3] = {
        fits ? host_line_elems(e, sd->esize) : 0,
        host_line_elems(mlp->ldw[l], sd->esize),
        host_line_elems(cln_gemv_panels_elems(hb->isa, sd->esize, mlp->wide[l], mlp->in[l]),
                        sd->esize),
    };
    for (int i = 0; i < 3; ++i) {
        const int added = parts[i] != 0 && cln_add_size(*total, parts[i], total);
        if (!added)
            return 0;
    }
    return 1;
}

/* The sizes of a packed model, as the steps of host_fused_begin work them out. */
typedef struct host_fused_sizes {
    size_t total;  /* packed elements: every layer's weights, panels and bias */
    size_t srcn;   /* elements of the model's own copy (weights and biases) */
    size_t panels; /* the row kernels' panels */
    size_t pbytes; /* bytes of the packed model */
    size_t hbytes; /* bytes of every thread's activation scratch */
    int keep;      /* whether the model is small enough to keep a copy of (CLN_HOST_KEEP_BYTES) */
} host_fused_sizes;

/* The packed model's layout, layer by layer (hs->mlp's shapes, leading dimensions, activations
 * and panel counts, hs->fmas_per_row), and its element counts in z (total, srcn, panels). */
static clnode_status host_fused_layout(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                       host_fused_sizes *z)
{
    clnode_context *ctx = hb->base.ctx;
    cln_host_mlp *mlp = &hs->mlp;
    const size_t L = sd->num_layers, vec = 32 / sd->esize;
    size_t ldh = vec;
    mlp->layers = L;
    for (size_t l = 0; l < L; ++l) {
        const size_t in = sd->sizes[l], out = sd->sizes[l + 1];
        mlp->in[l] = in;
        mlp->out[l] = out;
        mlp->wide[l] = l + 1 < L ? (out + vec - 1) / vec * vec : out;
        mlp->ldw[l] = cln_gemm_packed_ld(out, sd->esize);
        mlp->act[l] = sd->act[l];
        const int sized = host_layer_elems(hb, sd, mlp, l, &z->total);
        CLN_CHECK(ctx, sized, CLNODE_ERR_OUT_OF_MEMORY,
                  "the packed weights of layer %zu are too large", l);
        mlp->panels[l] = cln_gemv_panel_count(hb->isa, sd->esize, mlp->wide[l]);
        z->panels += mlp->panels[l]; /* at most the columns: cannot overflow */
        hs->fmas_per_row += in * out;
        z->srcn += in * out + (sd->bias[l] ? out : 0); /* cannot overflow: the solve holds them */
        if (l + 1 < L && mlp->wide[l] > ldh)
            ldh = mlp->wide[l];
    }
    mlp->ldh = ldh;
    mlp->stage_n = sd->N;
    return CLNODE_OK;
}

/* The bytes of the packed model (z->pbytes, from its z->total elements) and of every thread's
 * activation scratch (z->hbytes; hs->h_elems per thread): each thread's part of 2 x
 * CLN_HOST_MLP_ROWS x ldh activations and the stage rows, in a region of its own rounded up to
 * CLN_HOST_SCRATCH bytes, and a gap of CLN_HOST_SCRATCH. */
static clnode_status host_fused_bytes(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                      host_fused_sizes *z)
{
    const size_t ldh = hs->mlp.ldh, threads = (size_t)cln_pool_threads(hb->pool);
    size_t part_bytes = 0, region = 0;
    int fits = cln_mul_size(z->total, sd->esize, &z->pbytes);
    fits = fits && ldh <= (size_t)-1 / 2 - sd->N;
    fits = fits && cln_mul_size(CLN_HOST_MLP_ROWS * sd->esize, 2 * ldh + sd->N, &part_bytes);
    fits = fits && part_bytes <= (size_t)-1 / 2 - 2 * CLN_HOST_SCRATCH;
    if (fits)
        region = (part_bytes + CLN_HOST_SCRATCH - 1) / CLN_HOST_SCRATCH * CLN_HOST_SCRATCH +
                 CLN_HOST_SCRATCH;
    fits = fits && cln_mul_size(region, threads, &z->hbytes);
    CLN_CHECK(hb->base.ctx, fits, CLNODE_ERR_OUT_OF_MEMORY, "the packed model is too large");
    hs->h_elems = z->hbytes / threads / sd->esize;
    return CLNODE_OK;
}

/* Allocates the packed model (zeros: the padding of weights and biases), its panels, the
 * threads' scratch and, when z->keep, the model's own copy. A model too large to keep a copy of
 * is packed again by every solve (where the packing costs little beside the solve's own work). */
static clnode_status host_fused_alloc(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                      host_fused_sizes *z)
{
    hs->packed = host_zalloc(z->pbytes, CLN_HOST_LINE);
    hs->panels = malloc(z->panels * sizeof *hs->panels);
    hs->H = host_zalloc(z->hbytes, CLN_HOST_PAGE);
    z->keep = z->srcn * sd->esize <= CLN_HOST_KEEP_BYTES;
    hs->src = z->keep ? malloc(z->srcn ? z->srcn * sd->esize : 1) : NULL;
    const int allocated = hs->packed && hs->panels && hs->H && (hs->src || !z->keep);
    CLN_CHECK(hb->base.ctx, allocated, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes for the packed model", z->pbytes + z->hbytes);
    return CLNODE_OK;
}

/* Packs every layer into hs->packed (weights, row-kernel panels, bias) and hs->panels, and copies
 * the model's weights and biases to hs->src when `keep`. */
static void host_fused_pack(const host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                            int keep)
{
    cln_host_mlp *mlp = &hs->mlp;
    unsigned char *p = hs->packed, *src = hs->src;
    cln_gemv_panel *pn = hs->panels;
    for (size_t l = 0; l < sd->num_layers; ++l) {
        for (size_t q = 0; q < mlp->panels[l]; ++q)
            pn[q] = cln_gemv_panel_at(hb->isa, sd->esize, mlp->wide[l], q);
        mlp->panel[l] = pn;
        pn += mlp->panels[l];
        const size_t k = mlp->in[l], n = mlp->out[l];
        if (sd->prec == CLNODE_FP32)
            cln_gemm_pack_f32(n, k, HOST_F32(sd->W[l], 0), k, (float *)(void *)p, mlp->ldw[l]);
        else
            cln_gemm_pack_f64(n, k, HOST_F64(sd->W[l], 0), k, (double *)(void *)p, mlp->ldw[l]);
        mlp->Wt[l] = p;
        p += host_line_elems((k ? k : 1) * mlp->ldw[l], sd->esize) * sd->esize;
        /* the row kernels' panels from the packed weights (wide[l] is out rounded up to 32
         * bytes, and its vectors, of any ISA, fit in ldw: n rounded up to 128 bytes) */
        if (sd->prec == CLNODE_FP32)
            cln_gemv_pack_panels_f32(hb->isa, mlp->wide[l], k, (const float *)mlp->Wt[l],
                                     mlp->ldw[l], (float *)(void *)p);
        else
            cln_gemv_pack_panels_f64(hb->isa, mlp->wide[l], k, (const double *)mlp->Wt[l],
                                     mlp->ldw[l], (double *)(void *)p);
        mlp->Wr[l] = p;
        p +=
            host_line_elems(cln_gemv_panels_elems(hb->isa, sd->esize, mlp->wide[l], k), sd->esize) *
            sd->esize;
        if (keep) {
            memcpy(src, sd->W[l]->p, k * n * sd->esize);
            src += k * n * sd->esize;
        }
        mlp->bias[l] = NULL;
        if (sd->bias[l]) {
            memcpy(p, sd->bias[l]->p, n * sd->esize);
            mlp->bias[l] = p;
            if (keep) {
                memcpy(src, sd->bias[l]->p, n * sd->esize);
                src += n * sd->esize;
            }
        }
        p += host_line_elems(mlp->ldw[l], sd->esize) * sd->esize;
    }
}

/* A new solve state for this solve (sd->be_data, freed by host_solve_end), in place of the kept
 * one, which is freed. */
static clnode_status host_fused_new(host_backend *hb, cln_solve_dev *sd, host_solve **out)
{
    host_solve_free(hb->kept);
    hb->kept = NULL;
    host_solve *hs = calloc(1, sizeof *hs);
    *out = hs;
    CLN_CHECK(hb->base.ctx, hs, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host solve state");
    sd->be_data = hs;
    hs->prec = sd->prec;
    hs->serial = sd->model_serial;
    return CLNODE_OK;
}

/* The fused pass (stage + MLP, host_mlp.inc) needs the ordered GEMM in strict mode: takes over
 * the last solve's packed model when it packed the same model, or lays the model out, sizes it
 * and each thread's activation scratch, allocates them and packs every layer's weights. */
static clnode_status host_fused_begin(host_backend *hb, cln_solve_dev *sd)
{
    if (host_fused_take_kept(hb, sd))
        return CLNODE_OK;
    host_solve *hs = NULL;
    host_fused_sizes z = {0};
    clnode_status st = host_fused_new(hb, sd, &hs);
    if (st == CLNODE_OK)
        st = host_fused_layout(hb, sd, hs, &z);
    if (st == CLNODE_OK)
        st = host_fused_bytes(hb, sd, hs, &z);
    if (st == CLNODE_OK)
        st = host_fused_alloc(hb, sd, hs, &z);
    if (st != CLNODE_OK)
        return st;
    host_fused_pack(hb, sd, hs, z.keep);
    hs->complete = 1;
    return CLNODE_OK;
}

static clnode_status host_solve_begin(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    /* the plain GEMM's scratch for the largest packed weight matrix, so that steps never
     * allocate */
    size_t packed = sd->max_weights, max_out = 1;
    for (size_t l = 0; l < sd->num_layers; ++l) {
        const size_t k = sd->sizes[l] ? sd->sizes[l] : 1;
        const size_t e = cln_gemm_packed_ld(sd->sizes[l + 1], sd->esize) * k;
        packed = e > packed ? e : packed;
        max_out = sd->sizes[l + 1] > max_out ? sd->sizes[l + 1] : max_out;
    }
    clnode_status st = host_scratch(hb, packed * sd->esize);
    if (st == CLNODE_OK && sd->gemm_mode == CLNODE_GEMM_TF32)
        st = host_scratch_a(hb, sd->B * sd->max_in * sd->esize); /* the rounded A of every layer */
    if (st == CLNODE_OK && hb->openblas) /* one block of the widest layer's output */
        st = host_grow(hb, &hb->scratch_c, &hb->scratch_c_cap, CLN_HOST_ROWS * max_out * sd->esize);
    if (st == CLNODE_OK && !hb->openblas && sd->gemm_mode == CLNODE_GEMM_STRICT)
        st = host_fused_begin(hb, sd);
    if (st == CLNODE_OK && sd->be_data) { /* this solve's scale, the packed model kept or not */
        host_solve *hs = sd->be_data;
        hs->mlp.scale = sd->scale ? sd->scale->p : NULL;
        hs->mlp.scale_n = sd->scale ? sd->scale_n : 0;
    }
    if (st != CLNODE_OK)
        host_solve_end(be, sd);
    return st;
}

#define HOST_I32(buf) ((int32_t *)(void *)(buf)->p)

static clnode_status host_init(cln_backend *be, cln_solve_dev *sd)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_init_f32(sd->B, HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                          HOST_I32(sd->IS));
    else
        cln_host_init_f64(sd->B, HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                          HOST_I32(sd->IS));
    return CLNODE_OK;
}

static clnode_status host_dt0(cln_backend *be, cln_solve_dev *sd, int phase)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_dt0_f32(phase, sd->live, HOST_F32(sd->CR, 0), HOST_I32(sd->CI),
                         HOST_F32(sd->RS, 0), HOST_I32(sd->IS), HOST_F32(sd->Y, 0),
                         HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0));
    else
        cln_host_dt0_f64(phase, sd->live, HOST_F64(sd->CR, 0), HOST_I32(sd->CI),
                         HOST_F64(sd->RS, 0), HOST_I32(sd->IS), HOST_F64(sd->Y, 0),
                         HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0));
    return CLNODE_OK;
}

static clnode_status host_stage(cln_backend *be, cln_solve_dev *sd, int i)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_stage_f32(i, sd->live, HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0),
                           HOST_F32(sd->Z, 0));
    else
        cln_host_stage_f64(i, sd->live, HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0),
                           HOST_F64(sd->Z, 0));
    return CLNODE_OK;
}

/* Stage i and the MLP on it (i < 0: the MLP alone) for rows [r0, r1), with thread part `part`'s
 * activation scratch. */
static void host_stage_mlp_rows(const host_backend *hb, cln_solve_dev *sd, size_t part, int i,
                                int flip, size_t r0, size_t r1)
{
    host_solve *hs = sd->be_data;
    if (sd->prec == CLNODE_FP32)
        cln_host_stage_mlp_f32(hb->isa, i, flip, r0, r1, &hs->mlp, HOST_F32(sd->CR, 0),
                               HOST_I32(sd->CI), HOST_F32(sd->RS, 0), HOST_I32(sd->IS),
                               HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0),
                               (float *)hs->H + part * hs->h_elems);
    else
        cln_host_stage_mlp_f64(hb->isa, i, flip, r0, r1, &hs->mlp, HOST_F64(sd->CR, 0),
                               HOST_I32(sd->CI), HOST_F64(sd->RS, 0), HOST_I32(sd->IS),
                               HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0),
                               (double *)hs->H + part * hs->h_elems);
}

/* One part of the fused pass: its rows of stage i and the MLP on them. */
typedef struct host_fused_job {
    const host_backend *hb;
    cln_solve_dev *sd;
    int i, flip;
} host_fused_job;

static void host_fused_part(void *arg, size_t part, size_t parts)
{
    const host_fused_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->sd->live, part, parts, &r0, &r1);
    host_stage_mlp_rows(j->hb, j->sd, part, j->i, j->flip, r0, r1);
}

/* The fused pass over the live rows (i < 0: the MLP alone, see host_mlp.h), its rows shared
 * between the pool's threads when there are enough of them. */
static void host_fused_run(host_backend *hb, cln_solve_dev *sd, host_solve *hs, int i)
{
    host_fused_job j = {.hb = hb, .sd = sd, .i = i, .flip = (int)(hs->evals++ & 1)};
    cln_pool_run(hb->pool,
                 cln_pool_parts(hb->pool, sd->live, hs->fmas_per_row, CLN_HOST_PART_FMAS,
                                CLN_HOST_FUSED_PART_ROWS),
                 host_fused_part, &j);
}

/* Stage i, then F block i = MLP(Z): one fused pass where the solve has one (host_fused_begin),
 * else the stage pass and one GEMM and bias + activation pass per layer, as the driver would. */
static clnode_status host_stage_rhs(cln_backend *be, cln_solve_dev *sd, int i)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (hs) {
        host_fused_run(hb, sd, hs, i);
        return CLNODE_OK;
    }
    const clnode_status st = host_stage(be, sd, i);
    return st == CLNODE_OK ? cln_mlp_layers(be, sd, i, 0) : st;
}

/* F block 0 = MLP(Z) through the fused pass's kernels, without the stage (the benchmarks' bare
 * vector field, the automatic first step's probe); where the solve has no fused pass, one GEMM
 * and bias + activation pass per layer, as host_stage_rhs. */
static clnode_status host_rhs(cln_backend *be, cln_solve_dev *sd)
{
    host_solve *hs = sd->be_data;
    if (!hs)
        return cln_mlp_layers(be, sd, 0, 0);
    host_fused_run((host_backend *)be, sd, hs, -1);
    return CLNODE_OK;
}

/* cln_finish_traj for rows [r0, r1) (every trajectory's is its own). */
static void host_finish_rows(const host_backend *hb, cln_solve_dev *sd, size_t r0, size_t r1)
{
    if (sd->prec == CLNODE_FP32)
        cln_host_finish_rows_f32(hb->isa, r0, r1, HOST_F32(sd->CR, 0), HOST_I32(sd->CI),
                                 HOST_F32(sd->RS, 0), HOST_I32(sd->IS), HOST_F32(sd->Y, 0),
                                 HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0), HOST_F32(sd->TS, 0),
                                 HOST_F32(sd->TSOUT, 0), HOST_F32(sd->STT, 0),
                                 HOST_F32(sd->STY, 0));
    else
        cln_host_finish_rows_f64(hb->isa, r0, r1, HOST_F64(sd->CR, 0), HOST_I32(sd->CI),
                                 HOST_F64(sd->RS, 0), HOST_I32(sd->IS), HOST_F64(sd->Y, 0),
                                 HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0), HOST_F64(sd->TS, 0),
                                 HOST_F64(sd->TSOUT, 0), HOST_F64(sd->STT, 0),
                                 HOST_F64(sd->STY, 0));
}

/* One part of the step's finish. */
typedef struct host_finish_job {
    const host_backend *hb;
    cln_solve_dev *sd;
} host_finish_job;

static void host_finish_part(void *arg, size_t part, size_t parts)
{
    const host_finish_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->sd->live, part, parts, &r0, &r1);
    host_finish_rows(j->hb, j->sd, r0, r1);
}

/* The finish of every live row, the rows shared between the pool's threads when there are enough
 * of them (a trajectory's error norm and controller cost some hundred operations per component
 * and stage). */
static clnode_status host_finish(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    const size_t work = sd->N * (sd->stages ? sd->stages : 1) * 8;
    host_finish_job j = {hb, sd};
    cln_pool_run(hb->pool,
                 cln_pool_parts(hb->pool, sd->live, work, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_finish_part, &j);
    return CLNODE_OK;
}

/* n whole steps, row block by row block: each part takes its rows CLN_HOST_MLP_ROWS at a time
 * through every stage and the finish of a step, n times, before the next block. A block's Y, F
 * and Z (the seed model's: 24 rows x 90 values) stay in L1 from stage to stage, where a pass of
 * one stage over the whole batch would find the earlier stages' F in L3 or memory (B = 4096:
 * 1.1 MB of fp32 F), and the pool wakes its threads once per call instead of once per stage.
 * The blocks are claimed, not assigned: a part takes its own rows' blocks in order, then those
 * the other parts have not taken yet, so a thread whose core is slower (another process on it,
 * or a virtual CPU the hypervisor lends elsewhere) does less of the step instead of holding back
 * the others. Every row's arithmetic is the one the stage-by-stage order does (rows are
 * independent), whichever thread does it, so the bits are the same. */
typedef struct host_steps_job {
    const host_backend *hb;
    cln_solve_dev *sd;
    long n;
    unsigned long evals; /* the first evaluation's number (its panel order, see host_mlp.h) */
} host_steps_job;

static void host_steps_block(const host_steps_job *j, size_t part, size_t c0, size_t c1)
{
    cln_solve_dev *sd = j->sd;
    unsigned long e = j->evals;
    for (long s = 0; s < j->n; ++s) {
        for (size_t i = sd->first_stage; i < sd->stages; ++i, ++e)
            host_stage_mlp_rows(j->hb, sd, part, (int)i, (int)(e & 1), c0, c1);
        host_finish_rows(j->hb, sd, c0, c1);
    }
}

static void host_steps_part(void *arg, size_t part, size_t parts)
{
    const host_steps_job *j = arg;
    for (size_t q = 0; q < parts; ++q) {
        const size_t owner = (part + q) % parts; /* its own rows first */
        size_t r0, r1;
        host_part_rows(j->sd->live, owner, parts, &r0, &r1);
        atomic_size_t *next = &j->hb->claims[owner].next;
        for (;;) {
            const size_t c0 =
                r0 + atomic_fetch_add_explicit(next, CLN_HOST_MLP_ROWS, memory_order_relaxed);
            if (c0 >= r1)
                break;
            host_steps_block(j, part, c0,
                             r1 - c0 > CLN_HOST_MLP_ROWS ? c0 + CLN_HOST_MLP_ROWS : r1);
        }
    }
}

static clnode_status host_steps(cln_backend *be, cln_solve_dev *sd, long n)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (!hs) { /* no fused pass (OpenBLAS, TF32): stage by stage, as the driver would */
        clnode_status st = CLNODE_OK;
        for (long s = 0; s < n && st == CLNODE_OK; ++s) {
            for (size_t i = sd->first_stage; i < sd->stages && st == CLNODE_OK; ++i)
                st = host_stage_rhs(be, sd, (int)i);
            if (st == CLNODE_OK)
                st = host_finish(be, sd);
        }
        return st;
    }
    const size_t per_step = sd->stages - sd->first_stage;
    host_steps_job j = {.hb = hb, .sd = sd, .n = n, .evals = hs->evals};
    hs->evals += (unsigned long)n * per_step;
    size_t work = hs->fmas_per_row;
    work = work * per_step * (size_t)n; /* a few million at most: steps are few per call */
    const size_t parts =
        cln_pool_parts(hb->pool, sd->live, work, CLN_HOST_PART_FMAS, CLN_HOST_FUSED_PART_ROWS);
    for (size_t p = 0; p < parts; ++p) /* published to the workers with the job */
        atomic_store_explicit(&hb->claims[p].next, 0, memory_order_relaxed);
    cln_pool_run(hb->pool, parts, host_steps_part, &j);
    return CLNODE_OK;
}

static clnode_status host_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active)
{
    (void)be;
    const cln_istate *is = (const cln_istate *)(const void *)HOST_I32(sd->IS);
    size_t n = 0;
    for (size_t b = 0; b < sd->live; ++b)
        n += is[b].done == 0;
    *active = n;
    return CLNODE_OK;
}

/* Compaction (backend.h): the pairs' rows swapped through a small buffer on the stack. */
static clnode_status host_swap_rows(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off,
                                    size_t stride, size_t len, size_t npairs)
{
    const int32_t *pairs = HOST_I32(sd->PAIRS);
    CLN_CHECK(be->ctx, 2 * npairs * sizeof(int32_t) <= sd->PAIRS->size, CLNODE_ERR_INTERNAL,
              "%zu row pairs overflow their buffer", npairs);
    for (size_t p = 0; p < 2 * npairs; ++p)
        CLN_CHECK(be->ctx,
                  pairs[p] >= 0 && len <= stride && off + len <= buf->size &&
                      (size_t)pairs[p] <= (buf->size - off - len) / (stride ? stride : 1),
                  CLNODE_ERR_INTERNAL, "row %d out of range of a %zu-byte buffer", (int)pairs[p],
                  buf->size);
    unsigned char tmp[512];
    for (size_t p = 0; p < npairs; ++p) {
        unsigned char *a = buf->p + off + (size_t)pairs[2 * p] * stride;
        unsigned char *b = buf->p + off + (size_t)pairs[2 * p + 1] * stride;
        for (size_t done = 0; done < len; done += sizeof tmp) {
            const size_t n = len - done < sizeof tmp ? len - done : sizeof tmp;
            memcpy(tmp, a + done, n);
            memcpy(a + done, b + done, n);
            memcpy(b + done, tmp, n);
        }
    }
    return CLNODE_OK;
}

/* The saved steps' growth (backend.h): a memcpy per row. */
static clnode_status host_copy_rows(cln_backend *be, cln_buf *dst, size_t dst_off,
                                    size_t dst_stride, cln_buf *src, size_t src_off,
                                    size_t src_stride, size_t len, size_t rows)
{
    CLN_CHECK(be->ctx,
              dst != src && cln_rows_fit(dst->size, dst_off, dst_stride, len, rows) &&
                  cln_rows_fit(src->size, src_off, src_stride, len, rows),
              CLNODE_ERR_INTERNAL, "copy_rows of %zu rows of %zu bytes out of range", rows, len);
    if (len == 0)
        return CLNODE_OK;
    for (size_t r = 0; r < rows; ++r)
        memcpy(dst->p + dst_off + r * dst_stride, src->p + src_off + r * src_stride, len);
    return CLNODE_OK;
}

/* The host computes with the CPU's IEEE arithmetic: fp64, denormals (the library never sets
 * flush-to-zero) and correctly rounded division and sqrt always; FMA as the CPU reports it. */
static void host_facts(const cln_backend *be, clnode_device_facts *out)
{
    (void)be;
    out->fp64 = 1;
    out->denormals = 1;
    out->correctly_rounded_div_sqrt = 1;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    out->fma = __builtin_cpu_supports("fma") ? 1 : 0;
#elif defined(__aarch64__)
    out->fma = 1; /* part of the ARMv8 base instruction set */
#else
    out->fma = -1;
#endif
}

/* ---- the reverse pass (host_reverse.inc): blocks claimed one at a time by the pool's threads,
 * each into its own slot of theta, so that no block's sums depend on the threads ---- */

typedef struct host_rev_state {
    cln_host_rev *h;
    int f64;
    size_t threads, ntheta;
    size_t block0, nblocks;
    void *theta;
    atomic_size_t next;
} host_rev_state;

/* Blocks handed to the host at a time: cancel and progress are looked at between groups, and a
 * group's sums wait there for the tree (as many copies of the parameters). */
#define HOST_REV_GROUP 16

static clnode_status host_rev_begin(cln_backend *be, const cln_rev_job *job, void **state,
                                    size_t *group)
{
    host_backend *hb = (host_backend *)be;
    *state = NULL;
    *group = HOST_REV_GROUP;
    CLN_CHECK(be->ctx, !hb->openblas, CLNODE_ERR_UNSUPPORTED,
              "the reverse pass recomputes the forward steps on the ordered GEMM, which %s does "
              "not use: use the device \"host\"",
              be->device_name);
    host_rev_state *st = calloc(1, sizeof *st);
    CLN_CHECK(be->ctx, st, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the reverse pass");
    st->f64 = job->prec == CLNODE_FP64;
    st->threads = (size_t)cln_pool_threads(hb->pool);
    st->ntheta = job->ntheta;
    size_t bytes = 0;
    st->h = st->f64 ? cln_host_rev_begin_f64(job, hb->isa, st->threads, &bytes)
                    : cln_host_rev_begin_f32(job, hb->isa, st->threads, &bytes);
    if (!st->h) {
        free(st);
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate the reverse pass's %zu bytes", bytes);
    }
    *state = st;
    return CLNODE_OK;
}

static void host_rev_part(void *arg, size_t part, size_t parts)
{
    (void)parts;
    host_rev_state *st = arg;
    const size_t es = st->f64 ? sizeof(double) : sizeof(float);
    for (;;) {
        const size_t k = atomic_fetch_add(&st->next, 1);
        if (k >= st->nblocks)
            return;
        void *theta = (unsigned char *)st->theta + k * st->ntheta * es;
        if (st->f64)
            cln_host_rev_block_f64(st->h, part, st->block0 + k, theta);
        else
            cln_host_rev_block_f32(st->h, part, st->block0 + k, theta);
    }
}

static clnode_status host_rev_blocks(cln_backend *be, void *state, size_t block0, size_t nblocks,
                                     void *theta)
{
    host_backend *hb = (host_backend *)be;
    host_rev_state *st = state;
    st->block0 = block0;
    st->nblocks = nblocks;
    st->theta = theta;
    atomic_store(&st->next, 0);
    const size_t parts = nblocks < st->threads ? nblocks : st->threads;
    if (parts)
        cln_pool_run(hb->pool, parts, host_rev_part, st);
    return CLNODE_OK;
}

static void host_rev_end(cln_backend *be, void *state)
{
    (void)be;
    host_rev_state *st = state;
    if (!st)
        return;
    if (st->f64)
        cln_host_rev_end_f64(st->h);
    else
        cln_host_rev_end_f32(st->h);
    free(st);
}

static const cln_backend_ops host_ops = {
    .name = "host",
    .destroy = host_destroy,
    .supports = host_supports,
    .buf_alloc = host_buf_alloc,
    .buf_free = host_buf_free,
    .buf_write = host_buf_write,
    .buf_read = host_buf_read,
    .gemm = host_gemm,
    .bias_act = host_bias_act,
    .out_scale = host_out_scale,
    .solve_begin = host_solve_begin,
    .solve_end = host_solve_end,
    .init = host_init,
    .dt0 = host_dt0,
    .stage = host_stage,
    .stage_rhs = host_stage_rhs,
    .rhs = host_rhs,
    .finish = host_finish,
    .steps = host_steps,
    .count_active = host_count_active,
    .swap_rows = host_swap_rows,
    .copy_rows = host_copy_rows, /* no solve_rebind: the passes read sd's buffers each time */
    .facts = host_facts,
    .model_kept = host_model_kept,
    .rev_begin = host_rev_begin,
    .rev_blocks = host_rev_blocks,
    .rev_end = host_rev_end,
};

/* The probe cache's key for the host: the GEMM engine (and OpenBLAS's build and core), the
 * kernel's ISA and the CPU model. */
static void cpuinfo_value(const char *key, char *out, size_t cap);

static void host_cache_id(host_backend *hb)
{
    char model[128];
    cpuinfo_value("model name", model, sizeof model);
    if (hb->openblas)
        snprintf(hb->base.cache_id, sizeof hb->base.cache_id, "openblas %.200s | %.120s",
                 openblas_get_config(), model);
    else
        snprintf(hb->base.cache_id, sizeof hb->base.cache_id, "ordered %s | %.120s",
                 cln_gemm_isa_name(hb->isa), model);
}

/* The forms of "host" device strings (lib/backends/registry.h): the ordered GEMM on the widest
 * kernels the CPU runs (the default), OpenBLAS, or the ordered GEMM on the kernels of one ISA.
 * The ISA forms choose every kernel of the ordered engine that is dispatched by its ISA (the
 * GEMM, the row kernels, the activation rows, the reverse pass's products); OpenBLAS chooses its
 * own kernels, so "openblas" takes no ISA. */
enum {
    HOST_ORDERED,
    HOST_OPENBLAS,
    HOST_AVX512,
    HOST_AVX2,
    HOST_PORTABLE
};
static const cln_device_form host_forms[] = {
    {"", HOST_ORDERED,
     "the CPU: the ordered FMA GEMM on the widest kernels it runs, the cl/ arithmetic in C "
     "(the default)"},
    {"openblas", HOST_OPENBLAS, "the CPU with OpenBLAS GEMMs (fixed 16-row blocks)"},
    {"avx512", HOST_AVX512, "the CPU's ordered FMA GEMM on its AVX-512F kernels"},
    {"avx2", HOST_AVX2, "the CPU's ordered FMA GEMM on its AVX2+FMA kernels"},
    {"portable", HOST_PORTABLE, "the CPU's ordered FMA GEMM on its portable C fma() loops"},
};

/* The ISA of the ISA forms, by form (HOST_ORDERED: the widest this CPU runs). */
static cln_gemm_isa host_form_isa(int variant)
{
    switch (variant) {
    case HOST_AVX512:
        return CLN_GEMM_AVX512;
    case HOST_AVX2:
        return CLN_GEMM_AVX2;
    case HOST_PORTABLE:
        return CLN_GEMM_PORTABLE;
    default:
        return cln_gemm_best_isa();
    }
}

/* The device description: the engine, its kernels and its threads. */
static void host_describe(host_backend *hb)
{
    if (hb->openblas)
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (OpenBLAS GEMM in %d-row blocks, %d threads)", CLN_HOST_ROWS,
                 openblas_get_num_threads());
    else
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (ordered FMA GEMM, %s, %d threads)", cln_gemm_isa_name(hb->isa),
                 cln_pool_threads(hb->pool));
    host_cache_id(hb);
}

static clnode_status host_create(clnode_context *ctx, const cln_device_sel *sel, cln_backend **out)
{
    *out = NULL;
    const int openblas = sel->variant == HOST_OPENBLAS;
    const cln_gemm_isa isa = host_form_isa(sel->variant);
    const char *why = NULL;
    if (!openblas && !cln_gemm_isa_runs(isa, &why))
        return cln_fail(ctx, CLNODE_ERR_UNSUPPORTED, "%s: %s", sel->spec, why);
    host_backend *hb = calloc(1, sizeof *hb);
    CLN_CHECK(ctx, hb, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host backend");
    hb->base.ops = &host_ops;
    hb->base.ctx = ctx;
    hb->base.group_steps = 1; /* reading the active count costs nothing here */
    hb->openblas = openblas;
    hb->isa = isa;
    hb->pool =
        cln_pool_create(ctx->num_threads > 0 ? ctx->num_threads : cln_pool_default_threads());
    const size_t threads = (size_t)cln_pool_threads(hb->pool);
    hb->claims =
        hb->pool ? aligned_alloc(_Alignof(host_claim), threads * sizeof *hb->claims) : NULL;
    if (!hb->pool || !hb->claims) {
        cln_pool_destroy(hb->pool);
        free(hb);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host thread pool");
    }
    for (size_t p = 0; p < threads; ++p)
        atomic_init(&hb->claims[p].next, 0);
    hb->base.row_align = openblas ? CLN_HOST_ROWS : 1;
    host_describe(hb);
    *out = &hb->base;
    return CLNODE_OK;
}

/* ---- the devices: the CPU, once per GEMM engine ---- */

/* "model name : Intel(R) ..." -> the value of the first line with that key, or "". */
static void cpuinfo_value(const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) != 0)
            continue;
        const char *v = strchr(line + n, ':');
        if (!v)
            continue;
        ++v;
        while (*v == ' ' || *v == '\t')
            ++v;
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

/* The device's entries: "host" and "host:openblas", then "host:ISA" for each ISA this CPU runs
 * (the ordered engine on those kernels), so that the list says which of them this machine can
 * compare. */
static clnode_status host_list(clnode_context *ctx, cln_device_sink *sink)
{
    (void)ctx;
    char name[256], vendor[256];
    cpuinfo_value("model name", name, sizeof name);
    cpuinfo_value("vendor_id", vendor, sizeof vendor);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int first = 1;
    for (size_t i = 0; i < sizeof host_forms / sizeof host_forms[0]; ++i) {
        const int v = host_forms[i].variant;
        const cln_gemm_isa isa = host_form_isa(v);
        if (v != HOST_OPENBLAS && !cln_gemm_isa_runs(isa, NULL))
            continue;
        clnode_device_info *d = cln_device_sink_add(sink, first);
        if (!d)
            return CLNODE_ERR_OUT_OF_MEMORY;
        first = 0;
        snprintf(d->spec, sizeof d->spec, "host%s%s", host_forms[i].syntax[0] ? ":" : "",
                 host_forms[i].syntax);
        if (v == HOST_OPENBLAS)
            snprintf(d->engine, sizeof d->engine, "OpenBLAS");
        else if (v == HOST_ORDERED)
            snprintf(d->engine, sizeof d->engine, "ordered FMA GEMM");
        else
            snprintf(d->engine, sizeof d->engine, "ordered FMA GEMM, %s", cln_gemm_isa_name(isa));
        snprintf(d->name, sizeof d->name, "%s", name[0] ? name : "host CPU");
        snprintf(d->vendor, sizeof d->vendor, "%s", vendor);
        d->compute_units = cpus > 0 ? (unsigned)cpus : 0;
        d->global_mem =
            pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
        d->fp64 = 1;
    }
    return CLNODE_OK;
}

const cln_backend_desc cln_host_backend = {
    .name = "host",
    .caps = CLN_CAP_FP64,
    .forms = host_forms,
    .num_forms = sizeof host_forms / sizeof host_forms[0],
    .available = NULL,
    .create = host_create,
    .list = host_list,
};
