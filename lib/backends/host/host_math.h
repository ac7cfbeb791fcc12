/* host_math.h - the per-precision loops of the host backend (lib/backends/host/host_math.inc).
 * The stage and finish passes run over rows [0, rows) (the solve's live rows), finish_rows over
 * rows [r0, r1) (a part of the pass). */
#ifndef CLN_HOST_MATH_H
#define CLN_HOST_MATH_H

#include <stddef.h>
#include <stdint.h>

#define CLN_HOST_MATH_DECLARE(real, sfx)                                                           \
    void cln_host_bias_act_##sfx(real *C, size_t ldc, size_t m, size_t n, const real *bias,        \
                                 int act);                                                         \
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
