/* ranks.c - clnode-solve across the ranks of MPI_COMM_WORLD (ranks.h).
 *
 * Every rank opens the same problem (its own device: "%l" in the device string is the node-local
 * rank) and calls clnode_solve_mpi, which hands out fixed chunks of trajectories as ranks finish.
 * Each rank turns its chunks into bytes (summary lines, CSV rows, JSON entries: text.c, the
 * writers of the one-process run) as they are solved; rank 0 then gathers the chunks in order and
 * writes every output, so the files are the same bytes at any number of ranks.
 *
 * --out FILE.npy/.npz is written in parallel: every rank writes the rows of the chunks it solves
 * at their offsets (MPI_File_write_at on a temporary file; arrays.h lays the file out
 * before any data), rank 0 gathers the chunks' CRC-32s with the other bytes, combines them in
 * trajectory order and writes the headers last, then the file is cut to its size and renamed.
 *
 * --resume keeps each solved chunk's bytes (and CRCs) in a progress record beside the output,
 * OUT.progress/chunk-C, written atomically by the rank that solved it (on a shared filesystem
 * across nodes), under a manifest of everything the result depends on, item by item (a rerun
 * whose problem differs is refused, naming what changed); array outputs are written
 * into OUT.progress/data. A rerun solves only the chunks the record lacks and removes it once the
 * output is written.
 *
 * --grad-out runs clnode_gradient_mpi instead: the same chunks (whole blocks), each rank's chunks'
 * shares of the gradient gathered and summed on rank 0 in the library's tree, G written by rank 0
 * after the other outputs; with --resume each chunk's share is kept as OUT.progress/grad-C.
 *
 * Every output is written to a temporary file (the arrays' with --resume: OUT.progress/data) and
 * rank 0 renames them over their targets together at the end, so that they appear together or
 * not at all. SIGINT and SIGTERM stop the solves and reverse passes at their next step or group
 * of blocks on every rank (the library's cancel), and end the process with the signal's status,
 * its temporary files removed and the progress record kept (tool_temp.h).
 *
 * This file is the driver; the chunks' bytes, the progress record, the shared file of the arrays
 * and the gradient's shares are files of their own (ranks_run.h). */
#include "ranks.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode/mpi.h"
#include "ranks_run.h"
#include "text.h"
#include "tool_temp.h"

int solve_mpi_wanted(const solve_args *a)
{
    const char *e = getenv("CLNODE_MPI");
    if (e && strcmp(e, "0") == 0)
        return 0;
    if ((e && strcmp(e, "1") == 0) || a->resume)
        return 1;
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static run R0; /* the one run of this process */

static void mpi_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    const run *r = user;
    if (r->rank == 0) {
        tool_log(NULL, level, code, msg);
        return;
    }
    /* a failure of the collective solve is reported by rank 0 (with this rank's message); before
       it, what fails on this rank (its device) is said here */
    if (level == CLNODE_LOG_WARN || (level == CLNODE_LOG_ERROR && !r->started))
        fprintf(stderr, "%s: rank %d: %s%s\n", tool_prog, r->rank,
                level == CLNODE_LOG_ERROR ? "" : "warning: ", msg);
}

/* s with every "%l" replaced by the node-local rank (a new string, or NULL when out of memory). */
static char *subst_local(const char *s, int local)
{
    char num[16];
    snprintf(num, sizeof num, "%d", local);
    size_t n = 0;
    for (const char *p = s; *p; ++p)
        n += (p[0] == '%' && p[1] == 'l') ? strlen(num) : 1;
    char *out = malloc(n + 1), *q = out;
    if (!out)
        return NULL;
    for (const char *p = s; *p; ++p) {
        if (p[0] == '%' && p[1] == 'l') {
            memcpy(q, num, strlen(num));
            q += strlen(num);
            ++p;
        } else {
            *q++ = *p;
        }
    }
    *q = '\0';
    return out;
}

/* The solves' cancel callback: a signal received (tool_temp.h), or the test hook's failing rank. */
static int run_cancel(void *user)
{
    const run *r = user;
    return r->rank == r->fail_rank || tool_temp_cancel(NULL);
}

/* The chunks gathered into the outputs' temporary files (rank 0's text, the arrays' headers).
 * Collective. Returns 0 or the exit status. */
