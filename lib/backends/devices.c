/* devices.c - the list of backends and devices of this build and machine (clnode/devices.h).
 *
 * Each backend of the registry enumerates its own devices (cln_backend_desc.list) into a sink;
 * this file only collects what they report into a public, immutable list.
 * The listing functions take a context for their messages: a private one on the stack, whose
 * logger forwards to the caller's and keeps the last message as the backend's note (that is how
 * "no NVIDIA driver" reaches the user without being an error). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"

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

static void dev_log_fn(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    dev_log *d = user;
    if (level <= CLNODE_LOG_INFO)
        snprintf(d->last, sizeof d->last, "%s", msg);
    if (d->log && level <= CLNODE_LOG_WARN)
        d->log(d->log_user, level, code, msg);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* Appends a zeroed entry (struct_size set); NULL when out of memory. */
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
    d->struct_size = sizeof *d;
    return d;
}

/* The sink of one backend's enumeration (registry.h). */
typedef struct dev_sink {
    cln_device_sink base;
    clnode_device_list *list;
    clnode_backend_info *backend;
    int oom;
} dev_sink;

static clnode_device_info *dev_sink_add(cln_device_sink *sink, int new_device)
{
    dev_sink *s = (dev_sink *)sink;
    clnode_device_info *d = s->oom ? NULL : dev_add(s->list);
    if (!d) {
        s->oom = 1;
        return NULL;
    }
    copy_str(d->backend, sizeof d->backend, s->backend->name);
    if (new_device)
        s->backend->num_devices++;
    return d;
}

static void dev_sink_vnote(cln_device_sink *sink, const char *fmt, va_list ap)
{
    dev_sink *s = (dev_sink *)sink;
    vsnprintf(s->backend->note, sizeof s->backend->note, fmt, ap);
}

/* Backend i's devices into the list: not built, not available here, listing failed, or listed. */
static clnode_status list_backend(clnode_device_list *l, size_t i, clnode_log_fn log,
                                  void *log_user)
{
    clnode_backend_info *b = &l->backends[i];
    const char *name = NULL, *why_not = NULL;
    const cln_backend_desc *desc = cln_registry_get(i, &name, &why_not);
    b->struct_size = sizeof *b;
    copy_str(b->name, sizeof b->name, name);
    b->status = CLNODE_OK;
    if (!desc) {
        copy_str(b->note, sizeof b->note, why_not);
        return CLNODE_OK;
    }
    b->built = 1;
    b->capabilities = desc->caps;
    char why[400];
    if (desc->available && desc->available(why, sizeof why) != CLNODE_OK) {
        snprintf(b->note, sizeof b->note, "not available: %s", why);
        return CLNODE_OK;
    }
    /* a private context for the backend's messages (see the top of this file) */
    dev_log dl = {log, log_user, ""};
    struct clnode_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.log = dev_log_fn;
    ctx.log_user = &dl;
    ctx.log_level = CLNODE_LOG_INFO;
    dev_sink sink = {{dev_sink_add, dev_sink_vnote}, l, b, 0};
    b->status = desc->list(&ctx, &sink.base);
    if (sink.oom)
        return CLNODE_ERR_OUT_OF_MEMORY;
    if (b->status != CLNODE_OK)
        snprintf(b->note, sizeof b->note, "listing failed: %.400s", ctx.last_error);
    else if (b->num_devices == 0 && !b->note[0])
        snprintf(b->note, sizeof b->note, "no device found%s%.400s%s", dl.last[0] ? " (" : "",
                 dl.last, dl.last[0] ? ")" : "");
    return CLNODE_OK;
}

clnode_status clnode_device_list_create(clnode_log_fn log, void *log_user, clnode_device_list **out)
{
    if (!out)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    clnode_device_list *l = calloc(1, sizeof *l);
    if (!l)
        return CLNODE_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < CLN_NUM_BACKENDS; ++i) {
        const clnode_status st = list_backend(l, i, log, log_user);
        if (st != CLNODE_OK) {
            clnode_device_list_destroy(&l);
            return st;
        }
    }
    *out = l;
    return CLNODE_OK;
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
