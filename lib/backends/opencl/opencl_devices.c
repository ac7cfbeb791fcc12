/* opencl_devices.c - the OpenCL backend's devices: every platform's devices in the ICD loader's
 * order, their facts, the device list and the device-string selection (opencl.c). */
#include "backends/opencl/opencl_internal.h"

static void ocl_str(cl_device_id d, cl_device_info what, char *buf, size_t n)
{
    buf[0] = '\0';
    if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS)
        buf[0] = '\0';
    buf[n - 1] = '\0';
}

/* Whether a space-separated extension list holds `ext` exactly. */
static int ocl_has_ext(const char *list, const char *ext)
{
    const size_t len = strlen(ext);
    for (const char *p = list; (p = strstr(p, ext)) != NULL; p += len) {
        if ((p == list || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' '))
            return 1;
    }
    return 0;
}

static int ocl_icontains(const char *hay, const char *needle);

void ocl_fill_info(cl_platform_id plat, cl_device_id d, ocl_dev_info *info)
{
    memset(info, 0, sizeof *info);
    info->platform = plat;
    info->device = d;
    if (clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof info->platform_name, info->platform_name,
                          NULL) != CL_SUCCESS)
        info->platform_name[0] = '\0';
    info->platform_name[sizeof info->platform_name - 1] = '\0';
    if (clGetPlatformInfo(plat, CL_PLATFORM_VENDOR, sizeof info->platform_vendor,
                          info->platform_vendor, NULL) != CL_SUCCESS)
        info->platform_vendor[0] = '\0';
    info->platform_vendor[sizeof info->platform_vendor - 1] = '\0';
    ocl_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    ocl_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    ocl_str(d, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    ocl_str(d, CL_DEVICE_OPENCL_C_VERSION, info->clc, sizeof info->clc);
    if (clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof info->type, &info->type, NULL) != CL_SUCCESS)
        info->type = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof info->units, &info->units, NULL) !=
        CL_SUCCESS)
        info->units = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof info->mem, &info->mem, NULL) !=
        CL_SUCCESS)
        info->mem = 0;
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n > 0) {
        char *ext = malloc(n + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS) {
            ext[n] = '\0';
            info->fp64 = ocl_has_ext(ext, "cl_khr_fp64");
        }
        free(ext);
    }
    /* a device simulator checks every access and runs ~1000 times slower than PoCL: never the
     * device a user gets without naming it */
    info->simulator =
        ocl_icontains(info->platform_name, "oclgrind") || ocl_icontains(info->name, "oclgrind");
}

/* "x.y" of an "OpenCL C x.y ..." string (empty when it does not parse). */
void ocl_clc_version(const char *clc, char *out, size_t n)
{
    int major = 0, minor = 0;
    if (sscanf(clc, "OpenCL C %d.%d", &major, &minor) == 2)
        snprintf(out, n, "%d.%d", major, minor);
    else
        snprintf(out, n, "?");
}

/* Calls `fn` for every device of every platform, in enumeration order, until it returns
 * non-zero. Returns CLNODE_OK (also when there is no platform) or an error. */
clnode_status ocl_enumerate(clnode_context *ctx,
                            int (*fn)(void *user, size_t index, const ocl_dev_info *info),
                            void *user)
{
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: no ICD */ || (e == CL_SUCCESS && np == 0))
        return CLNODE_OK;
    if (e != CL_SUCCESS)
        return OCL_FAIL(ctx, e, "clGetPlatformIDs");
    cl_platform_id *plats = calloc(np, sizeof *plats);
    CLN_CHECK(ctx, plats, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %u platform ids", np);
    clnode_status st = CLNODE_OK;
    cl_device_id *devs = NULL;
    e = clGetPlatformIDs(np, plats, NULL);
    if (e != CL_SUCCESS) {
        st = OCL_FAIL(ctx, e, "clGetPlatformIDs");
        goto done;
    }
    size_t index = 0;
    for (cl_uint p = 0; p < np; ++p) {
        cl_uint nd = 0;
        e = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (e == CL_DEVICE_NOT_FOUND || nd == 0)
            continue;
        if (e != CL_SUCCESS) {
            cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                    "OpenCL platform %u: clGetDeviceIDs failed: %s (%d)", p, ocl_err_name(e),
                    (int)e);
            continue;
        }
        free(devs);
        devs = calloc(nd, sizeof *devs);
        if (!devs) {
            st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %u device ids", nd);
            goto done;
        }
        e = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL);
        if (e != CL_SUCCESS) {
            cln_log(ctx, CLNODE_LOG_WARN, CLNODE_LOG_GENERAL,
                    "OpenCL platform %u: clGetDeviceIDs failed: %s (%d)", p, ocl_err_name(e),
                    (int)e);
            continue;
        }
        for (cl_uint d = 0; d < nd; ++d, ++index) {
            ocl_dev_info info;
            ocl_fill_info(plats[p], devs[d], &info);
            if (fn(user, index, &info))
                goto done;
        }
    }
