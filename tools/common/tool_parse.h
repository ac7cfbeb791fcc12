/* tool_parse.h - the tools' parsers of numbers, number lists and y0 CSV text (pure: no I/O but
 * error messages in err). */
#ifndef CLNODE_TOOL_PARSE_H
#define CLNODE_TOOL_PARSE_H

#include <stddef.h>

/* A blank between fields: a space or a tab. */
int tool_is_blank(char c);

/* A finite number filling all of s (surrounding blanks allowed). Returns 0, or 2 with a message
 * naming `what` in err. */
int tool_parse_double(const char *s, const char *what, double *out, char *err, size_t errcap);

/* "v1,v2,..." into a new array of finite numbers: empty fields are refused. Returns 0, 2 (bad
 * input) or 3 (out of memory), with a message in err. */
int tool_parse_list(const char *s, const char *what, double **out, size_t *n, char *err,
                    size_t errcap);

/* How the first content line of a y0 file is read. */
typedef enum tool_header_mode {
    TOOL_HEADER_AUTO = 0, /* a header if every token is not a number (nan and inf are numbers;
                             a line that mixes numbers with text is refused), or if it is exactly
                             0,1,...,N-1 (pandas' column labels) */
    TOOL_HEADER_YES,      /* the first content line is a header, whatever it holds */
    TOOL_HEADER_NO,       /* every content line is a state */
} tool_header_mode;

/* Parses a y0 CSV text of len bytes (not NUL-terminated): one state of N finite numbers per line,
 * separated by commas; lines end in \n, \r\n or \r, any length; blank lines and lines starting
 * with '#' are skipped; a UTF-8 byte order mark is skipped; empty fields are refused; the first
 * content line may be a header (mode). On success *out holds rows x N values (malloc'ed) and
 * *header_note says whether a numeric line (pandas' labels) was taken for a header. Returns 0, 2
 * or 3 with a message ("line L: ...") in err. */
int tool_parse_y0_text(const char *text, size_t len, size_t N, tool_header_mode mode, double **out,
                       size_t *rows, int *header_note, char *err, size_t errcap);

/* The same parser line by line, for a stream: init, then each line without its ending (the byte
 * order mark already skipped), then end. max_rows: the most states kept (more is an error naming
 * the batch limit); memory grows with the states kept. tool_y0_csv_line returns 0, 2 or 3 with
 * a message in err; tool_y0_csv_end hands over the states (or refuses a file without one). Call
 * tool_y0_csv_free in every case. */
typedef struct tool_y0_csv {
    size_t N, max_rows, line_no, rows, cap;
    tool_header_mode mode;
    double *v;
    int first, header_note;
} tool_y0_csv;
void tool_y0_csv_init(tool_y0_csv *c, size_t N, tool_header_mode mode, size_t max_rows);
int tool_y0_csv_line(tool_y0_csv *c, const char *line, const char *eol, char *err, size_t errcap);
int tool_y0_csv_end(tool_y0_csv *c, double **out, size_t *rows, int *header_note, char *err,
                    size_t errcap);
void tool_y0_csv_free(tool_y0_csv *c);
#endif /* CLNODE_TOOL_PARSE_H */
