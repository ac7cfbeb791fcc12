/* lib/precision/: what a device's arithmetic really computes: GEMM probes, device facts and the
 * precision guard's measurements. */
/* probe.c - GEMM precision probes: what a device's matrix products really compute, measured
 * through the backend's own gemm op (the same path, precision and GEMM mode a solve uses), and
 * the device's floating-point facts.
 *
 * The probes and the decision rule follow shared/reference/precision-and-blas.md §3.2:
 *   identity  A . I == A and I . B == B^T bit for bit under IEEE arithmetic in any summation
 *             order (each sum has one non-zero term, every product is exact). The operands use
 *             every mantissa bit (their low 13 bits, resp. 29 in fp64, are random and non-zero:
 *             all-ones low bits would make RNE-TF32 look like 23 bits), so a GEMM that rounds its
 *             inputs shows it; identity_bits = -log2(max |C - A| / |A|).
 *   outer     k = 1, 256 x 256: every entry must be the correctly rounded product RN(a_i b_j);
 *             catches multi-term emulations (bf16x3, 3xTF32, bf16x6/x9) that pass the identity.
 *   random    effective bits -log2(max_ij |C - C_exact|_ij / (|A| |B|)_ij) on random data of the
 *             seed MLP's shapes (64 rows; 10 -> 100, 100 -> 100, 100 -> 10), the minimum over
 *             the three; C_exact is a double-double sum of error-free products (Dekker/Knuth
 *             TwoProd and TwoSum), far more accurate than either precision.
 *   range     products and operands past 65504 (fp16's largest finite) must stay finite: tells a
 *             TF32-like GEMM (fp32 range) from an fp16 one.
 *   subnormal a subnormal product and a subnormal operand times 1 must come out exactly (not
 *             flushed to zero).
 * The measurement runs on an injectable GEMM callback (cln_probe_measure), so the tests can feed
 * it emulated bf16, bf16x3, TF32, 3xTF32 and fp16 GEMMs; clnode_probe_gemm runs it on the
 * context's backend and caches the result per (precision, mode) in the context, and across
 * processes in a file per device and library build (backends/probe_cache.c). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/fpenv.h"
#include "precision/probe_internal.h"

/* Shapes of the probes. */
#define PR_ID_M 64 /* identity: A (64 x 100) . I (100 x 100); I (64 x 64) . B^T (B 100 x 64) */
#define PR_ID_K 100
#define PR_OUTER 256 /* outer product 256 x 256 x 1 */
#define PR_RAND_M 64 /* the seed MLP's layers at 64 rows */
#define PR_KMAX 100  /* the largest k of the random probe (its fp32/fp64 bound uses it) */
#define PR_ELEMS (PR_OUTER * PR_OUTER) /* the largest operand or result */

static const size_t pr_rand_shapes[3][2] = {{10, 100}, {100, 100}, {100, 10}}; /* (k, n) */

const char *clnode_gemm_class_name(clnode_gemm_class c)
{
    switch (c) {
    case CLNODE_GEMM_CLASS_UNKNOWN:
        return "unknown";
    case CLNODE_GEMM_CLASS_FP64:
        return "fp64";
    case CLNODE_GEMM_CLASS_FP32:
        return "fp32";
    case CLNODE_GEMM_CLASS_TF32X3:
        return "3xtf32-like";
    case CLNODE_GEMM_CLASS_BF16X3:
        return "bf16x3-like";
    case CLNODE_GEMM_CLASS_TF32:
        return "tf32-like";
    case CLNODE_GEMM_CLASS_FP16:
        return "fp16-like";
    case CLNODE_GEMM_CLASS_BF16:
        return "bf16-like";
    }
    return "unknown";
}

/* ---- deterministic data ---- */

static uint64_t pr_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A value that needs every mantissa bit of the precision: fp32 +-[0.5, 2) with the low 13 of its
 * 23 mantissa bits random and non-zero; fp64 with the low 29 of 52 non-zero and an exponent
 * spread of 2^+-20 (a fixed-point emulation sharing one scale per row would show it). */
