/* npz.h - NumPy .npz archives for the tools: a writer built for parallel writers, and a strict
 * reader of stored (uncompressed) archives. No dependency beyond zlib (crc32, crc32_combine) and
 * the C library.
 *
 * The file is a ZIP archive of .npy members ("ys.npy", ...), each STORED (method 0), as
 * numpy.savez writes them, readable by numpy.load and Python's zipfile:
 *
 *   [local header 0][npy header 0][data 0] ... [local header n-1][npy header n-1][data n-1]
 *   [central directory][ZIP64 end record + locator, when needed][end of central directory]
 *
 * Every byte of it is a function of the member names, dtypes and shapes, and of the data: no
 * time stamp (the DOS date is 1980-01-01 00:00), no host or user field. Two writers that are
 * given the same members and data write the same bytes, whatever the split into row ranges.
 *
 * Writing in parallel, in four steps:
 *
 *   1. LAYOUT (every writer, or one that broadcasts the result; it is plain data, no pointers):
 *        cln_npz_layout L;
 *        cln_npz_init(&L, CLN_NPZ_ZIP64_THRESHOLD);
 *        cln_npz_add(&L, "ts", CLN_NPZ_F8, 2, (uint64_t[]){B, T}, err, sizeof err);
 *        cln_npz_add(&L, "ys", CLN_NPZ_F8, 3, (uint64_t[]){B, T, N}, err, sizeof err);
 *        ...
 *        cln_npz_plan(&L, err, sizeof err);
 *      computes every offset of the file: local headers, npy headers, the first byte of each
 *      member's data, the central directory, the end records (L.size: the file's size). The
 *      CRC-32 of each npy header is computed here too. A member's "rows" are its first
 *      dimension (a scalar has one row); row r of member m starts at
 *      L.m[m].data_off + r * L.m[m].row_bytes.
 *
 *   2. DATA (any writer, any order, concurrently): cln_npz_write_rows(&L, m, r0, r1, values,
 *      pwrite_fn, user, &crc) writes rows [r0, r1) of member m from `values` (the rows' values
 *      in the member's C type, see cln_npz_dtype) through the caller's positional writer
 *      `pwrite_fn(user, buf, len, offset)` (pwrite(2), or MPI_File_write_at on a file opened
 *      with MPI_File_open) and returns in crc the CRC-32 of the bytes it wrote. It never writes
 *      outside those rows, so writers of disjoint row ranges never overlap.
 *
 *   3. CRC (one writer, after gathering the row-range CRCs in row order, e.g. MPI_Gather of
 *      (r0, r1, crc) triples): cln_npz_member_crc(&L, m, n, bounds, crcs) combines the npy
 *      header's CRC with the n range CRCs (range i covering rows [bounds[i], bounds[i + 1]),
 *      bounds[0] = 0, bounds[n] = the member's rows) with zlib's crc32_combine, in row order,
 *      and stores the member's CRC in L.m[m].crc. The result equals crc32 of the whole member,
 *      computed directly.
 *
 *   4. FINISH (that one writer, once every member's CRC is known and every other writer has
 *      written its rows; under MPI: after an MPI_Barrier or the gather): cln_npz_finish(&L,
 *      pwrite_fn, user) writes the local headers, the npy headers, the central directory and
 *      the end records at their offsets. The file is then complete; the caller closes it and
 *      renames it from its temporary name (a crashed job leaves no file that looks complete).
 *
 * ZIP64: a member whose size, or a local header whose offset, reaches the threshold given to
 * cln_npz_init (CLN_NPZ_ZIP64_THRESHOLD = 0xFFFFFFFF, the largest value a 32-bit field can hold
 * without meaning "see the ZIP64 extra field") gets ZIP64 extra fields; a central directory that
 * starts or ends at or past it gets the ZIP64 end records. A smaller threshold forces these
 * records on a small file (tests).
 *
 * Thread-safety: the layout is read-only after cln_npz_plan except for the crc fields that
 * cln_npz_member_crc writes; cln_npz_write_rows may run concurrently on one layout. */
