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
 * B is read transposed and padded (packed once per solve for the model's weights, per call for a
 * plain GEMM) so the lanes read contiguous memory. The caller shares rows between threads, which
 * again changes no sum. Kernels: AVX-512F, AVX2+FMA and a portable C fma() loop: the widest the CPU
 * runs, or the one a device string names ("host:avx2", lib/backends/host/host.c). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cln_tf32.h"
#include "backends/host/host_gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CLN_X86 1
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- packed weights
 *
 * Every kernel reads B as Wt, its transpose (k x ldw) with the columns from n to ldw zero, so
 * that every strip of columns is whole and the lanes load contiguous memory. ldw is n rounded up
 * to 128 bytes (32 floats, 16 doubles): two vectors of the widest ISA. The solver packs the weights
 * once per solve; a plain GEMM packs its B per call. */

size_t cln_gemm_packed_ld(size_t n, size_t esize)
{
    const size_t lanes = 128 / esize;
    return (n + lanes - 1) / lanes * lanes;
}

#define CLN_GEMM_PACK(T, SFX, ROUND)                                                               \
    void cln_gemm_pack_##SFX(size_t n, size_t k, const T *B, size_t ldb, T *Wt, size_t ldw)        \
    {                                                                                              \
        for (size_t kk = 0; kk < k; ++kk) {                                                        \
            T *w = Wt + kk * ldw;                                                                  \
            for (size_t j = 0; j < n; ++j)                                                         \
                w[j] = ROUND(B[j * ldb + kk]);                                                     \
            for (size_t j = n; j < ldw; ++j)                                                       \
                w[j] = 0;                                                                          \
        }                                                                                          \
    }
#define CLN_GEMM_NO_ROUND(x) (x)
CLN_GEMM_PACK(float, f32, CLN_GEMM_NO_ROUND)
CLN_GEMM_PACK(double, f64, CLN_GEMM_NO_ROUND)
CLN_GEMM_PACK(float, tf32, cln_tf32_round)

/* ---------------------------------------------------------------- portable reference */

/* Element (i, j) = sum_kk a(i, kk) B[kk][j], a(i, kk) = A[i sai + kk sak]: A as it is (sai = lda,
 * sak = 1, cln_gemm_packed_*) or as its transpose (sai = 1, sak = lda, cln_gemm_tn_*), each sum
 * from C (acc 1) or 0, and with acc CLN_GEMM_TN_ADD from 0 then added to C. */
#define CLN_GEMM_REF(T, FMA)                                                                       \
    static void gemm_ref_##T(size_t m, size_t n, size_t k, const T *A, size_t sai, size_t sak,     \
                             const T *B, size_t ldb, T *C, size_t ldc, int acc)                    \
    {                                                                                              \
        for (size_t i = 0; i < m; ++i)                                                             \
            for (size_t j = 0; j < n; ++j) {                                                       \
                T s = acc == 1 ? C[i * ldc + j] : 0;                                               \
                for (size_t kk = 0; kk < k; ++kk)                                                  \
                    s = FMA(A[i * sai + kk * sak], B[kk * ldb + j], s);                            \
                C[i * ldc + j] = acc == CLN_GEMM_TN_ADD ? C[i * ldc + j] + s : s;                  \
            }                                                                                      \
    }
CLN_GEMM_REF(float, fmaf)
CLN_GEMM_REF(double, fma)

#ifdef CLN_X86
/* ---------------------------------------------------------------- register tiles
 *
 * A tile computes RT rows x CV vectors of columns of C: RT * CV accumulators, each lane one
 * element of C with its own sum over k in order (a broadcast of a[r][kk] times one row of Wt,
 * fused into the accumulator). `nc` (<= CV * lanes) columns of the tile are stored; a partial
 * tile goes through a buffer so that nothing past column n of C is written. The tile sizes are
 * constants, so the compiler keeps the accumulators in registers. CLN_TILE_SUMS is the pass over
 * k, with a[r][kk] at a[AT]. */
#define CLN_TILE_SUMS(V, W, LOAD, BCAST, FMA, RT, CV, AT)                                          \
    _Pragma("GCC unroll 2") for (size_t kk = 0; kk < k; ++kk)                                      \
    {                                                                                              \
        V b[CV];                                                                                   \
        for (int v = 0; v < CV; ++v)                                                               \
            b[v] = LOAD(w + kk * ldw + (size_t)v * W);                                             \
        for (int r = 0; r < RT; ++r) {                                                             \
            const V x = BCAST(a[AT]);                                                              \
            for (int v = 0; v < CV; ++v)                                                           \
                acc[r][v] = FMA(x, b[v], acc[r][v]);                                               \
        }                                                                                          \
    }
