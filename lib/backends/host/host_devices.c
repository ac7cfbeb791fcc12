/* host_devices.c - the host's device strings and its device list: the CPU, once per GEMM engine
 * and kernel ISA it runs, and the backend's description for the registry. */
#include "backends/host/host_internal.h"

const cln_device_form host_forms[HOST_NUM_FORMS] = {
    {"", HOST_ORDERED,
     "the CPU: the ordered FMA GEMM on the widest kernels it runs, the cl/ arithmetic in C "
     "(the default)"},
    {"openblas", HOST_OPENBLAS, "the CPU with OpenBLAS GEMMs (fixed 16-row blocks)"},
    {"avx512", HOST_AVX512, "the CPU's ordered FMA GEMM on its AVX-512F kernels"},
    {"avx2", HOST_AVX2, "the CPU's ordered FMA GEMM on its AVX2+FMA kernels"},
    {"portable", HOST_PORTABLE, "the CPU's ordered FMA GEMM on its portable C fma() loops"},
};

/* The ISA of the ISA forms, by form (HOST_ORDERED: the widest this CPU runs). */
cln_gemm_isa host_form_isa(int variant)
{
    switch (variant) {
    case HOST_AVX512:
        return CLN_GEMM_AVX512;
    case HOST_AVX2:
        return CLN_GEMM_AVX2;
    case HOST_PORTABLE:
        return CLN_GEMM_PORTABLE;
    default:
        return cln_gemm_best_isa();
    }
}

/* ---- the devices: the CPU, once per GEMM engine ---- */

/* "model name : Intel(R) ..." -> the value of the first line with that key, or "". */
void host_cpuinfo_value(const char *key, char *out, size_t cap)
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
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

/* The device's entries: "host" and "host:openblas", then "host:ISA" for each ISA this CPU runs
 * (the ordered engine on those kernels), so that the list says which of them this machine can
 * compare. */
clnode_status host_list(clnode_context *ctx, cln_device_sink *sink)
{
    (void)ctx;
    char name[256], vendor[256];
    host_cpuinfo_value("model name", name, sizeof name);
    host_cpuinfo_value("vendor_id", vendor, sizeof vendor);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int first = 1;
    for (size_t i = 0; i < (size_t)HOST_NUM_FORMS; ++i) {
        const int v = host_forms[i].variant;
        const cln_gemm_isa isa = host_form_isa(v);
        if (v != HOST_OPENBLAS && !cln_gemm_isa_runs(isa, NULL))
            continue;
        clnode_device_info *d = cln_device_sink_add(sink, first);
        if (!d)
            return CLNODE_ERR_OUT_OF_MEMORY;
        first = 0;
        snprintf(d->spec, sizeof d->spec, "host%s%s", host_forms[i].syntax[0] ? ":" : "",
                 host_forms[i].syntax);
        if (v == HOST_OPENBLAS)
            snprintf(d->engine, sizeof d->engine, "OpenBLAS");
        else if (v == HOST_ORDERED)
            snprintf(d->engine, sizeof d->engine, "ordered FMA GEMM");
        else
            snprintf(d->engine, sizeof d->engine, "ordered FMA GEMM, %s", cln_gemm_isa_name(isa));
        snprintf(d->name, sizeof d->name, "%s", name[0] ? name : "host CPU");
        snprintf(d->vendor, sizeof d->vendor, "%s", vendor);
        d->compute_units = cpus > 0 ? (unsigned)cpus : 0;
        d->global_mem =
            pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
        d->fp64 = 1;
    }
    return CLNODE_OK;
}
