/* host_gemm.h - the host's ordered GEMM (lib/backends/host/host_gemm.c). */
#ifndef CLN_HOST_GEMM_H
#define CLN_HOST_GEMM_H

#include <stddef.h>

typedef enum cln_gemm_isa {
    CLN_GEMM_PORTABLE = 0,
    CLN_GEMM_AVX2 = 1,
    CLN_GEMM_AVX512 = 2,
} cln_gemm_isa;

/* Whether this CPU and OS run the kernels of `isa` (1), or not (0, and *why, when why is not
 * NULL, says so: "this CPU/OS does not support AVX-512F"). */
int cln_gemm_isa_runs(cln_gemm_isa isa, const char **why);
/* The widest kernel this CPU runs. */
cln_gemm_isa cln_gemm_best_isa(void);
const char *cln_gemm_isa_name(cln_gemm_isa isa);

/* The leading dimension of B packed for the kernels: n rounded up to 128 bytes. */
size_t cln_gemm_packed_ld(size_t n, size_t esize);

/* Packs B[n x k] (leading dimension ldb) as Wt[k x ldw]: Wt[kk][j] = B[j][kk] for j < n and 0
 * for n <= j < ldw (ldw from cln_gemm_packed_ld). The tf32 variant rounds each value to TF32. */
void cln_gemm_pack_f32(size_t n, size_t k, const float *B, size_t ldb, float *Wt, size_t ldw);
void cln_gemm_pack_f64(size_t n, size_t k, const double *B, size_t ldb, double *Wt, size_t ldw);
void cln_gemm_pack_tf32(size_t n, size_t k, const float *B, size_t ldb, float *Wt, size_t ldw);

/* C[m x n] = A[m x k] . B[n x k]^T on B packed as Wt, each element summed over k in order with
 * fma, from 0. Only columns 0 .. n - 1 of C are written. Every ISA gives the same bits, and a row
 * gives the same bits whatever rows come with it. */
void cln_gemm_packed_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                         const float *Wt, size_t ldw, float *C, size_t ldc);
void cln_gemm_packed_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                         size_t lda, const double *Wt, size_t ldw, double *C, size_t ldc);

/* C[m x n] = A^T . B with A given as its k x m transpose (lda) and B as k x n rows (ldb), both
 * read in place: element (i, j) is sum_kk A[kk][i] B[kk][j] in order with fma, continued from
 * C[i][j] when acc is 1 (from 0 when it is 0); with acc CLN_GEMM_TN_ADD the sum from 0 is added
 * to C[i][j] (C += A^T . B, one rounding of c + sum: the bits of the sum into scratch, then
 * added). A row of B must be readable up to cln_gemm_packed_ld(n) values (the columns past n are
 * read, not used). C's other columns are not written. A sum taken over consecutive ranges of k,
 * one call each (acc 1 from the second), has the bits of one call over all of them, and every
 * ISA gives the same bits. */
#define CLN_GEMM_TN_ADD 2
void cln_gemm_tn_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                     const float *B, size_t ldb, float *C, size_t ldc, int acc);
void cln_gemm_tn_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A, size_t lda,
                     const double *B, size_t ldb, double *C, size_t ldc, int acc);

/* The same product on B as it is: packs it into Bt (scratch of k x cln_gemm_packed_ld(n)
 * elements) first. */
void cln_gemm_ordered_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                          size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt);
void cln_gemm_ordered_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                          size_t lda, const double *B, size_t ldb, double *C, size_t ldc,
                          double *Bt);

/* The tf32 emulation of cln_gemm_ordered_f32: A and B rounded to TF32 (cl/cln_tf32.h), then the
 * same ordered fp32 accumulation. Bt is scratch of k x cln_gemm_packed_ld(n) elements, At of
 * m x k. */
void cln_gemm_ordered_tf32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                           size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt,
                           float *At);

/* dst[i][j] = TF32(src[i][j]) for a rows x cols block (leading dimensions lds, ldd). */
void cln_tf32_round_rows(size_t rows, size_t cols, const float *src, size_t lds, float *dst,
                         size_t ldd);

#endif /* CLN_HOST_GEMM_H */
