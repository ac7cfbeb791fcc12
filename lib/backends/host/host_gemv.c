/* host_gemv.c - the host's row-at-a-time products (host_gemv.h): the ordered GEMM of
 * host_gemm.c for the rows its 6- and 4-row tiles leave, above all a batch of one.
 *
 * Every element is the same sequential fma sum over k as in host_gemm.c (acc = fma(a_ik, b_jk,
 * acc) for k = 0, 1, ..., from 0), lanes running across output columns, so the bits are the
 * GEMM's. What differs is only how many columns one pass over k carries: up to 14 vectors of a
 * row at once (the seed model's hidden layer, 100 floats or 13 AVX2 vectors, in two panels of 7
 * and 6, see below), so that the row of A is broadcast once per k, each weight is read once, and
 * enough independent sums cover the FMA latency (two FMA units of latency 4 need 8). The GEMM's
 * one-row tiles split such a row in 8 + 6 vectors and stored a partial last vector through a
 * buffer; here it is stored under a mask. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* ---------------------------------------------------------------- panels (host_gemv.h)
 *
 * A layer of up to 7 vectors is one panel; a wider one is split in two or more panels of at most
 * CLN_GEMV_MAX_VECS vectors (one pass over k each for a single row). Panels of 6 or 7 vectors
 * keep a little fewer independent sums in flight than AVX2's two FMA units could take (8), but at
 * a batch of one the weights are the bottleneck: the seed model's float weights (48 KB) do not
 * fit a 32 KB L1 and a single pass streams all of them from L2 every evaluation, while with two
 * panels passed over in alternating order the one read last is still in L1 when the next
 * evaluation starts with it (on a Zen 4 core: about 6% less time per evaluation than the same
 * panels in a fixed order). */
static size_t cln_gemv_lanes(cln_gemm_isa isa, size_t esize)
{
    return (isa == CLN_GEMM_AVX512 ? 64 : 32) / esize;
}

size_t cln_gemv_panel_count(cln_gemm_isa isa, size_t esize, size_t n)
{
    const size_t w = cln_gemv_lanes(isa, esize), nvec = (n + w - 1) / w;
    if (nvec < 8)
        return 1;
    const size_t p = (nvec + CLN_GEMV_MAX_VECS - 1) / CLN_GEMV_MAX_VECS;
    return p < 2 ? 2 : p;
}

cln_gemv_panel cln_gemv_panel_at(cln_gemm_isa isa, size_t esize, size_t n, size_t p)
{
    const size_t w = cln_gemv_lanes(isa, esize), nvec = (n + w - 1) / w;
    const size_t np = cln_gemv_panel_count(isa, esize, n);
    const size_t v0 = p * nvec / np, v1 = (p + 1) * nvec / np;
    cln_gemv_panel r;
    r.j0 = v0 * w;
    r.nc = n - r.j0 < (v1 - v0) * w ? n - r.j0 : (v1 - v0) * w;
    r.ld = (v1 - v0) * w;
    return r;
}

size_t cln_gemv_panels_elems(cln_gemm_isa isa, size_t esize, size_t n, size_t k)
{
    const size_t w = cln_gemv_lanes(isa, esize);
    return (n + w - 1) / w * w * k;
}

#define CLN_GEMV_PACK_PANELS(T, SFX)                                                               \
    void cln_gemv_pack_panels_##SFX(cln_gemm_isa isa, size_t ncols, size_t k, const T *Wt,         \
                                    size_t ldw, T *P)                                              \
    {                                                                                              \
        const size_t np = cln_gemv_panel_count(isa, sizeof(T), ncols);                             \
        for (size_t p = 0; p < np; ++p) {                                                          \
            const cln_gemv_panel q = cln_gemv_panel_at(isa, sizeof(T), ncols, p);                  \
            for (size_t kk = 0; kk < k; ++kk)                                                      \
                memcpy(P + k * q.j0 + kk * q.ld, Wt + kk * ldw + q.j0, q.ld * sizeof(T));          \
        }                                                                                          \
    }
CLN_GEMV_PACK_PANELS(float, f32)
CLN_GEMV_PACK_PANELS(double, f64)

#ifdef CLN_X86
/* RT rows (1 to 3) x CV vectors of columns (CV * W >= nc > (CV - 1) * W): RT * CV accumulators,
 * each lane one element of C with its own sum over k in order; the weights of a k are loaded once
 * for the RT rows. The last vector holds nc - (CV - 1) * W columns, stored by TAIL. The loops
 * are unrolled (or GCC keeps the accumulators on the stack and copies them with a string move). */
