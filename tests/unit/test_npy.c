/* test_npy.c - the tools' .npy reader and writer (tools/arrays/npy.c): the writer produces
 * numpy.save's bytes (golden images written by numpy 1.26), images round-trip bit for bit, and
 * every kind of malformed header or data size is refused with a message naming the problem; every
 * truncation of a valid image is refused without reading past it (exact-size copies, checked
 * under ASan). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_stream.h"

#include "npy.h"

/* numpy.save(f, numpy.array([1.0, -2.5, 0.125])) */
static const char golden_f8_header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
static const unsigned char golden_f8_data[24] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,
                                                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0,
                                                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x3f};
/* numpy.save(f, numpy.array([[1.5, 2, 3], [4, 5, 6]], dtype=numpy.float32)) */
static const char golden_f4_header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
static const unsigned char golden_f4_data[24] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0x40,
                                                 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40,
                                                 0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40};

/* A numpy image: the header text padded with spaces to 127 bytes, a newline, then the data. */
static unsigned char *golden(const char *header, const unsigned char *data, size_t dlen,
                             size_t *size)
{
    const size_t hl = 10 + strlen(header + 10);
    unsigned char *b = malloc(128 + dlen);
    assert_non_null(b);
    memcpy(b, header, hl);
    memset(b + hl, ' ', 127 - hl);
    b[127] = '\n';
    memcpy(b + 128, data, dlen);
    *size = 128 + dlen;
    return b;
}

static void test_writer_is_numpy(void **state)
{
    (void)state;
    size_t gsize, size;
    unsigned char *g = golden(golden_f8_header, golden_f8_data, 24, &gsize);
    const double v[3] = {1.0, -2.5, 0.125};
    const size_t shape1[1] = {3};
    unsigned char *img;
    char err[256];
    assert_int_equal(cln_npy_encode(v, shape1, 1, 8, &img, &size, err, sizeof err), 0);
    assert_int_equal(size, gsize);
    assert_memory_equal(img, g, size);
    free(img);
    free(g);
    g = golden(golden_f4_header, golden_f4_data, 24, &gsize);
    const double w[6] = {1.5, 2, 3, 4, 5, 6};
    const size_t shape2[2] = {2, 3};
    assert_int_equal(cln_npy_encode(w, shape2, 2, 4, &img, &size, err, sizeof err), 0);
    assert_int_equal(size, gsize);
    assert_memory_equal(img, g, size);
    /* and the reader reads numpy's image */
    cln_npy_header h;
    assert_int_equal(cln_npy_parse(g, gsize, &h, err, sizeof err), 0);
    assert_int_equal(h.itemsize, 4);
    assert_int_equal(h.ndim, 2);
    assert_true(h.shape[0] == 2 && h.shape[1] == 3 && h.count == 6 && h.data_off == 128);
    double out[6];
    cln_npy_decode(g, &h, out);
    assert_memory_equal(out, w, sizeof w);
    free(img);
    free(g);
}

static void test_round_trip(void **state)
{
    (void)state;
    const double v[8] = {0.0, -0.0, 1e-310, -INFINITY, NAN, 3.141592653589793, -1e300, 7.0};
    const size_t shapes[][3] = {{8, 0, 0}, {2, 4, 0}, {2, 2, 2}};
    const size_t ndims[] = {1, 2, 3};
    char err[256];
    for (int k = 0; k < 3; ++k)
        for (int isz = 4; isz <= 8; isz += 4) {
            unsigned char *img;
            size_t size;
            assert_int_equal(
                cln_npy_encode(v, shapes[k], ndims[k], isz, &img, &size, err, sizeof err), 0);
            assert_int_equal((size - 8 * (size_t)isz) % 64, 0); /* header aligned as numpy's */
            cln_npy_header h;
            assert_int_equal(cln_npy_parse(img, size, &h, err, sizeof err), 0);
            assert_int_equal(h.ndim, ndims[k]);
            assert_int_equal(h.count, 8);
            double out[8];
            cln_npy_decode(img, &h, out);
            for (int i = 0; i < 8; ++i) {
                const double want = isz == 8 ? v[i] : (double)(float)v[i];
                assert_memory_equal(&out[i], &want, sizeof want); /* NaN, -0 and all */
            }
            free(img);
        }
    /* a scalar: shape () */
    unsigned char *img;
    size_t size;
    const double x = 2.5;
    assert_int_equal(cln_npy_encode(&x, NULL, 0, 8, &img, &size, err, sizeof err), 0);
    assert_non_null(strstr((const char *)img + 10, "'shape': (), }"));
    cln_npy_header h;
    assert_int_equal(cln_npy_parse(img, size, &h, err, sizeof err), 0);
    assert_true(h.ndim == 0 && h.count == 1);
    free(img);
}