static double pr_full(uint64_t *s, int fp64)
{
    const uint64_t r = pr_next(s);
    const int neg = (int)(r >> 63);
    double v;
    if (fp64) {
        uint64_t mant = r & ((1ull << 52) - 1);
        while ((mant & ((1ull << 29) - 1)) == 0)
            mant = pr_next(s) & ((1ull << 52) - 1);
        const int e = (int)((r >> 52) % 41) - 20;
        v = ldexp(1.0 + ldexp((double)mant, -52), e);
    } else {
        uint32_t mant = (uint32_t)(r & ((1u << 23) - 1));
        while ((mant & ((1u << 13) - 1)) == 0)
            mant = (uint32_t)(pr_next(s) & ((1u << 23) - 1));
        const int e = (int)((r >> 23) & 1) - 1;
        v = ldexp(1.0 + ldexp((double)mant, -23), e);
    }
    return neg ? -v : v;
}

/* Random data of the MLP probe: full-mantissa values of magnitude in [1/16, 2). */
static double pr_data(uint64_t *s, int fp64)
{
    const uint64_t r = pr_next(s);
    const int p = fp64 ? 52 : 23;
    const double m = 1.0 + ldexp((double)(r & ((1ull << p) - 1)), -p);
    const double v = ldexp(m, (int)((r >> 56) % 5) - 4);
    return (r >> 63) ? -v : v;
}

/* ---- element access in the probe's precision ---- */

static double pr_get(const void *a, int fp64, size_t i)
{
    return fp64 ? ((const double *)a)[i] : (double)((const float *)a)[i];
}

static void pr_set(void *a, int fp64, size_t i, double v)
{
    if (fp64)
        ((double *)a)[i] = v;
    else
        ((float *)a)[i] = (float)v;
}

/* -log2 of a relative error, clamped to [0, bits]; 0 for NaN. */
static double pr_bits(double rel, int bits)
{
    if (!(rel == rel) || rel >= 1.0)
        return 0.0;
    if (rel <= 0.0)
        return bits;
    const double b = -log2(rel);
    return b > bits ? bits : b;
}

/* The larger of two relative errors, NaN counting as +inf. */
static double pr_worse(double worst, double rel)
{
    if (!(rel == rel))
        rel = INFINITY;
    return rel > worst ? rel : worst;
}

/* Double-double accumulator of exact products: s += a b. */
typedef struct pr_dd {
    double hi, lo;
} pr_dd;

static void pr_dd_add_prod(pr_dd *s, double a, double b)
{
    const double p = a * b;
    const double pe = fma(a, b, -p); /* exact: a b = p + pe */
    const double t = s->hi + p;
    const double bb = t - s->hi;
    const double e = (s->hi - (t - bb)) + (p - bb); /* exact: s->hi + p = t + e */
    s->hi = t;
    s->lo += e + pe;
}

/* ---- the measurement ---- */

typedef struct pr_work {
    void *A, *B, *C;
    int fp64;
    int bits; /* 24 or 53 */
} pr_work;

static clnode_status pr_identity(pr_work *w, cln_probe_gemm_fn gemm, void *user,
                                 clnode_precision prec, uint64_t *seed, clnode_probe_result *r)
{
    const int fp64 = w->fp64;
    long mismatches = 0;
    double worst = 0.0;
    /* A (m x k) . I (k x k)^T = A */
    const size_t m = PR_ID_M, k = PR_ID_K;
    for (size_t i = 0; i < m * k; ++i)
        pr_set(w->A, fp64, i, pr_full(seed, fp64));
    for (size_t i = 0; i < k * k; ++i)
        pr_set(w->B, fp64, i, i / k == i % k ? 1.0 : 0.0);
    clnode_status st = gemm(user, prec, m, k, k, w->A, w->B, w->C);
    if (st != CLNODE_OK)
        return st;
    for (size_t i = 0; i < m * k; ++i) {
        const double want = pr_get(w->A, fp64, i), got = pr_get(w->C, fp64, i);
        if (!(got == want)) {
            ++mismatches;
            const double rel = fabs(got - want) / fabs(want);
            worst = pr_worse(worst, rel);
        }
    }
    /* I (m x m) . B^T with B (n x m): C = B^T */
    const size_t n = PR_ID_K;
    for (size_t i = 0; i < m * m; ++i)
        pr_set(w->A, fp64, i, i / m == i % m ? 1.0 : 0.0);
    for (size_t i = 0; i < n * m; ++i)
        pr_set(w->B, fp64, i, pr_full(seed, fp64));
    st = gemm(user, prec, m, n, m, w->A, w->B, w->C);
    if (st != CLNODE_OK)
        return st;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            const double want = pr_get(w->B, fp64, j * m + i), got = pr_get(w->C, fp64, i * n + j);
            if (!(got == want)) {
                ++mismatches;
                const double rel = fabs(got - want) / fabs(want);
                worst = pr_worse(worst, rel);
            }
        }
    r->identity_mismatches = mismatches;
    r->identity_exact = mismatches == 0;
    r->identity_bits = pr_bits(worst, w->bits);
    return CLNODE_OK;
}

