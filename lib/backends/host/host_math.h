/* host_math.h - the per-precision loops of the host backend (lib/backends/host/host_math.inc).
 * The stage and finish passes run over rows [0, rows) (the solve's live rows), finish_rows over
 * rows [r0, r1) (a part of the pass). */
#ifndef CLN_HOST_MATH_H
#define CLN_HOST_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "backends/host/host_gemm.h"

/* The host's element-wise loops (the activation and output-scale passes, the stage rows of the
 * fused pass, the step finish, the reverse pass's activations and their derivatives) are built
 * three times from one body: for AVX-512F, for AVX2 + FMA and for the baseline, and the caller
 * picks the build of its context's ISA (cln_gemm_isa: "host:avx512", "host:avx2",
 * "host:portable", or the widest the CPU runs), as it picks the GEMM's kernels. Contraction is
 * off, and the only fused multiply-adds are the formulas' explicit fma calls, correctly rounded
 * in every build (the baseline calls libm's); sqrt, division and fmax are IEEE operations in
 * each: every build computes the same bits, which tests/backend/test_host_isa.c compares.
 *
 * CLN_HOST_BUILDS(attrs, name, params, args) defines, from a body
 *   static inline void name##_body params    (CLN_HOST_BODY)
 * written before it, the three builds (static void, with the extra attributes `attrs`; the
 * AVX2 and AVX-512 builds are `flatten`, so that the body and every call in it are compiled for
 * their ISA: an always_inline body would leave its own callees, such as cln_finish_traj, out of
 * line in the baseline's code) and the chooser `static void name(cln_gemm_isa isa, params)`, which
 * calls the build of `isa` with `args` (the names of params, in parentheses). Where the compiler
 * cannot target x86-64's ISAs, every ISA runs the baseline build (and the context refuses the
 * others). */
#define CLN_HOST_UNPAREN(...) __VA_ARGS__
#if defined(__x86_64__) && defined(__GNUC__)
#define CLN_HOST_BUILDS(attrs, name, params, args)                                                 \
    __attribute__((target("avx512f"), flatten)) attrs static void name##_avx512 params             \
    {                                                                                              \
        name##_body args;                                                                          \
    }                                                                                              \
    __attribute__((target("avx2,fma"), flatten)) attrs static void name##_avx2 params              \
    {                                                                                              \
        name##_body args;                                                                          \
    }                                                                                              \
    attrs static void name##_portable params                                                       \
    {                                                                                              \
        name##_body args;                                                                          \
    }                                                                                              \
    static void name(cln_gemm_isa isa, CLN_HOST_UNPAREN params)                                    \
    {                                                                                              \
        if (isa == CLN_GEMM_AVX512)                                                                \
            name##_avx512 args;                                                                    \
        else if (isa == CLN_GEMM_AVX2)                                                             \
            name##_avx2 args;                                                                      \
        else                                                                                       \
            name##_portable args;                                                                  \
    }
#else
#define CLN_HOST_BUILDS(attrs, name, params, args)                                                 \
    attrs static void name##_portable params                                                       \
    {                                                                                              \
        name##_body args;                                                                          \
    }                                                                                              \
    static void name(cln_gemm_isa isa, CLN_HOST_UNPAREN params)                                    \
    {                                                                                              \
        (void)isa;                                                                                 \
        name##_portable args;                                                                      \
    }
#endif
/* The body of a CLN_HOST_BUILDS function. */
#define CLN_HOST_BODY static inline void

/* cln_host_bias_act: C = act(C + bias) on an m x n block (leading dimension ldc; bias NULL:
 * none, and the identity then leaves C as it is). cln_host_out_scale: C = cln_out_scale(C, s[j])
 * (ns == N) or (C, s[0]) (ns == 1) on such a block: the model's output scale. */
#define CLN_HOST_MATH_DECLARE(real, sfx)                                                           \
    void cln_host_bias_act_##sfx(cln_gemm_isa isa, real *C, size_t ldc, size_t m, size_t n,        \
                                 const real *bias, int act);                                       \
    void cln_host_out_scale_##sfx(cln_gemm_isa isa, real *C, size_t ldc, size_t m, size_t n,       \
                                  const real *s, size_t ns);                                       \
    void cln_host_nonfinite_##sfx(size_t rows, size_t cols, size_t ld, size_t off, const real *X,  \
                                  int64_t *FLAG);                                                  \
    void cln_host_bad_save_ts_##sfx(size_t rows, size_t cols, size_t ld, int within,               \
                                    const real *TS, const real *RS, int64_t *FLAG);                \
    void cln_host_init_##sfx(size_t B, const real *CR, const int32_t *CI, real *RS, int32_t *IS);  \
    void cln_host_dt0_##sfx(int phase, size_t rows, const real *CR, const int32_t *CI, real *RS,   \
                            const int32_t *IS, const real *Y, real *F, real *Z);                   \
    void cln_host_stage_##sfx(int i, size_t rows, const real *CR, const int32_t *CI,               \
                              const real *RS, const int32_t *IS, const real *Y, const real *F,     \
                              real *Z);                                                            \
    void cln_host_finish_##sfx(cln_gemm_isa isa, size_t rows, const real *CR, const int32_t *CI,   \
                               real *RS, int32_t *IS, real *Y, real *F, const real *Z,             \
                               const real *TS, real *TSOUT, real *STT, real *STY);                 \
    void cln_host_finish_rows_##sfx(cln_gemm_isa isa, size_t r0, size_t r1, const real *CR,        \
                                    const int32_t *CI, real *RS, int32_t *IS, real *Y, real *F,    \
                                    const real *Z, const real *TS, real *TSOUT, real *STT,         \
                                    real *STY);

CLN_HOST_MATH_DECLARE(float, f32)
CLN_HOST_MATH_DECLARE(double, f64)

#endif /* CLN_HOST_MATH_H */
