/* cuda_api.c - loading the CUDA runtime, cuBLAS and NVRTC at run time (see cuda_api.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_api.h"

cln_cuda_api cln_cu;

#define CLN_CU_STR_(x) #x
#define CLN_CU_STR(x) CLN_CU_STR_(x)
/* The major version of the headers this file is compiled with (13 for CUDA 13.0). */
#define CLN_CU_MAJOR (CUDART_VERSION / 1000)

/* Where each entry point's pointer lives in cln_cu, under the name its header gives it. */
typedef struct cu_sym {
    const char *name;
    size_t offset;
} cu_sym;
#define CLN_CU_SYM(f) {CLN_CU_STR(f), offsetof(cln_cuda_api, f)},
static const cu_sym cu_runtime_syms[] = {CLN_CUDART_FNS(CLN_CU_SYM)};
static const cu_sym cu_cublas_syms[] = {CLN_CUBLAS_FNS(CLN_CU_SYM)};
static const cu_sym cu_nvrtc_syms[] = {CLN_NVRTC_FNS(CLN_CU_SYM)};
#undef CLN_CU_SYM

/* One library: the major versions of its file name tried in order (0: the unversioned name),
 * its entry points, and the outcome of loading. */
typedef struct cu_lib {
    const char *base; /* "libcudart.so" */
    int majors[3];
    const cu_sym *syms;
    size_t num_syms;
    char name[64]; /* the file name in use (or the first one tried) */
    void *handle;
    clnode_status status;
    char why[512];
} cu_lib;

#define CU_SYMS(a) .syms = a, .num_syms = sizeof a / sizeof a[0]
static cu_lib cu_runtime = {
    .base = "libcudart.so", .majors = {CLN_CU_MAJOR, 0, 0}, CU_SYMS(cu_runtime_syms)};
static cu_lib cu_cublas = {
    .base = "libcublas.so", .majors = {CLN_CU_MAJOR, 12, 0}, CU_SYMS(cu_cublas_syms)};
static cu_lib cu_nvrtc = {
    .base = "libnvrtc.so", .majors = {CLN_CU_MAJOR, 12, 0}, CU_SYMS(cu_nvrtc_syms)};

/* dlopen of `name` in `dir` ("": the dynamic loader's own search); 1 when loaded. The first
 * failure is kept for the message. */
static int cu_try(cu_lib *l, const char *dir, const char *name, char *first, size_t first_size)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", dir, dir[0] ? "/" : "", name);
    l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (l->handle || !first[0]) {
        const char *e = l->handle ? NULL : dlerror();
        snprintf(l->name, sizeof l->name, "%s", name);
        snprintf(first, first_size, "%s", e ? e : "unknown error");
    }
    return l->handle != NULL;
}

/* dlopen's first candidate that exists: each major version in turn (the unversioned name last),
 * through the dynamic loader's search, then in $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
 * /usr/local/cuda/lib64 (a toolkit the loader is not configured for); then every entry point. On
 * failure `l->why` says why and nothing of the library is kept. */
static void cu_lib_open(cu_lib *l)
{
    char first[256] = "", name[64], home[256] = "", path[256] = "";
    const char *env = getenv("CUDA_HOME");
    if (env && env[0])
        snprintf(home, sizeof home, "%s/lib64", env);
    env = getenv("CUDA_PATH");
    if (env && env[0])
        snprintf(path, sizeof path, "%s/lib64", env);
    const char *const dirs[] = {"", home, path, "/usr/local/cuda/lib64"};
    for (size_t i = 0; i < sizeof l->majors / sizeof l->majors[0] && !l->handle; ++i) {
        if (l->majors[i])
            snprintf(name, sizeof name, "%s.%d", l->base, l->majors[i]);
        else
            snprintf(name, sizeof name, "%s", l->base);
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !l->handle; ++d)
            if (d == 0 || dirs[d][0])
                cu_try(l, dirs[d], name, first, sizeof first);
        if (!l->majors[i])
            break; /* the unversioned name comes last */
    }
    l->status = CLNODE_ERR_NO_DEVICE;
    if (!l->handle) {
        snprintf(l->why, sizeof l->why, "cannot load %s (%s)", l->name, first);
        return;
    }
    for (size_t i = 0; i < l->num_syms; ++i) {
        void *p = dlsym(l->handle, l->syms[i].name);
        if (!p) {
            snprintf(l->why, sizeof l->why, "%s has no %s (CUDA >= 12.0 is needed)", l->name,
                     l->syms[i].name);
            dlclose(l->handle);
            l->handle = NULL;
            return;
        }
        /* POSIX: a function's address from dlsym is stored through its object representation */
        memcpy((char *)&cln_cu + l->syms[i].offset, &p, sizeof p);
    }
    l->status = CLNODE_OK;
}

static void cu_load_runtime_once(void)
{
    cu_lib_open(&cu_runtime);
    if (cu_runtime.status != CLNODE_OK)
        return;
    /* the structs of the runtime API (cudaDeviceProp, ...) change between major versions */
    int rt = 0;
    if (cln_cu.cudaRuntimeGetVersion(&rt) != cudaSuccess || rt / 1000 != CLN_CU_MAJOR) {
        cu_runtime.status = CLNODE_ERR_NO_DEVICE;
        snprintf(cu_runtime.why, sizeof cu_runtime.why,
                 "%s is the CUDA %d.%d runtime, but this clnode was built for CUDA %d (install "
                 "the CUDA %d runtime)",
                 cu_runtime.name, rt / 1000, (rt % 1000) / 10, CLN_CU_MAJOR, CLN_CU_MAJOR);
        return;
    }
    cu_lib_open(&cu_cublas);
    if (cu_cublas.status != CLNODE_OK) {
        cu_runtime.status = cu_cublas.status;
        snprintf(cu_runtime.why, sizeof cu_runtime.why, "%s", cu_cublas.why);
    }
}

static void cu_load_nvrtc_once(void)
{
    cu_lib_open(&cu_nvrtc);
}

static clnode_status cu_result(const cu_lib *l, char *why, size_t why_size)
{
    if (why && why_size)
        snprintf(why, why_size, "%s", l->status == CLNODE_OK ? "" : l->why);
    return l->status;
}

clnode_status cln_cuda_load_runtime(char *why, size_t why_size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cu_load_runtime_once);
    return cu_result(&cu_runtime, why, why_size);
}

clnode_status cln_cuda_load_nvrtc(char *why, size_t why_size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cu_load_nvrtc_once);
    return cu_result(&cu_nvrtc, why, why_size);
}
