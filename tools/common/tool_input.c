/* tool_input.c - the tools' bounded readers of input files (tool_input.h): a .npy read header
 * first and then exactly the data it declares, a .npz record by record, a CSV line by line with
 * memory in proportion to the states kept. Every reader works on a pipe ("-": standard input)
 * and stops at the batch limit; none reads a file whole before knowing what it declares. */
#include "tool_input.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"
#include "npz.h"
#include "tool_common.h"

/* An open input and the bytes read ahead of the reader (the format's magic). */
typedef struct tool_in {
    FILE *f;
    const char *path;
    int is_stdin;
    unsigned char ahead[8];
    size_t n_ahead, at;
    int back; /* a character pushed back by in_ungetc, or EOF */
} tool_in;

static int in_open(tool_in *in, const char *path)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->is_stdin = strcmp(path, "-") == 0;
    in->back = EOF;
    in->f = in->is_stdin ? stdin : fopen(path, "rb");
    if (!in->f) {
        tool_error("cannot open %s: %s", path, strerror(errno));
        return TOOL_EXIT_INPUT;
    }
    return 0;
}

static void in_close(tool_in *in)
{
    if (in->f && !in->is_stdin)
        fclose(in->f);
    in->f = NULL;
}

/* Reads up to k (at most 8) bytes ahead; returns how many there are. */
static size_t in_peek(tool_in *in, size_t k)
{
    while (in->n_ahead < k) {
        const size_t got = fread(in->ahead + in->n_ahead, 1, k - in->n_ahead, in->f);
        if (got == 0)
            break;
        in->n_ahead += got;
    }
    return in->n_ahead;
}

/* The sequential reader of npy.h and npz.h over an input: the bytes read ahead first. */
static long long in_read(void *user, void *buf, size_t n)
{
    tool_in *in = user;
    if (in->at < in->n_ahead) {
        const size_t k = n < in->n_ahead - in->at ? n : in->n_ahead - in->at;
        memcpy(buf, in->ahead + in->at, k);
        in->at += k;
        return (long long)k;
    }
    const size_t got = fread(buf, 1, n, in->f);
    return got == 0 && ferror(in->f) ? -1 : (long long)got;
}

static int in_getc(tool_in *in)
{
    if (in->back != EOF) {
        const int c = in->back;
        in->back = EOF;
        return c;
    }
    return in->at < in->n_ahead ? in->ahead[in->at++] : getc_unlocked(in->f);
}

/* The exit status of a reader's message: 3 for memory, 2 for the rest. */
static int status_of(const char *err)
{
    return strncmp(err, "out of memory", 13) == 0 ? TOOL_EXIT_RESOURCE : TOOL_EXIT_INPUT;
}

/* A tool's header check as the check of cln_npy_read_stream: its status kept, its message
 * printed already. */
typedef struct in_check {
    tool_npy_check_fn fn;
    void *user;
    int rc;
} in_check;

static int run_check(void *user, const cln_npy_header *h, char *err, size_t errlen)
{
    in_check *c = user;
    if (!c->fn || (c->rc = c->fn(c->user, h)) == 0)
        return 0;
    if (errlen)
        err[0] = '\0';
    return -1;
}

/* Reads a .npy image from an open input (the bytes read ahead first). Returns 0, 2 or 3 after
 * printing an error. */
static int npy_from(tool_in *in, tool_npy_check_fn check, void *check_user, unsigned char **img,
                    size_t *size)
{
    in_check c = {check, check_user, 0};
    cln_npy_header h;
    char err[256];
    if (cln_npy_read_stream(in_read, in, (size_t)TOOL_BATCH_MAX, run_check, &c, img, size, &h, err,
                            sizeof err) == 0)
        return 0;
    if (c.rc)
        return c.rc;
    tool_error("%s: %s", in->path, err);
    return status_of(err);
}

int tool_read_npy(const char *path, tool_npy_check_fn check, void *check_user, unsigned char **img,
                  size_t *size)
{
    tool_in in;
    int rc = in_open(&in, path);
    if (rc)
        return rc;
    rc = npy_from(&in, check, check_user, img, size);
    in_close(&in);
    return rc;
}

