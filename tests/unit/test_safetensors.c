/* test_safetensors.c - the safetensors loader: valid equinox / PyTorch files round-trip, every
 * malformed file fails with its own message, truncated and corrupted files fail cleanly.
 *
 * Fixtures are generated here by a small writer (tb_build) rather than committed. Every buffer
 * handed to the loader is malloc'd to its exact size, so AddressSanitizer catches a read past it.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "clnode.h"
#include "test_util.h"

static clnode_context *g_ctx;

/* ---- a growable byte buffer ---- */

typedef struct tb_buf {
    unsigned char *p;
    size_t len, cap;
} tb_buf;

static void tb_append(tb_buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void tb_printf(tb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tb_buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    tb_append(b, tmp, (size_t)n);
}

/* ---- the fixture writer ---- */

typedef struct tb_tensor {
    const char *name;
    const char *dtype; /* "F32" or "F64" (any string is written as given) */
    size_t rank;
    size_t shape[3];
    const double *values; /* numel values; NULL: tb_value(seed, k) */
    unsigned seed;
} tb_tensor;

/* A parameter value that float32 represents exactly (so F32 files round-trip bit for bit) and
 * that is not a short binary fraction (so a sloppy conversion would show). */
static double tb_value(unsigned seed, size_t k)
{
    return (double)(float)sin(0.37 * (double)k + 1.9 * (double)seed + 0.1);
}

static size_t tb_numel(const tb_tensor *t)
{
    size_t n = 1;
    for (size_t i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

static void tb_put_le(tb_buf *b, uint64_t v, size_t bytes)
{
    unsigned char tmp[8];
    for (size_t i = 0; i < bytes; i++)
        tmp[i] = (unsigned char)(v >> (8 * i));
    tb_append(b, tmp, bytes);
}

/* Writes a safetensors file: tensors in the given order, data packed in the same order, then the
 * metadata pairs (key, value, key, value, ..., NULL; `meta` NULL: no __metadata__). The header is
 * padded with spaces to a multiple of 8 as the reference writer does. Returns a malloc'd buffer. */
static unsigned char *tb_build(const tb_tensor *ts, size_t n, const char *const *meta, size_t *size)
{
    tb_buf json = {0}, data = {0}, out = {0};
    tb_printf(&json, "{");
    int first = 1;
    if (meta != NULL) {
        tb_printf(&json, "\"__metadata__\":{");
        for (size_t i = 0; meta[i] != NULL; i += 2)
            tb_printf(&json, "%s\"%s\":\"%s\"", i ? "," : "", meta[i], meta[i + 1]);
        tb_printf(&json, "}");
        first = 0;
    }
    for (size_t t = 0; t < n; t++) {
        size_t numel = tb_numel(&ts[t]);
        int f64 = strcmp(ts[t].dtype, "F64") == 0;
        size_t begin = data.len;
        for (size_t k = 0; k < numel; k++) {
            double v = ts[t].values ? ts[t].values[k] : tb_value(ts[t].seed, k);
            if (f64) {
                uint64_t bits;
                memcpy(&bits, &v, 8);
                tb_put_le(&data, bits, 8);
            } else {
                float f = (float)v;
                uint32_t bits;
                memcpy(&bits, &f, 4);
                tb_put_le(&data, bits, 4);
            }
        }
        tb_printf(&json, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", first ? "" : ",", ts[t].name,
                  ts[t].dtype);
        for (size_t i = 0; i < ts[t].rank; i++)
            tb_printf(&json, "%s%zu", i ? "," : "", ts[t].shape[i]);
        tb_printf(&json, "],\"data_offsets\":[%zu,%zu]}", begin, data.len);
        first = 0;
    }
    tb_printf(&json, "}");
    while (json.len % 8 != 0)
        tb_printf(&json, " ");
    tb_put_le(&out, json.len, 8);
    tb_append(&out, json.p, json.len);
    if (data.len)
        tb_append(&out, data.p, data.len);
    free(json.p);
    free(data.p);
    *size = out.len;
    return out.p;
}

/* A file from a literal header and `data_len` zero bytes of data (header length = strlen). */
static unsigned char *tb_raw(const char *json, size_t data_len, size_t *size)
{
    tb_buf out = {0};
    size_t jl = strlen(json);
    tb_put_le(&out, jl, 8);
    tb_append(&out, json, jl);
    for (size_t i = 0; i < data_len; i++)
        tb_append(&out, "", 1);
    *size = out.len;
    return out.p;
}

/* ---- checks ---- */

static clnode_status load_mem(const unsigned char *bytes, size_t size, clnode_model **m)
{
    /* An exact-size copy, so that a read past the end is an ASan error. */
    unsigned char *copy = malloc(size ? size : 1);
    assert_non_null(copy);
    if (size)
        memcpy(copy, bytes, size);
    clnode_status st = clnode_model_load_safetensors_memory(g_ctx, copy, size, m);
    free(copy);
    return st;
}

static void expect_fail_at(const unsigned char *bytes, size_t size, clnode_status want,
                           const char *needle, int line)
{
    clnode_model *m = NULL;
    clnode_status st = load_mem(bytes, size, &m);
    const char *msg = clnode_context_last_error(g_ctx);
    if (st != want || strstr(msg, needle) == NULL) {
        print_error("line %d: got %s \"%s\"\n        want %s with \"%s\"\n", line,
                    clnode_status_name(st), msg, clnode_status_name(want), needle);
        clnode_model_destroy(&m);
        fail();
    }
    assert_null(m);
}
#define expect_fail(bytes, size, want, needle) expect_fail_at(bytes, size, want, needle, __LINE__)

/* Checks a raw-header case and frees it. */
static void raw_case_at(const char *json, size_t data_len, clnode_status want, const char *needle,
                        int line)
{
    size_t size;
    unsigned char *b = tb_raw(json, data_len, &size);
    expect_fail_at(b, size, want, needle, line);
    free(b);
}
#define raw_case(json, data_len, want, needle) raw_case_at(json, data_len, want, needle, __LINE__)

/* Checks a built case and frees it. */
static void built_case_at(const tb_tensor *ts, size_t n, const char *const *meta,
                          clnode_status want, const char *needle, int line)
{
    size_t size;
    unsigned char *b = tb_build(ts, n, meta, &size);
    expect_fail_at(b, size, want, needle, line);
    free(b);
}
#define built_case(ts, n, meta, want, needle) built_case_at(ts, n, meta, want, needle, __LINE__)

/* Asserts that layer `i` of `m` holds exactly the values of `w` and `b` (b NULL: no bias). */
static void check_layer(const clnode_model *m, size_t i, const tb_tensor *w, const tb_tensor *b)
{
    assert_int_equal(clnode_model_layer_out(m, i), w->shape[0]);
    assert_int_equal(clnode_model_layer_in(m, i), w->shape[1]);
    const double *wv = clnode_model_weight(m, i);
    assert_non_null(wv);
    for (size_t k = 0; k < tb_numel(w); k++) {
        double want = w->values ? w->values[k] : tb_value(w->seed, k);
        if (wv[k] != want) {
            print_error("layer %zu weight[%zu] = %.17g, want %.17g\n", i, k, wv[k], want);
            fail();
        }
    }
    const double *bv = clnode_model_bias(m, i);
    if (b == NULL) {
        assert_null(bv);
        return;
    }
    assert_non_null(bv);
    for (size_t k = 0; k < tb_numel(b); k++) {
        double want = b->values ? b->values[k] : tb_value(b->seed, k);
        if (bv[k] != want) {
            print_error("layer %zu bias[%zu] = %.17g, want %.17g\n", i, k, bv[k], want);
            fail();
        }
    }
}

/* Writes bytes to a new temporary file; returns its malloc'd path. */
static char *write_temp(const unsigned char *bytes, size_t size)
{
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    size_t n = strlen(dir) + 32;
    char *path = malloc(n);
    assert_non_null(path);
    snprintf(path, n, "%s/clnode-st-XXXXXX", dir);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* ---- fixtures ---- */

/* An equinox MLP 3 -> 4 -> 5 -> 3 (tensors listed out of layer order on purpose). */
static const tb_tensor eqx3[] = {
    {"layers.1.weight", "F32", 2, {5, 4, 0}, NULL, 3},
    {"layers.0.weight", "F32", 2, {4, 3, 0}, NULL, 1},
    {"layers.0.bias", "F32", 1, {4, 0, 0}, NULL, 2},
    {"layers.1.bias", "F32", 1, {5, 0, 0}, NULL, 4},
    {"layers.2.weight", "F32", 2, {3, 5, 0}, NULL, 5},
    {"layers.2.bias", "F32", 1, {3, 0, 0}, NULL, 6},
};
static const char *const eqx3_meta[] = {
    "activation", "tanh", "final_activation", "softplus", "format", "pt", NULL};

static void check_eqx3(const clnode_model *m)
{
    assert_int_equal(clnode_model_num_layers(m), 3);
    assert_int_equal(clnode_model_dim(m), 3);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_TANH);
    assert_int_equal(clnode_model_final_activation(m), CLNODE_ACT_SOFTPLUS);
    assert_int_equal(clnode_model_time_input(m), 0);
    check_layer(m, 0, &eqx3[1], &eqx3[2]);
    check_layer(m, 1, &eqx3[0], &eqx3[3]);
    check_layer(m, 2, &eqx3[4], &eqx3[5]);
    assert_int_equal(clnode_model_layer_in(m, 3), 0);
}

/* A minimal valid file body: one 1x1 layer, identity. */
#define W00 "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}"

/* ---- valid files ---- */

static void test_equinox_memory(void **state)
{
    (void)state;
    size_t size;
    unsigned char *b = tb_build(eqx3, 6, eqx3_meta, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_string_equal(clnode_context_last_error(g_ctx), "");
    check_eqx3(m);
    clnode_model_destroy(&m);
    assert_null(m);
    free(b);
}

static void test_equinox_file(void **state)
{
    (void)state;
    size_t size;
    unsigned char *b = tb_build(eqx3, 6, eqx3_meta, &size);
    char *path = write_temp(b, size);
    clnode_model *m = NULL;
    clnode_status st = clnode_model_load_safetensors(g_ctx, path, &m);
    remove(path);
    free(path);
    free(b);
    assert_int_equal(st, CLNODE_OK);
    check_eqx3(m);
    clnode_model_destroy(&m);
}

static void test_f64(void **state)
{
    (void)state;
    /* Values float32 cannot hold, so an F32 detour would show. */
    static const double w0[] = {0.1, -1.0 / 3.0, 1e-300, 2.5, 7e300, -0.0};
    static const double b0[] = {1.0 / 7.0, -2.0 / 9.0};
    static const double w1[] = {0.7, -0.2, 0.3, 0.9, 1e-17, 3.0};
    static const tb_tensor ts[] = {
        {"layers.0.weight", "F64", 2, {2, 3, 0}, w0, 0},
        {"layers.0.bias", "F64", 1, {2, 0, 0}, b0, 0},
        {"layers.1.weight", "F64", 2, {3, 2, 0}, w1, 0},
    };
    static const char *const meta[] = {"activation", "gelu", NULL};
    size_t size;
    unsigned char *b = tb_build(ts, 3, meta, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 2);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_GELU);
    assert_int_equal(clnode_model_final_activation(m), CLNODE_ACT_IDENTITY);
    check_layer(m, 0, &ts[0], &ts[1]);
    check_layer(m, 1, &ts[2], NULL);
    assert_true(signbit(clnode_model_weight(m, 0)[5]));
    clnode_model_destroy(&m);
    free(b);
}

static void test_mixed_dtypes(void **state)
{
    (void)state;
    static const tb_tensor ts[] = {
        {"layers.0.weight", "F64", 2, {2, 2, 0}, NULL, 1},
        {"layers.0.bias", "F32", 1, {2, 0, 0}, NULL, 2},
    };
    size_t size;
    unsigned char *b = tb_build(ts, 2, NULL, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    check_layer(m, 0, &ts[0], &ts[1]);
    clnode_model_destroy(&m);
    free(b);
}

static void test_torch_gaps(void **state)
{
    (void)state;
    /* nn.Sequential(Linear, Softplus, Linear, Softplus, Linear): indices 0, 2, 4, written with 4
     * before 2 in both the header and the data, so only the numeric index can give the order. */
    static const tb_tensor ts[] = {
        {"4.bias", "F32", 1, {2, 0, 0}, NULL, 15},   {"0.weight", "F32", 2, {6, 2, 0}, NULL, 10},
        {"4.weight", "F32", 2, {2, 7, 0}, NULL, 14}, {"2.weight", "F32", 2, {7, 6, 0}, NULL, 12},
        {"0.bias", "F32", 1, {6, 0, 0}, NULL, 11},   {"2.bias", "F32", 1, {7, 0, 0}, NULL, 13},
    };
    static const char *const meta[] = {"format", "pt", "activation", "softplus", NULL};
    size_t size;
    unsigned char *b = tb_build(ts, 6, meta, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 3);
    assert_int_equal(clnode_model_dim(m), 2);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_SOFTPLUS);
    check_layer(m, 0, &ts[1], &ts[4]);
    check_layer(m, 1, &ts[3], &ts[5]);
    check_layer(m, 2, &ts[2], &ts[0]);
    clnode_model_destroy(&m);
    free(b);
}

static void test_time_input(void **state)
{
    (void)state;
    static const tb_tensor ts[] = {
        {"layers.0.weight", "F32", 2, {5, 4, 0}, NULL, 1},
        {"layers.0.bias", "F32", 1, {5, 0, 0}, NULL, 2},
        {"layers.1.weight", "F32", 2, {3, 5, 0}, NULL, 3},
        {"layers.1.bias", "F32", 1, {3, 0, 0}, NULL, 4},
    };
    static const char *const meta[] = {"activation", "relu", "time_input", "true", NULL};
    size_t size;
    unsigned char *b = tb_build(ts, 4, meta, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_time_input(m), 1);
    assert_int_equal(clnode_model_dim(m), 3);
    assert_int_equal(clnode_model_layer_in(m, 0), 4);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_RELU);
    clnode_model_destroy(&m);
    free(b);

    /* "false" is accepted too. */
    static const char *const meta_false[] = {"time_input", "false", NULL};
    static const tb_tensor one[] = {{"0.weight", "F32", 2, {2, 2, 0}, NULL, 1}};
    b = tb_build(one, 1, meta_false, &size);
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_time_input(m), 0);
    clnode_model_destroy(&m);
    free(b);
}

static void test_single_layer_defaults(void **state)
{
    (void)state;
    /* One layer without metadata: identity activations, no bias. A linear ODE. */
    size_t size;
    unsigned char *b = tb_raw("{" W00 "}", 4, &size);
    b[size - 1] = 0x3f; /* the weight's bytes 00 00 00 3f: 0.5f in little-endian order */
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 1);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_IDENTITY);
    assert_int_equal(clnode_model_final_activation(m), CLNODE_ACT_IDENTITY);
    assert_null(clnode_model_bias(m, 0));
    assert_true(clnode_model_weight(m, 0)[0] == 0.5);
    clnode_model_destroy(&m);
    free(b);

    /* Whitespace around the object (writers pad to 8 bytes) and an empty metadata object. */
    b = tb_raw("  {\"__metadata__\":{}," W00 "}   \n\t", 4, &size);
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    clnode_model_destroy(&m);
    free(b);
}