static int gather_and_write(run *r, clnode_context *ctx, const int *owner, tool_out *out)
{
    if (r->rank == 0) {
        r->sum = open_memstream(&r->sum_text, &r->sum_len);
        if (out->f) {
            r->csv = out->f;
            solve_csv_header(r->csv, clnode_model_dim(r->model));
        }
    }
    int rc = r->rank == 0 && !r->sum ? TOOL_EXIT_RESOURCE : 0;
    if (ranks_agree(rc))
        return TOOL_EXIT_RESOURCE;
    clnode_status st = clnode_mpi_gather(ctx, MPI_COMM_WORLD, 0, r->nc, owner, ranks_get_chunk,
                                         ranks_deliver_chunk, r);
    if (r->sum && fclose(r->sum) != 0)
        st = st == CLNODE_OK ? CLNODE_ERR_OUT_OF_MEMORY : st;
    r->sum = NULL;
    if (st != CLNODE_OK) /* rank 0's logger said why */
        return TOOL_EXIT_RESOURCE;
    return r->w ? ranks_arrays_commit(r) : 0;
}

/* Rank 0, every output written to its temporary file: the arrays' file, --out's text and G renamed
 * over their targets together (tool_out_commit_all), then the progress record removed. Returns
 * 0 or the exit status. */
static int commit_outputs(run *r, tool_out *out, tool_out *gout)
{
    tool_out arr; /* the arrays' file, written through MPI-IO and closed */
    memset(&arr, 0, sizeof arr);
    arr.a.fd = -1;
    arr.a.slot = -1;
    if (r->w && r->tmp) {
        arr.path = strdup(r->a->out_path);
        if (!arr.path) {
            tool_error("out of memory");
            return TOOL_EXIT_RESOURCE;
        }
        if (r->dir) { /* the record's data file, renamed as a temporary file: it stays if the
                         renames fail */
            arr.a.tmp = r->tmp;
            arr.a.keep = 1;
            r->tmp = NULL;
        } else {
            arr.a = r->file;
            memset(&r->file, 0, sizeof r->file);
            r->file.fd = -1;
            r->file.slot = -1;
        }
        arr.t = r->target;
        memset(&r->target, 0, sizeof r->target);
    }
    tool_out *const outs[] = {&arr, out, gout};
    const int rc = tool_out_commit_all(outs, 3);
    if (!rc && r->dir)
        ranks_progress_remove(r);
    return rc;
}

/* Rank 0: the report on standard output (the summary or --json's tail), once the outputs are in
 * place. Returns 0, or the exit status (1: a trajectory failed). */
static int write_report(run *r, const clnode_context *ctx)
{
    solve_args *a = r->a;
    if (a->json) {
        solve_json_tail(stdout, NULL, NULL, r->wall);
        if (fflush(stdout) != 0) {
            tool_error("cannot write standard output");
            return TOOL_EXIT_RESOURCE;
        }
    } else if (!a->quiet) {
        const int to_stderr = a->out_path && strcmp(a->out_path, "-") == 0;
        FILE *f = to_stderr ? stderr : stdout;
        solve_summary_head(f, &a->pb, ctx, r->model, r->batch);
        fwrite(r->sum_text, 1, r->sum_len, f);
        solve_summary_tail(f, r->ok, r->batch, r->min_steps, r->max_steps, r->wall);
        if (fflush(f) != 0) {
            tool_error("cannot write standard output");
            return TOOL_EXIT_RESOURCE;
        }
    }
    return r->ok < r->batch ? TOOL_EXIT_UNSUCCESSFUL : TOOL_EXIT_OK;
}

static long env_long(const char *name, long dflt)
{
    const char *e = getenv(name);
    return e && *e ? strtol(e, NULL, 10) : dflt;
}

int solve_mpi_init(solve_args *a, int *argc, char ***argv)
{
    run *r = &R0;
    MPI_Init(argc, argv);
    memset(r, 0, sizeof *r);
    r->file.fd = -1;
    r->file.slot = -1;
    r->a = a;
    r->min_steps = -1;
    r->max_steps = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->R);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &r->local);
    MPI_Comm_free(&node);
    r->exit_after = env_long("CLNODE_SOLVE_TEST_EXIT_AFTER", 0);
    r->exit_rank = (int)env_long("CLNODE_SOLVE_TEST_EXIT_RANK", -1);
    r->fail_rank = (int)env_long("CLNODE_SOLVE_TEST_FAIL_RANK", -1);

    tool_problem *pb = &a->pb;
    pb->log = mpi_log;
    pb->log_user = r;
    /* each rank its own device: "%l" is the node-local rank */
    const char *env_dev = getenv("CLNODE_DEVICE");
    if (!pb->device && !pb->backend && env_dev)
        pb->device = env_dev;
    if (pb->device)
        pb->device = r->dev = subst_local(pb->device, r->local);
    if (pb->backend)
        pb->backend = r->backend = subst_local(pb->backend, r->local);
    if ((a->pb.device && !r->dev) || (a->pb.backend && !r->backend)) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    return 0;
}

