/* safetensors.c - loading an MLP vector field from a safetensors file (DESIGN.md §5), and the
 * built-in seed model (lib/model/seed.safetensors, embedded at build time) through that loader.
 *
 * Layout (https://github.com/huggingface/safetensors): an unsigned 64-bit little-endian header
 * length L, L bytes of UTF-8 JSON, then the data section. The JSON object maps each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the data section, plus
 * an optional "__metadata__" object of strings. The tensors must index the data section fully:
 * no overlap, no hole, no unused byte at the end (as the reference implementation requires).
 *
 * The file is hostile until proven otherwise: every length, offset, shape and dtype is checked
 * before any byte of the data section is read, and the payload is decoded byte by byte in
 * little-endian order, so neither alignment nor host byte order matters.
 */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "model/model.h"

/* The reference implementation's limit on the JSON header (safetensors MAX_HEADER_SIZE). */
#define CLN_ST_MAX_HEADER 100000000u
/* The largest file the path variant reads into memory. */
#define CLN_ST_MAX_FILE                                                                            \
    ((uint64_t)SIZE_MAX / 2 < ((uint64_t)4 << 30) ? (size_t)(SIZE_MAX / 2)                         \
                                                  : (size_t)((uint64_t)4 << 30))
/* Our schema nests three deep (object > tensor object > shape array); anything much deeper is
 * not a model and only costs parser recursion. */
#define CLN_ST_MAX_DEPTH 8
/* A layer has at most a weight and a bias, and the model one output scale, so more tensors than
 * this means too many layers. */
#define CLN_ST_MAX_TENSORS (2 * CLN_MAX_LAYERS + 1)
/* The name of the output scale's tensor. */
#define CLN_ST_SCALE "out_scale"

/* Longest part of a name from the file quoted in a message. */
#define CLN_ST_SHOW 96

typedef enum cln_st_scheme {
    CLN_ST_SCHEME_NONE = 0,
    CLN_ST_SCHEME_EQUINOX, /* layers.<i>.weight */
    CLN_ST_SCHEME_TORCH,   /* <i>.weight */
} cln_st_scheme;

typedef struct cln_st_tensor {
    const char *name;    /* key in the parsed JSON tree (owned by the tree) */
    unsigned long index; /* layer index taken from the name */
    int is_bias;         /* 1: "<i>.bias", 0: "<i>.weight" */
    int is_scale;        /* 1: the output scale CLN_ST_SCALE (index and is_bias not used) */
    int is_f64;          /* 1: F64, 0: F32 */
    size_t rank;         /* number of dimensions */
    size_t dims[2];      /* the first two dimensions (the only ones a layer may have) */
    size_t numel;        /* product of all dimensions */
    size_t begin, end;   /* byte range in the data section */
} cln_st_tensor;

typedef struct cln_st_loader {
    clnode_context *ctx;
    char src[CLN_ST_SHOW + 32]; /* "model file '<path>'" or "model buffer", for messages */
    const unsigned char *data;  /* the data section */
    size_t data_size;
    cln_st_tensor tensors[CLN_ST_MAX_TENSORS];
    size_t num_tensors;
    cln_st_scheme scheme;
    const char *scheme_first; /* the tensor that fixed the naming scheme */
} cln_st_loader;

/* Copies at most CLN_ST_SHOW bytes of `s` into `dst` (CLN_ST_SHOW + 4 bytes) with control
 * characters replaced, so a hostile name can neither flood nor break a one-line message. */
static const char *cln_st_show(char *dst, const char *s)
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

static uint64_t cln_st_le64(const unsigned char *p)
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
static clnode_status cln_st_scan_header(cln_st_loader *L, const char *h, size_t n, size_t *pairs)
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
static size_t cln_st_count_pairs(json_object *o)
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
static clnode_status cln_st_add_tensor(cln_st_loader *L, const char *name, json_object *entry)
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

static int cln_st_cmp_layer(const void *a, const void *b)
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
static clnode_status cln_st_check_coverage(cln_st_loader *L)
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

