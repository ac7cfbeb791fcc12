/* devices.c - the list of backends and devices of this build and machine (clnode/devices.h).
 *
 * The OpenCL and CUDA backends enumerate their devices (cln_opencl_list, cln_cuda_list); this file
 * only collects what they report into a public, immutable list, and describes the host itself.
 * The listing functions take a context for their messages: a private one on the stack, whose
 * logger forwards to the caller's and keeps the last message as the backend's note (that is how
 * "no NVIDIA driver" reaches the user without being an error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "clnode/devices.h"
#include "core/internal.h"

enum {
    CLN_NUM_BACKENDS = 3
};

struct clnode_device_list {
    clnode_device_info *devs;
    size_t count, cap;
    clnode_backend_info backends[CLN_NUM_BACKENDS];
};

/* The private context's logger: forwards, and keeps the last message worth a note. */
typedef struct dev_log {
    clnode_log_fn log;
    void *log_user;
    char last[512];
} dev_log;

static void dev_log_fn(void *user, clnode_log_level level, const char *msg)
{
    dev_log *d = user;
    if (level <= CLNODE_LOG_INFO)
        snprintf(d->last, sizeof d->last, "%s", msg);
    if (d->log && level <= CLNODE_LOG_WARN)
        d->log(d->log_user, level, msg);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* Appends a zeroed entry; NULL when out of memory. */
static clnode_device_info *dev_add(clnode_device_list *l)
{
    if (l->count == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 8;
        clnode_device_info *d = realloc(l->devs, cap * sizeof *d);
        if (!d)
            return NULL;
        l->devs = d;
        l->cap = cap;
    }
    clnode_device_info *d = &l->devs[l->count++];
    memset(d, 0, sizeof *d);
    return d;
}

/* "model name : Intel(R) ..." -> the value of the first line with that key, or "". */
static void cpuinfo_value(const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) != 0)
            continue;
        const char *v = strchr(line + n, ':');
        if (!v)
            continue;
        ++v;
        while (*v == ' ' || *v == '\t')
            ++v;
        copy_str(out, cap, v);
        out[strcspn(out, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

static clnode_status list_host(clnode_device_list *l)
{
    static const struct {
        const char *spec, *engine;
    } engines[] = {{"host", "ordered FMA GEMM"}, {"host:openblas", "OpenBLAS"}};
    char name[256], vendor[256];
    cpuinfo_value("model name", name, sizeof name);
    cpuinfo_value("vendor_id", vendor, sizeof vendor);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; ++i) {
        clnode_device_info *d = dev_add(l);
        if (!d)
            return CLNODE_ERR_OUT_OF_MEMORY;
        copy_str(d->spec, sizeof d->spec, engines[i].spec);
        copy_str(d->backend, sizeof d->backend, "host");
        copy_str(d->engine, sizeof d->engine, engines[i].engine);
        copy_str(d->name, sizeof d->name, name[0] ? name : "host CPU");
        copy_str(d->vendor, sizeof d->vendor, vendor);
        d->compute_units = cpus > 0 ? (unsigned)cpus : 0;
        d->global_mem =
            pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
        d->fp64 = 1;
    }
    l->backends[0].num_devices = 1;
    return CLNODE_OK;
}

#ifdef CLNODE_HAVE_OPENCL
typedef struct ocl_collect {
    clnode_device_list *l;
    int oom;
} ocl_collect;

static void ocl_one(void *user, size_t index, const char *platform, const char *device,
                    const char *vendor, const char *driver_version, const char *opencl_c_version,
                    unsigned compute_units, unsigned long long global_mem, int has_fp64)
{
    ocl_collect *c = user;
    clnode_device_info *d = c->oom ? NULL : dev_add(c->l);
    if (!d) {
        c->oom = 1;
        return;
    }
    snprintf(d->spec, sizeof d->spec, "opencl:%zu", index);
    copy_str(d->backend, sizeof d->backend, "opencl");
    copy_str(d->engine, sizeof d->engine, "CLBlast");
    copy_str(d->name, sizeof d->name, device);
    copy_str(d->vendor, sizeof d->vendor, vendor);
    copy_str(d->platform, sizeof d->platform, platform);
    copy_str(d->driver_version, sizeof d->driver_version, driver_version);
    copy_str(d->opencl_c_version, sizeof d->opencl_c_version, opencl_c_version);
    d->compute_units = compute_units;
    d->global_mem = global_mem;
    d->fp64 = has_fp64;
    c->l->backends[1].num_devices++;
}
#endif

#ifdef CLNODE_HAVE_CUDA
typedef struct cuda_collect {
    clnode_device_list *l;
    int oom;
} cuda_collect;

static void cuda_one(void *user, int index, const char *name, int cc_major, int cc_minor,
                     unsigned long long mem_bytes)
{
    cuda_collect *c = user;
    for (int e = 0; e < 2; ++e) {
        clnode_device_info *d = c->oom ? NULL : dev_add(c->l);
        if (!d) {
            c->oom = 1;
            return;
        }
        snprintf(d->spec, sizeof d->spec, e ? "cuda:%d:cublas" : "cuda:%d", index);
        copy_str(d->backend, sizeof d->backend, "cuda");
        copy_str(d->engine, sizeof d->engine, e ? "cuBLAS (pedantic)" : "ordered FMA GEMM");
        copy_str(d->name, sizeof d->name, name);
        copy_str(d->vendor, sizeof d->vendor, "NVIDIA Corporation");
        d->cc_major = cc_major;
        d->cc_minor = cc_minor;
        d->global_mem = mem_bytes;
        d->fp64 = 1;
    }
    c->l->backends[2].num_devices++;
}
#endif

clnode_status clnode_device_list_create(clnode_log_fn log, void *log_user, clnode_device_list **out)
{
    if (!out)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    clnode_device_list *l = calloc(1, sizeof *l);
    if (!l)
        return CLNODE_ERR_OUT_OF_MEMORY;
    static const char *const names[CLN_NUM_BACKENDS] = {"host", "opencl", "cuda"};
    for (int i = 0; i < CLN_NUM_BACKENDS; ++i) {
        copy_str(l->backends[i].name, sizeof l->backends[i].name, names[i]);
        l->backends[i].status = CLNODE_OK;
    }
    l->backends[0].built = 1;
    clnode_status st = list_host(l);
    if (st != CLNODE_OK)
        goto fail;

    dev_log dl = {log, log_user, ""};
    struct clnode_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.log = dev_log_fn;
    ctx.log_user = &dl;
    ctx.log_level = CLNODE_LOG_INFO;
    (void)ctx;

#ifdef CLNODE_HAVE_OPENCL
    {
        clnode_backend_info *b = &l->backends[1];
        b->built = 1;
        ocl_collect c = {l, 0};
        dl.last[0] = '\0';
        b->status = cln_opencl_list(&ctx, ocl_one, &c);
        if (c.oom) {
            st = CLNODE_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        if (b->status != CLNODE_OK) {
            snprintf(b->note, sizeof b->note, "listing failed: %.400s", ctx.last_error);
        } else if (b->num_devices == 0) {
            const char *env = getenv("OCL_ICD_VENDORS");
            snprintf(b->note, sizeof b->note,
                     "no OpenCL platform or device found (the ICD loader looked in %s%s)",
                     env && env[0] ? "OCL_ICD_VENDORS=" : "/etc/OpenCL/vendors",
                     env && env[0] ? env : "");
        }
    }
#else
    copy_str(l->backends[1].note, sizeof l->backends[1].note, "not built (meson -Dopencl=enabled)");
#endif

#ifdef CLNODE_HAVE_CUDA
    {
        clnode_backend_info *b = &l->backends[2];
        b->built = 1;
        cuda_collect c = {l, 0};
        dl.last[0] = '\0';
        b->status = cln_cuda_list(&ctx, cuda_one, &c);
        if (c.oom) {
            st = CLNODE_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        if (b->status != CLNODE_OK)
            snprintf(b->note, sizeof b->note, "listing failed: %.400s", ctx.last_error);
        else if (b->num_devices == 0)
            snprintf(b->note, sizeof b->note, "built, no device/driver found%s%.400s%s",
                     dl.last[0] ? " (" : "", dl.last, dl.last[0] ? ")" : "");
    }
#else
    copy_str(l->backends[2].note, sizeof l->backends[2].note, "not built (meson -Dcuda=enabled)");
#endif
    *out = l;
    return CLNODE_OK;
fail:
    clnode_device_list_destroy(&l);
    return st;
}

void clnode_device_list_destroy(clnode_device_list **list)
{
    if (!list || !*list)
        return;
    free((*list)->devs);
    free(*list);
    *list = NULL;
}

size_t clnode_device_list_count(const clnode_device_list *list)
{
    return list ? list->count : 0;
}

const clnode_device_info *clnode_device_list_get(const clnode_device_list *list, size_t i)
{
    return list && i < list->count ? &list->devs[i] : NULL;
}

size_t clnode_device_list_num_backends(const clnode_device_list *list)
{
    return list ? CLN_NUM_BACKENDS : 0;
}

const clnode_backend_info *clnode_device_list_backend(const clnode_device_list *list, size_t i)
{
    return list && i < CLN_NUM_BACKENDS ? &list->backends[i] : NULL;
}