/* ---- malformed files ---- */

static void test_bad_framing(void **state)
{
    (void)state;
    static const unsigned char five[5] = {1, 0, 0, 0, 0};
    expect_fail(five, 5, CLNODE_ERR_BAD_MODEL, "shorter than the 8-byte header length");
    expect_fail(five, 0, CLNODE_ERR_BAD_MODEL, "only 0 bytes");

    unsigned char zero_len[12] = {0, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    expect_fail(zero_len, 12, CLNODE_ERR_BAD_MODEL, "header length is 0");

    size_t size;
    unsigned char *b = tb_raw("{" W00 "}", 4, &size);
    /* 100000001 = 0x05F5E101 */
    unsigned char saved[8];
    memcpy(saved, b, 8);
    memcpy(b, (const unsigned char[8]){0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0}, 8);
    expect_fail(b, size, CLNODE_ERR_BAD_MODEL, "header length 100000001 exceeds the limit");
    memcpy(b, (const unsigned char[8]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8);
    expect_fail(b, size, CLNODE_ERR_BAD_MODEL, "exceeds the limit");
    memcpy(b, saved, 8);
    b[0] = (unsigned char)(b[0] + 5); /* 1 byte more than the header and data together */
    expect_fail(b, size, CLNODE_ERR_BAD_MODEL, "runs past the end");
    free(b);

    assert_int_equal(clnode_model_load_safetensors_memory(g_ctx, NULL, 16, &(clnode_model *){0}),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_model_load_safetensors_memory(g_ctx, five, 5, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
}

static void test_bad_json(void **state)
{
    (void)state;
    size_t size;
    /* A raw NUL inside the header (json-c would otherwise stop reading there). */
    unsigned char *b = tb_raw("{" W00 "}  ", 4, &size);
    b[8 + strlen("{" W00 "}")] = '\0';
    char needle[64];
    snprintf(needle, sizeof needle, "NUL byte at byte %zu", strlen("{" W00 "}"));
    expect_fail(b, size, CLNODE_ERR_BAD_MODEL, needle);
    free(b);

    raw_case("{\"layers.0.weight\\u0000x\":{\"dtype\":\"F32\",\"shape\":[1,1],"
             "\"data_offsets\":[0,4]}}",
             4, CLNODE_ERR_BAD_MODEL, "escaped NUL character");
    raw_case("{" W00 ",}", 4, CLNODE_ERR_BAD_MODEL, "JSON parse error at byte");
    raw_case("{" W00 "} x", 4, CLNODE_ERR_BAD_MODEL, "JSON parse error");
    raw_case("{\"layers.0.weight\":{\"dtype\":", 4, CLNODE_ERR_BAD_MODEL,
             "JSON header is incomplete");
    raw_case("[1, 2]", 0, CLNODE_ERR_BAD_MODEL, "JSON header is array, not an object");
    raw_case("\"x\" ", 0, CLNODE_ERR_BAD_MODEL, "JSON header is string, not an object");
    raw_case("{" W00 "," W00 "}", 4, CLNODE_ERR_BAD_MODEL, "duplicate keys");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1,1],"
             "\"data_offsets\":[0,4]}}",
             4, CLNODE_ERR_BAD_MODEL, "duplicate keys");
    raw_case("{'layers.0.weight':{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", 4,
             CLNODE_ERR_BAD_MODEL, "single-quoted string");
    raw_case("{\"layers.0.weight\xff\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}",
             4, CLNODE_ERR_BAD_MODEL, "utf-8");
    raw_case("{\"a\":[[[[[[[[[[1]]]]]]]]]]}", 0, CLNODE_ERR_BAD_MODEL, "nesting too deep");
    raw_case("{" W00 " /* comment */}", 4, CLNODE_ERR_BAD_MODEL, "JSON parse error");
}

static void test_bad_entries(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    raw_case("{\"layers.0.weight\":[1,2]}", 4, B,
             "entry of tensor 'layers.0.weight' is array, not an object");
    raw_case("{\"layers.0.weight\":{\"shape\":[1,1],\"data_offsets\":[0,4]}}", 4, B,
             "tensor 'layers.0.weight' has no \"dtype\"");
    raw_case("{\"layers.0.weight\":{\"dtype\":32,\"shape\":[1,1],\"data_offsets\":[0,4]}}", 4, B,
             "\"dtype\" of tensor 'layers.0.weight' is int, not a string");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F16\",\"shape\":[1,1],\"data_offsets\":[0,2]}}", 2,
             B, "tensor 'layers.0.weight' has dtype F16; only F32 and F64 are supported");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"BF16\",\"shape\":[1,1],\"data_offsets\":[0,2]}}", 2,
             B, "tensor 'layers.0.weight' has dtype BF16; only F32 and F64");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"I64\",\"shape\":[1,1],\"data_offsets\":[0,8]}}", 8,
             B, "has dtype I64; only F32");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"f32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", 4,
             B, "tensor 'layers.0.weight' has unknown dtype 'f32'");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, B,
             "tensor 'layers.0.weight' has no \"shape\"");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, B,
             "\"shape\" of tensor 'layers.0.weight' is object, not an array");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,-1],\"data_offsets\":[0,4]}}", 4,
             B, "shape[1] of tensor 'layers.0.weight' is negative (-1)");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1.0,1],\"data_offsets\":[0,4]}}",
             4, B, "shape[0] of tensor 'layers.0.weight' is double, not an integer");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,\"1\"],\"data_offsets\":[0,4]}}",
             4, B, "shape[1] of tensor 'layers.0.weight' is string, not an integer");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],"
             "\"data_offsets\":[0,4]}}",
             4, B, "the product of its dimensions overflows");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
             "\"data_offsets\":[0,8]}}",
             8, B, "overflow the byte count");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1]}}", 4, B,
             "tensor 'layers.0.weight' has no \"data_offsets\"");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":\"0-4\"}}",
             4, B, "\"data_offsets\" of tensor 'layers.0.weight' is string, not an array");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[4]}}", 4, B,
             "has 1 entries, expected 2");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,true]}}",
             4, B, "data_offsets[1] of tensor 'layers.0.weight' is boolean, not an integer");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[-4,0]}}", 4,
             B, "data_offsets[0] of tensor 'layers.0.weight' is negative (-4)");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[4,0]}}", 4,
             B, "are reversed (begin 4 > end 0)");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", 3,
             B, "ends at byte 4, beyond the data section of 3 bytes");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],"
             "\"data_offsets\":[0,18446744073709551615]}}",
             4, B, "beyond the data section");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,8]}}", 8,
             B, "spans 8 bytes in data_offsets but its 1 elements of F32 need 4");
}