/* Reads a string entry of "__metadata__" (NULL object or absent key: *out = NULL). */
static const char *cln_st_meta(json_object *meta, const char *key)
{
    json_object *v;
    if (meta == NULL || !json_object_object_get_ex(meta, key, &v))
        return NULL;
    return json_object_get_string(v); /* every value was checked to be a string */
}

static clnode_status cln_st_meta_activation(cln_st_loader *L, json_object *meta, const char *key,
                                            const char *fallback, size_t num_layers,
                                            clnode_activation *out)
{
    char show[CLN_ST_SHOW + 4];
    const char *name = cln_st_meta(meta, key);
    if (name == NULL) {
        if (fallback == NULL)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: no \"%s\" in __metadata__; a model of %zu layers needs one "
                            "(one of %s)",
                            L->src, key, num_layers, cln_activation_list());
        name = fallback;
    }
    if (clnode_activation_from_name(name, out) != CLNODE_OK)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: __metadata__ \"%s\" is '%s', not one of %s", L->src, key,
                        cln_st_show(show, name), cln_activation_list());
    return CLNODE_OK;
}

/* Decodes one tensor into a new float64 array, refusing NaN and infinities. */
static clnode_status cln_st_decode(cln_st_loader *L, const cln_st_tensor *t, double **out)
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
static const char *cln_st_shape_str(char *dst, size_t cap, const cln_st_tensor *t)
{
    if (t->rank == 0)
        snprintf(dst, cap, "[]");
    else if (t->rank == 1)
        snprintf(dst, cap, "[%zu]", t->dims[0]);
    else
        snprintf(dst, cap, "[%zu, %zu%s]", t->dims[0], t->dims[1], t->rank > 2 ? ", ..." : "");
    return dst;
}

/* The 8-byte header length and the header it announces; sets L->data and L->data_size. */
static clnode_status cln_st_header(cln_st_loader *L, const unsigned char *bytes, size_t size,
                                   const char **header, size_t *header_len)
{
    clnode_context *ctx = L->ctx;
    if (size < 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: only %zu bytes, shorter than the 8-byte header length", L->src, size);
    uint64_t hlen = cln_st_le64(bytes);
    if (hlen == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: header length is 0", L->src);
    if (hlen > CLN_ST_MAX_HEADER)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: header length %llu exceeds the limit of %u bytes", L->src,
                        (unsigned long long)hlen, CLN_ST_MAX_HEADER);
    if (hlen > size - 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: header length %llu runs past the end (only %zu bytes follow the "
                        "length field)",
                        L->src, (unsigned long long)hlen, size - 8);
    *header = (const char *)bytes + 8;
    *header_len = (size_t)hlen;
    L->data = bytes + 8 + *header_len;
    L->data_size = size - 8 - *header_len;
    const char *nul = memchr(*header, '\0', *header_len);
    if (nul != NULL)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON header has a NUL byte at byte %zu",
                        L->src, (size_t)(nul - *header));
    return CLNODE_OK;
}

/* The header as one JSON object with distinct keys. *tok and *root are the caller's to free,
 * also on failure. */
static clnode_status cln_st_parse(cln_st_loader *L, const char *header, size_t header_len,
                                  json_tokener **tok, json_object **root)
{
    clnode_context *ctx = L->ctx;
    size_t pairs_written = 0;
    clnode_status st = cln_st_scan_header(L, header, header_len, &pairs_written);
    if (st != CLNODE_OK)
        return st;
    *tok = json_tokener_new_ex(CLN_ST_MAX_DEPTH);
    if (*tok == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "%s: cannot allocate a JSON parser", L->src);
    json_tokener_set_flags(*tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    /* The exact length (at most CLN_ST_MAX_HEADER, so it fits an int): the header is not NUL
     * terminated, and a complete object needs no terminator. */
    *root = json_tokener_parse_ex(*tok, header, (int)header_len);
    enum json_tokener_error jerr = json_tokener_get_error(*tok);
    if (*root == NULL) {
        if (jerr == json_tokener_continue)
            return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: JSON header is incomplete (it ends inside a value after %zu "
                            "bytes)",
                            L->src, header_len);
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON parse error at byte %zu: %s", L->src,
                        json_tokener_get_parse_end(*tok), json_tokener_error_desc(jerr));
    }
    if (json_tokener_get_parse_end(*tok) != header_len)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: JSON header has trailing characters after byte %zu", L->src,
                        json_tokener_get_parse_end(*tok));
    if (!json_object_is_type(*root, json_type_object))
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON header is %s, not an object", L->src,
                        json_type_to_name(json_object_get_type(*root)));
    size_t pairs_kept = cln_st_count_pairs(*root);
    if (pairs_kept != pairs_written)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: JSON header has duplicate keys (%zu key/value pairs written, %zu "
                        "distinct)",
                        L->src, pairs_written, pairs_kept);
    return CLNODE_OK;
}

