/* npy.h - NumPy .npy arrays for the tools: a strict reader and a writer of little-endian float32
 * ("<f4") and float64 ("<f8") arrays in C order, format versions 1.0, 2.0 and 3.0 read, 1.0
 * written (2.0 when the header does not fit 65535 bytes), the bytes numpy.save writes.
 *
 * Strict: anything but a well-formed header of exactly the keys 'descr', 'fortran_order' and
 * 'shape' is refused with a message naming the problem (bad magic, unsupported version, a header
 * length beyond the file, a header not ending in a newline, unknown or repeated keys, big-endian
 * or other dtypes, Fortran order, a malformed shape, a data size that does not match the shape).
 * Values are converted to double (float32 exactly); NaN and infinities are passed through, the
 * caller decides what they mean. No dependency beyond the C library. */
#ifndef CLN_NPY_H
#define CLN_NPY_H

#include <stddef.h>

#define CLN_NPY_MAX_DIMS 16

typedef struct cln_npy_header {
    int itemsize; /* 4 ("<f4") or 8 ("<f8") */
    size_t ndim;  /* 0 (a scalar) to CLN_NPY_MAX_DIMS */
    size_t shape[CLN_NPY_MAX_DIMS];
    size_t count;    /* the product of the shape (1 for a scalar) */
    size_t data_off; /* bytes from the start of the file to the first element */
} cln_npy_header;

/* Parses the header of a .npy image of `size` bytes and checks that exactly count * itemsize
 * bytes of data follow it. Returns 0, or -1 with a message in err (errlen bytes). */
int cln_npy_parse(const unsigned char *buf, size_t size, cln_npy_header *h, char *err,
                  size_t errlen);

/* Parses only the header of an image whose first `size` bytes are buf (the data may follow or
 * not): h->count and h->data_off say how many bytes of data the header declares. Returns 0, or -1
 * with a message. */
int cln_npy_parse_header(const unsigned char *buf, size_t size, cln_npy_header *h, char *err,
                         size_t errlen);

/* A sequential reader: up to n bytes into buf. Returns the bytes read (fewer, or 0, only at the
 * end of the stream), or -1 on a read error (errno set). */
typedef long long (*cln_npy_read_fn)(void *user, void *buf, size_t n);

/* A check of a parsed header before its data are read (its shape against what the caller
 * expects): 0 to read them, or -1 with a message in err. */
typedef int (*cln_npy_check_fn)(void *user, const cln_npy_header *h, char *err, size_t errlen);

/* Reads one .npy image from a stream (a pipe works): the preamble and header first, then (after
 * `check`, when not NULL, accepted the header) exactly the data bytes the header declares, then
 * one more read that must find the end of the stream. Memory grows with the bytes that arrive,
 * never past what the header declares. Refuses, with a message: an empty stream, no magic, a
 * stream that ends inside the header or the data, a first dimension of more than max_rows (named
 * as the batch limit), what check refuses, and bytes after the data. On success *img (malloc'ed,
 * *size bytes) is an image cln_npy_parse accepts, parsed into h. Returns 0 or -1. */
int cln_npy_read_stream(cln_npy_read_fn fn, void *user, size_t max_rows, cln_npy_check_fn check,
                        void *check_user, unsigned char **img, size_t *size, cln_npy_header *h,
                        char *err, size_t errlen);

/* Decodes the data of a parsed image into `out` (h->count doubles). */
void cln_npy_decode(const unsigned char *buf, const cln_npy_header *h, double *out);

/* Reads a .npy file: *data (malloc'ed, h->count doubles; the caller frees it) and its header.
 * Returns 0, or -1 with a message naming the file and the problem. */
int cln_npy_read(const char *path, cln_npy_header *h, double **data, char *err, size_t errlen);

/* Encodes an array of `ndim` dimensions `shape` from `data` (the product of the shape doubles,
 * C order) as a .npy image with itemsize 4 (values rounded to float32) or 8. *out is malloc'ed
 * (*size bytes). Returns 0, or -1 with a message. */
int cln_npy_encode(const double *data, const size_t *shape, size_t ndim, int itemsize,
                   unsigned char **out, size_t *size, char *err, size_t errlen);

/* Writes such an image to `path` (written whole, no partial file left on failure). Returns 0, or
 * -1 with a message. */
int cln_npy_write(const char *path, const double *data, const size_t *shape, size_t ndim,
                  int itemsize, char *err, size_t errlen);

#endif /* CLN_NPY_H */
