/* tool_parse.c - the tools' parsers of numbers, number lists and y0 CSV text (tool_parse.h). */
#include "tool_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_common.h"

int tool_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Copies token [p, e) for a message: at most 40 characters, non-printable ones as '?'. */
static const char *show(char *buf, const char *p, const char *e)
{
    size_t n = (size_t)(e - p), k = 0;
    for (; k < n && k < 40; ++k)
        buf[k] = p[k] >= 0x20 && p[k] < 0x7f ? p[k] : '?';
    if (n > 40) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

enum {
    TOK_EMPTY,
    TOK_NUMBER,
    TOK_TEXT,
    TOK_NOMEM
};

/* Classifies token [*p, *e) (blanks around it trimmed in place): empty, a number (strtod takes
 * all of it: nan and inf included, value in *v) or text. */
static int token(const char **p, const char **e, double *v)
{
    const char *a = *p, *b = *e;
    while (a < b && tool_is_blank(*a))
        ++a;
    while (b > a && tool_is_blank(b[-1]))
        --b;
    *p = a;
    *e = b;
    if (a == b)
        return TOK_EMPTY;
    const size_t len = (size_t)(b - a);
    char small[128], *buf = small;
    if (len >= sizeof small && !(buf = malloc(len + 1)))
        return TOK_NOMEM;
    memcpy(buf, a, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    *v = strtod(buf, &end);
    const int r = end == buf + len ? TOK_NUMBER : TOK_TEXT;
    if (buf != small)
        free(buf);
    return r;
}

int tool_parse_double(const char *s, const char *what, double *out, char *err, size_t errcap)
{
    const char *p = s, *e = s + strlen(s);
    char b[48];
    double v = 0;
    const int k = token(&p, &e, &v);
    if (k == TOK_NOMEM) {
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    if (k != TOK_NUMBER || !isfinite(v)) {
        snprintf(err, errcap, "%s expects a finite number, not \"%s\"", what, show(b, p, e));
        return TOOL_EXIT_INPUT;
    }
    *out = v;
    return 0;
}

/* Field k (1-based) of a list or line: a finite number, or a message. */
static int field(const char *p, const char *e, const char *where, size_t k, double *out, char *err,
                 size_t errcap)
{
    char b[48];
    double v = 0;
    switch (token(&p, &e, &v)) {
    case TOK_NOMEM:
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    case TOK_EMPTY:
        snprintf(err, errcap, "%s: field %zu is empty", where, k);
        return TOOL_EXIT_INPUT;
    case TOK_TEXT:
        snprintf(err, errcap, "%s: field %zu, \"%s\", is not a number", where, k, show(b, p, e));
        return TOOL_EXIT_INPUT;
    default:
        if (!isfinite(v)) {
            snprintf(err, errcap, "%s: field %zu, \"%s\", is not finite", where, k, show(b, p, e));
            return TOOL_EXIT_INPUT;
        }
        *out = v;
        return 0;
    }
}

int tool_parse_list(const char *s, const char *what, double **out, size_t *n, char *err,
                    size_t errcap)
{
    size_t count = 1;
    for (const char *p = s; *p; ++p)
        count += *p == ',';
    size_t bytes;
    double *v = tool_mul_size(count, sizeof(double), &bytes) ? malloc(bytes) : NULL;
    if (!v) {
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    const char *p = s;
    for (size_t k = 0; k < count; ++k) {
        const char *e = p + strcspn(p, ",");
        const int rc = field(p, e, what, k + 1, &v[k], err, errcap);
        if (rc) {
            free(v);
            return rc;
        }
        p = *e ? e + 1 : e;
    }
    free(*out);
    *out = v;
    *n = count;
    return 0;
}

/* Is [p, e) exactly "0,1,...,N-1" (bare integers, blanks allowed around them)? */
static int pandas_labels(const char *p, const char *e, size_t N)
{
    for (size_t k = 0; k < N; ++k) {
        const char *f = p;
        while (f < e && *f != ',')
            ++f;
        const char *a = p, *b = f;
        while (a < b && tool_is_blank(*a))
            ++a;
        while (b > a && tool_is_blank(b[-1]))
            --b;
        char want[24];
        const int len = snprintf(want, sizeof want, "%zu", k);
        if ((size_t)(b - a) != (size_t)len || memcmp(a, want, (size_t)len) != 0)
            return 0;
        if (k + 1 < N && f == e)
            return 0;
        p = f + 1;
        if (k + 1 == N)
            return f == e;
    }
    return 0;
}

void tool_y0_csv_init(tool_y0_csv *c, size_t N, tool_header_mode mode, size_t max_rows)
{
    memset(c, 0, sizeof *c);
    c->N = N;
    c->mode = mode;
    c->max_rows = max_rows;
    c->first = 1;
}

void tool_y0_csv_free(tool_y0_csv *c)
{
    free(c->v);
    c->v = NULL;
}

/* Whether the first content line [a, eol) is a header in auto mode: 1 when its tokens are all
 * text (or empty), 0 when none is, or -1 (message in err) when it mixes numbers with text - a
 * state with a typo, never silently dropped - or out of memory (rc 3 in *rc). */
static int auto_header(const char *a, const char *eol, size_t line_no, char *err, size_t errcap,
                       int *rc)
{
    size_t text_k = 0, numbers = 0, k = 0;
    const char *tp0 = NULL, *te0 = NULL;
    for (const char *f = a; f <= eol; ++k) {
        const char *fe = f;
        while (fe < eol && *fe != ',')
            ++fe;
        const char *tp = f, *te = fe;
        double x;
        const int t = token(&tp, &te, &x);
        if (t == TOK_NOMEM) {
            snprintf(err, errcap, "out of memory");
            *rc = TOOL_EXIT_RESOURCE;
            return -1;
        }
        numbers += t == TOK_NUMBER;
        if (t == TOK_TEXT && !text_k) {
            text_k = k + 1;
            tp0 = tp;
            te0 = te;
        }
        f = fe + 1;
    }
    if (text_k && numbers) {
        char b[48];
        snprintf(err, errcap,
                 "line %zu: field %zu, \"%s\", is not a number, though the line holds numbers "
                 "(a header holds none; --y0-header yes takes the line for one)",
                 line_no, text_k, show(b, tp0, te0));
        *rc = TOOL_EXIT_INPUT;
        return -1;
    }
    return text_k != 0;
}

int tool_y0_csv_line(tool_y0_csv *c, const char *a, const char *eol, char *err, size_t errcap)
{
    const size_t N = c->N;
    ++c->line_no;
    if (N == 0) {
        snprintf(err, errcap, "the model's dimension is 0");
        return TOOL_EXIT_INPUT;
    }
    while (a < eol && tool_is_blank(*a))
        ++a;
    if (a == eol || *a == '#')
        return 0;
    if (c->first) {
        c->first = 0;
        if (c->mode == TOOL_HEADER_YES)
            return 0;
        if (c->mode == TOOL_HEADER_AUTO) {
            int rc = 0;
            const int h = auto_header(a, eol, c->line_no, err, errcap, &rc);
            if (h)
                return h < 0 ? rc : 0;
            if (pandas_labels(a, eol, N)) {
                c->header_note = 1;
                return 0;
            }
        }
    }
    size_t count = 1;
    for (const char *f = a; f < eol; ++f)
        count += *f == ',';
    char where[64];
    snprintf(where, sizeof where, "line %zu", c->line_no);
    if (count != N) {
        snprintf(err, errcap, "%s: %zu values, but the model's state has %zu", where, count, N);
        return TOOL_EXIT_INPUT;
    }
    if (c->rows == c->max_rows) {
        snprintf(err, errcap, "%s: more than %zu states (the batch limit)", where, c->max_rows);
        return TOOL_EXIT_INPUT;
    }
    if (c->rows == c->cap) {
        size_t ncap = c->cap ? 2 * c->cap : 16, bytes, elems;
        double *nv = NULL;
        if (ncap > c->max_rows)
            ncap = c->max_rows;
        if (ncap > c->cap && tool_mul_size(ncap, N, &elems) &&
            tool_mul_size(elems, sizeof(double), &bytes))
            nv = realloc(c->v, bytes);
        if (!nv) {
            snprintf(err, errcap, "out of memory for %zu states of dimension %zu", ncap, N);
            return TOOL_EXIT_RESOURCE;
        }
        c->v = nv;
        c->cap = ncap;
    }
    const char *f = a;
    for (size_t k = 0; k < N; ++k) {
        const char *fe = f;
        while (fe < eol && *fe != ',')
            ++fe;
        const int rc = field(f, fe, where, k + 1, &c->v[c->rows * N + k], err, errcap);
        if (rc)
            return rc;
        f = fe + 1;
    }
    ++c->rows;
    return 0;
}

int tool_y0_csv_end(tool_y0_csv *c, double **out, size_t *rows, int *header_note, char *err,
                    size_t errcap)
{
    if (c->rows == 0) {
        snprintf(err, errcap, "no initial state (%zu line%s)", c->line_no,
                 c->line_no == 1 ? "" : "s");
        return TOOL_EXIT_INPUT;
    }
    *out = c->v;
    *rows = c->rows;
    *header_note = c->header_note;
    c->v = NULL;
    return 0;
}

int tool_parse_y0_text(const char *text, size_t len, size_t N, tool_header_mode mode, double **out,
                       size_t *rows, int *header_note, char *err, size_t errcap)
{
    *header_note = 0;
    if (N == 0) {
        snprintf(err, errcap, "the model's dimension is 0");
        return TOOL_EXIT_INPUT;
    }
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    tool_y0_csv c;
    tool_y0_csv_init(&c, N, mode, (size_t)TOOL_BATCH_MAX);
    int rc = 0;
    while (p < end && !rc) {
        const char *eol = p;
        while (eol < end && *eol != '\n' && *eol != '\r')
            ++eol;
        const char *next = eol;
        if (next < end)
            next += *next == '\r' && next + 1 < end && next[1] == '\n' ? 2 : 1;
        rc = tool_y0_csv_line(&c, p, eol, err, errcap);
        p = next;
    }
    if (!rc)
        rc = tool_y0_csv_end(&c, out, rows, header_note, err, errcap);
    tool_y0_csv_free(&c);
    return rc;
}