/* Every entry of the header: "__metadata__" (an object of strings, into *meta) or a tensor of a
 * layer (into L->tensors), which must cover the data section. */
static clnode_status cln_st_entries(cln_st_loader *L, json_object *root, json_object **meta)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4];
    clnode_status st;
    *meta = NULL;
    struct json_object_iterator it = json_object_iter_begin(root);
    struct json_object_iterator it_end = json_object_iter_end(root);
    for (; !json_object_iter_equal(&it, &it_end); json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it);
        json_object *val = json_object_iter_peek_value(&it);
        if (strcmp(key, "__metadata__") == 0) {
            *meta = val;
            continue;
        }
        if ((st = cln_st_add_tensor(L, key, val)) != CLNODE_OK)
            return st;
    }
    if (*meta != NULL) {
        if (!json_object_is_type(*meta, json_type_object))
            return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: __metadata__ is %s, not an object",
                            L->src, json_type_to_name(json_object_get_type(*meta)));
        struct json_object_iterator mi = json_object_iter_begin(*meta);
        struct json_object_iterator mi_end = json_object_iter_end(*meta);
        for (; !json_object_iter_equal(&mi, &mi_end); json_object_iter_next(&mi)) {
            json_object *v = json_object_iter_peek_value(&mi);
            if (!json_object_is_type(v, json_type_string))
                return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                                "%s: __metadata__ value of '%s' is %s, not a string", L->src,
                                cln_st_show(show, json_object_iter_peek_name(&mi)),
                                json_type_to_name(json_object_get_type(v)));
        }
    }
    if (L->num_tensors == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: no tensors; a model needs at least one layer", L->src);
    return cln_st_check_coverage(L);
}

/* The layers in index order, as the loader found them. */
typedef struct cln_st_layers {
    const cln_st_tensor *w[CLN_MAX_LAYERS], *b[CLN_MAX_LAYERS]; /* b[i] may be NULL */
    const cln_st_tensor *scale;                                 /* NULL: no output scale */
    size_t sizes[CLN_MAX_LAYERS + 1];
    size_t num;
} cln_st_layers;

