/* opencl_gemm.c - the OpenCL backend's GEMMs through CLBlast, under one process-wide lock, and
 * the tf32 rounding of their operands. */
#include "backends/opencl/opencl_internal.h"

/* CLBlast's caches (compiled programs, the parameter database and its overrides) are
 * process-wide, shared by every context of every thread: CLBlastOverrideParameters replaces a
 * database entry that concurrent GEMMs of other contexts read, and CLBlastClearCache (each
 * context's destroy) drops every override. So every CLBlast call is made under this lock: GEMMs
 * share it (each enqueue holds it across its override check and the GEMM, so an override cannot
 * be cleared in between), an override or a cache clear holds it alone. ocl_clblast_gen counts
 * the clears (starting at 1), so each context re-applies its override once after a clear instead
 * of on every solve. */
pthread_rwlock_t ocl_clblast_lock = PTHREAD_RWLOCK_INITIALIZER;
unsigned long ocl_clblast_gen = 1; /* read under the lock, written under it alone */
/* Forces CLBlast's direct (single-kernel) GEMM for every size of this precision on this device:
 * each output element is then one sequential sum over k whatever m and n are, so a row's result
 * does not depend on the batch, and the indirect kernel's GEMMK=1 bug of CLBlast < 1.6.3 is
 * avoided. Best effort: a failure is logged and the default routing kept. Called with
 * ocl_clblast_lock held for writing. */
static void ocl_force_direct_gemm(opencl_backend *ob, clnode_precision prec)
{
    const int pi = prec == CLNODE_FP64;
    if (ob->gemm_tuned[pi] == ocl_clblast_gen)
        return;
    ob->gemm_tuned[pi] = ocl_clblast_gen;
    const char *names[] = {"XGEMM_MIN_INDIRECT_SIZE"};
    const size_t values[] = {4096}; /* m n k < 4096^3: every MLP-sized product */
    CLBlastStatusCode s = CLBlastOverrideParameters(
        ob->device, "GemmRoutine", pi ? CLBlastPrecisionDouble : CLBlastPrecisionSingle, 1, names,
        values);
    if (s != CLBlastSuccess)
        cln_log(ob->proto.base.ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                "CLBlastOverrideParameters(GemmRoutine, XGEMM_MIN_INDIRECT_SIZE) failed (%d); "
                "CLBlast keeps its default GEMM routing",
                (int)s);
}

/* Takes ocl_clblast_lock shared, with this context's override of `prec` in place (applied under
 * the exclusive lock when missing: first GEMM, or after another context cleared the cache). */
static void ocl_clblast_enter(opencl_backend *ob, clnode_precision prec)
{
    const int pi = prec == CLNODE_FP64;
    for (;;) {
        pthread_rwlock_rdlock(&ocl_clblast_lock);
        if (ob->gemm_tuned[pi] == ocl_clblast_gen)
            return;
        pthread_rwlock_unlock(&ocl_clblast_lock);
        pthread_rwlock_wrlock(&ocl_clblast_lock);
        ocl_force_direct_gemm(ob, prec);
        pthread_rwlock_unlock(&ocl_clblast_lock);
    }
}

/* Makes tf32 scratch `which` (0: A, 1: B) hold `bytes`; grows only when a larger product is first
 * seen, so steps never allocate. */
