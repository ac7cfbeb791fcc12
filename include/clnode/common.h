/* clnode/common.h - export macro, version, status codes, precisions and the logger type.
 *
 * Everything here is plain data and free functions; no handle is needed to use it.
 * Thread-safety: every function in this header is thread-safe.
 *
 * Compatibility and SONAME policy. The shared library's SONAME is libclnode.so.<major>, the first
 * number of CLNODE_VERSION_STRING. Within one major version a program built against an older
 * release runs unchanged with any newer one: functions and enum values are only added, and every
 * public struct only grows at its end. Each carries its size in `struct_size`, its first field.
 * - Structs the program fills and passes in: clnode_solve_options, clnode_problem,
 *   clnode_context_options, clnode_model_desc, clnode_mpi_options, clnode_sensitivity_options,
 *   clnode_certify_options and clnode_gradient_options get struct_size from their defaults
 *   functions (macros that pass sizeof); a program's own clnode_method sets it to sizeof itself.
 *   The library reads only the fields the program's size covers; the rest keep their defaults.
 * - Structs the library fills in the program's memory: clnode_trajectory_stats
 *   (clnode_solution_stats), clnode_probe_result (clnode_probe_gemm), clnode_device_facts
 *   (clnode_device_facts_get), clnode_sensitivity_stats (clnode_sensitivity_get),
 *   clnode_judgement (clnode_sensitivity_judge), clnode_certificate_summary
 *   (clnode_certificate_get) and clnode_certificate_sample (clnode_certificate_sample_get). The
 *   functions are macros that pass sizeof; the library writes only the fields that size covers
 *   and sets struct_size to the bytes it wrote.
 * - Structs the library owns and hands out by pointer: clnode_option_info, clnode_device_info and
 *   clnode_backend_info. Their struct_size is sizeof at the library's build, so a program built
 *   against a newer header tests a field with CLNODE_HAS_FIELD before it reads it.
 * A new option or statistic is a field appended at the end of its struct (with its default set in
 * the defaults function), and nothing else changes. A size smaller than the first release's of a
 * struct, or larger than the library knows (a program built against a newer release), is refused
 * with CLNODE_ERR_INVALID_ARGUMENT. Removing, reordering or retyping a field, or changing a
 * signature or a meaning, changes the major version and with it the SONAME.
 */
#ifndef CLNODE_COMMON_H
#define CLNODE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "clnode/version.h"

#if defined(CLNODE_STATIC_DEFINE)
#define CLNODE_API
#elif defined(_WIN32)
#if defined(CLNODE_BUILDING)
#define CLNODE_API __declspec(dllexport)
#else
#define CLNODE_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define CLNODE_API __attribute__((visibility("default")))
#else
#define CLNODE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if the struct *p (any struct with struct_size first) has `field`: the field ends within the
 * struct_size the library set (the policy above). */
#define CLNODE_HAS_FIELD(p, field)                                                                 \
    ((size_t)((const char *)&(p)->field - (const char *)(p)) + sizeof((p)->field) <=               \
     (p)->struct_size)

/* Status codes: 0 is success, errors are negative. One list expands to the enum, the names and
 * the messages, so the three can never disagree. */
#define CLNODE_STATUS_LIST(X)                                                                      \
    X(CLNODE_OK, 0, "success")                                                                     \
    X(CLNODE_ERR_INVALID_ARGUMENT, -1, "invalid argument")                                         \
    X(CLNODE_ERR_OUT_OF_MEMORY, -2, "out of host memory")                                          \
    X(CLNODE_ERR_IO, -3, "file input/output error")                                                \
    X(CLNODE_ERR_BAD_MODEL, -4, "malformed or unsupported model")                                  \
    X(CLNODE_ERR_NONFINITE_INPUT, -5, "non-finite value in the input")                             \
    X(CLNODE_ERR_UNSUPPORTED, -6, "operation not supported by this backend or device")             \
    X(CLNODE_ERR_NO_DEVICE, -7, "no such device")                                                  \
    X(CLNODE_ERR_DEVICE, -8, "device or driver error")                                             \
    X(CLNODE_ERR_DEVICE_MEMORY, -9, "out of device memory")                                        \
    X(CLNODE_ERR_BUILD, -10, "kernel build failed")                                                \
    X(CLNODE_ERR_NO_FP64, -11, "the device has no double-precision support")                       \
    X(CLNODE_ERR_BLAS, -12, "BLAS library error")                                                  \
    X(CLNODE_ERR_PRECISION, -13, "the tolerance is below what the device arithmetic resolves")     \
    X(CLNODE_ERR_INTERNAL, -14, "internal error")                                                  \
    X(CLNODE_ERR_CANCELLED, -15, "cancelled by the caller")