static void test_bad_layout(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    raw_case("{" W00 ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
             6, B,
             "tensors 'layers.0.weight' (bytes 0..4) and 'layers.0.bias' (bytes 2..6) overlap");
    raw_case("{" W00 ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             4, B, "overlap in the data section");
    raw_case("{" W00
             ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12, B, "hole in the data section: bytes 4..8 belong to no tensor");
    raw_case("{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[4,8]}}", 8,
             B, "hole in the data section: bytes 0..4");
    raw_case("{" W00 "}", 6, B, "2 unused bytes at the end of the data section");
    raw_case("{\"__metadata__\":{\"activation\":\"tanh\"}}", 0, B, "no tensors");
    raw_case("{}", 0, B, "no tensors");
}

static void test_bad_names(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    static const char *const fmt[] = {
        "encoder.weight",    "layers.0.kernel", "layers.01.weight", "layers.-1.weight",
        "layers.0.weight.x", "0.Weight",        "model.0.weight",   "1234567890.weight",
        "layers..weight",    " 0.weight",
    };
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        char json[256], needle[64];
        snprintf(json, sizeof json,
                 "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", fmt[i]);
        snprintf(needle, sizeof needle, "unexpected tensor '%s'", fmt[i]);
        raw_case(json, 4, B, needle);
    }
    /* A long name is cut short in the message. */
    {
        char name[301], json[512], needle[128];
        memset(name, 'x', 300);
        name[300] = '\0';
        snprintf(json, sizeof json,
                 "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", name);
        snprintf(needle, sizeof needle, "unexpected tensor '%.96s...'", name);
        raw_case(json, 4, B, needle);
    }
    /* A control character in a name is not copied into the message. */
    raw_case("{\"0.weight\\n\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}", 4, B,
             "unexpected tensor '0.weight?'");
    /* Mixed schemes. */
    raw_case("{" W00 ",\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, B,
             "mixed naming schemes: tensor '0.bias' uses torch.nn.Sequential");
    /* A bias whose layer has no weight. */
    raw_case("{" W00 ",\"layers.1.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8, B, "tensor 'layers.1.bias' is the bias of layer index 1, which has no weight");
}

