/* ranks_chunks.c - the chunks' bytes (ranks_run.h): what each rank makes of the chunks it
 * solves (summary lines, CSV rows, JSON entries, the CRCs of their rows of the arrays), kept in
 * the progress record with --resume, gathered in order and written by rank 0. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ranks_run.h"
#include "text.h"

/* ---- the chunk bytes ---- */

#define CHUNK_MAGIC "clnchk1"

typedef struct chunk_head {
    char magic[8];
    uint64_t first, count, ok;
    int64_t min_steps, max_steps;
    uint64_t n_summary, n_csv, n_json, n_part; /* n_part: a solve_out_part (array outputs) */
} chunk_head;

/* A chunk's bytes: its header, summary lines, CSV rows and JSON entries, then its CRCs (array
 * outputs) when part is not NULL. Returns a new buffer of *len bytes, or NULL (out of memory). */
static char *chunk_bytes(const run *r, const clnode_solution *sol, size_t first, size_t count,
                         const solve_out_part *part, size_t *len)
{
    const clnode_solve_options *o = &r->a->pb.opts;
    char *t[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    FILE *f[3];
    for (int k = 0; k < 3; ++k)
        f[k] = open_memstream(&t[k], &n[k]);
    chunk_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CHUNK_MAGIC, sizeof h.magic);
    h.first = first;
    h.count = count;
    h.min_steps = -1;
    h.max_steps = -1;
    int rc = f[0] && f[1] && f[2] ? 0 : TOOL_EXIT_RESOURCE;
    for (size_t i = 0; i < count && !rc; ++i) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, i, &s);
        h.ok += s.result == CLNODE_RESULT_SUCCESS;
        if (h.min_steps < 0 || s.num_steps < h.min_steps)
            h.min_steps = s.num_steps;
        if (s.num_steps > h.max_steps)
            h.max_steps = s.num_steps;
        solve_summary_trajectory(f[0], sol, i, first + i, r->batch, o->precision);
        if (r->a->out_path && r->fmt == SOLVE_OUT_CSV)
            rc = solve_csv_rows(f[1], sol, i, first + i, o);
        if (!rc && r->a->json)
            rc = solve_json_trajectory(f[2], sol, i, first + i, o, &r->a->pb.prob,
                                       r->a->json_points);
    }
    for (int k = 0; k < 3; ++k)
        if (f[k] && fclose(f[k]) != 0)
            rc = TOOL_EXIT_RESOURCE;
    char *b = NULL;
    const size_t np = part ? sizeof *part : 0;
    *len = sizeof h + n[0] + n[1] + n[2] + np;
    if (!rc && (b = malloc(*len)) != NULL) {
        h.n_summary = n[0];
        h.n_csv = n[1];
        h.n_json = n[2];
        h.n_part = np;
        memcpy(b, &h, sizeof h);
        memcpy(b + sizeof h, t[0], n[0]);
        memcpy(b + sizeof h + n[0], t[1], n[1]);
        memcpy(b + sizeof h + n[0] + n[1], t[2], n[2]);
        if (part)
            memcpy(b + sizeof h + n[0] + n[1] + n[2], part, np);
    }
    for (int k = 0; k < 3; ++k)
        free(t[k]);
    return b;
}

int ranks_on_chunk(void *user, size_t chunk, size_t first, size_t count, clnode_solution **solp,
                   char *msg, size_t msgcap)
{
    run *r = user;
    solve_out_part part;
    memset(&part, 0, sizeof part);
    for (size_t i = 0; r->a->grad_path && i < count; ++i) {
        const uint64_t n = clnode_solution_points(*solp, i);
        r->grad_tmax = n > r->grad_tmax ? n : r->grad_tmax;
        r->ctmax[chunk] = n > r->ctmax[chunk] ? n : r->ctmax[chunk];
    }
    if (r->w) { /* this chunk's rows of the arrays, at their offsets in the shared file */
        char err[200];
        if (solve_out_write(r->w, *solp, first, 0, ranks_pwrite, r, &part, err, sizeof err) != 0) {
            snprintf(msg, msgcap, "writing trajectories %zu..%zu of %s: %s", first,
                     first + count - 1, r->a->out_path, err);
            return 1;
        }
    }
    size_t len = 0;
    char *b = chunk_bytes(r, *solp, first, count, r->w ? &part : NULL, &len);
    if (!b) {
        snprintf(msg, msgcap, "out of memory for the output of trajectories %zu..%zu", first,
                 first + count - 1);
        return 1;
    }
    r->buf[chunk] = b;
    r->len[chunk] = len;
    if (r->deferred) { /* the arrays' layout needs every chunk's points: written after the solve */
        r->sols[chunk] = *solp;
        *solp = NULL;
    }
    if (r->dir) {
        char *p = ranks_chunk_path(r, chunk);
        if (!p || ranks_write_atomic(p, b, len) != 0) {
            snprintf(msg, msgcap, "cannot write the progress record %s: %s", p ? p : r->dir,
                     strerror(errno));
            free(p);
            return 1;
        }
        free(p);
    }
    if (!r->a->grad_path) /* with --grad-out: after the chunk's share is recorded */
        ranks_test_exit_hook(r);
    return 0;
}

