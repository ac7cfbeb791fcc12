/* host_pool.c - the host backend's thread pool: workers that sleep on a condition variable
 * between jobs (passive waiting), a job split into parts, part 0 on the caller. See host_pool.h. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "backends/host/host_pool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct cln_worker {
    cln_pool *pool;
    size_t index;       /* 1 .. threads - 1: the part it runs */
    unsigned long gen0; /* the pool's job number when it was started */
    pthread_t tid;
} cln_worker;

struct cln_pool {
    int threads;
    int started; /* workers running: indices 1 .. started */
    int tried;   /* workers were started once (a failure is not retried per job) */
    cln_worker *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a new job (or quit) */
    pthread_cond_t done; /* the last worker of a job finished */
    unsigned long gen;   /* job number */
    size_t parts;        /* of the current job */
    size_t helpers;      /* workers 1 .. helpers run parts of it */
    cln_pool_fn fn;
    void *arg;
    int pending; /* worker parts of the current job not finished */
    int quit;
};

int cln_pool_default_threads(void)
{
    const char *env = getenv("CLNODE_NUM_THREADS");
    if (env && *env) {
        char *end;
        errno = 0;
        const long v = strtol(env, &end, 10);
        if (errno == 0 && *end == '\0' && v > 0 && v <= 1024)
            return (int)v;
    }
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n <= INT_MAX ? (int)n : 1;
}

static void *cln_worker_main(void *p)
{
    cln_worker *w = p;
    cln_pool *pool = w->pool;
    /* not the job number it finds once running: a job published between pthread_create and
     * this point would be missed */
    unsigned long seen = w->gen0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->gen == seen && !pool->quit)
            pthread_cond_wait(&pool->wake, &pool->mu);
        if (pool->quit)
            break;
        seen = pool->gen;
        if (w->index > pool->helpers)
            continue; /* not needed for this job */
        const cln_pool_fn fn = pool->fn;
        void *arg = pool->arg;
        const size_t parts = pool->parts;
        pthread_mutex_unlock(&pool->mu);
        fn(arg, w->index, parts);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

cln_pool *cln_pool_create(int threads)
{
    cln_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->threads = threads > 0 ? threads : 1;
    if (pool->threads > 1) {
        pool->workers = calloc((size_t)pool->threads, sizeof *pool->workers);
        if (!pool->workers) {
            free(pool);
            return NULL;
        }
    }
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool->workers);
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->wake, NULL) != 0) {
        pthread_mutex_destroy(&pool->mu);
        free(pool->workers);
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->done, NULL) != 0) {
        pthread_cond_destroy(&pool->wake);
        pthread_mutex_destroy(&pool->mu);
        free(pool->workers);
        free(pool);
        return NULL;
    }
    return pool;
}

void cln_pool_destroy(cln_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i <= pool->started; ++i)
        pthread_join(pool->workers[i].tid, NULL);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool);
}

int cln_pool_threads(const cln_pool *pool)
{
    return pool ? pool->threads : 1;
}

/* Starts the workers (once); those that cannot be started leave their parts to the caller. */
static void cln_pool_start(cln_pool *pool)
{
    pool->tried = 1;
    for (int i = 1; i < pool->threads; ++i) {
        cln_worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = (size_t)i;
        w->gen0 = pool->gen; /* no job runs now: only this thread writes gen */
        if (pthread_create(&w->tid, NULL, cln_worker_main, w) != 0)
            break;
        pool->started = i;
    }
}

void cln_pool_run(cln_pool *pool, size_t parts, cln_pool_fn fn, void *arg)
{
    if (parts == 0)
        return;
    if (parts == 1 || !pool || pool->threads <= 1) {
        for (size_t p = 0; p < parts; ++p)
            fn(arg, p, parts);
        return;
    }
    if (parts > (size_t)pool->threads)
        parts = (size_t)pool->threads;
    if (!pool->tried)
        cln_pool_start(pool);
    const size_t helpers = parts - 1 < (size_t)pool->started ? parts - 1 : (size_t)pool->started;
    if (helpers > 0) {
        pthread_mutex_lock(&pool->mu);
        pool->fn = fn;
        pool->arg = arg;
        pool->parts = parts;
        pool->helpers = helpers;
        pool->pending = (int)helpers;
        pool->gen++;
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mu);
    }
    fn(arg, 0, parts);
    for (size_t p = helpers + 1; p < parts; ++p) /* parts of workers that could not start */
        fn(arg, p, parts);
    if (helpers > 0) {
        pthread_mutex_lock(&pool->mu);
        while (pool->pending > 0)
            pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}

size_t cln_pool_parts(const cln_pool *pool, size_t rows, size_t work_per_row, size_t min_work,
                      size_t min_rows)
{
    const size_t threads = (size_t)cln_pool_threads(pool);
    if (threads <= 1 || rows == 0)
        return 1;
    size_t rows_per_part = work_per_row ? (min_work + work_per_row - 1) / work_per_row : rows;
    if (rows_per_part < min_rows)
        rows_per_part = min_rows;
    const size_t parts = rows / (rows_per_part ? rows_per_part : 1);
    return parts < 1 ? 1 : parts > threads ? threads : parts;
}
