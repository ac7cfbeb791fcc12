/* npy.c - the .npy reader and writer of npy.h. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_temp.h"

static int npy_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- the header dictionary, a Python literal ---- */

typedef struct npy_scan {
    const char *p, *end;
} npy_scan;

static void npy_ws(npy_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t'))
        ++s->p;
}

static int npy_eat(npy_scan *s, char c)
{
    npy_ws(s);
    if (s->p < s->end && *s->p == c) {
        ++s->p;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...", no escapes) into dst (at most cap - 1 characters). */
static int npy_string(npy_scan *s, char *dst, size_t cap)
{
    npy_ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return 0;
    const char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= cap)
            return 0;
        dst[n++] = *s->p++;
    }
    if (s->p >= s->end)
        return 0;
    ++s->p;
    dst[n] = '\0';
    return 1;
}

/* A non-negative decimal integer that fits size_t. */
static int npy_size(npy_scan *s, size_t *out)
{
    npy_ws(s);
    size_t v = 0;
    const char *start = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        const size_t d = (size_t)(*s->p - '0');
        if (v > (SIZE_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
        ++s->p;
    }
    if (s->p == start)
        return 0;
    *out = v;
    return 1;
}

/* (), (n,), (n, m), (n, m,) */
static int npy_shape(npy_scan *s, cln_npy_header *h, char *err, size_t errlen)
{
    if (!npy_eat(s, '('))
        return npy_fail(err, errlen, "'shape' is not a tuple");
    h->ndim = 0;
    if (npy_eat(s, ')'))
        return 0;
    for (;;) {
        size_t v;
        if (!npy_size(s, &v))
            return npy_fail(err, errlen, "'shape' holds something that is not a size");
        if (h->ndim == CLN_NPY_MAX_DIMS)
            return npy_fail(err, errlen, "'shape' has more than %d dimensions", CLN_NPY_MAX_DIMS);
        h->shape[h->ndim++] = v;
        const int comma = npy_eat(s, ',');
        if (npy_eat(s, ')')) {
            if (h->ndim == 1 && !comma)
                return npy_fail(err, errlen, "'shape' (n) is not a tuple: (n,) expected");
            return 0;
        }
        if (!comma)
            return npy_fail(err, errlen, "'shape' is not a tuple of sizes");
    }
}

static int npy_dict(npy_scan *s, cln_npy_header *h, char *err, size_t errlen)
{
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    if (!npy_eat(s, '{'))
        return npy_fail(err, errlen, "the header is not a dictionary");
    for (;;) {
        if (npy_eat(s, '}'))
            break;
        char key[32], val[32];
        if (!npy_string(s, key, sizeof key))
            return npy_fail(err, errlen, "the header dictionary has a key that is not a string");
        if (!npy_eat(s, ':'))
            return npy_fail(err, errlen, "no ':' after the key '%s'", key);
        if (strcmp(key, "descr") == 0) {
            if (seen_descr++)
                return npy_fail(err, errlen, "the key 'descr' appears twice");
            if (!npy_string(s, val, sizeof val))
                return npy_fail(err, errlen, "'descr' is not a dtype string");
            if (strcmp(val, "<f8") == 0)
                h->itemsize = 8;
            else if (strcmp(val, "<f4") == 0)
                h->itemsize = 4;
            else if (strcmp(val, ">f8") == 0 || strcmp(val, ">f4") == 0)
                return npy_fail(err, errlen,
                                "dtype '%s' is big-endian (little-endian '<f4' or '<f8' expected)",
                                val);
            else
                return npy_fail(err, errlen,
                                "dtype '%s' is not supported (little-endian '<f4' or '<f8')", val);
        } else if (strcmp(key, "fortran_order") == 0) {
            if (seen_order++)
                return npy_fail(err, errlen, "the key 'fortran_order' appears twice");
            npy_ws(s);
            if ((size_t)(s->end - s->p) >= 5 && memcmp(s->p, "False", 5) == 0)
                s->p += 5;
            else if ((size_t)(s->end - s->p) >= 4 && memcmp(s->p, "True", 4) == 0)
                return npy_fail(err, errlen,
                                "the array is in Fortran order (C order expected: "
                                "numpy.ascontiguousarray before numpy.save)");
            else
                return npy_fail(err, errlen, "'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0) {
            if (seen_shape++)
                return npy_fail(err, errlen, "the key 'shape' appears twice");
            if (npy_shape(s, h, err, errlen))
                return -1;
        } else {
            return npy_fail(err, errlen, "unknown key '%s' in the header", key);
        }
        if (npy_eat(s, '}'))
            break;
        if (!npy_eat(s, ','))
            return npy_fail(err, errlen, "the header dictionary lacks a ',' after '%s'", key);
    }
    if (!seen_descr || !seen_order || !seen_shape)
        return npy_fail(err, errlen, "the header lacks the key '%s'",
                        !seen_descr   ? "descr"
                        : !seen_order ? "fortran_order"
                                      : "shape");
    npy_ws(s);
    if (s->p != s->end)
        return npy_fail(err, errlen, "characters after the header dictionary");
    return 0;
}

/* Bytes of the preamble (magic, version, header length) of format `major`. */
static size_t npy_pre(unsigned major)
{
    return major == 1 ? 10 : 12;
}

/* The preamble of an image whose first `size` bytes are buf: checks the magic and version and
 * sets *total to the bytes up to the end of the header. Returns 0, 1 when buf is too short to
 * tell (fewer than 12 bytes for a version 2.0 or 3.0 file), or -1 with a message. */
static int npy_preamble(const unsigned char *buf, size_t size, size_t *total, char *err,
                        size_t errlen)
{
    if (size == 0)
        return npy_fail(err, errlen, "an empty file (not a .npy file)");
    if (memcmp(buf, npy_magic, size < sizeof npy_magic ? size : sizeof npy_magic) != 0)
        return npy_fail(err, errlen, "not a .npy file (no \\x93NUMPY magic)");
    if (size < 8)
        return 1;
    const unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return npy_fail(err, errlen, "unsupported .npy format version %u.%u (1.0, 2.0, 3.0)", major,
                        minor);
    const size_t pre = npy_pre(major);
    if (size < pre)
        return 1;
    size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    if (major > 1)
        hlen |= (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    *total = pre + hlen;
    return 0;
}

int cln_npy_parse_header(const unsigned char *buf, size_t size, cln_npy_header *h, char *err,
                         size_t errlen)
{
    memset(h, 0, sizeof *h);
    size_t total = 0;
    const int r = npy_preamble(buf, size, &total, err, errlen);
    if (r < 0)
        return -1;
    if (r > 0 || size < 10)
        return npy_fail(err, errlen, "the file ends inside the .npy preamble (%zu bytes)", size);
    const size_t pre = npy_pre(buf[6]), hlen = total - pre;
    if (hlen > size - pre)
        return npy_fail(err, errlen,
                        "the header length %zu runs past the end of the file (%zu bytes)", hlen,
                        size);
    if (hlen == 0 || buf[pre + hlen - 1] != '\n')
        return npy_fail(err, errlen, "the header does not end with a newline");
    for (size_t i = pre; i < pre + hlen - 1; ++i)
        if (buf[i] < 0x20 || buf[i] > 0x7e)
            return npy_fail(err, errlen, "the header holds a byte 0x%02x that is not printable",
                            buf[i]);
    npy_scan s = {(const char *)buf + pre, (const char *)buf + pre + hlen - 1};
    if (npy_dict(&s, h, err, errlen))
        return -1;
    size_t count = 1;
    for (size_t d = 0; d < h->ndim; ++d) {
        if (h->shape[d] != 0 && count > SIZE_MAX / h->shape[d])
            return npy_fail(err, errlen, "the shape's size overflows");
        count *= h->shape[d];
    }
    if (count > SIZE_MAX / (size_t)h->itemsize)
        return npy_fail(err, errlen, "the shape's size overflows");
    h->count = count;
    h->data_off = pre + hlen;
    return 0;
}

int cln_npy_parse(const unsigned char *buf, size_t size, cln_npy_header *h, char *err,
                  size_t errlen)
{
    if (cln_npy_parse_header(buf, size, h, err, errlen))
        return -1;
    const size_t have = size - h->data_off, want = h->count * (size_t)h->itemsize;
    if (have != want)
        return npy_fail(err, errlen,
                        "%zu bytes of data, but the shape needs %zu (%zu values of %d "
                        "bytes)",
                        have, want, h->count, h->itemsize);
    return 0;
}

/* Appends up to n bytes from fn to the image (*buf, *size, capacity *cap), growing it by
 * doubling (never past `limit` bytes in all). Returns the bytes appended (fewer at the end of
 * the stream), or -1 (a read error: message in err; out of memory). */
static long long npy_fill(cln_npy_read_fn fn, void *user, unsigned char **buf, size_t *size,
                          size_t *cap, size_t n, char *err, size_t errlen)
{
    size_t got = 0;
    while (got < n) {
        if (*size == *cap) {
            const size_t want = *size + (n - got), grow = *cap ? 2 * *cap : 4096;
            const size_t ncap = grow > *cap && grow < want ? grow : want;
            unsigned char *nb = realloc(*buf, ncap);
            if (!nb)
                return npy_fail(err, errlen, "out of memory for %zu bytes", ncap);
            *buf = nb;
            *cap = ncap;
        }
        const size_t room = *cap - *size < n - got ? *cap - *size : n - got;
        const long long k = fn(user, *buf + *size, room);
        if (k < 0)
            return npy_fail(err, errlen, "read error: %s", strerror(errno));
        if (k == 0)
            break;
        *size += (size_t)k;
        got += (size_t)k;
    }
    return (long long)got;
}

int cln_npy_read_stream(cln_npy_read_fn fn, void *user, size_t max_rows, cln_npy_check_fn check,
                        void *check_user, unsigned char **img, size_t *size, cln_npy_header *h,
                        char *err, size_t errlen)
{
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0, total = 0;
    *img = NULL;
    *size = 0;
    memset(h, 0, sizeof *h);
    /* the preamble: 10 bytes, 12 for versions 2.0 and 3.0 */
    int r = 1;
    for (size_t want = 10; r > 0 && want <= 12; want += 2) {
        if (npy_fill(fn, user, &buf, &n, &cap, want - n, err, errlen) < 0)
            goto fail;
        r = npy_preamble(buf, n, &total, err, errlen);
        if (r > 0 && n < want) {
            npy_fail(err, errlen, "the file ends inside the .npy preamble (%zu bytes)", n);
            goto fail;
        }
    }
    if (r < 0)
        goto fail;
    /* the header, then exactly the data it declares */
    if (npy_fill(fn, user, &buf, &n, &cap, total - n, err, errlen) < 0 ||
        cln_npy_parse_header(buf, n, h, err, errlen) != 0)
        goto fail;
    if (h->ndim > 0 && h->shape[0] > max_rows) {
        npy_fail(err, errlen, "%zu rows, more than %zu (the batch limit)", h->shape[0], max_rows);
        goto fail;
    }
    if (check && check(check_user, h, err, errlen) != 0)
        goto fail;
    const size_t data = h->count * (size_t)h->itemsize;
    if (data > SIZE_MAX - n) {
        npy_fail(err, errlen, "the shape's size overflows");
        goto fail;
    }
    const long long got = npy_fill(fn, user, &buf, &n, &cap, data, err, errlen);
    if (got < 0)
        goto fail;
    if ((size_t)got < data) {
        npy_fail(err, errlen,
                 "%lld bytes of data, but the shape needs %zu (%zu values of %d bytes)", got, data,
                 h->count, h->itemsize);
        goto fail;
    }
    unsigned char extra;
    const long long more = fn(user, &extra, 1);
    if (more != 0) {
        if (more < 0)
            npy_fail(err, errlen, "read error: %s", strerror(errno));
        else
            npy_fail(err, errlen,
                     "more bytes than the %zu of data the shape needs (%zu values of %d bytes)",
                     data, h->count, h->itemsize);
        goto fail;
    }
    *img = buf;
    *size = n;
    return 0;
fail:
    free(buf);
    memset(h, 0, sizeof *h);
    return -1;
}

static long long npy_fread(void *user, void *buf, size_t n)
{
    FILE *f = user;
    const size_t k = fread(buf, 1, n, f);
    return k == 0 && ferror(f) ? -1 : (long long)k;
}

void cln_npy_decode(const unsigned char *buf, const cln_npy_header *h, double *out)
{
    const unsigned char *p = buf + h->data_off;
    for (size_t i = 0; i < h->count; ++i) {
        if (h->itemsize == 8) {
            uint64_t u = 0;
            for (int b = 7; b >= 0; --b)
                u = u << 8 | p[8 * i + (size_t)b];
            memcpy(&out[i], &u, sizeof u);
        } else {
            uint32_t u = 0;
            for (int b = 3; b >= 0; --b)
                u = u << 8 | p[4 * i + (size_t)b];
            float f;
            memcpy(&f, &u, sizeof f);
            out[i] = f;
        }
    }
}

int cln_npy_read(const char *path, cln_npy_header *h, double **data, char *err, size_t errlen)
{
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return npy_fail(err, errlen, "%s: %s", path, strerror(errno));
    unsigned char *buf = NULL;
    size_t size = 0;
    char why[256];
    const int r =
        cln_npy_read_stream(npy_fread, f, SIZE_MAX, NULL, NULL, &buf, &size, h, why, sizeof why);
    fclose(f);
    if (r)
        return npy_fail(err, errlen, "%s: %s", path, why);
    *data = malloc(h->count ? h->count * sizeof(double) : 1);
    if (!*data) {
        free(buf);
        return npy_fail(err, errlen, "%s: out of memory", path);
    }
    cln_npy_decode(buf, h, *data);
    free(buf);
    return 0;
}

int cln_npy_encode(const double *data, const size_t *shape, size_t ndim, int itemsize,
                   unsigned char **out, size_t *size, char *err, size_t errlen)
{
    *out = NULL;
    *size = 0;
    if (itemsize != 4 && itemsize != 8)
        return npy_fail(err, errlen, "itemsize %d (4 or 8)", itemsize);
    if (ndim > CLN_NPY_MAX_DIMS)
        return npy_fail(err, errlen, "%zu dimensions (at most %d)", ndim, CLN_NPY_MAX_DIMS);
    size_t count = 1;
    char dict[64 + 24 * CLN_NPY_MAX_DIMS];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (",
                     itemsize);
    for (size_t d = 0; d < ndim; ++d) {
        if (shape[d] != 0 && count > SIZE_MAX / shape[d] / (size_t)itemsize)
            return npy_fail(err, errlen, "the shape's size overflows");
        count *= shape[d];
        n += snprintf(dict + n, sizeof dict - (size_t)n, d ? ", %zu" : "%zu", shape[d]);
    }
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    /* numpy pads with spaces and a newline to a multiple of 64 bytes (version 1.0: 10 bytes
     * before the header; 2.0: 12) */
    const int v2 = (size_t)n + 1 + 10 > 65535;
    const size_t pre = v2 ? 12 : 10;
    const size_t total = (pre + (size_t)n + 1 + 63) / 64 * 64;
    const size_t hlen = total - pre;
    const size_t bytes = total + count * (size_t)itemsize;
    unsigned char *b = malloc(bytes);
    if (!b)
        return npy_fail(err, errlen, "out of memory for %zu bytes", bytes);
    memcpy(b, npy_magic, sizeof npy_magic);
    b[6] = v2 ? 2 : 1;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; ++i)
        b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + pre, dict, (size_t)n);
    memset(b + pre + (size_t)n, ' ', hlen - (size_t)n - 1);
    b[total - 1] = '\n';
    unsigned char *p = b + total;
    for (size_t i = 0; i < count; ++i) {
        if (itemsize == 8) {
            uint64_t u;
            memcpy(&u, &data[i], sizeof u);
            for (int k = 0; k < 8; ++k)
                *p++ = (unsigned char)(u >> (8 * k));
        } else {
            const float f = (float)data[i];
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            for (int k = 0; k < 4; ++k)
                *p++ = (unsigned char)(u >> (8 * k));
        }
    }
    *out = b;
    *size = bytes;
    return 0;
}

int cln_npy_write(const char *path, const double *data, const size_t *shape, size_t ndim,
                  int itemsize, char *err, size_t errlen)
{
    unsigned char *img;
    size_t size;
    char why[256];
    if (cln_npy_encode(data, shape, ndim, itemsize, &img, &size, why, sizeof why))
        return npy_fail(err, errlen, "%s: %s", path, why);
    /* ".NAME.XXXXXX" in the target's directory, renamed over it; removed on a signal */
    const int bad = cln_atomic_write(path, img, size, cln_atomic_new_mode(), 0, &tool_temp_hooks);
    const int e = errno;
    free(img);
    if (bad && e == ENOMEM)
        return npy_fail(err, errlen, "%s: out of memory", path);
    if (bad)
        return npy_fail(err, errlen, "%s: cannot write: %s", path, strerror(e));
    return 0;
}