/* The outputs before the solve: the arrays' layout and shared file (or, with --save steps or
 * --ragged, room for the solutions until the layout is known), rank 0's text output, and with
 * --resume the progress record, whose solved chunks are marked in skip on every rank. Collective.
 * Returns 0 or the exit status. */
static int prepare_outputs(run *r, const double *y0, unsigned char *skip, tool_out *out)
{
    const solve_args *a = r->a;
    int rc = 0;
    r->deferred = a->out_path && r->fmt != SOLVE_OUT_CSV && (a->pb.opts.save_steps || a->ragged);
    if (r->deferred && a->resume) {
        if (r->rank == 0)
            tool_error("--resume with --save steps or --ragged and --out FILE.npy/.npz is not "
                       "available under MPI (the layout is known only after the whole solve)");
        return TOOL_EXIT_INPUT;
    }
    if (r->deferred && !(r->sols = calloc(r->nc ? r->nc : 1, sizeof *r->sols)))
        rc = TOOL_EXIT_RESOURCE;
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    if (a->out_path && r->fmt != SOLVE_OUT_CSV && !r->deferred &&
        (rc = ranks_arrays_plan(r, 0)) != 0)
        return rc;
    /* rank 0 writes the text outputs: a path that cannot be written fails before the work */
    if (r->rank == 0 && a->out_path && r->fmt == SOLVE_OUT_CSV)
        rc = tool_out_open(out, a->out_path);
    if (a->resume)
        rc = ranks_record_start(r, y0, skip, rc);
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    if (a->out_path && r->fmt != SOLVE_OUT_CSV && !r->deferred && (rc = ranks_arrays_open(r)) != 0)
        return rc;
    if (r->dir)
        MPI_Bcast(skip, (int)r->nc, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    return 0;
}

/* Frees what a run holds (the chunks' bytes, kept solutions, the layout). */
static void run_free(run *r)
{
    if (r->buf)
        for (size_t c = 0; c < r->nc; ++c)
            free(r->buf[c]);
    free(r->buf);
    free(r->len);
    free(r->rbuf);
    free(r->gbuf);
    free(r->ctmax);
    free(r->sum_text);
    free(r->dir);
    free(r->w);
    free(r->parts);
    if (r->sols)
        for (size_t c = 0; c < r->nc; ++c)
            clnode_solution_destroy(&r->sols[c]);
    free(r->sols);
    solve_grad_free(&r->cot);
    clnode_gradient_destroy(&r->g);
}

/* The collective solve: clnode_solve_mpi, or with --grad-out clnode_gradient_mpi (the reverse
 * pass on the rank's device: solve_grad_context). */
static clnode_status solve_or_gradient(run *r, clnode_context *ctx, const clnode_solve_options *o,
                                       const clnode_problem *p, const clnode_mpi_options *m,
                                       int *owner)
{
    if (!r->a->grad_path)
        return clnode_solve_mpi(ctx, r->model, o, p, MPI_COMM_WORLD, m, owner);
    clnode_context *rev = NULL, *own = NULL;
    /* every rank reaches the call: a rank that could not open its reverse pass's context passes
       its own, whose reverse pass then fails collectively, naming it */
    if (solve_grad_context(ctx, &rev, &own) != 0)
        rev = ctx;
    clnode_gradient_options go;
    clnode_gradient_default_options(&go);
    go.cancel = solve_grad_cancel;
    const clnode_status st = clnode_gradient_mpi(ctx, rev, r->model, o, &go, p, r->cot.T, r->cot.v,
                                                 MPI_COMM_WORLD, m, owner, &r->g);
    clnode_context_destroy(&own);
    return st;
}

int solve_mpi_run(solve_args *a, clnode_context *ctx, const clnode_model *model, const double *y0,
                  size_t batch)
{
    run *r = &R0;
    r->entered = 1;
    int *owner = NULL;
    unsigned char *skip = NULL;
    tool_out out, gout;
    memset(&out, 0, sizeof out);
    memset(&gout, 0, sizeof gout);
    /* every rank has opened the problem (solve_mpi_finish answers this on a rank that could not) */
    int rc = 0;
    if (a->certify) {
        if (r->rank == 0)
            tool_error("--certify is not available under MPI (certify the run in one process)");
        rc = TOOL_EXIT_INPUT;
    }
    const int all = ranks_agree(rc);
    if (all) {
        if (!rc && r->rank == 0)
            tool_error("another rank could not open the problem or its device (see above)");
        return all;
    }
    r->ctx = ctx;
    r->model = model;
    r->batch = batch;
    r->fmt = a->out_path ? solve_out_format(a->out_path) : SOLVE_OUT_CSV;
    r->chunk_size = a->chunk_size > 0 ? (size_t)a->chunk_size
                    : a->grad_path    ? clnode_mpi_gradient_chunk_size(r->batch)
                                      : clnode_mpi_default_chunk_size(r->batch);
    r->nc = clnode_mpi_num_chunks(r->batch, r->chunk_size);
    r->buf = calloc(r->nc ? r->nc : 1, sizeof *r->buf);
    r->len = calloc(r->nc ? r->nc : 1, sizeof *r->len);
    owner = malloc((r->nc ? r->nc : 1) * sizeof *owner);
    skip = calloc(r->nc ? r->nc : 1, 1);
    rc = r->buf && r->len && owner && skip ? 0 : TOOL_EXIT_RESOURCE;
    if (rc)
        tool_error("out of memory for %zu chunks", r->nc);
    if (!rc && r->nc > (size_t)1 << 30) {
        if (r->rank == 0)
            tool_error("%zu chunks are too many: raise --chunk-size", r->nc);
        rc = TOOL_EXIT_INPUT;
    }
    if ((rc = ranks_agree(rc)) != 0)
        goto done;

    if (a->grad_path && (rc = ranks_grad_open(r, &gout)) != 0)
        goto done;
    if ((rc = prepare_outputs(r, y0, skip, &out)) != 0)
        goto done;

    clnode_mpi_options m;
    clnode_mpi_default_options(&m);
    m.chunk_size = r->chunk_size;
    const char *split = getenv("CLNODE_MPI_SPLIT");
    m.static_split = split && strcmp(split, "static") == 0;
    m.skip = skip;
    m.on_chunk = ranks_on_chunk;
    m.chunk_user = r;
    m.on_gradient = ranks_on_gradient;
    m.get_gradient = ranks_get_gradient;
    m.gradient_user = r;
    clnode_solve_options o = a->pb.opts;
    o.cancel = run_cancel; /* SIGINT, SIGTERM: every rank stops at its next step (the record
                              keeps the chunks solved), and this one ends with the signal */
    o.cancel_user = r;
    r->started = 1;
    const double t_start = tool_now();
    clnode_problem p = a->pb.prob;
    p.batch = r->batch;
    p.y0 = y0;
    tool_temp_cooperate(1);
    clnode_status st = solve_or_gradient(r, ctx, &o, &p, &m, owner);
    tool_temp_cooperate(0);
    r->wall = tool_now() - t_start;
    if (st != CLNODE_OK) { /* rank 0's logger printed why, naming the rank */
        rc = tool_exit_status(st);
        goto done;
    }
    if (r->deferred && (rc = ranks_arrays_deferred(r)) != 0)
        goto done;
    /* every output to its temporary file, then all renamed together, then the report */
    rc = ranks_agree(gather_and_write(r, ctx, owner, &out));
    if (!rc && a->grad_path)
        rc = ranks_grad_write(r, &gout);
    if (!rc)
        rc = ranks_agree(r->rank == 0 ? commit_outputs(r, &out, &gout) : 0);
    if (!rc)
        rc = ranks_agree(r->rank == 0 ? write_report(r, ctx) : 0);
done:
    ranks_arrays_abort(r);
    tool_out_abort(&out);
    tool_out_abort(&gout);
    run_free(r);
    free(owner);
    free(skip);
    return rc;
}

int solve_mpi_finish(int rc)
{
    run *r = &R0;
    if (!r->entered) /* this rank could not open the problem: answer the others' agreement */
        ranks_agree(rc ? rc : TOOL_EXIT_RESOURCE);
    r->a->pb.device = NULL;
    r->a->pb.backend = NULL;
    free(r->dev);
    free(r->backend);
    MPI_Finalize();
    return rc;
}