/* Reads the header of a chunk of the progress record; 0 when it is whole and of chunk c. */
int ranks_read_chunk(const run *r, size_t c, char **data, size_t *len)
{
    char *p = ranks_chunk_path(r, c);
    FILE *f = p ? fopen(p, "rb") : NULL;
    free(p);
    if (!f)
        return -1;
    chunk_head h;
    int rc = -1;
    struct stat st;
    if (fread(&h, sizeof h, 1, f) == 1 && fstat(fileno(f), &st) == 0 &&
        memcmp(h.magic, CHUNK_MAGIC, sizeof h.magic) == 0 && h.first == c * r->chunk_size &&
        h.count == (r->batch - h.first < r->chunk_size ? r->batch - h.first : r->chunk_size) &&
        h.n_part == (r->w ? sizeof(solve_out_part) : 0) &&
        (uint64_t)st.st_size == sizeof h + h.n_summary + h.n_csv + h.n_json + h.n_part) {
        rc = 0;
        if (data) {
            *len = (size_t)st.st_size;
            *data = malloc(*len);
            rc = *data && fseek(f, 0, SEEK_SET) == 0 && fread(*data, 1, *len, f) == *len ? 0 : -1;
            if (rc) {
                free(*data);
                *data = NULL;
            }
        }
    }
    fclose(f);
    return rc;
}

int ranks_get_chunk(void *user, size_t c, const void **data, size_t *len)
{
    run *r = user;
    if (r->buf[c]) {
        *data = r->buf[c];
        *len = r->len[c];
        return 0;
    }
    free(r->rbuf);
    r->rbuf = NULL;
    if (!r->dir || ranks_read_chunk(r, c, &r->rbuf, len) != 0)
        return -1;
    *data = r->rbuf;
    return 0;
}

/* Rank 0: one chunk's bytes into the outputs, in order. */
int ranks_deliver_chunk(void *user, size_t c, const void *data, size_t len)
{
    run *r = user;
    chunk_head h;
    if (len < sizeof h)
        return -1;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, CHUNK_MAGIC, sizeof h.magic) != 0 || h.first != c * r->chunk_size ||
        h.n_part != (r->w ? sizeof(solve_out_part) : 0) ||
        len != sizeof h + h.n_summary + h.n_csv + h.n_json + h.n_part)
        return -1;
    const char *p = (const char *)data + sizeof h;
    if (r->delivered == 0 && r->a->json)
        solve_json_head(stdout, &r->a->pb, r->ctx, r->model, r->batch, r->wall);
    r->delivered++;
    r->ok += h.ok;
    if (r->min_steps < 0 || h.min_steps < r->min_steps)
        r->min_steps = h.min_steps;
    if (h.max_steps > r->max_steps)
        r->max_steps = h.max_steps;
    if (fwrite(p, 1, h.n_summary, r->sum) != h.n_summary)
        return -1;
    if (r->csv && fwrite(p + h.n_summary, 1, h.n_csv, r->csv) != h.n_csv)
        return -1;
    if (r->a->json && fwrite(p + h.n_summary + h.n_csv, 1, h.n_json, stdout) != h.n_json)
        return -1;
    if (r->w)
        memcpy(&r->parts[c], p + h.n_summary + h.n_csv + h.n_json, sizeof *r->parts);
    return 0;
}

/* Appends chunk c's CRCs to its bytes. Returns 0 or -1 (out of memory). */
int ranks_append_part(run *r, size_t c, const solve_out_part *part)
{
    char *b = realloc(r->buf[c], r->len[c] + sizeof *part);
    if (!b)
        return -1;
    chunk_head h;
    memcpy(&h, b, sizeof h);
    h.n_part = sizeof *part;
    memcpy(b, &h, sizeof h);
    memcpy(b + r->len[c], part, sizeof *part);
    r->buf[c] = b;
    r->len[c] += sizeof *part;
    return 0;
}
