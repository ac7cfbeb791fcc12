/* lib/backends/cuda/: the CUDA backend: the ordered GEMM kernel or cuBLAS and cl/clnode_cuda.cu
 * through NVRTC, with every CUDA library loaded at run time (cuda_api.c). */
/* cuda.c - the CUDA backend: cuBLAS GEMMs with an explicit precision plus the kernels of
 * cl/clnode_cuda.cu (the shared arithmetic of cl/, embedded into the library at build time and
 * compiled at run time by NVRTC) on one stream.
 *
 * Device selection (the forms cu_forms registers): a device ordinal in the CUDA runtime's order
 * (CUDA_VISIBLE_DEVICES applies; default 0), optionally followed by ":cublas".
 *
 * API choice: the CUDA *runtime* API (libcudart) with its library-management calls
 * (cudaLibraryLoadData, cudaLibraryGetKernel, cudaLaunchKernel on the kernel handle, CUDA >= 12.0),
 * cuBLAS and NVRTC, all loaded at run time with dlopen (cuda_api.h): libclnode links none of them,
 * so one build loads and runs on every machine, and "cuda" reports "not available: <reason>"
 * (CLNODE_ERR_NO_DEVICE) where the libraries, the driver (libcuda.so.1, which the runtime loads
 * itself) or a GPU are missing.
 *
 * Programs: NVRTC compiles cl/clnode_cuda.cu once per (backend = device, precision), lazily on the
 * first solve of that precision, with -DCLN_PRECISION=32|64 --fmad=false --ftz=false
 * --prec-div=true --prec-sqrt=true (IEEE operations, no contraction: the same rounding as the host
 * and the OpenCL kernels), to a CUBIN for the device's exact architecture, or to PTX for the
 * newest architecture NVRTC knows when the device is newer than this NVRTC (the driver then
 * JIT-compiles it). Build logs go to the logger.
 *
 * GEMM engines. Strict GEMMs run by default in cln_gemm_ordered (cl/clnode_cuda.cu): every element
 * summed in order with fma, the same sums as the host's ordered GEMM and CLBlast's kernel, so a
 * CUDA device takes the same steps as the host, bit for bit. "cuda:N:cublas" runs them through
 * cuBLAS instead (its kernels choose their own summation order, possibly per batch size), and the
 * tf32 mode always uses cuBLAS's tensor cores:
 * GEMM precision (cuBLAS, row-major C = A . B^T computed as the column-major C^T = B . A^T):
 *   strict fp32  cublasGemmEx, CUBLAS_COMPUTE_32F_PEDANTIC, handle in CUBLAS_PEDANTIC_MATH;
 *   strict fp64  CUBLAS_COMPUTE_64F_PEDANTIC, CUBLAS_PEDANTIC_MATH;
 *   tf32 (fp32)  CUBLAS_COMPUTE_32F_FAST_TF32, handle in CUBLAS_DEFAULT_MATH (opt-in TF32).
 * Pedantic compute types use "the prescribed precision for all phases" and exclude tensor-core
 * down-conversions and the CUDA 12.9+/13 emulations; the emulation environment variables are
 * cleared at creation anyway (see cu_sanitize_env).
 *
 * Batch invariance: cuBLAS may choose another kernel (tile shape, split-K) for another number of
 * rows, so a trajectory can differ in the last bits between batch sizes (the host backend avoids
 * that with fixed 16-row calls). Every call is deterministic run to run (one stream, one handle).
 *
 * During a solve the ops only enqueue work on the stream; buf_read and count_active are the only
 * waits (counted in be->syncs). Nothing is allocated per step. All calls first make the backend's
 * device current for the calling thread (cudaSetDevice when needed), so a context may be used
 * from any thread, one thread at a time.
 */
#include "backends/cuda/cuda_internal.h"

/* ---- backend ops ---- */

static void cu_destroy(cln_backend *be)
{
    if (!be)
        return;
    cuda_backend *cb = cub(be);
    /* best effort: a failure here leaves nothing better to do than to go on freeing */
    if (CU(cudaSetDevice)(cb->dev) == cudaSuccess && (cb->stream || cb->adopted))
        CU(cudaStreamSynchronize)(cb->stream);
    for (int i = 0; i < 2; ++i)
        cu_program_release(&cb->prog[i]);
    if (cb->blas)
        CU(cublasDestroy)(cb->blas);
    if (cb->count_dev)
        CU(cudaFree)(cb->count_dev);
    if (cb->count_host)
        CU(cudaFreeHost)(cb->count_host);
    if (cb->stream && !cb->adopted)
        CU(cudaStreamDestroy)(cb->stream);
    (void)CU(cudaGetLastError)();
    free(cb);
}

static int cu_supports(const cln_backend *be, clnode_precision prec)
{
    (void)be;
    return prec == CLNODE_FP32 || prec == CLNODE_FP64; /* every CUDA device has fp64 */
}

