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
 * its temporary files removed and the progress record kept (tool_temp.h). */
#include "ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clnode/mpi.h"
#include "arrays.h"
#include "grad.h"
#include "text.h"
#include "tool_common.h"
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

/* ---- the chunk bytes ---- */

#define CHUNK_MAGIC "clnchk1"

typedef struct chunk_head {
    char magic[8];
    uint64_t first, count, ok;
    int64_t min_steps, max_steps;
    uint64_t n_summary, n_csv, n_json, n_part; /* n_part: a solve_out_part (array outputs) */
} chunk_head;

typedef struct run {
    solve_args *a;
    int rank, R, local, started, entered;
    char *dev, *backend; /* the device strings with %l replaced */
    int fmt;             /* SOLVE_OUT_CSV, _NPY, _NPZ */
    /* array outputs: the layout, the shared file and its temporary name */
    solve_out *w;
    MPI_File fh;
    int fh_open;
    char *tmp;
    tool_target target;     /* rank 0: the file the arrays replace */
    int slot;               /* rank 0: the temporary file's registration (tool_temp.h), or -1 */
    solve_out_part *parts;  /* rank 0: every chunk's CRCs, in order */
    int deferred;           /* --save steps or --ragged: the arrays are laid out after the solve */
    clnode_solution **sols; /* deferred: the solutions of this rank's chunks until then */
    size_t batch, chunk_size, nc;
    char **buf; /* per chunk on the rank that solved it (NULL elsewhere) */
    size_t *len;
    char *dir; /* the progress record, or NULL */
    long exit_after, solved;
    int exit_rank, fail_rank;
    /* rank 0's writing */
    const clnode_context *ctx;
    const clnode_model *model;
    FILE *csv;
    double wall;
    size_t ok, delivered;
    long min_steps, max_steps;
    FILE *sum;
    char *sum_text;
    size_t sum_len;
    char *rbuf; /* a chunk read back from the progress record */
    /* --grad-out: the cotangents (every rank), the most points of a trajectory of this rank's
       chunks (--save steps), the gradient (clnode_gradient_mpi) */
    solve_cot cot;
    uint64_t grad_tmax;
    uint64_t *ctmax; /* per chunk solved here: the most points of one of its trajectories */
    clnode_gradient *g;
    char *gbuf; /* a chunk's share read back from the progress record */
} run;

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

/* Writes a file and waits until its bytes are on the disk (fsync). */
static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const int ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Writes a file atomically and durably: a temporary name in the same directory, on the disk,
 * then renamed, and the directory's entry on the disk too (a progress record survives the
 * machine stopping, not only the process). */
static int write_atomic(const char *path, const void *data, size_t len)
{
    const size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp", path);
    const int slot = tool_temp_register(tmp);
    int rc = write_all(tmp, data, len);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0)
        unlink(tmp);
    tool_temp_release(slot);
    if (rc == 0) { /* the directory: path up to its last slash */
        const char *slash = strrchr(path, '/');
        if (slash) {
            memcpy(tmp, path, (size_t)(slash - path));
            tmp[slash - path] = '\0';
        } else {
            snprintf(tmp, n, ".");
        }
        const int dfd = open(slash == path ? "/" : tmp, O_RDONLY | O_DIRECTORY);
        if (dfd < 0 || fsync(dfd) != 0)
            rc = -1;
        if (dfd >= 0)
            close(dfd);
    }
    free(tmp);
    return rc;
}

