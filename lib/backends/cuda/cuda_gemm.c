/* cuda_gemm.c - the CUDA backend's GEMMs: the ordered kernel (the host's sums) or cuBLAS. */
#include "backends/cuda/cuda_internal.h"

static clnode_status cu_set_math(cuda_backend *cb, cublasMath_t math)
{
    if (cb->math == math)
        return CLNODE_OK;
    BLAS_CHECK(cb->proto.base.ctx, "cublasSetMathMode", CU(cublasSetMathMode)(cb->blas, math));
    cb->math = math;
    return CLNODE_OK;
}

/* The ordered GEMM kernel: the same sums, in the same order, as the host and CLBlast. */
static clnode_status cu_gemm_ordered(cuda_backend *cb, clnode_precision prec, size_t m, size_t n,
                                     size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                                     size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc)
{
    cu_program *p = NULL;
    clnode_status st = cu_program_get(cb, prec, &p);
    if (st != CLNODE_OK)
        return st;
    void *pa = A->p, *pb = Bm->p, *pc = C->p;
    unsigned long long ao = a_off, bo = b_off, co = c_off, la = lda, lb = ldb, lc = ldc;
    int mi = (int)m, ni = (int)n, ki = (int)k;
    void *args[] = {&pa, &ao, &la, &pb, &bo, &lb, &pc, &co, &lc, &mi, &ni, &ki};
    unsigned blocks = 0;
    st = cu_blocks(cb->proto.base.ctx, (unsigned long long)m * n, p->t_gemm, &blocks);
    if (st != CLNODE_OK)
        return st;
    return cu_launch(&cb->proto.base, p->gemm, blocks, p->t_gemm, args, "cln_gemm_ordered");
}

/* Logs once per backend what the tf32 mode computes on this device. */
static void cu_note_tf32(cuda_backend *cb)
{
    if (cb->tf32_noted)
        return;
    cb->tf32_noted = 1;
    const cln_backend *be = &cb->proto.base;
    if (cb->tf32_off || cb->cc_major < 8)
        cln_log(be->ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                "tf32 GEMM mode on %s: %s, so these GEMMs compute in full fp32", be->device_name,
                cb->tf32_off ? "NVIDIA_TF32_OVERRIDE=0 is set"
                             : "the device has no TF32 tensor cores (before sm_80)");
    else
        cln_log(be->ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
                "tf32 GEMM mode on %s: cuBLAS TF32 tensor cores (10-bit mantissa inputs)",
                be->device_name);
}

/* cublasGemmEx with the compute type of (prec, mode): see the top of this file. */
static clnode_status cu_gemm_cublas(cuda_backend *cb, clnode_precision prec, clnode_gemm_mode mode,
                                    size_t m, size_t n, size_t k, const void *a, size_t lda,
                                    const void *b, size_t ldb, void *c, size_t ldc)
{
    clnode_context *ctx = cb->proto.base.ctx;
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    cudaDataType_t type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F_PEDANTIC;
    const void *alpha = &one_f, *beta = &zero_f;
    if (prec == CLNODE_FP64) {
        type = CUDA_R_64F;
        compute = CUBLAS_COMPUTE_64F_PEDANTIC;
        alpha = &one_d;
        beta = &zero_d;
    } else if (mode == CLNODE_GEMM_TF32) {
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        cu_note_tf32(cb);
    }
    /* the handle's math mode agrees with the compute type: pedantic for strict, default (TF32
     * allowed by the compute type) for tf32 */
    clnode_status st =
        cu_set_math(cb, mode == CLNODE_GEMM_TF32 ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH);
    if (st != CLNODE_OK)
        return st;
    /* row-major C[m x n] = A[m x k] . B[n x k]^T  <=>  column-major C^T[n x m] = B . A^T:
     * B is a column-major k x n matrix (ld ldb) used transposed, A a k x m one (ld lda). */
    const cublasStatus_t s = CU(cublasGemmEx)(
        cb->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, alpha, b, type, (int)ldb, a,
        type, (int)lda, beta, c, type, (int)ldc, compute, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        return cln_fail_native(
            ctx, (long)s,
            s == CUBLAS_STATUS_ALLOC_FAILED    ? CLNODE_ERR_DEVICE_MEMORY
            : s == CUBLAS_STATUS_NOT_SUPPORTED ? CLNODE_ERR_UNSUPPORTED
                                               : CLNODE_ERR_BLAS,
            "cublasGemmEx(%s, %s, %zu x %zu x %zu) failed: %s (cuBLAS status %d)",
            clnode_precision_name(prec), clnode_gemm_mode_name(mode), m, n, k,
            CU(cublasGetStatusName)(s), (int)s);
    }
    return CLNODE_OK;
}

clnode_status cu_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode, size_t m,
                      size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                      size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc)
{
    cuda_backend *cb = cub(be);
    clnode_context *ctx = be->ctx;
    int nothing = 1;
    clnode_status st = cln_dev_gemm_check(be, prec, mode, m, n, k, A, a_off, lda, Bm, b_off, ldb, C,
                                          c_off, ldc, &nothing);
    if (st != CLNODE_OK || nothing)
        return st;
    CLN_CHECK(ctx,
              m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
                  ldc <= INT_MAX,
              CLNODE_ERR_INVALID_ARGUMENT,
              "GEMM %zu x %zu x %zu (lda %zu, ldb %zu, ldc %zu) is outside cuBLAS's int range", m,
              n, k, lda, ldb, ldc);
    be->launches++;
    be->gemms++;
    const size_t es = prec == CLNODE_FP64 ? sizeof(double) : sizeof(float);
    st = cu_bind(cb);
    if (st != CLNODE_OK)
        return st;
    unsigned char *c = (unsigned char *)C->p + c_off * es;
    if (k == 0) { /* an empty sum: C = 0, as cblas with beta = 0 */
        CU_CHECK(ctx, "cudaMemset2DAsync (GEMM with k = 0)",
                 CU(cudaMemset2DAsync)(c, ldc * es, 0, n * es, m, cb->stream));
        return CLNODE_OK;
    }
    if (mode == CLNODE_GEMM_STRICT && !cb->cublas_strict)
        return cu_gemm_ordered(cb, prec, m, n, k, A, a_off, lda, Bm, b_off, ldb, C, c_off, ldc);
    return cu_gemm_cublas(cb, prec, mode, m, n, k, (const unsigned char *)A->p + a_off * es, lda,
                          (const unsigned char *)Bm->p + b_off * es, ldb, c, ldc);
}