/* NVIDIA GPUs: IEEE fp64 and fp32 FMA; the kernels are compiled with --ftz=false and
 * --prec-div=true --prec-sqrt=true (cl/cln_prelude.h), so denormals are kept and division and
 * sqrt are correctly rounded. */
static void cu_facts(const cln_backend *be, clnode_device_facts *out)
{
    (void)be;
    out->fp64 = 1;
    out->fma = 1;
    out->denormals = 1;
    out->correctly_rounded_div_sqrt = 1;
}

static const cln_backend_ops cuda_ops = {
    .name = "cuda",
    .tf32 = CLN_TF32_TENSOR_CORES,
    .destroy = cu_destroy,
    .supports = cu_supports,
    .buf_alloc = cu_buf_alloc,
    .buf_free = cu_buf_free,
    .buf_adopt = cu_buf_adopt,
    .buf_write = cu_buf_write,
    .buf_read = cu_buf_read,
    .gemm = cu_gemm,
    CLN_DEV_PROTO_OPS, /* the device protocol's ops (device_proto.h) */
    CLN_DEV_REV_OPS,   /* and its reverse pass (device_reverse.h) */
    CLN_DEV_TAN_OPS,   /* and its tangent pass (device_tangent.h) */
    .facts = cu_facts,
};

/* The forms of "cuda" device strings (lib/backends/registry.h). */
enum {
    CU_ORDERED, /* strict GEMMs in cln_gemm_ordered */
    CU_CUBLAS   /* strict GEMMs through cuBLAS (pedantic) */
};
static const cln_device_form cu_forms[] = {
    {"", CU_ORDERED,
     "the first NVIDIA GPU: the ordered GEMM kernel and the cl/ arithmetic (NVRTC)"},
    {"N", CU_ORDERED, "NVIDIA GPU N (CUDA's order; CUDA_VISIBLE_DEVICES applies)"},
    {"cublas", CU_CUBLAS, "the first NVIDIA GPU with cuBLAS GEMMs (pedantic: no TF32)"},
    {"N:cublas", CU_CUBLAS, "NVIDIA GPU N with cuBLAS GEMMs (pedantic: no TF32)"},
};

/* The backend on device `index` (checked; `spec` names it in messages), with strict GEMMs in the
 * ordered kernel or through cuBLAS (`variant`), on a stream of its own (adopted 0) or on the
 * caller's `stream` (adopted 1: never destroyed; may be NULL, the legacy default stream). */
clnode_status cu_open(clnode_context *ctx, const char *spec, long index, int variant,
                      cudaStream_t stream, int adopted, cln_backend **out)
{
    *out = NULL;
    clnode_status st = cu_check_index(ctx, spec, index);
    if (st != CLNODE_OK)
        return st;
    cuda_backend *cb = calloc(1, sizeof *cb);
    CLN_CHECK(ctx, cb, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the CUDA backend");
    cb->proto.base.ops = &cuda_ops;
    cb->proto.launch = &cu_launches;
    cb->proto.base.ctx = ctx;
    cb->proto.base.group_steps = 8;
    cb->proto.base.row_align = 1;
    cb->dev = (int)index;
    cb->cublas_strict = variant == CU_CUBLAS;
    cb->math = CUBLAS_DEFAULT_MATH; /* a new handle's mode; set to pedantic below */

    /* before the first cuBLAS handle of this backend */
    cu_sanitize_env(ctx, cb);

    CLN_TRY(st, CU_STATUS(ctx, "cudaSetDevice", CU(cudaSetDevice)(cb->dev)));
    CLN_TRY(st, cu_describe(cb));
    if (adopted) {
        cb->stream = stream;
        cb->adopted = 1;
    } else {
        CLN_TRY(st, CU_STATUS(ctx, "cudaStreamCreateWithFlags (the context's stream)",
                              CU(cudaStreamCreateWithFlags)(&cb->stream, cudaStreamNonBlocking)));
    }
    CLN_TRY(st, CU_STATUS(ctx, "cudaMalloc (the active count)",
                          CU(cudaMalloc)((void **)&cb->count_dev, sizeof(int))));
    CLN_TRY(st, CU_STATUS(ctx, "cudaMallocHost (the active count's read-back)",
                          CU(cudaMallocHost)((void **)&cb->count_host, sizeof(int))));
    *cb->count_host = 0;
    CLN_TRY(st, cu_blas_setup(cb));
    *out = &cb->proto.base;
    return CLNODE_OK;
fail:
    cu_destroy(&cb->proto.base);
    return st;
}

static clnode_status cu_create(clnode_context *ctx, const cln_device_sel *sel, cln_backend **out)
{
    return cu_open(ctx, sel->spec, sel->index >= 0 ? sel->index : 0, sel->variant, NULL, 0, out);
}

const cln_backend_desc cln_cuda_backend = {
    .name = "cuda",
    .caps = CLN_CAP_FP64 | CLN_CAP_NATIVE_TF32,
    .forms = cu_forms,
    .num_forms = sizeof cu_forms / sizeof cu_forms[0],
    .available = cu_available,
    .create = cu_create,
    .list = cu_list,
};