#define CLN_GEMV_TILE(NAME, TGT, T, V, W, ZERO, LOAD, BCAST, FMA, STORE, TAIL, RT, CV)             \
    TGT static inline void NAME(size_t k, const T *a, size_t lda, const T *w, size_t ldw, T *c,    \
                                size_t ldc, size_t nc)                                             \
    {                                                                                              \
        V acc[RT][CV];                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < RT; ++r)                                       \
            _Pragma("GCC unroll 16") for (int v = 0; v < CV; ++v) acc[r][v] = ZERO();              \
        _Pragma("GCC unroll 2") for (size_t kk = 0; kk < k; ++kk)                                  \
        {                                                                                          \
            const T *wr = w + kk * ldw;                                                            \
            V b[CV];                                                                               \
            _Pragma("GCC unroll 16") for (int v = 0; v < CV; ++v) b[v] = LOAD(wr + (size_t)v * W); \
            _Pragma("GCC unroll 4") for (int r = 0; r < RT; ++r)                                   \
            {                                                                                      \
                const V x = BCAST(a[(size_t)r * lda + kk]);                                        \
                _Pragma("GCC unroll 16") for (int v = 0; v < CV; ++v) acc[r][v] =                  \
                    FMA(x, b[v], acc[r][v]);                                                       \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < RT; ++r)                                       \
        {                                                                                          \
            T *cr = c + (size_t)r * ldc;                                                           \
            _Pragma("GCC unroll 16") for (int v = 0; v + 1 < CV; ++v)                              \
                STORE(cr + (size_t)v * W, acc[r][v]);                                              \
            TAIL(cr + (size_t)(CV - 1) * W, nc - (size_t)(CV - 1) * W, acc[r][CV - 1]);            \
        }                                                                                          \
    }

/* The tiles of one ISA and precision: 1 row x 1 to 14 vectors (the weights as memory operands of
 * the FMAs: 14 accumulators and the broadcast), 2 rows x 1 to 5 and 3 rows x 1 to 3 (the
 * weights of a k in registers: RT * CV + CV + 1 <= 16, AVX2's register count). */
/* clang-format off */
#define CLN_GEMV_T(P, R, CV, ...) CLN_GEMV_TILE(P##R##x##CV, __VA_ARGS__, R, CV)
#define CLN_GEMV_TILES(P, ...)                                                                     \
    CLN_GEMV_T(P, 1, 1, __VA_ARGS__) CLN_GEMV_T(P, 1, 2, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 1, 3, __VA_ARGS__) CLN_GEMV_T(P, 1, 4, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 1, 5, __VA_ARGS__) CLN_GEMV_T(P, 1, 6, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 1, 7, __VA_ARGS__) CLN_GEMV_T(P, 1, 8, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 1, 9, __VA_ARGS__) CLN_GEMV_T(P, 1, 10, __VA_ARGS__)                             \
    CLN_GEMV_T(P, 1, 11, __VA_ARGS__) CLN_GEMV_T(P, 1, 12, __VA_ARGS__)                            \
    CLN_GEMV_T(P, 1, 13, __VA_ARGS__) CLN_GEMV_T(P, 1, 14, __VA_ARGS__)                            \
    CLN_GEMV_T(P, 2, 1, __VA_ARGS__) CLN_GEMV_T(P, 2, 2, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 2, 3, __VA_ARGS__) CLN_GEMV_T(P, 2, 4, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 2, 5, __VA_ARGS__)                                                               \
    CLN_GEMV_T(P, 3, 1, __VA_ARGS__) CLN_GEMV_T(P, 3, 2, __VA_ARGS__)                              \
    CLN_GEMV_T(P, 3, 3, __VA_ARGS__)
_Static_assert(CLN_GEMV_MAX_VECS == 14, "one tile per vector count up to CLN_GEMV_MAX_VECS");