#ifndef CLN_NPZ_H
#define CLN_NPZ_H

#include <stddef.h>
#include <stdint.h>

/* enough for a gradient's members: y0, args, 64 layers' weights and biases, out_scale */
#define CLN_NPZ_MAX_MEMBERS 136
#define CLN_NPZ_MAX_DIMS 4
#define CLN_NPZ_MAX_NAME 32 /* member name without ".npy", at most 31 characters */
#define CLN_NPZ_ZIP64_THRESHOLD 0xFFFFFFFFu

/* Member dtypes and the C type of the values cln_npz_write_rows takes for them. */
typedef enum cln_npz_dtype {
    CLN_NPZ_F4, /* "<f4": float */
    CLN_NPZ_F8, /* "<f8": double */
    CLN_NPZ_I4, /* "<i4": int32_t */
    CLN_NPZ_I8, /* "<i8": int64_t */
} cln_npz_dtype;

typedef struct cln_npz_member {
    char name[CLN_NPZ_MAX_NAME]; /* without ".npy" */
    cln_npz_dtype dtype;
    size_t ndim; /* 0 (a scalar) to CLN_NPZ_MAX_DIMS */
    uint64_t shape[CLN_NPZ_MAX_DIMS];
    /* computed by cln_npz_plan */
    uint64_t rows;       /* shape[0], 1 for a scalar */
    uint64_t row_bytes;  /* bytes of one row: itemsize x the product of shape[1:] */
    uint64_t local_off;  /* the local file header */
    uint64_t npy_off;    /* the npy header: the member's first byte */
    uint64_t data_off;   /* the first value */
    uint64_t size;       /* npy header + data: the member's (stored = uncompressed) size */
    uint32_t npy_len;    /* bytes of the npy header (a multiple of 64) */
    uint32_t header_crc; /* CRC-32 of the npy header */
    uint32_t crc;        /* CRC-32 of the member, set by cln_npz_member_crc */
    int zip64_sizes;     /* the sizes go to ZIP64 extra fields */
    int zip64_offset;    /* the local header offset goes to the central ZIP64 extra field */
} cln_npz_member;

typedef struct cln_npz_layout {
    uint64_t zip64_threshold;
    size_t n;
    cln_npz_member m[CLN_NPZ_MAX_MEMBERS];
    /* computed by cln_npz_plan */
    uint64_t cd_off, cd_size; /* the central directory */
    uint64_t end_off;         /* the end records (ZIP64 ones first, when zip64_end) */
    uint64_t size;            /* the file's size */
    int zip64_end;
    int planned;
} cln_npz_layout;

/* A positional writer: writes len bytes of buf at byte `offset` of the output, whole. Returns 0,
 * or nonzero on failure (the writer stops and returns -1). */
typedef int (*cln_npz_pwrite_fn)(void *user, const void *buf, size_t len, uint64_t offset);

/* An empty layout; zip64_threshold as above (CLN_NPZ_ZIP64_THRESHOLD in production). */
void cln_npz_init(cln_npz_layout *L, uint64_t zip64_threshold);

/* Appends member `name` (letters, digits, '_' and single '.' between them, as in
 * "layers.0.weight"; unique) of `ndim` dimensions `shape`.
 * Returns its index, or -1 with a message in err. */
int cln_npz_add(cln_npz_layout *L, const char *name, cln_npz_dtype dtype, size_t ndim,
                const uint64_t *shape, char *err, size_t errlen);

/* Computes every offset and the npy headers' CRCs. Returns 0, or -1 with a message (sizes that
 * overflow 64 bits). */
int cln_npz_plan(cln_npz_layout *L, char *err, size_t errlen);

/* Index of member `name`, or -1. */
int cln_npz_find(const cln_npz_layout *L, const char *name);

/* Writes rows [r0, r1) of member m from `values` ((r1 - r0) x row_bytes / itemsize values of the
 * member's C type, C order) as little-endian bytes at their offsets, in pieces of at most 1 MiB,
 * and sets *crc to the CRC-32 of those bytes (crc32 of nothing, 0, for an empty range). Returns
 * 0, or -1 (bad range, or the writer failed) with a message. Memory: a 1 MiB buffer. */