/* DIR/name of the progress record (malloc'd; NULL when out of memory). */
static char *record_path(const run *r, const char *name)
{
    const size_t n = strlen(r->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", r->dir, name);
    return p;
}

static char *chunk_path(const run *r, size_t c)
{
    char name[40];
    snprintf(name, sizeof name, "chunk-%zu", c);
    return record_path(r, name);
}

/* The positional writer of the array outputs: MPI_File_write_at on the shared file, in pieces
 * whose counts fit an int. */
static int mpi_pwrite(void *user, const void *buf, size_t len, uint64_t offset)
{
    run *r = user;
    const char *p = buf;
    for (size_t at = 0; at < len;) {
        const size_t n = len - at < ((size_t)1 << 30) ? len - at : ((size_t)1 << 30);
        MPI_Status st;
        int done = 0;
        if (MPI_File_write_at(r->fh, (MPI_Offset)(offset + at), p + at, (int)n, MPI_BYTE, &st) !=
                MPI_SUCCESS ||
            MPI_Get_count(&st, MPI_BYTE, &done) != MPI_SUCCESS || done <= 0)
            return -1;
        at += (size_t)done;
    }
    return 0;
}

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

/* Test hook: this rank dies (as a killed job would) after solving that many chunks. */
static void test_exit_hook(run *r)
{
    if (++r->solved == r->exit_after && (r->exit_rank < 0 || r->exit_rank == r->rank))
        _exit(86);
}

static int on_chunk(void *user, size_t chunk, size_t first, size_t count, clnode_solution **solp,
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
        if (solve_out_write(r->w, *solp, first, 0, mpi_pwrite, r, &part, err, sizeof err) != 0) {
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
        char *p = chunk_path(r, chunk);
        if (!p || write_atomic(p, b, len) != 0) {
            snprintf(msg, msgcap, "cannot write the progress record %s: %s", p ? p : r->dir,
                     strerror(errno));
            free(p);
            return 1;
        }
        free(p);
    }
    if (!r->a->grad_path) /* with --grad-out: after the chunk's share is recorded */
        test_exit_hook(r);
    return 0;
}

/* ---- the gradient's shares in the progress record ----
 *
 * OUT.progress/grad-C: a header (the most points of one of the chunk's trajectories, for the
 * slots of the cotangents with --save steps, and the share's length), then chunk C's share of
 * the gradient as clnode_gradient_mpi handed it. A chunk counts as solved when both its record
 * and its share are whole. */

#define GRAD_MAGIC "clngch1"

typedef struct grad_rec {
    char magic[8];
    uint64_t chunk, tmax, len;
} grad_rec;

static char *grad_path_of(const run *r, size_t c)
{
    char name[40];
    snprintf(name, sizeof name, "grad-%zu", c);
    return record_path(r, name);
}

static int on_gradient(void *user, size_t chunk, const void *data, size_t len, char *msg,
                       size_t msgcap)
{
    run *r = user;
    if (r->dir) {
        grad_rec h = {GRAD_MAGIC, chunk, r->ctmax[chunk], len};
        char *b = malloc(sizeof h + len), *p = grad_path_of(r, chunk);
        if (b) {
            memcpy(b, &h, sizeof h);
            memcpy(b + sizeof h, data, len);
        }
        if (!b || !p || write_atomic(p, b, sizeof h + len) != 0) {
            snprintf(msg, msgcap, "cannot write the progress record %s: %s", p ? p : r->dir,
                     strerror(errno));
            free(b);
            free(p);
            return 1;
        }
        free(b);
        free(p);
    }
    test_exit_hook(r);
    return 0;
}

/* Reads chunk c's share from the progress record into r->gbuf; 0 when it is whole. With `use`,
 * its most points count towards r->grad_tmax. */
static int read_grad_file(run *r, size_t c, size_t *len, int use)
{
    free(r->gbuf);
    r->gbuf = NULL;
    char *p = grad_path_of(r, c);
    size_t n = 0;
    /* a share not recorded is no error here: the chunk is solved again */
    const int rc = p && access(p, R_OK) == 0 ? tool_read_file(p, &r->gbuf, &n) : -1;
    free(p);
    grad_rec h;
    if (rc != 0 || n < sizeof h)
        return -1;
    memcpy(&h, r->gbuf, sizeof h);
    if (memcmp(h.magic, GRAD_MAGIC, sizeof h.magic) != 0 || h.chunk != c || h.len != n - sizeof h)
        return -1;
    if (use)
        r->grad_tmax = h.tmax > r->grad_tmax ? h.tmax : r->grad_tmax;
    *len = (size_t)h.len;
    return 0;
}

/* Rank 0, resuming: a skipped chunk's share. */
static int get_gradient(void *user, size_t c, const void **data, size_t *len)
{
    run *r = user;
    if (!r->dir || read_grad_file(r, c, len, 1) != 0)
        return -1;
    *data = r->gbuf + sizeof(grad_rec);
    return 0;
}

/* Reads the header of a chunk of the progress record; 0 when it is whole and of chunk c. */
static int read_chunk_file(const run *r, size_t c, char **data, size_t *len)
{
    char *p = chunk_path(r, c);
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

static int get_chunk(void *user, size_t c, const void **data, size_t *len)
{
    run *r = user;
    if (r->buf[c]) {
        *data = r->buf[c];
        *len = r->len[c];
        return 0;
    }
    free(r->rbuf);
    r->rbuf = NULL;
    if (!r->dir || read_chunk_file(r, c, &r->rbuf, len) != 0)
        return -1;
    *data = r->rbuf;
    return 0;
}

/* Rank 0: one chunk's bytes into the outputs, in order. */
static int deliver_chunk(void *user, size_t c, const void *data, size_t len)
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

/* ---- the progress record ----
 *
 * OUT.progress/manifest holds, item by item, everything the chunks' bytes depend on: one line
 * "KEY VALUE" per item after the format line. A resume whose items differ from the record's is
 * refused, naming each item that changed. What is not in it changes no bit by design: the rank
 * count, the device in strict GEMM mode (host, OpenCL and CUDA give the same bits), thread
 * counts, --quiet, --resume itself. */

#define RECORD_FORMAT 4
#define RECORD_HEAD "clnode-solve progress record "
#define RECORD_MAX_ITEMS 48 /* record_inputs and record_options add 33 */

typedef struct record_item {
    char key[24];
    char value[112];
    char what[400]; /* what the item is, for the message naming it */
    int hashed;     /* the value is a content hash: not shown in messages */
} record_item;

typedef struct record {
    record_item it[RECORD_MAX_ITEMS];
    size_t n;
} record;

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; ++i)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#define FNV_INIT 14695981039346656037ull

static record_item *add_item(record *m, const char *key, int hashed, const char *what)
{
    record_item *it = &m->it[m->n++];
    snprintf(it->key, sizeof it->key, "%s", key);
    snprintf(it->what, sizeof it->what, "%s", what);
    it->hashed = hashed;
    return it;
}

static void add_num(record *m, const char *key, const char *what, double x)
{
    tool_fmt_num(add_item(m, key, 0, what)->value, x, CLNODE_FP64);
}

static void add_long(record *m, const char *key, const char *what, long long v)
{
    snprintf(add_item(m, key, 0, what)->value, sizeof m->it[0].value, "%lld", v);
}

static void add_hash(record *m, const char *key, const char *what, const void *data, size_t n)
{
    snprintf(add_item(m, key, 1, what)->value, sizeof m->it[0].value, "fnv1a64:%016llx:%zu",
             (unsigned long long)fnv(FNV_INIT, data, n), n);
}

/* The FNV-1a hash of a file's bytes, read in pieces. Returns 0, or 2 after printing an error. */
static int hash_file(const char *path, char *value, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tool_error("--resume: cannot read the model file %s: %s", path, strerror(errno));
        return TOOL_EXIT_INPUT;
    }
    static unsigned char buf[1 << 16];
    uint64_t h = FNV_INIT, total = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        h = fnv(h, buf, n);
        total += n;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        tool_error("--resume: cannot read the model file %s", path);
        return TOOL_EXIT_INPUT;
    }
    snprintf(value, cap, "fnv1a64:%016llx:%llu", (unsigned long long)h, (unsigned long long)total);
    return 0;
}

