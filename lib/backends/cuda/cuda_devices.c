/* cuda_devices.c - the CUDA backend's devices: the current device of the calling thread, the
 * environment a strict solve needs, the device list, the device's description and cuBLAS set-up. */
#include "backends/cuda/cuda_internal.h"

/* Makes the backend's device current for the calling thread (the runtime API's current device
 * is per thread). */
clnode_status cu_bind(cuda_backend *cb)
{
    int cur = -1;
    if (CU(cudaGetDevice)(&cur) == cudaSuccess && cur == cb->dev)
        return CLNODE_OK;
    CU_CHECK(cb->proto.base.ctx, "cudaSetDevice", CU(cudaSetDevice)(cb->dev));
    return CLNODE_OK;
}

/* ---- environment: strict must be strict ---- */

/* Called at every backend creation, before this backend's cuBLAS handle exists.
 *
 * NVIDIA_TF32_OVERRIDE: the cuBLAS documentation defines only the value 0 ("will override any
 * defaults or programmatic configuration of NVIDIA libraries": no TF32 anywhere). clnode does not
 * need it for strictness, because the strict mode uses pedantic compute types, which never use
 * TF32; and setting it would silently turn the opt-in tf32 mode (which exists to reproduce TF32
 * effects) into full fp32. So: "0" is the user's explicit choice and is kept (the tf32 mode is
 * then noted as computing in fp32); any other value has no documented meaning, so it is removed
 * with a warning, which restores the documented default (no override) rather than guessing.
 *
 * CUBLAS_EMULATE_SINGLE_PRECISION / _DOUBLE_PRECISION (CUDA >= 12.9 / 13.0u2) switch FP32 and
 * FP64 GEMMs to BF16x9 or fixed-point (Ozaki) emulation "without code changes"; the emulation is
 * not IEEE-754 compliant, and the documentation does not say whether pedantic compute types win
 * over these variables. CUBLAS_EMULATION_STRATEGY overrides even a strategy set by a function
 * call, and the mantissa-bit count and special-value mask configure the emulation. All are
 * removed (a warning unless the value was the harmless "0").
 *
 * Caveats: setenv/unsetenv are not thread-safe against concurrent getenv in other threads of the
 * process; and a library that read these variables before this call (e.g. when it was loaded)
 * keeps what it read. The precision probes (identity and k = 1 GEMMs) are the real check. */
void cu_sanitize_env(clnode_context *ctx, cuda_backend *cb)
{
    const char *v = getenv("NVIDIA_TF32_OVERRIDE");
    if (v && strcmp(v, "0") == 0) {
        cb->tf32_off = 1;
        cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
                "NVIDIA_TF32_OVERRIDE=0 is set: cuBLAS uses no TF32, so the tf32 GEMM mode "
                "computes in full fp32 on this device (strict is unaffected)");
    } else if (v) {
        cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                "NVIDIA_TF32_OVERRIDE=\"%.40s\" has no documented meaning (only 0 is "
                "documented); unsetting it so that clnode's GEMM mode alone decides on TF32",
                v);
        unsetenv("NVIDIA_TF32_OVERRIDE");
    }
    static const char *const vars[] = {
        "CUBLAS_EMULATE_SINGLE_PRECISION",
        "CUBLAS_EMULATE_DOUBLE_PRECISION",
        "CUBLAS_EMULATION_STRATEGY",
        "CUBLAS_EMULATION_SPECIAL_VALUES_SUPPORT_MASK",
        "CUBLAS_FIXEDPOINT_EMULATION_MANTISSA_BIT_COUNT",
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) {
        v = getenv(vars[i]);
        if (!v)
            continue;
        if (strcmp(v, "0") == 0)
            cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
                    "%s=0: unsetting it (no emulation either way)", vars[i]);
        else
            cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                    "%s=\"%.40s\" would let cuBLAS emulate FP32/FP64 GEMMs (not IEEE-754); "
                    "unsetting it (strict GEMMs must be IEEE)",
                    vars[i], v);
        unsetenv(vars[i]);
    }
}

