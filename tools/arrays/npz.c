/* npz.c - the .npz writer and reader of npz.h. ZIP format: PKWARE's APPNOTE.TXT 6.3.x (4.3.7
 * local file header, 4.3.12 central directory header, 4.3.14-16 ZIP64 end records, 4.5.3 the
 * ZIP64 extended information extra field). */
#include "npz.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static int npz_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int npz_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

enum {
    LOCAL_SIG = 0x04034b50,
    CENTRAL_SIG = 0x02014b50,
    END_SIG = 0x06054b50,
    END64_SIG = 0x06064b50,
    LOC64_SIG = 0x07064b50,
    LOCAL_FIXED = 30,
    CENTRAL_FIXED = 46,
    END_SIZE = 22,
    END64_SIZE = 56,
    LOC64_SIZE = 20,
    DOS_DATE = 0x0021, /* 1980-01-01 */
};

/* A ZIP archive that starts with its end record holds nothing (numpy.savez of no arrays). */
static const char NO_MEMBERS[] = "an empty archive (no members: numpy.savez of no arrays)";

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static size_t itemsize(cln_npz_dtype t)
{
    return t == CLN_NPZ_F4 || t == CLN_NPZ_I4 ? 4 : 8;
}

static const char *descr(cln_npz_dtype t)
{
    static const char *const d[] = {"<f4", "<f8", "<i4", "<i8"};
    return d[t];
}

/* ---- little-endian fields ---- */

static unsigned char *put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

static uint32_t get16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* zlib's crc32 takes uInt lengths */
static uint32_t crc_bytes(uint32_t crc, const unsigned char *p, uint64_t n)
{
    while (n) {
        const uInt k = n > 0x40000000u ? 0x40000000u : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

/* ---- layout ---- */

void cln_npz_init(cln_npz_layout *L, uint64_t zip64_threshold)
{
    memset(L, 0, sizeof *L);
    L->zip64_threshold = zip64_threshold;
}

int cln_npz_find(const cln_npz_layout *L, const char *name)
{
    for (size_t i = 0; i < L->n; ++i)
        if (strcmp(L->m[i].name, name) == 0)
            return (int)i;
    return -1;
}

int cln_npz_add(cln_npz_layout *L, const char *name, cln_npz_dtype dtype, size_t ndim,
                const uint64_t *shape, char *err, size_t errlen)
{
    const size_t len = strlen(name);
    if (L->planned)
        return npz_fail(err, errlen, "member %s added after the layout was planned", name);
    if (L->n == CLN_NPZ_MAX_MEMBERS)
        return npz_fail(err, errlen, "more than %d members", CLN_NPZ_MAX_MEMBERS);
    if (len == 0 || len >= CLN_NPZ_MAX_NAME)
        return npz_fail(err, errlen, "member name \"%s\" is empty or too long", name);
    for (size_t i = 0; i < len; ++i) {
        const char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (c == '.' && i > 0 && i + 1 < len && name[i - 1] != '.')))
            return npz_fail(err, errlen, "member name \"%s\" holds '%c'", name, c);
    }
    if (cln_npz_find(L, name) >= 0)
        return npz_fail(err, errlen, "member %s added twice", name);
    if ((unsigned)dtype > CLN_NPZ_I8 || ndim > CLN_NPZ_MAX_DIMS)
        return npz_fail(err, errlen, "member %s: bad dtype or more than %d dimensions", name,
                        CLN_NPZ_MAX_DIMS);
    cln_npz_member *m = &L->m[L->n];
    memset(m, 0, sizeof *m);
    memcpy(m->name, name, len + 1);
    m->dtype = dtype;
    m->ndim = ndim;
    for (size_t d = 0; d < ndim; ++d)
        m->shape[d] = shape[d];
    return (int)L->n++;
}

/* The npy header of member m (version 1.0, padded with spaces and a newline to a multiple of 64
 * bytes, as numpy.save writes it) into buf (at least 256 bytes). Returns its length. */