/* A per-trajectory time (t0, t1, dt0): its array's contents, or the scalar option's value. */
static void add_time(record *m, const run *r, const char *key, const double *array,
                     const char *file, double scalar)
{
    const solve_args *a = r->a;
    char what[400];
    if (array && file)
        snprintf(what, sizeof what, "the %s array (--%s-file %s)", key, key, file);
    else if (array)
        snprintf(what, sizeof what, "the %s array (--in %s, member %s)", key, a->in_path, key);
    else
        snprintf(what, sizeof what, "--%s", key);
    if (array)
        add_hash(m, key, what, array, r->batch * sizeof *array);
    else
        add_num(m, key, what, scalar);
}

/* The inputs of the record: the library, the batch and its chunks, the model's bytes and every
 * input array's contents. Returns 0 or 2 after printing an error. */
static int record_inputs(const run *r, const double *y0, record *m)
{
    const solve_args *a = r->a;
    const clnode_solve_options *o = &a->pb.opts;
    const clnode_problem *p = &a->pb.prob;
    snprintf(add_item(m, "library", 0, "the clnode library")->value, sizeof m->it[0].value, "%s",
             clnode_version_string());
    add_long(m, "batch", "the batch size (--batch, or the rows of the inputs)",
             (long long)r->batch);
    add_long(m, "chunk_size", "--chunk-size", (long long)r->chunk_size);
    char what[400];
    if (a->pb.model_path) {
        snprintf(what, sizeof what, "the model file %s", a->pb.model_path);
        if (hash_file(a->pb.model_path, add_item(m, "model", 1, what)->value,
                      sizeof m->it[0].value) != 0)
            return TOOL_EXIT_INPUT;
    } else {
        snprintf(add_item(m, "model", 0, "the model (the built-in seed model)")->value,
                 sizeof m->it[0].value, "seed");
    }
    const size_t N = clnode_model_dim(r->model), k = clnode_model_num_inputs(r->model);
    if (a->pb.y0_file)
        snprintf(what, sizeof what, "the initial states y0 (--y0-file %s)", a->pb.y0_file);
    else if (a->in_path && !a->pb.y0)
        snprintf(what, sizeof what, "the initial states y0 (--in %s, member y0, or zeros)",
                 a->in_path);
    else
        snprintf(what, sizeof what, "the initial states y0 (%s)", a->pb.y0 ? "--y0" : "zeros");
    add_hash(m, "y0", what, y0, r->batch * N * sizeof *y0);
    add_time(m, r, "t0", p->t0s, a->t0_file, o->t0);
    add_time(m, r, "t1", p->t1s, a->t1_file, o->t1);
    add_time(m, r, "dt0", p->dt0s, a->dt0_file, o->dt0);
    if (p->inputs) {
        if (a->args_file)
            snprintf(what, sizeof what, "the conditioning inputs (--args-file %s)", a->args_file);
        else
            snprintf(what, sizeof what, "the conditioning inputs (--in %s, member args)",
                     a->in_path);
        add_hash(m, "args", what, p->inputs, r->batch * k * sizeof *p->inputs);
    } else {
        snprintf(add_item(m, "args", 0, "the conditioning inputs")->value, sizeof m->it[0].value,
                 "none");
    }
    if (a->cot_path) { /* --grad-out: the chunks' shares of the gradient depend on them */
        snprintf(what, sizeof what, "the cotangents (--cotangents %s)", a->cot_path);
        add_hash(m, "cotangents", what, r->cot.v, r->cot.B * r->cot.T * r->cot.N * sizeof(double));
    } else {
        snprintf(add_item(m, "cotangents", 0, "--cotangents (the gradient)")->value,
                 sizeof m->it[0].value, "none");
    }
    return 0;
}