/* Checks layer `w` (with bias `b` or NULL) and appends it to `ly`: shapes, and the chain. */
static clnode_status cln_st_add_layer(cln_st_loader *L, const cln_st_tensor *w,
                                      const cln_st_tensor *b, cln_st_layers *ly)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4], show2[CLN_ST_SHOW + 4], shape[64];
    if (ly->num == CLN_MAX_LAYERS)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: more than the limit of %d layers", L->src,
                        CLN_MAX_LAYERS);
    if (w->rank != 2)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: weight '%s' has shape %s of %zu dimensions, expected 2 (out x in)",
                        L->src, cln_st_show(show, w->name),
                        cln_st_shape_str(shape, sizeof shape, w), w->rank);
    if (w->dims[0] == 0 || w->dims[1] == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: weight '%s' has an empty shape %s", L->src,
                        cln_st_show(show, w->name), cln_st_shape_str(shape, sizeof shape, w));
    if (b != NULL && b->rank != 1)
        return cln_fail(
            ctx, CLNODE_ERR_BAD_MODEL, "%s: bias '%s' has shape %s of %zu dimensions, expected 1",
            L->src, cln_st_show(show, b->name), cln_st_shape_str(shape, sizeof shape, b), b->rank);
    if (b != NULL && b->dims[0] != w->dims[0])
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: bias '%s' has %zu entries but weight '%s' has %zu rows", L->src,
                        cln_st_show(show, b->name), b->dims[0], cln_st_show(show2, w->name),
                        w->dims[0]);
    if (ly->num > 0 && w->dims[1] != ly->sizes[ly->num])
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: layers do not chain: weight '%s' (shape %s) takes %zu inputs but "
                        "the previous layer '%s' gives %zu outputs",
                        L->src, cln_st_show(show, w->name),
                        cln_st_shape_str(shape, sizeof shape, w), w->dims[1],
                        cln_st_show(show2, ly->w[ly->num - 1]->name), ly->sizes[ly->num]);
    if (ly->num == 0)
        ly->sizes[0] = w->dims[1];
    ly->sizes[ly->num + 1] = w->dims[0];
    ly->w[ly->num] = w;
    ly->b[ly->num] = b;
    ly->num++;
    return CLNODE_OK;
}

/* The output scale's shape: [] or [1] (a scalar) or [N] (one per component of the state). */
static clnode_status cln_st_scale_shape(cln_st_loader *L, const cln_st_layers *ly)
{
    const cln_st_tensor *t = ly->scale;
    if (t == NULL)
        return CLNODE_OK;
    char shape[64];
    const size_t n = ly->sizes[ly->num];
    if (t->rank == 0 || (t->rank == 1 && (t->dims[0] == 1 || t->dims[0] == n)))
        return CLNODE_OK;
    return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                    "%s: tensor '" CLN_ST_SCALE "' has shape %s; the output scale is a scalar "
                    "(shape [] or [1]) or one value per component of the state (shape [%zu])",
                    L->src, cln_st_shape_str(shape, sizeof shape, t), n);
}

/* The tensors paired into layers in index order (torch.nn.Sequential leaves gaps for activation
 * modules). */
static clnode_status cln_st_layers_of(cln_st_loader *L, cln_st_layers *ly)
{
    char show[CLN_ST_SHOW + 4];
    qsort(L->tensors, L->num_tensors, sizeof L->tensors[0], cln_st_cmp_layer);
    for (size_t i = 0; i < L->num_tensors;) {
        const cln_st_tensor *w = &L->tensors[i], *b = NULL;
        if (w->is_scale) { /* the last (cln_st_cmp_layer), and only one (json-c de-duplicates) */
            ly->scale = w;
            break;
        }
        if (w->is_bias)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: tensor '%s' is the bias of layer index %lu, which has no weight",
                            L->src, cln_st_show(show, w->name), w->index);
        i++;
        if (i < L->num_tensors && !L->tensors[i].is_scale && L->tensors[i].index == w->index) {
            b = &L->tensors[i];
            if (!b->is_bias) /* cannot happen after json-c's de-duplication; kept as a guard */
                return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL, "%s: tensor '%s' appears twice",
                                L->src, cln_st_show(show, b->name));
            i++;
        }
        const clnode_status st = cln_st_add_layer(L, w, b, ly);
        if (st != CLNODE_OK)
            return st;
    }
    if (ly->num == 0)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: no layers beside '" CLN_ST_SCALE "'; a model needs at least one",
                        L->src);
    return cln_st_scale_shape(L, ly);
}

/* The metadata keys the loader reads. */
static const char *const cln_st_known_keys[] = {"activation", "final_activation", "time_input",
                                                "inputs"};
#define CLN_ST_KEY_MAX 64 /* longer keys resemble none of them */

/* The optimal string alignment distance of a and b (lengths at most CLN_ST_KEY_MAX): the edits
 * (insertions, deletions, substitutions, swaps of neighbours) that turn one into the other. */
