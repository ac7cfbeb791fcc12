/* safetensors_tensors.c - the tensor entries of a safetensors header, checked before any byte of
 * the data section is read: the header's keys, each tensor's name, dtype, shape and offsets, the
 * data section covered exactly once; and the little-endian decode of a tensor's payload. */
#include "model/safetensors_internal.h"

/* Copies at most CLN_ST_SHOW bytes of `s` into `dst` (CLN_ST_SHOW + 4 bytes) with control
 * characters replaced, so a hostile name can neither flood nor break a one-line message. */
const char *cln_st_show(char *dst, const char *s)
{
    size_t i = 0;
    for (; s[i] != '\0' && i < CLN_ST_SHOW; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (s[i] != '\0') {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
    return dst;
}

uint64_t cln_st_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t cln_st_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The payload is IEEE binary32/binary64; the decode below reinterprets the bits. */
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE float and double expected");

static double cln_st_element(const unsigned char *p, int is_f64)
{
    if (is_f64) {
        uint64_t bits = cln_st_le64(p);
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    uint32_t bits = cln_st_le32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return (double)f; /* exact: every binary32 value is a binary64 value */
}

/* A pass over the header text that json-c has no hook for. json-c keeps the last of repeated
 * keys and cuts keys at an escaped NUL, both silently; counting the colons outside strings gives
 * the number of key/value pairs written, which the caller compares with what the parser kept.
 * json-c also accepts single-quoted strings even in strict mode; they are not JSON and would
 * hide colons from the count, so they are refused here. */
clnode_status cln_st_scan_header(cln_st_loader *L, const char *h, size_t n, size_t *pairs)
{
    size_t colons = 0;
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!in_string) {
            if (c == '"')
                in_string = 1;
            else if (c == ':')
                colons++;
            else if (c == '\'')
                return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                                "%s: JSON header has a single-quoted string at byte %zu", L->src,
                                i);
            continue;
        }
        if (c == '"') {
            in_string = 0;
        } else if (c == '\\' && i + 1 < n) {
            i++;
            if ((h[i] == 'u' || h[i] == 'U') && i + 4 < n && h[i + 1] == '0' && h[i + 2] == '0' &&
                h[i + 3] == '0' && h[i + 4] == '0')
                return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                                "%s: JSON header has an escaped NUL character at byte %zu", L->src,
                                i - 1);
        }
    }
    *pairs = colons;
    return CLNODE_OK;
}

/* Number of key/value pairs in all objects of a parsed tree (depth bounded by the tokener). */
size_t cln_st_count_pairs(json_object *o)
{
    size_t count = 0;
    if (json_object_is_type(o, json_type_object)) {
        struct json_object_iterator it = json_object_iter_begin(o);
        struct json_object_iterator end = json_object_iter_end(o);
        for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it))
            count += 1 + cln_st_count_pairs(json_object_iter_peek_value(&it));
    } else if (json_object_is_type(o, json_type_array)) {
        size_t n = json_object_array_length(o);
        for (size_t i = 0; i < n; i++)
            count += cln_st_count_pairs(json_object_array_get_idx(o, i));
    }
    return count;
}

/* Parses "<digits>" + suffix at `s`: the index (no sign, no leading zero, at most 9 digits) and
 * whether the suffix is ".bias" or ".weight". Returns 0 if `s` is not of that form. */
static int cln_st_parse_index(const char *s, unsigned long *index, int *is_bias)
{
    size_t digits = 0;
    unsigned long v = 0;
    while (s[digits] >= '0' && s[digits] <= '9') {
        if (digits == 9)
            return 0;
        v = v * 10 + (unsigned long)(s[digits] - '0');
        digits++;
    }
    if (digits == 0 || (digits > 1 && s[0] == '0'))
        return 0;
    if (strcmp(s + digits, ".weight") == 0)
        *is_bias = 0;
    else if (strcmp(s + digits, ".bias") == 0)
        *is_bias = 1;
    else
        return 0;
    *index = v;
    return 1;
}

static const char *cln_st_scheme_name(cln_st_scheme s)
{
    return s == CLN_ST_SCHEME_EQUINOX ? "equinox ('layers.<i>.weight')"
                                      : "torch.nn.Sequential ('<i>.weight')";
}