/* The options as parsed (canonical values: --rtol=1e-3 and --rtol 0.001 are the same item) and
 * the GEMM arithmetic of the device where it differs (tf32: native on CUDA, emulated elsewhere). */
static void record_options(const run *r, record *m)
{
    const solve_args *a = r->a;
    const clnode_solve_options *o = &a->pb.opts;
    /* every option of the library's table that the bits depend on, but the interval's
     * (record_inputs has them) */
    for (size_t i = 0; i < clnode_solve_option_count(); ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        if (in->flags & (CLNODE_OPTION_PROBLEM | CLNODE_OPTION_SAME_BITS))
            continue;
        char what[80];
        if (in->flags & CLNODE_OPTION_SAVE)
            snprintf(what, sizeof what, "--save %s", in->name + strlen("save_"));
        else
            snprintf(what, sizeof what, "--%s", in->name);
        for (char *c = what + 2; *c; ++c)
            if (*c == '_')
                *c = '-';
        double v = 0.0;
        if (in->type == CLNODE_OPTION_REAL &&
            clnode_solve_option_get(o, in->name, &v) == CLNODE_OK) {
            add_num(m, in->name, what, v);
            continue;
        }
        record_item *it = add_item(m, in->name, 0, what);
        if (clnode_solve_option_format(o, in->name, it->value, sizeof it->value) != CLNODE_OK)
            snprintf(it->value, sizeof it->value, "?");
    }
    const int cuda = strcmp(clnode_context_backend(r->ctx), "cuda") == 0;
    snprintf(add_item(m, "gemm_engine", 0, "the GEMM arithmetic of the device (--gemm-precision)")
                 ->value,
             sizeof m->it[0].value, "%s",
             o->gemm_precision == CLNODE_GEMM_STRICT ? "ieee"
             : cuda                                  ? "native"
                                                     : "emulated");
    const clnode_problem *p = &a->pb.prob;
    /* a list per trajectory (--ts-file): its rows, and an item of its own that a record of a
     * shared list lacks */
    const size_t nts = p->n_save_ts * (p->save_ts_per_trajectory ? r->batch : 1);
    char ts_what[400];
    snprintf(ts_what, sizeof ts_what,
             p->save_ts_per_trajectory ? "the save times (--ts-file %s)" : "--save ts:",
             a->ts_file ? a->ts_file : "");
    add_hash(m, "save_ts", ts_what, p->save_ts, nts * sizeof *p->save_ts);
    if (p->save_ts_per_trajectory)
        add_long(m, "save_ts_rows", "--ts-file (a list of save times per trajectory)", 1);
    add_long(m, "json", "--json", a->json);
    add_long(m, "json_points", "--json-points", a->json_points);
    add_long(m, "ragged", "--ragged", a->ragged);
}