/* An image of `header` (the dictionary, padded to 128 bytes in total) and dlen zero bytes. */
static void expect_bad_at(const char *magic, size_t mlen, const char *dict, size_t dlen,
                          const char *needle, int line)
{
    const size_t n = mlen + strlen(dict);
    const size_t size = (n < 128 ? 128 : n + 1) + dlen;
    unsigned char *b = calloc(size, 1);
    assert_non_null(b);
    memcpy(b, magic, mlen);
    memcpy(b + mlen, dict, strlen(dict));
    const size_t end = n < 128 ? 128 : n + 1;
    memset(b + n, ' ', end - 1 - n);
    b[end - 1] = '\n';
    if (mlen == 10 && (unsigned char)magic[8] == 0xff) { /* the real length unless told */
    } else if (mlen == 10) {
        b[8] = (unsigned char)((end - 10) & 0xff);
        b[9] = (unsigned char)((end - 10) >> 8);
    }
    cln_npy_header h;
    char err[256] = "";
    const int r = cln_npy_parse(b, size, &h, err, sizeof err);
    if (r != -1 || strstr(err, needle) == NULL) {
        print_error("line %d: got %d \"%s\", want \"%s\"\n", line, r, err, needle);
        free(b);
        fail();
    }
    free(b);
}
#define MAGIC "\x93NUMPY\x01\x00\x00\x00"
#define expect_bad(dict, dlen, needle) expect_bad_at(MAGIC, 10, dict, dlen, needle, __LINE__)

static void test_malformed(void **state)
{
    (void)state;
    const char *ok = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
    expect_bad(ok, 23, "23 bytes of data, but the shape needs 24 (3 values of 8 bytes)");
    expect_bad(ok, 25, "25 bytes of data, but the shape needs 24");
    expect_bad("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", 24, "big-endian");
    expect_bad("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 12,
               "dtype '<i4' is not supported");
    expect_bad("{'descr': '<f8', 'fortran_order': True, 'shape': (3,), }", 24, "Fortran order");
    expect_bad("{'descr': '<f8', 'fortran_order': 0, 'shape': (3,), }", 24,
               "'fortran_order' is neither True nor False");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (3), }", 24,
               "(n) is not a tuple");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,), }", 24, "not a size");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4, }", 24, "not a size");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': [3], }", 24, "not a tuple");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
               24, "not a size");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
               24, "overflows");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}", 24,
               "unknown key 'x'");
    expect_bad("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24,
               "'descr' appears twice");
    expect_bad("{'descr': '<f8', 'shape': (3,), }", 24, "lacks the key 'fortran_order'");
    expect_bad("{'descr': '<f8' 'fortran_order': False, 'shape': (3,), }", 24, "lacks a ','");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), } x", 24,
               "characters after the header");
    expect_bad("['descr', '<f8']", 24, "not a dictionary");
    expect_bad("{descr: '<f8'}", 24, "key that is not a string");
    expect_bad("{'descr': '<f8', 'fortran_order': False, 'shape': (3,),\x01}", 24,
               "byte 0x01 that is not printable");
    expect_bad_at("\x93NUMPZ\x01\x00\x00\x00", 10, ok, 24, "no \\x93NUMPY magic", __LINE__);
    expect_bad_at("\x93NUMPY\x01\x01\x00\x00", 10, ok, 24, "version 1.1", __LINE__);
    expect_bad_at("\x93NUMPY\x04\x00\x00\x00", 10, ok, 24, "version 4.0", __LINE__);
    /* a header length past the end of the file */
    expect_bad_at("\x93NUMPY\x01\x00\xff\xff", 10, ok, 24, "runs past the end", __LINE__);
    /* a header that does not end with a newline: the length one short */
    {
        size_t size;
        unsigned char *g = golden(golden_f8_header, golden_f8_data, 24, &size);
        g[8] = 0x75;
        cln_npy_header h;
        char err[256];
        assert_int_equal(cln_npy_parse(g, size, &h, err, sizeof err), -1);
        assert_non_null(strstr(err, "does not end with a newline"));
        free(g);
    }
}

/* Every prefix of a valid image is refused (an exact-size copy: ASan sees any overread). */
static void test_truncation(void **state)
{
    (void)state;
    size_t size;
    unsigned char *g = golden(golden_f8_header, golden_f8_data, 24, &size);
    for (size_t n = 0; n < size; ++n) {
        unsigned char *c = malloc(n ? n : 1);
        assert_non_null(c);
        memcpy(c, g, n);
        cln_npy_header h;
        char err[256];
        assert_int_equal(cln_npy_parse(c, n, &h, err, sizeof err), -1);
        free(c);
    }
    free(g);
}