static void test_bad_shapes(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    static const char *const act[] = {"activation", "tanh", NULL};
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 1, {4, 0, 0}, NULL, 1}};
        built_case(ts, 1, NULL, B, "weight 'layers.0.weight' has shape [4] of 1 dimensions");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 0, {0, 0, 0}, NULL, 1}};
        built_case(ts, 1, NULL, B, "weight 'layers.0.weight' has shape [] of 0 dimensions");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 3, {2, 2, 1}, NULL, 1}};
        built_case(ts, 1, NULL, B, "shape [2, 2, ...] of 3 dimensions, expected 2 (out x in)");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {0, 3, 0}, NULL, 1}};
        built_case(ts, 1, NULL, B, "weight 'layers.0.weight' has an empty shape [0, 3]");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {2, 2, 0}, NULL, 1},
                                       {"layers.0.bias", "F32", 2, {1, 2, 0}, NULL, 2}};
        built_case(ts, 2, NULL, B,
                   "bias 'layers.0.bias' has shape [1, 2] of 2 dimensions, expected 1");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {2, 2, 0}, NULL, 1},
                                       {"layers.0.bias", "F32", 1, {3, 0, 0}, NULL, 2}};
        built_case(ts, 2, NULL, B,
                   "bias 'layers.0.bias' has 3 entries but weight 'layers.0.weight' has 2 rows");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {4, 2, 0}, NULL, 1},
                                       {"layers.1.weight", "F32", 2, {2, 5, 0}, NULL, 2}};
        built_case(ts, 2, act, B,
                   "layers do not chain: weight 'layers.1.weight' (shape [2, 5]) takes 5 inputs "
                   "but the previous layer 'layers.0.weight' gives 4 outputs");
    }
    {
        /* The torch gap case must chain across the gap too. */
        static const tb_tensor ts[] = {{"0.weight", "F32", 2, {4, 2, 0}, NULL, 1},
                                       {"3.weight", "F32", 2, {2, 3, 0}, NULL, 2}};
        built_case(ts, 2, act, B, "weight '3.weight' (shape [2, 3]) takes 3 inputs");
    }
    {
        /* Output 3, input 2: not a vector field. */
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 2, 0}, NULL, 1}};
        built_case(ts, 1, NULL, B,
                   "do not make a vector field (input width 2, output width 3, "
                   "time_input false)");
    }
    {
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 3, 0}, NULL, 1}};
        static const char *const ti[] = {"time_input", "true", NULL};
        built_case(ts, 1, ti, B, "(input width 3, output width 3, time_input true)");
    }
    {
        /* conditioning inputs: the first layer's width must make room for them */
        static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 5, 0}, NULL, 1}};
        static const char *const k1[] = {"inputs", "1", NULL};
        built_case(ts, 1, k1, B,
                   "(input width 5, output width 3, time_input false, inputs 1): the model maps 5 "
                   "inputs to 3 outputs; a vector field of dimension 3 needs 4 inputs (state, 1 "
                   "conditioning inputs)");
        static const char *const k1t[] = {"inputs", "2", "time_input", "true", NULL};
        built_case(ts, 1, k1t, B, "(input width 5, output width 3, time_input true, inputs 2)");
        static const tb_tensor t3[] = {{"layers.0.weight", "F32", 2, {3, 3, 0}, NULL, 1}};
        built_case(t3, 1, k1, B, "needs 4 inputs (state, 1 conditioning inputs)");
    }
}

/* "inputs" = k: the model takes [y, c] (or [y, t, c]) with k conditioning inputs. */
static void test_inputs_metadata(void **state)
{
    (void)state;
    static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 5, 0}, NULL, 1}};
    static const char *const k2[] = {"inputs", "2", NULL};
    static const char *const k1t[] = {"inputs", "1", "time_input", "true", NULL};
    static const char *const k0[] = {"inputs", "0", NULL};
    const char *const *ok[] = {k2, k1t};
    const size_t want[] = {2, 1};
    for (int i = 0; i < 2; ++i) {
        size_t size;
        unsigned char *b = tb_build(ts, 1, ok[i], &size);
        clnode_model *m = NULL;
        assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
        assert_int_equal(clnode_model_num_inputs(m), want[i]);
        assert_int_equal(clnode_model_time_input(m), i == 1);
        clnode_model_destroy(&m);
        free(b);
    }
    static const tb_tensor sq[] = {{"layers.0.weight", "F32", 2, {3, 3, 0}, NULL, 1}};
    size_t size;
    unsigned char *b = tb_build(sq, 1, k0, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_inputs(m), 0);
    clnode_model_destroy(&m);
    free(b);
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    static const char *const bad[] = {"", "-1", "+2", " 2", "2 ", "2x", "0x2", "1e1", "99999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        const char *meta[] = {"inputs", bad[i], NULL};
        built_case(ts, 1, meta, B, "__metadata__ \"inputs\" is '");
    }
}