/* The manifest text of a record (malloc'd; NULL when out of memory). */
static char *record_text(const record *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "%s%d\n", RECORD_HEAD, RECORD_FORMAT);
    for (size_t i = 0; i < m->n; ++i)
        fprintf(f, "%s %s\n", m->it[i].key, m->it[i].value);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The value of `key` in a manifest's text (its line's rest, without the newline), or NULL. */
static const char *record_find(const char *text, const char *key, size_t *len)
{
    const size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, k) == 0 && p[k] == ' ') {
            const char *v = p + k + 1, *e = strchr(v, '\n');
            *len = e ? (size_t)(e - v) : strlen(v);
            return v;
        }
    }
    return NULL;
}

/* Compares the record on the disk (text) with this run's. Returns 0 when every item is the
 * same, or 2 after printing which changed. */
static int record_compare(const run *r, const record *m, const char *text)
{
    int format = 0;
    if (strncmp(text, RECORD_HEAD, strlen(RECORD_HEAD)) != 0 ||
        sscanf(text + strlen(RECORD_HEAD), "%d", &format) != 1) {
        tool_error("--resume: %s/manifest is not a progress record of clnode-solve; remove %s to "
                   "start again",
                   r->dir, r->dir);
        return TOOL_EXIT_INPUT;
    }
    if (format != RECORD_FORMAT) {
        tool_error("--resume: the progress record %s was made by another version of clnode-solve "
                   "(record format %d; this one reads format %d); remove %s to start again",
                   r->dir, format, RECORD_FORMAT, r->dir);
        return TOOL_EXIT_INPUT;
    }
    char *msg = NULL;
    size_t mlen = 0, nchanged = 0;
    FILE *f = open_memstream(&msg, &mlen);
    if (!f) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < m->n; ++i) {
        const record_item *it = &m->it[i];
        size_t len = 0;
        const char *v = record_find(text, it->key, &len);
        if (v && len == strlen(it->value) && memcmp(v, it->value, len) == 0)
            continue;
        fprintf(f, "%s%s", nchanged++ ? "; " : "", it->what);
        if (!it->hashed && v)
            fprintf(f, " (was %.*s, now %s)", (int)(len < 200 ? len : 200), v, it->value);
    }
    if (fclose(f) != 0) {
        free(msg);
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    if (nchanged)
        tool_error("--resume: %s changed since the progress record %s was made; remove %s to "
                   "start again, or resume with the problem it was made for",
                   msg, r->dir, r->dir);
    free(msg);
    return nchanged ? TOOL_EXIT_INPUT : 0;
}