static void test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/clnode-npy-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/a.npy", dir);
    const double v[6] = {1, 2, 3, 4, 5, 6.5};
    const size_t shape[2] = {3, 2};
    char err[256];
    assert_int_equal(cln_npy_write(path, v, shape, 2, 8, err, sizeof err), 0);
    cln_npy_header h;
    double *d = NULL;
    assert_int_equal(cln_npy_read(path, &h, &d, err, sizeof err), 0);
    assert_true(h.ndim == 2 && h.shape[0] == 3 && h.shape[1] == 2);
    assert_memory_equal(d, v, sizeof v);
    free(d);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.npy", dir);
    assert_int_equal(cln_npy_read(missing, &h, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "none.npy"));
    assert_null(d);
    /* a truncated file names itself and the problem */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 130), 0);
    fclose(f);
    assert_int_equal(cln_npy_read(path, &h, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "a.npy: 2 bytes of data, but the shape needs 48"));
    /* a write into a missing folder fails and leaves nothing */
    char bad[200];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.npy", dir);
    assert_int_equal(cln_npy_write(bad, v, shape, 2, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "x.npy: cannot write"));
    remove(path);
    rmdir(dir);
}

static int stream_read(const unsigned char *p, size_t size, size_t piece, int endless,
                       size_t max_rows, char *err, size_t *handed)
{
    mem_stream m = {p, size, 0, piece, 0, endless};
    unsigned char *img = NULL;
    size_t n = 0;
    cln_npy_header h;
    const int r = cln_npy_read_stream(mem_read, &m, max_rows, NULL, NULL, &img, &n, &h, err, 256);
    if (r == 0) {
        assert_int_equal(n, size);
        assert_memory_equal(img, p, size);
        cln_npy_header h2;
        assert_int_equal(cln_npy_parse(img, n, &h2, err, 256), 0);
        assert_int_equal(h.count, h2.count);
    } else {
        assert_null(img);
    }
    free(img);
    *handed = m.handed;
    return r;
}

static int refuse_2d(void *user, const cln_npy_header *h, char *err, size_t errlen)
{
    (void)user;
    if (h->ndim != 2)
        return 0;
    snprintf(err, errlen, "2 dimensions");
    return -1;
}

/* The stream reader takes the header first, then exactly the data it declares: the image read
 * in any pieces; a stream that goes on after the data (an endless one included) refused after
 * one byte more; an endless stream of zeros refused at its first bytes; a first dimension past
 * the limit, or a header the caller's check refuses, refused before its data; every truncation
 * refused. */
static void test_stream(void **state)
{
    (void)state;
    size_t size, handed;
    unsigned char *g = golden(golden_f4_header, golden_f4_data, 24, &size);
    char err[256];
    for (size_t piece = 1; piece <= size + 1; ++piece)
        assert_int_equal(stream_read(g, size, piece, 0, 1000, err, &handed), 0);
    /* version 2.0: a 4-byte header length */
    const double v[3] = {1, 2, 3};
    const size_t shape[1] = {3};
    unsigned char *img;
    size_t isize;
    assert_int_equal(cln_npy_encode(v, shape, 1, 8, &img, &isize, err, sizeof err), 0);
    assert_int_equal(stream_read(img, isize, 5, 0, 1000, err, &handed), 0);
    free(img);
    assert_int_equal(stream_read(g, size, 7, 1, 1000, err, &handed), -1);
    assert_non_null(strstr(err, "more bytes than the 24 of data the shape needs"));
    assert_true(handed <= size + 7);
    assert_int_equal(stream_read(g, 0, 4096, 1, 1000, err, &handed), -1);
    assert_non_null(strstr(err, "not a .npy file (no \\x93NUMPY magic)"));
    assert_true(handed <= 12);
    assert_int_equal(stream_read(g, 0, 4096, 0, 1000, err, &handed), -1);
    assert_non_null(strstr(err, "an empty file"));
    /* (2, 3): 2 rows, one past a limit of 1 */
    assert_int_equal(stream_read(g, size, 4096, 1, 1, err, &handed), -1);
    assert_non_null(strstr(err, "2 rows, more than 1 (the batch limit)"));
    assert_true(handed <= 128 + 4096);
    /* the caller's check refuses the header: no data read */
    {
        mem_stream m = {g, size, 0, 4096, 0, 1};
        unsigned char *out = NULL;
        size_t n = 0;
        cln_npy_header h;
        assert_int_equal(
            cln_npy_read_stream(mem_read, &m, 1000, refuse_2d, NULL, &out, &n, &h, err, sizeof err),
            -1);
        assert_string_equal(err, "2 dimensions");
        assert_null(out);
        assert_true(m.handed <= 128);
    }
    for (size_t n = 1; n < size; ++n) {
        assert_int_equal(stream_read(g, n, 3, 0, 1000, err, &handed), -1);
        if (n < 10)
            assert_non_null(strstr(err, "ends inside the .npy preamble"));
        else if (n >= 128)
            assert_non_null(strstr(err, "bytes of data, but the shape needs 24"));
    }
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_is_numpy), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),       cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_files),           cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