static clnode_status pr_outer(pr_work *w, cln_probe_gemm_fn gemm, void *user, clnode_precision prec,
                              uint64_t *seed, clnode_probe_result *r)
{
    const int fp64 = w->fp64;
    const size_t m = PR_OUTER, n = PR_OUTER;
    for (size_t i = 0; i < m; ++i)
        pr_set(w->A, fp64, i, pr_full(seed, fp64));
    for (size_t j = 0; j < n; ++j)
        pr_set(w->B, fp64, j, pr_full(seed, fp64));
    clnode_status st = gemm(user, prec, m, n, 1, w->A, w->B, w->C);
    if (st != CLNODE_OK)
        return st;
    long mismatches = 0;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            /* the host's own multiply is the correctly rounded reference: a float product is
             * exact in double and rounded once to float; a double product is rounded once */
            const double a = pr_get(w->A, fp64, i), b = pr_get(w->B, fp64, j);
            const double want = fp64 ? a * b : (double)(float)(a * b);
            mismatches += !(pr_get(w->C, fp64, i * n + j) == want);
        }
    r->outer_mismatches = mismatches;
    r->outer_exact = mismatches == 0;
    return CLNODE_OK;
}

static clnode_status pr_random(pr_work *w, cln_probe_gemm_fn gemm, void *user,
                               clnode_precision prec, uint64_t *seed, clnode_probe_result *r)
{
    const int fp64 = w->fp64;
    double bits = w->bits;
    for (size_t s = 0; s < 3; ++s) {
        const size_t m = PR_RAND_M, k = pr_rand_shapes[s][0], n = pr_rand_shapes[s][1];
        for (size_t i = 0; i < m * k; ++i)
            pr_set(w->A, fp64, i, pr_data(seed, fp64));
        for (size_t i = 0; i < n * k; ++i)
            pr_set(w->B, fp64, i, pr_data(seed, fp64));
        clnode_status st = gemm(user, prec, m, n, k, w->A, w->B, w->C);
        if (st != CLNODE_OK)
            return st;
        double worst = 0.0;
        for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < n; ++j) {
                pr_dd acc = {0.0, 0.0};
                double scale = 0.0;
                for (size_t kk = 0; kk < k; ++kk) {
                    const double a = pr_get(w->A, fp64, i * k + kk);
                    const double b = pr_get(w->B, fp64, j * k + kk);
                    pr_dd_add_prod(&acc, a, b);
                    scale += fabs(a) * fabs(b);
                }
                const double got = pr_get(w->C, fp64, i * n + j);
                const double rel = fabs((got - acc.hi) - acc.lo) / scale;
                worst = pr_worse(worst, rel);
            }
        const double b = pr_bits(worst, w->bits);
        bits = b < bits ? b : bits;
    }
    r->random_bits = bits;
    return CLNODE_OK;
}

