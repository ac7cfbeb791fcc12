/* clnode/probe.h - what a device's matrix products really compute, measured rather than trusted.
 *
 * Four probes run through the same GEMM path a solve uses (backend, precision, GEMM mode):
 *   identity  A . I and I . B must return A and B bit-exactly under IEEE arithmetic, whatever
 *             the summation order (each sum has one non-zero term);
 *   outer     with k = 1 every entry must be the correctly rounded product a_i b_j;
 *   random    effective mantissa bits on random data of the real MLP shapes:
 *             -log2(max |C - C_exact| / (|A| |B|)_ij), normalised per element;
 *   range     a product beyond 65504 (fp16's largest finite) must stay finite: tells a TF32-like
 *             format (fp32 range) from fp16.
 * doc/precision.md describes how a reading is classified (clnode_gemm_class).
 */
#ifndef CLNODE_PROBE_H
#define CLNODE_PROBE_H

#include "clnode/common.h"
#include "clnode/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the GEMM behaves like. */
typedef enum clnode_gemm_class {
    CLNODE_GEMM_CLASS_UNKNOWN = 0,
    CLNODE_GEMM_CLASS_FP64 = 1,   /* full IEEE binary64 */
    CLNODE_GEMM_CLASS_FP32 = 2,   /* full IEEE binary32 */
    CLNODE_GEMM_CLASS_TF32X3 = 3, /* 3xTF32-like: ~fp32 accuracy, 1-ulp mismatches */
    CLNODE_GEMM_CLASS_BF16X3 = 4, /* bf16x3-like: ~17 bits */
    CLNODE_GEMM_CLASS_TF32 = 5,   /* TF32-like: ~10-11 bits, fp32 range */
    CLNODE_GEMM_CLASS_FP16 = 6,   /* fp16-like: ~10-11 bits, overflows past 65504 */
    CLNODE_GEMM_CLASS_BF16 = 7,   /* bf16-like: ~8 bits */
} clnode_gemm_class;

/* "fp64", "fp32", "3xtf32-like", "bf16x3-like", "tf32-like", "fp16-like", "bf16-like", "unknown".
 */
CLNODE_API const char *clnode_gemm_class_name(clnode_gemm_class c);

/* Fields are only ever appended (clnode/common.h); clnode_probe_gemm passes the size. */
typedef struct clnode_probe_result {
    size_t struct_size; /* the bytes the library wrote */
    clnode_precision precision;
    clnode_gemm_mode gemm_mode;
    int identity_exact;       /* 1 if A . I == A and I . B == B bit for bit */
    double identity_bits;     /* effective bits seen by the identity test (53/24 when exact) */
    long identity_mismatches; /* entries that differ */
    int outer_exact;          /* 1 if every k = 1 product is correctly rounded */
    long outer_mismatches;
    double random_bits; /* effective mantissa bits on random MLP-shaped data */
    int range_ok;       /* 1 if products past 65504 stay finite */
    int denormals;      /* measured: 1 if subnormal operands and subnormal products
                           come out exactly, 0 if flushed or altered */
    clnode_gemm_class gemm_class;
    double unit_roundoff; /* 2^-bits of the class: what rtol is compared with */
} clnode_probe_result;

/* Probes the GEMM of the context's device in `precision` and `mode`. Blocking; a few small GEMMs.
 * Results are cached in the context.
 * Errors: as clnode_solve (CLNODE_ERR_NO_FP64, CLNODE_ERR_UNSUPPORTED for a mode the device
 * lacks, device errors; CLNODE_ERR_INVALID_ARGUMENT for a result struct larger than this library
 * knows). A macro: it passes the size of the struct the program was compiled with to
 * clnode_probe_gemm_sized, which writes only the fields it covers. */
#define clnode_probe_gemm(ctx, precision, mode, out)                                               \
    clnode_probe_gemm_sized((ctx), (precision), (mode), (out), sizeof *(out))
CLNODE_API clnode_status clnode_probe_gemm_sized(clnode_context *ctx, clnode_precision precision,
                                                 clnode_gemm_mode mode, clnode_probe_result *out,
                                                 size_t struct_size);

/* Floating-point facts of a device, as its driver reports them (-1: not reported). Fields are only
 * ever appended (clnode/common.h). */
typedef struct clnode_device_facts {
    size_t struct_size;             /* the bytes the library wrote */
    int fp64;                       /* double precision available */
    int fma;                        /* hardware fused multiply-add */
    int denormals;                  /* fp32 denormals supported (not flushed) */
    int correctly_rounded_div_sqrt; /* fp32 division and sqrt correctly rounded */
} clnode_device_facts;

/* Fills *out. A macro: it passes the size of the struct the program was compiled with to
 * clnode_device_facts_get_sized, which writes only the fields it covers
 * (CLNODE_ERR_INVALID_ARGUMENT for a struct larger than this library knows). */
#define clnode_device_facts_get(ctx, out) clnode_device_facts_get_sized((ctx), (out), sizeof *(out))
CLNODE_API clnode_status clnode_device_facts_get_sized(clnode_context *ctx,
                                                       clnode_device_facts *out,
                                                       size_t struct_size);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_PROBE_H */
