/* tool_input.h - the tools' bounded readers of input files. */
#ifndef CLNODE_TOOL_INPUT_H
#define CLNODE_TOOL_INPUT_H

#include <stddef.h>

#include "tool_parse.h"

/* ---- bounded readers: a file or "-" (standard input, a pipe works), never read whole before
 * knowing what it declares; each prints "PATH: what is wrong" and returns 0, 2 (bad input) or
 * 3 (out of memory) ---- */

/* The longest line of a y0 CSV of N values: 1 MiB, plus 1 KiB per value. */
#define TOOL_CSV_LINE_MAX(N) (((size_t)1 << 20) + (size_t)1024 * (N))

/* y0 of a model of dimension N from a .npy (the file starts with the .npy magic or its name ends
 * in ".npy"; read header first, then exactly its data) or else a CSV (read line by line, lines
 * of at most TOOL_CSV_LINE_MAX(N) bytes without NUL, memory in proportion to the states kept).
 * At most TOOL_BATCH_MAX states. *y0 (malloc'ed) holds *rows x N finite values; *note says the
 * first line was taken for pandas' column labels. */
int tool_read_y0(const char *path, size_t N, tool_header_mode mode, double **y0, size_t *rows,
                 int *note);

/* A check of a .npy header before its data are read: 0, or the exit status after printing an
 * error. */
struct cln_npy_header;
typedef int (*tool_npy_check_fn)(void *user, const struct cln_npy_header *h);

/* A .npy image, header first (a first dimension of at most TOOL_BATCH_MAX, then `check` when not
 * NULL), then exactly the data it declares (cln_npy_read_stream): *img (malloc'ed, *size bytes)
 * passes cln_npy_parse. */
int tool_read_npy(const char *path, tool_npy_check_fn check, void *check_user, unsigned char **img,
                  size_t *size);

/* A .npz archive: refused at its first bytes when they are no ZIP local header; then a regular
 * file by its size, anything else (a pipe) record by record (cln_npz_read_stream). *img
 * (malloc'ed, *size bytes) is for cln_npz_parse. */
int tool_read_npz(const char *path, unsigned char **img, size_t *size);
#endif /* CLNODE_TOOL_INPUT_H */