static size_t cln_st_distance(const char *a, size_t na, const char *b, size_t nb)
{
    unsigned char d[CLN_ST_KEY_MAX + 1][CLN_ST_KEY_MAX + 1];
    for (size_t i = 0; i <= na; ++i)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= nb; ++j)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= na; ++i)
        for (size_t j = 1; j <= nb; ++j) {
            unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < v)
                v = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < v)
                v = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < v)
                v = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)v;
        }
    return d[na][nb];
}

/* The known key that `key` (not itself known) resembles, or NULL: the same after trimming
 * blanks, lowering the case and reading ' ' and '-' as '_', or within 2 edits of a known key of
 * 8 or more characters (1 edit of a shorter one). */
static const char *cln_st_resembles(const char *key)
{
    const char *a = key, *e = key + strlen(key);
    while (a < e && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
        ++a;
    while (e > a && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        --e;
    if ((size_t)(e - a) > CLN_ST_KEY_MAX)
        return NULL;
    char norm[CLN_ST_KEY_MAX + 1];
    size_t n = 0;
    for (; a < e; ++a)
        norm[n++] = *a == ' ' || *a == '-' ? '_' : *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
    for (size_t k = 0; k < sizeof cln_st_known_keys / sizeof cln_st_known_keys[0]; ++k) {
        const char *known = cln_st_known_keys[k];
        const size_t nk = strlen(known);
        if (cln_st_distance(norm, n, known, nk) <= (nk >= 8 ? 2u : 1u))
            return known;
    }
    return NULL;
}

/* Refuses a metadata key that resembles a known one without being it: a misspelt key would
 * otherwise be ignored and its default used (an identity final activation for
 * "final_activaton"). */
static clnode_status cln_st_meta_keys(cln_st_loader *L, json_object *meta)
{
    if (meta == NULL)
        return CLNODE_OK;
    char show[CLN_ST_SHOW + 4];
    struct json_object_iterator it = json_object_iter_begin(meta);
    struct json_object_iterator it_end = json_object_iter_end(meta);
    for (; !json_object_iter_equal(&it, &it_end); json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it), *like = NULL;
        int known = 0;
        for (size_t k = 0; k < sizeof cln_st_known_keys / sizeof cln_st_known_keys[0]; ++k)
            known |= strcmp(key, cln_st_known_keys[k]) == 0;
        if (!known && (like = cln_st_resembles(key)) != NULL)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: __metadata__ key '%s' is not one clnode reads, but resembles "
                            "\"%s\" (keys are exact: lower case, no blanks); rename or remove it",
                            L->src, cln_st_show(show, key), like);
    }
    return CLNODE_OK;
}

/* Keeps in the model what the file said beyond the parameters: every metadata entry in the
 * file's order, and each tensor's dtype. */
static clnode_status cln_st_keep(cln_st_loader *L, json_object *meta, const cln_st_layers *ly,
                                 clnode_model *m)
{
    for (size_t k = 0; k < ly->num; ++k) {
        m->weight_f32[k] = !ly->w[k]->is_f64;
        m->bias_f32[k] = ly->b[k] != NULL && !ly->b[k]->is_f64;
    }
    m->out_scale_f32 = ly->scale != NULL && !ly->scale->is_f64;
    const size_t n = meta != NULL ? (size_t)json_object_object_length(meta) : 0;
    if (n == 0)
        return CLNODE_OK;
    m->meta = calloc(2 * n, sizeof *m->meta);
    if (m->meta == NULL)
        return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu metadata entries",
                        n);
    struct json_object_iterator it = json_object_iter_begin(meta);
    struct json_object_iterator it_end = json_object_iter_end(meta);
    for (; !json_object_iter_equal(&it, &it_end) && m->num_meta < n; json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it);
        const char *val = json_object_get_string(json_object_iter_peek_value(&it));
        char *k = strdup(key), *v = strdup(val ? val : "");
        if (k == NULL || v == NULL) {
            free(k);
            free(v);
            return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot copy the metadata");
        }
        m->meta[2 * m->num_meta] = k;
        m->meta[2 * m->num_meta + 1] = v;
        ++m->num_meta;
    }
    return CLNODE_OK;
}