/* A regular file whole, by its size (an archive's directory is at its end; a member whose sizes
 * follow its data is found from there), the bytes read ahead included. Returns 0, 1 when it is
 * not a regular file, or -1 with a message. */
static int read_regular(tool_in *in, unsigned char **img, size_t *size, char *err, size_t errlen)
{
    FILE *f = in->f;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        return 1;
    if ((uint64_t)st.st_size > SIZE_MAX - 1) {
        snprintf(err, errlen, "too large for this machine");
        return -1;
    }
    const size_t n = (size_t)st.st_size;
    if (n < in->n_ahead) {
        snprintf(err, errlen, "the file shrank while read");
        return -1;
    }
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        snprintf(err, errlen, "out of memory for %zu bytes", n);
        return -1;
    }
    memcpy(b, in->ahead, in->n_ahead);
    size_t got = in->n_ahead;
    while (got < n) {
        const size_t k = fread(b + got, 1, n - got, f);
        if (k == 0)
            break;
        got += k;
    }
    if (got < n || ferror(f)) {
        free(b);
        snprintf(err, errlen, "cannot read its %zu bytes (%zu read)", n, got);
        return -1;
    }
    *img = b;
    *size = n;
    return 0;
}

int tool_read_npz(const char *path, unsigned char **img, size_t *size)
{
    tool_in in;
    int rc = in_open(&in, path);
    if (rc)
        return rc;
    char err[256];
    /* the first record before anything else: a file that is no archive is not read further */
    const size_t n = in_peek(&in, 4);
    int r = -1;
    if (n < 4 && ferror(in.f))
        snprintf(err, sizeof err, "cannot read: %s", strerror(errno));
    else if (n == 0)
        snprintf(err, sizeof err, "an empty file (not a .npz archive)");
    else if (n == 4 && memcmp(in.ahead, "PK\x05\x06", 4) == 0) /* the end record first */
        snprintf(err, sizeof err, "an empty archive (no members: numpy.savez of no arrays)");
    else if (n < 4 || memcmp(in.ahead, "PK\x03\x04", 4) != 0)
        snprintf(err, sizeof err, "not a .npz file (not a ZIP archive)");
    else if ((r = read_regular(&in, img, size, err, sizeof err)) > 0)
        r = cln_npz_read_stream(in_read, &in, img, size, err, sizeof err);
    if (r != 0) {
        tool_error("%s: %s", path, err);
        rc = status_of(err);
    }
    in_close(&in);
    return rc;
}

/* The shape of a y0 .npy, checked before its data are read: (B, N), or (N,) for one
 * trajectory. */
typedef struct y0_shape {
    const char *path;
    size_t N;
} y0_shape;

static int check_y0_shape(void *user, const cln_npy_header *h)
{
    const y0_shape *y = user;
    const size_t N = y->N;
    if (!((h->ndim == 2 && h->shape[1] == N) || (h->ndim == 1 && h->shape[0] == N))) {
        char sh[128];
        size_t k = (size_t)snprintf(sh, sizeof sh, "(");
        for (size_t d = 0; d < h->ndim && k < sizeof sh; ++d)
            k += (size_t)snprintf(sh + k, sizeof sh - k, d ? ", %zu" : "%zu", h->shape[d]);
        if (k < sizeof sh)
            snprintf(sh + k, sizeof sh - k, h->ndim == 1 ? ",)" : ")");
        tool_error("%s: y0 of shape %s, but the model's state has %zu components: (B, %zu) or "
                   "(%zu,) expected",
                   y->path, sh, N, N, N);
        return TOOL_EXIT_INPUT;
    }
    if (h->ndim == 2 && h->shape[0] == 0) {
        tool_error("%s: y0 holds no trajectory", y->path);
        return TOOL_EXIT_INPUT;
    }
    return 0;
}

