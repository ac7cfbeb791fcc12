/* host_gemm.c - the host backend's ordered GEMM: C = A . B^T where every element is accumulated
 * sequentially over k with fused multiply-adds, acc = fma(a_ik, b_jk, acc) for k = 0, 1, ...,
 * starting from 0.
 *
 * That order is what CLBlast's direct GEMM kernel computes in each work-item (measured
 * bit-identical on PoCL for the MLP shapes, fp32 and fp64; NVIDIA's OpenCL contracts its `c += a*b`
 * into the same fma), so the host and OpenCL devices round every product the same way and take the
 * same steps. It also makes a row's result independent of the batch: no blocking, splitting or edge
 * kernel changes the order of any element's sum. Vectorisation runs across output columns (each
 * lane is one element with its own sequential sum), so it does not change the order either.
 *
 * B is transposed once per call into a scratch (n x k -> k x n) so the lanes read contiguous
 * memory; rows are shared between threads (OpenMP) when the batch is large, which again changes
 * no sum. Kernels: AVX-512F, AVX2+FMA (chosen at run time), and a portable C fma() loop. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cln_tf32.h"
#include "backends/host/host_gemm.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define CLN_X86 1
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- portable reference */

#define CLN_GEMM_REF(T, FMA)                                                                       \
    static void gemm_ref_##T(size_t m0, size_t m1, size_t n, size_t k, const T *A, size_t lda,     \
                             const T *Bt, T *C, size_t ldc)                                        \
    {                                                                                              \
        for (size_t i = m0; i < m1; ++i)                                                           \
            for (size_t j = 0; j < n; ++j) {                                                       \
                T acc = 0;                                                                         \
                for (size_t kk = 0; kk < k; ++kk)                                                  \
                    acc = FMA(A[i * lda + kk], Bt[kk * n + j], acc);                               \
                C[i * ldc + j] = acc;                                                              \
            }                                                                                      \
    }
CLN_GEMM_REF(float, fmaf)
CLN_GEMM_REF(double, fma)

#ifdef CLN_X86
/* ---------------------------------------------------------------- AVX-512F */

/* 4 rows x 32 columns of C per tile (8 accumulators); the column tail is masked. */
__attribute__((target("avx512f"))) static void gemm_avx512_float(size_t m0, size_t m1, size_t n,
                                                                 size_t k, const float *A,
                                                                 size_t lda, const float *Bt,
                                                                 float *C, size_t ldc)
{
    for (size_t j = 0; j < n; j += 32) {
        const size_t w = n - j < 32 ? n - j : 32;
        const __mmask16 m_lo = (__mmask16)(w >= 16 ? 0xFFFF : (1u << w) - 1);
        const __mmask16 m_hi = (__mmask16)(w <= 16 ? 0 : w >= 32 ? 0xFFFF : (1u << (w - 16)) - 1);
        size_t i = m0;
        for (; i + 4 <= m1; i += 4) {
            __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps();
            __m512 c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
            __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps();
            __m512 c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
            const float *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m512 b0 = _mm512_maskz_loadu_ps(m_lo, Bt + kk * n + j);
                const __m512 b1 = _mm512_maskz_loadu_ps(m_hi, Bt + kk * n + j + 16);
                __m512 x = _mm512_set1_ps(a[kk]);
                c00 = _mm512_fmadd_ps(x, b0, c00);
                c01 = _mm512_fmadd_ps(x, b1, c01);
                x = _mm512_set1_ps(a[lda + kk]);
                c10 = _mm512_fmadd_ps(x, b0, c10);
                c11 = _mm512_fmadd_ps(x, b1, c11);
                x = _mm512_set1_ps(a[2 * lda + kk]);
                c20 = _mm512_fmadd_ps(x, b0, c20);
                c21 = _mm512_fmadd_ps(x, b1, c21);
                x = _mm512_set1_ps(a[3 * lda + kk]);
                c30 = _mm512_fmadd_ps(x, b0, c30);
                c31 = _mm512_fmadd_ps(x, b1, c31);
            }
            float *c = C + i * ldc + j;
            _mm512_mask_storeu_ps(c, m_lo, c00);
            _mm512_mask_storeu_ps(c + 16, m_hi, c01);
            _mm512_mask_storeu_ps(c + ldc, m_lo, c10);
            _mm512_mask_storeu_ps(c + ldc + 16, m_hi, c11);
            _mm512_mask_storeu_ps(c + 2 * ldc, m_lo, c20);
            _mm512_mask_storeu_ps(c + 2 * ldc + 16, m_hi, c21);
            _mm512_mask_storeu_ps(c + 3 * ldc, m_lo, c30);
            _mm512_mask_storeu_ps(c + 3 * ldc + 16, m_hi, c31);
        }
        for (; i < m1; ++i) {
            __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
            const float *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m512 x = _mm512_set1_ps(a[kk]);
                c0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m_lo, Bt + kk * n + j), c0);
                c1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m_hi, Bt + kk * n + j + 16), c1);
            }
            _mm512_mask_storeu_ps(C + i * ldc + j, m_lo, c0);
            _mm512_mask_storeu_ps(C + i * ldc + j + 16, m_hi, c1);
        }
    }
}

