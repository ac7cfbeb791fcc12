/* ranks_record.c - --resume's progress record (ranks_run.h): OUT.progress/, its manifest of
 * everything the result depends on, the chunks it holds and their check, its removal. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ranks_run.h"
#include "tool_temp.h"

/* OUT.progress/manifest holds, item by item, everything the chunks' bytes depend on: one line
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
        char *dpath = ranks_record_path(r, "data");
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
        if (ranks_read_chunk(r, c, r->w ? &data : NULL, r->w ? &len : NULL) != 0)
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
        if (whole > 0 && r->a->grad_path && ranks_read_grad(r, c, &glen, 0) != 0)
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
    char *mpath = ranks_record_path(r, "manifest");
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
               ranks_write_atomic(mpath, manifest, strlen(manifest)) != 0) {
        tool_error("cannot create the progress record %s: %s", r->dir, strerror(errno));
        rc = TOOL_EXIT_RESOURCE;
    }
    free(mpath);
    free(manifest);
    return rc;
}

/* Rank 0, after the output is written: the record is no longer needed. */
void ranks_progress_remove(run *r)
{
    for (size_t c = 0; c < r->nc; ++c) {
        char *p = ranks_chunk_path(r, c), *g = r->a->grad_path ? ranks_grad_path(r, c) : NULL;
        if (p)
            unlink(p);
        if (g)
            unlink(g);
        free(p);
        free(g);
    }
    char *mpath = ranks_record_path(r, "manifest");
    if (mpath)
        unlink(mpath);
    free(mpath);
    rmdir(r->dir);
}

/* --resume: the record's directory OUT.progress, and on rank 0 its manifest compared with the
 * record's (or the record created), the chunks it holds marked in skip. rc: the status so far,
 * kept when not 0. Returns the status. */
int ranks_record_start(run *r, const double *y0, unsigned char *skip, int rc)
{
    const solve_args *a = r->a;
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
    return rc;
}