static void test_too_many_layers(void **state)
{
    (void)state;
    /* 65 layers of 1x1 (no biases): one over the limit. */
    tb_tensor ts[130];
    char names[130][24];
    for (size_t i = 0; i < 130; i++) {
        snprintf(names[i], sizeof names[i], "layers.%zu.%s", i / 2, i % 2 ? "bias" : "weight");
        ts[i] = (tb_tensor){names[i], "F32", i % 2 ? 1 : 2, {1, 1, 0}, NULL, (unsigned)i};
    }
    tb_tensor w[65];
    for (size_t i = 0; i < 65; i++)
        w[i] = ts[2 * i];
    static const char *const act[] = {"activation", "relu", NULL};
    built_case(w, 65, act, CLNODE_ERR_BAD_MODEL, "more than the limit of 64 layers");
    /* 64 layers load. */
    size_t size;
    unsigned char *b = tb_build(w, 64, act, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 64);
    clnode_model_destroy(&m);
    free(b);
    /* 65 layers with biases: 130 tensors, more than 64 layers with biases and an output scale
     * have, stopped while reading the header. */
    built_case(ts, 130, act, CLNODE_ERR_BAD_MODEL, "more than 129 tensors");
}

static void test_bad_metadata(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    static const tb_tensor two[] = {{"layers.0.weight", "F32", 2, {4, 2, 0}, NULL, 1},
                                    {"layers.1.weight", "F32", 2, {2, 4, 0}, NULL, 2}};
    built_case(two, 2, NULL, B, "no \"activation\" in __metadata__; a model of 2 layers needs one");
    static const char *const fmt_only[] = {"format", "pt", NULL};
    built_case(two, 2, fmt_only, B, "no \"activation\" in __metadata__");
    static const char *const swish[] = {"activation", "swish", NULL};
    built_case(two, 2, swish, B, "__metadata__ \"activation\" is 'swish', not one of");
    static const char *const fin[] = {"activation", "tanh", "final_activation", "Tanh", NULL};
    built_case(two, 2, fin, B, "__metadata__ \"final_activation\" is 'Tanh'");
    static const char *const ti[] = {"activation", "tanh", "time_input", "yes", NULL};
    built_case(two, 2, ti, B, "\"time_input\" is 'yes', expected 'true' or 'false'");
    raw_case("{\"__metadata__\":\"tanh\"," W00 "}", 4, B, "__metadata__ is string, not an object");
    raw_case("{\"__metadata__\":{\"format\":\"pt\",\"time_input\":true}," W00 "}", 4, B,
             "__metadata__ value of 'time_input' is boolean, not a string");
}

/* A metadata key that resembles a known one (case, blanks, '-', an edit or two) was ignored and
 * its default used: "final_activaton" gave an identity final activation. Refused, naming both. */
static void test_misspelt_metadata(void **state)
{
    (void)state;
    const clnode_status B = CLNODE_ERR_BAD_MODEL;
    static const tb_tensor two[] = {{"layers.0.weight", "F32", 2, {2, 2, 0}, NULL, 1},
                                    {"layers.1.weight", "F32", 2, {2, 2, 0}, NULL, 2}};
    static const struct {
        const char *key, *known;
    } cases[] = {
        {"final_activaton", "final_activation"},
        {"Final_activation", "final_activation"},
        {"final-activation", "final_activation"},
        {"final activation", "final_activation"},
        {"FINAL_ACTIVATION", "final_activation"},
        {"finalactivation", "final_activation"},
        {"activation ", "activation"},
        {" activation", "activation"},
        {"Activation", "activation"},
        {"activatoin", "activation"},
        {"activations", "activation"},
        {"time-input", "time_input"},
        {"Time_Input", "time_input"},
        {"time_inputs", "time_input"},
        {"input", "inputs"},
        {"Inputs", "inputs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        /* the real key is present too where the misspelt one names "activation" */
        const char *meta[] = {"activation", "tanh", cases[i].key, "tanh", NULL};
        const char *only[] = {cases[i].key, "tanh", NULL};
        const int act = strcmp(cases[i].known, "activation") == 0;
        char want[200];
        snprintf(want, sizeof want,
                 "__metadata__ key '%s' is not one clnode reads, but resembles "
                 "\"%s\"",
                 cases[i].key, cases[i].known);
        if (act) {
            /* one layer, whose activation defaults to identity: the key alone */
            built_case(two, 1, only, B, want);
        } else {
            built_case(two, 2, meta, B, want);
        }
    }
}

/* Keys that resemble none are kept with the known ones, in the file's order, with each tensor's
 * dtype; a model built from arrays has no metadata and float64 tensors. */
static void test_metadata_kept(void **state)
{
    (void)state;
    static const tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {4, 2, 0}, NULL, 1},
                                   {"layers.0.bias", "F64", 1, {4, 0, 0}, NULL, 2},
                                   {"layers.1.weight", "F64", 2, {2, 4, 0}, NULL, 3}};
    static const char *const meta[] = {"format", "pt",       "activation", "tanh",
                                       "author", "me, 2024", "final_act",  "relu",
                                       "time",   "x",        NULL};
    size_t size;
    unsigned char *b = tb_build(ts, 3, meta, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    free(b);
    assert_int_equal(clnode_model_metadata_count(m), 5);
    for (size_t i = 0; i < 5; ++i) {
        assert_string_equal(clnode_model_metadata_key(m, i), meta[2 * i]);
        assert_string_equal(clnode_model_metadata_value(m, i), meta[2 * i + 1]);
    }
    assert_null(clnode_model_metadata_key(m, 5));
    assert_null(clnode_model_metadata_value(m, 5));
    /* the unknown "final_act" does not set the final activation */
    assert_int_equal(clnode_model_final_activation(m), CLNODE_ACT_IDENTITY);
    assert_string_equal(clnode_model_tensor_dtype(m, 0, 0), "F32");
    assert_string_equal(clnode_model_tensor_dtype(m, 0, 1), "F64");
    assert_string_equal(clnode_model_tensor_dtype(m, 1, 0), "F64");
    assert_null(clnode_model_tensor_dtype(m, 1, 1)); /* no bias */
    assert_null(clnode_model_tensor_dtype(m, 2, 0)); /* no layer 2 */
    clnode_model_destroy(&m);
    /* no __metadata__ at all: none kept */
    static const tb_tensor one[] = {{"layers.0.weight", "F32", 2, {2, 2, 0}, NULL, 1}};
    b = tb_build(one, 1, NULL, &size);
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    free(b);
    assert_int_equal(clnode_model_metadata_count(m), 0);
    assert_null(clnode_model_metadata_key(m, 0));
    clnode_model_destroy(&m);
    /* from arrays */
    const size_t sizes[2] = {2, 2};
    const double w[4] = {1, 0, 0, 1};
    const double *ws[1] = {w};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
    assert_int_equal(clnode_model_metadata_count(m), 0);
    assert_string_equal(clnode_model_tensor_dtype(m, 0, 0), "F64");
    assert_null(clnode_model_tensor_dtype(m, 0, 1));
    clnode_model_destroy(&m);
    assert_int_equal(clnode_model_metadata_count(NULL), 0);
}