#define CLN_TILE(NAME, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, RT, CV)                        \
    TGT static inline void NAME(size_t k, const T *a, size_t lda, const T *w, size_t ldw, T *c,    \
                                size_t ldc, size_t nc)                                             \
    {                                                                                              \
        V acc[RT][CV];                                                                             \
        for (int r = 0; r < RT; ++r)                                                               \
            for (int v = 0; v < CV; ++v)                                                           \
                acc[r][v] = ZERO();                                                                \
        CLN_TILE_SUMS(V, W, LOAD, BCAST, FMA, RT, CV, kk + lda * (size_t)r)                        \
        if (nc == (size_t)(CV * W)) {                                                              \
            for (int r = 0; r < RT; ++r)                                                           \
                for (int v = 0; v < CV; ++v)                                                       \
                    STORE(c + (size_t)r * ldc + (size_t)v * W, acc[r][v]);                         \
            return;                                                                                \
        }                                                                                          \
        T buf[CV * W];                                                                             \
        for (int r = 0; r < RT; ++r) {                                                             \
            for (int v = 0; v < CV; ++v)                                                           \
                STORE(buf + v * W, acc[r][v]);                                                     \
            for (size_t j = 0; j < nc; ++j)                                                        \
                c[(size_t)r * ldc + j] = buf[j];                                                   \
        }                                                                                          \
    }

/* The product on packed weights with one ISA's tiles: 6-row tiles of 2 vectors (12 accumulators,
 * 2 operand vectors and a broadcast: 15 of AVX2's 16 registers) in strips of columns (a strip of
 * Wt stays in L1 while the rows pass), one 4-row tile for 4 or 5 rows left, and for the last rows
 * (and a batch of one) 1-row tiles as wide as 8 vectors, so that enough independent sums are in
 * flight. */