done:
    free(devs);
    free(plats);
    return st;
}

/* The OpenCL devices in the order of the "opencl:N" indices, for clnode_device_list. */
typedef struct ocl_list_user {
    cln_device_sink *sink;
    size_t count;
} ocl_list_user;

static int ocl_list_one(void *user, size_t index, const ocl_dev_info *info)
{
    ocl_list_user *u = user;
    clnode_device_info *d = cln_device_sink_add(u->sink, 1);
    if (!d)
        return 1; /* out of memory: the sink remembers */
    u->count++;
    snprintf(d->spec, sizeof d->spec, "opencl:%zu", index);
    snprintf(d->engine, sizeof d->engine, "CLBlast");
    snprintf(d->name, sizeof d->name, "%s", info->name);
    snprintf(d->vendor, sizeof d->vendor, "%s", info->vendor);
    snprintf(d->platform, sizeof d->platform, "%s", info->platform_name);
    snprintf(d->driver_version, sizeof d->driver_version, "%s", info->driver);
    ocl_clc_version(info->clc, d->opencl_c_version, sizeof d->opencl_c_version);
    d->compute_units = (unsigned)info->units;
    d->global_mem = (unsigned long long)info->mem;
    d->fp64 = info->fp64;
    return 0;
}

clnode_status ocl_list(clnode_context *ctx, cln_device_sink *sink)
{
    ocl_list_user u = {sink, 0};
    const clnode_status st = ocl_enumerate(ctx, ocl_list_one, &u);
    if (st == CLNODE_OK && u.count == 0) {
        const char *env = getenv("OCL_ICD_VENDORS");
        cln_device_sink_note(
            sink, "no OpenCL platform or device found (the ICD loader looked in %s%s)",
            env && env[0] ? "OCL_ICD_VENDORS=" : "/etc/OpenCL/vendors", env && env[0] ? env : "");
    }
    return st;
}

/* Case-insensitive substring test. */
static int ocl_icontains(const char *hay, const char *needle)
{
    const size_t n = strlen(needle);
    for (; *hay; ++hay) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            ++i;
        if (i == n)
            return 1;
    }
    return n == 0;
}

int ocl_select_one(void *user, size_t index, const ocl_dev_info *info)
{
    ocl_select *s = user;
    const size_t used = strlen(s->seen);
    if (used < sizeof s->seen - 1)
        snprintf(s->seen + used, sizeof s->seen - used, "%s%zu: %s (%s)", used ? "; " : "", index,
                 info->name, info->platform_name);
    if (s->found)
        return 0; /* keep listing for the log */
    int match;
    if (s->index >= 0)
        match = (size_t)s->index == index;
    else if (s->any)
        match = !info->simulator;
    else if (s->type)
        match = (info->type & s->type) != 0 && !info->simulator;
    else
        match = ocl_icontains(info->platform_name, s->spec) ||
                ocl_icontains(info->platform_vendor, s->spec) ||
                ocl_icontains(info->vendor, s->spec) || ocl_icontains(info->name, s->spec);
    if (match) {
        s->found = 1;
        s->chosen = *info;
    }
    return 0;
}
