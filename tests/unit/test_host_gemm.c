/* test_host_gemm.c - the host's ordered GEMM: every kernel (portable, AVX2+FMA, AVX-512) gives
 * exactly the sequential-fma sum of each element, for every shape (tails of every width), every
 * row position and every batch size; threads change nothing. The row-at-a-time kernels of small
 * batches (host_gemv.c) give the same bits as the GEMM, for every width up to several passes of
 * registers, on the GEMM's packing and on their own panels, and write nothing past a row's last
 * column. Bias + activation on several rows at once (host_act.inc) gives the bits of the one-row
 * pass (cln_host_bias_act) for every activation, row count and width, special values included;
 * with the derivative (the reverse pass's recomputation), the bits of the formulas one value at a
 * time. The product on A transposed (the reverse pass's weight sums) gives the sequential-fma sums,
 * in one call or continued over ranges of k. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/host/host_act.h"
#include "backends/host/host_gemm.h"
#include "backends/host/host_gemv.h"
#include "backends/host/host_math.h"
#include "test_util.h"

/* cl/cln_activation.h one value at a time (cl/activation_inst.inc) */
float act_f32(int act, float x);
float act_grad_f32(int act, float x, float y);
double act_f64(int act, double x);
double act_grad_f64(int act, double x, double y);

static uint32_t rng = 2024u;
/* Deterministic values in [-0.5, 0.5). */
static double urand(void)
{
    return 0.5 * test_lcg(&rng);
}

static int isa_available(cln_gemm_isa isa)
{
    return isa <= cln_gemm_best_isa();
}

#define CHECK_SHAPES(T, SFX, FMA)                                                                  \
    static void check_##SFX(cln_gemm_isa isa)                                                      \
    {                                                                                              \
        const size_t shapes[][3] = {{1, 100, 10}, {2, 100, 100}, {7, 10, 100},   {64, 100, 10},    \
                                    {65, 33, 17}, {3, 1, 1},     {5, 31, 3},     {9, 47, 64},      \
                                    {130, 16, 8}, {1, 7, 0},     {300, 100, 100}};                 \
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {                            \
            const size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];                     \
            const size_t lda = k + 3, ldb = k + 1, ldc = n + 2; /* padded leading dimensions */    \
            T *A = calloc(m * lda + 1, sizeof(T)), *B = calloc(n * ldb + 1, sizeof(T));            \
            T *C = calloc(m * ldc + 1, sizeof(T));                                                 \
            T *Bt = calloc(k * cln_gemm_packed_ld(n, sizeof(T)) + 1, sizeof(T));                   \
            T *one = calloc(ldc + 1, sizeof(T));                                                   \
            assert_true(A &&B &&C &&Bt &&one);                                                     \
            for (size_t i = 0; i < m * lda; ++i)                                                   \
                A[i] = (T)(4 * urand());                                                           \
            for (size_t i = 0; i < n * ldb; ++i)                                                   \
                B[i] = (T)(0.5 * urand());                                                         \
            for (size_t i = 0; i < m * ldc; ++i)                                                   \
                C[i] = (T)NAN; /* beta = 0: nothing of C is read */                                \
            cln_gemm_ordered_##SFX(isa, m, n, k, A, lda, B, ldb, C, ldc, Bt);                      \
            for (size_t i = 0; i < m; ++i) {                                                       \
                for (size_t j = 0; j < n; ++j) {                                                   \
                    T acc = 0;                                                                     \
                    for (size_t kk = 0; kk < k; ++kk)                                              \
                        acc = FMA(A[i * lda + kk], B[j * ldb + kk], acc);                          \
                    if (memcmp(&acc, &C[i * ldc + j], sizeof acc) != 0)                            \
                        fail_msg("%s %s m=%zu n=%zu k=%zu: C[%zu][%zu] = %.17g, sequential fma "   \
                                 "gives %.17g",                                                    \
                                 #SFX, cln_gemm_isa_name(isa), m, n, k, i, j,                      \
                                 (double)C[i * ldc + j], (double)acc);                             \
                }                                                                                  \
                /* the padding between rows is untouched */                                        \
                for (size_t j = n; j < ldc && i + 1 < m; ++j)                                      \
                    assert_true(isnan(C[i * ldc + j]));                                            \
            }                                                                                      \
            /* a row alone gives the same bits as inside the batch */                              \
            if (m > 1) {                                                                           \
                const size_t r = m / 2;                                                            \
                cln_gemm_ordered_##SFX(isa, 1, n, k, A + r * lda, lda, B, ldb, one, ldc, Bt);      \
                assert_memory_equal(one, C + r * ldc, n * sizeof(T));                              \
            }                                                                                      \
            free(A);                                                                               \
            free(B);                                                                               \
            free(C);                                                                               \
            free(Bt);                                                                              \
            free(one);                                                                             \
        }                                                                                          \
    }