static clnode_status pr_range_and_subnormals(pr_work *w, cln_probe_gemm_fn gemm, void *user,
                                             clnode_precision prec, clnode_probe_result *r)
{
    const int fp64 = w->fp64;
    /* range: A = (300, 1)^T, B = (300, 1e5)^T: 9e4, 3e7, 300, 1e5 (all exact in fp32) */
    pr_set(w->A, fp64, 0, 300.0);
    pr_set(w->A, fp64, 1, 1.0);
    pr_set(w->B, fp64, 0, 300.0);
    pr_set(w->B, fp64, 1, 1e5);
    clnode_status st = gemm(user, prec, 2, 2, 1, w->A, w->B, w->C);
    if (st != CLNODE_OK)
        return st;
    const double want[4] = {9e4, 3e7, 300.0, 1e5};
    int ok = 1;
    for (int i = 0; i < 4; ++i) {
        const double got = pr_get(w->C, fp64, (size_t)i);
        ok &= isfinite(got) && fabs(got - want[i]) <= ldexp(fabs(want[i]), -6);
    }
    r->range_ok = ok;
    /* subnormals: A = (2^-e1, 2^-e2)^T, B = (2^-e1, 1)^T: C[0][0] = 2^-2e1 is a subnormal
     * product, C[1][1] = 2^-e2 a subnormal operand times 1 (C[1][0] underflows and is not
     * checked) */
    const int e1 = fp64 ? 520 : 70, e2 = fp64 ? 1030 : 130;
    pr_set(w->A, fp64, 0, ldexp(1.0, -e1));
    pr_set(w->A, fp64, 1, ldexp(1.0, -e2));
    pr_set(w->B, fp64, 0, ldexp(1.0, -e1));
    pr_set(w->B, fp64, 1, 1.0);
    st = gemm(user, prec, 2, 2, 1, w->A, w->B, w->C);
    if (st != CLNODE_OK)
        return st;
    r->denormals =
        pr_get(w->C, fp64, 0) == ldexp(1.0, -2 * e1) && pr_get(w->C, fp64, 3) == ldexp(1.0, -e2);
    return CLNODE_OK;
}

void cln_probe_classify(clnode_probe_result *r)
{
    const int fp64 = r->precision == CLNODE_FP64;
    const int p = fp64 ? 53 : 24;
    /* any order of summation of k terms stays within gamma_k = k u / (1 - k u): at least
     * p - log2(k) bits; one bit of slack */
    const double full = p - log2((double)PR_KMAX) - 1.0;
    const double b = r->identity_bits;
    clnode_gemm_class c = CLNODE_GEMM_CLASS_UNKNOWN;
    double u_bits = 0.0;
    if (r->identity_exact && r->outer_exact && r->random_bits >= full) {
        c = fp64 ? CLNODE_GEMM_CLASS_FP64 : CLNODE_GEMM_CLASS_FP32;
        u_bits = p;
    } else if (r->identity_exact && r->random_bits >= full) {
        /* only the outer test fails: a multi-term emulation of about full accuracy (bf16x6,
         * bf16x9, ...) whose products are not correctly rounded */
        c = fp64 ? CLNODE_GEMM_CLASS_UNKNOWN : CLNODE_GEMM_CLASS_TF32X3;
        u_bits = p - 1;
    } else if (r->identity_exact) {
        /* inputs kept, accumulation short of the bound (e.g. a low-precision accumulator) */
        u_bits = r->random_bits;
    } else if (fp64) {
        u_bits = b;
    } else if (b >= 21.0) {
        c = CLNODE_GEMM_CLASS_TF32X3; /* about 23 bits with 1-ulp mismatches */
        u_bits = 23;
    } else if (b >= 14.0) {
        c = CLNODE_GEMM_CLASS_BF16X3; /* about 17 */
        u_bits = 17;
    } else if (b >= 9.5) {
        /* 10 (truncated) to 11 (RNE) bits: TF32, unless the range check overflowed */
        c = r->range_ok ? CLNODE_GEMM_CLASS_TF32 : CLNODE_GEMM_CLASS_FP16;
        u_bits = 11;
    } else if (b >= 6.5) {
        c = CLNODE_GEMM_CLASS_BF16; /* about 8 */
        u_bits = 8;
    } else {
        u_bits = b;
    }
    r->gemm_class = c;
    r->unit_roundoff = ldexp(1.0, -(int)floor(u_bits));
}