/* Reads a non-negative JSON integer into a size_t; `what` and `tensor` name it in messages. */
static clnode_status cln_st_get_size(cln_st_loader *L, json_object *v, const char *what, size_t pos,
                                     const char *tensor, size_t *out)
{
    char show[CLN_ST_SHOW + 4];
    if (!json_object_is_type(v, json_type_int))
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: %s[%zu] of tensor '%s' is %s, not an integer", L->src, what, pos,
                        cln_st_show(show, tensor), json_type_to_name(json_object_get_type(v)));
    int64_t s = json_object_get_int64(v);
    if (s < 0)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: %s[%zu] of tensor '%s' is negative (%lld)", L->src, what, pos,
                        cln_st_show(show, tensor), (long long)s);
    uint64_t u = json_object_get_uint64(v);
    if (u > SIZE_MAX)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: %s[%zu] of tensor '%s' is too large (%llu)", L->src, what, pos,
                        cln_st_show(show, tensor), (unsigned long long)u);
    *out = (size_t)u;
    return CLNODE_OK;
}

/* Looks up a required member of a tensor entry with the expected type. */
static clnode_status cln_st_member(cln_st_loader *L, json_object *entry, const char *tensor,
                                   const char *key, json_type type, json_object **out)
{
    char show[CLN_ST_SHOW + 4];
    if (!json_object_object_get_ex(entry, key, out))
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL, "%s: tensor '%s' has no \"%s\"", L->src,
                        cln_st_show(show, tensor), key);
    if (!json_object_is_type(*out, type))
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL, "%s: \"%s\" of tensor '%s' is %s, not %s %s",
                        L->src, key, cln_st_show(show, tensor),
                        json_type_to_name(json_object_get_type(*out)),
                        type == json_type_array ? "an" : "a", json_type_to_name(type));
    return CLNODE_OK;
}

/* The tensor's name: one of the two schemes, never both in one file. Sets t->index, t->is_bias. */
static clnode_status cln_st_tensor_name(cln_st_loader *L, const char *name, cln_st_tensor *t)
{
    char show[CLN_ST_SHOW + 4], show2[CLN_ST_SHOW + 4];
    cln_st_scheme scheme = CLN_ST_SCHEME_NONE;
    if (strcmp(name, CLN_ST_SCALE) == 0) {
        t->is_scale = 1;
        return CLNODE_OK;
    }
    if (strncmp(name, "layers.", 7) == 0 && cln_st_parse_index(name + 7, &t->index, &t->is_bias))
        scheme = CLN_ST_SCHEME_EQUINOX;
    else if (cln_st_parse_index(name, &t->index, &t->is_bias))
        scheme = CLN_ST_SCHEME_TORCH;
    if (scheme == CLN_ST_SCHEME_NONE)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: unexpected tensor '%s': expected 'layers.<i>.weight' and "
                        "'layers.<i>.bias' (equinox) or '<i>.weight' and '<i>.bias' "
                        "(torch.nn.Sequential), and optionally '" CLN_ST_SCALE "'",
                        L->src, cln_st_show(show, name));
    if (L->scheme == CLN_ST_SCHEME_NONE) {
        L->scheme = scheme;
        L->scheme_first = name;
    } else if (scheme != L->scheme) {
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: mixed naming schemes: tensor '%s' uses %s naming but '%s' uses %s",
                        L->src, cln_st_show(show, name), cln_st_scheme_name(scheme),
                        cln_st_show(show2, L->scheme_first), cln_st_scheme_name(L->scheme));
    }
    return CLNODE_OK;
}

/* "dtype": F32 or F64 (sets t->is_f64); any other dtype is named in the error. */
static clnode_status cln_st_tensor_dtype(cln_st_loader *L, const char *name, const char *dtype,
                                         cln_st_tensor *t)
{
    static const char *const other_dtypes[] = {
        "BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16",     "F16",     "BF16",
        "I32",  "U32", "I64", "U64",     "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
    char show[CLN_ST_SHOW + 4], show2[CLN_ST_SHOW + 4];
    if (strcmp(dtype, "F32") == 0 || strcmp(dtype, "F64") == 0) {
        t->is_f64 = strcmp(dtype, "F64") == 0;
        return CLNODE_OK;
    }
    for (size_t i = 0; i < sizeof other_dtypes / sizeof other_dtypes[0]; i++)
        if (strcmp(dtype, other_dtypes[i]) == 0)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: tensor '%s' has dtype %s; only F32 and F64 are supported "
                            "(convert the parameters to float32 or float64 before saving)",
                            L->src, cln_st_show(show, name), dtype);
    return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL, "%s: tensor '%s' has unknown dtype '%s'", L->src,
                    cln_st_show(show, name), cln_st_show(show2, dtype));
}

