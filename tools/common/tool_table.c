/* tool_table.c - aligned plain-text tables (tool_table.h). */
#include "tool_table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void tool_table_init(tool_table *t, size_t ncols)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
}

size_t tool_table_row(tool_table *t)
{
    if (t->oom)
        return (size_t)-1;
    if (t->nrows == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 16;
        if (t->ncols && cap > (size_t)-1 / t->ncols / sizeof *t->cells) {
            t->oom = 1;
            return (size_t)-1;
        }
        char(*c)[TOOL_TABLE_CELL] = realloc(t->cells, cap * t->ncols * sizeof *c);
        if (!c) {
            t->oom = 1;
            return (size_t)-1;
        }
        t->cells = c;
        t->cap = cap;
    }
    memset(t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof t->cells[0]);
    return t->nrows++;
}

void tool_table_set(tool_table *t, size_t row, size_t col, const char *fmt, ...)
{
    if (row >= t->nrows || col >= t->ncols)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cells[row * t->ncols + col], TOOL_TABLE_CELL, fmt, ap);
    va_end(ap);
}

void tool_table_print(FILE *f, const tool_table *t, const char *indent)
{
    if (t->oom) {
        fprintf(f, "%s(out of memory building the table)\n", indent);
        return;
    }
    size_t w[32] = {0};
    const size_t nc = t->ncols < 32 ? t->ncols : 32;
    for (size_t r = 0; r < t->nrows; ++r)
        for (size_t c = 0; c < nc; ++c) {
            const size_t n = strlen(t->cells[r * t->ncols + c]);
            w[c] = n > w[c] ? n : w[c];
        }
    for (size_t r = 0; r < t->nrows; ++r) {
        fputs(indent, f);
        /* the last non-empty column is not padded, so lines carry no trailing blanks */
        size_t last = 0;
        for (size_t c = 0; c < nc; ++c)
            if (t->cells[r * t->ncols + c][0])
                last = c;
        for (size_t c = 0; c <= last; ++c)
            fprintf(f, "%s%-*s", c ? "  " : "", c == last ? 0 : (int)w[c],
                    t->cells[r * t->ncols + c]);
        fputc('\n', f);
        if (r == 0) {
            /* every column underlined, the last one only as wide as its header */
            fputs(indent, f);
            for (size_t c = 0; c < nc; ++c) {
                const size_t len = c + 1 == nc ? strlen(t->cells[c]) : w[c];
                for (size_t i = 0; i < len + (c + 1 < nc ? 2 : 0); ++i)
                    fputc('-', f);
            }
            fputc('\n', f);
        }
    }
}

void tool_table_free(tool_table *t)
{
    free(t->cells);
    memset(t, 0, sizeof *t);
}
