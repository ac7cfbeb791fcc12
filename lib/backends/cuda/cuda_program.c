/* cuda_program.c - the CUDA backend's programs: cl/clnode_cuda.cu through NVRTC (also without a
 * GPU: cln_cuda_compile) and the per-precision program cache with its kernels. */
#include "backends/cuda/cuda_internal.h"

/* ---- NVRTC ---- */

/* The architecture NVRTC compiles for: the device's own (a CUBIN, no JIT) when this NVRTC knows
 * it, else the newest one it knows below the device (PTX, JIT-compiled by the driver). Returns 0
 * when NVRTC knows none at or below the device. */
static int cu_pick_arch(int cc_major, int cc_minor, int *is_cubin)
{
    const int want = cc_major * 10 + cc_minor;
    int n = 0, best = 0;
    *is_cubin = 0;
    if (CU(nvrtcGetNumSupportedArchs)(&n) != NVRTC_SUCCESS || n <= 0 || n > 256)
        return 0;
    int archs[256];
    if (CU(nvrtcGetSupportedArchs)(archs) != NVRTC_SUCCESS)
        return 0;
    for (int i = 0; i < n; ++i) {
        if (archs[i] == want) {
            *is_cubin = 1;
            return want;
        }
        if (archs[i] < want && archs[i] > best)
            best = archs[i];
    }
    return best;
}

/* The program's build log (malloc'ed, NUL-terminated), or NULL when it is empty or unreadable. */
static char *cu_nvrtc_log(nvrtcProgram prog)
{
    size_t size = 0;
    if (CU(nvrtcGetProgramLogSize)(prog, &size) != NVRTC_SUCCESS || size <= 1)
        return NULL;
    char *log = malloc(size + 1);
    if (log && CU(nvrtcGetProgramLog)(prog, log) == NVRTC_SUCCESS) {
        log[size] = '\0';
        return log;
    }
    free(log);
    return NULL;
}

/* The compiled CUBIN or PTX of `prog` into a malloc'ed *image. */
static clnode_status cu_nvrtc_image(clnode_context *ctx, nvrtcProgram prog, int cubin, char **image,
                                    size_t *image_size)
{
    size_t size = 0;
    nvrtcResult r = cubin ? CU(nvrtcGetCUBINSize)(prog, &size) : CU(nvrtcGetPTXSize)(prog, &size);
    if (r == NVRTC_SUCCESS && size > 0) {
        *image = malloc(size);
        CLN_CHECK(ctx, *image, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of kernel code",
                  size);
        r = cubin ? CU(nvrtcGetCUBIN)(prog, *image) : CU(nvrtcGetPTX)(prog, *image);
    }
    if (r != NVRTC_SUCCESS || size == 0) {
        return cln_fail_native(ctx, (long)r, CLNODE_ERR_BUILD, "nvrtcGet%s failed: %s (%d)",
                               cubin ? "CUBIN" : "PTX", CU(nvrtcGetErrorString)(r), (int)r);
    }
    *image_size = size;
    return CLNODE_OK;
}

