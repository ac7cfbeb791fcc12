/* registry.c - the one list of backends and the device-string grammar built from their forms
 * (registry.h): parsing, help text, every message about device strings, the GEMM-mode rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"

static const struct {
    const char *name;
    const cln_backend_desc *desc; /* NULL: not built into this library */
    const char *why_not;
} cln_registry[CLN_NUM_BACKENDS] = {
    {"host", &cln_host_backend, NULL},
#ifdef CLNODE_HAVE_OPENCL
    {"opencl", &cln_opencl_backend, NULL},
#else
    {"opencl", NULL, "not built (meson -Dopencl=enabled)"},
#endif
#ifdef CLNODE_HAVE_CUDA
    {"cuda", &cln_cuda_backend, NULL},
#else
    {"cuda", NULL, "not built (meson -Dcuda=enabled)"},
#endif
};

const cln_backend_desc *cln_registry_get(size_t i, const char **name, const char **why_not)
{
    if (i >= CLN_NUM_BACKENDS)
        return NULL;
    if (name)
        *name = cln_registry[i].name;
    if (why_not)
        *why_not = cln_registry[i].why_not;
    return cln_registry[i].desc;
}

/* ---- the grammar ---- */

/* Whether one token of a device string matches one token of a form's syntax; fills sel. */
static int token_match(const char *tok, size_t len, const char *syn, size_t syn_len,
                       cln_device_sel *sel)
{
    if (syn_len == 1 && syn[0] == 'N') {
        if (len == 0 || len > 9 || strspn(tok, "0123456789") < len)
            return 0;
        sel->index = strtol(tok, NULL, 10);
        return 1;
    }
    if (syn_len == 4 && memcmp(syn, "NAME", 4) == 0) {
        if (len == 0 || len >= sizeof sel->word)
            return 0;
        memcpy(sel->word, tok, len);
        sel->word[len] = '\0';
        return 1;
    }
    return len == syn_len && memcmp(tok, syn, len) == 0;
}

/* Whether `rest` (the string after "name:", or "" for the bare name) has the form's syntax. */
static int form_match(const char *rest, const cln_device_form *f, cln_device_sel *sel)
{
    const char *syn = f->syntax;
    sel->index = -1;
    sel->word[0] = '\0';
    if (!syn[0] || !rest[0])
        return !syn[0] && !rest[0];
    for (;;) {
        const size_t len = strcspn(rest, ":"), syn_len = strcspn(syn, ":");
        if (!token_match(rest, len, syn, syn_len, sel))
            return 0;
        rest += len;
        syn += syn_len;
        if (!*rest || !*syn)
            return !*rest && !*syn;
        ++rest;
        ++syn;
    }
}

/* "opencl:N" for a form of backend `name`; returns the length written. */
static int form_string(char *buf, size_t size, const char *name, const cln_device_form *f)
{
    return snprintf(buf, size, "%s%s%s", name, f->syntax[0] ? ":" : "", f->syntax);
}

/* Appends with snprintf semantics at *len of buf[size], keeping the total length in *len. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n =
        vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* Every form of every backend of this build, comma-separated ("host, host:openblas, opencl, ...").
 */
static void forms_list(char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < CLN_NUM_BACKENDS; ++i) {
        const cln_backend_desc *d = cln_registry[i].desc;
        if (!d)
            continue;
        for (size_t k = 0; k < d->num_forms; ++k) {
            char form[64];
            form_string(form, sizeof form, d->name, &d->forms[k]);
            append(buf, size, &len, "%s%s", len ? ", " : "", form);
        }
    }
}

size_t clnode_device_help(char *buf, size_t size)
{
    size_t len = 0, width = 0;
    if (buf && size)
        buf[0] = '\0';
    else
        buf = NULL, size = 0;
    char form[64];
    for (int pass = 0; pass < 2; ++pass) { /* the width of the first column, then the text */
        for (size_t i = 0; i < CLN_NUM_BACKENDS; ++i) {
            const cln_backend_desc *d = cln_registry[i].desc;
            for (size_t k = 0; k < (d ? d->num_forms : 1); ++k) {
                const int n = d ? form_string(form, sizeof form, d->name, &d->forms[k])
                                : snprintf(form, sizeof form, "%s", cln_registry[i].name);
                if (pass == 0)
                    width = (size_t)n > width ? (size_t)n : width;
                else
                    append(buf, size, &len, "  %-*s  %s\n", (int)width, form,
                           d ? d->forms[k].help : cln_registry[i].why_not);
            }
        }
    }
    return len;
}

/* ---- opening a device ---- */

clnode_status cln_registry_open(clnode_context *ctx, const char *spec, cln_backend **out)
{
    *out = NULL;
    if (!spec || !spec[0])
        spec = getenv("CLNODE_DEVICE");
    if (!spec || !spec[0])
        spec = "host";
    const size_t name_len = strcspn(spec, ":");
    const char *rest = spec[name_len] ? spec + name_len + 1 : "";
    char forms[512];
    for (size_t i = 0; i < CLN_NUM_BACKENDS; ++i) {
        const char *name = cln_registry[i].name;
        if (strlen(name) != name_len || strncmp(name, spec, name_len) != 0)
            continue;
        const cln_backend_desc *d = cln_registry[i].desc;
        if (!d)
            return cln_fail(ctx, CLNODE_ERR_UNSUPPORTED,
                            "device \"%s\": this build of clnode has no %s backend (%s)", spec,
                            name, cln_registry[i].why_not);
        cln_device_sel sel;
        memset(&sel, 0, sizeof sel);
        sel.spec = spec;
        size_t k = spec[name_len] && !rest[0] ? d->num_forms : 0; /* "host:" has no form */
        while (k < d->num_forms && !form_match(rest, &d->forms[k], &sel))
            ++k;
        if (k == d->num_forms) {
            forms_list(forms, sizeof forms);
            return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                            "unknown device \"%s\": expected one of %s (clnode-devices lists the "
                            "devices present)",
                            spec, forms);
        }
        sel.variant = d->forms[k].variant;
        char why[512];
        if (d->available && d->available(why, sizeof why) != CLNODE_OK)
            return cln_fail(ctx, CLNODE_ERR_NO_DEVICE, "device \"%s\": %s not available: %s", spec,
                            name, why);
        return d->create(ctx, &sel, out);
    }
    forms_list(forms, sizeof forms);
    return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                    "unknown device \"%s\": expected one of %s (clnode-devices lists the devices "
                    "present)",
                    spec, forms);
}