/* y0 from a .npy image whose shape check_y0_shape accepted: finite values. */
static int y0_from_npy(const char *path, const unsigned char *img, size_t len, size_t N,
                       double **y0, size_t *rows)
{
    cln_npy_header h;
    char err[256];
    if (cln_npy_parse(img, len, &h, err, sizeof err)) {
        tool_error("%s: %s", path, err);
        return TOOL_EXIT_INPUT;
    }
    *rows = h.ndim == 2 ? h.shape[0] : 1;
    if (!(*y0 = malloc(h.count * sizeof(double)))) {
        tool_error("%s: out of memory", path);
        return TOOL_EXIT_RESOURCE;
    }
    cln_npy_decode(img, &h, *y0);
    for (size_t i = 0; i < h.count; ++i)
        if (!isfinite((*y0)[i])) {
            tool_error("%s: y0[%zu][%zu] is %g: initial states must be finite", path, i / N, i % N,
                       (*y0)[i]);
            return TOOL_EXIT_INPUT;
        }
    return 0;
}

/* The CSV of y0 from `in`, line by line: a line holds at most TOOL_CSV_LINE_MAX(N) bytes and no
 * NUL byte (a text file). Returns 0, 2 or 3 with a message in err. */
static int y0_csv_stream(tool_in *in, size_t N, tool_header_mode mode, double **y0, size_t *rows,
                         int *note, char *err, size_t errcap)
{
    const size_t max = TOOL_CSV_LINE_MAX(N);
    tool_y0_csv c;
    tool_y0_csv_init(&c, N, mode, (size_t)TOOL_BATCH_MAX);
    char *line = NULL;
    size_t len = 0, cap = 0;
    int rc = 0, ch = 0, bom = 1;
    while (!rc && ch != EOF) {
        ch = in_getc(in);
        if (ch != EOF && ch != '\n' && ch != '\r') {
            if (ch == '\0') {
                snprintf(err, errcap, "line %zu: a NUL byte (a y0 CSV is text)", c.line_no + 1);
                rc = TOOL_EXIT_INPUT;
            } else if (len == max) {
                snprintf(err, errcap, "line %zu is longer than %zu bytes (1 MiB + 1 KiB per value)",
                         c.line_no + 1, max);
                rc = TOOL_EXIT_INPUT;
            } else if (len == cap) {
                const size_t ncap = cap ? (2 * cap < max ? 2 * cap : max) : 256;
                char *nl = realloc(line, ncap);
                if (!nl) {
                    snprintf(err, errcap, "out of memory for a line of %zu bytes", ncap);
                    rc = TOOL_EXIT_RESOURCE;
                } else {
                    line = nl;
                    cap = ncap;
                }
            }
            if (!rc)
                line[len++] = (char)ch;
            continue;
        }
        if (ch == EOF && ferror(in->f)) {
            snprintf(err, errcap, "cannot read: %s", strerror(errno));
            rc = TOOL_EXIT_INPUT;
            break;
        }
        if (ch == EOF && len == 0)
            break;
        if (ch == '\r') {
            const int next = in_getc(in);
            if (next != '\n')
                in->back = next;
        }
        size_t skip = 0;
        if (bom && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
            skip = 3;
        bom = 0;
        const char *a = line ? line + skip : "";
        rc = tool_y0_csv_line(&c, a, line ? line + len : a, err, errcap);
        len = 0;
    }
    if (!rc)
        rc = tool_y0_csv_end(&c, y0, rows, note, err, errcap);
    tool_y0_csv_free(&c);
    free(line);
    return rc;
}

int tool_read_y0(const char *path, size_t N, tool_header_mode mode, double **y0, size_t *rows,
                 int *note)
{
    *y0 = NULL;
    *note = 0;
    tool_in in;
    int rc = in_open(&in, path);
    if (rc)
        return rc;
    const size_t n = strlen(path);
    const int npy = (in_peek(&in, 6) == 6 && memcmp(in.ahead, "\x93NUMPY", 6) == 0) ||
                    (n > 4 && strcmp(path + n - 4, ".npy") == 0);
    char err[256];
    if (npy) {
        unsigned char *img = NULL;
        size_t size = 0;
        y0_shape y = {path, N};
        if ((rc = npy_from(&in, check_y0_shape, &y, &img, &size)) == 0)
            rc = y0_from_npy(path, img, size, N, y0, rows);
        free(img);
    } else if ((rc = y0_csv_stream(&in, N, mode, y0, rows, note, err, sizeof err)) != 0) {
        tool_error("%s: %s", path, err);
    }
    in_close(&in);
    if (rc) {
        free(*y0);
        *y0 = NULL;
    }
    return rc;
}