static void test_nonfinite(void **state)
{
    (void)state;
    double w[9];
    for (size_t i = 0; i < 9; i++)
        w[i] = 0.25 * (double)i;
    w[5] = NAN;
    tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 3, 0}, w, 0}};
    built_case(ts, 1, NULL, CLNODE_ERR_NONFINITE_INPUT,
               "tensor 'layers.0.weight' element 5 (row 1, column 2) is NaN");
    w[5] = 1.0;
    w[8] = -INFINITY;
    ts[0].dtype = "F64";
    built_case(ts, 1, NULL, CLNODE_ERR_NONFINITE_INPUT, "element 8 (row 2, column 2) is -inf");
    static const double bias[] = {0.0, INFINITY, 1.0};
    w[8] = 0.0;
    tb_tensor tb[] = {{"0.weight", "F32", 2, {3, 3, 0}, w, 0},
                      {"0.bias", "F32", 1, {3, 0, 0}, bias, 0}};
    built_case(tb, 2, NULL, CLNODE_ERR_NONFINITE_INPUT, "tensor '0.bias' element 1 is +inf");
    /* A finite F64 beyond the float range is fine (kept in float64). */
    w[0] = 1e300;
    tb[0].dtype = "F64";
    size_t size;
    unsigned char *b = tb_build(tb, 1, NULL, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    assert_true(clnode_model_weight(m, 0)[0] == 1e300);
    clnode_model_destroy(&m);
    free(b);
}

/* ---- robustness ---- */

static void test_truncation_sweep(void **state)
{
    (void)state;
    size_t size;
    unsigned char *b = tb_build(eqx3, 6, eqx3_meta, &size);
    for (size_t n = 0; n < size; n++) {
        clnode_model *m = NULL;
        clnode_status st = load_mem(b, n, &m);
        if (st != CLNODE_ERR_BAD_MODEL || m != NULL) {
            print_error("prefix of %zu of %zu bytes: %s \"%s\"\n", n, size, clnode_status_name(st),
                        clnode_context_last_error(g_ctx));
            fail();
        }
        assert_true(strlen(clnode_context_last_error(g_ctx)) > 0);
    }
    free(b);
}

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: fixed seed, same sequence on every platform */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void test_fuzz_header(void **state)
{
    (void)state;
    static const unsigned char interesting[] = {'"', ':', ',', '{',  '}', '[',  ']',  '0',  '9',
                                                '-', '.', 'e', '\\', ' ', 0x00, 0xff, 0x80, '\''};
    size_t size;
    unsigned char *base = tb_build(eqx3, 6, eqx3_meta, &size);
    size_t header_end = 8 + (size_t)base[0] + ((size_t)base[1] << 8);
    unsigned char *b = malloc(size);
    assert_non_null(b);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int ok = 0, bad = 0, nonfinite = 0;
    for (int iter = 0; iter < 5000; iter++) {
        memcpy(b, base, size);
        int flips = 1 + (int)(rng_next(&seed) % 4);
        for (int f = 0; f < flips; f++) {
            uint64_t r = rng_next(&seed);
            /* Mostly the header (length field included); now and then the data. */
            size_t pos = (r & 15) ? (size_t)((r >> 8) % header_end) : (size_t)((r >> 8) % size);
            switch ((r >> 4) & 3) {
            case 0:
                b[pos] ^= (unsigned char)(1u << ((r >> 40) & 7));
                break;
            case 1:
                b[pos] = interesting[(r >> 40) % sizeof interesting];
                break;
            case 2:
                b[pos] = (unsigned char)(r >> 48);
                break;
            default:
                b[pos] = (unsigned char)('0' + (r >> 40) % 10);
                break;
            }
        }
        size_t n = (iter % 7 == 0) ? (size_t)(rng_next(&seed) % (size + 1)) : size;
        clnode_model *m = NULL;
        clnode_status st = load_mem(b, n, &m);
        if (st == CLNODE_OK) {
            assert_non_null(m);
            ok++;
        } else if (st == CLNODE_ERR_BAD_MODEL) {
            bad++;
        } else if (st == CLNODE_ERR_NONFINITE_INPUT) {
            nonfinite++;
        } else {
            print_error("iteration %d: %s \"%s\"\n", iter, clnode_status_name(st),
                        clnode_context_last_error(g_ctx));
            fail();
        }
        if (st != CLNODE_OK)
            assert_null(m);
        clnode_model_destroy(&m);
    }
    assert_true(bad > 0);
    print_message("fuzz: %d loaded, %d malformed, %d non-finite\n", ok, bad, nonfinite);
    free(b);
    free(base);
}

/* ---- files ---- */

static void test_io_errors(void **state)
{
    (void)state;
    clnode_model *m = (clnode_model *)&m; /* overwritten with NULL on failure */
    const char *missing = "/nonexistent-clnode-dir/model.safetensors";
    assert_int_equal(clnode_model_load_safetensors(g_ctx, missing, &m), CLNODE_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), missing));

    /* A directory opens on POSIX systems but cannot be read. */
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    clnode_status st = clnode_model_load_safetensors(g_ctx, dir, &m);
    assert_true(st == CLNODE_ERR_IO || st == CLNODE_ERR_BAD_MODEL);
    assert_null(m);

    /* A malformed file reports the path. */
    static const unsigned char junk[4] = {1, 2, 3, 4};
    char *path = write_temp(junk, sizeof junk);
    st = clnode_model_load_safetensors(g_ctx, path, &m);
    char expect[512];
    snprintf(expect, sizeof expect, "model file '%s': only 4 bytes", path);
    remove(path);
    assert_int_equal(st, CLNODE_ERR_BAD_MODEL);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), expect));
    free(path);

    assert_int_equal(clnode_model_load_safetensors(g_ctx, NULL, &m), CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_model_load_safetensors(g_ctx, missing, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
}

/* A large file whose header is a model's (3 GiB, sparse: it takes no disk) is refused from its
 * header and the file's size, before its data section is read: the process does not grow by the
 * file's size. (Read whole, it would be under the 4 GiB limit and refused only after reading.) */
static void test_large_file_refused_early(void **state)
{
    (void)state;
    size_t size;
    unsigned char *b = tb_build(eqx3, 6, eqx3_meta, &size);
    char *path = write_temp(b, size);
    free(b);
    const off_t big = (off_t)3 << 30;
    if (truncate(path, big) != 0) {
        remove(path);
        free(path);
        skip();
    }
    struct rusage before, after;
    assert_int_equal(getrusage(RUSAGE_SELF, &before), 0);
    clnode_model *m = NULL;
    clnode_status st = clnode_model_load_safetensors(g_ctx, path, &m);
    assert_int_equal(getrusage(RUSAGE_SELF, &after), 0);
    remove(path);
    free(path);
    assert_int_equal(st, CLNODE_ERR_BAD_MODEL);
    assert_null(m);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "unused bytes at the end"));
    assert_true(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB */
}