/* 4 rows x 16 columns per tile for doubles. */
__attribute__((target("avx512f"))) static void gemm_avx512_double(size_t m0, size_t m1, size_t n,
                                                                  size_t k, const double *A,
                                                                  size_t lda, const double *Bt,
                                                                  double *C, size_t ldc)
{
    for (size_t j = 0; j < n; j += 16) {
        const size_t w = n - j < 16 ? n - j : 16;
        const __mmask8 m_lo = (__mmask8)(w >= 8 ? 0xFF : (1u << w) - 1);
        const __mmask8 m_hi = (__mmask8)(w <= 8 ? 0 : w >= 16 ? 0xFF : (1u << (w - 8)) - 1);
        size_t i = m0;
        for (; i + 4 <= m1; i += 4) {
            __m512d c00 = _mm512_setzero_pd(), c01 = _mm512_setzero_pd();
            __m512d c10 = _mm512_setzero_pd(), c11 = _mm512_setzero_pd();
            __m512d c20 = _mm512_setzero_pd(), c21 = _mm512_setzero_pd();
            __m512d c30 = _mm512_setzero_pd(), c31 = _mm512_setzero_pd();
            const double *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m512d b0 = _mm512_maskz_loadu_pd(m_lo, Bt + kk * n + j);
                const __m512d b1 = _mm512_maskz_loadu_pd(m_hi, Bt + kk * n + j + 8);
                __m512d x = _mm512_set1_pd(a[kk]);
                c00 = _mm512_fmadd_pd(x, b0, c00);
                c01 = _mm512_fmadd_pd(x, b1, c01);
                x = _mm512_set1_pd(a[lda + kk]);
                c10 = _mm512_fmadd_pd(x, b0, c10);
                c11 = _mm512_fmadd_pd(x, b1, c11);
                x = _mm512_set1_pd(a[2 * lda + kk]);
                c20 = _mm512_fmadd_pd(x, b0, c20);
                c21 = _mm512_fmadd_pd(x, b1, c21);
                x = _mm512_set1_pd(a[3 * lda + kk]);
                c30 = _mm512_fmadd_pd(x, b0, c30);
                c31 = _mm512_fmadd_pd(x, b1, c31);
            }
            double *c = C + i * ldc + j;
            _mm512_mask_storeu_pd(c, m_lo, c00);
            _mm512_mask_storeu_pd(c + 8, m_hi, c01);
            _mm512_mask_storeu_pd(c + ldc, m_lo, c10);
            _mm512_mask_storeu_pd(c + ldc + 8, m_hi, c11);
            _mm512_mask_storeu_pd(c + 2 * ldc, m_lo, c20);
            _mm512_mask_storeu_pd(c + 2 * ldc + 8, m_hi, c21);
            _mm512_mask_storeu_pd(c + 3 * ldc, m_lo, c30);
            _mm512_mask_storeu_pd(c + 3 * ldc + 8, m_hi, c31);
        }
        for (; i < m1; ++i) {
            __m512d c0 = _mm512_setzero_pd(), c1 = _mm512_setzero_pd();
            const double *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m512d x = _mm512_set1_pd(a[kk]);
                c0 = _mm512_fmadd_pd(x, _mm512_maskz_loadu_pd(m_lo, Bt + kk * n + j), c0);
                c1 = _mm512_fmadd_pd(x, _mm512_maskz_loadu_pd(m_hi, Bt + kk * n + j + 8), c1);
            }
            _mm512_mask_storeu_pd(C + i * ldc + j, m_lo, c0);
            _mm512_mask_storeu_pd(C + i * ldc + j + 8, m_hi, c1);
        }
    }
}

/* ---------------------------------------------------------------- AVX2 + FMA */

/* Lane masks for maskload/maskstore: the first w lanes of 8 (or 4 for doubles). */
__attribute__((target("avx2"))) static __m256i lanes32(size_t w)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w), idx);
}

__attribute__((target("avx2"))) static __m256i lanes64(size_t w)
{
    const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)w), idx);
}