/* The activations, time_input and inputs of the metadata. Other keys are the writer's own (e.g.
 * "format": "pt"), kept by cln_st_keep once cln_st_meta_keys has refused the misspelt. */
static clnode_status cln_st_meta_desc(cln_st_loader *L, json_object *meta, size_t num_layers,
                                      clnode_model_desc *desc)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st = cln_st_meta_activation(
        L, meta, "activation", num_layers == 1 ? "identity" : NULL, num_layers, &desc->activation);
    if (st == CLNODE_OK)
        st = cln_st_meta_activation(L, meta, "final_activation", "identity", num_layers,
                                    &desc->final_activation);
    if (st != CLNODE_OK)
        return st;
    const char *time_input = cln_st_meta(meta, "time_input");
    if (time_input == NULL || strcmp(time_input, "false") == 0)
        desc->time_input = 0;
    else if (strcmp(time_input, "true") == 0)
        desc->time_input = 1;
    else
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: __metadata__ \"time_input\" is '%s', expected 'true' or 'false'",
                        L->src, cln_st_show(show, time_input));
    const char *inputs = cln_st_meta(meta, "inputs");
    if (inputs != NULL) {
        /* a decimal count, digits only (no sign, no spaces), at most 16777216 */
        size_t k = 0;
        int ok = inputs[0] != '\0' && strlen(inputs) <= 8;
        for (const char *c = inputs; ok && *c; ++c) {
            ok = *c >= '0' && *c <= '9';
            k = k * 10 + (size_t)(*c - '0');
        }
        if (!ok || k > (1u << 24))
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: __metadata__ \"inputs\" is '%s', expected the number of "
                            "conditioning inputs (0 to 16777216)",
                            L->src, cln_st_show(show, inputs));
        desc->num_inputs = k;
    }
    return CLNODE_OK;
}

/* The model of the layers, with the parameters converted to float64 (exactly) and checked
 * finite. */
static clnode_status cln_st_build(cln_st_loader *L, const cln_st_layers *ly,
                                  clnode_model_desc *desc, clnode_model **out)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4];
    double *weights[CLN_MAX_LAYERS] = {0};
    double *biases[CLN_MAX_LAYERS] = {0};
    double *scale = NULL;
    clnode_status st = CLNODE_OK;
    for (size_t k = 0; k < ly->num; k++) {
        CLN_TRY(st, cln_st_decode(L, ly->w[k], &weights[k]));
        if (ly->b[k] != NULL)
            CLN_TRY(st, cln_st_decode(L, ly->b[k], &biases[k]));
    }
    if (ly->scale != NULL) {
        CLN_TRY(st, cln_st_decode(L, ly->scale, &scale));
        desc->out_scale = scale;
        desc->out_scale_size = ly->scale->numel;
    }
    desc->num_layers = ly->num;
    desc->sizes = ly->sizes;
    desc->weights = (const double *const *)weights;
    desc->biases = (const double *const *)biases;
    st = clnode_model_create(ctx, desc, out);
    if (st == CLNODE_OK && (*out)->f32_over) { /* named by its tensor in an fp32 solve's refusal */
        const clnode_model *m = *out;
        const cln_st_tensor *t = m->f32_scale  ? ly->scale
                                 : m->f32_bias ? ly->b[m->f32_layer]
                                               : ly->w[m->f32_layer];
        snprintf((*out)->f32_where, sizeof(*out)->f32_where, "%s: tensor '%s'", L->src,
                 cln_st_show(show, t->name));
    }
    if (st == CLNODE_ERR_INVALID_ARGUMENT) {
        char why[sizeof ctx->last_error], k[40] = "";
        snprintf(why, sizeof why, "%s", ctx != NULL ? ctx->last_error : "");
        if (desc->num_inputs)
            snprintf(k, sizeof k, ", inputs %zu", desc->num_inputs);
        st = cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                      "%s: the dimensions do not make a vector field (input width %zu, output "
                      "width %zu, time_input %s%s): %s",
                      L->src, ly->sizes[0], ly->sizes[ly->num], desc->time_input ? "true" : "false",
                      k, why);
    }