/* Compiles the embedded kernels for (architecture, precision): see lib/backends/backend.h. */
clnode_status cln_cuda_compile(clnode_context *ctx, const char *device, int cc_major, int cc_minor,
                               clnode_precision prec, char **image, size_t *image_size,
                               int *is_cubin)
{
    *image = NULL;
    *image_size = 0;
    *is_cubin = 0;
    char why[512];
    CLN_CHECK(ctx, cln_cuda_load_nvrtc(why, sizeof why) == CLNODE_OK, CLNODE_ERR_NO_DEVICE,
              "cuda not available: %s", why);
    int cubin = 0;
    const int arch = cu_pick_arch(cc_major, cc_minor, &cubin);
    CLN_CHECK(ctx, arch > 0, CLNODE_ERR_BUILD,
              "NVRTC cannot compile for %s (compute capability %d.%d): no supported architecture "
              "at or below it",
              device, cc_major, cc_minor);
    char opt_prec[32], opt_arch[48];
    snprintf(opt_prec, sizeof opt_prec, "-DCLN_PRECISION=%d", prec == CLNODE_FP64 ? 64 : 32);
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
    /* IEEE add/mul/div/sqrt without contraction or flushing, as the host and OpenCL kernels */
    const char *opts[] = {opt_prec,      opt_arch,          "--fmad=false",
                          "--ftz=false", "--prec-div=true", "--prec-sqrt=true"};
    const int nopts = (int)(sizeof opts / sizeof opts[0]);

    nvrtcProgram prog = NULL;
    const nvrtcResult r =
        CU(nvrtcCreateProgram)(&prog, cln_cuda_kernel_source, "clnode_cuda.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        return cln_fail_native(
            ctx, (long)r,
            r == NVRTC_ERROR_OUT_OF_MEMORY ? CLNODE_ERR_OUT_OF_MEMORY : CLNODE_ERR_BUILD,
            "nvrtcCreateProgram failed: %s (%d)", CU(nvrtcGetErrorString)(r), (int)r);
    }
    const nvrtcResult rc = CU(nvrtcCompileProgram)(prog, nopts, opts);
    char *log = cu_nvrtc_log(prog);
    clnode_status st = CLNODE_OK;
    if (rc != NVRTC_SUCCESS) {
        if (log)
            cln_log(ctx, CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL, "NVRTC build log (%s, %s %s):\n%s",
                    device, opt_prec, opt_arch, log);
        st = cln_fail_native(ctx, (long)rc, CLNODE_ERR_BUILD,
                             "nvrtcCompileProgram(%s %s) failed: %s (%d)%s%.600s", opt_prec,
                             opt_arch, CU(nvrtcGetErrorString)(rc), (int)rc, log ? "; log: " : "",
                             log ? log : "");
    } else {
        if (log)
            cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL, "NVRTC build log (%s, %s %s):\n%s",
                    device, opt_prec, opt_arch, log);
        st = cu_nvrtc_image(ctx, prog, cubin, image, image_size);
    }
    free(log);
    CU(nvrtcDestroyProgram)(&prog);
    if (st != CLNODE_OK) {
        free(*image);
        *image = NULL;
        *image_size = 0;
        return st;
    }
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
            "NVRTC compiled the CUDA kernels for %s (%s %s, %zu-byte %s)", device, opt_prec,
            opt_arch, *image_size, cubin ? "CUBIN" : "PTX");
    *is_cubin = cubin;
    return CLNODE_OK;
}

/* ---- programs ---- */

void cu_program_release(cu_program *p)
{
    if (p->lib)
        CU(cudaLibraryUnload)(p->lib);
    memset(p, 0, sizeof *p);
}

/* Threads per block for kernel k: `want`, capped by what the kernel allows, a multiple of 32. */
static clnode_status cu_threads(clnode_context *ctx, cudaKernel_t k, unsigned want,
                                const char *name, unsigned *out)
{
    struct cudaFuncAttributes fa;
    memset(&fa, 0, sizeof fa);
    /* a cudaKernel_t is accepted where a function symbol is expected */
    const cudaError_t e = CU(cudaFuncGetAttributes)(&fa, (const void *)k);
    if (e != cudaSuccess) {
        (void)CU(cudaGetLastError)();
        return cln_fail_native(ctx, (long)e, cu_status(e),
                               "cudaFuncGetAttributes(%s) failed: %s (%d: %s)", name,
                               CU(cudaGetErrorName)(e), (int)e, CU(cudaGetErrorString)(e));
    }
    unsigned t = want;
    if (fa.maxThreadsPerBlock > 0 && (unsigned)fa.maxThreadsPerBlock < t)
        t = (unsigned)fa.maxThreadsPerBlock / 32u * 32u;
    *out = t ? t : 32u;
    return CLNODE_OK;
}

/* Compiles cl/clnode_cuda.cu for the device and `prec` and loads it into p->lib. */
static clnode_status cu_program_load(cuda_backend *cb, clnode_precision prec, cu_program *p)
{
    clnode_context *ctx = cb->proto.base.ctx;
    char *image = NULL;
    size_t image_size = 0;
    int is_cubin = 0;
    char what[48];
    snprintf(what, sizeof what, "the CUDA kernels (%s) with NVRTC", clnode_precision_name(prec));
    const double t_build = cln_build_begin(ctx, cb->proto.base.device_name, what);
    clnode_status st = cln_cuda_compile(ctx, cb->proto.base.device_name, cb->cc_major, cb->cc_minor,
                                        prec, &image, &image_size, &is_cubin);
    cln_build_end(ctx, cb->proto.base.device_name, what, t_build, st == CLNODE_OK);
    if (st != CLNODE_OK)
        return st;
    cudaLibrary_t lib = NULL; /* p->lib stays NULL unless the load succeeds */
    const cudaError_t e = CU(cudaLibraryLoadData)(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
    free(image);
    if (e != cudaSuccess)
        return CU_FAIL(ctx, e, "cudaLibraryLoadData");
    p->lib = lib;
    return CLNODE_OK;
}

/* Kernel `name` of p->lib into *k. */
static clnode_status cu_kernel(clnode_context *ctx, cu_program *p, const char *name,
                               cudaKernel_t *k)
{
    const cudaError_t e = CU(cudaLibraryGetKernel)(k, p->lib, name);
    if (e != cudaSuccess) {
        (void)CU(cudaGetLastError)();
        return cln_fail_native(ctx, (long)e, CLNODE_ERR_BUILD,
                               "cudaLibraryGetKernel(%s) failed: %s (%d)", name,
                               CU(cudaGetErrorName)(e), (int)e);
    }
    return CLNODE_OK;
}

/* Looks p's kernels up in p->lib. */
static clnode_status cu_program_kernels(clnode_context *ctx, cu_program *p)
{
    struct {
        cudaKernel_t *k;
        const char *name;
    } ks[] = {{&p->init, "cln_init"},
              {&p->stage, "cln_stage"},
              {&p->finish, "cln_finish"},
              {&p->bias_act, "cln_bias_act"},
              {&p->count, "cln_count_active"},
              {&p->gemm, "cln_gemm_ordered"},
              {&p->swap, "cln_swap_rows"},
              {&p->bias_act_stage, "cln_bias_act_stage"},
              {&p->scale, "cln_out_scale_pass"},
              {&p->dt0, "cln_dt0"}};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
        const clnode_status st = cu_kernel(ctx, p, ks[i].name, ks[i].k);
        if (st != CLNODE_OK)
            return st;
    }
    for (size_t i = 0; i < CLN_RK_COUNT; ++i) {
        const clnode_status st = cu_kernel(ctx, p, cln_rev_kernel_names[i], &p->rev[i]);
        if (st != CLNODE_OK)
            return st;
    }
    return CLNODE_OK;
}