/* ---- devices ---- */

/* Whether a failure of cudaGetDeviceCount means "no usable NVIDIA driver or device here". */
static int cu_absent(cudaError_t e)
{
    return cu_status(e) == CLNODE_ERR_NO_DEVICE || e == cudaErrorInitializationError ||
           e == cudaErrorNotPermitted || e == cudaErrorSystemNotReady;
}

/* "driver for CUDA 13.0" or "no NVIDIA driver found" for messages. */
static void cu_driver_string(char *buf, size_t n)
{
    int v = 0;
    if (CU(cudaDriverGetVersion)(&v) == cudaSuccess && v > 0)
        snprintf(buf, n, "driver for CUDA %d.%d", v / 1000, (v % 1000) / 10);
    else
        snprintf(buf, n, "no NVIDIA driver found");
    (void)CU(cudaGetLastError)();
}

/* Whether CUDA can run here: its libraries load (cuda_api.h) and the runtime finds a driver. A
 * driver without a GPU is available (with no device). */
clnode_status cu_available(char *why, size_t size)
{
    clnode_status st = cln_cuda_load_runtime(why, size);
    if (st == CLNODE_OK)
        st = cln_cuda_load_nvrtc(why, size);
    if (st != CLNODE_OK)
        return st;
    int count = 0;
    const cudaError_t e = CU(cudaGetDeviceCount)(&count);
    (void)CU(cudaGetLastError)();
    if (e != cudaSuccess && cu_absent(e) && e != cudaErrorNoDevice) {
        char drv[64];
        int rt = 0;
        cu_driver_string(drv, sizeof drv);
        CU(cudaRuntimeGetVersion)(&rt);
        snprintf(why, size, "%s (%s, %d; %s; clnode uses the CUDA %d.%d runtime)",
                 CU(cudaGetErrorString)(e), CU(cudaGetErrorName)(e), (int)e, drv, rt / 1000,
                 (rt % 1000) / 10);
        return CLNODE_ERR_NO_DEVICE;
    }
    return CLNODE_OK;
}

/* Adds every CUDA device, once per engine ("cuda:N" and "cuda:N:cublas"). */
clnode_status cu_list(clnode_context *ctx, cln_device_sink *sink)
{
    int count = 0;
    const cudaError_t e = CU(cudaGetDeviceCount)(&count);
    if (e != cudaSuccess) {
        (void)CU(cudaGetLastError)();
        if (cu_absent(e)) {
            char drv[64];
            cu_driver_string(drv, sizeof drv);
            cln_device_sink_note(sink, "no CUDA device: %s (%s, %d)", CU(cudaGetErrorString)(e),
                                 drv, (int)e);
            return CLNODE_OK;
        }
        return CU_FAIL(ctx, e, "cudaGetDeviceCount");
    }
    for (int i = 0; i < count; ++i) {
        struct cudaDeviceProp prop;
        memset(&prop, 0, sizeof prop);
        CU_CHECK(ctx, "cudaGetDeviceProperties", CU(cudaGetDeviceProperties)(&prop, i));
        prop.name[sizeof prop.name - 1] = '\0';
        for (int e = 0; e < 2; ++e) {
            clnode_device_info *d = cln_device_sink_add(sink, e == 0);
            if (!d)
                return CLNODE_ERR_OUT_OF_MEMORY;
            snprintf(d->spec, sizeof d->spec, e ? "cuda:%d:cublas" : "cuda:%d", i);
            snprintf(d->engine, sizeof d->engine, "%s",
                     e ? "cuBLAS (pedantic)" : "ordered FMA GEMM");
            snprintf(d->name, sizeof d->name, "%s", prop.name);
            snprintf(d->vendor, sizeof d->vendor, "NVIDIA Corporation");
            d->cc_major = prop.major;
            d->cc_minor = prop.minor;
            d->global_mem = (unsigned long long)prop.totalGlobalMem;
            d->fp64 = 1;
        }
    }
    if (count == 0)
        cln_device_sink_note(sink, "no CUDA device: the driver reports none");
    return CLNODE_OK;
}