CHECK_SHAPES(float, f32, fmaf)
CHECK_SHAPES(double, f64, fma)

/* The row kernels on packed B against the sequential fma sum and against the GEMM's tiles, for 1
 * to 7 rows (groups of 1, 2 and 3 rows and their mixes), every width from 1 to past one pass of
 * CLN_GEMV_MAX_VECS AVX-512 vectors (several passes of AVX2's), and k = 0, 1, 10, 100. The
 * columns between n and ldc keep their NaN. */
#define CHECK_GEMV(T, SFX, FMA)                                                                    \
    static void check_gemv_##SFX(cln_gemm_isa isa)                                                 \
    {                                                                                              \
        const size_t ks[] = {0, 1, 10, 100};                                                       \
        const size_t m = 7, nmax = CLN_GEMV_MAX_VECS * 16 + 9, kmax = 100;                         \
        const size_t lda = kmax + 1, ldc = nmax + 5, ldw = cln_gemm_packed_ld(nmax, sizeof(T));    \
        T *A = calloc(m * lda, sizeof(T)), *B = calloc(nmax * kmax, sizeof(T));                    \
        T *Wt = calloc(kmax * ldw, sizeof(T)), *C = calloc(m * ldc, sizeof(T));                    \
        T *G = calloc(m * ldc, sizeof(T));                                                         \
        assert_true(A &&B &&Wt &&C &&G);                                                           \
        for (size_t i = 0; i < m * lda; ++i)                                                       \
            A[i] = (T)(4 * urand());                                                               \
        for (size_t i = 0; i < nmax * kmax; ++i)                                                   \
            B[i] = (T)(0.5 * urand());                                                             \
        for (size_t q = 0; q < sizeof ks / sizeof ks[0] * m; ++q)                                  \
            for (size_t n = 1; n <= nmax; ++n) {                                                   \
                /* 1 to 7 rows: the row groups of 1, 2 and 3 and their mixes */                    \
                const size_t k = ks[q % 4], rows = 1 + q / 4,                                      \
                             ldwn = cln_gemm_packed_ld(n, sizeof(T));                              \
                cln_gemm_pack_##SFX(n, k, B, kmax, Wt, ldwn);                                      \
                for (size_t i = 0; i < m * ldc; ++i)                                               \
                    C[i] = G[i] = (T)NAN;                                                          \
                cln_gemv_packed_##SFX(isa, rows, n, k, A, lda, Wt, ldwn, C, ldc);                  \
                cln_gemm_packed_##SFX(CLN_GEMM_PORTABLE, rows, n, k, A, lda, Wt, ldwn, G, ldc);    \
                for (size_t i = 0; i < rows; ++i) {                                                \
                    for (size_t j = 0; j < n; ++j) {                                               \
                        T acc = 0;                                                                 \
                        for (size_t kk = 0; kk < k; ++kk)                                          \
                            acc = FMA(A[i * lda + kk], B[j * kmax + kk], acc);                     \
                        if (memcmp(&acc, &C[i * ldc + j], sizeof acc) != 0)                        \
                            fail_msg("gemv %s %s m=%zu n=%zu k=%zu: C[%zu][%zu] = %.17g, "         \
                                     "sequential fma gives %.17g",                                 \
                                     #SFX, cln_gemm_isa_name(isa), rows, n, k, i, j,               \
                                     (double)C[i * ldc + j], (double)acc);                         \
                    }                                                                              \
                    for (size_t j = n; j < ldc; ++j)                                               \
                        if (!isnan(C[i * ldc + j]))                                                \
                            fail_msg("gemv %s %s n=%zu k=%zu: wrote C[%zu][%zu] past the row",     \
                                     #SFX, cln_gemm_isa_name(isa), n, k, i, j);                    \
                }                                                                                  \
                assert_memory_equal(C, G, m *ldc * sizeof(T));                                     \
            }                                                                                      \
        free(A);                                                                                   \
        free(B);                                                                                   \
        free(Wt);                                                                                  \
        free(C);                                                                                   \
        free(G);                                                                                   \
    }
CHECK_GEMV(float, f32, fmaf)
CHECK_GEMV(double, f64, fma)

/* The row kernels' panels: for widths from 1 to several panels, the panels cover the columns
 * in order, each a whole number of vectors (ld) holding its nc columns, the first columns of
 * their layer; a product on each panel (in either order) gives, for 1 to 3 rows, the sequential
 * fma sums, and writes nothing past the row. */
#define CHECK_PANELS(T, SFX, FMA)                                                                  \
    static void check_panels_##SFX(cln_gemm_isa isa)                                               \
    {                                                                                              \
        const size_t nmax = 3 * CLN_GEMV_MAX_VECS * 16 + 5, k = 37, m = 3, lda = k + 2;            \
        const size_t ldc = nmax + 3;                                                               \
        T *A = calloc(m * lda, sizeof(T)), *B = calloc(nmax * k, sizeof(T));                       \
        T *P = calloc(k * (nmax + 64), sizeof(T)), *C = calloc(m * ldc, sizeof(T));                \
        T *Wt = calloc(k * cln_gemm_packed_ld(nmax, sizeof(T)), sizeof(T));                        \
        assert_true(A &&B &&P &&C &&Wt);                                                           \
        for (size_t i = 0; i < m * lda; ++i)                                                       \
            A[i] = (T)(4 * urand());                                                               \
        for (size_t i = 0; i < nmax * k; ++i)                                                      \
            B[i] = (T)(0.5 * urand());                                                             \
        for (size_t n = 1; n <= nmax; n += n < 40 ? 1 : 7) {                                       \
            const size_t np = cln_gemv_panel_count(isa, sizeof(T), n);                             \
            assert_true(np >= 1 && np <= n);                                                       \
            assert_true(cln_gemv_panels_elems(isa, sizeof(T), n, k) <= k * (nmax + 64));           \
            /* n - 2 real columns, the last two zero (a hidden layer's padding) */                 \
            const size_t nr = n > 2 ? n - 2 : n, ldw = cln_gemm_packed_ld(n, sizeof(T));           \
            cln_gemm_pack_##SFX(nr, k, B, k, Wt, ldw);                                             \
            cln_gemv_pack_panels_##SFX(isa, n, k, Wt, ldw, P);                                     \
            for (size_t rows = 1; rows <= m; ++rows) {                                             \
                for (size_t i = 0; i < m * ldc; ++i)                                               \
                    C[i] = (T)NAN;                                                                 \
                size_t next = 0;                                                                   \
                for (size_t q = 0; q < np; ++q) {                                                  \
                    const cln_gemv_panel pn = cln_gemv_panel_at(isa, sizeof(T), n, q);             \
                    assert_int_equal(pn.j0, next);                                                 \
                    assert_true(pn.nc >= 1 && pn.nc <= pn.ld && pn.ld <= CLN_GEMV_MAX_VECS * 16);  \
                    next = pn.j0 + pn.nc;                                                          \
                    /* the panels in reverse order when rows is even */                            \
                    const cln_gemv_panel pr =                                                      \
                        cln_gemv_panel_at(isa, sizeof(T), n, rows % 2 ? q : np - 1 - q);           \
                    cln_gemv_packed_##SFX(isa, rows, pr.nc, k, A, lda, P + k * pr.j0, pr.ld,       \
                                          C + pr.j0, ldc);                                         \
                }                                                                                  \
                assert_int_equal(next, n);                                                         \
                for (size_t i = 0; i < rows; ++i) {                                                \
                    for (size_t j = 0; j < n; ++j) {                                               \
                        T acc = 0;                                                                 \
                        for (size_t kk = 0; kk < k && j < nr; ++kk)                                \
                            acc = FMA(A[i * lda + kk], B[j * k + kk], acc);                        \
                        if (memcmp(&acc, &C[i * ldc + j], sizeof acc) != 0)                        \
                            fail_msg("panels %s %s rows=%zu n=%zu: C[%zu][%zu] = %.17g, "          \
                                     "sequential fma gives %.17g",                                 \
                                     #SFX, cln_gemm_isa_name(isa), rows, n, i, j,                  \
                                     (double)C[i * ldc + j], (double)acc);                         \
                    }                                                                              \
                    for (size_t j = n; j < ldc; ++j)                                               \
                        assert_true(isnan(C[i * ldc + j]));                                        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        free(A);                                                                                   \
        free(B);                                                                                   \
        free(P);                                                                                   \
        free(C);                                                                                   \
        free(Wt);                                                                                  \
    }
CHECK_PANELS(float, f32, fmaf)
CHECK_PANELS(double, f64, fma)

/* Bias + activation on 1 to 13 rows and 24 (groups of 6 and 2 and a last odd row), widths with
 * every tail of a vector and past the 128-column chunks of a missing bias, with and without a
 * bias, for every activation code: the same bits as cln_host_bias_act, and the columns between n
 * and ldc untouched; and each block again stored without gaps (ldc == n: narrow ones are taken as
 * rows of 64 values, the bias repeated). The inputs mix random values over the activations' whole
 * range with +-0, +-inf, NaN, subnormals and huge values. */
#define CHECK_ACT(T, SFX, TINY, HUGE)                                                              \
    static void check_act_##SFX(cln_gemm_isa isa)                                                  \
    {                                                                                              \
        const size_t widths[] = {1, 3, 7, 8, 13, 16, 33, 100, 104, 200};                           \
        const size_t nmax = 200, ldc = nmax + 3, rmax = 24;                                        \
        const T special[] = {(T)0.0,  (T)-0.0, (T)INFINITY, (T)-INFINITY, (T)NAN,                  \
                             TINY,    -TINY,   HUGE,        -HUGE,        (T)0.5,                  \
                             (T)-0.5, (T)1e-3, (T)-90.0,    (T)-750.0};                            \
        T *X = calloc(rmax * ldc, sizeof(T)), *C = calloc(rmax * ldc, sizeof(T));                  \
        T *R = calloc(rmax * ldc, sizeof(T)), *bias = calloc(nmax, sizeof(T));                     \
        assert_true(X &&C &&R &&bias);                                                             \
        for (size_t i = 0; i < rmax * ldc; ++i)                                                    \
            X[i] = i % 7 == 3 ? special[(i / 7) % (sizeof special / sizeof special[0])]            \
                              : (T)(60 * urand());                                                 \
        for (size_t j = 0; j < nmax; ++j)                                                          \
            bias[j] = (T)(2 * urand());                                                            \
        for (int act = 0; act <= 6; ++act)                                                         \
            for (size_t rows = 1; rows <= rmax;                                                    \
                 rows = rows < 13 ? rows + 1 : rmax + (rows == rmax))                              \
                for (size_t w = 0; w < sizeof widths / sizeof widths[0]; ++w)                      \
                    for (int with_bias = 0; with_bias < 4; ++with_bias) {                          \
                        const size_t n = widths[w], ld = with_bias > 1 ? n : ldc;                  \
                        const T *b = with_bias % 2 ? bias : NULL;                                  \
                        for (size_t i = 0; i < rmax * ldc; ++i)                                    \
                            C[i] = R[i] = (i % ld) < n ? X[i] : (T)NAN;                            \
                        cln_act_rows_##SFX(isa, C, ld, rows, n, b, act);                           \
                        cln_host_bias_act_##SFX(CLN_GEMM_PORTABLE, R, ld, rows, n, b, act);        \
                        for (size_t i = 0; i < rmax * ldc; ++i)                                    \
                            if (memcmp(&C[i], &R[i], sizeof(T)) != 0)                              \
                                fail_msg("act_rows %s %s act %d rows=%zu n=%zu ld=%zu bias %d: "   \
                                         "C[%zu][%zu] = %.17g of %.17g, the one-row pass %.17g",   \
                                         #SFX, cln_gemm_isa_name(isa), act, rows, n, ld,           \
                                         with_bias % 2, i / ld, i % ld, (double)C[i],              \
                                         (double)X[i], (double)R[i]);                              \
                    }                                                                              \
        free(X);                                                                                   \
        free(C);                                                                                   \
        free(R);                                                                                   \
        free(bias);                                                                                \
    }
CHECK_ACT(float, f32, 1e-40f, 1e30f)
CHECK_ACT(double, f64, 1e-310, 1e300)

/* The product on A as its transpose (cln_gemm_tn, the reverse pass's weight sums) for row counts
 * of every tile mix (6, 4, 2, 1), widths with every tail of a strip (one vector or two), k = 0, 1
 * and 37 taken in one call, in three ranges continued from C, or added to C (CLN_GEMM_TN_ADD:
 * C's values plus the sums, one addition each): the sequential fma sums from 0; the padding of
 * B's rows (NaN, read but not used) and C's columns past n (NaN) change and receive nothing. */
#define TN_BASE(T, e) ((T)((double)((e) % 61) * 0.375 - 7.0))
#define CHECK_TN(T, SFX, FMA)                                                                      \
    static void check_tn_##SFX(cln_gemm_isa isa)                                                   \
    {                                                                                              \
        const size_t ms[] = {1, 2, 3, 5, 6, 7, 11, 13, 64},                                        \
                     ns[] = {1, 2, 9, 16, 17, 32, 33, 64, 100};                                    \
        const size_t ks[] = {0, 1, 37}, mmax = 64, nmax = 100, kmax = 37, lda = mmax + 3;          \
        const size_t ldb = cln_gemm_packed_ld(nmax, sizeof(T)), ldc = nmax + 5;                    \
        T *A = calloc(kmax * lda, sizeof(T)), *B = calloc(kmax * ldb, sizeof(T));                  \
        T *C = calloc(mmax * ldc, sizeof(T));                                                      \
        assert_true(A &&B &&C);                                                                    \
        for (size_t i = 0; i < kmax * lda; ++i)                                                    \
            A[i] = (T)(4 * urand());                                                               \
        for (size_t q = 0; q < sizeof ms / sizeof ms[0] * 9 * 3 * 3; ++q) {                        \
            const size_t m = ms[q / 81], n = ns[q / 9 % 9], k = ks[q / 3 % 3], split = q % 3;      \
            const size_t ldbn = cln_gemm_packed_ld(n, sizeof(T));                                  \
            for (size_t kk = 0; kk < kmax; ++kk)                                                   \
                for (size_t j = 0; j < ldbn; ++j)                                                  \
                    B[kk * ldbn + j] = j < n ? (T)(0.5 * urand()) : (T)NAN;                        \
            for (size_t i = 0; i < mmax * ldc; ++i)                                                \
                C[i] = i % ldc < n && split == 2 ? TN_BASE(T, i) : (T)NAN;                         \
            if (split == 2) {                                                                      \
                cln_gemm_tn_##SFX(isa, m, n, k, A, lda, B, ldbn, C, ldc, CLN_GEMM_TN_ADD);         \
            } else if (split && k > 2) {                                                           \
                const size_t k1 = k / 3, k2 = 2 * k / 3;                                           \
                cln_gemm_tn_##SFX(isa, m, n, k1, A, lda, B, ldbn, C, ldc, 0);                      \
                cln_gemm_tn_##SFX(isa, m, n, k2 - k1, A + k1 * lda, lda, B + k1 * ldbn, ldbn, C,   \
                                  ldc, 1);                                                         \
                cln_gemm_tn_##SFX(isa, m, n, k - k2, A + k2 * lda, lda, B + k2 * ldbn, ldbn, C,    \
                                  ldc, 1);                                                         \
            } else {                                                                               \
                cln_gemm_tn_##SFX(isa, m, n, k, A, lda, B, ldbn, C, ldc, 0);                       \
            }                                                                                      \
            for (size_t i = 0; i < m; ++i)                                                         \
                for (size_t j = 0; j < ldc; ++j) {                                                 \
                    T acc = 0;                                                                     \
                    for (size_t kk = 0; kk < k; ++kk)                                              \
                        acc = FMA(A[kk * lda + i], B[kk * ldbn + j], acc);                         \
                    if (split == 2)                                                                \
                        acc = TN_BASE(T, i * ldc + j) + acc;                                       \
                    if (j >= n ? !isnan(C[i * ldc + j])                                            \
                               : memcmp(&acc, &C[i * ldc + j], sizeof acc) != 0)                   \
                        fail_msg("tn %s %s m=%zu n=%zu k=%zu split %zu: C[%zu][%zu] = %.17g, "     \
                                 "sequential fma gives %.17g",                                     \
                                 #SFX, cln_gemm_isa_name(isa), m, n, k, split, i, j,               \
                                 (double)C[i * ldc + j], (double)acc);                             \
                }                                                                                  \
        }                                                                                          \
        free(A);                                                                                   \
        free(B);                                                                                   \
        free(C);                                                                                   \
    }
CHECK_TN(float, f32, fmaf)
CHECK_TN(double, f64, fma)

/* The same bits, or both NaN (whose sign the order of an operation's operands may set). */
static int same_f32(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static int same_f64(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* The reverse pass's activation with its derivative (cln_act_grad_rows) on 1 to 13 rows and 24,
 * every width of CHECK_ACT (the narrow ones as one row of values), with and without a bias, for
 * every activation code: O = act(x) and P = act'(x, O) (x = P + bias, or + 0) with the bits of
 * cl/cln_activation.h's functions one value at a time (act_*, act_grad_*: baseline builds), a NaN
 * where they give a NaN. */
#define CHECK_ACT_GRAD(T, SFX, TINY, HUGE)                                                         \
    static void check_act_grad_##SFX(cln_gemm_isa isa)                                             \
    {                                                                                              \
        const size_t widths[] = {1, 2, 3, 7, 8, 13, 16, 33, 100, 200}, nmax = 200, rmax = 24;      \
        const T special[] = {                                                                      \
            (T)0.0, (T)-0.0, (T)INFINITY, (T)-INFINITY, (T)NAN,   TINY,     -TINY,                 \
            HUGE,   -HUGE,   (T)0.5,      (T)-0.5,      (T)-90.0, (T)-750.0};                      \
        T *X = calloc(rmax * nmax, sizeof(T)), *P = calloc(rmax * nmax, sizeof(T));                \
        T *O = calloc(rmax * nmax, sizeof(T)), *bias = calloc(nmax, sizeof(T));                    \
        assert_true(X &&P &&O &&bias);                                                             \
        for (size_t i = 0; i < rmax * nmax; ++i)                                                   \
            X[i] = i % 7 == 3 ? special[(i / 7) % (sizeof special / sizeof special[0])]            \
                              : (T)(60 * urand());                                                 \
        for (size_t j = 0; j < nmax; ++j)                                                          \
            bias[j] = j % 5 == 1 ? (T)-0.0 : (T)(2 * urand());                                     \
        for (int act = 0; act <= 6; ++act)                                                         \
            for (size_t rows = 1; rows <= rmax; rows = rows < 13 ? rows + 1 : rmax + 1)            \
                for (size_t w = 0; w < sizeof widths / sizeof widths[0]; ++w)                      \
                    for (int with_bias = 0; with_bias < 2; ++with_bias) {                          \
                        const size_t n = widths[w];                                                \
                        const T *b = with_bias ? bias : NULL;                                      \
                        memcpy(P, X, sizeof(T) * rows * n);                                        \
                        cln_act_grad_rows_##SFX(isa, P, O, rows, n, b, act);                       \
                        for (size_t i = 0; i < rows * n; ++i) {                                    \
                            const T x = X[i] + (b ? b[i % n] : (T)0.0);                            \
                            const T y = act_##SFX(act, x), d = act_grad_##SFX(act, x, y);          \
                            if (!same_##SFX(O[i], y) || !same_##SFX(P[i], d))                      \
                                fail_msg("act_grad_rows %s %s act %d rows=%zu n=%zu bias %d: "     \
                                         "[%zu][%zu] of %.17g: %.17g, %.17g; one at a time "       \
                                         "%.17g, %.17g",                                           \
                                         #SFX, cln_gemm_isa_name(isa), act, rows, n, with_bias,    \
                                         i / n, i % n, (double)x, (double)O[i], (double)P[i],      \
                                         (double)y, (double)d);                                    \
                        }                                                                          \
                    }                                                                              \
        free(X);                                                                                   \
        free(P);                                                                                   \
        free(O);                                                                                   \
        free(bias);                                                                                \
    }
CHECK_ACT_GRAD(float, f32, 1e-40f, 1e30f)
CHECK_ACT_GRAD(double, f64, 1e-310, 1e300)

static void test_kernels(void **state)
{
    (void)state;
    const cln_gemm_isa all[] = {CLN_GEMM_PORTABLE, CLN_GEMM_AVX2, CLN_GEMM_AVX512};
    for (size_t i = 0; i < 3; ++i) {
        if (!isa_available(all[i])) {
            print_message("  %s: not on this CPU\n", cln_gemm_isa_name(all[i]));
            continue;
        }
        check_f32(all[i]);
        check_f64(all[i]);
        check_gemv_f32(all[i]);
        check_gemv_f64(all[i]);
        check_panels_f32(all[i]);
        check_panels_f64(all[i]);
        check_act_f32(all[i]);
        check_act_f64(all[i]);
        check_tn_f32(all[i]);
        check_tn_f64(all[i]);
        check_act_grad_f32(all[i]);
        check_act_grad_f64(all[i]);
        print_message("  %s: GEMM, row kernels and their panels and the product on A transposed "
                      "bit-identical to sequential fma, bias + activation on row groups to the "
                      "one-row pass, with the derivative to one value at a time\n",
                      cln_gemm_isa_name(all[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kernels)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