static int pread_fd(void *user, void *buf, size_t len, uint64_t offset)
{
    const int fd = *(const int *)user;
    for (size_t got = 0; got < len;) {
        const ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(offset + got));
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

/* Rank 0, resuming: marks in skip the chunks whose record is whole and, for array outputs, whose
 * rows in OUT.progress/data still match the CRCs the record holds (a record is on the disk before
 * it counts, but the rows written through MPI-IO may have been lost with the page cache). Returns
 * 0 or the exit status after printing why. */
static int progress_scan(run *r, unsigned char *skip, size_t *done, size_t *lost)
{
    int fd = -1;
    if (r->w) {
        char *dpath = record_path(r, "data");
        if (!dpath) {
            tool_error("out of memory");
            return TOOL_EXIT_RESOURCE;
        }
        fd = open(dpath, O_RDONLY);
        free(dpath);
    }
    int rc = 0;
    for (size_t c = 0; c < r->nc && !rc; ++c) {
        char *data = NULL;
        size_t len = 0;
        if (read_chunk_file(r, c, r->w ? &data : NULL, r->w ? &len : NULL) != 0)
            continue;
        int whole = 1;
        if (r->w) {
            solve_out_part part;
            memcpy(&part, data + len - sizeof part, sizeof part);
            whole = fd >= 0 ? solve_out_check_part(r->w, &part, pread_fd, &fd) : 0;
            if (whole < 0) {
                tool_error("out of memory");
                rc = TOOL_EXIT_RESOURCE;
            }
        }
        free(data);
        size_t glen = 0;
        if (whole > 0 && r->a->grad_path && read_grad_file(r, c, &glen, 0) != 0)
            continue; /* its share of the gradient was not recorded: solved again */
        if (whole > 0) {
            skip[c] = 1;
            ++*done;
        } else if (!whole) {
            ++*lost;
        }
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Rank 0: opens or creates the progress record; marks the chunks it holds in skip. Returns 0 or
 * the exit status after printing why. */
static int progress_open(run *r, const record *m, unsigned char *skip)
{
    char *manifest = record_text(m);
    char *mpath = record_path(r, "manifest");
    if (!mpath || !manifest) {
        tool_error("out of memory");
        free(mpath);
        free(manifest);
        return TOOL_EXIT_RESOURCE;
    }
    int rc = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = fopen(mpath, "rb");
    if (f) {
        fclose(f);
        if (tool_read_file(mpath, &text, &len) != 0) {
            rc = TOOL_EXIT_INPUT;
        } else if ((rc = record_compare(r, m, text)) == 0) {
            size_t done = 0, lost = 0;
            rc = progress_scan(r, skip, &done, &lost);
            if (lost)
                fprintf(stderr,
                        "%s: %s: the rows of %zu recorded chunk(s) are not in its data file (lost "
                        "when the machine stopped?): they are solved again\n",
                        tool_prog, r->dir, lost);
            if (!rc)
                fprintf(stderr, "%s: resuming from %s: %zu of %zu chunks already solved\n",
                        tool_prog, r->dir, done, r->nc);
        }
        free(text);
    } else if ((mkdir(r->dir, 0777) != 0 && errno != EEXIST) ||
               write_atomic(mpath, manifest, strlen(manifest)) != 0) {
        tool_error("cannot create the progress record %s: %s", r->dir, strerror(errno));
        rc = TOOL_EXIT_RESOURCE;
    }
    free(mpath);
    free(manifest);
    return rc;
}

/* Rank 0, after the output is written: the record is no longer needed. */
static void progress_remove(run *r)
{
    for (size_t c = 0; c < r->nc; ++c) {
        char *p = chunk_path(r, c), *g = r->a->grad_path ? grad_path_of(r, c) : NULL;
        if (p)
            unlink(p);
        if (g)
            unlink(g);
        free(p);
        free(g);
    }
    char *mpath = record_path(r, "manifest");
    if (mpath)
        unlink(mpath);
    free(mpath);
    rmdir(r->dir);
}

/* The solves' cancel callback: a signal received (tool_temp.h), or the test hook's failing rank. */
static int run_cancel(void *user)
{
    const run *r = user;
    return r->rank == r->fail_rank || tool_temp_cancel(NULL);
}

/* The same exit status on every rank: the largest. */
static int agree(int rc)
{
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* ---- the shared file of the array outputs ---- */

/* Lays out the arrays (the same on every rank) for `points` (with --save steps the most saved
 * points of a trajectory, --ragged their total). Collective. Returns 0 or the exit status. */
static int arrays_plan(run *r, uint64_t points)
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
    return agree(rc);
}

/* Opens the shared file: OUT.progress/data with --resume (kept, with the rows of the chunks
 * already solved), else a new temporary name beside OUT that rank 0 chooses. Collective. Returns
 * 0 or the exit status. */
static int arrays_open(run *r)
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
            char *tmp = NULL;
            const int fd = tool_target_mktemp(&r->target, a->out_path, &tmp, &r->slot);
            if (fd >= 0)
                close(fd);
            if (fd >= 0 && strlen(tmp) < sizeof name) {
                memcpy(name, tmp, strlen(tmp) + 1);
            } else if (fd >= 0) {
                tool_error("cannot write %s: %s", a->out_path, strerror(ENAMETOOLONG));
                unlink(tmp);
                tool_temp_release(r->slot);
                r->slot = -1;
            }
            rc = name[0] ? 0 : TOOL_EXIT_RESOURCE;
            free(tmp);
        }
    }
    if ((rc = agree(rc)) != 0)
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
    return agree(rc);
}

/* After the gather: rank 0 combines the CRCs and writes the headers; the file is cut to its size,
 * closed and (rank 0) given the target's mode, owner and group (commit_outputs renames it over OUT
 * with the other outputs). Collective. Returns 0 or the exit status. */
static int arrays_commit(run *r)
{
    int rc = 0;
    if (r->rank == 0) {
        char err[256];
        if (solve_out_finish(r->w, r->parts, r->nc, mpi_pwrite, r, err, sizeof err) != 0) {
            tool_error("cannot write %s: %s", r->a->out_path, err);
            rc = TOOL_EXIT_RESOURCE;
        }
    }
    if ((rc = agree(rc)) != 0)
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
    return agree(rc);
}

/* A failed run: no file that looks complete. The temporary file goes; the data of a progress
 * record stays for the rerun. Collective when the file is open. */
static void arrays_abort(run *r)
{
    if (r->fh_open)
        MPI_File_close(&r->fh);
    r->fh_open = 0;
    if (r->rank == 0 && r->tmp && !r->dir)
        unlink(r->tmp);
    tool_temp_release(r->slot);
    r->slot = -1;
    free(r->tmp);
    r->tmp = NULL;
    tool_target_free(&r->target);
}

