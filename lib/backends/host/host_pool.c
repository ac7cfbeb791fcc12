/* host_pool.c - the host backend's thread pool: workers that sleep on a condition variable
 * between jobs (after watching for the next one for a moment, yielding the CPU), a job split
 * into parts, part 0 on the caller. See host_pool.h. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "backends/host/host_pool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long a worker that finished its part watches for the next job, and the caller for the
 * workers' parts to finish, before sleeping on the condition variable. A solve hands the pool a
 * job per step, a few microseconds after the last one (the driver counts the active rows in
 * between), and waking a sleeping thread took ~100 us a step on a virtual machine (its CPU
 * halted and woken by the hypervisor): B = 1024 on two threads lost ~1.5 ms a solve to it. The
 * watch is bounded, so an idle pool still costs nothing, and it yields the CPU at every look
 * (sched_yield): where the scheduler has put a worker on its caller's CPU (it does, for whole
 * runs, on a 2-CPU virtual machine) the caller gets the CPU at once, so such a run is as fast as
 * one thread, where a busy-waiting worker made it twice as slow; and another busy process gets
 * it too. */
#define CLN_POOL_SPIN_NS 50000L
#define CLN_POOL_JOB_HELPERS 65536u /* > the most workers (cln_pool_default_threads: 1024) */

typedef struct cln_worker {
    cln_pool *pool;
    size_t index;  /* 1 .. threads - 1: the part it runs */
    uint64_t job0; /* the pool's job when it was started */
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
    /* the current job: its number times CLN_POOL_JOB_HELPERS plus its helpers (workers 1 ..
     * helpers run parts of it), stored (release) after its fields below, so that a worker not
     * needed for a job reads nothing else of it */
    _Atomic uint64_t job;
    size_t parts; /* of the current job */
    cln_pool_fn fn;
    void *arg;
    atomic_int pending; /* worker parts of the current job not finished */
    int quit;
};

/* What a watch waits for: a job other than the one seen, or the current job's worker parts all
 * done. */
static int cln_pool_new_job(cln_pool *pool, uint64_t seen)
{
    return atomic_load_explicit(&pool->job, memory_order_acquire) != seen;
}

static int cln_pool_parts_done(cln_pool *pool, uint64_t unused)
{
    (void)unused;
    return atomic_load_explicit(&pool->pending, memory_order_acquire) == 0;
}

/* Watches for up to CLN_POOL_SPIN_NS, yielding the CPU at every look, until ready(pool, seen)
 * (1) or the time is up (0). */
static int cln_pool_watch(cln_pool *pool, int (*ready)(cln_pool *, uint64_t), uint64_t seen)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1;; ++i) {
        if (ready(pool, seen))
            return 1;
        sched_yield();
        if ((i & 7) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > CLN_POOL_SPIN_NS)
                return 0;
        }
    }
}

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
    /* not the job it finds once running: a job published between pthread_create and this point
     * would be missed */
    uint64_t seen = w->job0;
    for (;;) {
        /* the next job: watched for a while, then waited for asleep */
        if (!cln_pool_watch(pool, cln_pool_new_job, seen)) {
            pthread_mutex_lock(&pool->mu);
            while (atomic_load_explicit(&pool->job, memory_order_acquire) == seen && !pool->quit)
                pthread_cond_wait(&pool->wake, &pool->mu);
            const int quit = pool->quit;
            pthread_mutex_unlock(&pool->mu);
            if (quit)
                break;
        }
        seen = atomic_load_explicit(&pool->job, memory_order_acquire);
        if (w->index > seen % CLN_POOL_JOB_HELPERS)
            continue; /* not needed for this job: nothing else of it is read */
        /* the job's fields were written before it was published (release), and are not written
         * again before this part of it is done */
        pool->fn(pool->arg, w->index, pool->parts);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            /* the last part: the caller may be asleep on `done` (it checks pending under the
             * mutex, so taking the mutex here cannot slip between its check and its wait) */
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
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
        /* no job runs now: only this thread publishes jobs */
        w->job0 = atomic_load_explicit(&pool->job, memory_order_relaxed);
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
        atomic_store_explicit(&pool->pending, (int)helpers, memory_order_relaxed);
        const uint64_t job = atomic_load_explicit(&pool->job, memory_order_relaxed);
        atomic_store_explicit(&pool->job,
                              (job / CLN_POOL_JOB_HELPERS + 1) * CLN_POOL_JOB_HELPERS + helpers,
                              memory_order_release); /* publishes the above */
        pthread_cond_broadcast(&pool->wake);         /* for sleeping workers */
        pthread_mutex_unlock(&pool->mu);
    }
    fn(arg, 0, parts);
    for (size_t p = helpers + 1; p < parts; ++p) /* parts of workers that could not start */
        fn(arg, p, parts);
    if (helpers > 0 && !cln_pool_watch(pool, cln_pool_parts_done, 0)) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0)
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
