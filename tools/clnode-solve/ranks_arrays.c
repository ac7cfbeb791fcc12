/* ranks_arrays.c - the shared file of the array outputs (ranks_run.h): --out FILE.npy/.npz
 * written in parallel, every rank writing the rows of the chunks it solves at their offsets
 * (MPI_File_write_at on a temporary file, or OUT.progress/data with --resume), rank 0 the headers
 * last; then the file is cut to its size and, with the other outputs, renamed over its target. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks_run.h"
#include "tool_temp.h"

/* ---- the shared file of the array outputs ---- */

/* Lays out the arrays (the same on every rank) for `points` (with --save steps the most saved
 * points of a trajectory, --ragged their total). Collective. Returns 0 or the exit status. */
int ranks_arrays_plan(run *r, uint64_t points)
{
    const solve_args *a = r->a;
    int rc = 0;
    char err[256] = "out of memory";
    r->w = calloc(1, sizeof *r->w);
    r->parts = r->rank == 0 ? calloc(r->nc ? r->nc : 1, sizeof *r->parts) : NULL;
    if (!r->w || (r->rank == 0 && !r->parts))
        rc = TOOL_EXIT_RESOURCE;
    else if (solve_out_plan(r->w, r->fmt, a->ragged, &a->pb.opts, &a->pb.prob, r->batch,
                            clnode_model_dim(r->model), points, err, sizeof err) != 0)
        rc = TOOL_EXIT_RESOURCE;
    if (rc && r->rank == 0)
        tool_error("cannot lay out %s: %s", a->out_path, err);
    return ranks_agree(rc);
}

/* Opens the shared file: OUT.progress/data with --resume (kept, with the rows of the chunks
 * already solved), else a new temporary name beside OUT that rank 0 chooses. Collective. Returns
 * 0 or the exit status. */
int ranks_arrays_open(run *r)
{
    const solve_args *a = r->a;
    int rc = 0;
    /* the name: rank 0 makes it and tells the others */
    char name[4096] = "";
    if (r->rank == 0) {
        rc = tool_target_open(&r->target, a->out_path);
        if (!rc && r->target.special) {
            tool_error("cannot write %s: not a regular file (the arrays are written at their "
                       "offsets)",
                       a->out_path);
            rc = TOOL_EXIT_RESOURCE;
        }
        if (!rc && r->dir) {
            snprintf(name, sizeof name, "%s/data", r->dir);
        } else if (!rc) { /* beside the target, with its mode, owner and group */
            const int fd = tool_target_mktemp(&r->target, a->out_path, &r->file);
            if (fd >= 0)
                cln_atomic_close(&r->file); /* MPI-IO opens it by its name */
            if (fd >= 0 && strlen(r->file.tmp) < sizeof name) {
                memcpy(name, r->file.tmp, strlen(r->file.tmp) + 1);
            } else if (fd >= 0) {
                tool_error("cannot write %s: %s", a->out_path, strerror(ENAMETOOLONG));
                cln_atomic_abort(&r->file);
            }
            rc = name[0] ? 0 : TOOL_EXIT_RESOURCE;
        }
    }
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    r->tmp = strdup(name);
    /* MPI_MODE_CREATE does not truncate: a resumed record keeps its rows; the file is cut to the
       layout's size at the end */
    int mrc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                            &r->fh);
    r->fh_open = mrc == MPI_SUCCESS;
    rc = r->tmp && r->fh_open ? 0 : TOOL_EXIT_RESOURCE;
    if (rc && r->rank == 0)
        tool_error("cannot open %s for parallel writing (MPI_File_open)", name);
    return ranks_agree(rc);
}

/* After the gather: rank 0 combines the CRCs and writes the headers; the file is cut to its size,
 * closed and (rank 0) given the target's mode, owner and group (commit_outputs renames it over OUT
 * with the other outputs). Collective. Returns 0 or the exit status. */