/* "shape": sets t->rank, t->dims, t->numel, and the byte count of its elements in *nbytes. */
static clnode_status cln_st_tensor_shape(cln_st_loader *L, const char *name, json_object *jshape,
                                         const char *dtype, cln_st_tensor *t, size_t *nbytes)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st;
    t->rank = json_object_array_length(jshape);
    t->numel = 1;
    for (size_t i = 0; i < t->rank; i++) {
        size_t d;
        if ((st = cln_st_get_size(L, json_object_array_get_idx(jshape, i), "shape", i, name, &d)) !=
            CLNODE_OK)
            return st;
        if (i < 2)
            t->dims[i] = d;
        if (!cln_mul_size(t->numel, d, &t->numel))
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: shape of tensor '%s' has too many elements (the product of its "
                            "dimensions overflows)",
                            L->src, cln_st_show(show, name));
    }
    if (!cln_mul_size(t->numel, t->is_f64 ? 8 : 4, nbytes))
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: shape of tensor '%s' has too many elements (%zu elements of %s "
                        "overflow the byte count)",
                        L->src, cln_st_show(show, name), t->numel, dtype);
    return CLNODE_OK;
}

/* "data_offsets": [begin, end] inside the data section, spanning exactly nbytes. */
static clnode_status cln_st_tensor_offsets(cln_st_loader *L, const char *name,
                                           json_object *joffsets, const char *dtype, size_t nbytes,
                                           cln_st_tensor *t)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st;
    if (json_object_array_length(joffsets) != 2)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: \"data_offsets\" of tensor '%s' has %zu entries, expected 2 "
                        "([begin, end])",
                        L->src, cln_st_show(show, name), json_object_array_length(joffsets));
    if ((st = cln_st_get_size(L, json_object_array_get_idx(joffsets, 0), "data_offsets", 0, name,
                              &t->begin)) != CLNODE_OK ||
        (st = cln_st_get_size(L, json_object_array_get_idx(joffsets, 1), "data_offsets", 1, name,
                              &t->end)) != CLNODE_OK)
        return st;
    if (t->begin > t->end)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: data_offsets of tensor '%s' are reversed (begin %zu > end %zu)",
                        L->src, cln_st_show(show, name), t->begin, t->end);
    if (t->end > L->data_size)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: tensor '%s' ends at byte %zu, beyond the data section of %zu bytes",
                        L->src, cln_st_show(show, name), t->end, L->data_size);
    if (t->end - t->begin != nbytes)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: tensor '%s' spans %zu bytes in data_offsets but its %zu elements of "
                        "%s need %zu",
                        L->src, cln_st_show(show, name), t->end - t->begin, t->numel, dtype,
                        nbytes);
    return CLNODE_OK;
}

/* Checks one tensor entry (name, dtype, shape, offsets) and records it. */
clnode_status cln_st_add_tensor(cln_st_loader *L, const char *name, json_object *entry)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st;
    cln_st_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    if ((st = cln_st_tensor_name(L, name, &t)) != CLNODE_OK)
        return st;
    if (L->num_tensors == CLN_ST_MAX_TENSORS)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: more than %d tensors, so more than the limit of %d layers", L->src,
                        CLN_ST_MAX_TENSORS, CLN_MAX_LAYERS);
    if (!json_object_is_type(entry, json_type_object))
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: entry of tensor '%s' is %s, not an object", L->src,
                        cln_st_show(show, name), json_type_to_name(json_object_get_type(entry)));
    json_object *jdtype, *jshape, *joffsets;
    if ((st = cln_st_member(L, entry, name, "dtype", json_type_string, &jdtype)) != CLNODE_OK)
        return st;
    const char *dtype = json_object_get_string(jdtype);
    if ((st = cln_st_tensor_dtype(L, name, dtype, &t)) != CLNODE_OK)
        return st;
    size_t nbytes = 0;
    if ((st = cln_st_member(L, entry, name, "shape", json_type_array, &jshape)) != CLNODE_OK ||
        (st = cln_st_tensor_shape(L, name, jshape, dtype, &t, &nbytes)) != CLNODE_OK)
        return st;
    if ((st = cln_st_member(L, entry, name, "data_offsets", json_type_array, &joffsets)) !=
            CLNODE_OK ||
        (st = cln_st_tensor_offsets(L, name, joffsets, dtype, nbytes, &t)) != CLNODE_OK)
        return st;
    L->tensors[L->num_tensors++] = t;
    return CLNODE_OK;
}