static size_t npy_header(const cln_npz_member *m, unsigned char *buf)
{
    char dict[200];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr(m->dtype));
    for (size_t d = 0; d < m->ndim; ++d)
        n += snprintf(dict + n, sizeof dict - (size_t)n, d ? ", %llu" : "%llu",
                      (unsigned long long)m->shape[d]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", m->ndim == 1 ? "," : "");
    const size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64, hlen = total - 10;
    memcpy(buf, npy_magic, sizeof npy_magic);
    buf[6] = 1;
    buf[7] = 0;
    put16(buf + 8, (unsigned)hlen);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', hlen - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

static uint64_t name_len(const cln_npz_member *m)
{
    return strlen(m->name) + 4; /* ".npy" */
}

static uint64_t local_len(const cln_npz_member *m)
{
    return LOCAL_FIXED + name_len(m) + (m->zip64_sizes ? 20 : 0);
}

static uint64_t central_extra(const cln_npz_member *m)
{
    const uint64_t k = (m->zip64_sizes ? 2 : 0) + (m->zip64_offset ? 1 : 0);
    return k ? 4 + 8 * k : 0;
}

static int add_ok(uint64_t *acc, uint64_t v)
{
    if (*acc > UINT64_MAX - v)
        return 0;
    *acc += v;
    return 1;
}

int cln_npz_plan(cln_npz_layout *L, char *err, size_t errlen)
{
    uint64_t off = 0, cd = 0;
    for (size_t i = 0; i < L->n; ++i) {
        cln_npz_member *m = &L->m[i];
        uint64_t row = itemsize(m->dtype);
        for (size_t d = 1; d < m->ndim; ++d) {
            if (m->shape[d] && row > UINT64_MAX / m->shape[d])
                return npz_fail(err, errlen, "member %s: its size overflows", m->name);
            row *= m->shape[d];
        }
        m->rows = m->ndim ? m->shape[0] : 1;
        m->row_bytes = row;
        if (m->rows && row > UINT64_MAX / 2 / m->rows)
            return npz_fail(err, errlen, "member %s: its size overflows", m->name);
        unsigned char hdr[256];
        m->npy_len = (uint32_t)npy_header(m, hdr);
        m->header_crc = crc_bytes((uint32_t)crc32(0, Z_NULL, 0), hdr, m->npy_len);
        m->size = m->npy_len + m->rows * row;
        m->zip64_sizes = m->size >= L->zip64_threshold;
        m->zip64_offset = off >= L->zip64_threshold;
        m->local_off = off;
        if (!add_ok(&off, local_len(m)))
            return npz_fail(err, errlen, "the archive's size overflows");
        m->npy_off = off;
        m->data_off = off + m->npy_len;
        if (!add_ok(&off, m->size) || !add_ok(&cd, CENTRAL_FIXED + name_len(m) + central_extra(m)))
            return npz_fail(err, errlen, "the archive's size overflows");
    }
    L->cd_off = off;
    L->cd_size = cd;
    if (!add_ok(&off, cd))
        return npz_fail(err, errlen, "the archive's size overflows");
    L->end_off = off;
    L->zip64_end = L->cd_off >= L->zip64_threshold || L->cd_size >= L->zip64_threshold ||
                   L->end_off >= L->zip64_threshold;
    L->size = off + (L->zip64_end ? END64_SIZE + LOC64_SIZE : 0) + END_SIZE;
    L->planned = 1;
    return 0;
}

/* ---- data ---- */

int cln_npz_pwrite_fd(void *user, const void *buf, size_t len, uint64_t offset)
{
    const int fd = *(const int *)user;
    const unsigned char *p = buf;
    while (len) {
        const ssize_t w = pwrite(fd, p, len, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
        offset += (uint64_t)w;
    }
    return 0;
}

int cln_npz_write_rows(const cln_npz_layout *L, size_t mi, uint64_t r0, uint64_t r1,
                       const void *values, cln_npz_pwrite_fn fn, void *user, uint32_t *crc,
                       char *err, size_t errlen)
{
    *crc = (uint32_t)crc32(0, Z_NULL, 0);
    if (!L->planned || mi >= L->n)
        return npz_fail(err, errlen, "no member %zu in a planned layout", mi);
    const cln_npz_member *m = &L->m[mi];
    if (r0 > r1 || r1 > m->rows)
        return npz_fail(err, errlen, "member %s: rows [%llu, %llu) outside its %llu rows", m->name,
                        (unsigned long long)r0, (unsigned long long)r1,
                        (unsigned long long)m->rows);
    const size_t isz = itemsize(m->dtype);
    const uint64_t total = (r1 - r0) * m->row_bytes / isz;
    if (total && (uint64_t)(size_t)total != total)
        return npz_fail(err, errlen, "member %s: rows too large for this machine", m->name);
    enum {
        CHUNK = 1 << 20
    };
    unsigned char *buf = total ? malloc(CHUNK) : NULL;
    if (total && !buf)
        return npz_fail(err, errlen, "out of memory");
    uint64_t off = m->data_off + r0 * m->row_bytes;
    const unsigned char *src = values;
    int rc = 0;
    for (uint64_t done = 0; done < total;) {
        const uint64_t k = total - done < CHUNK / 8 ? total - done : CHUNK / 8;
        unsigned char *p = buf;
        for (uint64_t i = 0; i < k; ++i, src += isz) {
            if (isz == 4) {
                uint32_t u;
                memcpy(&u, src, 4);
                p = put32(p, u);
            } else {
                uint64_t u;
                memcpy(&u, src, 8);
                p = put64(p, u);
            }
        }
        const size_t n = (size_t)(p - buf);
        *crc = crc_bytes(*crc, buf, n);
        if (fn(user, buf, n, off) != 0) {
            rc = npz_fail(err, errlen, "member %s: write failed at byte %llu: %s", m->name,
                          (unsigned long long)off, strerror(errno));
            break;
        }
        off += n;
        done += k;
    }
    free(buf);
    return rc;
}

int cln_npz_member_crc(cln_npz_layout *L, size_t mi, size_t n, const uint64_t *bounds,
                       const uint32_t *crcs, char *err, size_t errlen)
{
    if (!L->planned || mi >= L->n)
        return npz_fail(err, errlen, "no member %zu in a planned layout", mi);
    cln_npz_member *m = &L->m[mi];
    if (n == 0 && m->rows == 0) {
        m->crc = m->header_crc;
        return 0;
    }
    if (n == 0 || bounds[0] != 0 || bounds[n] != m->rows)
        return npz_fail(err, errlen, "member %s: row ranges do not cover rows [0, %llu)", m->name,
                        (unsigned long long)m->rows);
    uint32_t crc = m->header_crc;
    for (size_t i = 0; i < n; ++i) {
        if (bounds[i + 1] < bounds[i])
            return npz_fail(err, errlen, "member %s: row ranges out of order", m->name);
        /* crc32_combine takes a z_off_t length (64 bits on LP64 and with large-file support) */
        const uint64_t len = (bounds[i + 1] - bounds[i]) * m->row_bytes;
        if ((uint64_t)(z_off_t)len != len || (z_off_t)len < 0)
            return npz_fail(err, errlen, "member %s: a row range too large for zlib's offsets",
                            m->name);
        crc = (uint32_t)crc32_combine(crc, crcs[i], (z_off_t)len);
    }
    m->crc = crc;
    return 0;
}

int cln_npz_write_npy_header(const cln_npz_layout *L, size_t mi, cln_npz_pwrite_fn fn, void *user,
                             char *err, size_t errlen)
{
    if (!L->planned || mi >= L->n)
        return npz_fail(err, errlen, "no member %zu in a planned layout", mi);
    unsigned char buf[256];
    const size_t n = npy_header(&L->m[mi], buf);
    if (fn(user, buf, n, L->m[mi].npy_off) != 0)
        return npz_fail(err, errlen, "cannot write the npy header: %s", strerror(errno));
    return 0;
}

/* The local file header and npy header of each member, at its offset. */
static int write_locals(const cln_npz_layout *L, cln_npz_pwrite_fn fn, void *user, char *err,
                        size_t errlen)
{
    unsigned char buf[512];
    for (size_t i = 0; i < L->n; ++i) {
        const cln_npz_member *m = &L->m[i];
        const uint32_t nl = (uint32_t)name_len(m);
        unsigned char *p = put32(buf, LOCAL_SIG);
        p = put16(p, m->zip64_sizes ? 45 : 20); /* version needed to extract */
        p = put16(p, 0);                        /* flags */
        p = put16(p, 0);                        /* stored */
        p = put16(p, 0);                        /* time 00:00 */
        p = put16(p, DOS_DATE);
        p = put32(p, m->crc);
        p = put32(p, m->zip64_sizes ? 0xFFFFFFFFu : (uint32_t)m->size);
        p = put32(p, m->zip64_sizes ? 0xFFFFFFFFu : (uint32_t)m->size);
        p = put16(p, nl);
        p = put16(p, m->zip64_sizes ? 20 : 0);
        memcpy(p, m->name, nl - 4);
        memcpy(p + nl - 4, ".npy", 4);
        p += nl;
        if (m->zip64_sizes) {
            p = put16(p, 1);
            p = put16(p, 16);
            p = put64(p, m->size);
            p = put64(p, m->size);
        }
        p += npy_header(m, p);
        if (fn(user, buf, (size_t)(p - buf), m->local_off) != 0)
            return npz_fail(err, errlen, "cannot write the header of member %s: %s", m->name,
                            strerror(errno));
    }
    return 0;
}

/* The central directory: one entry per member, ZIP64 extra fields where planned. */
static int write_central(const cln_npz_layout *L, cln_npz_pwrite_fn fn, void *user, char *err,
                         size_t errlen)
{
    unsigned char buf[512];
    uint64_t off = L->cd_off;
    for (size_t i = 0; i < L->n; ++i) {
        const cln_npz_member *m = &L->m[i];
        const uint32_t nl = (uint32_t)name_len(m);
        const int z = m->zip64_sizes || m->zip64_offset;
        unsigned char *p = put32(buf, CENTRAL_SIG);
        p = put16(p, z ? 45 : 20); /* version made by (MS-DOS attributes) */
        p = put16(p, z ? 45 : 20); /* version needed to extract */
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, DOS_DATE);
        p = put32(p, m->crc);
        p = put32(p, m->zip64_sizes ? 0xFFFFFFFFu : (uint32_t)m->size);
        p = put32(p, m->zip64_sizes ? 0xFFFFFFFFu : (uint32_t)m->size);
        p = put16(p, nl);
        p = put16(p, (unsigned)central_extra(m));
        p = put16(p, 0); /* comment */
        p = put16(p, 0); /* disk */
        p = put16(p, 0); /* internal attributes */
        p = put32(p, 0); /* external attributes */
        p = put32(p, m->zip64_offset ? 0xFFFFFFFFu : (uint32_t)m->local_off);
        memcpy(p, m->name, nl - 4);
        memcpy(p + nl - 4, ".npy", 4);
        p += nl;
        if (central_extra(m)) {
            p = put16(p, 1);
            p = put16(p, (unsigned)central_extra(m) - 4);
            if (m->zip64_sizes) {
                p = put64(p, m->size);
                p = put64(p, m->size);
            }
            if (m->zip64_offset)
                p = put64(p, m->local_off);
        }
        const size_t n = (size_t)(p - buf);
        if (fn(user, buf, n, off) != 0)
            return npz_fail(err, errlen, "cannot write the central directory: %s", strerror(errno));
        off += n;
    }
    return 0;
}

/* The ZIP64 end record and locator (when planned) and the end of central directory record. */
static int write_end(const cln_npz_layout *L, cln_npz_pwrite_fn fn, void *user, char *err,
                     size_t errlen)
{
    unsigned char buf[128];
    unsigned char *p = buf;
    if (L->zip64_end) {
        p = put32(p, END64_SIG);
        p = put64(p, END64_SIZE - 12);
        p = put16(p, 45);
        p = put16(p, 45);
        p = put32(p, 0); /* this disk */
        p = put32(p, 0); /* the disk of the central directory */
        p = put64(p, L->n);
        p = put64(p, L->n);
        p = put64(p, L->cd_size);
        p = put64(p, L->cd_off);
        p = put32(p, LOC64_SIG);
        p = put32(p, 0);
        p = put64(p, L->end_off); /* the ZIP64 end record */
        p = put32(p, 1);          /* disks */
    }
    p = put32(p, END_SIG);
    p = put16(p, 0);
    p = put16(p, 0);
    p = put16(p, (unsigned)L->n);
    p = put16(p, (unsigned)L->n);
    p = put32(p, L->zip64_end ? 0xFFFFFFFFu : (uint32_t)L->cd_size);
    p = put32(p, L->zip64_end ? 0xFFFFFFFFu : (uint32_t)L->cd_off);
    p = put16(p, 0); /* comment */
    if (fn(user, buf, (size_t)(p - buf), L->end_off) != 0)
        return npz_fail(err, errlen, "cannot write the end of the archive: %s", strerror(errno));
    return 0;
}

int cln_npz_finish(const cln_npz_layout *L, cln_npz_pwrite_fn fn, void *user, char *err,
                   size_t errlen)
{
    if (!L->planned)
        return npz_fail(err, errlen, "the layout is not planned");
    if (write_locals(L, fn, user, err, errlen) != 0 || write_central(L, fn, user, err, errlen) != 0)
        return -1;
    return write_end(L, fn, user, err, errlen);
}

/* ---- reading ---- */

/* The ZIP64 extra field of a central header: replaces the fields that hold 0xFFFFFFFF, in the
 * order uncompressed size, compressed size, local header offset. */
static int zip64_extra(const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize,
                       uint64_t *loff)
{
    while (xlen >= 4) {
        const uint32_t id = get16(x), len = get16(x + 2);
        if (len > xlen - 4)
            return -1;
        if (id == 1) {
            const unsigned char *q = x + 4, *e = x + 4 + len;
            uint64_t *f[3] = {usize, csize, loff};
            for (int k = 0; k < 3; ++k) {
                if (*f[k] != 0xFFFFFFFFu)
                    continue;
                if (e - q < 8)
                    return -1;
                *f[k] = get64(q);
                q += 8;
            }
            return 0;
        }
        x += 4 + len;
        xlen -= 4 + len;
    }
    return *usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *loff == 0xFFFFFFFFu ? -1 : 0;
}

int cln_npz_parse(const unsigned char *buf, size_t size, cln_npz_entry *entries, size_t *n,
                  char *err, size_t errlen)
{
    *n = 0;
    if (size == 0)
        return npz_fail(err, errlen, "an empty file (not a .npz archive)");
    if (size >= 4 && get32(buf) == END_SIG)
        return npz_fail(err, errlen, "%s", NO_MEMBERS);
    if (size < END_SIZE || get32(buf) != LOCAL_SIG)
        return npz_fail(err, errlen, "not a .npz file (not a ZIP archive)");
    /* the end of central directory record: the last signature that ends the file with its
     * comment */
    size_t e = size - END_SIZE;
    for (;;) {
        if (get32(buf + e) == END_SIG && e + END_SIZE + get16(buf + e + 20) == size)
            break;
        if (e == 0 || size - e > 65535 + END_SIZE)
            return npz_fail(err, errlen, "not a .npz file (no end of central directory)");
        --e;
    }
    if (get16(buf + e + 4) != 0 || get16(buf + e + 6) != 0)
        return npz_fail(err, errlen, "a split (multi-disk) archive");
    uint64_t count = get16(buf + e + 10), cd_size = get32(buf + e + 12),
             cd_off = get32(buf + e + 16);
    if (e >= LOC64_SIZE && get32(buf + e - LOC64_SIZE) == LOC64_SIG) {
        const uint64_t z = get64(buf + e - LOC64_SIZE + 8);
        if (size < END64_SIZE || z > size - END64_SIZE || get32(buf + z) != END64_SIG)
            return npz_fail(err, errlen, "a broken ZIP64 end record");
        count = get64(buf + z + 32);
        cd_size = get64(buf + z + 40);
        cd_off = get64(buf + z + 48);
    }
    if (cd_off > size || cd_size > size - cd_off)
        return npz_fail(err, errlen, "the central directory lies outside the file");
    if (count > CLN_NPZ_MAX_MEMBERS)
        return npz_fail(err, errlen, "%llu members (at most %d)", (unsigned long long)count,
                        CLN_NPZ_MAX_MEMBERS);
    const unsigned char *p = buf + cd_off, *end = buf + cd_off + cd_size;
    for (uint64_t i = 0; i < count; ++i) {
        if (end - p < CENTRAL_FIXED || get32(p) != CENTRAL_SIG)
            return npz_fail(err, errlen, "a broken central directory entry");
        const uint32_t flags = get16(p + 8), method = get16(p + 10), crc = get32(p + 16);
        uint64_t csize = get32(p + 20), usize = get32(p + 24);
        const size_t nl = get16(p + 28), xl = get16(p + 30), cl = get16(p + 32);
        uint64_t loff = get32(p + 42);
        if ((size_t)(end - p) < CENTRAL_FIXED + nl + xl + cl)
            return npz_fail(err, errlen, "a broken central directory entry");
        char name[CLN_NPZ_MAX_NAME + 8];
        if (nl < 5 || nl - 4 >= CLN_NPZ_MAX_NAME)
            return npz_fail(err, errlen,
                            "a member name of %zu bytes (NAME.npy, NAME of 1 to %d characters)", nl,
                            CLN_NPZ_MAX_NAME - 1);
        memcpy(name, p + CENTRAL_FIXED, nl);
        name[nl] = '\0';
        if (memchr(name, '\0', nl))
            return npz_fail(err, errlen, "a member name holds a NUL byte");
        if (zip64_extra(p + CENTRAL_FIXED + nl, xl, &usize, &csize, &loff))
            return npz_fail(err, errlen, "member %s: a broken ZIP64 extra field", name);
        if (flags & 1)
            return npz_fail(err, errlen, "member %s is encrypted", name);
        if (method != 0)
            return npz_fail(err, errlen,
                            "member %s is compressed (method %u; numpy.savez_compressed): "
                            "save it with numpy.savez",
                            name, (unsigned)method);
        if (csize != usize)
            return npz_fail(err, errlen, "member %s: stored, but its sizes differ", name);
        if (nl < 5 || nl - 4 >= CLN_NPZ_MAX_NAME || strcmp(name + nl - 4, ".npy") != 0)
            return npz_fail(err, errlen,
                            "member \"%s\" is not NAME.npy (NAME of at most %d "
                            "characters)",
                            name, CLN_NPZ_MAX_NAME - 1);
        name[nl - 4] = '\0';
        for (size_t k = 0; k < *n; ++k)
            if (strcmp(entries[k].name, name) == 0)
                return npz_fail(err, errlen, "member %s.npy appears twice", name);
        if (loff > size || size - loff < LOCAL_FIXED || get32(buf + loff) != LOCAL_SIG)
            return npz_fail(err, errlen, "member %s.npy: its local header lies outside the file",
                            name);
        const uint64_t data = loff + LOCAL_FIXED + get16(buf + loff + 26) + get16(buf + loff + 28);
        if (data > size || csize > size - data)
            return npz_fail(err, errlen, "member %s.npy: its data run past the end of the file",
                            name);
        if (crc_bytes((uint32_t)crc32(0, Z_NULL, 0), buf + data, csize) != crc)
            return npz_fail(err, errlen, "member %s.npy: CRC-32 mismatch (a damaged file)", name);
        cln_npz_entry *en = &entries[(*n)++];
        memcpy(en->name, name, nl - 3);
        en->data = buf + data;
        en->size = csize;
        p += CENTRAL_FIXED + nl + xl + cl;
    }
    return 0;
}

/* ---- reading a stream ---- */

typedef struct zin {
    cln_npz_read_fn fn;
    void *user;
    unsigned char *buf;
    size_t n, cap;
    char *err;
    size_t errlen;
} zin;

/* Appends exactly k bytes from the stream. Returns 0, 1 when the stream ends first (no message),
 * or -1 with a message (a read error, out of memory, sizes past this machine's). Memory grows by
 * doubling with the bytes that arrive. */
static int zin_need(zin *z, uint64_t k)
{
    if (k > SIZE_MAX - z->n)
        return npz_fail(z->err, z->errlen, "sizes too large for this machine");
    const size_t end = z->n + (size_t)k;
    while (z->n < end) {
        if (z->n == z->cap) {
            const size_t grow = z->cap ? 2 * z->cap : 4096;
            const size_t ncap = grow > z->cap && grow < end ? grow : end;
            unsigned char *nb = realloc(z->buf, ncap);
            if (!nb)
                return npz_fail(z->err, z->errlen, "out of memory for %zu bytes", ncap);
            z->buf = nb;
            z->cap = ncap;
        }
        const size_t room = (z->cap < end ? z->cap : end) - z->n;
        const long long got = z->fn(z->user, z->buf + z->n, room);
        if (got < 0)
            return npz_fail(z->err, z->errlen, "read error: %s", strerror(errno));
        if (got == 0)
            return 1;
        z->n += (size_t)got;
    }
    return 0;
}

/* The next record's signature: 0 at the end of the stream, -1 after an error. */
static int64_t zin_sig(zin *z)
{
    const int r = zin_need(z, 4);
    return r < 0 ? -1 : r > 0 ? 0 : (int64_t)get32(z->buf + z->n - 4);
}

/* The local headers and member data, up to the first record that is not a local header (its
 * signature in *sig). Returns 0 or -1 with a message. */
static int zin_members(zin *z, int64_t *sig)
{
    for (size_t members = 0; *sig == LOCAL_SIG; ++members) {
        if (members == CLN_NPZ_MAX_MEMBERS)
            return npz_fail(z->err, z->errlen, "more than %d members", CLN_NPZ_MAX_MEMBERS);
        const size_t at = z->n - 4;
        int r = zin_need(z, LOCAL_FIXED - 4);
        const unsigned char *h = z->buf + at;
        const size_t nl = r ? 0 : get16(h + 26), xl = r ? 0 : get16(h + 28);
        if (r == 0)
            r = zin_need(z, nl + xl);
        if (r)
            return r < 0 ? -1
                         : npz_fail(z->err, z->errlen,
                                    "the file ends inside the local header at byte %zu", at);
        h = z->buf + at;
        const uint32_t flags = get16(h + 6);
        uint64_t csize = get32(h + 18), usize = get32(h + 22), loff = 0;
        if (flags & 8)
            return npz_fail(z->err, z->errlen,
                            "member %.*s: its sizes follow its data (a ZIP written to a stream), "
                            "which a stream cannot be read by: give the archive as a file",
                            (int)nl, (const char *)h + LOCAL_FIXED);
        if (zip64_extra(h + LOCAL_FIXED + nl, xl, &usize, &csize, &loff))
            return npz_fail(z->err, z->errlen, "member %.*s: a broken ZIP64 extra field", (int)nl,
                            (const char *)h + LOCAL_FIXED);
        if ((r = zin_need(z, csize)) != 0)
            return r < 0 ? -1
                         : npz_fail(z->err, z->errlen,
                                    "member %.*s: the file ends inside its %llu bytes of data",
                                    (int)nl, (const char *)z->buf + at + LOCAL_FIXED,
                                    (unsigned long long)csize);
        if ((*sig = zin_sig(z)) < 0)
            return -1;
    }
    return 0;
}

/* The central directory and the end records, from the record whose signature is *sig. Returns
 * 0 or -1 with a message. */
static int zin_directory(zin *z, int64_t sig)
{
    const char *ends = "the file ends inside the central directory";
    int r = 0;
    for (size_t k = 0; sig == CENTRAL_SIG && r == 0; ++k) {
        if (k == CLN_NPZ_MAX_MEMBERS)
            return npz_fail(z->err, z->errlen, "more than %d members", CLN_NPZ_MAX_MEMBERS);
        const size_t at = z->n - 4;
        if ((r = zin_need(z, CENTRAL_FIXED - 4)) == 0)
            r = zin_need(z, (uint64_t)get16(z->buf + at + 28) + get16(z->buf + at + 30) +
                                get16(z->buf + at + 32));
        if (r == 0 && (sig = zin_sig(z)) <= 0)
            r = sig < 0 ? -1 : 1;
    }
    if (r == 0 && sig == END64_SIG) {
        const size_t at = z->n - 4;
        if ((r = zin_need(z, 8)) == 0) {
            const uint64_t len = get64(z->buf + at + 4);
            if (len < END64_SIZE - 12 || len > 65536)
                return npz_fail(z->err, z->errlen, "a broken ZIP64 end record");
            r = zin_need(z, len);
        }
        if (r == 0 && (sig = zin_sig(z)) == LOC64_SIG && (r = zin_need(z, LOC64_SIZE - 4)) == 0)
            sig = zin_sig(z);
        if (r == 0 && sig <= 0)
            r = sig < 0 ? -1 : 1;
    }
    if (r == 0 && sig != END_SIG)
        return npz_fail(z->err, z->errlen,
                        "not a .npz file (a record of signature 0x%08llx at byte %zu where the "
                        "end of the central directory belongs)",
                        (unsigned long long)sig, z->n - 4);
    if (r == 0 && (r = zin_need(z, END_SIZE - 4)) == 0)
        r = zin_need(z, get16(z->buf + z->n - 2));
    return r < 0 ? -1 : r > 0 ? npz_fail(z->err, z->errlen, "%s", ends) : 0;
}

int cln_npz_read_stream(cln_npz_read_fn fn, void *user, unsigned char **img, size_t *size,
                        char *err, size_t errlen)
{
    zin z = {fn, user, NULL, 0, 0, err, errlen};
    *img = NULL;
    *size = 0;
    int64_t sig = zin_sig(&z);
    int rc = -1;
    if (sig == 0 && z.n == 0)
        npz_fail(err, errlen, "an empty file (not a .npz archive)");
    else if (sig == END_SIG)
        npz_fail(err, errlen, "%s", NO_MEMBERS);
    else if (sig == 0 || (sig > 0 && sig != LOCAL_SIG))
        npz_fail(err, errlen, "not a .npz file (not a ZIP archive)");
    else if (sig > 0 && zin_members(&z, &sig) == 0) {
        if (sig == 0)
            npz_fail(err, errlen, "the file ends after the members (no central directory)");
        else if (sig > 0 && sig != CENTRAL_SIG)
            npz_fail(err, errlen,
                     "not a .npz file (a record of signature 0x%08llx at byte %zu where a member "
                     "or the central directory belongs)",
                     (unsigned long long)sig, z.n - 4);
        else if (sig > 0 && zin_directory(&z, sig) == 0) {
            unsigned char extra;
            const long long more = fn(user, &extra, 1);
            if (more < 0)
                npz_fail(err, errlen, "read error: %s", strerror(errno));
            else if (more > 0)
                npz_fail(err, errlen, "bytes after the end of the archive (%zu bytes)", z.n);
            else
                rc = 0;
        }
    }
    if (rc) {
        free(z.buf);
        return -1;
    }
    *img = z.buf;
    *size = z.n;
    return 0;
}
