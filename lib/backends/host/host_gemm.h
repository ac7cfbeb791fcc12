/* host_gemm.h - the host's ordered GEMM (lib/backends/host/host_gemm.c). */
#ifndef CLN_HOST_GEMM_H
#define CLN_HOST_GEMM_H

#include <stddef.h>

typedef enum cln_gemm_isa {
    CLN_GEMM_PORTABLE = 0,
    CLN_GEMM_AVX2 = 1,
    CLN_GEMM_AVX512 = 2,
} cln_gemm_isa;

/* Threads the ordered GEMM uses for large batches (OpenMP; 1 without it). */
int cln_host_threads(void);

/* The widest kernel this CPU runs. */
cln_gemm_isa cln_gemm_best_isa(void);
const char *cln_gemm_isa_name(cln_gemm_isa isa);

/* C[m x n] = A[m x k] . B[n x k]^T, each element summed over k in order with fma, from 0.
 * Bt is scratch of k x n elements. Every ISA gives the same bits. */
void cln_gemm_ordered_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                          size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt);
void cln_gemm_ordered_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                          size_t lda, const double *B, size_t ldb, double *C, size_t ldc,
                          double *Bt);

/* The tf32 emulation of cln_gemm_ordered_f32: A and B rounded to TF32 (cl/cln_tf32.h), then the
 * same ordered fp32 accumulation. Bt is scratch of k x n elements, At of m x k. */
void cln_gemm_ordered_tf32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                           size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt,
                           float *At);

/* dst[i][j] = TF32(src[i][j]) for a rows x cols block (leading dimensions lds, ldd). */
void cln_tf32_round_rows(size_t rows, size_t cols, const float *src, size_t lds, float *dst,
                         size_t ldd);

#endif /* CLN_HOST_GEMM_H */
