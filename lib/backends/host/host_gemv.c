/* host_gemv.c - the host's row-at-a-time products (host_gemv.h): the ordered GEMM of
 * host_gemm.c for the rows its 6- and 4-row tiles leave, above all a batch of one.
 *
 * Every element is the same sequential fma sum over k as in host_gemm.c (acc = fma(a_ik, b_jk,
 * acc) for k = 0, 1, ..., from 0), lanes running across output columns, so the bits are the
 * GEMM's. What differs is only how many columns one pass over k carries: a whole row of the seed
 * model's hidden layer (100 floats, 13 AVX2 vectors) at once, so that the row of A is broadcast
 * once per k, each weight is read once, and 13 independent sums cover the FMA latency (two FMA
 * units of latency 4 need 8). The GEMM's one-row tiles split such a row in 8 + 6 vectors and
 * stored a partial last vector through a buffer; here it is stored under a mask. */
#include <stddef.h>
#include <stdint.h>

#include "backends/host/host_gemv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CLN_X86 1
#include <immintrin.h>
#endif

size_t cln_gemv_tiled_rows(size_t m)
{
    const size_t m6 = m / 6 * 6;
    return m6 + (m - m6) / 4 * 4;
}

#ifdef CLN_X86
/* One row, CV vectors of columns (CV * W >= nc > (CV - 1) * W): CV accumulators, each lane one
 * element of C with its own sum over k in order. The last vector holds nc - (CV - 1) * W
 * columns, stored by TAIL. */
#define CLN_GEMV_TILE(NAME, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, CV)                 \
    TGT static inline void NAME(size_t k, const T *a, const T *w, size_t ldw, T *c, size_t nc)     \
    {                                                                                              \
        V acc[CV];                                                                                 \
        _Pragma("GCC unroll 16") for (int v = 0; v < CV; ++v) acc[v] = ZERO();                     \
        _Pragma("GCC unroll 2") for (size_t kk = 0; kk < k; ++kk)                                  \
        {                                                                                          \
            const V x = BCAST(a[kk]);                                                              \
            const T *wr = w + kk * ldw;                                                            \
            _Pragma("GCC unroll 16") for (int v = 0; v < CV; ++v) acc[v] =                         \
                FMA(x, LOAD(wr + (size_t)v * W), acc[v]);                                          \
        }                                                                                          \
        /* unrolled, or GCC copies the accumulators through the stack with a string move */        \
        _Pragma("GCC unroll 16") for (int v = 0; v + 1 < CV; ++v)                                  \
            STORE(c + (size_t)v * W, acc[v]);                                                      \
        TAIL(c + (size_t)(CV - 1) * W, nc - (size_t)(CV - 1) * W, acc[CV - 1]);                    \
    }

