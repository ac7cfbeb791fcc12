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

int cln_npy_parse(const unsigned char *buf, size_t size, cln_npy_header *h, char *err,
                  size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (size < 10 || memcmp(buf, npy_magic, sizeof npy_magic) != 0)
        return npy_fail(err, errlen, "not a .npy file (no \\x93NUMPY magic)");
    const unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return npy_fail(err, errlen, "unsupported .npy format version %u.%u (1.0, 2.0, 3.0)", major,
                        minor);
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else {
        if (size < 12)
            return npy_fail(err, errlen, "the file ends inside the header length");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        pre = 12;
    }
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
    const size_t have = size - h->data_off, want = count * (size_t)h->itemsize;
    if (have != want)
        return npy_fail(err, errlen,
                        "%zu bytes of data, but the shape needs %zu (%zu values of %d "
                        "bytes)",
                        have, want, count, h->itemsize);
    return 0;
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
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            const size_t ncap = cap ? 2 * cap : 65536;
            unsigned char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                return npy_fail(err, errlen, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        const size_t got = fread(buf + size, 1, cap - size, f);
        size += got;
        if (got == 0)
            break;
    }
    const int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return npy_fail(err, errlen, "%s: read error", path);
    }
    char why[256];
    if (cln_npy_parse(buf, size, h, why, sizeof why)) {
        free(buf);
        return npy_fail(err, errlen, "%s: %s", path, why);
    }
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
    const char *slash = strrchr(path, '/');
    const size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const size_t tl = strlen(path) + 9;
    char *tmp = malloc(tl);
    if (!tmp) {
        free(img);
        return npy_fail(err, errlen, "%s: out of memory", path);
    }
    snprintf(tmp, tl, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
    const mode_t mask = umask(0);
    umask(mask);
    int slot;
    const int fd = tool_temp_create(tmp, 0666 & ~mask, &slot);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int bad = !f;
    if (f) {
        bad = fwrite(img, 1, size, f) != size;
        bad |= fclose(f) != 0;
    } else if (fd >= 0) {
        close(fd);
    }
    if (!bad)
        bad = rename(tmp, path) != 0;
    const int e = errno;
    free(img);
    if (bad && fd >= 0)
        unlink(tmp);
    tool_temp_release(slot);
    free(tmp);
    if (bad)
        return npy_fail(err, errlen, "%s: cannot write: %s", path, strerror(e));
    return 0;
}
