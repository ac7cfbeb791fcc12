/* test_cuda_kernels.c - the CUDA kernels compile: cl/clnode_cuda.cu (with the shared cl/ headers)
 * goes through NVRTC exactly as the CUDA backend compiles it for a device, in fp32 and fp64, for
 * an architecture NVRTC knows (a CUBIN) and for one newer than it knows (PTX for the newest below),
 * and every kernel the backend looks up is in the result, the reverse pass's included. NVRTC needs no GPU and no driver, so
 * this runs wherever the CUDA toolkit is installed (and skips where NVRTC cannot be loaded); the
 * CUDA conformance suite needs a GPU. NVRTC comes through the library's dlopen table. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/cuda/cuda_api.h"
#include "backends/device/device_proto.h" /* the reverse pass's kernel names */
#include "clnode.h"
#include "test_device.h"

static clnode_context *g_ctx;

/* The kernels lib/backends/cuda/cuda.c creates, by name. */
static const char *const kernel_names[] = {
    "cln_init",      "cln_stage",          "cln_finish",
    "cln_bias_act",  "cln_count_active",   "cln_gemm_ordered",
    "cln_swap_rows", "cln_bias_act_stage", "cln_out_scale_pass"};

static int contains(const char *image, size_t size, const char *pat, size_t n)
{
    for (size_t i = 0; i + n <= size; ++i)
        if (memcmp(image + i, pat, n) == 0)
            return 1;
    return 0;
}

/* Whether `name` is a kernel of the image: in a CUBIN its symbol ("\0name\0" in a string table)
 * or its section (".text.name"), in PTX an ".entry name(". */
static int has_kernel(const char *image, size_t size, int is_cubin, const char *name)
{
    char pat[64];
    if (!is_cubin) {
        snprintf(pat, sizeof pat, ".entry %s(", name);
        return contains(image, size, pat, strlen(pat));
    }
    snprintf(pat, sizeof pat, "%c%s", '\0', name);
    if (contains(image, size, pat, strlen(name) + 2)) /* with the NULs around it */
        return 1;
    snprintf(pat, sizeof pat, ".text.%s", name);
    return contains(image, size, pat, strlen(pat) + 1);
}

static void compile_and_check(int cc_major, int cc_minor, clnode_precision prec, int want_cubin)
{
    char *image = NULL;
    size_t size = 0;
    int is_cubin = -1;
    const clnode_status st =
        cln_cuda_compile(g_ctx, "test device", cc_major, cc_minor, prec, &image, &size, &is_cubin);
    if (st != CLNODE_OK)
        fail_msg("compute capability %d.%d, %s: %s: %s", cc_major, cc_minor,
                 clnode_precision_name(prec), clnode_status_name(st),
                 clnode_context_last_error(g_ctx));
    assert_non_null(image);
    assert_true(size > 0);
    assert_int_equal(is_cubin, want_cubin);
    if (is_cubin)
        assert_memory_equal(image, "\177ELF", 4);
    else
        assert_non_null(strstr(image, ".version"));
    for (size_t i = 0; i < sizeof kernel_names / sizeof kernel_names[0]; ++i)
        if (!has_kernel(image, size, is_cubin, kernel_names[i]))
            fail_msg("%s is not in the %s for %d.%d", kernel_names[i], is_cubin ? "CUBIN" : "PTX",
                     cc_major, cc_minor);
    for (size_t i = 0; i < CLN_RK_COUNT; ++i) /* the reverse pass's (device_reverse.c) */
        if (!has_kernel(image, size, is_cubin, cln_rev_kernel_names[i]))
            fail_msg("%s is not in the %s for %d.%d", cln_rev_kernel_names[i],
                     is_cubin ? "CUBIN" : "PTX", cc_major, cc_minor);
    if (prec == CLNODE_FP64 && !is_cubin)
        assert_non_null(strstr(image, ".f64")); /* double arithmetic, not float */
    print_message("  %d.%d %s: %zu-byte %s with all %zu kernels (%d of the reverse pass)\n",
                  cc_major, cc_minor, clnode_precision_name(prec), size, is_cubin ? "CUBIN" : "PTX",
                  sizeof kernel_names / sizeof kernel_names[0] + CLN_RK_COUNT, (int)CLN_RK_COUNT);
    free(image);
}

static void test_known_architectures(void **state)
{
    (void)state;
    /* Ampere and Hopper: NVRTC 12 knows both and emits device code directly */
    for (int p = 0; p < 2; ++p) {
        compile_and_check(8, 0, p ? CLNODE_FP64 : CLNODE_FP32, 1);
        compile_and_check(9, 0, p ? CLNODE_FP64 : CLNODE_FP32, 1);
    }
}

static void test_future_architecture(void **state)
{
    (void)state;
    /* a device newer than this NVRTC: PTX for the newest architecture it knows, JIT-compiled by
     * the driver */
    compile_and_check(99, 0, CLNODE_FP32, 0);
    compile_and_check(99, 0, CLNODE_FP64, 0);
}

static void test_too_old(void **state)
{
    (void)state;
    char *image = (char *)"sentinel";
    size_t size = 1;
    int is_cubin = 1;
    const clnode_status st =
        cln_cuda_compile(g_ctx, "old device", 1, 0, CLNODE_FP32, &image, &size, &is_cubin);
    assert_int_equal(st, CLNODE_ERR_BUILD);
    assert_null(image);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "compute capability 1.0"));
}

/* The loader opened each library under its versioned name (libnvrtc.so.13 for CUDA 13 headers),
 * the name the headers' ABI belongs to: asked of the dynamic loader, not of clnode. */
static void assert_versioned(const void *fn, const char *base)
{
    Dl_info info;
    memset(&info, 0, sizeof info);
    assert_true(dladdr(fn, &info) != 0);
    const char *name = strrchr(info.dli_fname, '/');
    name = name ? name + 1 : info.dli_fname;
    char want[64];
    snprintf(want, sizeof want, "%s.%d", base, CUDART_VERSION / 1000);
    printf("%s: %s\n", base, info.dli_fname);
    assert_string_equal(name, want);
}

static void test_loaded_versioned(void **state)
{
    (void)state;
    void *p = NULL;
    memcpy(&p, &cln_cu.nvrtcCompileProgram, sizeof p);
    assert_versioned(p, "libnvrtc.so");
    char why[512];
    if (cln_cuda_load_runtime(why, sizeof why) != CLNODE_OK) {
        printf("runtime not loadable: %s\n", why);
        return;
    }
    memcpy(&p, &cln_cu.cudaMalloc, sizeof p);
    assert_versioned(p, "libcudart.so");
    memcpy(&p, &cln_cu.cublasGemmEx, sizeof p);
    assert_versioned(p, "libcublas.so");
}

int main(void)
{
    /* NVRTC is loaded at run time (cuda_api.h): on a machine without it there is nothing to test */
    char why[512];
    if (cln_cuda_load_nvrtc(why, sizeof why) != CLNODE_OK) {
        return test_device_absent("cuda", why);
    }
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = "host";
    if (clnode_context_create(&o, &g_ctx) != CLNODE_OK) {
        fprintf(stderr, "cannot create a host context\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_architectures),
        cmocka_unit_test(test_future_architecture),
        cmocka_unit_test(test_too_old),
        cmocka_unit_test(test_loaded_versioned),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