/* One strip of columns for rows 1 to 3: the tile of that many rows and cv vectors. */
#define CLN_GEMV_CALL(P, R, CV) P##R##x##CV(k, a, lda, w, ldw, c, ldc, nc); break
#define CLN_GEMV_STRIP(NAME, TGT, T, P)                                                            \
    TGT static void NAME(size_t rt, size_t cv, size_t k, const T *a, size_t lda, const T *w,       \
                         size_t ldw, T *c, size_t ldc, size_t nc)                                  \
    {                                                                                              \
        switch (rt * 16 + cv) {                                                                    \
        case 16 + 1: CLN_GEMV_CALL(P, 1, 1);                                                       \
        case 16 + 2: CLN_GEMV_CALL(P, 1, 2);                                                       \
        case 16 + 3: CLN_GEMV_CALL(P, 1, 3);                                                       \
        case 16 + 4: CLN_GEMV_CALL(P, 1, 4);                                                       \
        case 16 + 5: CLN_GEMV_CALL(P, 1, 5);                                                       \
        case 16 + 6: CLN_GEMV_CALL(P, 1, 6);                                                       \
        case 16 + 7: CLN_GEMV_CALL(P, 1, 7);                                                       \
        case 16 + 8: CLN_GEMV_CALL(P, 1, 8);                                                       \
        case 16 + 9: CLN_GEMV_CALL(P, 1, 9);                                                       \
        case 16 + 10: CLN_GEMV_CALL(P, 1, 10);                                                     \
        case 16 + 11: CLN_GEMV_CALL(P, 1, 11);                                                     \
        case 16 + 12: CLN_GEMV_CALL(P, 1, 12);                                                     \
        case 16 + 13: CLN_GEMV_CALL(P, 1, 13);                                                     \
        case 16 + 14: CLN_GEMV_CALL(P, 1, 14);                                                     \
        case 32 + 1: CLN_GEMV_CALL(P, 2, 1);                                                       \
        case 32 + 2: CLN_GEMV_CALL(P, 2, 2);                                                       \
        case 32 + 3: CLN_GEMV_CALL(P, 2, 3);                                                       \
        case 32 + 4: CLN_GEMV_CALL(P, 2, 4);                                                       \
        case 32 + 5: CLN_GEMV_CALL(P, 2, 5);                                                       \
        case 48 + 1: CLN_GEMV_CALL(P, 3, 1);                                                       \
        case 48 + 2: CLN_GEMV_CALL(P, 3, 2);                                                       \
        default: CLN_GEMV_CALL(P, 3, 3);                                                           \
        }                                                                                          \
    }
/* clang-format on */

/* Rows in groups of up to 3 (the rows of a group share each weight load), each group's vectors
 * in as few strips as its tiles allow, of balanced widths. */
#define CLN_GEMV_ROWS(NAME, TGT, T, W, STRIP)                                                      \
    TGT static void NAME(size_t m, size_t n, size_t k, const T *A, size_t lda, const T *Wt,        \
                         size_t ldw, T *C, size_t ldc)                                             \
    {                                                                                              \
        const size_t nvec = (n + W - 1) / W;                                                       \
        if (m == 1 && nvec <= CLN_GEMV_MAX_VECS) { /* a batch of one's panel: one tile */          \
            STRIP(1, nvec, k, A, lda, Wt, ldw, C, ldc, n);                                         \
            return;                                                                                \
        }                                                                                          \
        for (size_t i = 0; i < m;) {                                                               \
            const size_t rt = m - i >= 3 ? 3 : m - i;                                              \
            const size_t vmax = rt == 1 ? CLN_GEMV_MAX_VECS : rt == 2 ? 5 : 3;                     \
            const size_t strips = (nvec + vmax - 1) / vmax;                                        \
            size_t v0 = 0;                                                                         \
            for (size_t s = 0; s < strips; ++s) {                                                  \
                const size_t cv = (nvec - v0 + strips - s - 1) / (strips - s);                     \
                const size_t j = v0 * W, nc = n - j < cv * W ? n - j : cv * W;                     \
                STRIP(rt, cv, k, A + i * lda, lda, Wt + j, ldw, C + i * ldc + j, ldc, nc);         \
                v0 += cv;                                                                          \
            }                                                                                      \
            i += rt;                                                                               \
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
CLN_GEMV_STRIP(strip_avx2_f32, CLN_AVX2, float, gv_avx2_f32_)
CLN_GEMV_STRIP(strip_avx2_f64, CLN_AVX2, double, gv_avx2_f64_)
CLN_GEMV_ROWS(gemv_avx2_f32, CLN_AVX2, float, 8, strip_avx2_f32)
CLN_GEMV_ROWS(gemv_avx2_f64, CLN_AVX2, double, 4, strip_avx2_f64)

/* ---------------------------------------------------------------- AVX-512F */
#define CLN_AVX512 __attribute__((target("avx512f")))
#define CLN_TAIL_AVX512_F32(p, rem, v) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (rem)) - 1u), v)
#define CLN_TAIL_AVX512_F64(p, rem, v) _mm512_mask_storeu_pd(p, (__mmask8)((1u << (rem)) - 1u), v)
CLN_GEMV_TILES(gv_avx512_f32_, CLN_AVX512, float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
               _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, CLN_TAIL_AVX512_F32)
CLN_GEMV_TILES(gv_avx512_f64_, CLN_AVX512, double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd,
               _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd, CLN_TAIL_AVX512_F64)
CLN_GEMV_STRIP(strip_avx512_f32, CLN_AVX512, float, gv_avx512_f32_)
CLN_GEMV_STRIP(strip_avx512_f64, CLN_AVX512, double, gv_avx512_f64_)
CLN_GEMV_ROWS(gemv_avx512_f32, CLN_AVX512, float, 16, strip_avx512_f32)
CLN_GEMV_ROWS(gemv_avx512_f64, CLN_AVX512, double, 8, strip_avx512_f64)

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