/* Appends chunk c's CRCs to its bytes. Returns 0 or -1 (out of memory). */
static int append_part(run *r, size_t c, const solve_out_part *part)
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

/* --save steps or --ragged with an array output: the layout needs the points of every chunk (the
 * most of one trajectory: MPI_Allreduce MAX; ragged: each chunk's total, MPI_Allreduce SUM, and
 * their prefix sums, the first row of each chunk). Then every rank writes the rows of the chunks
 * it kept. Collective. Returns 0 or the exit status. */
static int arrays_deferred(run *r)
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
    if ((rc = agree(rc)) != 0) {
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
    if ((rc = arrays_plan(r, points)) != 0 || (rc = arrays_open(r)) != 0) {
        free(tot);
        return rc;
    }
    for (size_t c = 0; c < r->nc && !rc; ++c) {
        if (!r->sols[c])
            continue;
        solve_out_part part;
        char err[200];
        if (solve_out_write(r->w, r->sols[c], c * r->chunk_size, ragged ? tot[c] : 0, mpi_pwrite, r,
                            &part, err, sizeof err) != 0) {
            tool_error("rank %d: cannot write %s: %s", r->rank, r->a->out_path, err);
            rc = TOOL_EXIT_RESOURCE;
        } else if (append_part(r, c, &part) != 0) {
            tool_error("out of memory");
            rc = TOOL_EXIT_RESOURCE;
        }
        clnode_solution_destroy(&r->sols[c]);
    }
    free(tot);
    return agree(rc);
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
    if (agree(rc))
        return TOOL_EXIT_RESOURCE;
    clnode_status st =
        clnode_mpi_gather(ctx, MPI_COMM_WORLD, 0, r->nc, owner, get_chunk, deliver_chunk, r);
    if (r->sum && fclose(r->sum) != 0)
        st = st == CLNODE_OK ? CLNODE_ERR_OUT_OF_MEMORY : st;
    r->sum = NULL;
    if (st != CLNODE_OK) /* rank 0's logger said why */
        return TOOL_EXIT_RESOURCE;
    return r->w ? arrays_commit(r) : 0;
}

/* Rank 0, every output written to its temporary file: the arrays' file, --out's text and G renamed
 * over their targets together (tool_out_commit_all), then the progress record removed. Returns
 * 0 or the exit status. */