fail:
    for (size_t k = 0; k < CLN_MAX_LAYERS; k++) {
        free(weights[k]);
        free(biases[k]);
    }
    free(scale);
    return st;
}

/* Loads a model from `size` bytes. With `declared` non-zero, `bytes` holds only the length field
 * and the header of a file of `declared` bytes: the header alone is checked against that size
 * (its tensors must cover the data section the file would have) and no model is built. */
static clnode_status cln_st_load_ex(clnode_context *ctx, const unsigned char *bytes, size_t size,
                                    const char *path, size_t declared, clnode_model **out)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st = CLNODE_OK;
    json_tokener *tok = NULL;
    json_object *root = NULL, *meta = NULL;
    const char *header = NULL;
    size_t header_len = 0;
    cln_st_layers *ly = NULL;
    clnode_model_desc desc;
    clnode_model_default_desc(&desc);

    cln_st_loader *L = calloc(1, sizeof *L);
    if (L == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the safetensors loader");
    L->ctx = ctx;
    if (path != NULL)
        snprintf(L->src, sizeof L->src, "model file '%s'", cln_st_show(show, path));
    else
        snprintf(L->src, sizeof L->src, "model buffer");
    ly = calloc(1, sizeof *ly);
    if (ly == NULL) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the safetensors loader");
        goto fail;
    }
    CLN_TRY(st, cln_st_header(L, bytes, size, &header, &header_len));
    if (declared != 0) {
        L->data = NULL; /* not read yet: only offsets are checked */
        L->data_size = declared - 8 - header_len;
    }
    CLN_TRY(st, cln_st_parse(L, header, header_len, &tok, &root));
    CLN_TRY(st, cln_st_entries(L, root, &meta));
    CLN_TRY(st, cln_st_layers_of(L, ly));
    CLN_TRY(st, cln_st_meta_keys(L, meta));
    CLN_TRY(st, cln_st_meta_desc(L, meta, ly->num, &desc));
    if (declared == 0 && (st = cln_st_build(L, ly, &desc, out)) == CLNODE_OK &&
        (st = cln_st_keep(L, meta, ly, *out)) != CLNODE_OK)
        clnode_model_destroy(out);
fail:
    json_object_put(root);
    if (tok != NULL)
        json_tokener_free(tok);
    free(ly);
    free(L);
    return st;
}

static clnode_status cln_st_load(clnode_context *ctx, const unsigned char *bytes, size_t size,
                                 const char *path, clnode_model **out)
{
    return cln_st_load_ex(ctx, bytes, size, path, 0, out);
}

clnode_status clnode_model_load_safetensors_memory(clnode_context *ctx, const void *data,
                                                   size_t size, clnode_model **out)
{
    cln_clear_error(ctx);
    if (out == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (data == NULL && size != 0)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "data is NULL but size is %zu", size);
    return cln_st_load(ctx, data, size, NULL, out);
}

/* Grows the read buffer of a model file (doubling from 64 KiB, to one byte past the limit so that
 * a too-large file is told). */
static clnode_status cln_st_grow(clnode_context *ctx, const char *path, unsigned char **buf,
                                 size_t *cap)
{
    char show[CLN_ST_SHOW + 4];
    if (*cap > CLN_ST_MAX_FILE)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "model file '%s' is larger than the limit of %zu bytes",
                        cln_st_show(show, path), (size_t)CLN_ST_MAX_FILE);
    size_t grown = *cap == 0 ? (size_t)1 << 16 : *cap * 2;
    if (grown > CLN_ST_MAX_FILE + 1 || grown < *cap)
        grown = CLN_ST_MAX_FILE + 1;
    unsigned char *p = realloc(*buf, grown);
    if (p == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate %zu bytes to read model file '%s'", grown,
                        cln_st_show(show, path));
    *buf = p;
    *cap = grown;
    return CLNODE_OK;
}