/* 2 rows x 16 columns per tile (4 accumulators) for floats. */
__attribute__((target("avx2,fma"))) static void gemm_avx2_float(size_t m0, size_t m1, size_t n,
                                                                size_t k, const float *A,
                                                                size_t lda, const float *Bt,
                                                                float *C, size_t ldc)
{
    for (size_t j = 0; j < n; j += 16) {
        const size_t w = n - j < 16 ? n - j : 16;
        const __m256i ml = lanes32(w >= 8 ? 8 : w), mh = lanes32(w <= 8 ? 0 : w - 8);
        size_t i = m0;
        for (; i + 2 <= m1; i += 2) {
            __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
            __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
            const float *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m256 b0 = _mm256_maskload_ps(Bt + kk * n + j, ml);
                const __m256 b1 = _mm256_maskload_ps(Bt + kk * n + j + 8, mh);
                __m256 x = _mm256_set1_ps(a[kk]);
                c00 = _mm256_fmadd_ps(x, b0, c00);
                c01 = _mm256_fmadd_ps(x, b1, c01);
                x = _mm256_set1_ps(a[lda + kk]);
                c10 = _mm256_fmadd_ps(x, b0, c10);
                c11 = _mm256_fmadd_ps(x, b1, c11);
            }
            float *c = C + i * ldc + j;
            _mm256_maskstore_ps(c, ml, c00);
            _mm256_maskstore_ps(c + 8, mh, c01);
            _mm256_maskstore_ps(c + ldc, ml, c10);
            _mm256_maskstore_ps(c + ldc + 8, mh, c11);
        }
        for (; i < m1; ++i) {
            __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
            const float *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m256 x = _mm256_set1_ps(a[kk]);
                c0 = _mm256_fmadd_ps(x, _mm256_maskload_ps(Bt + kk * n + j, ml), c0);
                c1 = _mm256_fmadd_ps(x, _mm256_maskload_ps(Bt + kk * n + j + 8, mh), c1);
            }
            _mm256_maskstore_ps(C + i * ldc + j, ml, c0);
            _mm256_maskstore_ps(C + i * ldc + j + 8, mh, c1);
        }
    }
}

/* 2 rows x 8 columns per tile for doubles. */
__attribute__((target("avx2,fma"))) static void gemm_avx2_double(size_t m0, size_t m1, size_t n,
                                                                 size_t k, const double *A,
                                                                 size_t lda, const double *Bt,
                                                                 double *C, size_t ldc)
{
    for (size_t j = 0; j < n; j += 8) {
        const size_t w = n - j < 8 ? n - j : 8;
        const __m256i ml = lanes64(w >= 4 ? 4 : w), mh = lanes64(w <= 4 ? 0 : w - 4);
        size_t i = m0;
        for (; i + 2 <= m1; i += 2) {
            __m256d c00 = _mm256_setzero_pd(), c01 = _mm256_setzero_pd();
            __m256d c10 = _mm256_setzero_pd(), c11 = _mm256_setzero_pd();
            const double *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m256d b0 = _mm256_maskload_pd(Bt + kk * n + j, ml);
                const __m256d b1 = _mm256_maskload_pd(Bt + kk * n + j + 4, mh);
                __m256d x = _mm256_set1_pd(a[kk]);
                c00 = _mm256_fmadd_pd(x, b0, c00);
                c01 = _mm256_fmadd_pd(x, b1, c01);
                x = _mm256_set1_pd(a[lda + kk]);
                c10 = _mm256_fmadd_pd(x, b0, c10);
                c11 = _mm256_fmadd_pd(x, b1, c11);
            }
            double *c = C + i * ldc + j;
            _mm256_maskstore_pd(c, ml, c00);
            _mm256_maskstore_pd(c + 4, mh, c01);
            _mm256_maskstore_pd(c + ldc, ml, c10);
            _mm256_maskstore_pd(c + ldc + 4, mh, c11);
        }
        for (; i < m1; ++i) {
            __m256d c0 = _mm256_setzero_pd(), c1 = _mm256_setzero_pd();
            const double *a = A + i * lda;
            for (size_t kk = 0; kk < k; ++kk) {
                const __m256d x = _mm256_set1_pd(a[kk]);
                c0 = _mm256_fmadd_pd(x, _mm256_maskload_pd(Bt + kk * n + j, ml), c0);
                c1 = _mm256_fmadd_pd(x, _mm256_maskload_pd(Bt + kk * n + j + 4, mh), c1);
            }
            _mm256_maskstore_pd(C + i * ldc + j, ml, c0);
            _mm256_maskstore_pd(C + i * ldc + j + 4, mh, c1);
        }
    }
}
#endif /* CLN_X86 */

/* ---------------------------------------------------------------- dispatch */

typedef void (*gemm_f32_fn)(size_t, size_t, size_t, size_t, const float *, size_t, const float *,
                            float *, size_t);
typedef void (*gemm_f64_fn)(size_t, size_t, size_t, size_t, const double *, size_t, const double *,
                            double *, size_t);

