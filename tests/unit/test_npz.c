/* test_npz.c - the tools' .npz writer and reader (tools/arrays/npz.c): the layout step places every
 * byte before any data is written (members back to back, the central directory after them, the
 * file's size known); row ranges written in any order and split any way give the same bytes;
 * each member's CRC combined from its row ranges equals zlib's crc32 of the whole member computed
 * directly; ZIP64 records appear when forced by the threshold and the reader follows them; the
 * reader refuses compressed, damaged, duplicated and truncated archives with a message.
 *
 *   test_npz                 the unit tests
 *   test_npz --write DIR     writes DIR/plain.npz and DIR/zip64.npz (the same members, the
 *                            second with every ZIP64 record forced) for Python's zipfile and
 *                            numpy.load to check (tests/tools/test_cli_arrays.py) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "test_stream.h"

#include "npy.h"
#include "npz.h"

/* An in-memory file for the positional writer; counts the bytes written, to catch overlaps. */
typedef struct mem_file {
    unsigned char *buf;
    uint64_t size;
    unsigned *writes; /* per byte */
    int fail_at_call; /* > 0: the n-th call fails */
    int calls;
} mem_file;

static int mem_pwrite(void *user, const void *buf, size_t len, uint64_t off)
{
    mem_file *f = user;
    if (f->fail_at_call && ++f->calls == f->fail_at_call)
        return -1;
    assert_true(off + len <= f->size);
    memcpy(f->buf + off, buf, len);
    for (size_t i = 0; i < len; ++i)
        f->writes[off + i]++;
    return 0;
}

enum {
    B = 7,
    T = 3,
    N = 5
};

/* The sample archive: ts (B, T) f4, ys (B, T, N) f8, steps (B,) i8, result (B,) i4, version
 * () i8. */
typedef struct sample {
    float ts[B * T];
    double ys[B * T * N];
    int64_t steps[B];
    int32_t result[B];
    int64_t version;
} sample;

static void sample_fill(sample *s)
{
    for (int i = 0; i < B * T; ++i)
        s->ts[i] = (float)i * 0.25f;
    for (int i = 0; i < B * T * N; ++i)
        s->ys[i] = (double)i / 3.0 - 7.0;
    for (int b = 0; b < B; ++b) {
        s->steps[b] = 1000000007LL * b;
        s->result[b] = b % 5 - 1;
    }
    s->version = 1;
}

static void sample_layout(cln_npz_layout *L, uint64_t threshold)
{
    char err[256];
    cln_npz_init(L, threshold);
    assert_int_equal(cln_npz_add(L, "ts", CLN_NPZ_F4, 2, (uint64_t[]){B, T}, err, sizeof err), 0);
    assert_int_equal(cln_npz_add(L, "ys", CLN_NPZ_F8, 3, (uint64_t[]){B, T, N}, err, sizeof err),
                     1);
    assert_int_equal(cln_npz_add(L, "steps", CLN_NPZ_I8, 1, (uint64_t[]){B}, err, sizeof err), 2);
    assert_int_equal(cln_npz_add(L, "result", CLN_NPZ_I4, 1, (uint64_t[]){B}, err, sizeof err), 3);
    assert_int_equal(cln_npz_add(L, "version", CLN_NPZ_I8, 0, NULL, err, sizeof err), 4);
    assert_int_equal(cln_npz_plan(L, err, sizeof err), 0);
}

/* Writes the sample through row ranges split at `cuts` (ascending, inside (0, B)), the ranges
 * of each member in reverse order, then combines the CRCs in row order and finishes. */