/* The threads per block of p's kernels. */
static clnode_status cu_program_threads(clnode_context *ctx, cu_program *p)
{
    unsigned t_init = 0, t_count = 0;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cu_threads(ctx, p->init, CU_THREADS, "cln_init", &t_init));
    CLN_TRY(st, cu_threads(ctx, p->finish, CU_THREADS_FINISH, "cln_finish", &p->t_rows));
    if (t_init < p->t_rows)
        p->t_rows = t_init;
    CLN_TRY(st, cu_threads(ctx, p->stage, CU_THREADS, "cln_stage", &p->t_stage));
    CLN_TRY(st, cu_threads(ctx, p->bias_act, CU_THREADS, "cln_bias_act", &p->t_bias));
    CLN_TRY(st,
            cu_threads(ctx, p->bias_act_stage, CU_THREADS, "cln_bias_act_stage", &p->t_bias_stage));
    CLN_TRY(st, cu_threads(ctx, p->count, CU_COUNT_THREADS, "cln_count_active", &t_count));
    CLN_TRY(st, cu_threads(ctx, p->gemm, CU_THREADS, "cln_gemm_ordered", &p->t_gemm));
    CLN_TRY(st, cu_threads(ctx, p->swap, CU_THREADS, "cln_swap_rows", &p->t_swap));
    CLN_TRY(st, cu_threads(ctx, p->scale, CU_THREADS, "cln_out_scale_pass", &p->t_scale));
    CLN_TRY(st, cu_threads(ctx, p->dt0, CU_THREADS_FINISH, "cln_dt0", &p->t_dt0));
    for (size_t i = 0; i < CLN_RK_COUNT; ++i) /* per-row kernels loop over a row: fewer */
        CLN_TRY(st, cu_threads(ctx, p->rev[i],
                               i == CLN_RK_EVENTS || i == CLN_RK_FINISH ? CU_THREADS_FINISH
                                                                        : CU_THREADS,
                               cln_rev_kernel_names[i], &p->t_rev[i]));
    CLN_CHECK(ctx, t_count == CU_COUNT_THREADS, CLNODE_ERR_BUILD,
              "cln_count_active allows %u threads per block, needs %u", t_count, CU_COUNT_THREADS);
fail:
    return st;
}

/* Builds (once) the program of precision `prec`: compiled, loaded, its kernels and threads. */
static clnode_status cu_program_build(cuda_backend *cb, clnode_precision prec, cu_program *p)
{
    clnode_context *ctx = cb->proto.base.ctx;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cu_program_load(cb, prec, p));
    CLN_TRY(st, cu_program_kernels(ctx, p));
    CLN_TRY(st, cu_program_threads(ctx, p));
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "CUDA kernels (%s): threads per block rows %u, stage %u, bias %u",
            clnode_precision_name(prec), p->t_rows, p->t_stage, p->t_bias);
    return CLNODE_OK;
fail:
    cu_program_release(p);
    return st;
}

/* The program cache: the program of precision `prec`, built on first use. */
clnode_status cu_program_get(cuda_backend *cb, clnode_precision prec, cu_program **out)
{
    cu_program *p = &cb->prog[prec == CLNODE_FP64];
    const clnode_status st = p->lib ? CLNODE_OK : cu_program_build(cb, prec, p);
    *out = st == CLNODE_OK ? p : NULL;
    return st;
}
