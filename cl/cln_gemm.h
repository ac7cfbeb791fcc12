/* cln_gemm.h - one element of the ordered GEMM, written once for every device kernel that takes a
 * product itself: CUDA's cln_gemm_ordered (cl/clnode_cuda.cu) and the reverse pass's products
 * with their element-wise work inside them (cl/cln_reverse_kernels.h: cln_rev_gemm_act_body,
 * cln_rev_gemm_delta_body).
 *
 * The element C[i][j] of C = A . B^T is sum_k A[i][k] B[j][k] summed in order k = 0, 1, ... with
 * fma from 0: what the host's ordered GEMM (lib/backends/host/host_gemm.c) and CLBlast's direct
 * GEMM (one sequential sum per work item, forced by lib/backends/opencl/opencl_gemm.c) compute, so
 * a strict GEMM rounds alike on every backend, whoever takes it. */
#ifndef CLN_GEMM_H
#define CLN_GEMM_H

#include "cln_prelude.h"

/* sum_{kk < k} a[kk] b[kk], in order from kk = 0, each term added by fma to the sum so far (0 at
 * first); 0 for k <= 0. */
CLN_INLINE real cln_gemm_dot(CLN_CONST real *a, CLN_CONST real *b, cln_long k)
{
    real acc = CLN_R(0.0);
    for (cln_long kk = 0; kk < k; ++kk)
        acc = fma(a[kk], b[kk], acc);
    return acc;
}

#endif /* CLN_GEMM_H */