clnode_status cln_probe_measure(clnode_context *ctx, cln_probe_gemm_fn gemm, void *user,
                                clnode_precision prec, clnode_probe_result *out)
{
    CLN_CHECK(ctx, gemm && out && (prec == CLNODE_FP32 || prec == CLNODE_FP64),
              CLNODE_ERR_INVALID_ARGUMENT, "cln_probe_measure: bad arguments");
    const clnode_gemm_mode mode = out->gemm_mode;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->precision = prec;
    out->gemm_mode = mode;
    pr_work w;
    w.fp64 = prec == CLNODE_FP64;
    w.bits = w.fp64 ? 53 : 24;
    const size_t es = w.fp64 ? sizeof(double) : sizeof(float);
    w.A = calloc(PR_ELEMS, es);
    w.B = calloc(PR_ELEMS, es);
    w.C = calloc(PR_ELEMS, es);
    clnode_status st = CLNODE_OK;
    if (!w.A || !w.B || !w.C) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the probe's operands");
        goto done;
    }
    uint64_t seed = 0x636C6E6F6465ull; /* "clnode": the same data on every device */
    CLN_TRY(st, pr_identity(&w, gemm, user, prec, &seed, out));
    CLN_TRY(st, pr_outer(&w, gemm, user, prec, &seed, out));
    CLN_TRY(st, pr_random(&w, gemm, user, prec, &seed, out));
    CLN_TRY(st, pr_range_and_subnormals(&w, gemm, user, prec, out));
    cln_probe_classify(out);
fail:
done:
    free(w.A);
    free(w.B);
    free(w.C);
    return st;
}

/* ---- through a backend ---- */

typedef struct pr_backend {
    cln_backend *be;
    clnode_gemm_mode mode;
    cln_buf *A, *B, *C;
    void *stage; /* host staging for the padded A */
} pr_backend;

static clnode_status pr_backend_gemm(void *user, clnode_precision prec, size_t m, size_t n,
                                     size_t k, const void *A, const void *B, void *C)
{
    pr_backend *pb = user;
    cln_backend *be = pb->be;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    /* the batch rows of a solve are padded to the backend's row alignment; so are these */
    const size_t align = be->row_align ? be->row_align : 1;
    const size_t mp = (m + align - 1) / align * align;
    CLN_CHECK(be->ctx, mp * k <= PR_ELEMS && mp * n <= PR_ELEMS && n * k <= PR_ELEMS,
              CLNODE_ERR_INTERNAL, "probe GEMM %zu x %zu x %zu exceeds its buffers", mp, n, k);
    memset(pb->stage, 0, mp * k * es);
    memcpy(pb->stage, A, m * k * es);
    clnode_status st = be->ops->buf_write(be, pb->A, 0, mp * k * es, pb->stage);
    if (st == CLNODE_OK)
        st = be->ops->buf_write(be, pb->B, 0, n * k * es, B);
    if (st == CLNODE_OK)
        st = be->ops->gemm(be, prec, pb->mode, mp, n, k, pb->A, 0, k, pb->B, 0, k, pb->C, 0, n);
    if (st == CLNODE_OK)
        st = be->ops->buf_read(be, pb->C, 0, m * n * es, C);
    return st;
}

static clnode_status pr_run_backend(clnode_context *ctx, clnode_precision prec,
                                    clnode_gemm_mode mode, clnode_probe_result *out)
{
    cln_backend *be = ctx->backend;
    const size_t bytes = PR_ELEMS * (prec == CLNODE_FP64 ? sizeof(double) : sizeof(float));
    pr_backend pb = {be, mode, NULL, NULL, NULL, NULL};
    clnode_status st = CLNODE_OK;
    pb.stage = malloc(bytes);
    if (!pb.stage) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the probe's staging");
        goto fail;
    }
    CLN_TRY(st, be->ops->buf_alloc(be, bytes, &pb.A));
    CLN_TRY(st, be->ops->buf_alloc(be, bytes, &pb.B));
    CLN_TRY(st, be->ops->buf_alloc(be, bytes, &pb.C));
    out->gemm_mode = mode;
    CLN_TRY(st, cln_probe_measure(ctx, pr_backend_gemm, &pb, prec, out));
