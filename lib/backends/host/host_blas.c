/* host_blas.c - the host backend's GEMM op: the ordered GEMM (host_gemm.c, and in tf32 mode its
 * operands rounded first), or OpenBLAS in blocks of CLN_HOST_ROWS rows; the rows of a product
 * split between the pool's threads. */
#include "backends/host/host_internal.h"

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
void host_part_rows(size_t rows, size_t part, size_t parts, size_t *r0, size_t *r1)
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

clnode_status host_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode, size_t m,
                        size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                        size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc)
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