clnode_status ocl_tf32_scratch(opencl_backend *ob, int which, size_t bytes)
{
    if (bytes <= ob->tf32_cap[which])
        return CLNODE_OK;
    if (ob->tf32_buf[which])
        clReleaseMemObject(ob->tf32_buf[which]);
    ob->tf32_buf[which] = NULL;
    ob->tf32_cap[which] = 0;
    cl_int e = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(ob->context, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (!mem || e != CL_SUCCESS)
        return OCL_FAIL(ob->proto.base.ctx, e, "clCreateBuffer(tf32 scratch)");
    ob->tf32_buf[which] = mem;
    ob->tf32_cap[which] = bytes;
    return CLNODE_OK;
}

/* Enqueues the TF32 rounding of a rows x cols block of `src` (element offset off, leading
 * dimension ld) into tf32 scratch `which`, packed. */
static clnode_status ocl_tf32_round(opencl_backend *ob, ocl_program *p, cln_buf *src, size_t off,
                                    size_t ld, size_t rows, size_t cols, int which)
{
    clnode_context *ctx = ob->proto.base.ctx;
    CLN_CHECK(ctx, rows <= INT32_MAX && cols <= INT32_MAX, CLNODE_ERR_INVALID_ARGUMENT,
              "tf32 operand %zu x %zu is too large", rows, cols);
    clnode_status st = ocl_tf32_scratch(ob, which, rows * cols * sizeof(float));
    if (st != CLNODE_OK)
        return st;
    if (!p->lim_tf32)
        p->lim_tf32 = ocl_wg_limit(ob, p->tf32, OCL_WG);
    const cl_ulong o = off, l = ld;
    const cl_int r = (cl_int)rows, c = (cl_int)cols;
    OCL_ARG(ctx, p->tf32, 0, src->mem);
    OCL_ARG(ctx, p->tf32, 1, o);
    OCL_ARG(ctx, p->tf32, 2, l);
    OCL_ARG(ctx, p->tf32, 3, r);
    OCL_ARG(ctx, p->tf32, 4, c);
    OCL_ARG(ctx, p->tf32, 5, ob->tf32_buf[which]);
    size_t lw[2], g[2];
    ocl_local_2d(ob, p, p->lim_tf32, cols, lw);
    g[0] = ocl_round_up(cols, lw[0]);
    g[1] = ocl_round_up(rows, lw[1]);
    const cl_int e = clEnqueueNDRangeKernel(ob->queue, p->tf32, 2, NULL, g, lw, 0, NULL, NULL);
    if (e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clEnqueueNDRangeKernel(cln_tf32)");
    return CLNODE_OK;
}

clnode_status ocl_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode, size_t m,
                       size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                       size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc)
{
    opencl_backend *ob = ocl(be);
    clnode_context *ctx = be->ctx;
    int nothing = 1;
    const clnode_status gm = cln_dev_gemm_check(be, prec, mode, m, n, k, A, a_off, lda, Bm, b_off,
                                                ldb, C, c_off, ldc, &nothing);
    if (gm != CLNODE_OK || nothing)
        return gm;
    be->launches++;
    be->gemms++;
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    if (k == 0) { /* an empty sum: C = 0 (CLBlast rejects k == 0) */
        const cl_uchar zero = 0;
        const size_t rows = ldc == n ? 1 : m;
        const size_t len = (ldc == n ? m * n : n) * es;
        for (size_t r = 0; r < rows; ++r)
            OCL_CHECK(ctx, "clEnqueueFillBuffer (GEMM with k = 0)",
                      clEnqueueFillBuffer(ob->queue, C->mem, &zero, 1, (c_off + r * ldc) * es, len,
                                          0, NULL, NULL));
        return CLNODE_OK;
    }
    cl_mem amem = A->mem, bmem = Bm->mem;
    if (mode == CLNODE_GEMM_TF32) {
        /* the emulation: both operands rounded to TF32 on the device, then CLBlast's fp32 GEMM
         * (its sequential fp32 accumulation) on the rounded copies */
        ocl_program *p = NULL;
        clnode_status st = ocl_program_get(ob, CLNODE_FP32, &p);
        if (st == CLNODE_OK)
            st = ocl_tf32_round(ob, p, A, a_off, lda, m, k, 0);
        if (st == CLNODE_OK)
            st = ocl_tf32_round(ob, p, Bm, b_off, ldb, n, k, 1);
        if (st != CLNODE_OK)
            return st;
        amem = ob->tf32_buf[0];
        bmem = ob->tf32_buf[1];
        a_off = b_off = 0;
        lda = ldb = k;
    }
    /* the first GEMM of a precision compiles CLBlast's kernels: logged outside the lock, so that
     * a logger that waits for the caller's own lock (an interpreter's) cannot block another
     * context's exclusive holder of it */
    const int pi = prec == CLNODE_FP64, first = !ob->gemm_ran[pi];
    char what[48];
    double t_build = 0.0;
    if (first) {
        snprintf(what, sizeof what, "CLBlast's %s GEMM kernels", clnode_precision_name(prec));
        t_build = cln_build_begin(ctx, ob->proto.base.device_name, what);
    }
    CLBlastStatusCode s;
    ocl_clblast_enter(ob, prec);
    if (prec == CLNODE_FP32)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k,
                         1.0f, amem, a_off, lda, bmem, b_off, ldb, 0.0f, C->mem, c_off, ldc,
                         &ob->queue, NULL);
    else
        s = CLBlastDgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k,
                         1.0, A->mem, a_off, lda, Bm->mem, b_off, ldb, 0.0, C->mem, c_off, ldc,
                         &ob->queue, NULL);
    pthread_rwlock_unlock(&ocl_clblast_lock);
    if (first) {
        ob->gemm_ran[pi] = s == CLBlastSuccess;
        cln_build_end(ctx, ob->proto.base.device_name, what, t_build, s == CLBlastSuccess);
    }
    if (s != CLBlastSuccess) {
        clnode_status st = ocl_status((cl_int)s, CLNODE_ERR_BLAS);
        if (s == CLBlastNoDoublePrecision)
            st = CLNODE_ERR_NO_FP64;
        return cln_fail_native(ctx, (long)s, st,
                               "CLBlast%cgemm(%zu x %zu x %zu) failed: CLBlast status %d%s%s",
                               prec == CLNODE_FP32 ? 'S' : 'D', m, n, k, (int)s,
                               s > -1000 ? " " : "", s > -1000 ? ocl_err_name((cl_int)s) : "");
    }
    return CLNODE_OK;
}
