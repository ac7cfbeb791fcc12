/* cln_tf32.h - rounding a float32 to TF32 (NVIDIA's "tensor float 32": 1 sign bit, 8 exponent
 * bits, 10 explicit mantissa bits), written once for the tf32 GEMM emulation of every backend:
 * the host's ordered GEMM (lib/backends/host/host_gemm.c) and the OpenCL rounding kernel (cl/clnode.cl) call
 * the same function. CUDA needs none: cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32 rounds natively.
 *
 * Rounding: to nearest, ties to even, on the bit pattern, as cuBLAS converts its inputs ("input
 * conversions round to nearest even"): add 0x0FFF plus the lowest kept bit, then clear the 13
 * dropped bits. A carry out of the mantissa moves into the exponent, which is exactly the next
 * binade; rounding up past FLT_MAX gives +-inf (the correct overflow of a format with fp32's
 * range and fewer digits). Infinities and NaNs are returned unchanged (a NaN's payload could
 * otherwise round into an infinity). Subnormals round the same way: TF32 has fp32's exponent
 * range, so its smallest step is 2^-136 (values below 2^-137 round to zero).
 *
 * Precision-independent, so it does not use the state-precision prelude: valid as C (C99/C11), as
 * OpenCL C and as CUDA C++ on its own.
 */
#ifndef CLN_TF32_H
#define CLN_TF32_H

#ifdef __OPENCL_VERSION__
typedef uint cln_u32;
#define CLN_TF32_INLINE inline
#define CLN_F32_BITS(x) as_uint(x)
#define CLN_F32_FROM_BITS(b) as_float(b)
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
typedef unsigned int cln_u32;
#define CLN_TF32_INLINE __device__ static inline
#define CLN_F32_BITS(x) __float_as_uint(x)
#define CLN_F32_FROM_BITS(b) __uint_as_float(b)
#else
#include <stdint.h>
#include <string.h>
typedef uint32_t cln_u32;
#define CLN_TF32_INLINE static inline
static inline cln_u32 cln_f32_bits_(float x)
{
    cln_u32 b;
    memcpy(&b, &x, sizeof b);
    return b;
}
static inline float cln_f32_from_bits_(cln_u32 b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}
#define CLN_F32_BITS(x) cln_f32_bits_(x)
#define CLN_F32_FROM_BITS(b) cln_f32_from_bits_(b)
#endif

/* x rounded to the nearest TF32 value (ties to even); Inf and NaN unchanged. */
CLN_TF32_INLINE float cln_tf32_round(float x)
{
    const cln_u32 u = CLN_F32_BITS(x);
    if ((u & 0x7F800000u) == 0x7F800000u)
        return x;
    const cln_u32 r = (u + 0x0FFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
    return CLN_F32_FROM_BITS(r);
}

#endif /* CLN_TF32_H */