typedef enum clnode_status {
#define CLNODE_X_ENUM(name, value, msg) name = value,
    CLNODE_STATUS_LIST(CLNODE_X_ENUM)
#undef CLNODE_X_ENUM
} clnode_status;

/* Returns the symbolic name of a status ("CLNODE_ERR_IO"), or "CLNODE_UNKNOWN_STATUS".
 * The string is static; never NULL. */
CLNODE_API const char *clnode_status_name(clnode_status status);

/* Returns a short English message for a status ("file input/output error"). The string is static;
 * never NULL. The detailed message of the last failure is clnode_context_last_error(). */
CLNODE_API const char *clnode_status_string(clnode_status status);

/* Returns the library's version as "MAJOR.MINOR.PATCH" (the version of the library actually
 * loaded, which may differ from CLNODE_VERSION_STRING seen at compile time). */
CLNODE_API const char *clnode_version_string(void);

/* Returns CLNODE_VERSION_NUMBER of the library actually loaded. */
CLNODE_API unsigned clnode_version_number(void);

/* State (and time) precision of a solve. */
typedef enum clnode_precision {
    CLNODE_FP32 = 32, /* IEEE binary32; the default, as JAX and PyTorch use */
    CLNODE_FP64 = 64, /* IEEE binary64; needs cl_khr_fp64 on OpenCL devices */
} clnode_precision;

/* Returns "fp32" or "fp64" (or "unknown"). */
CLNODE_API const char *clnode_precision_name(clnode_precision precision);

/* Precision of the vector field's matrix products. */
typedef enum clnode_gemm_mode {
    CLNODE_GEMM_STRICT = 0, /* IEEE arithmetic in the state precision (default) */
    CLNODE_GEMM_TF32 = 1,   /* TF32 inputs (10-bit mantissa), fp32 accumulation; fp32 only */
} clnode_gemm_mode;

/* Returns "strict" or "tf32" (or "unknown"). */
CLNODE_API const char *clnode_gemm_mode_name(clnode_gemm_mode mode);

/* Log levels, most severe first. */
typedef enum clnode_log_level {
    CLNODE_LOG_ERROR = 0,
    CLNODE_LOG_WARN = 1,
    CLNODE_LOG_INFO = 2,
    CLNODE_LOG_DEBUG = 3,
} clnode_log_level;

/* What a logged message is about, so that a program recognises a warning by its code, never by
 * its wording (which may change). One list expands to the enum and the names. */
#define CLNODE_LOG_CODE_LIST(X)                                                                    \
    /* any other message: progress, diagnostics, the text of an error being returned */            \
    X(CLNODE_LOG_GENERAL, 0, "general")                                                            \
    /* before a solve: rtol is below what the device's GEMM resolves (clnode_precision_guard) */   \
    X(CLNODE_LOG_PRECISION_GUARD, 1, "precision_guard")                                            \
    /* after a solve: trajectories ended at the rounding floor (CLNODE_RESULT_PRECISION_FLOOR) */  \
    X(CLNODE_LOG_PRECISION_FLOOR, 2, "precision_floor")                                            \
    /* a kernel build that no cache of the context holds (an OpenCL program, CLBlast's kernels     \
     * for a precision's first GEMM, NVRTC), at level INFO: one line naming the device and what    \
     * it builds before it starts, one with its time when done (the first can take a minute) */    \
    X(CLNODE_LOG_BUILD, 3, "build")

typedef enum clnode_log_code {
#define CLNODE_X_ENUM(name, value, str) name = value,
    CLNODE_LOG_CODE_LIST(CLNODE_X_ENUM)
#undef CLNODE_X_ENUM
} clnode_log_code;

/* "general", "precision_guard", "precision_floor", "build"; "unknown" otherwise. The string is
 * static. */
CLNODE_API const char *clnode_log_code_name(clnode_log_code code);

/* A logger callback. `code` says what the message is about; `message` is one line without a
 * trailing newline, valid only during the call. The callback may be called from any thread that
 * calls into the library with the context that holds it. */
typedef void (*clnode_log_fn)(void *user, clnode_log_level level, clnode_log_code code,
                              const char *message);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_COMMON_H */