/* The 8-byte header length of a model file being read (its first len >= 8 bytes in buf), checked
 * before the rest is read: against the format's limit, and against the file's size when `sb`
 * (a regular file's) is given. */
static clnode_status cln_st_check_length(clnode_context *ctx, const char *path,
                                         const unsigned char *buf, size_t len,
                                         const struct stat *sb)
{
    char show[CLN_ST_SHOW + 4];
    const uint64_t hlen = cln_st_le64(buf);
    if (hlen == 0 || hlen > CLN_ST_MAX_HEADER) {
        clnode_model *m = NULL;
        clnode_status st = cln_st_load(ctx, buf, len, path, &m); /* refuses it, with the message */
        if (st == CLNODE_OK) {                                   /* cannot happen */
            clnode_model_destroy(&m);
            st = cln_fail(ctx, CLNODE_ERR_INTERNAL, "header length check");
        }
        return st;
    }
    if (sb && hlen > (uint64_t)sb->st_size - 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "model file '%s': header length %llu runs past the end (only %llu bytes "
                        "follow the length field)",
                        cln_st_show(show, path), (unsigned long long)hlen,
                        (unsigned long long)sb->st_size - 8);
    return CLNODE_OK;
}

clnode_status clnode_model_load_safetensors(clnode_context *ctx, const char *path,
                                            clnode_model **out)
{
    char show[CLN_ST_SHOW + 4];
    cln_clear_error(ctx);
    if (out == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (path == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "path is NULL");

    clnode_status st = CLNODE_OK;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return cln_fail(ctx, CLNODE_ERR_IO, "cannot open model file '%s': %s",
                        cln_st_show(show, path), strerror(errno));
    /* Read to the end rather than trusting a size from the file system: it works on pipes. One
     * byte past the limit tells a too-large file. The 8-byte header length is checked as soon as
     * it is read, against the file's size where the file system knows it, so that a stream
     * (/dev/zero) or a large file that is no model is refused without reading it. */
    struct stat sb;
    const int sized = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0;
    int header_checked = 0, layout_checked = !sized;
    for (;;) {
        if (len == cap)
            CLN_TRY(st, cln_st_grow(ctx, path, &buf, &cap));
        size_t want = cap - len;
        errno = 0;
        size_t got = fread(buf + len, 1, want, f);
        len += got;
        if (!header_checked && len >= 8) {
            header_checked = 1;
            CLN_TRY(st, cln_st_check_length(ctx, path, buf, len, sized ? &sb : NULL));
        }
        /* Once the header is in, a regular file's size must be the one its tensors describe:
         * a large file that is no model is refused before its data section is read. */
        if (!layout_checked && len >= 8 && len - 8 >= cln_st_le64(buf)) {
            layout_checked = 1;
            const size_t hend = 8 + (size_t)cln_st_le64(buf);
            CLN_TRY(st, cln_st_load_ex(ctx, buf, hend, path, (size_t)sb.st_size, NULL));
        }
        if (got < want) {
            if (ferror(f)) {
                int err = errno;
                st = cln_fail(ctx, CLNODE_ERR_IO, "cannot read model file '%s': %s",
                              cln_st_show(show, path), err != 0 ? strerror(err) : "read error");
                goto fail;
            }
            break; /* end of file */
        }
    }
    if (len > CLN_ST_MAX_FILE) {
        st = cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                      "model file '%s' is larger than the limit of %zu bytes",
                      cln_st_show(show, path), (size_t)CLN_ST_MAX_FILE);
        goto fail;
    }
    st = cln_st_load(ctx, buf, len, path, out);

fail:
    free(buf);
    fclose(f);
    return st;
}

/* The seed model's safetensors bytes, embedded at build time (lib/model/seed.safetensors). */
extern const unsigned char cln_seed_safetensors[];
extern const size_t cln_seed_safetensors_size;

clnode_status clnode_model_create_seed(clnode_context *ctx, clnode_model **out)
{
    return clnode_model_load_safetensors_memory(ctx, cln_seed_safetensors,
                                                cln_seed_safetensors_size, out);
}
