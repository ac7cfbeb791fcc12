/* clnode/devices.h - what this build and this machine offer: the backends compiled in and every
 * device they can reach, named by the strings clnode_context_options.device accepts.
 *
 * Listing is cheap: no context is created and no kernel is built (OpenCL and CUDA are asked for
 * their device lists and properties only). Thread-safety: a list is immutable once created and may
 * be read from any thread; creating lists concurrently is safe as far as the drivers are.
 */
#ifndef CLNODE_DEVICES_H
#define CLNODE_DEVICES_H

#include "clnode/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One way to run a solve: a device together with the engine of its strict GEMMs. The host and
 * each CUDA device appear twice ("host" and "host:openblas", "cuda:N" and "cuda:N:cublas"), and
 * the host once more for each ISA of its ordered GEMM that this machine runs ("host:avx512",
 * "host:avx2", "host:portable"). The library allocates it: fields are only ever appended, and a
 * field ends before struct_size when this library has it. */
typedef struct clnode_device_info {
    size_t struct_size;            /* sizeof(clnode_device_info) where the library was compiled */
    char spec[64];                 /* the device string: "host", "host:openblas", "opencl:0",
                                      "cuda:0", "cuda:0:cublas" */
    char backend[16];              /* "host", "opencl" or "cuda" */
    char engine[64];               /* the strict GEMM: "ordered FMA GEMM", "OpenBLAS", "CLBlast",
                                      "cuBLAS (pedantic)" */
    char name[256];                /* device (host: the CPU model), "" if unknown */
    char vendor[256];              /* "" if unknown */
    char platform[256];            /* the OpenCL platform; "" for other backends */
    char driver_version[128];      /* OpenCL driver version; "" if unknown */
    char opencl_c_version[32];     /* "1.2" for OpenCL devices, "" otherwise */
    int cc_major, cc_minor;        /* CUDA compute capability; 0 for other backends */
    unsigned compute_units;        /* OpenCL compute units, host logical CPUs; 0 if unknown */
    unsigned long long global_mem; /* bytes (host: physical memory); 0 if unknown */
    int fp64;                      /* 1 if float64 solves are possible on it */
} clnode_device_info;

/* Capabilities every device of a backend has (clnode_backend_info.capabilities). */
enum {
    CLNODE_BACKEND_FP64 = 1u,        /* every device computes in fp64 (OpenCL: per device) */
    CLNODE_BACKEND_NATIVE_TF32 = 2u, /* the tf32 GEMM mode runs on TF32 hardware (cuBLAS tensor
                                        cores); otherwise it is emulated in fp32 */
};

/* What became of one backend when the devices were listed. The library allocates it: fields are
 * only ever appended, and a field ends before struct_size when this library has it. */
typedef struct clnode_backend_info {
    size_t struct_size;    /* sizeof(clnode_backend_info) where the library was compiled */
    char name[16];         /* "host", "opencl" or "cuda" */
    int built;             /* 1 if this build of clnode has the backend */
    clnode_status status;  /* outcome of asking it for devices; CLNODE_OK also when it has none */
    size_t num_devices;    /* entries of the list from this backend (engines counted separately) */
    char note[512];        /* why it has no device ("no OpenCL platform found ...", "not
                              available: cannot load libcudart.so.13 ..."), or ""; never NULL */
    unsigned capabilities; /* CLNODE_BACKEND_* flags (0 for a backend not built) */
} clnode_backend_info;

typedef struct clnode_device_list clnode_device_list;

/* Lists the backends of this build ("host", "opencl", "cuda", always in that order, built or not)
 * and every device they reach, in the order of their indices ("opencl:N", "cuda:N").
 * A backend whose driver is missing or fails is reported in its clnode_backend_info, not as an
 * error of this function. `log` (may be NULL) receives the drivers' messages.
 * Returns CLNODE_OK and stores the list in *out, or CLNODE_ERR_INVALID_ARGUMENT (out is NULL) /
 * CLNODE_ERR_OUT_OF_MEMORY and stores NULL. Blocking: may load and initialise device drivers. */
CLNODE_API clnode_status clnode_device_list_create(clnode_log_fn log, void *log_user,
                                                   clnode_device_list **out);

/* Destroys a list and sets *list to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_device_list_destroy(clnode_device_list **list);

/* Number of devices (with their engines) in the list; 0 for NULL. */
CLNODE_API size_t clnode_device_list_count(const clnode_device_list *list);

/* Device i (< count), valid for the life of the list; NULL if out of range. */
CLNODE_API const clnode_device_info *clnode_device_list_get(const clnode_device_list *list,
                                                            size_t i);

/* Number of backends described: host, opencl and cuda, built or not (0 for NULL;
 * test_devices.c checks them). */
CLNODE_API size_t clnode_device_list_num_backends(const clnode_device_list *list);

/* Backend i (< num_backends), valid for the life of the list; NULL if out of range. */
CLNODE_API const clnode_backend_info *clnode_device_list_backend(const clnode_device_list *list,
                                                                 size_t i);

/* The device strings clnode_context_options.device accepts in this build, one form per line with
 * what it selects ("  opencl:N          OpenCL device N (all platforms, in the ICD loader's
 * order)\n"; a backend not built is named with how to build it). This text and every error about
 * a device string come from the same registry of backends. Writes at most `size` bytes with a
 * terminating NUL (snprintf semantics; buf may be NULL when size is 0) and returns the length of
 * the whole text. Thread-safe; loads no driver. */
CLNODE_API size_t clnode_device_help(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_DEVICES_H */
