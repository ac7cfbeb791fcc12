/* host_act.h - bias + activation on a block of rows, several rows at a time
 * (lib/backends/host/host_act.inc): the fused pass's epilogue of each layer's product. */
#ifndef CLN_HOST_ACT_H
#define CLN_HOST_ACT_H

#include <stddef.h>

#include "backends/host/host_gemm.h"

/* C[r][j] = act(C[r][j] + bias[j]) (C[r][j] + 0 when bias is NULL) for r < rows, j < n (leading
 * dimension ldc), act a CLN_ACT_* code of cl/cln_activation.h: the expressions of
 * cln_host_bias_act_* (host_math.inc), so the same bits, computed for a group of rows at once so
 * that the CPU overlaps the long dependency chains of several rows' activations. The AVX2 and
 * AVX-512 kernels run for those ISAs, cln_host_bias_act_* for the portable one. */
void cln_act_rows_f32(cln_gemm_isa isa, float *C, size_t ldc, size_t rows, size_t n,
                      const float *bias, int act);
void cln_act_rows_f64(cln_gemm_isa isa, double *C, size_t ldc, size_t rows, size_t n,
                      const double *bias, int act);

/* The reverse pass's recomputation of a layer's activation (rows x n values, leading dimension
 * n): x = P[r][j] + bias[j] (+ 0 when bias is NULL), O[r][j] = act(x) and P[r][j] = act'(x)
 * (cln_activate_grad from x and O; 1 for the identity): the expressions of cl/cln_activation.h,
 * so the same bits as each computed on its own, a group of rows at once as cln_act_rows_*. */
void cln_act_grad_rows_f32(cln_gemm_isa isa, float *P, float *O, size_t rows, size_t n,
                           const float *bias, int act);
void cln_act_grad_rows_f64(cln_gemm_isa isa, double *P, double *O, size_t rows, size_t n,
                           const double *bias, int act);

#endif /* CLN_HOST_ACT_H */