static int commit_outputs(run *r, tool_out *out, tool_out *gout)
{
    tool_out arr; /* the arrays' file, written through MPI-IO and closed */
    memset(&arr, 0, sizeof arr);
    arr.slot = -1;
    if (r->w && r->tmp) {
        arr.path = strdup(r->a->out_path);
        if (!arr.path) {
            tool_error("out of memory");
            return TOOL_EXIT_RESOURCE;
        }
        arr.tmp = r->tmp;
        arr.slot = r->slot;
        arr.t = r->target;
        r->tmp = NULL;
        r->slot = -1;
        memset(&r->target, 0, sizeof r->target);
        arr.keep_tmp = r->dir != NULL; /* the record's data file stays if the renames fail */
    }
    tool_out *const outs[] = {&arr, out, gout};
    const int rc = tool_out_commit_all(outs, 3);
    if (!rc && r->dir)
        progress_remove(r);
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
    r->slot = -1;
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
    if ((rc = agree(rc)) != 0)
        return rc;
    if (a->out_path && r->fmt != SOLVE_OUT_CSV && !r->deferred && (rc = arrays_plan(r, 0)) != 0)
        return rc;
    /* rank 0 writes the text outputs: a path that cannot be written fails before the work */
    if (r->rank == 0 && a->out_path && r->fmt == SOLVE_OUT_CSV)
        rc = tool_out_open(out, a->out_path);
    if (a->resume) {
        const size_t n = strlen(a->out_path) + 10;
        r->dir = malloc(n);
        if (r->dir)
            snprintf(r->dir, n, "%s.progress", a->out_path);
        else
            rc = TOOL_EXIT_RESOURCE;
        record *m = !rc && r->rank == 0 ? calloc(1, sizeof *m) : NULL;
        if (!rc && r->rank == 0 && !m) {
            tool_error("out of memory");
            rc = TOOL_EXIT_RESOURCE;
        }
        if (m && (rc = record_inputs(r, y0, m)) == 0) {
            record_options(r, m);
            rc = progress_open(r, m, skip);
        }
        free(m);
    }
    if ((rc = agree(rc)) != 0)
        return rc;
    if (a->out_path && r->fmt != SOLVE_OUT_CSV && !r->deferred && (rc = arrays_open(r)) != 0)
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

/* --grad-out before the solve: rank 0 reads the cotangents (standard input reaches rank 0 only;
 * their slots checked unless --save steps makes them depend on the solve) and opens G, then every
 * rank gets them (MPI_Bcast). Collective. Returns 0 or the exit status. */
static int grad_open(run *r, tool_out *gout)
{
    solve_args *a = r->a;
    r->ctmax = calloc(r->nc ? r->nc : 1, sizeof *r->ctmax);
    int rc = r->ctmax ? 0 : TOOL_EXIT_RESOURCE;
    if (rc)
        tool_error("rank %d: out of memory for %zu chunks", r->rank, r->nc);
    if (!rc && r->rank == 0) {
        size_t T = 0;
        if (!a->pb.opts.save_steps && clnode_save_slots(NULL, &a->pb.opts, &a->pb.prob, &T) != 0) {
            tool_error("the save options have no layout");
            rc = TOOL_EXIT_INPUT;
        }
        if (!rc)
            rc = solve_grad_load(a->cot_path, r->batch, clnode_model_dim(r->model), T,
                                 a->pb.opts.precision, &r->cot);
        if (!rc)
            rc = tool_out_open(gout, a->grad_path);
    }
    if ((rc = agree(rc)) != 0)
        return rc;
    uint64_t shape[3] = {r->cot.B, r->cot.T, r->cot.N};
    MPI_Bcast(shape, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    const size_t n = (size_t)(shape[0] * shape[1] * shape[2]);
    if (r->rank != 0) {
        r->cot.B = (size_t)shape[0];
        r->cot.T = (size_t)shape[1];
        r->cot.N = (size_t)shape[2];
        r->cot.v = malloc((n ? n : 1) * sizeof(double));
        rc = r->cot.v ? 0 : TOOL_EXIT_RESOURCE;
        if (rc)
            tool_error("rank %d: out of memory for the cotangents", r->rank);
    }
    if ((rc = agree(rc)) != 0)
        return rc;
    const size_t piece = (size_t)1 << 27;
    for (size_t at = 0; at < n; at += piece)
        MPI_Bcast(r->cot.v + at, (int)(n - at < piece ? n - at : piece), MPI_DOUBLE, 0,
                  MPI_COMM_WORLD);
    return 0;
}

/* --grad-out after the outputs: with --save steps the cotangents' slots against the most points
 * of any trajectory (MPI_Allreduce), then rank 0 writes G. Collective. Returns 0 or the exit
 * status. */
static int grad_write(run *r, tool_out *gout)
{
    int rc = 0;
    if (r->a->pb.opts.save_steps) {
        uint64_t tmax = 0;
        MPI_Allreduce(&r->grad_tmax, &tmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (r->rank == 0)
            rc = solve_grad_check_slots(r->a->cot_path, &r->cot, (size_t)tmax);
    }
    if (!rc && r->rank == 0)
        rc = solve_grad_write(r->a->grad_path, r->model, r->g, r->batch, gout);
    return agree(rc);
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
    const int all = agree(rc);
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
    if ((rc = agree(rc)) != 0)
        goto done;

    if (a->grad_path && (rc = grad_open(r, &gout)) != 0)
        goto done;
    if ((rc = prepare_outputs(r, y0, skip, &out)) != 0)
        goto done;

    clnode_mpi_options m;
    clnode_mpi_default_options(&m);
    m.chunk_size = r->chunk_size;
    const char *split = getenv("CLNODE_MPI_SPLIT");
    m.static_split = split && strcmp(split, "static") == 0;
    m.skip = skip;
    m.on_chunk = on_chunk;
    m.chunk_user = r;
    m.on_gradient = on_gradient;
    m.get_gradient = get_gradient;
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
    if (r->deferred && (rc = arrays_deferred(r)) != 0)
        goto done;
    /* every output to its temporary file, then all renamed together, then the report */
    rc = agree(gather_and_write(r, ctx, owner, &out));
    if (!rc && a->grad_path)
        rc = grad_write(r, &gout);
    if (!rc)
        rc = agree(r->rank == 0 ? commit_outputs(r, &out, &gout) : 0);
    if (!rc)
        rc = agree(r->rank == 0 ? write_report(r, ctx) : 0);
done:
    arrays_abort(r);
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
        agree(rc ? rc : TOOL_EXIT_RESOURCE);
    r->a->pb.device = NULL;
    r->a->pb.backend = NULL;
    free(r->dev);
    free(r->backend);
    MPI_Finalize();
    return rc;
}