static unsigned char *sample_write(const sample *s, uint64_t threshold, const uint64_t *cuts,
                                   size_t ncuts, uint64_t *size, cln_npz_layout *Lout)
{
    cln_npz_layout L;
    sample_layout(&L, threshold);
    mem_file f = {calloc(L.size, 1), L.size, calloc(L.size, sizeof(unsigned)), 0, 0};
    assert_non_null(f.buf);
    const void *vals[5] = {s->ts, s->ys, s->steps, s->result, &s->version};
    char err[256];
    for (size_t m = 0; m < L.n; ++m) {
        uint64_t bounds[16];
        uint32_t crcs[16];
        size_t n = 0;
        bounds[0] = 0;
        if (L.m[m].rows == B)
            for (size_t c = 0; c < ncuts; ++c)
                bounds[++n] = cuts[c];
        bounds[++n] = L.m[m].rows;
        for (size_t r = n; r-- > 0;) {
            const size_t per = L.m[m].row_bytes /
                               (L.m[m].dtype == CLN_NPZ_F4 || L.m[m].dtype == CLN_NPZ_I4 ? 4 : 8);
            const size_t isz = L.m[m].row_bytes / per;
            const unsigned char *v = (const unsigned char *)vals[m] + bounds[r] * per * isz;
            assert_int_equal(cln_npz_write_rows(&L, m, bounds[r], bounds[r + 1], v, mem_pwrite, &f,
                                                &crcs[r], err, sizeof err),
                             0);
        }
        assert_int_equal(cln_npz_member_crc(&L, m, n, bounds, crcs, err, sizeof err), 0);
    }
    assert_int_equal(cln_npz_finish(&L, mem_pwrite, &f, err, sizeof err), 0);
    /* the independent check: crc32 of each whole member (npy header and data), computed
     * directly on the finished file, equals the one combined from the row ranges */
    for (size_t m = 0; m < L.n; ++m) {
        const uint32_t direct =
            (uint32_t)crc32(crc32(0, Z_NULL, 0), f.buf + L.m[m].npy_off, (uInt)L.m[m].size);
        assert_int_equal(L.m[m].crc, direct);
    }
    /* every byte written exactly once: the layout has no gap and no overlap */
    for (uint64_t i = 0; i < L.size; ++i)
        if (f.writes[i] != 1)
            fail_msg("byte %llu written %u times", (unsigned long long)i, f.writes[i]);
    free(f.writes);
    *size = L.size;
    if (Lout)
        *Lout = L;
    return f.buf;
}

