/* cln_prelude.h - makes the shared arithmetic headers valid both as C99/C11 and as OpenCL C.
 *
 * Every header under cl/ includes this first. It defines:
 *   real            the state precision (float when CLN_PRECISION == 32, double when 64);
 *   CLN_GLOBAL      the address-space qualifier of buffers (__global in OpenCL C, empty in C);
 *   CLN_CONST       the qualifier of read-only buffers;
 *   CLN_FN(name)    the precision-suffixed name of a shared function (name_f32 / name_f64), so the
 *                   host can include a header once per precision in one program;
 *   CLN_INLINE      the storage class of shared functions (always inlined in OpenCL C: PoCL
 *                   left plain `inline` functions as calls, and a work-item loop with a call in
 *                   it is not vectorised: tanh in a kernel took 12.7 ns per element, 2.6 inlined);
 *   CLN_R(x)        a literal in the state precision (the constant is written once, in double, and
 *                   rounded to real exactly like a weakly typed Python float is in JAX);
 *   cln_int         a 32-bit signed integer (int in both languages);
 *   cln_rbits       a signed integer of real's width, for bit casts (CLN_AS_BITS, CLN_AS_REAL),
 *                   and cln_urbits, its unsigned twin (for a left shift that drops high bits);
 * and the type-generic maths functions (exp, log1p, sqrt, pow, fabs, fmin, fmax, isnan, isinf,
 * nextafter) that OpenCL C provides as overloads and C provides through <tgmath.h>.
 *
 * Contraction of a*b+c into an FMA is disabled on every side, so that every backend rounds the
 * stage combinations the same way. (In C the library is compiled with -ffp-contract=off; CUDA
 * sources with NVRTC's or nvcc's --fmad=false.)
 *
 * Three dialects: OpenCL C (__OPENCL_VERSION__), CUDA C++ compiled by NVRTC (__CUDACC_RTC__) or
 * nvcc (__CUDACC__), and C.
 */
#ifndef CLN_PRELUDE_H
#define CLN_PRELUDE_H

#ifndef CLN_PRECISION
#define CLN_PRECISION 32
#endif

#ifdef __OPENCL_VERSION__
/* ---------------------------------------------------------------- OpenCL C */
#pragma OPENCL FP_CONTRACT OFF
#if CLN_PRECISION == 64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
typedef long cln_rbits;   /* integer of the same width as real */
typedef ulong cln_urbits; /* and its unsigned twin, for shifts that drop high bits */
#define CLN_AS_BITS(x) as_long(x)
#define CLN_AS_REAL(b) as_double(b)
#else
typedef float real;
typedef int cln_rbits;
typedef uint cln_urbits;
#define CLN_AS_BITS(x) as_int(x)
#define CLN_AS_REAL(b) as_float(b)
#endif
#define CLN_GLOBAL __global
#define CLN_CONST __global const
#define CLN_INLINE static inline __attribute__((always_inline))
typedef int cln_int;
typedef long cln_long;

#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* ---------------------------------------------------------------- CUDA C++ (NVRTC or nvcc)
 * No header is included: NVRTC has none, and the maths functions (sqrt, pow, fabs, fmax, isnan,
 * isinf, ...) are CUDA's built-in overloads for float and double. Compile with --fmad=false (no
 * contraction), --ftz=false, --prec-div=true and --prec-sqrt=true (IEEE division and sqrt). */
#if CLN_PRECISION == 64
typedef double real;
typedef long long cln_rbits;
typedef unsigned long long cln_urbits;
#define CLN_AS_BITS(x) __double_as_longlong(x)
#define CLN_AS_REAL(b) __longlong_as_double(b)
#else
typedef float real;
typedef int cln_rbits;
typedef unsigned int cln_urbits;
#define CLN_AS_BITS(x) __float_as_int(x)
#define CLN_AS_REAL(b) __int_as_float(b)
#endif
#define CLN_GLOBAL
#define CLN_CONST const
#define CLN_INLINE __device__ static inline
typedef int cln_int;
typedef long long cln_long;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000) /* float +inf, as CUDART_INF_F */
#endif

#else
/* ---------------------------------------------------------------- C */
#include <stdint.h>
#include <string.h>
#include <tgmath.h>
#if CLN_PRECISION == 64
typedef double real;
typedef int64_t cln_rbits;
typedef uint64_t cln_urbits;
#else
typedef float real;
typedef int32_t cln_rbits;
typedef uint32_t cln_urbits;
#endif
#define CLN_GLOBAL
#define CLN_CONST const
#define CLN_INLINE static inline
typedef int32_t cln_int;
typedef int64_t cln_long;
static inline cln_rbits cln_as_bits_(real x)
{
    cln_rbits b;
    memcpy(&b, &x, sizeof b);
    return b;
}
static inline real cln_as_real_(cln_rbits b)
{
    real x;
    memcpy(&x, &b, sizeof x);
    return x;
}
#define CLN_AS_BITS(x) cln_as_bits_(x)
#define CLN_AS_REAL(b) cln_as_real_(b)
#endif

#define CLN_R(x) ((real)(x))

/* Components of a trajectory's error norm computed together before they are summed in order
 * (cln_error_norm): a vector's worth on the host, whose compiler is told not to unroll the loops
 * across them (GCC unrolls a loop of 8 before its vectoriser sees it); one at a time where a
 * work-item is a trajectory. */
#if defined(__OPENCL_VERSION__) || defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CLN_NORM_CHUNK 1
#define CLN_ACROSS_COMPONENTS
#else
#define CLN_NORM_CHUNK 8
#if defined(__GNUC__) && !defined(__clang__)
#define CLN_ACROSS_COMPONENTS _Pragma("GCC unroll 1")
#else
#define CLN_ACROSS_COMPONENTS
#endif
#endif

#if CLN_PRECISION == 64
#define CLN_FN(name) name##_f64
#else
#define CLN_FN(name) name##_f32
#endif

#endif /* CLN_PRELUDE_H */