static int cln_st_cmp_offset(const void *a, const void *b)
{
    const cln_st_tensor *x = *(const cln_st_tensor *const *)a;
    const cln_st_tensor *y = *(const cln_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

int cln_st_cmp_layer(const void *a, const void *b)
{
    const cln_st_tensor *x = a, *y = b;
    if (x->is_scale != y->is_scale) /* the output scale after every layer */
        return x->is_scale - y->is_scale;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->is_bias - y->is_bias;
}

/* The tensors must cover the data section exactly once, like the reference implementation
 * requires ("the byte buffer needs to be entirely indexed, and cannot contain holes"). */
clnode_status cln_st_check_coverage(cln_st_loader *L)
{
    char show[CLN_ST_SHOW + 4], show2[CLN_ST_SHOW + 4];
    const cln_st_tensor *order[CLN_ST_MAX_TENSORS];
    for (size_t i = 0; i < L->num_tensors; i++)
        order[i] = &L->tensors[i];
    qsort(order, L->num_tensors, sizeof order[0], cln_st_cmp_offset);
    size_t covered = 0;
    const cln_st_tensor *prev = NULL;
    for (size_t i = 0; i < L->num_tensors; i++) {
        const cln_st_tensor *t = order[i];
        if (t->begin < covered)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: tensors '%s' (bytes %zu..%zu) and '%s' (bytes %zu..%zu) overlap "
                            "in the data section",
                            L->src, cln_st_show(show, prev->name), prev->begin, prev->end,
                            cln_st_show(show2, t->name), t->begin, t->end);
        if (t->begin > covered)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: hole in the data section: bytes %zu..%zu belong to no tensor "
                            "(before '%s')",
                            L->src, covered, t->begin, cln_st_show(show, t->name));
        covered = t->end;
        prev = t;
    }
    if (covered != L->data_size)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: %zu unused bytes at the end of the data section (tensors end at "
                        "byte %zu of %zu)",
                        L->src, L->data_size - covered, covered, L->data_size);
    return CLNODE_OK;
}

/* Decodes one tensor into a new float64 array, refusing NaN and infinities. */
clnode_status cln_st_decode(cln_st_loader *L, const cln_st_tensor *t, double **out)
{
    char show[CLN_ST_SHOW + 4];
    size_t bytes;
    if (!cln_mul_size(t->numel, sizeof(double), &bytes))
        return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY, "%s: tensor '%s' is too large", L->src,
                        cln_st_show(show, t->name));
    double *v = malloc(bytes);
    if (v == NULL)
        return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "%s: cannot allocate %zu bytes for tensor '%s'", L->src, bytes,
                        cln_st_show(show, t->name));
    const unsigned char *p = L->data + t->begin;
    size_t elem = t->is_f64 ? 8 : 4;
    for (size_t i = 0; i < t->numel; i++) {
        v[i] = cln_st_element(p + i * elem, t->is_f64);
        if (!isfinite(v[i])) {
            const char *what = isnan(v[i]) ? "NaN" : v[i] > 0 ? "+inf" : "-inf";
            free(v);
            if (t->rank == 2)
                return cln_fail(L->ctx, CLNODE_ERR_NONFINITE_INPUT,
                                "%s: tensor '%s' element %zu (row %zu, column %zu) is %s", L->src,
                                cln_st_show(show, t->name), i, i / t->dims[1], i % t->dims[1],
                                what);
            return cln_fail(L->ctx, CLNODE_ERR_NONFINITE_INPUT, "%s: tensor '%s' element %zu is %s",
                            L->src, cln_st_show(show, t->name), i, what);
        }
    }
    *out = v;
    return CLNODE_OK;
}

/* The shape of a tensor as "[a, b]" (first two dimensions, "..." beyond) for messages. */
const char *cln_st_shape_str(char *dst, size_t cap, const cln_st_tensor *t)
{
    if (t->rank == 0)
        snprintf(dst, cap, "[]");
    else if (t->rank == 1)
        snprintf(dst, cap, "[%zu]", t->dims[0]);
    else
        snprintf(dst, cap, "[%zu, %zu%s]", t->dims[0], t->dims[1], t->rank > 2 ? ", ..." : "");
    return dst;
}
