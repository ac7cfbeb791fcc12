/* tool_table.h - aligned plain-text tables for the command-line tools: cells are collected row by
 * row, then printed with every column as wide as its widest cell (ASCII cells). */
#ifndef CLNODE_TOOL_TABLE_H
#define CLNODE_TOOL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define TOOL_TABLE_CELL 192

typedef struct tool_table {
    size_t ncols, nrows, cap;
    char (*cells)[TOOL_TABLE_CELL]; /* nrows x ncols */
    int oom;
} tool_table;

void tool_table_init(tool_table *t, size_t ncols);
/* Starts a new row of empty cells; returns its index (further calls fail silently after an
 * allocation failure, which tool_table_print reports). */
size_t tool_table_row(tool_table *t);
/* Sets cell (row, col) printf-style, truncated to TOOL_TABLE_CELL - 1 characters. */
void tool_table_set(tool_table *t, size_t row, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints the table; row 0 is the header, underlined. Every line starts with `indent`. */
void tool_table_print(FILE *f, const tool_table *t, const char *indent);
void tool_table_free(tool_table *t);

#endif /* CLNODE_TOOL_TABLE_H */