int cln_npz_write_rows(const cln_npz_layout *L, size_t m, uint64_t r0, uint64_t r1,
                       const void *values, cln_npz_pwrite_fn fn, void *user, uint32_t *crc,
                       char *err, size_t errlen);

/* Combines member m's npy header CRC and the CRCs of n row ranges covering its rows in order
 * (range i: rows [bounds[i], bounds[i + 1]), n + 1 bounds from 0 to the member's rows) into
 * L->m[m].crc. Returns 0, or -1 when the bounds do not cover the rows in order. */
int cln_npz_member_crc(cln_npz_layout *L, size_t m, size_t n, const uint64_t *bounds,
                       const uint32_t *crcs, char *err, size_t errlen);

/* Writes the local headers, npy headers, central directory and end records. Every member's CRC
 * must have been set by cln_npz_member_crc. Returns 0, or -1 with a message. */
int cln_npz_finish(const cln_npz_layout *L, cln_npz_pwrite_fn fn, void *user, char *err,
                   size_t errlen);

/* Writes only member m's npy header at its offset (L->m[m].npy_off): with a writer that subtracts
 * that offset and the member's data written by cln_npz_write_rows, a bare .npy file of the member.
 * Returns 0, or -1 with a message. */
int cln_npz_write_npy_header(const cln_npz_layout *L, size_t m, cln_npz_pwrite_fn fn, void *user,
                             char *err, size_t errlen);

/* pwrite(2) on the file descriptor *(int *)user, retried on short writes and EINTR. */
int cln_npz_pwrite_fd(void *user, const void *buf, size_t len, uint64_t offset);

/* ---- reading ---- */

/* One member of an archive read whole into memory. */
typedef struct cln_npz_entry {
    char name[CLN_NPZ_MAX_NAME]; /* without ".npy" */
    const unsigned char *data;   /* the member's bytes (a .npy image), inside the archive image */
    uint64_t size;
} cln_npz_entry;

/* Parses the ZIP image of `size` bytes (read whole by the caller): the end records (ZIP64 ones
 * too), the central directory and each local header. Refuses, with a message naming the problem:
 * a file that is not a ZIP archive, a compressed member (numpy.savez_compressed: save with
 * numpy.savez), encrypted or split archives, a member name that does not end in ".npy" or is
 * longer than CLN_NPZ_MAX_NAME - 1 before it, a name that appears twice, more than
 * CLN_NPZ_MAX_MEMBERS members, sizes or offsets outside the file, and a member whose CRC-32 does
 * not match its bytes. On success *n entries point into buf. Returns 0 or -1. */
int cln_npz_parse(const unsigned char *buf, size_t size, cln_npz_entry *entries, size_t *n,
                  char *err, size_t errlen);

/* A sequential reader: up to n bytes into buf. Returns the bytes read (fewer, or 0, only at the
 * end of the stream), or -1 on a read error (errno set). */
typedef long long (*cln_npz_read_fn)(void *user, void *buf, size_t n);

/* Reads one archive from a stream (a pipe works) record by record, each size from the record
 * before its bytes: the local headers and the data their sizes declare, the central directory,
 * the ZIP64 end records, the end of central directory record and its comment, then one more read
 * that must find the end of the stream. Memory grows with the bytes that arrive, never past what
 * the records declare. Refuses, with a message: an empty stream, one that does not start with a
 * local header, that ends inside a record or its data, more than CLN_NPZ_MAX_MEMBERS members, a
 * member whose sizes follow its data (general purpose flag bit 3: unknown before the data), and
 * bytes after the end record. On success *img (malloc'ed, *size bytes) is the archive, to be
 * checked by cln_npz_parse. Returns 0 or -1. */
int cln_npz_read_stream(cln_npz_read_fn fn, void *user, unsigned char **img, size_t *size,
                        char *err, size_t errlen);

#endif /* CLN_NPZ_H */