fail:
    be->ops->buf_free(be, pb.A);
    be->ops->buf_free(be, pb.B);
    be->ops->buf_free(be, pb.C);
    free(pb.stage);
    return st;
}

/* Arguments of a probe of (prec, mode) on the context's device, as clnode_solve checks them. */
static clnode_status pr_check(clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode)
{
    return cln_check_device_precision(ctx, prec, mode, "compute");
}

clnode_status cln_probe_cached(clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                               const clnode_probe_result **out)
{
    clnode_status st = pr_check(ctx, prec, mode);
    if (st != CLNODE_OK)
        return st;
    const int pi = prec == CLNODE_FP64, mi = mode == CLNODE_GEMM_TF32;
    clnode_probe_result *r = &ctx->probe[pi][mi];
    if (!ctx->probe_done[pi][mi]) {
        int cached = ctx->probe_file_ok[pi][mi];
        if (cached)
            *r = ctx->probe_file[pi][mi];
        else
            cached = cln_probe_cache_load(ctx, prec, mode, r);
        if (!cached) {
            st = pr_run_backend(ctx, prec, mode, r);
            if (st != CLNODE_OK)
                return st;
            cln_probe_cache_store(ctx, prec, mode, r);
        }
        ctx->probe_done[pi][mi] = 1;
        cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
                "GEMM probe on %s, %s %s%s: identity %ld mismatches (%.1f bits), outer %ld "
                "mismatches, random %.1f bits, range %s, subnormals %s: %s, unit roundoff %.3g",
                ctx->backend->device_name, clnode_precision_name(prec), clnode_gemm_mode_name(mode),
                cached ? " (cached)" : "", r->identity_mismatches, r->identity_bits,
                r->outer_mismatches, r->random_bits, r->range_ok ? "ok" : "overflows",
                r->denormals ? "kept" : "flushed", clnode_gemm_class_name(r->gemm_class),
                r->unit_roundoff);
    }
    *out = r;
    return CLNODE_OK;
}

const clnode_probe_result *cln_probe_peek(const clnode_context *ctx, clnode_precision prec,
                                          clnode_gemm_mode mode)
{
    const int pi = prec == CLNODE_FP64, mi = mode == CLNODE_GEMM_TF32;
    return ctx->probe_done[pi][mi] ? &ctx->probe[pi][mi] : NULL;
}

clnode_status clnode_probe_gemm_sized(clnode_context *ctx, clnode_precision precision,
                                      clnode_gemm_mode mode, clnode_probe_result *out, size_t size)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, out, CLNODE_ERR_INVALID_ARGUMENT, "clnode_probe_gemm: NULL result");
    clnode_status st =
        cln_check_struct_size(ctx, "clnode_probe_result", size, CLN_PROBE_RESULT_MIN, sizeof *out);
    if (st != CLNODE_OK)
        return st;
    const clnode_probe_result *r = NULL;
    st = cln_probe_cached(ctx, precision, mode, &r);
    if (st != CLNODE_OK)
        return st;
    clnode_probe_result full = *r;
    cln_struct_fill(out, size, &full, sizeof full);
    return CLNODE_OK;
}

clnode_status clnode_device_facts_get_sized(clnode_context *ctx, clnode_device_facts *out,
                                            size_t size)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    if (!ctx)
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_clear_error(ctx);
    CLN_CHECK(ctx, out, CLNODE_ERR_INVALID_ARGUMENT, "clnode_device_facts_get: NULL result");
    const clnode_status st =
        cln_check_struct_size(ctx, "clnode_device_facts", size, CLN_DEVICE_FACTS_MIN, sizeof *out);
    if (st != CLNODE_OK)
        return st;
    clnode_device_facts f;
    f.struct_size = sizeof f;
    f.fp64 = f.fma = f.denormals = f.correctly_rounded_div_sqrt = -1;
    cln_backend *be = ctx->backend;
    if (be->ops->facts)
        be->ops->facts(be, &f);
    cln_struct_fill(out, size, &f, sizeof f);
    return CLNODE_OK;
}