int ranks_arrays_commit(run *r)
{
    int rc = 0;
    if (r->rank == 0) {
        char err[256];
        if (solve_out_finish(r->w, r->parts, r->nc, ranks_pwrite, r, err, sizeof err) != 0) {
            tool_error("cannot write %s: %s", r->a->out_path, err);
            rc = TOOL_EXIT_RESOURCE;
        }
    }
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    const uint64_t size = r->fmt == SOLVE_OUT_NPY ? r->w->L.m[0].size : r->w->L.size;
    int mrc = MPI_File_set_size(r->fh, (MPI_Offset)size);
    int crc = MPI_File_close(&r->fh);
    r->fh_open = 0;
    rc = mrc == MPI_SUCCESS && crc == MPI_SUCCESS ? 0 : TOOL_EXIT_RESOURCE;
    if (rc && r->rank == 0)
        tool_error("cannot write %s (MPI_File_set_size/close)", r->a->out_path);
    if (!rc && r->rank == 0) { /* the target's mode, owner and group */
        const int fd = open(r->tmp, O_RDONLY);
        if (fd < 0) {
            tool_error("cannot write %s: %s", r->a->out_path, strerror(errno));
            rc = TOOL_EXIT_RESOURCE;
        } else {
            rc = tool_target_adopt(&r->target, fd, r->a->out_path);
            close(fd);
        }
    }
    return ranks_agree(rc);
}

/* A failed run: no file that looks complete. The temporary file goes; the data of a progress
 * record stays for the rerun. Collective when the file is open. */
void ranks_arrays_abort(run *r)
{
    if (r->fh_open)
        MPI_File_close(&r->fh);
    r->fh_open = 0;
    cln_atomic_abort(&r->file); /* rank 0: the temporary file (a record's data file is none) */
    free(r->tmp);
    r->tmp = NULL;
    tool_target_free(&r->target);
}

/* --save steps or --ragged with an array output: the layout needs the points of every chunk (the
 * most of one trajectory: MPI_Allreduce MAX; ragged: each chunk's total, MPI_Allreduce SUM, and
 * their prefix sums, the first row of each chunk). Then every rank writes the rows of the chunks
 * it kept. Collective. Returns 0 or the exit status. */
int ranks_arrays_deferred(run *r)
{
    const int ragged = r->a->ragged;
    uint64_t *tot = calloc(r->nc ? r->nc : 1, sizeof *tot), tmax = 0, points = 0;
    int rc = tot ? 0 : TOOL_EXIT_RESOURCE;
    for (size_t c = 0; c < r->nc && !rc; ++c) {
        const clnode_solution *sol = r->sols[c];
        for (size_t i = 0; sol && i < clnode_solution_batch(sol) && !rc; ++i) {
            const size_t n = clnode_solution_points(sol, i);
            tot[c] += n;
            tmax = n > tmax ? n : tmax;
        }
    }
    if (rc)
        tool_error("out of memory counting the saved points");
    if ((rc = ranks_agree(rc)) != 0) {
        free(tot);
        return rc;
    }
    if (ragged) {
        MPI_Allreduce(MPI_IN_PLACE, tot, (int)r->nc, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        for (size_t c = 0; c < r->nc; ++c) { /* tot[c] becomes chunk c's first point */
            const uint64_t n = tot[c];
            tot[c] = points;
            points += n;
        }
    } else {
        MPI_Allreduce(&tmax, &points, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    }
    if ((rc = ranks_arrays_plan(r, points)) != 0 || (rc = ranks_arrays_open(r)) != 0) {
        free(tot);
        return rc;
    }
    for (size_t c = 0; c < r->nc && !rc; ++c) {
        if (!r->sols[c])
            continue;
        solve_out_part part;
        char err[200];
        if (solve_out_write(r->w, r->sols[c], c * r->chunk_size, ragged ? tot[c] : 0, ranks_pwrite,
                            r, &part, err, sizeof err) != 0) {
            tool_error("rank %d: cannot write %s: %s", r->rank, r->a->out_path, err);
            rc = TOOL_EXIT_RESOURCE;
        } else if (ranks_append_part(r, c, &part) != 0) {
            tool_error("out of memory");
            rc = TOOL_EXIT_RESOURCE;
        }
        clnode_solution_destroy(&r->sols[c]);
    }
    free(tot);
    return ranks_agree(rc);
}