#define CLN_GEMV_TILES(P, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL)                       \
    CLN_GEMV_TILE(P##1, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 1)                      \
    CLN_GEMV_TILE(P##2, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 2)                      \
    CLN_GEMV_TILE(P##3, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 3)                      \
    CLN_GEMV_TILE(P##4, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 4)                      \
    CLN_GEMV_TILE(P##5, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 5)                      \
    CLN_GEMV_TILE(P##6, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 6)                      \
    CLN_GEMV_TILE(P##7, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 7)                      \
    CLN_GEMV_TILE(P##8, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 8)                      \
    CLN_GEMV_TILE(P##9, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 9)                      \
    CLN_GEMV_TILE(P##10, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 10)                    \
    CLN_GEMV_TILE(P##11, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 11)                    \
    CLN_GEMV_TILE(P##12, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 12)                    \
    CLN_GEMV_TILE(P##13, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 13)                    \
    CLN_GEMV_TILE(P##14, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, 14)
_Static_assert(CLN_GEMV_MAX_VECS == 14, "one tile per vector count up to CLN_GEMV_MAX_VECS");

/* Row by row: the row's vectors in as few passes as CLN_GEMV_MAX_VECS allows, of balanced
 * widths. */
#define CLN_GEMV_ROWS(NAME, TGT, T, W, P)                                                          \
    TGT static void NAME(size_t m, size_t n, size_t k, const T *A, size_t lda, const T *Wt,        \
                         size_t ldw, T *C, size_t ldc)                                             \
    {                                                                                              \
        const size_t nvec = (n + W - 1) / W;                                                       \
        const size_t strips = (nvec + CLN_GEMV_MAX_VECS - 1) / CLN_GEMV_MAX_VECS;                  \
        for (size_t i = 0; i < m; ++i) {                                                           \
            const T *a = A + i * lda;                                                              \
            T *c = C + i * ldc;                                                                    \
            size_t v0 = 0;                                                                         \
            for (size_t s = 0; s < strips; ++s) {                                                  \
                const size_t cv = (nvec - v0 + strips - s - 1) / (strips - s);                     \
                const size_t j = v0 * W, nc = n - j < cv * W ? n - j : cv * W;                     \
                const T *w = Wt + j;                                                               \
                switch (cv) {                                                                      \
                case 1:                                                                            \
                    P##1(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 2:                                                                            \
                    P##2(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 3:                                                                            \
                    P##3(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 4:                                                                            \
                    P##4(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 5:                                                                            \
                    P##5(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 6:                                                                            \
                    P##6(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 7:                                                                            \
                    P##7(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 8:                                                                            \
                    P##8(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 9:                                                                            \
                    P##9(k, a, w, ldw, c + j, nc);                                                 \
                    break;                                                                         \
                case 10:                                                                           \
                    P##10(k, a, w, ldw, c + j, nc);                                                \
                    break;                                                                         \
                case 11:                                                                           \
                    P##11(k, a, w, ldw, c + j, nc);                                                \
                    break;                                                                         \
                case 12:                                                                           \
                    P##12(k, a, w, ldw, c + j, nc);                                                \
                    break;                                                                         \
                case 13:                                                                           \
                    P##13(k, a, w, ldw, c + j, nc);                                                \
                    break;                                                                         \
                default:                                                                           \
                    P##14(k, a, w, ldw, c + j, nc);                                                \
                    break;                                                                         \
                }                                                                                  \
                v0 += cv;                                                                          \
            }                                                                                      \
        }                                                                                          \
    }

/* ---------------------------------------------------------------- AVX2 + FMA */
#define CLN_AVX2 __attribute__((target("avx2,fma")))
/* lanes [8 - rem, 16 - rem) of this table: rem lanes set, then clear */
static const int32_t cln_mask32[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static const int64_t cln_mask64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
#define CLN_TAIL_AVX2_F32(p, rem, v)                                                               \
    ((rem) == 8                                                                                    \
         ? _mm256_storeu_ps(p, v)                                                                  \
         : _mm256_maskstore_ps(                                                                    \
               p, _mm256_loadu_si256((const __m256i *)(const void *)(cln_mask32 + 8 - (rem))), v))
#define CLN_TAIL_AVX2_F64(p, rem, v)                                                               \
    ((rem) == 4                                                                                    \
         ? _mm256_storeu_pd(p, v)                                                                  \
         : _mm256_maskstore_pd(                                                                    \
               p, _mm256_loadu_si256((const __m256i *)(const void *)(cln_mask64 + 4 - (rem))), v))
CLN_GEMV_TILES(gv_avx2_f32_, CLN_AVX2, float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
               _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, CLN_TAIL_AVX2_F32)
CLN_GEMV_TILES(gv_avx2_f64_, CLN_AVX2, double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd,
               _mm256_set1_pd, _mm256_fmadd_pd, _mm256_storeu_pd, CLN_TAIL_AVX2_F64)
CLN_GEMV_ROWS(gemv_avx2_f32, CLN_AVX2, float, 8, gv_avx2_f32_)
CLN_GEMV_ROWS(gemv_avx2_f64, CLN_AVX2, double, 4, gv_avx2_f64_)

/* ---------------------------------------------------------------- AVX-512F */
#define CLN_AVX512 __attribute__((target("avx512f")))
#define CLN_TAIL_AVX512_F32(p, rem, v) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (rem)) - 1u), v)
#define CLN_TAIL_AVX512_F64(p, rem, v) _mm512_mask_storeu_pd(p, (__mmask8)((1u << (rem)) - 1u), v)
CLN_GEMV_TILES(gv_avx512_f32_, CLN_AVX512, float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
               _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, CLN_TAIL_AVX512_F32)
CLN_GEMV_TILES(gv_avx512_f64_, CLN_AVX512, double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd,
               _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd, CLN_TAIL_AVX512_F64)
CLN_GEMV_ROWS(gemv_avx512_f32, CLN_AVX512, float, 16, gv_avx512_f32_)
CLN_GEMV_ROWS(gemv_avx512_f64, CLN_AVX512, double, 8, gv_avx512_f64_)

#define CLN_GEMV_DISPATCH(SFX)                                                                     \
    if (isa == CLN_GEMM_AVX512)                                                                    \
        gemv_avx512_##SFX(m, n, k, A, lda, Wt, ldw, C, ldc);                                       \
    else if (isa == CLN_GEMM_AVX2)                                                                 \
        gemv_avx2_##SFX(m, n, k, A, lda, Wt, ldw, C, ldc);                                         \
    else                                                                                           \
        cln_gemm_packed_##SFX(isa, m, n, k, A, lda, Wt, ldw, C, ldc);
#else
#define CLN_GEMV_DISPATCH(SFX) cln_gemm_packed_##SFX(isa, m, n, k, A, lda, Wt, ldw, C, ldc);
#endif /* CLN_X86 */

void cln_gemv_packed_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                         const float *Wt, size_t ldw, float *C, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMV_DISPATCH(f32)
}

void cln_gemv_packed_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                         size_t lda, const double *Wt, size_t ldw, double *C, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMV_DISPATCH(f64)
}
