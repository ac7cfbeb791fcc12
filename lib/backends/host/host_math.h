/* host_math.h - the per-precision loops of the host backend (lib/backends/host/host_math.inc).
 * The stage and finish passes run over rows [0, rows) (the solve's live rows), finish_rows over
 * rows [r0, r1) (a part of the pass). */
#ifndef CLN_HOST_MATH_H
#define CLN_HOST_MATH_H

#include <stddef.h>
#include <stdint.h>

/* The host's element-wise loops (the activation pass, the stage rows of the fused pass, the step
 * finish) are built for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2 + FMA) as well as the baseline,
 * chosen when the library loads. Contraction is off, and the only fused multiply-adds are the
 * formulas' explicit fma calls, correctly rounded in every clone (the baseline calls libm's); sqrt,
 * division and fmax are IEEE operations in each: every clone computes the same bits.
 * Not under ThreadSanitizer (GCC defines __SANITIZE_THREAD__): the clones' ifunc resolvers run
 * while the library is relocated, before the sanitizer's runtime is set up, and crash there. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__clang__) &&       \
    !defined(__SANITIZE_THREAD__)
#define CLN_HOST_CLONES                                                                            \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLN_HOST_CLONES
#endif

/* cln_host_bias_act: C = act(C + bias) on an m x n block (leading dimension ldc; bias NULL:
 * none, and the identity then leaves C as it is). cln_host_out_scale: C = cln_out_scale(C, s[j])
 * (ns == N) or (C, s[0]) (ns == 1) on such a block: the model's output scale. */
#define CLN_HOST_MATH_DECLARE(real, sfx)                                                           \
    void cln_host_bias_act_##sfx(real *C, size_t ldc, size_t m, size_t n, const real *bias,        \
                                 int act);                                                         \
    void cln_host_out_scale_##sfx(real *C, size_t ldc, size_t m, size_t n, const real *s,          \
                                  size_t ns);                                                      \
    void cln_host_init_##sfx(size_t B, const real *CR, const int32_t *CI, real *RS, int32_t *IS);  \
    void cln_host_stage_##sfx(int i, size_t rows, const real *CR, const int32_t *CI,               \
                              const real *RS, const int32_t *IS, const real *Y, const real *F,     \
                              real *Z);                                                            \
    void cln_host_finish_##sfx(size_t rows, const real *CR, const int32_t *CI, real *RS,           \
                               int32_t *IS, real *Y, real *F, const real *Z, const real *TS,       \
                               real *TSOUT, real *STT, real *STY);                                 \
    void cln_host_finish_rows_##sfx(size_t r0, size_t r1, const real *CR, const int32_t *CI,       \
                                    real *RS, int32_t *IS, real *Y, real *F, const real *Z,        \
                                    const real *TS, real *TSOUT, real *STT, real *STY);

CLN_HOST_MATH_DECLARE(float, f32)
CLN_HOST_MATH_DECLARE(double, f64)

#endif /* CLN_HOST_MATH_H */