static cln_gemm_isa isa_selected(void)
{
#ifdef CLN_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return CLN_GEMM_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return CLN_GEMM_AVX2;
#endif
    return CLN_GEMM_PORTABLE;
}

int cln_host_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

cln_gemm_isa cln_gemm_best_isa(void)
{
    return isa_selected();
}

const char *cln_gemm_isa_name(cln_gemm_isa isa)
{
    switch (isa) {
    case CLN_GEMM_AVX512:
        return "AVX-512";
    case CLN_GEMM_AVX2:
        return "AVX2+FMA";
    case CLN_GEMM_PORTABLE:
        return "portable fma()";
    }
    return "unknown";
}

/* Rows per thread below which one thread does the whole product. */
#define CLN_GEMM_ROWS_PER_THREAD 64

/* The product on an already transposed Bt (k x n). */
#define CLN_GEMM_DRIVER(T, SFX)                                                                    \
    static void gemm_run_##SFX(cln_gemm_isa isa, size_t m, size_t n, size_t k, const T *A,         \
                               size_t lda, T *C, size_t ldc, const T *Bt)                          \
    {                                                                                              \
        gemm_##SFX##_fn fn = gemm_ref_##T;                                                         \
        CLN_GEMM_PICK_##SFX const long nth = (long)(m / CLN_GEMM_ROWS_PER_THREAD);                 \
        if (nth <= 1) {                                                                            \
            fn(0, m, n, k, A, lda, Bt, C, ldc);                                                    \
            return;                                                                                \
        }                                                                                          \
        CLN_GEMM_PARALLEL                                                                          \
        for (long t = 0; t < nth; ++t) {                                                           \
            const size_t r0 = m * (size_t)t / (size_t)nth, r1 = m * (size_t)(t + 1) / (size_t)nth; \
            fn(r0, r1, n, k, A, lda, Bt, C, ldc);                                                  \
        }                                                                                          \
    }

#ifdef _OPENMP
#define CLN_GEMM_PARALLEL _Pragma("omp parallel for schedule(static)")
#else
#define CLN_GEMM_PARALLEL
#endif

#ifdef CLN_X86
#define CLN_GEMM_PICK_f32                                                                          \
    if (isa == CLN_GEMM_AVX512)                                                                    \
        fn = gemm_avx512_float;                                                                    \
    else if (isa == CLN_GEMM_AVX2)                                                                 \
        fn = gemm_avx2_float;
#define CLN_GEMM_PICK_f64                                                                          \
    if (isa == CLN_GEMM_AVX512)                                                                    \
        fn = gemm_avx512_double;                                                                   \
    else if (isa == CLN_GEMM_AVX2)                                                                 \
        fn = gemm_avx2_double;
#else
#define CLN_GEMM_PICK_f32 (void)isa;
#define CLN_GEMM_PICK_f64 (void)isa;
#endif

CLN_GEMM_DRIVER(float, f32)
CLN_GEMM_DRIVER(double, f64)

void cln_gemm_ordered_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                          size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt)
{
    if (m == 0 || n == 0)
        return;
    for (size_t j = 0; j < n; ++j)
        for (size_t kk = 0; kk < k; ++kk)
            Bt[kk * n + j] = B[j * ldb + kk];
    gemm_run_f32(isa, m, n, k, A, lda, C, ldc, Bt);
}

void cln_gemm_ordered_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                          size_t lda, const double *B, size_t ldb, double *C, size_t ldc,
                          double *Bt)
{
    if (m == 0 || n == 0)
        return;
    for (size_t j = 0; j < n; ++j)
        for (size_t kk = 0; kk < k; ++kk)
            Bt[kk * n + j] = B[j * ldb + kk];
    gemm_run_f64(isa, m, n, k, A, lda, C, ldc, Bt);
}

/* The tf32 emulation: both operands rounded to TF32 (cl/cln_tf32.h) on their way into the
 * scratch (B while it is transposed, A into At), then the same ordered fp32 accumulation. */
void cln_gemm_ordered_tf32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                           size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt,
                           float *At)
{
    if (m == 0 || n == 0)
        return;
    for (size_t j = 0; j < n; ++j)
        for (size_t kk = 0; kk < k; ++kk)
            Bt[kk * n + j] = cln_tf32_round(B[j * ldb + kk]);
    cln_tf32_round_rows(m, k, A, lda, At, k);
    gemm_run_f32(isa, m, n, k, At, k, C, ldc, Bt);
}

void cln_tf32_round_rows(size_t rows, size_t cols, const float *src, size_t lds, float *dst,
                         size_t ldd)
{
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j)
            dst[i * ldd + j] = cln_tf32_round(src[i * lds + j]);
}