/* The device ordinal `index`, checked against the devices present. */
clnode_status cu_check_index(clnode_context *ctx, const char *spec, long index)
{
    int count = 0;
    const cudaError_t e = CU(cudaGetDeviceCount)(&count);
    if (e != cudaSuccess) {
        char drv[64];
        (void)CU(cudaGetLastError)();
        cu_driver_string(drv, sizeof drv);
        return cln_fail_native(ctx, (long)e, CLNODE_ERR_NO_DEVICE,
                               "no CUDA device \"%s\": %s (%s, %d; %s)", spec,
                               CU(cudaGetErrorString)(e), CU(cudaGetErrorName)(e), (int)e, drv);
    }
    CLN_CHECK(ctx, count > 0, CLNODE_ERR_NO_DEVICE,
              "no CUDA device \"%s\": the driver reports none", spec);
    CLN_CHECK(ctx, index < count, CLNODE_ERR_NO_DEVICE,
              "no CUDA device \"%s\": %d device%s (cuda:0 to cuda:%d)", spec, count,
              count == 1 ? "" : "s", count - 1);
    return CLNODE_OK;
}

/* The device's name and architecture, into the backend and the log. */
clnode_status cu_describe(cuda_backend *cb)
{
    clnode_context *ctx = cb->proto.base.ctx;
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    CU_CHECK(ctx, "cudaGetDeviceProperties", CU(cudaGetDeviceProperties)(&prop, cb->dev));
    prop.name[sizeof prop.name - 1] = '\0';
    cb->cc_major = prop.major;
    cb->cc_minor = prop.minor;
    int drv = 0, rt = 0;
    CU(cudaDriverGetVersion)(&drv);
    CU(cudaRuntimeGetVersion)(&rt);
    snprintf(cb->proto.base.device_name, sizeof cb->proto.base.device_name,
             "%.160s (CUDA %d.%d, sm_%d%d, %llu GiB, %s GEMM)", prop.name, drv / 1000,
             (drv % 1000) / 10, prop.major, prop.minor,
             (unsigned long long)(prop.totalGlobalMem >> 30),
             cb->cublas_strict ? "cuBLAS pedantic" : "ordered FMA");
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
            "CUDA device %d: %s; %d SMs; driver CUDA %d.%d, runtime %d.%d", cb->dev,
            cb->proto.base.device_name, prop.multiProcessorCount, drv / 1000, (drv % 1000) / 10,
            rt / 1000, (rt % 1000) / 10);
    return CLNODE_OK;
}

/* The backend's cuBLAS handle on its stream, in the pedantic math mode (checked). */
clnode_status cu_blas_setup(cuda_backend *cb)
{
    clnode_context *ctx = cb->proto.base.ctx;
    BLAS_CHECK(ctx, "cublasCreate", CU(cublasCreate)(&cb->blas));
    BLAS_CHECK(ctx, "cublasSetStream", CU(cublasSetStream)(cb->blas, cb->stream));
    BLAS_CHECK(ctx, "cublasSetMathMode (pedantic)",
               CU(cublasSetMathMode)(cb->blas, CUBLAS_PEDANTIC_MATH));
    cublasMath_t mm = CUBLAS_DEFAULT_MATH;
    BLAS_CHECK(ctx, "cublasGetMathMode", CU(cublasGetMathMode)(cb->blas, &mm));
    CLN_CHECK(ctx, mm == CUBLAS_PEDANTIC_MATH, CLNODE_ERR_BLAS,
              "cuBLAS refused the pedantic math mode (has %d)", (int)mm);
    cb->math = mm;
    int ver = 0;
    if (CU(cublasGetVersion)(cb->blas, &ver) == CUBLAS_STATUS_SUCCESS)
        cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL,
                "cuBLAS %d.%d.%d, pedantic math (strict GEMMs in IEEE fp32/fp64)", ver / 10000,
                (ver / 100) % 100, ver % 100);
    return CLNODE_OK;
}