static void test_layout(void **state)
{
    (void)state;
    cln_npz_layout L;
    sample_layout(&L, CLN_NPZ_ZIP64_THRESHOLD);
    uint64_t off = 0;
    for (size_t m = 0; m < L.n; ++m) {
        assert_int_equal(L.m[m].local_off, off);
        /* local header: 30 bytes and the name with ".npy" */
        assert_int_equal(L.m[m].npy_off, off + 30 + strlen(L.m[m].name) + 4);
        assert_int_equal(L.m[m].npy_len % 64, 0);
        assert_int_equal(L.m[m].data_off, L.m[m].npy_off + L.m[m].npy_len);
        assert_int_equal(L.m[m].size, L.m[m].npy_len + L.m[m].rows * L.m[m].row_bytes);
        assert_false(L.m[m].zip64_sizes || L.m[m].zip64_offset);
        off = L.m[m].npy_off + L.m[m].size;
    }
    assert_int_equal(L.m[1].row_bytes, T * N * 8);
    assert_int_equal(L.m[4].rows, 1);
    assert_int_equal(L.cd_off, off);
    assert_false(L.zip64_end);
    assert_int_equal(L.size, L.end_off + 22);
    /* forced ZIP64: extra fields in the local headers, end records */
    cln_npz_layout Z;
    sample_layout(&Z, 0);
    assert_true(Z.m[0].zip64_sizes && Z.m[0].zip64_offset && Z.zip64_end);
    assert_int_equal(Z.m[0].npy_off, 30 + 6 + 20);
    assert_int_equal(Z.size, Z.end_off + 56 + 20 + 22);
    /* refusals */
    char err[256];
    assert_int_equal(cln_npz_add(&L, "x", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    cln_npz_init(&L, CLN_NPZ_ZIP64_THRESHOLD);
    assert_int_equal(cln_npz_add(&L, "a/b", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "holds '/'"));
    assert_int_equal(cln_npz_add(&L, ".a", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    assert_int_equal(cln_npz_add(&L, "a..b", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    assert_int_equal(cln_npz_add(&L, "a.", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    assert_int_equal(cln_npz_add(&L, "a", CLN_NPZ_F4, 0, NULL, err, sizeof err), 0);
    assert_int_equal(cln_npz_add(&L, "a", CLN_NPZ_F4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "twice"));
    assert_int_equal(
        cln_npz_add(&L, "big", CLN_NPZ_F8, 3, (uint64_t[]){UINT64_MAX / 4, 4, 4}, err, sizeof err),
        1);
    assert_int_equal(cln_npz_plan(&L, err, sizeof err), -1);
    assert_non_null(strstr(err, "overflows"));
}

static int has(const unsigned char *p, uint64_t n, const char *s)
{
    const size_t k = strlen(s);
    for (uint64_t i = 0; i + k <= n; ++i)
        if (memcmp(p + i, s, k) == 0)
            return 1;
    return 0;
}

/* The archive reads back: names, npy images and values. */
static void check_read(const unsigned char *img, uint64_t size, const sample *s)
{
    cln_npz_entry e[CLN_NPZ_MAX_MEMBERS];
    size_t n;
    char err[256];
    assert_int_equal(cln_npz_parse(img, size, e, &n, err, sizeof err), 0);
    assert_int_equal(n, 5);
    assert_string_equal(e[0].name, "ts");
    assert_string_equal(e[1].name, "ys");
    assert_string_equal(e[4].name, "version");
    cln_npy_header h;
    assert_int_equal(cln_npy_parse(e[1].data, e[1].size, &h, err, sizeof err), 0);
    assert_int_equal(h.ndim, 3);
    assert_true(h.shape[0] == B && h.shape[1] == T && h.shape[2] == N);
    double ys[B * T * N];
    cln_npy_decode(e[1].data, &h, ys);
    assert_memory_equal(ys, s->ys, sizeof ys);
    assert_int_equal(cln_npy_parse(e[0].data, e[0].size, &h, err, sizeof err), 0);
    double ts[B * T];
    cln_npy_decode(e[0].data, &h, ts);
    for (int i = 0; i < B * T; ++i)
        assert_true(ts[i] == s->ts[i]);
    /* integer members: the header numpy writes, then the little-endian values */
    assert_true(has(e[2].data, e[2].size, "'descr': '<i8'"));
    assert_true(has(e[3].data, e[3].size, "'descr': '<i4'"));
    assert_true(has(e[4].data, e[4].size, "'shape': ()"));
    const unsigned char *r = e[3].data + e[3].size - 4 * B;
    for (int b = 0; b < B; ++b) {
        const int32_t v = (int32_t)((uint32_t)r[4 * b] | (uint32_t)r[4 * b + 1] << 8 |
                                    (uint32_t)r[4 * b + 2] << 16 | (uint32_t)r[4 * b + 3] << 24);
        assert_int_equal(v, s->result[b]);
    }
}

static void test_splits_same_bytes(void **state)
{
    (void)state;
    sample s;
    sample_fill(&s);
    static const uint64_t cuts_a[] = {3}, cuts_b[] = {1, 2, 5, 6}, cuts_c[] = {4};
    const uint64_t thresholds[2] = {CLN_NPZ_ZIP64_THRESHOLD, 0};
    for (int z = 0; z < 2; ++z) {
        uint64_t s0, s1, s2, s3;
        unsigned char *a = sample_write(&s, thresholds[z], NULL, 0, &s0, NULL);
        unsigned char *b = sample_write(&s, thresholds[z], cuts_a, 1, &s1, NULL);
        unsigned char *c = sample_write(&s, thresholds[z], cuts_b, 4, &s2, NULL);
        unsigned char *d = sample_write(&s, thresholds[z], cuts_c, 1, &s3, NULL);
        assert_true(s0 == s1 && s0 == s2 && s0 == s3);
        assert_memory_equal(a, b, s0);
        assert_memory_equal(a, c, s0);
        assert_memory_equal(a, d, s0);
        check_read(a, s0, &s);
        free(a);
        free(b);
        free(c);
        free(d);
    }
}

static void test_zip64_records(void **state)
{
    (void)state;
    sample s;
    sample_fill(&s);
    uint64_t size;
    cln_npz_layout L;
    unsigned char *img = sample_write(&s, 0, NULL, 0, &size, &L);
    /* local header: sizes 0xFFFFFFFF, version 45, the ZIP64 extra field with the real sizes */
    const unsigned char *p = img + L.m[1].local_off;
    assert_int_equal(p[4], 45);
    assert_memory_equal(p + 18, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    assert_int_equal(p[28], 20);
    const unsigned char *x = p + 30 + 6;
    assert_true(x[0] == 1 && x[1] == 0 && x[2] == 16);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = v << 8 | x[4 + i];
    assert_int_equal(v, L.m[1].size);
    /* central directory: offset 0xFFFFFFFF too; the end records: ZIP64 record and locator */
    const unsigned char *c = img + L.cd_off;
    assert_memory_equal(c, "PK\x01\x02", 4);
    assert_memory_equal(c + 42, "\xff\xff\xff\xff", 4);
    assert_memory_equal(img + L.end_off, "PK\x06\x06", 4);
    assert_memory_equal(img + L.end_off + 56, "PK\x06\x07", 4);
    assert_memory_equal(img + size - 22, "PK\x05\x06", 4);
    check_read(img, size, &s);
    free(img);
}

static void expect_parse_fails(const unsigned char *img, size_t size, const char *needle)
{
    cln_npz_entry e[CLN_NPZ_MAX_MEMBERS];
    size_t n;
    char err[256] = "";
    assert_int_equal(cln_npz_parse(img, size, e, &n, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err, needle);
}

static void test_reader_refuses(void **state)
{
    (void)state;
    sample s;
    sample_fill(&s);
    uint64_t size;
    cln_npz_layout L;
    unsigned char *img = sample_write(&s, CLN_NPZ_ZIP64_THRESHOLD, NULL, 0, &size, &L);
    unsigned char *bad = malloc(size);
    /* a damaged data byte */
    memcpy(bad, img, size);
    bad[L.m[1].data_off + 3] ^= 1;
    expect_parse_fails(bad, size, "member ys.npy: CRC-32 mismatch");
    /* deflated (numpy.savez_compressed) */
    memcpy(bad, img, size);
    bad[L.cd_off + 10] = 8;
    expect_parse_fails(bad, size, "compressed (method 8; numpy.savez_compressed)");
    /* encrypted */
    memcpy(bad, img, size);
    bad[L.cd_off + 8] = 1;
    expect_parse_fails(bad, size, "encrypted");
    /* a name that is not NAME.npy, and a name twice */
    memcpy(bad, img, size);
    memcpy(bad + L.cd_off + 46 + 2, ".npz", 4); /* ts.npy -> ts.npz */
    expect_parse_fails(bad, size, "is not NAME.npy");
    /* a name length far beyond the buffer of names (read without overflowing it: ASan) */
    memcpy(bad, img, size);
    bad[L.cd_off + 28] = 0xff;
    bad[L.cd_off + 29] = 0xff;
    expect_parse_fails(bad, size, "a broken central directory entry");
    memcpy(bad, img, size);
    bad[L.cd_off + 28] = 200;
    bad[L.cd_off + 29] = 0;
    expect_parse_fails(bad, size, "a member name of 200 bytes");
    memcpy(bad, img, size);
    const uint64_t second = L.cd_off + (46 + 6) + 46; /* the second name: ys.npy -> ts.npy */
    bad[second] = 't';
    expect_parse_fails(bad, size, "appears twice");
    /* not a ZIP archive; a truncated one; a central directory past the end */
    expect_parse_fails((const unsigned char *)"\x93NUMPY\x01\x00", 8, "not a ZIP archive");
    for (uint64_t cut = 1; cut < size; cut += 97) {
        unsigned char *t = malloc(size - cut);
        memcpy(t, img, size - cut);
        expect_parse_fails(t, size - cut, "");
        free(t);
    }
    memcpy(bad, img, size);
    bad[size - 22 + 16] = 0xff;
    expect_parse_fails(bad, size, "outside the file");
    free(bad);
    free(img);
}

static void test_crc_and_write_refusals(void **state)
{
    (void)state;
    cln_npz_layout L;
    sample_layout(&L, CLN_NPZ_ZIP64_THRESHOLD);
    char err[256];
    uint32_t crcs[2] = {0, 0};
    assert_int_equal(cln_npz_member_crc(&L, 0, 1, (uint64_t[]){0, B - 1}, crcs, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "do not cover"));
    assert_int_equal(cln_npz_member_crc(&L, 0, 2, (uint64_t[]){0, B + 1, B}, crcs, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "out of order"));
    sample s;
    sample_fill(&s);
    mem_file f = {calloc(L.size, 1), L.size, calloc(L.size, sizeof(unsigned)), 0, 0};
    uint32_t crc;
    assert_int_equal(
        cln_npz_write_rows(&L, 0, 2, B + 1, s.ts, mem_pwrite, &f, &crc, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside its"));
    f.fail_at_call = 1;
    assert_int_equal(cln_npz_write_rows(&L, 0, 0, B, s.ts, mem_pwrite, &f, &crc, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "write failed"));
    free(f.buf);
    free(f.writes);
}

static int write_files(const char *dir)
{
    sample s;
    sample_fill(&s);
    const uint64_t thresholds[2] = {CLN_NPZ_ZIP64_THRESHOLD, 0};
    const char *names[2] = {"plain.npz", "zip64.npz"};
    static const uint64_t cuts[] = {2, 5};
    for (int z = 0; z < 2; ++z) {
        uint64_t size;
        unsigned char *img = sample_write(&s, thresholds[z], cuts, 2, &size, NULL);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[z]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(img, 1, size, f) != size || fclose(f) != 0) {
            fprintf(stderr, "test_npz: cannot write %s\n", path);
            return 1;
        }
        free(img);
    }
    return 0;
}

static int stream_read(const unsigned char *p, size_t size, size_t piece, int endless, char *err,
                       size_t *handed)
{
    mem_stream m = {p, size, 0, piece, 0, endless};
    unsigned char *img = NULL;
    size_t n = 0;
    const int r = cln_npz_read_stream(mem_read, &m, &img, &n, err, 256);
    if (r == 0) {
        assert_int_equal(n, size);
        assert_memory_equal(img, p, size);
    } else {
        assert_null(img);
    }
    free(img);
    *handed = m.handed;
    return r;
}

/* The stream reader takes the archive record by record, each size before its bytes: the archive
 * whole in any pieces (ZIP64 records too); bytes after its end (an endless stream of them)
 * refused after one more; an endless stream of zeros refused at its first record; an empty one
 * named empty, and an archive of no members too; every truncation refused. */
static void test_stream(void **state)
{
    (void)state;
    sample s;
    sample_fill(&s);
    char err[256];
    size_t handed;
    for (int z = 0; z < 2; ++z) {
        uint64_t size;
        unsigned char *img =
            sample_write(&s, z ? 0 : CLN_NPZ_ZIP64_THRESHOLD, NULL, 0, &size, NULL);
        static const size_t pieces[] = {1, 3, 64, 4096, 1 << 20};
        for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; ++i)
            assert_int_equal(stream_read(img, (size_t)size, pieces[i], 0, err, &handed), 0);
        assert_int_equal(stream_read(img, (size_t)size, 4096, 1, err, &handed), -1);
        assert_non_null(strstr(err, "bytes after the end of the archive"));
        assert_true(handed <= size + 4096);
        for (size_t n = 1; n < size; n += z ? 1 : 7) {
            assert_int_equal(stream_read(img, n, 4096, 0, err, &handed), -1);
            assert_true(handed <= n);
        }
        free(img);
    }
    unsigned char none[1] = {0};
    assert_int_equal(stream_read(none, 0, 4096, 1, err, &handed), -1);
    assert_non_null(strstr(err, "not a .npz file (not a ZIP archive)"));
    assert_true(handed <= 4096);
    assert_int_equal(stream_read(none, 0, 4096, 0, err, &handed), -1);
    assert_non_null(strstr(err, "an empty file (not a .npz archive)"));
    /* the whole-image parser says empty too */
    expect_parse_fails(none, 0, "an empty file (not a .npz archive)");
    /* an archive of no members (numpy.savez() of nothing: its end record alone) is a ZIP
       archive, said to be empty, by both readers */
    static const unsigned char end_only[22] = {'P', 'K', 5, 6};
    assert_int_equal(stream_read(end_only, sizeof end_only, 4096, 0, err, &handed), -1);
    assert_non_null(strstr(err, "an empty archive (no members"));
    expect_parse_fails(end_only, sizeof end_only, "an empty archive (no members");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write") == 0)
        return write_files(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_splits_same_bytes),
        cmocka_unit_test(test_zip64_records),
        cmocka_unit_test(test_reader_refuses),
        cmocka_unit_test(test_crc_and_write_refusals),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
