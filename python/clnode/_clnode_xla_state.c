/* _clnode_xla_state.c - clnode.jax's XLA custom calls: the state the handlers share: plans, the
 * context pool, the tape registry and its counts, Ctrl-C
 * (_clnode_xla_internal.h). */
#include "_clnode_xla_internal.h"
#include "_clnode_sigint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------------
 * Plans */

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
xla_plan **g_plans;
size_t g_nplans, g_capplans;

const xla_plan *plan_at(int64_t h)
{
    pthread_mutex_lock(&g_lock);
    const xla_plan *p = h >= 1 && (size_t)h <= g_nplans ? g_plans[h - 1] : NULL;
    pthread_mutex_unlock(&g_lock);
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * Contexts: a pool per device, one context per concurrent call */

xla_ctx *g_pool;

static void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    (void)level;
    xla_ctx *c = user;
    if (code == CLNODE_LOG_PRECISION_FLOOR)
        snprintf(c->floor, sizeof c->floor, "%s", message);
}

/* A free context of `device` (created when none is), or NULL with the message in msg. */
xla_ctx *ctx_take(const char *device, char *msg, size_t cap, clnode_status *st)
{
    pthread_mutex_lock(&g_lock);
    for (xla_ctx *c = g_pool; c; c = c->next)
        if (!c->busy && !strcmp(c->device, device)) {
            c->busy = 1;
            c->floor[0] = 0;
            pthread_mutex_unlock(&g_lock);
            return c;
        }
    pthread_mutex_unlock(&g_lock);
    xla_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        *st = CLNODE_ERR_OUT_OF_MEMORY;
        snprintf(msg, cap, "out of memory for a context");
        return NULL;
    }
    snprintf(c->device, sizeof c->device, "%s", device);
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = c->device;
    o.log = on_log;
    o.log_user = c;
    *st = clnode_context_create(&o, &c->ctx);
    if (*st != CLNODE_OK) {
        snprintf(msg, cap, "%s: no context for device \"%s\"", clnode_status_string(*st), device);
        free(c);
        return NULL;
    }
    c->busy = 1;
    pthread_mutex_lock(&g_lock);
    c->next = g_pool;
    g_pool = c;
    pthread_mutex_unlock(&g_lock);
    return c;
}

void ctx_give(xla_ctx *c)
{
    pthread_mutex_lock(&g_lock);
    c->busy = 0;
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------------------------------
 * Tapes: a registry bounded in bytes, oldest dropped first */

xla_tape *g_tapes_old, *g_tapes_new;
size_t g_tape_bytes, g_tape_limit = XLA_DEFAULT_TAPE_BYTES;
int g_tape_limit_read;
int32_t g_token_count;
unsigned long long g_hits, g_misses, g_kept, g_dropped, g_solves, g_trajectories;
/* the library's time inside the handlers: its solves (the reverse pass's re-solves too) and
 * reverse passes */
unsigned long long g_solve_ns, g_reverse_ns, g_reverses;
unsigned long long g_fwd_ns, g_vjp_ns, g_vjps;
unsigned long long g_jvp_ns, g_jvps, g_tangent_ns, g_tangents, g_tangent_dirs,
    g_tangent_trajectories;

unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

void tape_free(xla_tape *t)
{
    clnode_solution_destroy(&t->sol);
    clnode_model_destroy(&t->model);
    free(t);
}

/* Drops the oldest tapes until the registry holds at most `limit` bytes (with g_lock held);
 * returns them, to be freed after the lock. */
xla_tape *tapes_trim(size_t limit)
{
    xla_tape *out = NULL;
    while (g_tapes_old && g_tape_bytes > limit) {
        xla_tape *t = g_tapes_old;
        g_tapes_old = t->next;
        if (!g_tapes_old)
            g_tapes_new = NULL;
        g_tape_bytes -= t->bytes;
        g_dropped++;
        t->next = out;
        out = t;
    }
    return out;
}

void tapes_free_list(xla_tape *t)
{
    while (t) {
        xla_tape *n = t->next;
        tape_free(t);
        t = n;
    }
}

void tape_limit_from_env(void)
{
    if (g_tape_limit_read)
        return;
    g_tape_limit_read = 1;
    const char *e = getenv("CLNODE_JAX_TAPE_BYTES");
    if (e && *e) {
        char *end;
        const unsigned long long v = strtoull(e, &end, 10);
        if (*end == 0)
            g_tape_limit = (size_t)v;
    }
}

/* Keeps sol and model (taken) under a new token, returned; 0 when not kept (larger than the
 * bound: the reverse pass re-solves). */
int32_t tape_keep(clnode_solution **sol, clnode_model **model)
{
    xla_tape *t = malloc(sizeof *t);
    if (!t)
        return 0;
    t->sol = *sol;
    t->model = *model;
    t->bytes = clnode_solution_kept_bytes(*sol) + sizeof *t;
    t->next = NULL;
    pthread_mutex_lock(&g_lock);
    tape_limit_from_env();
    if (t->bytes > g_tape_limit) {
        g_dropped++;
        pthread_mutex_unlock(&g_lock);
        free(t);
        return 0;
    }
    *sol = NULL;
    *model = NULL;
    g_token_count = g_token_count == INT32_MAX ? 1 : g_token_count + 1;
    t->token = -g_token_count;
    if (g_tapes_new)
        g_tapes_new->next = t;
    else
        g_tapes_old = t;
    g_tapes_new = t;
    g_tape_bytes += t->bytes;
    g_kept++;
    xla_tape *drop = tapes_trim(g_tape_limit);
    const int32_t token = t->token;
    pthread_mutex_unlock(&g_lock);
    tapes_free_list(drop);
    return token;
}

/* The tape of `token`, removed from the registry (NULL: none; counted as a miss). */
xla_tape *tape_take(int32_t token, int count)
{
    xla_tape *found = NULL;
    pthread_mutex_lock(&g_lock);
    for (xla_tape **pp = &g_tapes_old, *prev = NULL; token < 0 && *pp;
         prev = *pp, pp = &(*pp)->next)
        if ((*pp)->token == token) {
            found = *pp;
            *pp = found->next;
            if (g_tapes_new == found)
                g_tapes_new = prev;
            g_tape_bytes -= found->bytes;
            break;
        }
    if (count) {
        if (found)
            g_hits++;
        else
            g_misses++;
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* ------------------------------------------------------------------------------------------------
 * Ctrl-C while handlers run: the handler an eager solve on the main thread uses too
 * (_clnode_sigint.c), so that either order of start and end leaves Python's in place */

int xla_on_cancel(void *user)
{
    return on_cancel(user);
}

void sig_enter(void)
{
    sigint_enter();
}

void sig_leave(void)
{
    sigint_leave();
}