static void test_seed_file(void **state)
{
    (void)state;
#ifndef CLN_SOURCE_ROOT
    skip();
#else
    const char *path = CLN_SOURCE_ROOT "/lib/model/seed.safetensors";
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        skip();
    fclose(f);
    clnode_model *m = NULL;
    clnode_status st = clnode_model_load_safetensors(g_ctx, path, &m);
    if (st != CLNODE_OK)
        print_error("%s\n", clnode_context_last_error(g_ctx));
    assert_int_equal(st, CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 3);
    assert_int_equal(clnode_model_layer_in(m, 0), 10);
    assert_int_equal(clnode_model_layer_out(m, 0), 100);
    assert_int_equal(clnode_model_layer_out(m, 1), 100);
    assert_int_equal(clnode_model_layer_out(m, 2), 10);
    assert_int_equal(clnode_model_dim(m), 10);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_SOFTPLUS);
    assert_int_equal(clnode_model_time_input(m), 0);
    for (size_t i = 0; i < 3; i++)
        assert_non_null(clnode_model_bias(m, i));
    clnode_model_destroy(&m);
#endif
}

/* The seed model embedded in the library goes through the same loader. */
static void test_seed_embedded(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create_seed(g_ctx, &m);
    if (st != CLNODE_OK)
        print_error("%s\n", clnode_context_last_error(g_ctx));
    assert_int_equal(st, CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 3);
    assert_int_equal(clnode_model_layer_in(m, 0), 10);
    assert_int_equal(clnode_model_dim(m), 10);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_SOFTPLUS);
#ifdef CLN_SOURCE_ROOT
    clnode_model *f = NULL;
    if (clnode_model_load_safetensors(g_ctx, CLN_SOURCE_ROOT "/lib/model/seed.safetensors", &f) ==
        CLNODE_OK) {
        for (size_t i = 0; i < 3; i++) {
            size_t nw = clnode_model_layer_in(m, i) * clnode_model_layer_out(m, i);
            assert_memory_equal(clnode_model_weight(m, i), clnode_model_weight(f, i),
                                nw * sizeof(double));
            assert_memory_equal(clnode_model_bias(m, i), clnode_model_bias(f, i),
                                clnode_model_layer_out(m, i) * sizeof(double));
        }
        clnode_model_destroy(&f);
    }
#endif
    clnode_model_destroy(&m);
}

/* ---- the output scale ---- */

/* Tensor "out_scale" beside the layers, F32 and F64, shape [], [1] and [N]: the values, their
 * count and dtype through the accessors; a file without it has none. */
static void test_out_scale_load(void **state)
{
    (void)state;
    static const double s1[] = {0.8}, s3[] = {0.5, -1.0 / 3.0, 2.0};
    struct {
        const char *dtype;
        size_t rank, n;
        const double *v;
    } cases[] = {{"F32", 0, 1, s1}, {"F64", 0, 1, s1}, {"F32", 1, 1, s1},
                 {"F64", 1, 1, s1}, {"F64", 1, 3, s3}, {"F32", 1, 3, s3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        tb_tensor ts[] = {
            {"layers.0.weight", "F32", 2, {4, 3, 0}, NULL, 1},
            {"layers.0.bias", "F32", 1, {4, 0, 0}, NULL, 2},
            {"layers.1.weight", "F32", 2, {3, 4, 0}, NULL, 3},
            {"out_scale", cases[c].dtype, cases[c].rank, {cases[c].n, 0, 0}, cases[c].v, 0}};
        static const char *const meta[] = {"activation", "tanh", "final_activation", "tanh", NULL};
        size_t size;
        unsigned char *b = tb_build(ts, 4, meta, &size);
        clnode_model *m = NULL;
        assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
        check_layer(m, 0, &ts[0], &ts[1]);
        check_layer(m, 1, &ts[2], NULL);
        size_t n = 99;
        const double *v = clnode_model_out_scale(m, &n);
        assert_non_null(v);
        assert_int_equal(n, cases[c].n);
        for (size_t j = 0; j < n; ++j) /* F32: the value as float32 holds it */
            assert_true(v[j] == (strcmp(cases[c].dtype, "F32") == 0 ? (double)(float)cases[c].v[j]
                                                                    : cases[c].v[j]));
        assert_string_equal(clnode_model_out_scale_dtype(m), cases[c].dtype);
        clnode_model_destroy(&m);
        free(b);
    }
    /* none: NULL, 0 and no dtype */
    static const tb_tensor plain[] = {{"0.weight", "F64", 2, {2, 2, 0}, NULL, 1}};
    size_t size;
    unsigned char *b = tb_build(plain, 1, NULL, &size);
    clnode_model *m = NULL;
    assert_int_equal(load_mem(b, size, &m), CLNODE_OK);
    size_t n = 99;
    assert_null(clnode_model_out_scale(m, &n));
    assert_int_equal(n, 0);
    assert_null(clnode_model_out_scale(m, NULL));
    assert_null(clnode_model_out_scale_dtype(m));
    clnode_model_destroy(&m);
    free(b);
}

/* A wrong shape, dtype or value of "out_scale" is refused, naming it; so are a scale of the wrong
 * size, a non-finite one and a size without values given as arrays. */
static void test_out_scale_errors(void **state)
{
    (void)state;
    static const double nan1[] = {NAN}, inf3[] = {1.0, INFINITY, 2.0};
    tb_tensor ts[] = {{"layers.0.weight", "F32", 2, {3, 3, 0}, NULL, 1},
                      {"out_scale", "F32", 1, {2, 0, 0}, NULL, 2}};
    built_case(ts, 2, NULL, CLNODE_ERR_BAD_MODEL,
               "tensor 'out_scale' has shape [2]; the output scale is a scalar (shape [] or [1]) "
               "or one value per component of the state (shape [3])");
    ts[1].rank = 2;
    ts[1].shape[0] = 1;
    ts[1].shape[1] = 3;
    built_case(ts, 2, NULL, CLNODE_ERR_BAD_MODEL, "tensor 'out_scale' has shape [1, 3]");
    ts[1].rank = 1;
    ts[1].shape[0] = 1;
    ts[1].dtype = "I32";
    built_case(ts, 2, NULL, CLNODE_ERR_BAD_MODEL, "tensor 'out_scale' has dtype I32");
    ts[1].dtype = "F64";
    ts[1].values = nan1;
    built_case(ts, 2, NULL, CLNODE_ERR_NONFINITE_INPUT, "tensor 'out_scale' element 0 is NaN");
    ts[1].shape[0] = 3;
    ts[1].values = inf3;
    built_case(ts, 2, NULL, CLNODE_ERR_NONFINITE_INPUT, "tensor 'out_scale' element 1 is +inf");
    /* the scale alone is no model */
    built_case(&ts[1], 1, NULL, CLNODE_ERR_BAD_MODEL, "no layers beside 'out_scale'");
    /* from arrays */
    static const double W[4] = {1, 2, 3, 4}, two[2] = {1, 2}, three[3] = {1, 2, 3};
    const double *ws[1] = {W};
    size_t sizes[2] = {2, 2};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    clnode_model *m = NULL;
    d.out_scale = three;
    d.out_scale_size = 3;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "out_scale has 3 values"));
    assert_null(m);
    d.out_scale_size = 0;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_ERR_INVALID_ARGUMENT);
    d.out_scale = NULL;
    d.out_scale_size = 1;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "out_scale is NULL"));
    const double bad[2] = {1.0, NAN};
    d.out_scale = bad;
    d.out_scale_size = 2;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_ERR_NONFINITE_INPUT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "out_scale: element 1 is nan"));
    d.out_scale = two;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
    size_t n = 0;
    assert_memory_equal(clnode_model_out_scale(m, &n), two, sizeof two);
    assert_int_equal(n, 2);
    assert_string_equal(clnode_model_out_scale_dtype(m), "F64");
    clnode_model_destroy(&m);
}