#define CLN_PACKED(NAME, TGT, T, W, T6x2, T6x1, T4x2, T4x1, T1x8, T1x6, T1x4, T1x2)                \
    TGT static void NAME(size_t m, size_t n, size_t k, const T *A, size_t lda, const T *Wt,        \
                         size_t ldw, T *C, size_t ldc)                                             \
    {                                                                                              \
        const size_t m6 = m / 6 * 6, m4 = m6 + (m - m6) / 4 * 4;                                   \
        for (size_t j = 0; j < n && m4 > 0; j += 2 * W) {                                          \
            const size_t nc = n - j < 2 * W ? n - j : 2 * W;                                       \
            if (nc <= W) {                                                                         \
                for (size_t i = 0; i < m6; i += 6)                                                 \
                    T6x1(k, A + i * lda, lda, Wt + j, ldw, C + i * ldc + j, ldc, nc);              \
                if (m4 > m6)                                                                       \
                    T4x1(k, A + m6 * lda, lda, Wt + j, ldw, C + m6 * ldc + j, ldc, nc);            \
            } else {                                                                               \
                for (size_t i = 0; i < m6; i += 6)                                                 \
                    T6x2(k, A + i * lda, lda, Wt + j, ldw, C + i * ldc + j, ldc, nc);              \
                if (m4 > m6)                                                                       \
                    T4x2(k, A + m6 * lda, lda, Wt + j, ldw, C + m6 * ldc + j, ldc, nc);            \
            }                                                                                      \
        }                                                                                          \
        for (size_t i = m4; i < m; ++i) {                                                          \
            const T *a = A + i * lda;                                                              \
            T *c = C + i * ldc;                                                                    \
            for (size_t j = 0; j < n;) {                                                           \
                const size_t left = n - j;                                                         \
                if (left > 6 * W) {                                                                \
                    const size_t nc = left < 8 * W ? left : 8 * W;                                 \
                    T1x8(k, a, lda, Wt + j, ldw, c + j, ldc, nc);                                  \
                    j += nc;                                                                       \
                } else if (left > 4 * W) {                                                         \
                    T1x6(k, a, lda, Wt + j, ldw, c + j, ldc, left);                                \
                    j += left;                                                                     \
                } else if (left > 2 * W) {                                                         \
                    T1x4(k, a, lda, Wt + j, ldw, c + j, ldc, left);                                \
                    j += left;                                                                     \
                } else {                                                                           \
                    T1x2(k, a, lda, Wt + j, ldw, c + j, ldc, left);                                \
                    j += left;                                                                     \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* A tile of the product on A as its transpose (cln_gemm_tn_*): as CLN_TILE, with a[kk][r]
 * broadcast from row kk of A, and the accumulators loaded from C (add 1) or zero; with add
 * CLN_GEMM_TN_ADD, each sum from zero is added to C's element as it is stored (fma(1, c, sum):
 * the one rounding of c + sum). */
#define CLN_TILE_TN(NAME, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, RT, CV)                     \
    TGT static inline void NAME(size_t k, const T *a, size_t lda, const T *w, size_t ldw, T *c,    \
                                size_t ldc, size_t nc, int add)                                    \
    {                                                                                              \
        V acc[RT][CV];                                                                             \
        const int whole = nc == (size_t)(CV * W);                                                  \
        for (int r = 0; r < RT; ++r)                                                               \
            for (int v = 0; v < CV; ++v)                                                           \
                acc[r][v] = ZERO();                                                                \
        for (int r = 0; r < RT && add == 1; ++r) {                                                 \
            T in[CV * W];                                                                          \
            const T *src = c + (size_t)r * ldc;                                                    \
            if (!whole) {                                                                          \
                for (size_t j = 0; j < (size_t)(CV * W); ++j)                                      \
                    in[j] = j < nc ? src[j] : 0;                                                   \
                src = in;                                                                          \
            }                                                                                      \
            for (int v = 0; v < CV; ++v)                                                           \
                acc[r][v] = LOAD(src + v * W);                                                     \
        }                                                                                          \
        CLN_TILE_SUMS(V, W, LOAD, BCAST, FMA, RT, CV, (size_t)r + lda * kk)                        \
        const V one = BCAST((T)1);                                                                 \
        for (int r = 0; r < RT; ++r) {                                                             \
            T out[CV * W];                                                                         \
            T *dst = whole ? c + (size_t)r * ldc : out;                                            \
            for (int v = 0; v < CV && whole && add == CLN_GEMM_TN_ADD; ++v)                        \
                acc[r][v] = FMA(one, LOAD(dst + v * W), acc[r][v]);                                \
            for (int v = 0; v < CV; ++v)                                                           \
                STORE(dst + v * W, acc[r][v]);                                                     \
            for (size_t j = 0; j < nc && !whole; ++j)                                              \
                c[(size_t)r * ldc + j] =                                                           \
                    add == CLN_GEMM_TN_ADD ? c[(size_t)r * ldc + j] + out[j] : out[j];             \
        }                                                                                          \
    }

/* The rows of one strip of the product on A as its transpose: by 6, then 4, 2 and 1. */
#define CLN_TN_STRIP(T6, T4, T2, T1)                                                               \
    {                                                                                              \
        size_t i = 0;                                                                              \
        for (; i + 6 <= m; i += 6)                                                                 \
            T6(k, A + i, lda, B + j, ldb, C + i * ldc + j, ldc, nc, add);                          \
        if (i + 4 <= m) {                                                                          \
            T4(k, A + i, lda, B + j, ldb, C + i * ldc + j, ldc, nc, add);                          \
            i += 4;                                                                                \
        }                                                                                          \
        if (i + 2 <= m) {                                                                          \
            T2(k, A + i, lda, B + j, ldb, C + i * ldc + j, ldc, nc, add);                          \
            i += 2;                                                                                \
        }                                                                                          \
        if (i < m)                                                                                 \
            T1(k, A + i, lda, B + j, ldb, C + i * ldc + j, ldc, nc, add);                          \
    }

/* The product on A as its transpose with one ISA's tiles: strips of 2 vectors of columns, and
 * of 1 for a last strip that one vector holds (100 columns: 3 strips of 32 and one of 4). */
#define CLN_TN(NAME, TGT, T, W, P)                                                                 \
    TGT static void NAME(size_t m, size_t n, size_t k, const T *A, size_t lda, const T *B,         \
                         size_t ldb, T *C, size_t ldc, int add)                                    \
    {                                                                                              \
        for (size_t j = 0; j < n; j += 2 * W) {                                                    \
            const size_t nc = n - j < 2 * W ? n - j : 2 * W;                                       \
            if (nc > W)                                                                            \
                CLN_TN_STRIP(P##6x2, P##4x2, P##2x2, P##1x2)                                       \
            else                                                                                   \
                CLN_TN_STRIP(P##6x1, P##4x1, P##2x1, P##1x1)                                       \
        }                                                                                          \
    }
#define CLN_TILES_TN(ISA, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, SFX)                        \
    CLN_TILE_TN(tn_##ISA##_##SFX##_6x2, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 2)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_4x2, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 2)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_2x2, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 2, 2)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_1x2, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 2)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_6x1, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 1)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_4x1, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 1)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_2x1, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 2, 1)         \
    CLN_TILE_TN(tn_##ISA##_##SFX##_1x1, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 1)         \
    CLN_TN(tn_##ISA##_##SFX, TGT, T, W, tn_##ISA##_##SFX##_)

/* ---------------------------------------------------------------- AVX2 + FMA */
#define CLN_AVX2 __attribute__((target("avx2,fma")))
#define CLN_TILES_AVX2(T, V, W, ZERO, LOAD, BCAST, FMA, STORE, SFX)                                \
    CLN_TILE(tile6x2_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 2)           \
    CLN_TILE(tile6x1_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 1)           \
    CLN_TILE(tile4x2_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 2)           \
    CLN_TILE(tile4x1_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 1)           \
    CLN_TILE(tile1x8_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 8)           \
    CLN_TILE(tile1x6_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 6)           \
    CLN_TILE(tile1x4_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 4)           \
    CLN_TILE(tile1x2_avx2_##SFX, CLN_AVX2, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 2)           \
    CLN_PACKED(packed_avx2_##SFX, CLN_AVX2, T, W, tile6x2_avx2_##SFX, tile6x1_avx2_##SFX,          \
               tile4x2_avx2_##SFX, tile4x1_avx2_##SFX, tile1x8_avx2_##SFX, tile1x6_avx2_##SFX,     \
               tile1x4_avx2_##SFX, tile1x2_avx2_##SFX)
CLN_TILES_AVX2(float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps,
               _mm256_fmadd_ps, _mm256_storeu_ps, f32)
CLN_TILES_AVX2(double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_set1_pd,
               _mm256_fmadd_pd, _mm256_storeu_pd, f64)
CLN_TILES_TN(avx2, CLN_AVX2, float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps,
             _mm256_fmadd_ps, _mm256_storeu_ps, f32)
CLN_TILES_TN(avx2, CLN_AVX2, double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_set1_pd,
             _mm256_fmadd_pd, _mm256_storeu_pd, f64)

/* ---------------------------------------------------------------- AVX-512F */
#define CLN_AVX512 __attribute__((target("avx512f")))
#define CLN_TILES_AVX512(T, V, W, ZERO, LOAD, BCAST, FMA, STORE, SFX)                              \
    CLN_TILE(tile6x2_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 2)       \
    CLN_TILE(tile6x1_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 6, 1)       \
    CLN_TILE(tile4x2_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 2)       \
    CLN_TILE(tile4x1_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 4, 1)       \
    CLN_TILE(tile1x8_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 8)       \
    CLN_TILE(tile1x6_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 6)       \
    CLN_TILE(tile1x4_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 4)       \
    CLN_TILE(tile1x2_avx512_##SFX, CLN_AVX512, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, 1, 2)       \
    CLN_PACKED(packed_avx512_##SFX, CLN_AVX512, T, W, tile6x2_avx512_##SFX, tile6x1_avx512_##SFX,  \
               tile4x2_avx512_##SFX, tile4x1_avx512_##SFX, tile1x8_avx512_##SFX,                   \
               tile1x6_avx512_##SFX, tile1x4_avx512_##SFX, tile1x2_avx512_##SFX)
CLN_TILES_AVX512(float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps,
                 _mm512_fmadd_ps, _mm512_storeu_ps, f32)
CLN_TILES_AVX512(double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_set1_pd,
                 _mm512_fmadd_pd, _mm512_storeu_pd, f64)
CLN_TILES_TN(avx512, CLN_AVX512, float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
             _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, f32)
CLN_TILES_TN(avx512, CLN_AVX512, double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd,
             _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd, f64)
#endif /* CLN_X86 */

/* ---------------------------------------------------------------- dispatch */

int cln_gemm_isa_runs(cln_gemm_isa isa, const char **why)
{
    const char *no = NULL;
    switch (isa) {
    case CLN_GEMM_PORTABLE:
        break;
#ifdef CLN_X86
    /* libgcc's answers include the OS's: XCR0 must enable the registers' state */
    case CLN_GEMM_AVX512:
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512f"))
            no = "this CPU/OS does not support AVX-512F";
        break;
    case CLN_GEMM_AVX2:
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
            no = "this CPU/OS does not support AVX2 and FMA";
        break;
#else
    case CLN_GEMM_AVX512:
        no = "this build has no AVX-512F kernels (not an x86-64 GCC-compatible build)";
        break;
    case CLN_GEMM_AVX2:
        no = "this build has no AVX2 kernels (not an x86-64 GCC-compatible build)";
        break;
#endif
    default:
        no = "unknown kernel set";
    }
    if (why)
        *why = no;
    return no == NULL;
}

cln_gemm_isa cln_gemm_best_isa(void)
{
    if (cln_gemm_isa_runs(CLN_GEMM_AVX512, NULL))
        return CLN_GEMM_AVX512;
    if (cln_gemm_isa_runs(CLN_GEMM_AVX2, NULL))
        return CLN_GEMM_AVX2;
    return CLN_GEMM_PORTABLE;
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

#ifdef CLN_X86
#define CLN_GEMM_DISPATCH(SFX, T)                                                                  \
    if (isa == CLN_GEMM_AVX512)                                                                    \
        packed_avx512_##SFX(m, n, k, A, lda, Wt, ldw, C, ldc);                                     \
    else if (isa == CLN_GEMM_AVX2)                                                                 \
        packed_avx2_##SFX(m, n, k, A, lda, Wt, ldw, C, ldc);                                       \
    else                                                                                           \
        gemm_ref_##T(m, n, k, A, lda, 1, Wt, ldw, C, ldc, 0);
#else
#define CLN_GEMM_DISPATCH(SFX, T)                                                                  \
    (void)isa;                                                                                     \
    gemm_ref_##T(m, n, k, A, lda, 1, Wt, ldw, C, ldc, 0);
#endif

void cln_gemm_packed_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                         const float *Wt, size_t ldw, float *C, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMM_DISPATCH(f32, float)
}

void cln_gemm_packed_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                         size_t lda, const double *Wt, size_t ldw, double *C, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMM_DISPATCH(f64, double)
}

#ifdef CLN_X86
#define CLN_GEMM_TN_DISPATCH(SFX, T)                                                               \
    if (isa == CLN_GEMM_AVX512)                                                                    \
        tn_avx512_##SFX(m, n, k, A, lda, B, ldb, C, ldc, acc);                                     \
    else if (isa == CLN_GEMM_AVX2)                                                                 \
        tn_avx2_##SFX(m, n, k, A, lda, B, ldb, C, ldc, acc);                                       \
    else                                                                                           \
        gemm_ref_##T(m, n, k, A, 1, lda, B, ldb, C, ldc, acc);
#else
#define CLN_GEMM_TN_DISPATCH(SFX, T)                                                               \
    (void)isa;                                                                                     \
    gemm_ref_##T(m, n, k, A, 1, lda, B, ldb, C, ldc, acc);
#endif

void cln_gemm_tn_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                     const float *B, size_t ldb, float *C, size_t ldc, int acc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMM_TN_DISPATCH(f32, float)
}

void cln_gemm_tn_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A, size_t lda,
                     const double *B, size_t ldb, double *C, size_t ldc, int acc)
{
    if (m == 0 || n == 0)
        return;
    CLN_GEMM_TN_DISPATCH(f64, double)
}

void cln_gemm_ordered_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                          size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt)
{
    if (m == 0 || n == 0)
        return;
    const size_t ldw = cln_gemm_packed_ld(n, sizeof(float));
    cln_gemm_pack_f32(n, k, B, ldb, Bt, ldw);
    cln_gemm_packed_f32(isa, m, n, k, A, lda, Bt, ldw, C, ldc);
}

void cln_gemm_ordered_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                          size_t lda, const double *B, size_t ldb, double *C, size_t ldc,
                          double *Bt)
{
    if (m == 0 || n == 0)
        return;
    const size_t ldw = cln_gemm_packed_ld(n, sizeof(double));
    cln_gemm_pack_f64(n, k, B, ldb, Bt, ldw);
    cln_gemm_packed_f64(isa, m, n, k, A, lda, Bt, ldw, C, ldc);
}

/* The tf32 emulation: both operands rounded to TF32 (cl/cln_tf32.h) on their way into the
 * scratch (B while it is packed, A into At), then the same ordered fp32 accumulation. */
void cln_gemm_ordered_tf32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A,
                           size_t lda, const float *B, size_t ldb, float *C, size_t ldc, float *Bt,
                           float *At)
{
    if (m == 0 || n == 0)
        return;
    const size_t ldw = cln_gemm_packed_ld(n, sizeof(float));
    cln_gemm_pack_tf32(n, k, B, ldb, Bt, ldw);
    cln_tf32_round_rows(m, k, A, lda, At, k);
    cln_gemm_packed_f32(isa, m, n, k, At, k, Bt, ldw, C, ldc);
}

void cln_tf32_round_rows(size_t rows, size_t cols, const float *src, size_t lds, float *dst,
                         size_t ldd)
{
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j)
            dst[i * ldd + j] = cln_tf32_round(src[i * lds + j]);
}
