/* registry.h - the one list of backends: each registers its name, the device strings it accepts,
 * its capabilities, its device enumeration and its constructor (a cln_backend_desc).
 *
 * The registry alone parses device strings ("host", "opencl:1", "cuda:0:cublas", ...) against the
 * forms the backends register, and generates from them the help text (clnode_device_help) and
 * every message about a malformed or unknown device string. A backend receives the parsed form
 * (cln_device_sel) and only matches it against its devices. Backends call nothing of the
 * registry (the device list reaches them through the sink's pointers), so the dependencies run
 * one way: registry -> backends -> core.
 */
#ifndef CLN_REGISTRY_H
#define CLN_REGISTRY_H

#include <stdarg.h>

#include "backends/backend.h"
#include "clnode/devices.h"

/* One form of device string a backend accepts after "name:". `syntax` is a ':'-separated list of
 * tokens: "" (the bare name), "N" (a decimal index), "NAME" (any other word) or a literal word
 * ("openblas", "gpu", "cublas"). Forms are tried in the order given: the first match wins. */
typedef struct cln_device_form {
    const char *syntax;
    int variant;      /* the backend's own code for the form */
    const char *help; /* one line for the help text */
} cln_device_form;

/* A device string as the registry parsed it for the backend's constructor. */
typedef struct cln_device_sel {
    const char *spec; /* the whole string, as given ("opencl:pocl") */
    int variant;      /* the matching form's variant */
    long index;       /* the N of the form, or -1 */
    char word[64];    /* the NAME of the form ("pocl"), or "" */
} cln_device_sel;

/* Capabilities shared by every device of a backend. */
enum {
    CLN_CAP_FP64 = CLNODE_BACKEND_FP64,               /* every device computes in fp64 */
    CLN_CAP_NATIVE_TF32 = CLNODE_BACKEND_NATIVE_TF32, /* the tf32 mode runs on TF32 hardware */
};

/* Where a backend's enumeration puts its devices (lib/backends/devices.c implements it). Called
 * through pointers, so that the backends depend on no list code. */
typedef struct cln_device_sink cln_device_sink;
struct cln_device_sink {
    clnode_device_info *(*add)(cln_device_sink *sink, int new_device);
    void (*vnote)(cln_device_sink *sink, const char *fmt, va_list ap);
};

/* A new zeroed entry of the list, its backend already filled in; `new_device` is 0 for a second
 * engine of a device already added ("cuda:0:cublas" after "cuda:0"). NULL when out of memory. */
static inline clnode_device_info *cln_device_sink_add(cln_device_sink *sink, int new_device)
{
    return sink->add(sink, new_device);
}

/* Why the backend has no device ("no OpenCL platform found ..."), for clnode_backend_info.note. */
static inline void cln_device_sink_note(cln_device_sink *sink, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void cln_device_sink_note(cln_device_sink *sink, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sink->vnote(sink, fmt, ap);
    va_end(ap);
}

typedef struct cln_backend_desc {
    const char *name; /* "host", "opencl", "cuda" */
    unsigned caps;    /* CLN_CAP_* */
    const cln_device_form *forms;
    size_t num_forms;
    /* Optional: whether the backend can run here at all (CUDA: its libraries load). Returns
     * CLNODE_OK, or an error with the reason in `why`. */
    clnode_status (*available)(char *why, size_t why_size);
    clnode_status (*create)(clnode_context *ctx, const cln_device_sel *sel, cln_backend **out);
    /* Adds every device (with its engines) in index order; CLNODE_OK also when there is none
     * (then with a note). Messages go to ctx, a private context whose last error the caller
     * reports. */
    clnode_status (*list)(clnode_context *ctx, cln_device_sink *sink);
} cln_backend_desc;

/* Registered by each backend built into this library (its own source file). */
extern const cln_backend_desc cln_host_backend;
extern const cln_backend_desc cln_opencl_backend;
extern const cln_backend_desc cln_cuda_backend;

/* The backends clnode knows, built or not, in the order of clnode_device_list (host, opencl,
 * cuda). */
#define CLN_NUM_BACKENDS 3

/* Backend i's name, and its descriptor or NULL when this build lacks it (then `why_not` says how
 * to build it). */
const cln_backend_desc *cln_registry_get(size_t i, const char **name, const char **why_not);

/* Creates the backend named by a device string (NULL or "": $CLNODE_DEVICE, else "host"). Errors:
 * CLNODE_ERR_NO_DEVICE for a string of no registered form (the message lists the forms), a
 * backend not available here ("not available: <reason>") or an absent device;
 * CLNODE_ERR_UNSUPPORTED for a backend this build lacks. */
clnode_status cln_registry_open(clnode_context *ctx, const char *spec, cln_backend **out);

#endif /* CLN_REGISTRY_H */