/* clnode_model_eval of a scaled model is s * (the unscaled model's value), each component's
 * product rounded once; a scale of 1 gives the unscaled bits. */
static void test_eval_scaled(void **state)
{
    (void)state;
    enum {
        N = 3,
        P = 4
    };
    double w0[5 * N], b0[5], w1[N * 5], y[P * N], t[P];
    for (size_t i = 0; i < 5 * N; ++i) {
        w0[i] = tb_value(1, i);
        w1[i] = tb_value(2, i);
    }
    for (size_t i = 0; i < 5; ++i)
        b0[i] = tb_value(3, i);
    for (size_t i = 0; i < P * N; ++i)
        y[i] = tb_value(4, i);
    for (size_t p = 0; p < P; ++p)
        t[p] = 0.1 * (double)p;
    const double *ws[2] = {w0, w1}, *bs[2] = {b0, NULL};
    size_t sizes[3] = {N, 5, N};
    static const double scalar[1] = {0.8}, per[N] = {0.5, -1.0 / 3.0, 7.25}, ones[N] = {1, 1, 1};
    const double *forms[4] = {NULL, scalar, per, ones};
    const size_t counts[4] = {0, 1, N, N};
    double ref[P * N], got[P * N];
    for (int f = 0; f < 4; ++f) {
        clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
        d.activation = CLNODE_ACT_SOFTPLUS;
        d.final_activation = CLNODE_ACT_TANH;
        d.out_scale = forms[f];
        d.out_scale_size = counts[f];
        clnode_model *m = NULL;
        assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
        assert_int_equal(clnode_model_eval(g_ctx, m, P, y, t, f ? got : ref), CLNODE_OK);
        for (size_t i = 0; f && i < P * N; ++i) {
            const double s = counts[f] == 1 ? forms[f][0] : forms[f][i % N];
            if (!(got[i] == s * ref[i])) /* exact: one rounding of the product */
                fail_msg("form %d, element %zu: %.17g, s * unscaled %.17g", f, i, got[i],
                         s * ref[i]);
        }
        if (f == 3)
            assert_memory_equal(got, ref, sizeof ref);
        if (f == 1)
            assert_true(got[0] != ref[0]);
        clnode_model_destroy(&m);
    }
}

/* A model with conditioning inputs (and time): clnode_model_eval refuses it (it passes no
 * inputs), clnode_model_eval_inputs evaluates [y, t, c] through the layer; the values are sums
 * of products of short binary fractions, exact whatever the order, computed here by hand. */
static void test_eval_inputs(void **state)
{
    (void)state;
    enum {
        N = 2,
        K = 2,
        P = 3,
        IN = N + 1 + K
    };
    static const double W[N * IN] = {0.5, -1, 0.25, 2, -0.5, 1, 0.75, -2, 0.5, 1.5};
    static const double bias[N] = {0.125, -0.25}, scale[1] = {-2.0};
    const double *ws[1] = {W}, *bs[1] = {bias};
    size_t sizes[2] = {IN, N};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, bs);
    d.time_input = 1;
    d.num_inputs = K;
    d.out_scale = scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(g_ctx, &d, &m), CLNODE_OK);
    static const double y[P * N] = {1, 2, -0.5, 0.25, 3, -1}, t[P] = {0, 0.5, -2};
    static const double c[P * K] = {1, -1, 0.5, 0.5, -4, 2};
    double out[P * N];
    assert_int_equal(clnode_model_eval(g_ctx, m, P, y, t, out), CLNODE_ERR_UNSUPPORTED);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "clnode_model_eval_inputs"));
    assert_int_equal(clnode_model_eval_inputs(g_ctx, m, P, y, t, NULL, out),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "c is NULL"));
    assert_int_equal(clnode_model_eval_inputs(g_ctx, m, P, y, t, c, out), CLNODE_OK);
    for (size_t p = 0; p < P; ++p) {
        const double in[IN] = {y[p * N], y[p * N + 1], t[p], c[p * K], c[p * K + 1]};
        for (size_t j = 0; j < N; ++j) {
            double want = bias[j];
            for (size_t k = 0; k < IN; ++k)
                want += W[j * IN + k] * in[k];
            assert_true(out[p * N + j] == scale[0] * want);
        }
    }
    clnode_model_destroy(&m);
    /* a model without inputs: the same values from both functions */
    static const double W2[4] = {0.5, -1, 2, 0.25};
    const double *ws2[1] = {W2};
    size_t sizes2[2] = {2, 2};
    clnode_model_desc d2 = test_mlp_desc(1, sizes2, ws2, NULL);
    assert_int_equal(clnode_model_create(g_ctx, &d2, &m), CLNODE_OK);
    double a[P * N], b[P * N];
    assert_int_equal(clnode_model_eval(g_ctx, m, P, y, NULL, a), CLNODE_OK);
    assert_int_equal(clnode_model_eval_inputs(g_ctx, m, P, y, NULL, NULL, b), CLNODE_OK);
    assert_memory_equal(a, b, sizeof a);
    clnode_model_destroy(&m);
}

static int setup(void **state)
{
    (void)state;
    return clnode_context_create(NULL, &g_ctx) == CLNODE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    clnode_context_destroy(&g_ctx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equinox_memory),
        cmocka_unit_test(test_equinox_file),
        cmocka_unit_test(test_f64),
        cmocka_unit_test(test_mixed_dtypes),
        cmocka_unit_test(test_torch_gaps),
        cmocka_unit_test(test_time_input),
        cmocka_unit_test(test_single_layer_defaults),
        cmocka_unit_test(test_bad_framing),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_bad_layout),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_too_many_layers),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_misspelt_metadata),
        cmocka_unit_test(test_metadata_kept),
        cmocka_unit_test(test_inputs_metadata),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_truncation_sweep),
        cmocka_unit_test(test_fuzz_header),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_large_file_refused_early),
        cmocka_unit_test(test_seed_file),
        cmocka_unit_test(test_seed_embedded),
        cmocka_unit_test(test_out_scale_load),
        cmocka_unit_test(test_out_scale_errors),
        cmocka_unit_test(test_eval_scaled),
        cmocka_unit_test(test_eval_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
